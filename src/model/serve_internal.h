/* Internal state of the serving objects (generate.h): the adapter bank and
 * the KV cache, read by the serving step (serve_step.c). Not installed. */
#ifndef PFX_SERVE_INTERNAL_H
#define PFX_SERVE_INTERNAL_H

#include <string.h>

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

/* Entries a and b (-1: no adapter) attend with the same gains: both off, or
 * the same mode and values. */
static inline bool pfx_bank_same_gain(const pfx_adapter_bank *bank, int32_t a, int32_t b)
{
    pfx_gain_mode ma = a < 0 ? PFX_GAIN_OFF : bank->gain_mode[a], mb = b < 0 ? PFX_GAIN_OFF : bank->gain_mode[b];
    const size_t LH = bank ? bank->model->cfg.shape.layers * bank->model->cfg.shape.heads : 0;
    if (ma != mb)
        return false;
    return ma == PFX_GAIN_OFF ||
           memcmp(bank->gains + (size_t)a * LH, bank->gains + (size_t)b * LH, LH * sizeof(float)) == 0;
}

#endif
