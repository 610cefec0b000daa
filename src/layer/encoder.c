/*
 * The prefix encoder (include/prefixcl/encoder.h): E -> Linear -> tanh ->
 * Linear, products through the CLBlast wrapper (ops/gemm.h), bias + tanh, its
 * backward and the scatter / gather between Y [m][L][2][Hkv][D] and the
 * per-layer prefixes [Hkv, m, D] in cl/encoder.cl.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "gemm.h"

/* cl/encoder.cl has no tunables; registered as ("encoder", "") in ops/registry.c. */
#define ENCODER_PROGRAM "encoder"
#define ENCODER_OPTIONS ""

struct pfx_encoder {
    pfx_runtime *rt;
    pfx_encoder_params p; /* p.direct tracks the current mode (bake sets it) */
    size_t width;         /* Hkv * D: one prefix position of one tensor */
    size_t out_dim;       /* O = 2 * L * Hkv * D */

    /* MLP mode */
    pfx_tensor *param[PFX_ENCODER_PARAM_COUNT];
    cl_mem y; /* [m, O]: Y in forward, dY in backward */
    size_t y_bytes;
    cl_mem t;  /* [m, h]: hidden activations T */
    cl_mem dt; /* [m, h]: dT, then dA in place */
    size_t t_bytes;
    cl_mem ones; /* [m] of 1.0f: fixed-order column sums by GEMM */
    size_t ones_bytes;

    /* direct mode: prefix[2l] = Kp_l, prefix[2l + 1] = Vp_l */
    pfx_tensor **prefix;
};

/* ---- sizes ---- */

typedef struct sizes {
    size_t width, out_dim, baked, mlp;
} sizes;

static pfx_status check_params(pfx_runtime *rt, const char *fn, const pfx_encoder_params *p,
                               sizes *s)
{
    if (!p)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: params is NULL", fn);
    const struct {
        const char *name;
        size_t value;
        bool needed;
    } dims[] = {
        { "layers", p->layers, true },
        { "kv_heads", p->kv_heads, true },
        { "head_dim", p->head_dim, true },
        { "prefix_len", p->prefix_len, true },
        { "embed_dim", p->embed_dim, !p->direct },
        { "hidden_dim", p->hidden_dim, !p->direct },
    };
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
        if (dims[i].needed && dims[i].value == 0)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: params.%s is 0", fn, dims[i].name);
    if (p->prefix_dtype != PFX_DTYPE_F32 && p->prefix_dtype != PFX_DTYPE_F16)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: params.prefix_dtype %d is unknown",
                         fn, (int)p->prefix_dtype);
    sizes r = { 0, 0, 0, 0 };
    bool over = pfx_mul_overflows(p->kv_heads, p->head_dim, &r.width) ||
                pfx_mul_overflows(r.width, p->layers, &r.out_dim) ||
                pfx_mul_overflows(r.out_dim, 2, &r.out_dim) ||
                pfx_mul_overflows(r.out_dim, p->prefix_len, &r.baked);
    if (!over && !p->direct) {
        size_t me, he, oh;
        over = pfx_mul_overflows(p->prefix_len, p->embed_dim, &me) ||
               pfx_mul_overflows(p->hidden_dim, p->embed_dim, &he) ||
               pfx_mul_overflows(r.out_dim, p->hidden_dim, &oh) ||
               __builtin_add_overflow(me, he, &r.mlp) ||
               __builtin_add_overflow(r.mlp, p->hidden_dim, &r.mlp) ||
               __builtin_add_overflow(r.mlp, oh, &r.mlp) ||
               __builtin_add_overflow(r.mlp, r.out_dim, &r.mlp);
    }
    if (over)
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                         "%s: params (layers %zu, kv_heads %zu, head_dim %zu, prefix_len %zu, "
                         "embed_dim %zu, hidden_dim %zu) overflow size_t",
                         fn, p->layers, p->kv_heads, p->head_dim, p->prefix_len, p->embed_dim,
                         p->hidden_dim);
    *s = r;
    return PFX_SUCCESS;
}

pfx_status pfx_encoder_params_counts(const pfx_encoder_params *params,
                                     pfx_encoder_param_counts *counts)
{
    if (!counts)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "encoder_params_counts: counts is NULL");
    sizes s = { 0 }; /* check_params fills it on success; GCC cannot see that */
    pfx_status st = check_params(NULL, "encoder_params_counts", params, &s);
    if (st != PFX_SUCCESS)
        return st;
    counts->mlp = s.mlp;
    counts->trainable = params->direct ? s.baked : s.mlp;
    counts->baked_per_position = s.out_dim;
    counts->baked = s.baked;
    return PFX_SUCCESS;
}

/* ---- lifetime ---- */

static void free_mlp(pfx_encoder *enc)
{
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        pfx_tensor_destroy(&enc->param[i]);
    pfx_buffer_release(enc->rt, enc->y, enc->y_bytes);
    pfx_buffer_release(enc->rt, enc->t, enc->t_bytes);
    pfx_buffer_release(enc->rt, enc->dt, enc->t_bytes);
    pfx_buffer_release(enc->rt, enc->ones, enc->ones_bytes);
    enc->y = enc->t = enc->dt = enc->ones = NULL;
}

static void free_prefixes(pfx_runtime *rt, pfx_tensor **prefix, size_t count)
{
    (void)rt;
    if (!prefix)
        return;
    for (size_t i = 0; i < count; i++)
        pfx_tensor_destroy(&prefix[i]);
    free(prefix);
}

/* 2L tensors [Hkv, m, D] of the prefix dtype. */
static pfx_status create_prefixes(pfx_encoder *enc, pfx_tensor ***out)
{
    size_t count = 2 * enc->p.layers;
    pfx_tensor **prefix = calloc(count, sizeof(*prefix));
    if (!prefix)
        return pfx_error(enc->rt, PFX_ERROR_OUT_OF_MEMORY, "encoder: host allocation failed");
    const size_t shape[3] = { enc->p.kv_heads, enc->p.prefix_len, enc->p.head_dim };
    for (size_t i = 0; i < count; i++) {
        pfx_status st = pfx_tensor_create(enc->rt, enc->p.prefix_dtype, 3, shape, &prefix[i]);
        if (st != PFX_SUCCESS) {
            free_prefixes(enc->rt, prefix, count);
            return st;
        }
    }
    *out = prefix;
    return PFX_SUCCESS;
}

void pfx_encoder_destroy(pfx_encoder **encp)
{
    if (!encp || !*encp)
        return;
    pfx_encoder *enc = *encp;
    free_mlp(enc);
    free_prefixes(enc->rt, enc->prefix, 2 * enc->p.layers);
    free(enc);
    *encp = NULL;
}

pfx_status pfx_encoder_create(pfx_runtime *rt, const pfx_encoder_params *params, pfx_encoder **out)
{
    static const char fn[] = "encoder_create";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", fn);
    if (!out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    sizes s = { 0 }; /* check_params fills it on success; GCC cannot see that */
    pfx_status st = check_params(rt, fn, params, &s);
    if (st != PFX_SUCCESS)
        return st;
    /* The kernels index one prefix block with 32-bit positions and columns. */
    if (params->prefix_len > UINT32_MAX || s.width > UINT32_MAX)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: prefix_len %zu or kv_heads * head_dim %zu exceeds 2^32 - 1", fn,
                         params->prefix_len, s.width);

    pfx_encoder *enc = calloc(1, sizeof(*enc));
    if (!enc)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host allocation failed", fn);
    enc->rt = rt;
    enc->p = *params;
    enc->width = s.width;
    enc->out_dim = s.out_dim;
    if (enc->p.direct) {
        enc->p.embed_dim = enc->p.hidden_dim = 0;
        st = create_prefixes(enc, &enc->prefix);
        if (st != PFX_SUCCESS)
            goto fail;
        *out = enc;
        return PFX_SUCCESS;
    }

    const size_t m = params->prefix_len, e = params->embed_dim, h = params->hidden_dim;
    const size_t shapes[PFX_ENCODER_PARAM_COUNT][2] = {
        { m, e }, { h, e }, { h, 0 }, { s.out_dim, h }, { s.out_dim, 0 }
    };
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++) {
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, shapes[i][1] ? 2 : 1, shapes[i], &enc->param[i]);
        if (st != PFX_SUCCESS)
            goto fail;
    }
    if (pfx_mul_overflows(m * s.out_dim, sizeof(float), &enc->y_bytes) ||
        pfx_mul_overflows(m * h, sizeof(float), &enc->t_bytes)) {
        /* m * O and m * h cannot overflow: the parameters W2 (O x h) and E
         * exist. Their byte sizes could in principle. */
        st = pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "%s: workspace size overflows size_t", fn);
        goto fail;
    }
    enc->ones_bytes = m * sizeof(float);
    float *ones = malloc(enc->ones_bytes);
    if (!ones) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host allocation failed", fn);
        goto fail;
    }
    for (size_t i = 0; i < m; i++)
        ones[i] = 1.0f;
    st = pfx_buffer_create(rt, enc->ones_bytes, ones, &enc->ones);
    free(ones);
    if (st == PFX_SUCCESS)
        st = pfx_buffer_create(rt, enc->y_bytes, NULL, &enc->y);
    if (st == PFX_SUCCESS)
        st = pfx_buffer_create(rt, enc->t_bytes, NULL, &enc->t);
    if (st == PFX_SUCCESS)
        st = pfx_buffer_create(rt, enc->t_bytes, NULL, &enc->dt);
    if (st != PFX_SUCCESS)
        goto fail;
    *out = enc;
    return PFX_SUCCESS;
fail:
    pfx_encoder_destroy(&enc);
    return st;
}

/* ---- accessors ---- */

pfx_status pfx_encoder_get_params(const pfx_encoder *enc, pfx_encoder_params *params)
{
    if (!enc)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "encoder_get_params: enc is NULL");
    if (!params)
        return pfx_error(enc->rt, PFX_ERROR_NULL_ARGUMENT, "encoder_get_params: params is NULL");
    *params = enc->p;
    return PFX_SUCCESS;
}

pfx_status pfx_encoder_counts(const pfx_encoder *enc, pfx_encoder_param_counts *counts)
{
    if (!enc)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "encoder_counts: enc is NULL");
    if (!counts)
        return pfx_error(enc->rt, PFX_ERROR_NULL_ARGUMENT, "encoder_counts: counts is NULL");
    return pfx_encoder_params_counts(&enc->p, counts);
}

bool pfx_encoder_is_direct(const pfx_encoder *enc)
{
    return enc && enc->p.direct;
}

pfx_tensor *pfx_encoder_tensor(const pfx_encoder *enc, pfx_encoder_param which)
{
    if (!enc || enc->p.direct || (unsigned)which >= PFX_ENCODER_PARAM_COUNT)
        return NULL;
    return enc->param[which];
}

const char *pfx_encoder_param_name(pfx_encoder_param which)
{
    static const char *const names[PFX_ENCODER_PARAM_COUNT] = {
        "prefix_encoder.embedding.weight", "prefix_encoder.transform.0.weight",
        "prefix_encoder.transform.0.bias", "prefix_encoder.transform.2.weight",
        "prefix_encoder.transform.2.bias",
    };
    return (unsigned)which < PFX_ENCODER_PARAM_COUNT ? names[which] : NULL;
}

pfx_tensor *pfx_encoder_prefix_k(const pfx_encoder *enc, size_t layer)
{
    if (!enc || !enc->p.direct || layer >= enc->p.layers)
        return NULL;
    return enc->prefix[2 * layer];
}

pfx_tensor *pfx_encoder_prefix_v(const pfx_encoder *enc, size_t layer)
{
    if (!enc || !enc->p.direct || layer >= enc->p.layers)
        return NULL;
    return enc->prefix[2 * layer + 1];
}

/* ---- initialization ---- */

static pfx_status fill_uniform(pfx_tensor *t, uint64_t *state, float a, float *host)
{
    for (size_t i = 0; i < t->numel; i++) {
        float u = (float)(pfx_splitmix64(state) >> 40) * 0x1p-24f; /* [0, 1), exact */
        host[i] = a * (2.0f * u - 1.0f);
    }
    return pfx_tensor_write(t, 0, t->numel, host);
}

pfx_status pfx_encoder_init_random(pfx_encoder *enc, uint64_t seed, float scale)
{
    if (!enc)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "encoder_init_random: enc is NULL");
    if (!isfinite(scale) || scale < 0.0f)
        return pfx_error(enc->rt,
                         isfinite(scale) ? PFX_ERROR_INVALID_ARGUMENT : PFX_ERROR_NOT_FINITE,
                         "encoder_init_random: scale (%g) must be finite and >= 0", (double)scale);
    size_t count = enc->p.direct ? 2 * enc->p.layers : PFX_ENCODER_PARAM_COUNT;
    pfx_tensor **list = enc->p.direct ? enc->prefix : enc->param;
    size_t largest = 0;
    for (size_t i = 0; i < count; i++)
        largest = list[i]->numel > largest ? list[i]->numel : largest;
    float *host = malloc(largest * sizeof(float));
    if (!host)
        return pfx_error(enc->rt, PFX_ERROR_OUT_OF_MEMORY,
                         "encoder_init_random: host allocation failed");
    uint64_t state = seed;
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; i < count && st == PFX_SUCCESS; i++) {
        float a = scale;
        if (!enc->p.direct && (i == PFX_ENCODER_W1 || i == PFX_ENCODER_B1))
            a = scale / sqrtf((float)enc->p.embed_dim);
        else if (!enc->p.direct && (i == PFX_ENCODER_W2 || i == PFX_ENCODER_B2))
            a = scale / sqrtf((float)enc->p.hidden_dim);
        st = fill_uniform(list[i], &state, a, host);
    }
    free(host);
    return st;
}

/* ---- validation of prefix tensors ---- */

static pfx_status check_prefix(const pfx_encoder *enc, const char *fn, const char *arg, size_t l,
                               const pfx_tensor *t)
{
    pfx_runtime *rt = enc->rt;
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "%s: %s[%zu] belongs to another runtime than the encoder", fn, arg, l);
    if (t->dtype != PFX_DTYPE_F32 && t->dtype != PFX_DTYPE_F16)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s[%zu] has dtype %d", fn, arg, l,
                         (int)t->dtype);
    if (t->ndim != 3 || t->shape[0] != enc->p.kv_heads || t->shape[1] != enc->p.prefix_len ||
        t->shape[2] != enc->p.head_dim)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: %s[%zu] has shape [%zu, %zu, %zu] (ndim %u), expected "
                         "[Hkv=%zu, m=%zu, D=%zu]",
                         fn, arg, l, t->shape[0], t->ndim > 1 ? t->shape[1] : 0,
                         t->ndim > 2 ? t->shape[2] : 0, t->ndim, enc->p.kv_heads, enc->p.prefix_len,
                         enc->p.head_dim);
    return PFX_SUCCESS;
}

static bool same_storage(const pfx_tensor *a, const pfx_tensor *b)
{
    return a && b && (a == b || a->mem == b->mem);
}

/* ---- forward ---- */

static pfx_status launch_1d(pfx_encoder *enc, const char *kernel_name, const char *what, size_t n,
                            size_t nargs, const pfx_arg *args)
{
    return pfx_launch_1d(enc->rt, ENCODER_PROGRAM, ENCODER_OPTIONS, kernel_name, what, n, nargs,
                         args);
}

/* T = tanh(E W1^T + b1) into enc->t. */
static pfx_status hidden(pfx_encoder *enc, const char *fn)
{
    const size_t m = enc->p.prefix_len, e = enc->p.embed_dim, h = enc->p.hidden_dim;
    char what[96];
    snprintf(what, sizeof(what), "%s: E W1^T", fn);
    pfx_status st = pfx_gemm(enc->rt, what, false, true, m, h, e, 1.0f,
                             PFX_GEMM_OP(enc->param[PFX_ENCODER_E]->mem, 0, e),
                             PFX_GEMM_OP(enc->param[PFX_ENCODER_W1]->mem, 0, e), 0.0f,
                             PFX_GEMM_OP(enc->t, 0, h));
    if (st != PFX_SUCCESS)
        return st;
    cl_ulong rows = m, cols = h;
    pfx_arg args[] = { PFX_ARG(rows), PFX_ARG(cols), PFX_ARG(enc->t),
                       PFX_ARG(enc->param[PFX_ENCODER_B1]->mem) };
    return launch_1d(enc, "pfx_encoder_bias_tanh", "encoder: bias + tanh", m * h, 4, args);
}

/* One (layer, K or V) block of Y <-> one prefix tensor. */
static pfx_status launch_block(pfx_encoder *enc, const char *kernel_name, const char *what,
                               size_t block, size_t nargs, const pfx_arg *args)
{
    (void)block;
    cl_kernel kernel;
    pfx_status st = pfx_kernel_get(enc->rt, ENCODER_PROGRAM, ENCODER_OPTIONS, kernel_name, &kernel);
    if (st != PFX_SUCCESS)
        return st;
    size_t local[2] = { 64, 1 };
    size_t global[2] = { (enc->width + 63) / 64 * 64, enc->p.prefix_len };
    return pfx_launch(enc->rt, kernel, what, 2, global, local, nargs, args);
}

static pfx_status check_outputs(pfx_encoder *enc, const char *fn, pfx_tensor *const *prefix_k,
                                pfx_tensor *const *prefix_v)
{
    pfx_runtime *rt = enc->rt;
    if (!prefix_k)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: prefix_k is NULL", fn);
    if (!prefix_v)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: prefix_v is NULL", fn);
    const size_t L = enc->p.layers;
    for (size_t s = 0; s < 2; s++) {
        pfx_tensor *const *list = s ? prefix_v : prefix_k;
        const char *arg = s ? "prefix_v" : "prefix_k";
        for (size_t l = 0; l < L; l++) {
            if (!list[l])
                return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s[%zu] is NULL", fn, arg, l);
            pfx_status st = check_prefix(enc, fn, arg, l, list[l]);
            if (st != PFX_SUCCESS)
                return st;
        }
    }
    /* All 2L outputs distinct (index 2l + s). */
    for (size_t i = 0; i < 2 * L; i++)
        for (size_t j = i + 1; j < 2 * L; j++) {
            const pfx_tensor *a = (i & 1 ? prefix_v : prefix_k)[i / 2];
            const pfx_tensor *b = (j & 1 ? prefix_v : prefix_k)[j / 2];
            if (same_storage(a, b))
                return pfx_error(
                    rt, PFX_ERROR_ALIASING, "%s: %s[%zu] and %s[%zu] are the same tensor", fn,
                    i & 1 ? "prefix_v" : "prefix_k", i / 2, j & 1 ? "prefix_v" : "prefix_k", j / 2);
        }
    return PFX_SUCCESS;
}

pfx_status pfx_encoder_forward(pfx_encoder *enc, pfx_tensor *const *prefix_k,
                               pfx_tensor *const *prefix_v)
{
    static const char fn[] = "encoder_forward";
    if (!enc)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: enc is NULL", fn);
    pfx_status st = check_outputs(enc, fn, prefix_k, prefix_v);
    if (st != PFX_SUCCESS)
        return st;
    const size_t L = enc->p.layers;

    if (enc->p.direct) {
        for (size_t i = 0; i < 2 * L && st == PFX_SUCCESS; i++) {
            pfx_tensor *dst = (i & 1 ? prefix_v : prefix_k)[i / 2];
            const pfx_tensor *src = enc->prefix[i];
            if (dst == src)
                continue;
            st = dst->dtype == src->dtype ? pfx_tensor_copy(dst, src)
                                          : pfx_axpby(dst, 1.0f, src, 0.0f);
        }
        return st;
    }

    const size_t m = enc->p.prefix_len, h = enc->p.hidden_dim, O = enc->out_dim;
    st = hidden(enc, fn);
    if (st == PFX_SUCCESS)
        st = pfx_gemm(enc->rt, "encoder_forward: T W2^T", false, true, m, O, h, 1.0f,
                      PFX_GEMM_OP(enc->t, 0, h), PFX_GEMM_OP(enc->param[PFX_ENCODER_W2]->mem, 0, h),
                      0.0f, PFX_GEMM_OP(enc->y, 0, O));
    cl_uint mm = (cl_uint)m, d = (cl_uint)enc->p.head_dim, width = (cl_uint)enc->width;
    cl_ulong ldy = O;
    for (size_t i = 0; i < 2 * L && st == PFX_SUCCESS; i++) {
        pfx_tensor *dst = (i & 1 ? prefix_v : prefix_k)[i / 2];
        cl_ulong col0 = i * enc->width;
        cl_int half = dst->dtype == PFX_DTYPE_F16;
        pfx_arg args[] = { PFX_ARG(mm),
                           PFX_ARG(d),
                           PFX_ARG(width),
                           PFX_ARG(ldy),
                           PFX_ARG(col0),
                           PFX_ARG(enc->y),
                           PFX_ARG(enc->param[PFX_ENCODER_B2]->mem),
                           PFX_ARG(dst->mem),
                           PFX_ARG(half) };
        st = launch_block(enc, "pfx_encoder_scatter", "encoder_forward: scatter", i, 9, args);
    }
    return st;
}

/* ---- backward ---- */

static pfx_status check_grad(pfx_encoder *enc, const char *fn, const char *arg, const pfx_tensor *g,
                             const pfx_tensor *param)
{
    pfx_runtime *rt = enc->rt;
    if (g->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "%s: grads->%s belongs to another runtime than the encoder", fn, arg);
    if (g->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: grads->%s must be float32", fn, arg);
    bool same = g->ndim == param->ndim;
    for (unsigned i = 0; same && i < g->ndim; i++)
        same = g->shape[i] == param->shape[i];
    if (!same)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: grads->%s has shape [%zu, %zu] (ndim %u), expected [%zu, %zu] "
                         "(ndim %u)",
                         fn, arg, g->shape[0], g->ndim > 1 ? g->shape[1] : 0, g->ndim,
                         param->shape[0], param->ndim > 1 ? param->shape[1] : 0, param->ndim);
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        if (same_storage(g, enc->param[i]))
            return pfx_error(rt, PFX_ERROR_ALIASING, "%s: grads->%s is the parameter %s", fn, arg,
                             pfx_encoder_param_name((pfx_encoder_param)i));
    return PFX_SUCCESS;
}

pfx_status pfx_encoder_backward(pfx_encoder *enc, const pfx_tensor *const *dprefix_k,
                                const pfx_tensor *const *dprefix_v, const pfx_encoder_grads *grads)
{
    static const char fn[] = "encoder_backward";
    if (!enc)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: enc is NULL", fn);
    pfx_runtime *rt = enc->rt;
    if (!grads)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: grads is NULL", fn);
    if (enc->p.direct)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: the encoder is in direct mode (no MLP): the prefix gradients are "
                         "the parameter gradients",
                         fn);
    const size_t L = enc->p.layers;
    for (size_t s = 0; s < 2; s++) {
        const pfx_tensor *const *list = s ? dprefix_v : dprefix_k;
        for (size_t l = 0; list && l < L; l++) {
            if (!list[l])
                continue;
            pfx_status st = check_prefix(enc, fn, s ? "dprefix_v" : "dprefix_k", l, list[l]);
            if (st != PFX_SUCCESS)
                return st;
        }
    }
    pfx_tensor *const out[PFX_ENCODER_PARAM_COUNT] = { grads->de, grads->dw1, grads->db1,
                                                       grads->dw2, grads->db2 };
    static const char *const out_name[PFX_ENCODER_PARAM_COUNT] = { "de", "dw1", "db1", "dw2",
                                                                   "db2" };
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++) {
        if (!out[i])
            continue;
        pfx_status st = check_grad(enc, fn, out_name[i], out[i], enc->param[i]);
        if (st != PFX_SUCCESS)
            return st;
        for (int j = 0; j < i; j++)
            if (same_storage(out[i], out[j]))
                return pfx_error(rt, PFX_ERROR_ALIASING,
                                 "%s: grads->%s and grads->%s are the same tensor", fn, out_name[j],
                                 out_name[i]);
        for (size_t s = 0; s < 2; s++) {
            const pfx_tensor *const *list = s ? dprefix_v : dprefix_k;
            for (size_t l = 0; list && l < L; l++)
                if (same_storage(out[i], list[l]))
                    return pfx_error(rt, PFX_ERROR_ALIASING, "%s: grads->%s is also %s[%zu]", fn,
                                     out_name[i], s ? "dprefix_v" : "dprefix_k", l);
        }
    }
    if (!grads->de && !grads->dw1 && !grads->db1 && !grads->dw2 && !grads->db2)
        return PFX_SUCCESS;

    const size_t m = enc->p.prefix_len, e = enc->p.embed_dim, h = enc->p.hidden_dim,
                 O = enc->out_dim;
    const float beta = grads->accumulate ? 1.0f : 0.0f;
    cl_mem E = enc->param[PFX_ENCODER_E]->mem, W1 = enc->param[PFX_ENCODER_W1]->mem,
           W2 = enc->param[PFX_ENCODER_W2]->mem;

    pfx_status st = hidden(enc, fn);
    /* dY [m, O] from the 2L prefix gradients (zeros where none). */
    cl_uint mm = (cl_uint)m, d = (cl_uint)enc->p.head_dim, width = (cl_uint)enc->width;
    cl_ulong ldy = O;
    for (size_t i = 0; i < 2 * L && st == PFX_SUCCESS; i++) {
        const pfx_tensor *const *list = i & 1 ? dprefix_v : dprefix_k;
        const pfx_tensor *src = list ? list[i / 2] : NULL;
        cl_ulong col0 = i * enc->width;
        cl_mem src_mem = src ? src->mem : enc->y; /* not read without a gradient */
        cl_int half = src && src->dtype == PFX_DTYPE_F16, has = src != NULL;
        pfx_arg args[] = { PFX_ARG(mm),   PFX_ARG(d),    PFX_ARG(width),
                           PFX_ARG(ldy),  PFX_ARG(col0), PFX_ARG(src_mem),
                           PFX_ARG(half), PFX_ARG(has),  PFX_ARG(enc->y) };
        st = launch_block(enc, "pfx_encoder_gather", "encoder_backward: gather", i, 9, args);
    }
    /* dW2 [O, h] = dY^T T;  db2 [O] = 1^T dY. */
    if (st == PFX_SUCCESS && grads->dw2)
        st = pfx_gemm(rt, "encoder_backward: dW2 = dY^T T", true, false, O, h, m, 1.0f,
                      PFX_GEMM_OP(enc->y, 0, O), PFX_GEMM_OP(enc->t, 0, h), beta,
                      PFX_GEMM_OP(grads->dw2->mem, 0, h));
    if (st == PFX_SUCCESS && grads->db2)
        st = pfx_gemm(rt, "encoder_backward: db2 = 1^T dY", false, false, 1, O, m, 1.0f,
                      PFX_GEMM_OP(enc->ones, 0, m), PFX_GEMM_OP(enc->y, 0, O), beta,
                      PFX_GEMM_OP(grads->db2->mem, 0, O));
    if (!grads->de && !grads->dw1 && !grads->db1)
        return st;
    /* dA [m, h] = (dY W2) * (1 - T^2). */
    if (st == PFX_SUCCESS)
        st = pfx_gemm(rt, "encoder_backward: dT = dY W2", false, false, m, h, O, 1.0f,
                      PFX_GEMM_OP(enc->y, 0, O), PFX_GEMM_OP(W2, 0, h), 0.0f,
                      PFX_GEMM_OP(enc->dt, 0, h));
    if (st == PFX_SUCCESS) {
        cl_ulong n = m * h;
        pfx_arg args[] = { PFX_ARG(n), PFX_ARG(enc->dt), PFX_ARG(enc->t) };
        st = launch_1d(enc, "pfx_encoder_tanh_backward", "encoder_backward: tanh'", m * h, 3, args);
    }
    /* db1 [h] = 1^T dA;  dW1 [h, e] = dA^T E;  dE [m, e] = dA W1. */
    if (st == PFX_SUCCESS && grads->db1)
        st = pfx_gemm(rt, "encoder_backward: db1 = 1^T dA", false, false, 1, h, m, 1.0f,
                      PFX_GEMM_OP(enc->ones, 0, m), PFX_GEMM_OP(enc->dt, 0, h), beta,
                      PFX_GEMM_OP(grads->db1->mem, 0, h));
    if (st == PFX_SUCCESS && grads->dw1)
        st = pfx_gemm(rt, "encoder_backward: dW1 = dA^T E", true, false, h, e, m, 1.0f,
                      PFX_GEMM_OP(enc->dt, 0, h), PFX_GEMM_OP(E, 0, e), beta,
                      PFX_GEMM_OP(grads->dw1->mem, 0, e));
    if (st == PFX_SUCCESS && grads->de)
        st = pfx_gemm(rt, "encoder_backward: dE = dA W1", false, false, m, e, h, 1.0f,
                      PFX_GEMM_OP(enc->dt, 0, h), PFX_GEMM_OP(W1, 0, e), beta,
                      PFX_GEMM_OP(grads->de->mem, 0, e));
    return st;
}

/* ---- bake ---- */

pfx_status pfx_encoder_bake(pfx_encoder *enc)
{
    if (!enc)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "encoder_bake: enc is NULL");
    if (enc->p.direct)
        return PFX_SUCCESS;
    const size_t L = enc->p.layers;
    pfx_tensor **prefix = NULL;
    pfx_status st = create_prefixes(enc, &prefix);
    if (st != PFX_SUCCESS)
        return st;
    pfx_tensor **k = malloc(2 * L * sizeof(*k));
    if (!k) {
        free_prefixes(enc->rt, prefix, 2 * L);
        return pfx_error(enc->rt, PFX_ERROR_OUT_OF_MEMORY, "encoder_bake: host allocation failed");
    }
    for (size_t l = 0; l < L; l++) {
        k[l] = prefix[2 * l];
        k[L + l] = prefix[2 * l + 1];
    }
    st = pfx_encoder_forward(enc, k, k + L);
    free(k);
    if (st == PFX_SUCCESS)
        st = pfx_runtime_finish(enc->rt);
    if (st != PFX_SUCCESS) {
        free_prefixes(enc->rt, prefix, 2 * L);
        return st;
    }
    free_mlp(enc);
    enc->prefix = prefix;
    enc->p.direct = true;
    return PFX_SUCCESS;
}
