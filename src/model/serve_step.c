/* One serving step: embeddings at each slot's own positions, the blocks of
 * block.c around an attention that reads the slot's cached keys (decode:
 * one query per slot, keys = the cache, split-K decode path) or the fresh
 * keys of a prompt (prefill into empty slots; several tokens into a slot
 * that holds some: slot by slot, causal over its cached keys and its new
 * ones), the new keys and values appended to the cache, and the next-token
 * logits of every slot. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve_internal.h"

#define FN "serve_step"

typedef pfx_serve_plan plan;

static void plan_free(plan *p)
{
    free(p->lens);
    free(p->pos0);
    free(p->kv_lens);
    free(p->entry);
    free(p->gather);
    free(p->item_mode);
    free(p->item_gain);
    free(p->item_dim_gain);
}

static pfx_status check_step(pfx_context *cx, pfx_kv_cache *c, const pfx_adapter_bank *bank,
                             const pfx_serve_step *st, const pfx_tensor *logits, plan *p)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    if (!c || !st || !logits)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", FN,
                         !c    ? "cache"
                         : !st ? "step"
                               : "logits");
    if (c->model != m || (bank && bank->model != m))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: the %s belongs to another model", FN,
                         c->model != m ? "cache" : "bank");
    const size_t B = st->batch, N = st->tokens;
    if (B == 0 || B > c->slots)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: step.batch %zu outside 1..%zu (the cache's slots)", FN, B, c->slots);
    if (B > cx->p.max_batch)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: step.batch %zu exceeds the context's max_batch %zu", FN, B,
                         cx->p.max_batch);
    if (N == 0 || N > cx->p.max_tokens)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: step.tokens %zu outside 1..the context's max_tokens %zu", FN, N,
                         cx->p.max_tokens);
    if (!st->ids)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: step.ids is NULL", FN);
    for (size_t i = 0; i < B * N; i++)
        if (st->ids[i] < 0 || (size_t)st->ids[i] >= s->vocab)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: step.ids[%zu] = %d outside the vocabulary [0, %zu)", FN, i,
                             (int)st->ids[i], s->vocab);
    if (logits->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: logits belongs to another runtime",
                         FN);
    if (logits->dtype != PFX_DTYPE_F32 || logits->numel != B * s->vocab)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: logits must be float32 [B=%zu, V=%zu]",
                         FN, B, s->vocab);
    p->lens = calloc(B, sizeof(int32_t));
    p->pos0 = calloc(B, sizeof(int32_t));
    p->kv_lens = calloc(B, sizeof(int32_t));
    p->entry = calloc(B, sizeof(int32_t));
    p->gather = calloc(B, sizeof(int32_t));
    if (!p->lens || !p->pos0 || !p->kv_lens || !p->entry || !p->gather)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", FN);
    p->B = B;
    p->N = N;
    p->R = B * N;
    p->prefill = true;
    const size_t LH = s->layers * s->heads;
    int32_t first = -2; /* entry of the first active slot, for the gain check */
    size_t active = 0;
    bool same_gain = true, structured = false;
    for (size_t b = 0; b < B; b++) {
        const int32_t len = st->lens ? st->lens[b] : (int32_t)N;
        if (len < 0 || (size_t)len > N)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: step.lens[%zu] = %d outside 0..%zu",
                             FN, b, (int)len, N);
        int32_t e = st->adapter ? st->adapter[b] : -1;
        if (e < -1 || (e >= 0 && (!bank || (size_t)e >= bank->count)))
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: step.adapter[%zu] = %d is neither -1 nor in the bank "
                             "(%zu adapters)",
                             FN, b, (int)e, bank ? bank->count : 0);
        if (c->len[b] && e != c->adapter[b])
            return pfx_error(
                rt, PFX_ERROR_INVALID_ARGUMENT,
                "%s: step.adapter[%zu] = %d, but the slot was prefilled with %d (reset it first)",
                FN, b, (int)e, (int)c->adapter[b]);
        p->lens[b] = len;
        p->entry[b] = e;
        p->gather[b] = len > 0 ? len : 1;
        if (!len)
            continue;
        active++;
        p->extend |= c->len[b] && N > 1;
        const size_t P = e >= 0 ? bank->P : 0;
        if (c->len[b] + (size_t)len > c->max_len)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: slot %zu would hold %zu tokens, the cache %zu", FN, b,
                             c->len[b] + (size_t)len, c->max_len);
        if (P + c->len[b] + (size_t)len > s->max_positions)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: slot %zu reaches position %zu, the model has %zu", FN, b,
                             P + c->len[b] + (size_t)len, s->max_positions);
        if (m->cfg.sliding_window && P + c->len[b] + (size_t)len > m->cfg.sliding_window)
            return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                             "%s: slot %zu would attend over %zu keys, past the sliding_window %zu "
                             "(not computed)",
                             FN, b, P + c->len[b] + (size_t)len, m->cfg.sliding_window);
        if (c->len[b])
            p->prefill = false;
        p->pos0[b] = (int32_t)(P + c->len[b]);
        p->kv_lens[b] = (int32_t)(c->len[b] + (size_t)len);
        p->any_prefix |= e >= 0 && P > 0;
        if (first == -2)
            first = e;
        same_gain = same_gain && pfx_bank_same_gain(bank, first, e);
        structured |= pfx_bank_dim_gains(bank, e) != NULL;
    }
    if (!active)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: every step.lens entry is 0", FN);
    if (p->extend)
        p->prefill = false;
    if (!same_gain) {
        /* adapters with different gains share the step: each item its own */
        p->item_mode = malloc(B * sizeof(pfx_gain_mode));
        p->item_gain = malloc(B * s->heads * sizeof(float));
        if (structured)
            p->item_dim_gain = malloc(B * s->heads * s->head_dim * sizeof(float));
        if (!p->item_mode || !p->item_gain || (structured && !p->item_dim_gain))
            return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", FN);
        for (size_t b = 0; b < B; b++)
            p->item_mode[b] = p->entry[b] >= 0 ? bank->gain_mode[p->entry[b]] : PFX_GAIN_OFF;
        return PFX_SUCCESS;
    }
    if (first >= 0 && bank->gain_mode[first] != PFX_GAIN_OFF) {
        p->gain_mode = bank->gain_mode[first];
        p->gains = bank->gains + (size_t)first * LH;
    }
    p->dim_gains = first >= 0 ? pfx_bank_dim_gains(bank, first) : NULL;
    return PFX_SUCCESS;
}

/* hidden[0] = wte[ids] + (learned positions: wpe[pos0[b] + t]). */
static pfx_status embed(pfx_context *cx, pfx_kv_cache *c, const pfx_serve_step *st, const plan *p)
{
    const pfx_model *m = cx->model;
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t C = s->hidden;
    pfx_status e = pfx_ids_write(cx->ids, 0, p->R, st->ids);
    if (e == PFX_SUCCESS)
        e = pfx_op_embedding(m->rt, cx->ids, p->B, p->N,
                             PFX_MAT(m->global[PFX_W_EMBED], s->vocab, C), NULL, 0,
                             PFX_MAT(cx->hidden[0], p->R, C));
    const pfx_tensor *wpe = m->global[PFX_W_POS];
    if (e != PFX_SUCCESS || !wpe)
        return e;
    /* positions as ids into the table of learned positions, added to the
     * token embeddings (each slot at its own position) */
    int32_t *pos = malloc(p->R * sizeof(int32_t));
    if (!pos)
        return pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", FN);
    for (size_t b = 0; b < p->B; b++)
        for (size_t t = 0; t < p->N; t++)
            pos[b * p->N + t] = p->pos0[b] + (t < (size_t)p->lens[b] ? (int32_t)t : 0);
    e = pfx_ids_write(cx->positions, 0, p->R, pos);
    free(pos);
    pfx_tensor *tmp = pfx_model_ws(cx, 0, WS_A); /* free until block 0 writes it */
    pfx_tensor h = pfx_tensor_view(cx->hidden[0], 2, p->R, C, 0, 0),
               a = pfx_tensor_view(tmp, 2, p->R, C, 0, 0);
    if (e == PFX_SUCCESS)
        e = pfx_op_embedding(m->rt, cx->positions, p->B, p->N, PFX_MAT(wpe, s->max_positions, C),
                             NULL, 0, PFX_MAT(tmp, p->R, C));
    if (e == PFX_SUCCESS)
        e = pfx_axpby(&h, 1.0f, &a, 1.0f);
    return e;
}

/* RoPE of each slot's new queries and keys at its own positions. */
static pfx_status rope(pfx_context *cx, size_t l, const plan *p)
{
    const pfx_model *m = cx->model;
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t D = s->head_dim, QD = s->heads * D, KVD = s->kv_heads * D;
    pfx_mat freq = PFX_VEC(m->inv_freq, 0, D / 2);
    pfx_status e = PFX_SUCCESS;
    for (size_t b = 0; b < p->B && e == PFX_SUCCESS; b++) {
        if (!p->lens[b])
            continue;
        const size_t n = (size_t)p->lens[b], r0 = b * p->N;
        if ((e = pfx_op_rope_forward(m->rt,
                                     pfx_mat_of(pfx_model_ws(cx, l, WS_Q), r0 * QD, n, QD, QD), 1,
                                     n, s->heads, D, (size_t)p->pos0[b], freq)) == PFX_SUCCESS)
            e = pfx_op_rope_forward(m->rt,
                                    pfx_mat_of(pfx_model_ws(cx, l, WS_K), r0 * KVD, n, KVD, KVD), 1,
                                    n, s->kv_heads, D, (size_t)p->pos0[b], freq);
    }
    return e;
}

/* The new keys and values of layer l appended to their slots: copied into
 * a float32 cache, rounded to nearest even into a half or bfloat16 one. */
static pfx_status append(pfx_context *cx, pfx_kv_cache *c, size_t l, const plan *p)
{
    const pfx_model *m = cx->model;
    const size_t KVD = m->cfg.shape.kv_heads * m->cfg.shape.head_dim, f = sizeof(float);
    for (size_t b = 0; b < p->B; b++) {
        if (!p->lens[b])
            continue;
        const size_t n = (size_t)p->lens[b];
        const size_t src = b * p->N * KVD, dst = (b * c->max_len + c->len[b]) * KVD;
        for (int kv = 0; kv < 2; kv++) {
            const pfx_tensor *from = pfx_model_ws(cx, l, kv ? WS_V : WS_K);
            pfx_tensor *to = kv ? c->values[l] : c->keys[l];
            if (c->dtype != PFX_DTYPE_F32) {
                const pfx_status e = pfx_op_from_float(m->rt, pfx_mat_of(from, src, n, KVD, KVD),
                                                       pfx_mat_of(to, dst, n, KVD, KVD));
                if (e != PFX_SUCCESS)
                    return e;
                continue;
            }
            const cl_int err = clEnqueueCopyBuffer(m->rt->queue, from->mem, to->mem, src * f,
                                                   dst * f, n * KVD * f, 0, NULL, NULL);
            if (err != CL_SUCCESS)
                return pfx_cl_error(m->rt, err, FN ": cache append");
        }
        c->rows_written += n;
    }
    return PFX_SUCCESS;
}

/* Layer l's gains of every slot from the bank (zeros for a slot without
 * adapter or without structured gain) as the attention's per-item gains. */
static void item_gains_of_layer(const pfx_model_shape *s, const pfx_adapter_bank *bank, size_t l,
                                const plan *p, pfx_attention_desc *d)
{
    const size_t H = s->heads, HD = H * s->head_dim;
    for (size_t b = 0; b < p->B; b++) {
        const int32_t e = p->entry[b];
        const float *g = e >= 0 ? bank->gains + ((size_t)e * s->layers + l) * H : NULL;
        const float *G = pfx_bank_dim_gains(bank, e);
        if (g)
            memcpy(p->item_gain + b * H, g, H * sizeof(float));
        else
            memset(p->item_gain + b * H, 0, H * sizeof(float));
        if (p->item_dim_gain && G)
            memcpy(p->item_dim_gain + b * HD, G + l * HD, HD * sizeof(float));
        else if (p->item_dim_gain)
            memset(p->item_dim_gain + b * HD, 0, HD * sizeof(float));
    }
    d->gain_mode = PFX_GAIN_OFF; /* every item's own mode below */
    d->item_gain_mode = p->item_mode;
    d->item_gain = p->item_gain;
    d->item_dim_gain = p->item_dim_gain;
}

/* Copies rows [from, from + n) of a [*, width] tensor into rows [to, to + n)
 * of another of the same dtype. */
static cl_int copy_rows(pfx_runtime *rt, const pfx_tensor *src, size_t from, pfx_tensor *dst,
                        size_t to, size_t n, size_t width)
{
    const size_t row = width * pfx_dtype_size(src->dtype);
    return clEnqueueCopyBuffer(rt->queue, src->mem, dst->mem, from * row, to * row, n * row, 0,
                               NULL, NULL);
}

/* The attention of an extend step, item by item: each slot's new queries
 * against everything it holds (its rows copied out of the cache in its
 * dtype, its new ones already appended), causal from its first new
 * position. */
static pfx_status attend_items(pfx_context *cx, pfx_kv_cache *c, size_t l, const plan *p,
                               pfx_attention_desc d, pfx_attention_inputs in)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t H = s->heads, Hkv = s->kv_heads, D = s->head_dim, QD = H * D, KVD = Hkv * D;
    size_t most = 0;
    for (size_t b = 0; b < p->B; b++)
        most = p->lens[b] && (size_t)p->kv_lens[b] > most ? (size_t)p->kv_lens[b] : most;
    const size_t qs[4] = { 1, p->N, H, D }, ks[4] = { 1, most, Hkv, D };
    pfx_tensor *q = NULL, *o = NULL, *k = NULL, *v = NULL;
    pfx_status e = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &q);
    if (e == PFX_SUCCESS)
        e = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &o);
    if (e == PFX_SUCCESS)
        e = pfx_tensor_create(rt, c->dtype, 4, ks, &k);
    if (e == PFX_SUCCESS)
        e = pfx_tensor_create(rt, c->dtype, 4, ks, &v);
    for (size_t b = 0; b < p->B && e == PFX_SUCCESS; b++) {
        if (!p->lens[b])
            continue;
        const size_t n = (size_t)p->lens[b], M = (size_t)p->kv_lens[b];
        cl_int err = copy_rows(rt, pfx_model_ws(cx, l, WS_Q), b * p->N, q, 0, n, QD);
        if (err == CL_SUCCESS)
            err = copy_rows(rt, c->keys[l], b * c->max_len, k, 0, M, KVD);
        if (err == CL_SUCCESS)
            err = copy_rows(rt, c->values[l], b * c->max_len, v, 0, M, KVD);
        if (err != CL_SUCCESS) {
            e = pfx_cl_error(rt, err, FN ": extend copies");
            break;
        }
        pfx_attention_desc di = d;
        di.batch = 1;
        di.queries = n;
        di.keys = M;
        di.causal = true; /* query i sees keys up to M - n + i: its own position */
        di.q_lens = NULL;
        di.kv_lens = NULL;
        if (p->item_mode) {
            di.item_gain_mode = p->item_mode + b;
            di.item_gain = p->item_gain + b * H;
            di.item_dim_gain = p->item_dim_gain ? p->item_dim_gain + b * QD : NULL;
        }
        if (di.bank_index)
            di.bank_index = p->entry + b;
        pfx_tensor qv = pfx_tensor_view(q, 4, 1, n, H, D), ov = pfx_tensor_view(o, 4, 1, n, H, D);
        pfx_tensor kv = pfx_tensor_view(k, 4, 1, M, Hkv, D),
                   vv = pfx_tensor_view(v, 4, 1, M, Hkv, D);
        pfx_attention_inputs ii = { &qv, &kv, &vv, in.prefix_k, in.prefix_v };
        if ((e = pfx_attention_forward(rt, &di, &ii, &ov, NULL)) != PFX_SUCCESS)
            break;
        if ((err = copy_rows(rt, o, 0, pfx_model_ws(cx, l, WS_O), b * p->N, n, QD)) != CL_SUCCESS)
            e = pfx_cl_error(rt, err, FN ": extend copies");
    }
    pfx_tensor_destroy(&q);
    pfx_tensor_destroy(&o);
    pfx_tensor_destroy(&k);
    pfx_tensor_destroy(&v);
    return e;
}

static pfx_status attend(pfx_context *cx, pfx_kv_cache *c, const pfx_adapter_bank *bank, size_t l,
                         const plan *p)
{
    const pfx_model *m = cx->model;
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t B = p->B, N = p->N, H = s->heads, Hkv = s->kv_heads, D = s->head_dim;
    pfx_attention_desc d;
    pfx_attention_desc_init(&d);
    d.batch = B;
    d.heads = H;
    d.kv_heads = Hkv;
    d.queries = N;
    d.head_dim = D;
    d.q_layout = d.kv_layout = d.o_layout = PFX_LAYOUT_BNHD;
    d.scale = m->cfg.attn_scale;
    d.gain_mode = p->gain_mode;
    d.gain = p->gains ? p->gains + l * H : NULL;
    /* ramp 1 (the default): the factor is 1 + G, as the full forward's r G at r = 1 */
    d.dim_gain = p->dim_gains ? p->dim_gains + l * H * D : NULL;
    d.q_lens = p->lens;
    if (p->item_mode)
        item_gains_of_layer(&m->cfg.shape, bank, l, p, &d);
    pfx_tensor q = pfx_tensor_view(pfx_model_ws(cx, l, WS_Q), 4, B, N, H, D);
    pfx_tensor o = pfx_tensor_view(pfx_model_ws(cx, l, WS_O), 4, B, N, H, D);
    pfx_tensor k, v;
    if (p->prefill) {
        /* empty slots: causal attention over the prompt's own keys */
        d.keys = N;
        d.causal = true;
        d.kv_lens = p->lens;
        k = pfx_tensor_view(pfx_model_ws(cx, l, WS_K), 4, B, N, Hkv, D);
        v = pfx_tensor_view(pfx_model_ws(cx, l, WS_V), 4, B, N, Hkv, D);
    } else {
        /* one query per slot against everything it holds (the new token's
         * row included): nothing later is in the cache, so no causal mask */
        d.keys = c->max_len;
        d.causal = false;
        d.kv_lens = p->kv_lens;
        k = pfx_tensor_view(c->keys[l], 4, B, c->max_len, Hkv, D);
        v = pfx_tensor_view(c->values[l], 4, B, c->max_len, Hkv, D);
    }
    pfx_attention_inputs in = { &q, &k, &v, NULL, NULL };
    if (p->any_prefix) {
        d.prefix_len = bank->P;
        d.bank_index = p->entry;
        in.prefix_k = bank->keys[l];
        in.prefix_v = bank->values[l];
    }
    if (p->extend)
        return attend_items(cx, c, l, p, d, in);
    return pfx_attention_forward(m->rt, &d, &in, &o, NULL);
}

pfx_status pfx_serve_step_run(pfx_context *ctx, pfx_kv_cache *cache, const pfx_adapter_bank *bank,
                              const pfx_serve_step *step, pfx_tensor *logits)
{
    const pfx_model *model = pfx_context_model(ctx);
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: ctx is NULL", FN);
    plan p;
    memset(&p, 0, sizeof(p));
    pfx_status e = check_step(ctx, cache, bank, step, logits, &p);
    const size_t L = model->cfg.shape.layers, C = model->cfg.shape.hidden;
    const uint64_t written = cache ? cache->rows_written : 0;
    const bool host = e == PFX_SUCCESS && pfx_host_step_applies(ctx, bank, &p);
    if (host)
        e = pfx_host_step_run(ctx, cache, bank, step, &p, logits);
    else if (e == PFX_SUCCESS)
        e = embed(ctx, cache, step, &p);
    for (size_t l = 0; !host && l < L && e == PFX_SUCCESS; l++) {
        if ((e = pfx_model_block_qkv(ctx, l, p.R)))
            break;
        if (model->cfg.family == PFX_FAMILY_LLAMA && (e = rope(ctx, l, &p)))
            break;
        /* decode reads the new row from the cache, so it goes in first */
        if ((e = append(ctx, cache, l, &p)) || (e = attend(ctx, cache, bank, l, &p)))
            break;
        e = pfx_model_block_mlp(ctx, l, p.R, true);
    }
    pfx_tensor *last = pfx_model_ws(ctx, 0, WS_A); /* free after the blocks */
    if (!host && e == PFX_SUCCESS && (e = pfx_model_final_norm(ctx, p.R)) == PFX_SUCCESS)
        e = pfx_op_gather_last(model->rt, PFX_MAT(ctx->ws[WS_LN], p.R, C), p.B, p.N, p.gather,
                               PFX_MAT(last, p.B, C));
    if (!host && e == PFX_SUCCESS)
        e = pfx_model_head(ctx, last, p.B, logits);
    if (e == PFX_SUCCESS) {
        for (size_t b = 0; b < p.B; b++) {
            if (p.lens[b] && !cache->len[b])
                cache->adapter[b] = p.entry[b];
            cache->len[b] += (size_t)p.lens[b];
        }
    } else if (cache) {
        cache->rows_written =
            written; /* the slots keep their lengths: partial rows are overwritten later */
    }
    plan_free(&p);
    return e;
}
