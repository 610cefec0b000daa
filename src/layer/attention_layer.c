/*
 * The attention layer of a frozen model (include/prefixcl/layer.h), on the
 * ops the models' block uses (ops/model_ops.h): the projections as
 * pfx_gemm_weight products of Linear [out, in] weights, biases and their
 * gradients with pfx_op_bias_add / pfx_op_bias_grad, prefix gain attention
 * (attention.h) in BNHD layouts over views of the workspace. The residual
 * stack is in layer_stack.c, the MSE loss in mse_loss.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_tuning.h"
#include "layer_internal.h"
#include "model_ops.h"

/* ---- helpers ---- */

/* The rows x cols product input or output at the start of t. */
static pfx_gemm_operand gemm_op(const pfx_tensor *t, size_t cols)
{
    return PFX_GEMM_OP(t->mem, 0, cols);
}

/* The first rows of out (cols wide) += the layer's bias `which`. */
static pfx_status add_bias(const pfx_layer *layer, pfx_layer_weight_id which, const pfx_tensor *out,
                           size_t rows, size_t cols)
{
    return pfx_op_bias_add(layer->rt, PFX_MAT(out, rows, cols), PFX_VEC(layer->w[which], 0, cols));
}

static const char *weight_name(pfx_layer_weight_id which)
{
    static const char *const names[PFX_LAYER_WEIGHT_COUNT] = { "Wq", "Wk", "Wv", "Wo",
                                                               "bq", "bk", "bv", "bo" };
    return (unsigned)which < PFX_LAYER_WEIGHT_COUNT ? names[which] : "?";
}

/* ---- lifetime ---- */

void pfx_layer_destroy(pfx_layer **layerp)
{
    if (!layerp || !*layerp)
        return;
    pfx_layer *layer = *layerp;
    for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++)
        pfx_tensor_destroy(&layer->w[i]);
    for (int i = 0; i < WS_COUNT; i++)
        pfx_tensor_destroy(&layer->ws[i]);
    free(layer);
    *layerp = NULL;
}

pfx_status pfx_layer_create(pfx_runtime *rt, const pfx_layer_params *params, pfx_layer **out)
{
    static const char fn[] = "layer_create";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", fn);
    if (!out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!params)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: params is NULL", fn);
    const pfx_layer_params *p = params;
    const struct {
        const char *name;
        size_t value;
    } dims[] = {
        { "model_dim", p->model_dim }, { "heads", p->heads },
        { "kv_heads", p->kv_heads },   { "head_dim", p->head_dim },
        { "max_batch", p->max_batch }, { "max_tokens", p->max_tokens },
    };
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
        if (dims[i].value == 0)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: params.%s is 0", fn, dims[i].name);
    if (p->heads % p->kv_heads)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: params.heads (%zu) is not a multiple of params.kv_heads (%zu)", fn,
                         p->heads, p->kv_heads);
    /* What no forward can run is refused here, not at every forward. */
    if (!pfx_attn_dim_class(p->head_dim))
        return pfx_error(
            rt, PFX_ERROR_UNSUPPORTED,
            "%s: params.head_dim %zu is above the largest head size the attention kernels "
            "support (%d)",
            fn, p->head_dim, PFX_ATTN_MAX_D);
    if (p->gain_mode != PFX_GAIN_OFF && p->gain_mode != PFX_GAIN_LINEAR &&
        p->gain_mode != PFX_GAIN_TANH)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: params.gain_mode %d is unknown", fn,
                         (int)p->gain_mode);
    if (!isfinite(p->scale) || p->scale < 0.0f)
        return pfx_error(rt, isfinite(p->scale) ? PFX_ERROR_INVALID_ARGUMENT : PFX_ERROR_NOT_FINITE,
                         "%s: params.scale (%g) must be finite and >= 0 (0: 1/sqrt(D))", fn,
                         (double)p->scale);
    size_t qdim, kvdim, rows, big, lse;
    if (pfx_mul_overflows(p->heads, p->head_dim, &qdim) ||
        pfx_mul_overflows(p->kv_heads, p->head_dim, &kvdim) ||
        pfx_mul_overflows(p->max_batch, p->max_tokens, &rows) ||
        pfx_mul_overflows(rows, qdim > p->model_dim ? qdim : p->model_dim, &big) ||
        pfx_mul_overflows(big, sizeof(float), &big) || pfx_mul_overflows(rows, p->heads, &lse) ||
        pfx_mul_overflows(lse, sizeof(float), &lse) || pfx_mul_overflows(qdim, p->model_dim, &big))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                         "%s: sizes (C %zu, H %zu, Hkv %zu, D %zu, max_batch %zu, max_tokens %zu) "
                         "overflow size_t",
                         fn, p->model_dim, p->heads, p->kv_heads, p->head_dim, p->max_batch,
                         p->max_tokens);

    pfx_layer *layer = calloc(1, sizeof(*layer));
    if (!layer)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host allocation failed", fn);
    layer->rt = rt;
    layer->p = *p;
    layer->qdim = qdim;
    layer->kvdim = kvdim;
    const size_t C = p->model_dim;
    const size_t shapes[PFX_LAYER_WEIGHT_COUNT][2] = {
        { qdim, C }, { kvdim, C }, { kvdim, C }, { C, qdim },
        { qdim, 0 }, { kvdim, 0 }, { kvdim, 0 }, { C, 0 },
    };
    pfx_status st = PFX_SUCCESS;
    for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT && st == PFX_SUCCESS; i++) {
        if (i >= PFX_LAYER_BQ && !p->bias)
            continue;
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, shapes[i][1] ? 2 : 1, shapes[i], &layer->w[i]);
    }
    const size_t widths[WS_COUNT] = {
        qdim, kvdim, kvdim, qdim, p->heads, qdim, qdim, kvdim, kvdim
    };
    for (int i = 0; i < WS_COUNT && st == PFX_SUCCESS; i++) {
        const size_t numel = rows * widths[i];
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &numel, &layer->ws[i]);
    }
    if (st != PFX_SUCCESS) {
        pfx_layer_destroy(&layer);
        return st;
    }
    *out = layer;
    return PFX_SUCCESS;
}

pfx_status pfx_layer_get_params(const pfx_layer *layer, pfx_layer_params *params)
{
    if (!layer)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "layer_get_params: layer is NULL");
    if (!params)
        return pfx_error(layer->rt, PFX_ERROR_NULL_ARGUMENT, "layer_get_params: params is NULL");
    *params = layer->p;
    return PFX_SUCCESS;
}

pfx_tensor *pfx_layer_weight(const pfx_layer *layer, pfx_layer_weight_id which)
{
    if (!layer || (unsigned)which >= PFX_LAYER_WEIGHT_COUNT)
        return NULL;
    return layer->w[which];
}

size_t pfx_layer_workspace_bytes(const pfx_layer *layer)
{
    size_t total = 0;
    for (int i = 0; layer && i < WS_COUNT; i++)
        total += layer->ws[i]->bytes;
    return total;
}

pfx_status pfx_layer_init_random(pfx_layer *layer, uint64_t seed, float scale)
{
    if (!layer)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "layer_init_random: layer is NULL");
    if (!isfinite(scale) || scale < 0.0f)
        return pfx_error(layer->rt,
                         isfinite(scale) ? PFX_ERROR_INVALID_ARGUMENT : PFX_ERROR_NOT_FINITE,
                         "layer_init_random: scale (%g) must be finite and >= 0", (double)scale);
    size_t largest = 0;
    for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++)
        if (layer->w[i] && layer->w[i]->numel > largest)
            largest = layer->w[i]->numel;
    float *host = malloc(largest * sizeof(float));
    if (!host)
        return pfx_error(layer->rt, PFX_ERROR_OUT_OF_MEMORY,
                         "layer_init_random: host allocation failed");
    uint64_t state = seed;
    pfx_status st = PFX_SUCCESS;
    for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT && st == PFX_SUCCESS; i++) {
        pfx_tensor *t = layer->w[i];
        if (!t)
            continue;
        size_t fan_in = (i == PFX_LAYER_WO || i == PFX_LAYER_BO) ? layer->qdim : layer->p.model_dim;
        float a = scale / sqrtf((float)fan_in);
        for (size_t j = 0; j < t->numel; j++) {
            float u = (float)(pfx_splitmix64(&state) >> 40) * 0x1p-24f;
            host[j] = a * (2.0f * u - 1.0f);
        }
        st = pfx_tensor_write(t, 0, t->numel, host);
    }
    free(host);
    return st;
}

/* ---- validation ---- */

static pfx_status check_act(const pfx_layer *layer, const char *fn, const char *name,
                            const pfx_tensor *t, size_t b, size_t n)
{
    pfx_runtime *rt = layer->rt;
    if (!t)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn, name);
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "%s: %s belongs to another runtime than the layer", fn, name);
    if (t->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s must be float32", fn, name);
    if (t->ndim != 3 || t->shape[2] != layer->p.model_dim || (b && t->shape[0] != b) ||
        (n && t->shape[1] != n))
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: %s has shape [%zu, %zu, %zu] (ndim %u), expected [B, N, C=%zu]%s", fn,
                         name, t->shape[0], t->ndim > 1 ? t->shape[1] : 0,
                         t->ndim > 2 ? t->shape[2] : 0, t->ndim, layer->p.model_dim,
                         b ? " like x" : "");
    if (!b && (t->shape[0] > layer->p.max_batch || t->shape[1] > layer->p.max_tokens))
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: %s has B=%zu, N=%zu beyond the layer's max_batch %zu / "
                         "max_tokens %zu",
                         fn, name, t->shape[0], t->shape[1], layer->p.max_batch,
                         layer->p.max_tokens);
    return PFX_SUCCESS;
}

static pfx_status check_prefix(const pfx_layer *layer, const char *fn, const pfx_layer_prefix *pre)
{
    pfx_runtime *rt = layer->rt;
    if (!pre)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: prefix is NULL", fn);
    const pfx_tensor *g = pre->gain_tensor;
    if (layer->p.gain_mode != PFX_GAIN_OFF && g) {
        if (g->rt != rt)
            return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                             "%s: prefix.gain_tensor belongs to another runtime than the layer",
                             fn);
        if (g->dtype != PFX_DTYPE_F32)
            return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: prefix.gain_tensor must be float32",
                             fn);
        if (g->ndim != 1 || g->shape[0] != layer->p.heads)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                             "%s: prefix.gain_tensor must have shape [H=%zu]", fn, layer->p.heads);
    } else if (layer->p.gain_mode != PFX_GAIN_OFF) {
        if (!pre->gain)
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                             "%s: prefix.gain and prefix.gain_tensor are NULL with a gain mode",
                             fn);
        for (size_t h = 0; h < layer->p.heads; h++)
            if (!isfinite(pre->gain[h]))
                return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: prefix.gain[%zu] is %g", fn, h,
                                 (double)pre->gain[h]);
    }
    if (!isfinite(pre->gain_ramp) || pre->gain_ramp < 0.0f || pre->gain_ramp > 1.0f)
        return pfx_error(
            rt, isfinite(pre->gain_ramp) ? PFX_ERROR_INVALID_ARGUMENT : PFX_ERROR_NOT_FINITE,
            "%s: prefix.gain_ramp (%g) must be in [0, 1]", fn, (double)pre->gain_ramp);
    if (layer->p.prefix_len == 0) {
        if (pre->k || pre->v)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "%s: prefix.%s given but the layer has prefix_len 0", fn,
                             pre->k ? "k" : "v");
        return PFX_SUCCESS;
    }
    const pfx_tensor *kv[2] = { pre->k, pre->v };
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "prefix.v" : "prefix.k";
        const pfx_tensor *t = kv[i];
        if (!t)
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL (prefix_len %zu)", fn,
                             name, layer->p.prefix_len);
        if (t->rt != rt)
            return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                             "%s: %s belongs to another runtime than the layer", fn, name);
        if (t->ndim != 3 || t->shape[0] != layer->p.kv_heads ||
            t->shape[1] != layer->p.prefix_len || t->shape[2] != layer->p.head_dim)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                             "%s: %s must have shape [Hkv=%zu, P=%zu, D=%zu]", fn, name,
                             layer->p.kv_heads, layer->p.prefix_len, layer->p.head_dim);
    }
    return PFX_SUCCESS;
}

static pfx_attention_desc make_desc(const pfx_layer *layer, size_t b, size_t n,
                                    const pfx_layer_prefix *pre)
{
    pfx_attention_desc d;
    pfx_attention_desc_init(&d);
    d.batch = b;
    d.heads = layer->p.heads;
    d.kv_heads = layer->p.kv_heads;
    d.queries = n;
    d.keys = n;
    d.prefix_len = layer->p.prefix_len;
    d.head_dim = layer->p.head_dim;
    d.q_layout = d.kv_layout = d.o_layout = PFX_LAYOUT_BNHD;
    d.causal = layer->p.causal;
    d.scale = layer->p.scale;
    d.gain_mode = layer->p.gain_mode;
    d.gain = layer->p.gain_mode != PFX_GAIN_OFF ? pre->gain : NULL;
    d.gain_tensor = layer->p.gain_mode != PFX_GAIN_OFF ? pre->gain_tensor : NULL;
    d.gain_ramp = pre->gain_ramp;
    return d;
}

/* ---- forward ---- */

pfx_status pfx_layer_forward(pfx_layer *layer, const pfx_tensor *x, const pfx_layer_prefix *prefix,
                             pfx_tensor *y)
{
    static const char fn[] = "layer_forward";
    if (!layer)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: layer is NULL", fn);
    pfx_runtime *rt = layer->rt;
    pfx_status st;
    if ((st = check_act(layer, fn, "x", x, 0, 0)) || (st = check_act(layer, fn, "y", y, 0, 0)))
        return st;
    const size_t B = x->shape[0], N = x->shape[1], C = layer->p.model_dim;
    if ((st = check_act(layer, fn, "y", y, B, N)) || (st = check_prefix(layer, fn, prefix)))
        return st;
    if (x == y || x->mem == y->mem)
        return pfx_error(rt, PFX_ERROR_ALIASING, "%s: y is the same tensor as x", fn);
    if ((prefix->k && prefix->k->mem == y->mem) || (prefix->v && prefix->v->mem == y->mem))
        return pfx_error(rt, PFX_ERROR_ALIASING, "%s: y is the same tensor as a prefix", fn);

    const size_t H = layer->p.heads, Hkv = layer->p.kv_heads, D = layer->p.head_dim;
    const size_t rows = B * N, qd = layer->qdim, kvd = layer->kvdim;
    pfx_tensor q = pfx_tensor_view(layer->ws[WS_Q], 4, B, N, H, D);
    pfx_tensor k = pfx_tensor_view(layer->ws[WS_K], 4, B, N, Hkv, D);
    pfx_tensor v = pfx_tensor_view(layer->ws[WS_V], 4, B, N, Hkv, D);
    pfx_tensor o = pfx_tensor_view(layer->ws[WS_O], 4, B, N, H, D);
    pfx_tensor lse = pfx_tensor_view(layer->ws[WS_LSE], 3, B, H, N, 0);
    pfx_attention_desc d = make_desc(layer, B, N, prefix);
    pfx_attention_inputs in = { &q, &k, &v, prefix->k, prefix->v };

    layer->have_forward = false;
    /* Q, K, V = X W^T (+ b): Linear weights [width, C] */
    const struct {
        int ws;
        int w;
        int b;
        size_t width;
        const char *what;
    } proj[3] = {
        { WS_Q, PFX_LAYER_WQ, PFX_LAYER_BQ, qd, "layer_forward: Q = X Wq^T" },
        { WS_K, PFX_LAYER_WK, PFX_LAYER_BK, kvd, "layer_forward: K = X Wk^T" },
        { WS_V, PFX_LAYER_WV, PFX_LAYER_BV, kvd, "layer_forward: V = X Wv^T" },
    };
    for (int i = 0; i < 3; i++) {
        const pfx_tensor *z = layer->ws[proj[i].ws];
        const size_t width = proj[i].width;
        st = pfx_gemm_weight(rt, proj[i].what, rows, width, C, 1.0f, gemm_op(x, C),
                             PFX_MAT(layer->w[proj[i].w], width, C), true, 0.0f, gemm_op(z, width),
                             NULL);
        if (st == PFX_SUCCESS && layer->p.bias)
            st = add_bias(layer, proj[i].b, z, rows, width);
        if (st != PFX_SUCCESS)
            return st;
    }
    st = pfx_attention_forward(rt, &d, &in, &o, &lse);
    if (st != PFX_SUCCESS)
        return st;
    /* Y = O Wo^T (+ bo) (+ X): with the residual, X + bo is the product's starting value
     * (beta 1), so the product's sum is rounded once into it */
    const bool residual = layer->p.residual;
    if (residual)
        st = pfx_tensor_copy(y, x);
    if (st == PFX_SUCCESS && residual && layer->p.bias)
        st = add_bias(layer, PFX_LAYER_BO, y, rows, C);
    if (st == PFX_SUCCESS)
        st = pfx_gemm_weight(rt, "layer_forward: Y = O Wo^T", rows, C, qd, 1.0f,
                             gemm_op(layer->ws[WS_O], qd), PFX_MAT(layer->w[PFX_LAYER_WO], C, qd),
                             true, residual ? 1.0f : 0.0f, gemm_op(y, C), NULL);
    if (st == PFX_SUCCESS && !residual && layer->p.bias)
        st = add_bias(layer, PFX_LAYER_BO, y, rows, C);
    if (st != PFX_SUCCESS)
        return st;
    layer->have_forward = true;
    layer->fwd_b = B;
    layer->fwd_n = N;
    layer->fwd_x = x->mem;
    return PFX_SUCCESS;
}

/* ---- backward ---- */

static pfx_status check_grad(const pfx_layer *layer, const char *fn, const char *name,
                             const pfx_tensor *t, unsigned ndim, const size_t *shape)
{
    pfx_runtime *rt = layer->rt;
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "%s: %s belongs to another runtime than the layer", fn, name);
    if (t->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s must be float32", fn, name);
    bool same = t->ndim == ndim;
    for (unsigned i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s has the wrong shape (ndim %u)", fn,
                         name, t->ndim);
    return PFX_SUCCESS;
}

pfx_status pfx_layer_backward(pfx_layer *layer, const pfx_tensor *x, const pfx_layer_prefix *prefix,
                              const pfx_tensor *dy, const pfx_layer_grads *grads)
{
    static const char fn[] = "layer_backward";
    if (!layer)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: layer is NULL", fn);
    pfx_runtime *rt = layer->rt;
    if (!grads)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: grads is NULL", fn);
    pfx_status st;
    if ((st = check_act(layer, fn, "x", x, 0, 0)))
        return st;
    const size_t B = x->shape[0], N = x->shape[1], C = layer->p.model_dim;
    if ((st = check_act(layer, fn, "dy", dy, B, N)) || (st = check_prefix(layer, fn, prefix)))
        return st;
    if (!layer->have_forward)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: no forward of this layer to take the gradient of", fn);
    if (layer->fwd_b != B || layer->fwd_n != N || layer->fwd_x != x->mem)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: x is not the input of the layer's most recent forward", fn);
    const size_t H = layer->p.heads, Hkv = layer->p.kv_heads, D = layer->p.head_dim;
    const size_t P = layer->p.prefix_len, qd = layer->qdim, kvd = layer->kvdim, rows = B * N;

    /* validate every gradient output */
    const pfx_tensor *outs[4 + PFX_LAYER_WEIGHT_COUNT] = { grads->dx, grads->dprefix_k,
                                                           grads->dprefix_v, grads->dgain };
    const char *out_names[4 + PFX_LAYER_WEIGHT_COUNT] = { "grads.dx", "grads.dprefix_k",
                                                          "grads.dprefix_v", "grads.dgain" };
    char wnames[PFX_LAYER_WEIGHT_COUNT][32];
    if (grads->dx && (st = check_act(layer, fn, "grads.dx", grads->dx, B, N)))
        return st;
    const size_t pshape[3] = { Hkv, P, D }, gshape[1] = { H };
    if ((grads->dprefix_k || grads->dprefix_v) && P == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: grads.dprefix_%s given but the layer has prefix_len 0", fn,
                         grads->dprefix_k ? "k" : "v");
    if (grads->dprefix_k &&
        (st = check_grad(layer, fn, "grads.dprefix_k", grads->dprefix_k, 3, pshape)))
        return st;
    if (grads->dprefix_v &&
        (st = check_grad(layer, fn, "grads.dprefix_v", grads->dprefix_v, 3, pshape)))
        return st;
    if (grads->dgain && (st = check_grad(layer, fn, "grads.dgain", grads->dgain, 1, gshape)))
        return st;
    for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++) {
        snprintf(wnames[i], sizeof(wnames[i]), "grads.dweight[%s]",
                 weight_name((pfx_layer_weight_id)i));
        outs[4 + i] = grads->dweight[i];
        out_names[4 + i] = wnames[i];
        if (!grads->dweight[i])
            continue;
        if (!layer->w[i])
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "%s: %s given but the layer has no biases", fn, wnames[i]);
        if ((st = check_grad(layer, fn, wnames[i], grads->dweight[i], layer->w[i]->ndim,
                             layer->w[i]->shape)))
            return st;
    }
    /* no output may alias an input or another output */
    const pfx_tensor *ins[3] = { x, dy, prefix->k };
    const pfx_tensor *ins2[2] = { prefix->v, NULL };
    for (int i = 0; i < 4 + PFX_LAYER_WEIGHT_COUNT; i++) {
        if (!outs[i])
            continue;
        for (int j = 0; j < 3; j++)
            if (ins[j] && ins[j]->mem == outs[i]->mem)
                return pfx_error(rt, PFX_ERROR_ALIASING, "%s: output %s is also an input", fn,
                                 out_names[i]);
        if (ins2[0] && ins2[0]->mem == outs[i]->mem)
            return pfx_error(rt, PFX_ERROR_ALIASING, "%s: output %s is also an input", fn,
                             out_names[i]);
        for (int j = 0; j < i; j++)
            if (outs[j] && outs[j]->mem == outs[i]->mem)
                return pfx_error(rt, PFX_ERROR_ALIASING, "%s: outputs %s and %s are the same", fn,
                                 out_names[j], out_names[i]);
        for (int w = 0; w < PFX_LAYER_WEIGHT_COUNT; w++)
            if (layer->w[w] && layer->w[w]->mem == outs[i]->mem)
                return pfx_error(rt, PFX_ERROR_ALIASING,
                                 "%s: output %s is the layer's own weight %s", fn, out_names[i],
                                 weight_name((pfx_layer_weight_id)w));
    }

    const bool acc = grads->accumulate;
    const float pbeta = acc ? 1.0f : 0.0f;
    pfx_tensor q = pfx_tensor_view(layer->ws[WS_Q], 4, B, N, H, D);
    pfx_tensor k = pfx_tensor_view(layer->ws[WS_K], 4, B, N, Hkv, D);
    pfx_tensor v = pfx_tensor_view(layer->ws[WS_V], 4, B, N, Hkv, D);
    pfx_tensor o = pfx_tensor_view(layer->ws[WS_O], 4, B, N, H, D);
    pfx_tensor lse = pfx_tensor_view(layer->ws[WS_LSE], 3, B, H, N, 0);
    pfx_tensor d_o = pfx_tensor_view(layer->ws[WS_DO], 4, B, N, H, D);
    pfx_tensor dq = pfx_tensor_view(layer->ws[WS_DQ], 4, B, N, H, D);
    pfx_tensor dk = pfx_tensor_view(layer->ws[WS_DK], 4, B, N, Hkv, D);
    pfx_tensor dv = pfx_tensor_view(layer->ws[WS_DV], 4, B, N, Hkv, D);

    /* output projection: dO = dY Wo, dWo = dY^T O, dbo = colsum dY */
    st = pfx_gemm_weight(rt, "layer_backward: dO = dY Wo", rows, qd, C, 1.0f, gemm_op(dy, C),
                         PFX_MAT(layer->w[PFX_LAYER_WO], C, qd), false, 0.0f, gemm_op(&d_o, qd),
                         NULL);
    if (st == PFX_SUCCESS && grads->dweight[PFX_LAYER_WO])
        st = pfx_gemm(rt, "layer_backward: dWo = dY^T O", true, false, C, qd, rows, 1.0f,
                      gemm_op(dy, C), gemm_op(&o, qd), pbeta,
                      gemm_op(grads->dweight[PFX_LAYER_WO], qd));
    if (st == PFX_SUCCESS && grads->dweight[PFX_LAYER_BO])
        st = pfx_op_bias_grad(rt, PFX_MAT(dy, rows, C), PFX_VEC(grads->dweight[PFX_LAYER_BO], 0, C),
                              acc);
    if (st != PFX_SUCCESS)
        return st;

    /* attention */
    pfx_attention_desc d = make_desc(layer, B, N, prefix);
    pfx_attention_inputs in = { &q, &k, &v, prefix->k, prefix->v };
    bool want_gain = grads->dgain && layer->p.gain_mode != PFX_GAIN_OFF;
    pfx_attention_grads ag = { .dq = &dq,
                               .dk = &dk,
                               .dv = &dv,
                               .dprefix_k = grads->dprefix_k,
                               .dprefix_v = grads->dprefix_v,
                               .dgain = want_gain ? grads->dgain : NULL,
                               .accumulate = false };
    if (acc && (grads->dprefix_k || grads->dprefix_v || want_gain)) {
        /* dQ/dK/dV are overwritten, the parameter gradients accumulated:
         * two calls would recompute; instead accumulate everything and clear
         * dQ/dK/dV first. */
        ag.accumulate = true;
        if ((st = pfx_tensor_fill(&dq, 0.0f)) || (st = pfx_tensor_fill(&dk, 0.0f)) ||
            (st = pfx_tensor_fill(&dv, 0.0f)))
            return st;
    }
    st = pfx_attention_backward(rt, &d, &in, &o, &lse, &d_o, &ag);
    if (st != PFX_SUCCESS)
        return st;
    if (grads->dgain && !want_gain && !acc && (st = pfx_tensor_fill(grads->dgain, 0.0f)))
        return st;

    /* projections: dX = (dY +) dQ Wq + dK Wk + dV Wv, dW = dZ^T X, db = colsum dZ */
    const struct {
        const pfx_tensor *dz;
        int w;
        int b;
        size_t width;
        const char *dx, *dw;
    } proj[3] = {
        { &dq, PFX_LAYER_WQ, PFX_LAYER_BQ, qd, "layer_backward: dX += dQ Wq",
          "layer_backward: dWq = dQ^T X" },
        { &dk, PFX_LAYER_WK, PFX_LAYER_BK, kvd, "layer_backward: dX += dK Wk",
          "layer_backward: dWk = dK^T X" },
        { &dv, PFX_LAYER_WV, PFX_LAYER_BV, kvd, "layer_backward: dX += dV Wv",
          "layer_backward: dWv = dV^T X" },
    };
    float xbeta = 0.0f;
    if (grads->dx && layer->p.residual) {
        if ((st = pfx_tensor_copy(grads->dx, dy)))
            return st;
        xbeta = 1.0f;
    }
    for (int i = 0; i < 3; i++) {
        const pfx_tensor *dz = proj[i].dz;
        const size_t width = proj[i].width;
        if (grads->dx) {
            st = pfx_gemm_weight(rt, proj[i].dx, rows, C, width, 1.0f, gemm_op(dz, width),
                                 PFX_MAT(layer->w[proj[i].w], width, C), false, xbeta,
                                 gemm_op(grads->dx, C), NULL);
            xbeta = 1.0f;
        }
        if (st == PFX_SUCCESS && grads->dweight[proj[i].w])
            st = pfx_gemm(rt, proj[i].dw, true, false, width, C, rows, 1.0f, gemm_op(dz, width),
                          gemm_op(x, C), pbeta, gemm_op(grads->dweight[proj[i].w], C));
        if (st == PFX_SUCCESS && grads->dweight[proj[i].b])
            st = pfx_op_bias_grad(rt, PFX_MAT(dz, rows, width),
                                  PFX_VEC(grads->dweight[proj[i].b], 0, width), acc);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

/* ---- analysis ---- */

pfx_status pfx_layer_attention_stats(pfx_layer *layer, const pfx_layer_prefix *prefix,
                                     unsigned top_k, pfx_tensor *entropy, pfx_tensor *topk_mass,
                                     pfx_tensor *prefix_mass)
{
    static const char fn[] = "layer_attention_stats";
    if (!layer)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: layer is NULL", fn);
    pfx_runtime *rt = layer->rt;
    pfx_status st = check_prefix(layer, fn, prefix);
    if (st != PFX_SUCCESS)
        return st;
    if (!layer->have_forward)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: no forward of this layer to analyse",
                         fn);
    const size_t B = layer->fwd_b, N = layer->fwd_n;
    const size_t H = layer->p.heads, Hkv = layer->p.kv_heads, D = layer->p.head_dim;
    pfx_tensor q = pfx_tensor_view(layer->ws[WS_Q], 4, B, N, H, D);
    pfx_tensor k = pfx_tensor_view(layer->ws[WS_K], 4, B, N, Hkv, D);
    pfx_tensor v = pfx_tensor_view(layer->ws[WS_V], 4, B, N, Hkv, D);
    pfx_attention_desc d = make_desc(layer, B, N, prefix);
    pfx_attention_inputs in = { &q, &k, &v, prefix->k, prefix->v };
    return pfx_attention_stats(rt, &d, &in, top_k, entropy, topk_mass, prefix_mass);
}
