/* Gains folded into the query projections (prefixcl/model.h,
 * pfx_model_fold_gains; docs/design.md, "Folding gains"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* The factor of head h's dimension d: gamma(r g_h) (1 + r G_hd). */
static double factor(const pfx_model_prefix *p, size_t H, size_t D, size_t l, size_t h, size_t d)
{
    const double r = p->gain_ramp;
    double f = 1.0;
    if (p->gain_mode == PFX_GAIN_LINEAR)
        f = 1.0 + r * p->gains[l * H + h];
    else if (p->gain_mode == PFX_GAIN_TANH)
        f = 1.0 + tanh(r * p->gains[l * H + h]);
    if (p->dim_gains)
        f *= 1.0 + r * p->dim_gains[(l * H + h) * D + d];
    return f;
}

/* Every argument before anything changes. */
static pfx_status check(pfx_model *m, const pfx_model_prefix *p)
{
    pfx_runtime *rt = m->rt;
    const size_t L = m->cfg.shape.layers, H = m->cfg.shape.heads, D = m->cfg.shape.head_dim;
    if (p->gain_mode != PFX_GAIN_OFF && p->gain_mode != PFX_GAIN_LINEAR &&
        p->gain_mode != PFX_GAIN_TANH)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "fold gains: gains->gain_mode is not OFF, LINEAR or TANH");
    if (p->gain_mode != PFX_GAIN_OFF && !p->gains)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                         "fold gains: gains->gains is NULL with a gain mode");
    if (p->prefix_len || p->keys || p->values || p->bank_index)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "fold gains: gains->prefix_len, keys, values or bank_index is set: a "
                         "prefix lives in the keys and values and is not folded");
    if (!(p->gain_ramp >= 0.0f && p->gain_ramp <= 1.0f))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "fold gains: gains->gain_ramp %g is not in [0, 1]", (double)p->gain_ramp);
    for (size_t i = 0; p->gains && p->gain_mode != PFX_GAIN_OFF && i < L * H; i++)
        if (!isfinite(p->gains[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "fold gains: gains->gains[%zu] is %g", i,
                             (double)p->gains[i]);
    for (size_t i = 0; p->dim_gains && i < L * H * D; i++)
        if (!isfinite(p->dim_gains[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "fold gains: gains->dim_gains[%zu] is %g", i,
                             (double)p->dim_gains[i]);
    for (size_t l = 0; l < L; l++) {
        const size_t w = pfx_model_weight_index(m, l, PFX_W_QKV),
                     b = pfx_model_weight_index(m, l, PFX_W_QKV_B);
        if (pfx_tensor_dtype(m->weights[w].t) != PFX_DTYPE_F32 ||
            (b != SIZE_MAX && pfx_tensor_dtype(m->weights[b].t) != PFX_DTYPE_F32))
            return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                             "fold gains: the query projection of layer %zu is not stored as "
                             "float32 (load the model with storage F32)",
                             l);
    }
    if (!p->dim_gains || m->cfg.family != PFX_FAMILY_LLAMA)
        return PFX_SUCCESS;
    /* rotate-half turns dimensions d and d + D/2 together: a factor on the
     * projection passes through the rotation only when both share it */
    char heads[256] = "";
    size_t bad = 0, used = 0;
    for (size_t l = 0; l < L; l++)
        for (size_t h = 0; h < H; h++) {
            const float *g = p->dim_gains + (l * H + h) * D;
            bool same = true;
            for (size_t d = 0; d < D / 2 && same; d++)
                same = g[d] == g[d + D / 2];
            if (same)
                continue;
            if (bad++ < 8 && used < sizeof(heads))
                used += (size_t)snprintf(heads + used, sizeof(heads) - used, "%slayer %zu head %zu",
                                         bad > 1 ? ", " : "", l, h);
        }
    if (bad)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "fold gains: gains->dim_gains differ between dimensions d and d + D/2 "
                         "that the rotary embedding turns together, so no query projection "
                         "gives them: %zu head%s (%s%s)",
                         bad, bad == 1 ? "" : "s", heads, bad > 8 ? ", ..." : "");
    return PFX_SUCCESS;
}

/* Scales the query part of one layer's weight (and bias) by the factors. */
static pfx_status fold_layer(pfx_model *m, const pfx_model_prefix *p, size_t l, float *host)
{
    const pfx_model_config *c = &m->cfg;
    const size_t H = c->shape.heads, D = c->shape.head_dim, Q = H * D;
    pfx_tensor *w = m->weights[pfx_model_weight_index(m, l, PFX_W_QKV)].t;
    const size_t bi = pfx_model_weight_index(m, l, PFX_W_QKV_B);
    const size_t n = pfx_tensor_numel(w);
    pfx_status st = pfx_tensor_read(w, 0, n, host);
    if (st != PFX_SUCCESS)
        return st;
    if (c->family == PFX_FAMILY_GPT2) { /* Conv1D [C, 3C]: q is columns 0 .. Q-1 */
        const size_t cols = n / c->shape.hidden;
        for (size_t i = 0; i < c->shape.hidden; i++)
            for (size_t q = 0; q < Q; q++)
                host[i * cols + q] = (float)(host[i * cols + q] * factor(p, H, D, l, q / D, q % D));
    } else { /* Linear [Q + 2 KVD, C]: q is rows 0 .. Q-1 */
        const size_t C = c->shape.hidden;
        for (size_t q = 0; q < Q; q++) {
            const double f = factor(p, H, D, l, q / D, q % D);
            for (size_t i = 0; i < C; i++)
                host[q * C + i] = (float)(host[q * C + i] * f);
        }
    }
    if ((st = pfx_tensor_write(w, 0, n, host)) || bi == SIZE_MAX)
        return st;
    pfx_tensor *b = m->weights[bi].t;
    if ((st = pfx_tensor_read(b, 0, Q, host)))
        return st;
    for (size_t q = 0; q < Q; q++)
        host[q] = (float)(host[q] * factor(p, H, D, l, q / D, q % D));
    return pfx_tensor_write(b, 0, Q, host);
}

pfx_status pfx_model_fold_gains(pfx_model *model, const pfx_model_prefix *gains)
{
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "fold gains: model is NULL");
    if (!gains)
        return pfx_error(model->rt, PFX_ERROR_NULL_ARGUMENT, "fold gains: gains is NULL");
    pfx_status st = check(model, gains);
    if (st != PFX_SUCCESS)
        return st;
    size_t most = 0;
    for (size_t l = 0; l < model->cfg.shape.layers; l++) {
        const size_t n =
            pfx_tensor_numel(model->weights[pfx_model_weight_index(model, l, PFX_W_QKV)].t);
        most = n > most ? n : most;
    }
    float *host = malloc((most ? most : 1) * sizeof(float));
    if (!host)
        return pfx_error(model->rt, PFX_ERROR_OUT_OF_MEMORY, "fold gains: host memory");
    for (size_t l = 0; st == PFX_SUCCESS && l < model->cfg.shape.layers; l++)
        st = fold_layer(model, gains, l, host);
    free(host);
    return st;
}
