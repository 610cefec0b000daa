/* Validation of attention calls (see attention_problem.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_problem.h"
#include "dropout.h"

void pfx_attention_desc_init(pfx_attention_desc *desc)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof(*desc));
    desc->q_layout = desc->kv_layout = desc->o_layout = PFX_LAYOUT_BHND;
    desc->gain_mode = PFX_GAIN_OFF;
    desc->gain_ramp = 1.0f;
}

static bool layout_ok(pfx_layout l)
{
    return l == PFX_LAYOUT_BHND || l == PFX_LAYOUT_BNHD;
}

static pfx_attn_strides strides_for(pfx_layout layout, size_t heads, size_t rows, size_t D)
{
    pfx_attn_strides s;
    s.batch = (cl_ulong)heads * rows * D;
    if (layout == PFX_LAYOUT_BHND) {
        s.head = (cl_ulong)rows * D;
        s.row = D;
    } else {
        s.head = D;
        s.row = (cl_ulong)heads * D;
    }
    return s;
}

static const char *layout_dims(pfx_layout layout, bool kv)
{
    if (kv)
        return layout == PFX_LAYOUT_BHND ? "[B, Hkv, M, D]" : "[B, M, Hkv, D]";
    return layout == PFX_LAYOUT_BHND ? "[B, H, N, D]" : "[B, N, H, D]";
}

/* Expected shape of a tensor in a role; returns ndim. */
static unsigned expected_shape(const pfx_attn_problem *p, pfx_attn_role role, pfx_layout layout,
                               size_t *shape)
{
    switch (role) {
    case PFX_ATTN_LIKE_Q:
    case PFX_ATTN_LIKE_O:
    case PFX_ATTN_LIKE_KV: {
        bool kv = role == PFX_ATTN_LIKE_KV;
        size_t heads = kv ? p->Hkv : p->H, rows = kv ? p->M : p->N;
        shape[0] = p->B;
        shape[1] = layout == PFX_LAYOUT_BHND ? heads : rows;
        shape[2] = layout == PFX_LAYOUT_BHND ? rows : heads;
        shape[3] = p->D;
        return 4;
    }
    case PFX_ATTN_LIKE_PREFIX:
        if (p->bank_entries) {
            shape[0] = p->bank_entries;
            shape[1] = p->Hkv;
            shape[2] = p->P;
            shape[3] = p->D;
            return 4;
        }
        shape[0] = p->Hkv;
        shape[1] = p->P;
        shape[2] = p->D;
        return 3;
    case PFX_ATTN_LSE:
        shape[0] = p->B;
        shape[1] = p->H;
        shape[2] = p->N;
        return 3;
    case PFX_ATTN_PER_HEAD: shape[0] = p->H; return 1;
    case PFX_ATTN_PER_HEAD_DIM:
        shape[0] = p->H;
        shape[1] = p->D;
        return 2;
    }
    return 0;
}

/* The storage a tensor may have: float32 only, float32 or half, or (the
 * inputs, which pfx_attn_problem_forward_only limits to the forward) also
 * bfloat16. */
typedef enum storage_rule { ONLY_F32, F32_OR_HALF, INPUT } storage_rule;

static pfx_status check_shape(pfx_runtime *rt, const char *op, const pfx_attn_problem *p,
                              const pfx_tensor *t, const char *name, pfx_attn_role role,
                              pfx_layout layout, storage_rule rule)
{
    if (!t)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", op, name);
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: %s belongs to another runtime", op,
                         name);
    if (rule == ONLY_F32 && t->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s must be float32", op, name);
    if (rule == INPUT && t->dtype != PFX_DTYPE_F32 && t->dtype != PFX_DTYPE_F16 &&
        t->dtype != PFX_DTYPE_BF16)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s must be float32, half or bfloat16",
                         op, name);
    if (rule == F32_OR_HALF && t->dtype != PFX_DTYPE_F32 && t->dtype != PFX_DTYPE_F16)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s must be float32 or half", op, name);
    size_t want[PFX_MAX_DIMS];
    unsigned ndim = expected_shape(p, role, layout, want);
    bool same = ndim == t->ndim;
    for (unsigned i = 0; same && i < ndim; i++)
        same = want[i] == t->shape[i];
    if (!same) {
        char got_s[96], want_s[96];
        pfx_shape_text(got_s, sizeof(got_s), t->ndim, t->shape);
        pfx_shape_text(want_s, sizeof(want_s), ndim, want);
        const char *layout_text = role == PFX_ATTN_LIKE_KV  ? layout_dims(layout, true)
                                  : role <= PFX_ATTN_LIKE_O ? layout_dims(layout, false)
                                                            : "";
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s has shape %s, expected %s %s", op,
                         name, got_s, want_s, layout_text);
    }
    return PFX_SUCCESS;
}

pfx_status pfx_attn_check_tensor(pfx_runtime *rt, const char *op, const pfx_attn_problem *p,
                                 const pfx_tensor *t, const char *name, pfx_attn_role role,
                                 bool f32_only)
{
    pfx_layout layout = role == PFX_ATTN_LIKE_Q    ? p->q_layout
                        : role == PFX_ATTN_LIKE_KV ? p->kv_layout
                        : role == PFX_ATTN_LIKE_O  ? p->o_layout
                                                   : PFX_LAYOUT_BHND;
    return check_shape(rt, op, p, t, name, role, layout, f32_only ? ONLY_F32 : F32_OR_HALF);
}

pfx_status pfx_attn_check_alias(pfx_runtime *rt, const char *op, const pfx_tensor *out,
                                const char *name, const pfx_tensor *const *others,
                                const char *const *other_names, size_t count)
{
    for (size_t i = 0; out && i < count; i++)
        if (others[i] && (others[i] == out || others[i]->mem == out->mem))
            return pfx_error(rt, PFX_ERROR_ALIASING, "%s: output %s is the same tensor as %s", op,
                             name, other_names[i]);
    return PFX_SUCCESS;
}

void pfx_attn_problem_free(pfx_attn_problem *p)
{
    free(p->head_scale);
    free(p->dim_factor);
    free(p->dscale_dgain);
    free(p->item_meta);
    p->head_scale = p->dim_factor = p->dscale_dgain = NULL;
    p->item_meta = NULL;
}

static bool gain_mode_ok(pfx_gain_mode mode)
{
    return mode == PFX_GAIN_OFF || mode == PFX_GAIN_LINEAR || mode == PFX_GAIN_TANH;
}

static bool has_item_gains(const pfx_attention_desc *d)
{
    return d->item_gain_mode || d->item_gain || d->item_dim_gain;
}

/* desc.item_gain_mode / item_gain / item_dim_gain (per-item gains). */
static pfx_status check_item_gains(pfx_runtime *rt, const char *op, const pfx_attention_desc *d)
{
    if (!has_item_gains(d))
        return PFX_SUCCESS;
    if (d->gain_tensor)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: desc.gain_tensor cannot be combined with per-item gains "
                         "(desc.item_gain_mode, item_gain, item_dim_gain)",
                         op);
    size_t B = d->batch, H = d->heads, n = 0;
    if (pfx_mul_overflows(B, H, &n) || pfx_mul_overflows(n, d->head_dim, &n))
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: desc.batch x heads x head_dim overflows with per-item gains", op);
    for (size_t b = 0; b < B; b++) {
        pfx_gain_mode mode = d->item_gain_mode ? d->item_gain_mode[b] : d->gain_mode;
        if (!gain_mode_ok(mode))
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "%s: desc.item_gain_mode[%zu] %d is unknown", op, b, (int)mode);
        if (mode != PFX_GAIN_OFF && !d->item_gain && !d->gain)
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                             "%s: desc.item_gain and desc.gain are NULL with item %zu's gain "
                             "mode other than OFF",
                             op, b);
        for (size_t h = 0; mode != PFX_GAIN_OFF && !d->item_gain && h < H; h++)
            if (!isfinite(d->gain[h]))
                return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: desc.gain[%zu] is not finite", op,
                                 h);
        for (size_t h = 0; d->item_gain && h < H; h++)
            if (!isfinite(d->item_gain[b * H + h]))
                return pfx_error(rt, PFX_ERROR_NOT_FINITE,
                                 "%s: desc.item_gain[%zu] (item %zu, head %zu) is not finite", op,
                                 b * H + h, b, h);
    }
    for (size_t i = 0; d->item_dim_gain && i < n; i++)
        if (!isfinite(d->item_dim_gain[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: desc.item_dim_gain[%zu] is not finite",
                             op, i);
    return PFX_SUCCESS;
}

static pfx_status check_desc(pfx_runtime *rt, const char *op, const pfx_attention_desc *d)
{
    pfx_status st;
    const struct {
        size_t value;
        const char *name;
    } dims[] = {
        { d->batch, "batch" },     { d->heads, "heads" }, { d->kv_heads, "kv_heads" },
        { d->queries, "queries" }, { d->keys, "keys" },   { d->head_dim, "head_dim" },
    };
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
        if (dims[i].value == 0)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: desc.%s is 0", op, dims[i].name);
    if (d->heads % d->kv_heads)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: desc.heads (%zu) is not a multiple of desc.kv_heads (%zu)", op,
                         d->heads, d->kv_heads);
    if (!layout_ok(d->q_layout) || !layout_ok(d->kv_layout) || !layout_ok(d->o_layout))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: desc.%s is not a pfx_layout", op,
                         !layout_ok(d->q_layout)    ? "q_layout"
                         : !layout_ok(d->kv_layout) ? "kv_layout"
                                                    : "o_layout");
    if (!gain_mode_ok(d->gain_mode))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: desc.gain_mode %d is unknown", op,
                         (int)d->gain_mode);
    if (!isfinite(d->scale) || d->scale < 0)
        return pfx_error(rt, isfinite(d->scale) ? PFX_ERROR_INVALID_ARGUMENT : PFX_ERROR_NOT_FINITE,
                         "%s: desc.scale (%g) must be finite and >= 0 (0: 1/sqrt(D))", op,
                         (double)d->scale);
    if (!isfinite(d->gain_ramp))
        return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: desc.gain_ramp is not finite", op);
    if (d->gain_ramp < 0 || d->gain_ramp > 1)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: desc.gain_ramp (%g) is not in [0, 1]",
                         op, (double)d->gain_ramp);
    if (d->gain_mode != PFX_GAIN_OFF && !d->gain_tensor && !has_item_gains(d)) {
        if (!d->gain)
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                             "%s: desc.gain and desc.gain_tensor are NULL with a gain mode "
                             "other than OFF",
                             op);
        for (size_t h = 0; h < d->heads; h++)
            if (!isfinite(d->gain[h]))
                return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: desc.gain[%zu] is not finite", op,
                                 h);
    }
    if ((st = check_item_gains(rt, op, d)))
        return st;
    if (d->dim_gain) {
        size_t n = d->heads * d->head_dim; /* both fit: tensors of these sizes exist */
        for (size_t i = 0; i < n; i++)
            if (!isfinite(d->dim_gain[i]))
                return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: desc.dim_gain[%zu] is not finite",
                                 op, i);
    }
    for (size_t b = 0; b < d->batch; b++) {
        if (d->q_lens && (d->q_lens[b] < 0 || (size_t)d->q_lens[b] > d->queries))
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: desc.q_lens[%zu] = %d is not in [0, queries = %zu]", op, b,
                             (int)d->q_lens[b], d->queries);
        if (d->kv_lens && (d->kv_lens[b] < 0 || (size_t)d->kv_lens[b] > d->keys))
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: desc.kv_lens[%zu] = %d is not in [0, keys = %zu]", op, b,
                             (int)d->kv_lens[b], d->keys);
    }
    return PFX_SUCCESS;
}

static double gamma_of(pfx_gain_mode mode, double x)
{
    return mode == PFX_GAIN_LINEAR ? 1 + x : mode == PFX_GAIN_TANH ? 1 + tanh(x) : 1;
}

static double gamma_slope(pfx_gain_mode mode, double x)
{
    return mode == PFX_GAIN_LINEAR ? 1 : mode == PFX_GAIN_TANH ? 1 - tanh(x) * tanh(x) : 0;
}

/* Checks the prefix tensors against P and finds T for a bank. */
static pfx_status check_prefix(pfx_runtime *rt, const char *op, const pfx_attention_desc *d,
                               const pfx_attention_inputs *in, pfx_attn_problem *p)
{
    if (d->prefix_len == 0) {
        if (in->prefix_k || in->prefix_v)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                             "%s: in.%s is given but desc.prefix_len is 0", op,
                             in->prefix_k ? "prefix_k" : "prefix_v");
        return PFX_SUCCESS;
    }
    if (!in->prefix_k || !in->prefix_v)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: in.%s is NULL with desc.prefix_len %zu",
                         op, in->prefix_k ? "prefix_v" : "prefix_k", d->prefix_len);
    if (in->prefix_k->ndim == 4) {
        p->bank_entries = in->prefix_k->shape[0];
        if (!d->bank_index)
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                             "%s: desc.bank_index is NULL with a prefix bank [T, Hkv, P, D]", op);
        for (size_t b = 0; b < d->batch; b++)
            if (d->bank_index[b] < -1 ||
                (d->bank_index[b] >= 0 && (size_t)d->bank_index[b] >= p->bank_entries))
                return pfx_error(
                    rt, PFX_ERROR_OUT_OF_RANGE,
                    "%s: desc.bank_index[%zu] = %d is outside the bank of %zu entries (or -1)", op,
                    b, (int)d->bank_index[b], p->bank_entries);
    }
    pfx_status st = check_shape(rt, op, p, in->prefix_k, "in.prefix_k", PFX_ATTN_LIKE_PREFIX,
                                PFX_LAYOUT_BHND, INPUT);
    if (st == PFX_SUCCESS)
        st = check_shape(rt, op, p, in->prefix_v, "in.prefix_v", PFX_ATTN_LIKE_PREFIX,
                         PFX_LAYOUT_BHND, INPUT);
    return st;
}

pfx_status pfx_attn_problem_forward_only(pfx_runtime *rt, const char *op, const pfx_attn_problem *p)
{
    for (size_t b = 0; p->bank_entries && b < p->B; b++)
        if (p->item_meta[2 * p->B + b] < 0)
            return pfx_error(
                rt, PFX_ERROR_UNSUPPORTED,
                "%s: desc.bank_index[%zu] is -1 (no prefix): only the forward takes such items", op,
                b);
    if (p->item_gains)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: per-item gains (desc.item_gain_mode, item_gain, item_dim_gain): "
                         "only the forward takes them",
                         op);
    const bool bf16[5] = { p->q_bf16, p->k_bf16, p->v_bf16, p->pk_bf16, p->pv_bf16 };
    static const char *const names[5] = { "in.q", "in.k", "in.v", "in.prefix_k", "in.prefix_v" };
    for (int i = 0; i < 5; i++)
        if (bf16[i])
            return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                             "%s: %s is bfloat16: only the forward reads it (float32 or half)", op,
                             names[i]);
    return PFX_SUCCESS;
}

void pfx_attn_dropout_option(const pfx_attn_problem *p, char *options, size_t cap)
{
    const size_t at = strlen(options);
    if (p->dropout > 0.0f && at < cap)
        snprintf(options + at, cap - at, " -DPFX_ATTN_DROPOUT=1");
}

pfx_status pfx_attn_problem_no_dropout(pfx_runtime *rt, const char *op, const pfx_attn_problem *p)
{
    if (p->dropout > 0.0f)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.dropout (%g): the statistics and the map describe the "
                         "undropped softmax; set it to 0",
                         op, (double)p->dropout);
    return PFX_SUCCESS;
}

pfx_attn_drop_args pfx_attn_drop_args_of(const pfx_attn_problem *p)
{
    pfx_attn_drop_args a;
    memset(&a, 0, sizeof(a));
    a.scale = 1.0f;
    if (p->dropout > 0.0f) {
        a.stream = pfx_dropout_words(&p->drop);
        a.threshold = pfx_dropout_threshold(p->dropout);
        a.scale = pfx_dropout_scale(p->dropout);
        a.first_item = p->drop.first_item;
        a.on = 1;
    }
    return a;
}

pfx_status pfx_attn_problem_init(pfx_runtime *rt, const char *op, const pfx_attention_desc *d,
                                 const pfx_attention_inputs *in, pfx_attn_problem *p)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    if (!d)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: desc is NULL", op);
    if (!in)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: in is NULL", op);
    memset(p, 0, sizeof(*p));
    pfx_status st = check_desc(rt, op, d);
    if (st != PFX_SUCCESS)
        return st;
    p->B = d->batch;
    p->H = d->heads;
    p->Hkv = d->kv_heads;
    p->N = d->queries;
    p->M = d->keys;
    p->P = d->prefix_len;
    p->D = d->head_dim;
    p->group = p->H / p->Hkv;
    p->causal = d->causal;
    p->scale = d->scale > 0 ? d->scale : (float)(1.0 / sqrt((double)p->D));
    if (!pfx_dropout_valid(d->dropout))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: desc.dropout (%g) is not in [0, 1)",
                         op, (double)d->dropout);
    p->dropout = d->dropout;
    p->drop = d->dropout_stream;

    if (d->gain_tensor && d->gain_mode != PFX_GAIN_OFF &&
        (st = pfx_attn_check_tensor(rt, op, p, d->gain_tensor, "desc.gain_tensor",
                                    PFX_ATTN_PER_HEAD, true)))
        return st;
    p->gain_dev = d->gain_mode != PFX_GAIN_OFF ? d->gain_tensor : NULL;
    p->gain_mode = d->gain_mode;
    p->gain_ramp = d->gain_ramp;

    if ((st = check_shape(rt, op, p, in->q, "in.q", PFX_ATTN_LIKE_Q, d->q_layout, INPUT)) ||
        (st = check_shape(rt, op, p, in->k, "in.k", PFX_ATTN_LIKE_KV, d->kv_layout, INPUT)) ||
        (st = check_shape(rt, op, p, in->v, "in.v", PFX_ATTN_LIKE_KV, d->kv_layout, INPUT)) ||
        (st = check_prefix(rt, op, d, in, p)))
        return st;

    p->q_layout = d->q_layout;
    p->kv_layout = d->kv_layout;
    p->o_layout = d->o_layout;
    p->q = strides_for(d->q_layout, p->H, p->N, p->D);
    p->kv = strides_for(d->kv_layout, p->Hkv, p->M, p->D);
    p->o = strides_for(d->o_layout, p->H, p->N, p->D);
    p->prefix.batch = p->bank_entries ? (cl_ulong)p->Hkv * p->P * p->D : 0;
    p->prefix.head = (cl_ulong)p->P * p->D;
    p->prefix.row = p->D;
    p->q_half = in->q->dtype == PFX_DTYPE_F16;
    p->k_half = in->k->dtype == PFX_DTYPE_F16;
    p->v_half = in->v->dtype == PFX_DTYPE_F16;
    p->pk_half = in->prefix_k && in->prefix_k->dtype == PFX_DTYPE_F16;
    p->pv_half = in->prefix_v && in->prefix_v->dtype == PFX_DTYPE_F16;
    p->q_bf16 = in->q->dtype == PFX_DTYPE_BF16;
    p->k_bf16 = in->k->dtype == PFX_DTYPE_BF16;
    p->v_bf16 = in->v->dtype == PFX_DTYPE_BF16;
    p->pk_bf16 = in->prefix_k && in->prefix_k->dtype == PFX_DTYPE_BF16;
    p->pv_bf16 = in->prefix_v && in->prefix_v->dtype == PFX_DTYPE_BF16;

    p->item_gains = has_item_gains(d);
    const size_t items = p->item_gains ? p->B : 1; /* gain blocks: one per item or per call */
    const bool structured = d->dim_gain || d->item_dim_gain;
    p->head_scale = malloc(items * p->H * sizeof(float));
    p->dscale_dgain = malloc(p->H * sizeof(float));
    p->item_meta = malloc(3 * p->B * sizeof(cl_int));
    if (structured)
        p->dim_factor = malloc(items * p->H * p->D * sizeof(float));
    if (!p->head_scale || !p->dscale_dgain || !p->item_meta || (structured && !p->dim_factor)) {
        pfx_attn_problem_free(p);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host allocation failed", op);
    }
    for (size_t h = 0; h < p->H; h++) {
        /* device gains: placeholders, pfx_attn_params_upload computes them */
        double x = d->gain_mode == PFX_GAIN_OFF || p->gain_dev || !d->gain
                       ? 0
                       : (double)d->gain_ramp * d->gain[h];
        p->dscale_dgain[h] = (float)(p->scale * d->gain_ramp * gamma_slope(d->gain_mode, x));
    }
    for (size_t b = 0; b < items; b++) {
        pfx_gain_mode mode = d->item_gain_mode ? d->item_gain_mode[b] : d->gain_mode;
        const float *g = d->item_gain ? d->item_gain + b * p->H : d->gain;
        for (size_t h = 0; h < p->H; h++) {
            double x = mode == PFX_GAIN_OFF || p->gain_dev ? 0 : (double)d->gain_ramp * g[h];
            double c = p->scale * gamma_of(mode, x);
            p->head_scale[b * p->H + h] = (float)c;
            /* Every entry point (forward, backward, stats, map) refuses alike a
             * factor that float32 cannot hold; finite factors are computed right
             * (the kernels subtract the row max before exponentiating). */
            if (!isfinite(p->head_scale[b * p->H + h]) || !isfinite(p->dscale_dgain[h])) {
                pfx_attn_problem_free(p);
                if (p->item_gains)
                    return pfx_error(rt, PFX_ERROR_NOT_FINITE,
                                     "%s: the logit factor of item %zu's head %zu, desc.scale x "
                                     "gamma(desc.gain_ramp x g) = %g, is beyond float32",
                                     op, b, h, c);
                return pfx_error(rt, PFX_ERROR_NOT_FINITE,
                                 "%s: the logit factor of head %zu, desc.scale x "
                                 "gamma(desc.gain_ramp x desc.gain[%zu]) = %g, is beyond float32",
                                 op, h, h, c);
            }
        }
        const float *G = d->item_dim_gain ? d->item_dim_gain + b * p->H * p->D : d->dim_gain;
        for (size_t i = 0; structured && i < p->H * p->D; i++)
            p->dim_factor[b * p->H * p->D + i] = G ? 1.0f + G[i] : 1.0f;
    }
    for (size_t b = 0; b < p->B; b++) {
        p->item_meta[b] = d->q_lens ? d->q_lens[b] : (cl_int)p->N;
        p->item_meta[p->B + b] = d->kv_lens ? d->kv_lens[b] : (cl_int)p->M;
        p->item_meta[2 * p->B + b] = p->bank_entries ? d->bank_index[b] : 0;
    }
    return PFX_SUCCESS;
}

/* c_h into head[0, H) and d c_h / d g_h into the dscale slot, from device gains. */
static pfx_status gain_scales(pfx_runtime *rt, const pfx_attn_problem *p, cl_mem head)
{
    cl_kernel kernel;
    cl_mem dscale;
    pfx_status st = pfx_kernel_get(rt, "attention_gain", "", "pfx_attn_gain_scales", &kernel);
    if (st == PFX_SUCCESS)
        st = pfx_workspace_get(rt, PFX_WS_PARAMS_DSCALE, p->H * sizeof(float), &dscale);
    if (st != PFX_SUCCESS)
        return st;
    cl_int heads = (cl_int)p->H, mode = (cl_int)p->gain_mode;
    float ramp = p->gain_ramp, scale = p->scale;
    pfx_arg args[] = { PFX_ARG(p->gain_dev->mem),
                       PFX_ARG(heads),
                       PFX_ARG(mode),
                       PFX_ARG(ramp),
                       PFX_ARG(scale),
                       PFX_ARG(head),
                       PFX_ARG(dscale) };
    size_t local = 64, global = pfx_ceil_div(p->H, local) * local;
    return pfx_launch(rt, kernel, "attention: gains from desc.gain_tensor", 1, &global, &local,
                      sizeof(args) / sizeof(args[0]), args);
}

pfx_status pfx_attn_params_upload(pfx_runtime *rt, const pfx_attn_problem *p, pfx_attn_params *out)
{
    memset(out, 0, sizeof(*out));
    /* One block [H] c_h (+ [H*D] factors) per call, or one per item. */
    const size_t items = p->item_gains ? p->B : 1;
    const size_t dims = p->dim_factor ? p->H * p->D : 0, block = p->H + dims;
    float *head = malloc(items * block * sizeof(float));
    if (!head)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY,
                         "attention parameters: host allocation failed");
    for (size_t b = 0; b < items; b++) {
        memcpy(head + b * block, p->head_scale + b * p->H, p->H * sizeof(float));
        if (dims)
            memcpy(head + b * block + p->H, p->dim_factor + b * dims, dims * sizeof(float));
    }
    out->head_bytes = items * block * sizeof(float);
    out->head_item_stride = p->item_gains ? (cl_ulong)block : 0;
    out->items_bytes = 3 * p->B * sizeof(cl_int);
    /* Runtime workspace slots: no buffer created per call, nothing waits, and
     * nothing is enqueued for bytes the slot already holds (repeated calls). */
    pfx_status st = pfx_workspace_upload(rt, PFX_WS_PARAMS_HEAD, head, out->head_bytes, &out->head);
    free(head);
    if (st == PFX_SUCCESS)
        st = pfx_workspace_upload(rt, PFX_WS_PARAMS_ITEMS, p->item_meta, out->items_bytes,
                                  &out->items);
    if (st == PFX_SUCCESS && p->gain_dev) {
        st = gain_scales(rt, p, out->head);
        pfx_workspace_written(rt, PFX_WS_PARAMS_HEAD); /* c_h written on the device */
    }
    if (st != PFX_SUCCESS)
        pfx_attn_params_release(rt, out);
    return st;
}

pfx_status pfx_attn_dscale(pfx_runtime *rt, const pfx_attn_problem *p, size_t bytes, cl_mem *out)
{
    if (p->gain_dev)
        return pfx_workspace_get(rt, PFX_WS_PARAMS_DSCALE, bytes, out);
    return pfx_workspace_upload(rt, PFX_WS_PARAMS_DSCALE, p->dscale_dgain, bytes, out);
}

void pfx_attn_params_release(pfx_runtime *rt, pfx_attn_params *params)
{
    (void)rt; /* the buffers are the runtime's workspace: kept for the next call */
    params->head = params->items = NULL;
}
