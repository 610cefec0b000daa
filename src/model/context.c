/* Contexts (pfx_context_*): the workspace of a model's calls, sized for a
 * capacity and allocated apart from the weights, so that several contexts
 * run over one model. */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define LOGITS_CHUNK_BYTES ((size_t)64 << 20)
#define CONV_MIN_FLOATS    ((size_t)1 << 22)

static const char fn[] = "context_create";

/* params (NULL: defaults) with the defaults filled in, checked against the model. */
static pfx_status check_params(const pfx_model *m, const pfx_context_params *in,
                               pfx_context_params *p)
{
    pfx_runtime *rt = m->rt;
    const pfx_model_config *cfg = &m->cfg;
    if (in)
        *p = *in;
    else
        memset(p, 0, sizeof(*p));
    if (!p->max_batch)
        p->max_batch = 1;
    if (!p->max_tokens)
        p->max_tokens = cfg->shape.max_positions < 1024 ? cfg->shape.max_positions : 1024;
    size_t rows, len;
    if (pfx_mul_overflows(p->max_batch, p->max_tokens, &rows) || rows > ((size_t)1 << 31) ||
        __builtin_add_overflow(p->max_tokens, p->max_prefix_len, &len))
        return pfx_error(
            rt, PFX_ERROR_SIZE_OVERFLOW,
            "%s: params.max_batch %zu x max_tokens %zu (+ max_prefix_len %zu) is too large", fn,
            p->max_batch, p->max_tokens, p->max_prefix_len);
    if (cfg->family == PFX_FAMILY_GPT2 && len > cfg->shape.max_positions)
        return pfx_error(
            rt, PFX_ERROR_OUT_OF_RANGE,
            "%s: params.max_prefix_len %zu + max_tokens %zu exceed n_positions %zu (GPT-2's "
            "learned positions)",
            fn, p->max_prefix_len, p->max_tokens, cfg->shape.max_positions);
    if (cfg->sliding_window && len > cfg->sliding_window)
        return pfx_error(
            rt, PFX_ERROR_UNSUPPORTED,
            "%s: sliding_window %zu is smaller than the requested length %zu (max_prefix_len "
            "+ max_tokens); sliding-window attention is not computed",
            fn, cfg->sliding_window, len);
    return PFX_SUCCESS;
}

/* The workspace of x (its params set): residual streams, the blocks'
 * intermediates (kept per layer without recompute), ids and labels. */
static pfx_status allocate(pfx_context *x)
{
    const pfx_model *m = x->model;
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    const pfx_context_params *p = &x->p;
    const size_t L = s->layers, C = s->hidden, I = s->intermediate, V = s->vocab;
    const size_t QD = s->heads * s->head_dim, KVD = s->kv_heads * s->head_dim;
    const size_t R = p->max_batch * p->max_tokens;
    size_t chunk =
        p->logits_chunk_rows ? p->logits_chunk_rows : LOGITS_CHUNK_BYTES / (V * sizeof(float));
    if (chunk < 1)
        chunk = 1;
    if (chunk > R)
        chunk = R;
    x->chunk_rows = chunk;
    size_t maxk = C > I ? C : I;
    maxk = maxk > QD ? maxk : QD;
    maxk = maxk > V ? maxk : V;
    const bool llama = m->cfg.family == PFX_FAMILY_LLAMA;
    size_t sizes[WS_COUNT] = {
        [WS_LN] = R * C,
        [WS_A] = R * C,
        [WS_Q] = R * QD,
        [WS_K] = R * KVD,
        [WS_V] = R * KVD,
        [WS_O] = R * QD,
        [WS_LSE] = R * s->heads,
        [WS_MEAN1] = R,
        [WS_RSTD1] = R,
        [WS_MEAN2] = R,
        [WS_RSTD2] = R,
        [WS_MEANF] = R,
        [WS_RSTDF] = R,
        [WS_M0] = R * I,
        [WS_M1] = R * I,
        [WS_M2] = llama ? R * I : 0,
        [WS_DH0] = R * C,
        [WS_DH1] = R * C,
        [WS_DLN] = R * C,
        [WS_DA] = R * C,
        [WS_DQ] = R * QD,
        [WS_DK] = R * KVD,
        [WS_DV] = R * KVD,
        [WS_DO] = R * QD,
        [WS_DM] = R * I,
        [WS_LOGITS] = chunk * V,
        [WS_ROWLOSS] = R,
        [WS_CONV] = m->p.storage != PFX_DTYPE_F32
                        ? (64 * maxk > CONV_MIN_FLOATS ? 64 * maxk : CONV_MIN_FLOATS)
                        : 0,
        [WS_QKV] = R * (QD + 2 * KVD),
    };
    if (!(x->hidden = calloc(L + 1, sizeof(*x->hidden))) ||
        (!p->recompute && !(x->kept = calloc(L * PFX_KEPT_COUNT, sizeof(*x->kept)))) ||
        !(x->dim_scaled = malloc(s->heads * s->head_dim * sizeof(float))))
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    pfx_status st = PFX_SUCCESS;
    for (int i = 0; st == PFX_SUCCESS && i < WS_COUNT; i++) {
        int k = pfx_model_kept_slot(x, i);
        for (size_t l = 0; k >= 0 && sizes[i] && l < L && st == PFX_SUCCESS; l++)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &sizes[i],
                                   &x->kept[l * PFX_KEPT_COUNT + (size_t)k]);
        if (k < 0 && sizes[i] && st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &sizes[i], &x->ws[i]);
    }
    for (size_t l = 0; st == PFX_SUCCESS && l <= L; l++) {
        size_t shape[2] = { R, C };
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &x->hidden[l]);
    }
    if (st == PFX_SUCCESS)
        st = pfx_ids_create(rt, R, &x->ids);
    if (st == PFX_SUCCESS)
        st = pfx_ids_create(rt, R, &x->labels);
    if (st == PFX_SUCCESS)
        st = pfx_ids_create(rt, R, &x->positions);
    return st;
}

pfx_status pfx_context_create(pfx_model *model, const pfx_context_params *params, pfx_context **out)
{
    if (!out)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: model is NULL", fn);
    if (model->released)
        return pfx_error(model->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: model was destroyed (its last contexts keep it alive)", fn);
    pfx_context_params p;
    pfx_status st = check_params(model, params, &p);
    if (st != PFX_SUCCESS)
        return st;
    pfx_context *x = calloc(1, sizeof(*x));
    if (!x)
        return pfx_error(model->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    x->model = model;
    x->rt = model->rt;
    x->p = p;
    model->contexts++;
    if ((st = allocate(x)) != PFX_SUCCESS) {
        pfx_context_destroy(&x);
        return st;
    }
    *out = x;
    return PFX_SUCCESS;
}

void pfx_context_destroy(pfx_context **xp)
{
    if (!xp || !*xp)
        return;
    pfx_context *x = *xp;
    pfx_model *m = x->model;
    for (size_t l = 0; x->hidden && l <= m->cfg.shape.layers; l++)
        pfx_tensor_destroy(&x->hidden[l]);
    for (int i = 0; i < WS_COUNT; i++)
        pfx_tensor_destroy(&x->ws[i]);
    for (size_t i = 0; x->kept && i < m->cfg.shape.layers * PFX_KEPT_COUNT; i++)
        pfx_tensor_destroy(&x->kept[i]);
    free(x->kept);
    free(x->hidden);
    free(x->dim_scaled);
    pfx_tensor_destroy(&x->dim_grad);
    pfx_ids_destroy(&x->ids);
    pfx_ids_destroy(&x->labels);
    pfx_ids_destroy(&x->positions);
    free(x);
    *xp = NULL;
    if (--m->contexts == 0 && m->released)
        pfx_model_free(m);
}

pfx_status pfx_context_get_params(const pfx_context *ctx, pfx_context_params *params)
{
    if (!ctx || !params)
        return pfx_error(ctx ? ctx->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "context_get_params: %s is NULL", !ctx ? "ctx" : "params");
    *params = ctx->p;
    params->logits_chunk_rows = ctx->chunk_rows;
    return PFX_SUCCESS;
}

pfx_model *pfx_context_model(const pfx_context *ctx)
{
    return ctx ? ctx->model : NULL;
}
