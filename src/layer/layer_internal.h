/* The attention layer's state, shared by the layer (attention_layer.c), the
 * residual stack (layer_stack.c) and the MSE loss (mse_loss.c). Not installed. */
#ifndef PFX_LAYER_INTERNAL_H
#define PFX_LAYER_INTERNAL_H

#include "internal.h"
#include "work_groups.h"

/* cl/layer.cl (the MSE loss): its work-group size only (ops/work_groups.h), as ops/registry.c
 * lists it. */
#define LAYER_PROGRAM "layer"
#define LAYER_OPTIONS PFX_LAYER_OPTIONS

/* Workspace tensors, each max_batch * max_tokens * width float32 (LSE:
 * max_batch * H * max_tokens), viewed at each call's shape. */
enum { WS_Q, WS_K, WS_V, WS_O, WS_LSE, WS_DO, WS_DQ, WS_DK, WS_DV, WS_COUNT };

struct pfx_layer {
    pfx_runtime *rt;
    pfx_layer_params p;
    size_t qdim, kvdim; /* H*D, Hkv*D */
    pfx_tensor *w[PFX_LAYER_WEIGHT_COUNT];
    pfx_tensor *ws[WS_COUNT];
    /* the most recent forward */
    bool have_forward;
    size_t fwd_b, fwd_n;
    cl_mem fwd_x;
};

#endif
