/* Internal state of the serving objects (generate.h): the adapter bank and
 * the KV cache, read by the serving step (serve_step.c). Not installed. */
#ifndef PFX_SERVE_INTERNAL_H
#define PFX_SERVE_INTERNAL_H

#include "model_internal.h"
#include "prefixcl/generate.h"

struct pfx_adapter_bank {
    pfx_model *model;
    size_t capacity, count;
    size_t P;                   /* 0 until the first adapter */
    pfx_tensor **keys;          /* [L] of [capacity, Hkv, P, D] */
    pfx_tensor **values;
    pfx_gain_mode *gain_mode;   /* [capacity] */
    float *gains;               /* [capacity][L * H] */
};

struct pfx_kv_cache {
    pfx_model *model;
    size_t slots, max_len;
    pfx_tensor **keys;          /* [L] of [slots, max_len, Hkv, D] */
    pfx_tensor **values;
    size_t *len;                /* [slots] tokens held */
    int32_t *adapter;           /* [slots] bank entry of the slot's prefill, -1 none */
    pfx_ids *positions;         /* [max_batch * max_tokens] position ids (learned positions) */
    uint64_t rows_written;
};

#endif
