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
    size_t P;          /* that of the first adapter: 0 for gains files */
    char *first;       /* the first adapter's path (messages) */
    pfx_tensor **keys; /* [L] of [capacity, Hkv, P, D]; NULL while P is 0 */
    pfx_tensor **values;
    pfx_gain_mode *gain_mode; /* [capacity] */
    float *gains;             /* [capacity][L * H] */
    bool *structured;         /* [capacity]: the entry has dim_gains */
    float *dim_gains;         /* [capacity][L * H * D] */
};

struct pfx_kv_cache {
    pfx_model *model;
    size_t slots, max_len;
    pfx_dtype dtype;   /* of keys and values: F32, F16 or BF16 */
    pfx_tensor **keys; /* [L] of [slots, max_len, Hkv, D] */
    pfx_tensor **values;
    size_t *len;      /* [slots] tokens held */
    int32_t *adapter; /* [slots] bank entry of the slot's prefill, -1 none */
    uint64_t rows_written;
};

/* The storage a KV cache takes: float32, half or bfloat16. */
static inline bool pfx_kv_dtype_valid(pfx_dtype d)
{
    return d == PFX_DTYPE_F32 || d == PFX_DTYPE_F16 || d == PFX_DTYPE_BF16;
}

/* Every field of s checked (vocab: the logit_bias tokens' bound); messages
 * name it `name` (e.g. "request.sampling"). */
pfx_status pfx_sampling_check(pfx_runtime *rt, const char *fn, const char *name,
                              const pfx_sampling *s, size_t vocab);

/* What a serving step does, checked (serve_step.c). */
typedef struct pfx_serve_plan {
    size_t B, N, R;
    bool prefill;     /* every active slot is empty: attention over the fresh keys */
    bool extend;      /* several tokens into a slot that holds some: item by item */
    int32_t *lens;    /* [B] new tokens */
    int32_t *pos0;    /* [B] position of each slot's first new token */
    int32_t *kv_lens; /* [B] cached + new (decode) */
    int32_t *entry;   /* [B] bank entry or -1 */
    int32_t *gather;  /* [B] max(lens, 1) */
    bool any_prefix;  /* an item reads prefix keys (a bank of gains files has none) */
    /* Every active slot's adapter attends with the same gains: one per call. */
    pfx_gain_mode gain_mode;
    const float *gains;     /* [L * H] of the step (one vector for every item) */
    const float *dim_gains; /* [L * H * D] structured gain of the step, or NULL */
    /* Otherwise per-item gains, layer l's gathered from the bank into: */
    pfx_gain_mode *item_mode; /* [B] (OFF for a slot without adapter) */
    float *item_gain;         /* [B * H] */
    float *item_dim_gain;     /* [B * H * D] if an active slot's adapter is structured, else NULL */
} pfx_serve_plan;

/* The decode step on the host, for a CPU device whose buffers are host memory:
 * every piece of the step (embedding, norms, products, RoPE, the cache
 * append, attention, activations, head) in this thread and the few-row
 * products' threads, the buffers mapped once (host_step.c). False where it
 * does not apply (a prefill, more rows than one few-row pass takes, another
 * device, $PREFIXCL_HOST_STEP=off): the step then runs on the queue. */
bool pfx_host_step_applies(const pfx_context *cx, const pfx_adapter_bank *bank,
                           const pfx_serve_plan *p);
pfx_status pfx_host_step_run(pfx_context *cx, pfx_kv_cache *c, const pfx_adapter_bank *bank,
                             const pfx_serve_step *st, const pfx_serve_plan *p,
                             const pfx_tensor *logits);

/* The structured gain of entry e (-1: no adapter) as the model's prefix
 * takes it ([L * H * D]), or NULL. */
static inline const float *pfx_bank_dim_gains(const pfx_adapter_bank *bank, int32_t e)
{
    const pfx_model_shape *s = bank ? &bank->model->cfg.shape : NULL;
    return e >= 0 && bank->structured[e]
               ? bank->dim_gains + (size_t)e * s->layers * s->heads * s->head_dim
               : NULL;
}

/* Entries a and b (-1: no adapter) attend with the same gains: the same
 * per-head mode and values (or both off) and the same structured gain (or
 * neither): an attention call has one of each. */
static inline bool pfx_bank_same_gain(const pfx_adapter_bank *bank, int32_t a, int32_t b)
{
    pfx_gain_mode ma = a < 0 ? PFX_GAIN_OFF : bank->gain_mode[a],
                  mb = b < 0 ? PFX_GAIN_OFF : bank->gain_mode[b];
    const size_t LH = bank ? bank->model->cfg.shape.layers * bank->model->cfg.shape.heads : 0;
    if (ma != mb ||
        (ma != PFX_GAIN_OFF && memcmp(bank->gains + (size_t)a * LH, bank->gains + (size_t)b * LH,
                                      LH * sizeof(float)) != 0))
        return false;
    const float *da = pfx_bank_dim_gains(bank, a), *db = pfx_bank_dim_gains(bank, b);
    if (!da || !db)
        return da == db;
    return memcmp(da, db, LH * bank->model->cfg.shape.head_dim * sizeof(float)) == 0;
}

#endif
