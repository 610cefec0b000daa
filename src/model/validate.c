/* Every model call's arguments checked before anything is enqueued: the
 * batch, the prefix and gains, the output tensors, the gradients. Each
 * failure names the argument (and the layer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"

static pfx_status check_tensor(pfx_runtime *rt, const char *fn, const char *what, size_t l,
                               const pfx_tensor *t, bool f32_only)
{
    if (!t)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s[%zu] is NULL", fn, what, l);
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: %s[%zu] belongs to another runtime",
                         fn, what, l);
    if (t->dtype != PFX_DTYPE_F32 && (f32_only || t->dtype != PFX_DTYPE_F16))
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s[%zu] must be float32%s", fn, what, l,
                         f32_only ? "" : " or half");
    return PFX_SUCCESS;
}

static pfx_status check_prefix(const pfx_context *cx, const char *fn, const pfx_model_prefix *pre,
                               size_t B)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    if (pre->gain_mode != PFX_GAIN_OFF && pre->gain_mode != PFX_GAIN_LINEAR &&
        pre->gain_mode != PFX_GAIN_TANH)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: prefix.gain_mode %d is unknown", fn,
                         (int)pre->gain_mode);
    if (pre->gain_mode != PFX_GAIN_OFF && !pre->gains)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: prefix.gains is NULL with a gain mode",
                         fn);
    for (size_t i = 0; pre->gain_mode != PFX_GAIN_OFF && i < s->layers * s->heads; i++)
        if (!isfinite(pre->gains[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: prefix.gains[%zu] is %g", fn, i,
                             (double)pre->gains[i]);
    for (size_t i = 0; pre->dim_gains && i < s->layers * s->heads * s->head_dim; i++)
        if (!isfinite(pre->dim_gains[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: prefix.dim_gains[%zu] is %g", fn, i,
                             (double)pre->dim_gains[i]);
    if (pre->gain_mode != PFX_GAIN_OFF || pre->dim_gains) {
        if (!isfinite(pre->gain_ramp) || pre->gain_ramp < 0.0f || pre->gain_ramp > 1.0f)
            return pfx_error(rt, PFX_ERROR_NOT_FINITE,
                             "%s: prefix.gain_ramp (%g) must be in [0, 1]", fn,
                             (double)pre->gain_ramp);
    }
    const size_t P = pre->prefix_len;
    if (P == 0) {
        if (pre->keys || pre->values)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "%s: prefix.%s given with prefix_len 0", fn,
                             pre->keys ? "keys" : "values");
        return PFX_SUCCESS;
    }
    if (P > cx->p.max_prefix_len)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: prefix.prefix_len %zu exceeds the context's max_prefix_len %zu", fn,
                         P, cx->p.max_prefix_len);
    if (!pre->keys || !pre->values)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: prefix.%s is NULL (prefix_len %zu)", fn,
                         !pre->keys ? "keys" : "values", P);
    unsigned ndim = 0;
    size_t T = 0;
    for (size_t l = 0; l < s->layers; l++) {
        const pfx_tensor *kv[2] = { pre->keys[l], pre->values[l] };
        for (int i = 0; i < 2; i++) {
            const char *what = i ? "prefix.values" : "prefix.keys";
            pfx_status st = check_tensor(rt, fn, what, l, kv[i], false);
            if (st != PFX_SUCCESS)
                return st;
            const pfx_tensor *t = kv[i];
            unsigned o = t->ndim == 4;
            if (!ndim) {
                ndim = t->ndim;
                T = o ? t->shape[0] : 1;
            }
            if ((t->ndim != 3 && t->ndim != 4) || t->ndim != ndim || (o && t->shape[0] != T) ||
                t->shape[o] != s->kv_heads || t->shape[o + 1] != P ||
                t->shape[o + 2] != s->head_dim)
                return pfx_error(
                    rt, PFX_ERROR_INVALID_SHAPE,
                    "%s: %s[%zu] must be [Hkv=%zu, P=%zu, D=%zu] (or a bank [T, Hkv, P, D] like "
                    "every other layer's)",
                    fn, what, l, s->kv_heads, P, s->head_dim);
        }
    }
    if (ndim == 4) {
        if (!pre->bank_index)
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                             "%s: prefix.bank_index is NULL with a bank", fn);
        for (size_t b = 0; b < B; b++)
            if (pre->bank_index[b] < 0 || (size_t)pre->bank_index[b] >= T)
                return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                                 "%s: prefix.bank_index[%zu] = %d outside [0, %zu)", fn, b,
                                 (int)pre->bank_index[b], T);
    }
    return PFX_SUCCESS;
}

pfx_status pfx_model_check_call(pfx_context *cx, const char *fn, const pfx_model_batch *batch,
                                const pfx_model_prefix *prefix, pfx_model_call *c)
{
    const pfx_model *m = pfx_context_model(cx);
    if (!m)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: ctx is NULL", fn);
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    if (!batch)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: batch is NULL", fn);
    memset(c, 0, sizeof(*c));
    const size_t B = batch->batch, N = batch->tokens;
    if (B == 0 || B > cx->p.max_batch)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: batch.batch %zu outside 1..the context's max_batch %zu", fn, B,
                         cx->p.max_batch);
    if (N == 0 || N > cx->p.max_tokens)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: batch.tokens %zu outside 1..the context's max_tokens %zu", fn, N,
                         cx->p.max_tokens);
    if (!batch->ids)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: batch.ids is NULL", fn);
    for (size_t i = 0; i < B * N; i++)
        if (batch->ids[i] < 0 || (size_t)batch->ids[i] >= s->vocab)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: batch.ids[%zu] = %d outside the vocabulary [0, %zu)", fn, i,
                             (int)batch->ids[i], s->vocab);
    for (size_t b = 0; batch->lens && b < B; b++)
        if (batch->lens[b] < 1 || (size_t)batch->lens[b] > N)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: batch.lens[%zu] = %d outside 1..%zu",
                             fn, b, (int)batch->lens[b], N);
    for (size_t i = 0; batch->labels && i < B * N; i++)
        if (batch->labels[i] != PFX_LABEL_IGNORE &&
            (batch->labels[i] < 0 || (size_t)batch->labels[i] >= s->vocab))
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: batch.labels[%zu] = %d is neither -100 nor in [0, %zu)", fn, i,
                             (int)batch->labels[i], s->vocab);
    if (prefix)
        c->pre = *prefix;
    pfx_status st = check_prefix(cx, fn, &c->pre, B);
    if (st != PFX_SUCCESS)
        return st;
    c->B = B;
    c->N = N;
    c->R = B * N;
    c->P = c->pre.prefix_len;
    c->lens = batch->lens;
    return PFX_SUCCESS;
}

/* An output tensor `what` of the call: float32 on the model's runtime, `rows`
 * x `cols` elements (`cols_name` in the message), none of the prefixes. */
pfx_status pfx_model_check_output(pfx_context *cx, const char *fn, const char *what,
                                  const pfx_tensor *t, size_t rows, size_t cols,
                                  const char *cols_name, const pfx_model_call *c)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    if (!t)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn, what);
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: %s belongs to another runtime", fn,
                         what);
    if (t->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s must be float32", fn, what);
    if (t->numel != rows * cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: %s has %zu elements, %zu x %s=%zu expected", fn, what, t->numel, rows,
                         cols_name, cols);
    for (size_t l = 0; c->P && l < m->cfg.shape.layers; l++)
        if (t->mem == c->pre.keys[l]->mem || t->mem == c->pre.values[l]->mem)
            return pfx_error(rt, PFX_ERROR_ALIASING, "%s: %s is also prefix %zu", fn, what, l);
    return PFX_SUCCESS;
}

/* Shifted labels: row b*N + t is scored against label t + 1 of its item;
 * without labels, the ids with the padding (t >= lens[b]) not counted. */
pfx_status pfx_model_write_labels(pfx_context *cx, const char *fn, const pfx_model_batch *batch,
                                  pfx_model_call *c)
{
    const pfx_model *m = cx->model;
    int32_t *shifted = malloc(2 * c->R * sizeof(int32_t));
    if (!shifted)
        return pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    const int32_t *labels = batch->labels;
    if (!labels) {
        int32_t *plain = shifted + c->R;
        for (size_t b = 0; b < c->B; b++)
            for (size_t t = 0; t < c->N; t++)
                plain[b * c->N + t] = !c->lens || t < (size_t)c->lens[b] ? batch->ids[b * c->N + t]
                                                                         : PFX_LABEL_IGNORE;
        labels = plain;
    }
    c->counted = pfx_labels_shift(labels, c->B, c->N, shifted);
    pfx_status st = PFX_SUCCESS;
    if (c->counted == 0)
        st = pfx_error(m->rt, PFX_ERROR_INVALID_ARGUMENT,
                       "%s: no label is counted (every one is -100 or padding)", fn);
    else
        st = pfx_ids_write(cx->labels, 0, c->R, shifted);
    free(shifted);
    return st;
}

/* The weight gradients of g: float32 storage, each entry float32 and shaped
 * like its parameter, none the same tensor as a parameter, a prefix, another
 * gradient or (checked by check_grads) a prefix or gain gradient. */
static pfx_status check_param_grads(pfx_context *cx, const char *fn, const pfx_model_call *c,
                                    const pfx_model_grads *g)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    const size_t L = m->cfg.shape.layers, n = m->weight_count;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        const pfx_tensor *t = g->weights[i], *p = m->weights[i].t;
        if (!t)
            continue;
        any = true;
        pfx_status st = check_tensor(rt, fn, "grads.weights", i, t, true);
        if (st != PFX_SUCCESS)
            return st;
        if (t->ndim != p->ndim || memcmp(t->shape, p->shape, sizeof(t->shape)) != 0)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                             "%s: grads.weights[%zu] must be shaped like parameter %s", fn, i,
                             m->weights[i].name);
        for (size_t j = 0; j < n; j++)
            if (t->mem == m->weights[j].t->mem ||
                (j < i && g->weights[j] && g->weights[j]->mem == t->mem))
                return pfx_error(
                    rt, PFX_ERROR_ALIASING, "%s: grads.weights[%zu] is also %s %zu (%s)", fn, i,
                    j < i && g->weights[j] && g->weights[j]->mem == t->mem ? "grads.weights"
                                                                           : "parameter",
                    j, m->weights[j].name);
        for (size_t l = 0; l < L; l++) {
            pfx_tensor *const others[6] = {
                c->P ? c->pre.keys[l] : NULL,  c->P ? c->pre.values[l] : NULL,
                g->keys ? g->keys[l] : NULL,   g->values ? g->values[l] : NULL,
                g->gains ? g->gains[l] : NULL, g->dim_gains ? g->dim_gains[l] : NULL
            };
            static const char *const names[6] = {
                "prefix.keys",  "prefix.values", "grads.keys",
                "grads.values", "grads.gains",   "grads.dim_gains"
            };
            for (int k = 0; k < 6; k++)
                if (others[k] && others[k]->mem == t->mem)
                    return pfx_error(rt, PFX_ERROR_ALIASING,
                                     "%s: grads.weights[%zu] is also %s[%zu]", fn, i, names[k], l);
        }
    }
    if (any && m->p.storage != PFX_DTYPE_F32)
        return pfx_error(
            rt, PFX_ERROR_UNSUPPORTED,
            "%s: weight gradients need float32 weights (the model was loaded with %s storage)", fn,
            pfx_dtype_name(m->p.storage));
    return PFX_SUCCESS;
}

pfx_status pfx_model_check_grads(pfx_context *cx, const char *fn, const pfx_model_call *c,
                                 const pfx_model_grads *g)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    const size_t L = m->cfg.shape.layers;
    if (!g)
        return PFX_SUCCESS;
    if (g->weights) {
        pfx_status st = check_param_grads(cx, fn, c, g);
        if (st != PFX_SUCCESS)
            return st;
    }
    const pfx_model_shape *s = &m->cfg.shape;
    pfx_tensor *const *const all[4] = { g->keys, g->values, g->gains, g->dim_gains };
    static const char *const names[4] = { "grads.keys", "grads.values", "grads.gains",
                                          "grads.dim_gains" };
    for (size_t l = 0; l < L; l++) {
        for (int i = 0; i < 4; i++) {
            const pfx_tensor *t = all[i] ? all[i][l] : NULL;
            if (!t)
                continue;
            pfx_status st = check_tensor(rt, fn, names[i], l, t, true);
            if (st != PFX_SUCCESS)
                return st;
            if (i < 2 && !c->P)
                return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                                 "%s: %s[%zu] given without a prefix", fn, names[i], l);
            const pfx_tensor *like = i == 0 ? c->pre.keys[l] : i == 1 ? c->pre.values[l] : NULL;
            bool same =
                like ? t->ndim == like->ndim && memcmp(t->shape, like->shape, sizeof(t->shape)) == 0
                : i == 2 ? t->ndim == 1 && t->shape[0] == s->heads
                         : t->ndim == 2 && t->shape[0] == s->heads && t->shape[1] == s->head_dim;
            if (!same)
                return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s[%zu] must be shaped like %s",
                                 fn, names[i], l,
                                 i == 0   ? "prefix.keys[l]"
                                 : i == 1 ? "prefix.values[l]"
                                 : i == 2 ? "[H]"
                                          : "[H, D]");
            for (size_t j = 0; c->P && j < L; j++)
                if (t->mem == c->pre.keys[j]->mem || t->mem == c->pre.values[j]->mem)
                    return pfx_error(rt, PFX_ERROR_ALIASING, "%s: %s[%zu] is also a prefix", fn,
                                     names[i], l);
            /* distinct from every gradient before it */
            for (size_t j = 0; j <= l; j++)
                for (int k = 0; k < 4; k++) {
                    if ((j == l && k >= i) || !all[k] || !all[k][j])
                        continue;
                    if (all[k][j]->mem == t->mem)
                        return pfx_error(rt, PFX_ERROR_ALIASING,
                                         "%s: %s[%zu] and %s[%zu] are the same tensor", fn,
                                         names[k], j, names[i], l);
                }
        }
    }
    return PFX_SUCCESS;
}
