/* A random attention problem on the device (see attn_fixture.h). */
#include "reference/attn_fixture.h"

#include <stdlib.h>
#include <string.h>

void attn_desc_sizes(pfx_attention_desc *d, size_t B, size_t H, size_t Hkv, size_t N, size_t M,
                     size_t P, size_t D)
{
    d->batch = B;
    d->heads = H;
    d->kv_heads = Hkv;
    d->queries = N;
    d->keys = M;
    d->prefix_len = P;
    d->head_dim = D;
}

void attn_shape(const pfx_attention_desc *d, attn_role r, size_t *shape)
{
    const pfx_layout l = r == ATTN_Q ? d->q_layout : r == ATTN_KV ? d->kv_layout : d->o_layout;
    const size_t heads = r == ATTN_KV ? d->kv_heads : d->heads;
    const size_t rows = r == ATTN_KV ? d->keys : d->queries;
    shape[0] = d->batch;
    shape[1] = l == PFX_LAYOUT_BHND ? heads : rows;
    shape[2] = l == PFX_LAYOUT_BHND ? rows : heads;
    shape[3] = d->head_dim;
}

unsigned attn_prefix_shape(const pfx_attention_desc *d, size_t bank, size_t *shape)
{
    const size_t entry[3] = { d->kv_heads, d->prefix_len, d->head_dim };
    if (bank)
        *shape++ = bank;
    memcpy(shape, entry, sizeof(entry));
    return bank ? 4 : 3;
}

pfx_status attn_upload(pfx_runtime *rt, ref_rng *rng, pfx_dtype dt, unsigned ndim,
                       const size_t *shape, float amp, float **host, pfx_tensor **t)
{
    size_t n = 1;
    for (unsigned i = 0; i < ndim; i++)
        n *= shape[i];
    *host = malloc(n * sizeof(float));
    if (!*host)
        return PFX_ERROR_OUT_OF_MEMORY;
    ref_rng_fill(rng, *host, n, -amp, amp);
    pfx_status st = pfx_tensor_create(rt, dt, ndim, shape, t);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_write(*t, 0, n, *host);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_read(*t, 0, n, *host); /* what the device holds (half-rounded) */
    return st;
}

pfx_status attn_read_all(const pfx_tensor *t, float **out)
{
    size_t n = pfx_tensor_numel(t);
    *out = malloc(n * sizeof(float));
    return *out ? pfx_tensor_read(t, 0, n, *out) : PFX_ERROR_OUT_OF_MEMORY;
}

pfx_status attn_fixture_make(pfx_runtime *rt, const attn_fixture_spec *s, ref_rng *rng,
                             attn_fixture *f)
{
    memset(f, 0, sizeof(*f));
    if (s->H > ATTN_FIXTURE_MAX_HEADS || s->B > ATTN_FIXTURE_MAX_BATCH)
        return PFX_ERROR_INVALID_ARGUMENT;
    ref_rng_seed(rng, s->seed);
    pfx_attention_desc *d = &f->d;
    pfx_attention_desc_init(d);
    attn_desc_sizes(d, s->B, s->H, s->Hkv, s->N, s->M, s->P, s->D);
    d->q_layout = s->q_layout;
    d->kv_layout = s->kv_layout;
    d->o_layout = s->o_layout;
    d->causal = s->causal;
    d->gain_mode = s->gain;
    if (s->scale > 0)
        d->scale = s->scale;
    d->dropout = s->dropout;
    d->dropout_stream = (pfx_dropout_stream){
        .seed = s->seed * 0x9E3779B97F4A7C15ull, .step = 7, .tag = 5, .first_item = 3
    };
    if (s->gain != PFX_GAIN_OFF) {
        for (size_t h = 0; h < s->H; h++)
            f->gain[h] = (float)ref_rng_uniform(rng, -0.9, 3.0);
        if (s->zero_gamma && s->gain == PFX_GAIN_LINEAR)
            f->gain[0] = -1.0f / s->ramp; /* exact for a ramp that is a power of two */
        d->gain = f->gain;
        d->gain_ramp = s->ramp;
    }
    if (s->dim_gain) {
        f->dim_gain = malloc(s->H * s->D * sizeof(float));
        if (!f->dim_gain)
            return PFX_ERROR_OUT_OF_MEMORY;
        ref_rng_fill(rng, f->dim_gain, s->H * s->D, -0.5f, 0.5f);
        d->dim_gain = f->dim_gain;
    }
    if (s->lens) {
        for (size_t b = 0; b < s->B; b++) {
            f->q_lens[b] = (int32_t)ref_rng_index(rng, s->N + 1);
            f->kv_lens[b] = (int32_t)ref_rng_index(rng, s->M + 1);
        }
        f->q_lens[0] = (int32_t)s->N; /* at least one full item */
        if (s->B > 1 && s->hidden_item < s->B)
            f->kv_lens[s->hidden_item] = 0; /* only the prefix visible (or nothing) */
        d->q_lens = f->q_lens;
        d->kv_lens = f->kv_lens;
    }
    f->bank = s->bank;
    if (s->bank) {
        for (size_t b = 0; b < s->B; b++)
            f->bank_index[b] = s->bank_alternate ? (int32_t)(b % 2 ? s->bank - 1 : 0)
                                                 : (int32_t)ref_rng_index(rng, s->bank);
        d->bank_index = f->bank_index;
    }
    pfx_dtype dt = s->half ? PFX_DTYPE_F16 : PFX_DTYPE_F32;
    size_t qs[4], ks[4], ps[4];
    attn_shape(d, ATTN_Q, qs);
    attn_shape(d, ATTN_KV, ks);
    unsigned pnd = attn_prefix_shape(d, s->bank, ps);
    pfx_status st = attn_upload(rt, rng, dt, 4, qs, s->amplitude, &f->q, &f->tq);
    if (st == PFX_SUCCESS)
        st = attn_upload(rt, rng, dt, 4, ks, s->amplitude, &f->k, &f->tk);
    if (st == PFX_SUCCESS)
        st = attn_upload(rt, rng, dt, 4, ks, 1.0f, &f->v, &f->tv);
    if (st == PFX_SUCCESS && s->P)
        st = attn_upload(rt, rng, dt, pnd, ps, s->amplitude, &f->pk, &f->tpk);
    if (st == PFX_SUCCESS && s->P)
        st = attn_upload(rt, rng, dt, pnd, ps, 1.0f, &f->pv, &f->tpv);
    f->in = (pfx_attention_inputs){ f->tq, f->tk, f->tv, f->tpk, f->tpv };
    return st;
}

void attn_fixture_free(attn_fixture *f)
{
    pfx_tensor_destroy(&f->tq);
    pfx_tensor_destroy(&f->tk);
    pfx_tensor_destroy(&f->tv);
    pfx_tensor_destroy(&f->tpk);
    pfx_tensor_destroy(&f->tpv);
    free(f->q);
    free(f->k);
    free(f->v);
    free(f->pk);
    free(f->pv);
    free(f->dim_gain);
    memset(f, 0, sizeof(*f));
}
