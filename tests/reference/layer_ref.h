/*
 * Double-precision plain-C reference for the attention layer and its residual
 * stack (include/prefixcl/layer.h), self-contained (its own double attention
 * on the BNHD layouts, so finite differences through it are exact to double
 * rounding):
 *   Q = X Wq^T + bq, K = X Wk^T + bk, V = X Wv^T + bv
 *   O = prefix gain attention (docs/design.md "The math"; M = N, optional
 *       per-item lengths, see ref_layer_dims.lens)
 *   Y = O Wo^T + bo (+ X when residual)
 * All arrays are double, row-major: X, Y [B*N, C]; weights in PyTorch's
 * [out, in] layout; prefixes [Hkv, P, D]; gains [H]. Outputs overwritten.
 */
#ifndef PFX_TEST_LAYER_REF_H
#define PFX_TEST_LAYER_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/attention.h"

typedef struct ref_layer_dims {
    size_t batch, tokens, model_dim, heads, kv_heads, head_dim, prefix_len;
    bool causal, residual;
    pfx_gain_mode gain_mode;
    double scale; /* 0: 1/sqrt(D) */
    /* [B] valid tokens per item (right padding), NULL: all N. Input key t is
     * visible iff t < lens[b]; query rows i >= lens[b] give O = 0 and no
     * gradient (the attention contract's kv_len = q_len = lens[b]). */
    const int32_t *lens;
} ref_layer_dims;

/* Weights of one layer; the biases may be NULL (no bias). */
typedef struct ref_layer_weights {
    const double *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
} ref_layer_weights;

typedef struct ref_layer_prefix {
    const double *pk, *pv; /* [Hkv, P, D] (NULL when P == 0) */
    const double *gain;    /* [H] (NULL when the gain is off) */
    double ramp;
} ref_layer_prefix;

/* Gradients (any may be NULL). */
typedef struct ref_layer_grads {
    double *dx, *dpk, *dpv, *dgain;
    double *dwq, *dwk, *dwv, *dwo, *dbq, *dbk, *dbv, *dbo;
} ref_layer_grads;

void ref_layer_forward(const ref_layer_dims *d, const ref_layer_weights *w,
                       const ref_layer_prefix *p, const double *x, double *y);

/* Gradients of sum(dy * Y). */
void ref_layer_backward(const ref_layer_dims *d, const ref_layer_weights *w,
                        const ref_layer_prefix *p, const double *x, const double *dy,
                        const ref_layer_grads *g);

/* A stack of `layers` layers: X_{l+1} = layer_l(X_l) (residual from dims). */
void ref_stack_forward(const ref_layer_dims *d, size_t layers, const ref_layer_weights *w,
                       const ref_layer_prefix *p, const double *x, double *y);
/* g[l] receives layer l's gradients (its dx ignored); dx the input's. */
void ref_stack_backward(const ref_layer_dims *d, size_t layers, const ref_layer_weights *w,
                        const ref_layer_prefix *p, const double *x, const double *dy,
                        const ref_layer_grads *g, double *dx);

/* The double attention on its own (BNHD): O [B*N, H*D], and its backward
 * (gradients of sum(dO * O)), exposed so that the test can hold it to
 * ref_attention_forward/backward. */
void ref_layer_attention(const ref_layer_dims *d, const ref_layer_prefix *p, const double *q,
                         const double *k, const double *v, double *o);
void ref_layer_attention_backward(const ref_layer_dims *d, const ref_layer_prefix *p,
                                  const double *q, const double *k, const double *v,
                                  const double *d_o, double *dq, double *dk, double *dv,
                                  double *dpk, double *dpv, double *dgain);

#endif
