/*
 * Double-precision reference for prefix attention (see reference.h and the
 * "math (the contract)" section of docs/design.md). Straight loops over
 * (item, head, query row); each row builds its logits over the P + M keys,
 * its softmax in double, and what the caller asked for.
 */
#include "reference/reference.h"
#include "reference/dropout_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ref_fail(const char *what)
{
    fprintf(stderr, "reference: invalid problem: %s\n", what);
    abort();
}

static void *ref_alloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size);
    if (!p)
        ref_fail("out of memory");
    return p;
}

void ref_desc_init(pfx_attention_desc *d, size_t batch, size_t heads, size_t kv_heads,
                   size_t queries, size_t keys, size_t prefix_len, size_t head_dim)
{
    memset(d, 0, sizeof(*d));
    d->batch = batch;
    d->heads = heads;
    d->kv_heads = kv_heads;
    d->queries = queries;
    d->keys = keys;
    d->prefix_len = prefix_len;
    d->head_dim = head_dim;
    d->q_layout = PFX_LAYOUT_BHND;
    d->kv_layout = PFX_LAYOUT_BHND;
    d->o_layout = PFX_LAYOUT_BHND;
    d->causal = false;
    d->scale = 0.0f;
    d->gain_mode = PFX_GAIN_OFF;
    d->gain = NULL;
    d->gain_ramp = 1.0f;
    d->dim_gain = NULL;
    d->q_lens = NULL;
    d->kv_lens = NULL;
    d->bank_index = NULL;
}

/* ---- sizes and offsets ------------------------------------------------- */

size_t ref_q_count(const pfx_attention_desc *d)
{
    return d->batch * d->heads * d->queries * d->head_dim;
}

size_t ref_kv_count(const pfx_attention_desc *d)
{
    return d->batch * d->kv_heads * d->keys * d->head_dim;
}

size_t ref_prefix_count(const pfx_attention_desc *d, size_t bank_entries)
{
    size_t t = d->bank_index ? bank_entries : 1;
    return t * d->kv_heads * d->prefix_len * d->head_dim;
}

size_t ref_lse_count(const pfx_attention_desc *d)
{
    return d->batch * d->heads * d->queries;
}

static size_t bhnd_offset(pfx_layout layout, size_t heads, size_t rows, size_t dim, size_t b,
                          size_t h, size_t i)
{
    if (layout == PFX_LAYOUT_BHND)
        return ((b * heads + h) * rows + i) * dim;
    return ((b * rows + i) * heads + h) * dim;
}

size_t ref_q_offset(const pfx_attention_desc *d, size_t b, size_t h, size_t i)
{
    return bhnd_offset(d->q_layout, d->heads, d->queries, d->head_dim, b, h, i);
}

size_t ref_o_offset(const pfx_attention_desc *d, size_t b, size_t h, size_t i)
{
    return bhnd_offset(d->o_layout, d->heads, d->queries, d->head_dim, b, h, i);
}

size_t ref_kv_offset(const pfx_attention_desc *d, size_t b, size_t hk, size_t t)
{
    return bhnd_offset(d->kv_layout, d->kv_heads, d->keys, d->head_dim, b, hk, t);
}

size_t ref_prefix_offset(const pfx_attention_desc *d, size_t entry, size_t hk, size_t p)
{
    return ((entry * d->kv_heads + hk) * d->prefix_len + p) * d->head_dim;
}

/* ---- gain -------------------------------------------------------------- */

double ref_scale(const pfx_attention_desc *d)
{
    return d->scale != 0.0f ? (double)d->scale : 1.0 / sqrt((double)d->head_dim);
}

static double gamma_of(pfx_gain_mode mode, double x)
{
    switch (mode) {
    case PFX_GAIN_LINEAR: return 1.0 + x;
    case PFX_GAIN_TANH: return 1.0 + tanh(x);
    default: return 1.0;
    }
}

static double gamma_prime(pfx_gain_mode mode, double x)
{
    switch (mode) {
    case PFX_GAIN_LINEAR: return 1.0;
    case PFX_GAIN_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    default: return 0.0;
    }
}

double ref_gain_factor(const pfx_attention_desc *d, size_t h)
{
    if (d->gain_mode == PFX_GAIN_OFF)
        return ref_scale(d);
    double x = (double)d->gain_ramp * (double)d->gain[h];
    return ref_scale(d) * gamma_of(d->gain_mode, x);
}

/*
 * dc_h / dg_h. With the ramp, c_h = scale * gamma(r g_h), so the exact
 * derivative is scale * r * gamma'(r g_h): design.md writes gamma'(g_h), which
 * is this with r = 1. The reference implements the exact chain rule.
 */
static double gain_factor_derivative(const pfx_attention_desc *d, size_t h)
{
    if (d->gain_mode == PFX_GAIN_OFF)
        return 0.0;
    double r = (double)d->gain_ramp;
    return ref_scale(d) * r * gamma_prime(d->gain_mode, r * (double)d->gain[h]);
}

/* 1 + G_hd (1 without a structured gain). */
static double dim_factor(const pfx_attention_desc *d, size_t h, size_t dd)
{
    return d->dim_gain ? 1.0 + (double)d->dim_gain[h * d->head_dim + dd] : 1.0;
}

static bool item_gains(const pfx_attention_desc *d)
{
    return d->item_gain_mode || d->item_gain || d->item_dim_gain;
}

/* c_h of item b: its own mode and gains (desc.item_*), each falling back to
 * the per-call one. */
double ref_item_gain_factor(const pfx_attention_desc *d, size_t b, size_t h)
{
    pfx_gain_mode mode = d->item_gain_mode ? d->item_gain_mode[b] : d->gain_mode;
    if (mode == PFX_GAIN_OFF)
        return ref_scale(d);
    double g = d->item_gain ? (double)d->item_gain[b * d->heads + h] : (double)d->gain[h];
    return ref_scale(d) * gamma_of(mode, (double)d->gain_ramp * g);
}

/* 1 + G_hd of item b. */
static double item_dim_factor(const pfx_attention_desc *d, size_t b, size_t h, size_t dd)
{
    if (d->item_dim_gain)
        return 1.0 + (double)d->item_dim_gain[(b * d->heads + h) * d->head_dim + dd];
    return dim_factor(d, h, dd);
}

/* ---- validation and masks ---------------------------------------------- */

static size_t q_len(const pfx_attention_desc *d, size_t b)
{
    return d->q_lens ? (size_t)d->q_lens[b] : d->queries;
}

static size_t kv_len(const pfx_attention_desc *d, size_t b)
{
    return d->kv_lens ? (size_t)d->kv_lens[b] : d->keys;
}

static size_t bank_entry(const pfx_attention_desc *d, size_t b)
{
    return d->bank_index ? (size_t)d->bank_index[b] : 0;
}

/* bank_entries == 0: not known (forward), only checks the sign. */
static void check_desc(const pfx_attention_desc *d, size_t bank_entries, const float *q,
                       const float *k, const float *pk)
{
    if (!d)
        ref_fail("desc is NULL");
    if (!d->batch || !d->heads || !d->kv_heads || !d->queries || !d->head_dim)
        ref_fail("a zero dimension (B, H, Hkv, N, D)");
    if (d->heads % d->kv_heads)
        ref_fail("H % Hkv != 0");
    if (d->prefix_len + d->keys == 0)
        ref_fail("P + M == 0");
    if (!q || (d->keys && !k) || (d->prefix_len && !pk))
        ref_fail("a required input is NULL");
    if (d->gain_mode != PFX_GAIN_OFF && d->gain_mode != PFX_GAIN_LINEAR &&
        d->gain_mode != PFX_GAIN_TANH)
        ref_fail("unknown gain_mode");
    if (d->gain_mode != PFX_GAIN_OFF && !d->gain && !d->item_gain)
        ref_fail("gain_mode needs gain");
    for (size_t b = 0; b < d->batch; b++) {
        pfx_gain_mode mode = d->item_gain_mode ? d->item_gain_mode[b] : d->gain_mode;
        if (mode != PFX_GAIN_OFF && mode != PFX_GAIN_LINEAR && mode != PFX_GAIN_TANH)
            ref_fail("unknown item_gain_mode[b]");
        if (mode != PFX_GAIN_OFF && !d->gain && !d->item_gain)
            ref_fail("item_gain_mode[b] needs item_gain or gain");
        if (d->q_lens && (d->q_lens[b] < 0 || (size_t)d->q_lens[b] > d->queries))
            ref_fail("q_lens[b] outside [0, N]");
        if (d->kv_lens && (d->kv_lens[b] < 0 || (size_t)d->kv_lens[b] > d->keys))
            ref_fail("kv_lens[b] outside [0, M]");
        if (d->bank_index && (d->bank_index[b] < -1 || (bank_entries && d->bank_index[b] >= 0 &&
                                                        (size_t)d->bank_index[b] >= bank_entries)))
            ref_fail("bank_index[b] outside [0, T) and not -1");
    }
}

/* Input column t is visible to query i of item b. */
static int input_visible(const pfx_attention_desc *d, size_t b, size_t i, size_t t)
{
    if (t >= kv_len(d, b))
        return 0;
    if (d->causal) {
        /* t <= i + (M - N), bottom-right aligned; signed in case M < N */
        long long limit = (long long)i + (long long)d->keys - (long long)d->queries;
        if ((long long)t > limit)
            return 0;
    }
    return 1;
}

/* ---- one row ----------------------------------------------------------- */

typedef struct ref_row {
    size_t cols; /* P + M */
    double *s;   /* sum_d q_id (1 + G_hd) k~_jd (unscaled) */
    double *z;   /* c_h * s */
    double *p;   /* softmax; 0 where hidden */
    double *f;   /* dropout factors (desc.dropout): 0 or 1/(1-p), 1 without */
    unsigned char *vis;
} ref_row;

static void row_init(ref_row *r, const pfx_attention_desc *d)
{
    r->cols = d->prefix_len + d->keys;
    r->s = ref_alloc(r->cols, sizeof(double));
    r->z = ref_alloc(r->cols, sizeof(double));
    r->p = ref_alloc(r->cols, sizeof(double));
    r->f = ref_alloc(r->cols, sizeof(double));
    r->vis = ref_alloc(r->cols, 1);
}

static void row_free(ref_row *r)
{
    free(r->s);
    free(r->z);
    free(r->p);
    free(r->f);
    free(r->vis);
}

/* Row j of K~ (prefix for j < P, then the input) for item b, kv head hk. */
static const float *key_row(const pfx_attention_desc *d, const float *k, const float *pk, size_t b,
                            size_t hk, size_t j)
{
    if (j < d->prefix_len)
        return pk + ref_prefix_offset(d, bank_entry(d, b), hk, j);
    return k + ref_kv_offset(d, b, hk, j - d->prefix_len);
}

/* Logits and softmax of row i of (b, h); returns LSE_i, -INFINITY (and p = 0)
 * for a hidden row. */
static double row_softmax(const pfx_attention_desc *d, const float *q, const float *k,
                          const float *pk, size_t b, size_t h, size_t i, ref_row *r)
{
    size_t D = d->head_dim;
    size_t hk = h / (d->heads / d->kv_heads);
    double c = ref_item_gain_factor(d, b, h);
    const float *qi = q + ref_q_offset(d, b, h, i);
    size_t nvis = 0;
    double mx = -INFINITY;

    /* the row of (b, h, i) in the dropout stream; column j as the kernels number keys */
    const uint32_t drow =
        (uint32_t)(((d->dropout_stream.first_item + b) * d->heads + h) * d->queries + i);
    for (size_t j = 0; j < r->cols; j++) {
        r->f[j] = ref_dropout_factor(&d->dropout_stream, d->dropout, drow, (uint32_t)j);
        r->p[j] = 0.0;
        r->s[j] = 0.0;
        r->z[j] = 0.0;
        /* bank entry -1: the item has no prefix */
        r->vis[j] =
            i < q_len(d, b) && (j < d->prefix_len ? !(d->bank_index && d->bank_index[b] < 0)
                                                  : input_visible(d, b, i, j - d->prefix_len));
        if (!r->vis[j])
            continue;
        const float *kj = key_row(d, k, pk, b, hk, j);
        double s = 0.0;
        for (size_t dd = 0; dd < D; dd++)
            s += (double)qi[dd] * item_dim_factor(d, b, h, dd) * (double)kj[dd];
        r->s[j] = s;
        r->z[j] = c * s;
        if (r->z[j] > mx)
            mx = r->z[j];
        nvis++;
    }
    if (nvis == 0)
        return -INFINITY;
    double sum = 0.0;
    for (size_t j = 0; j < r->cols; j++)
        if (r->vis[j])
            sum += exp(r->z[j] - mx);
    for (size_t j = 0; j < r->cols; j++)
        if (r->vis[j])
            r->p[j] = exp(r->z[j] - mx) / sum;
    return mx + log(sum);
}

/* O_i = sum_j p_ij v~_j into out[0..D). */
static void row_output(const pfx_attention_desc *d, const float *v, const float *pv, size_t b,
                       size_t h, const ref_row *r, double *out)
{
    size_t hk = h / (d->heads / d->kv_heads);
    for (size_t dd = 0; dd < d->head_dim; dd++)
        out[dd] = 0.0;
    for (size_t j = 0; j < r->cols; j++) {
        if (!r->vis[j])
            continue;
        const float *vj = key_row(d, v, pv, b, hk, j);
        for (size_t dd = 0; dd < d->head_dim; dd++)
            out[dd] += r->p[j] * r->f[j] * (double)vj[dd];
    }
}

/* ---- forward ----------------------------------------------------------- */

void ref_attention_forward(const pfx_attention_desc *d, const float *q, const float *k,
                           const float *v, const float *pk, const float *pv, double *o, double *lse)
{
    check_desc(d, 0, q, k, pk);
    if (o && ((d->keys && !v) || (d->prefix_len && !pv)))
        ref_fail("forward needs v (and pv with a prefix)");
    size_t D = d->head_dim;
    ref_row r;
    row_init(&r, d);
    double *oi = ref_alloc(D, sizeof(double));

    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < d->heads; h++)
            for (size_t i = 0; i < d->queries; i++) {
                double l = row_softmax(d, q, k, pk, b, h, i, &r);
                if (lse)
                    lse[(b * d->heads + h) * d->queries + i] = l;
                if (!o)
                    continue;
                double *dst = o + ref_o_offset(d, b, h, i);
                if (isinf(l)) {
                    for (size_t dd = 0; dd < D; dd++)
                        dst[dd] = 0.0;
                    continue;
                }
                row_output(d, v, pv, b, h, &r, oi);
                memcpy(dst, oi, D * sizeof(double));
            }
    free(oi);
    row_free(&r);
}

/* ---- backward ---------------------------------------------------------- */

void ref_attention_backward(const pfx_attention_desc *d, size_t bank_entries, const float *q,
                            const float *k, const float *v, const float *pk, const float *pv,
                            const float *d_o, double *dq, double *dk, double *dv, double *dpk,
                            double *dpv, double *dgain, double *ddim_gain)
{
    check_desc(d, d->bank_index ? bank_entries : 1, q, k, pk);
    if (d->bank_index && !bank_entries)
        ref_fail("a bank needs bank_entries > 0");
    if ((d->keys && !v) || (d->prefix_len && !pv) || !d_o)
        ref_fail("backward needs v, pv (with a prefix) and d_o");
    if (item_gains(d))
        ref_fail("the backward takes one gain per call");
    size_t D = d->head_dim, P = d->prefix_len;
    size_t group = d->heads / d->kv_heads;

    if (dq)
        memset(dq, 0, ref_q_count(d) * sizeof(double));
    if (dk)
        memset(dk, 0, ref_kv_count(d) * sizeof(double));
    if (dv)
        memset(dv, 0, ref_kv_count(d) * sizeof(double));
    if (dpk)
        memset(dpk, 0, ref_prefix_count(d, bank_entries) * sizeof(double));
    if (dpv)
        memset(dpv, 0, ref_prefix_count(d, bank_entries) * sizeof(double));
    if (ddim_gain)
        memset(ddim_gain, 0, d->heads * D * sizeof(double));
    /* sum_{b,i,j} dz_ij s_ij per head, scaled by dc_h/dg_h at the end */
    double *dz_s = ref_alloc(d->heads, sizeof(double));

    ref_row r;
    row_init(&r, d);
    double *oi = ref_alloc(D, sizeof(double));
    double *dz = ref_alloc(r.cols, sizeof(double));

    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < d->heads; h++) {
            size_t hk = h / group;
            double c = ref_gain_factor(d, h);
            for (size_t i = 0; i < d->queries; i++) {
                double l = row_softmax(d, q, k, pk, b, h, i, &r);
                if (isinf(l))
                    continue; /* hidden row: O = 0 is constant, no gradient */
                const float *qi = q + ref_q_offset(d, b, h, i);
                const float *doi = d_o + ref_o_offset(d, b, h, i);
                row_output(d, v, pv, b, h, &r, oi);
                double delta = 0.0;
                for (size_t dd = 0; dd < D; dd++)
                    delta += (double)doi[dd] * oi[dd];

                for (size_t j = 0; j < r.cols; j++) {
                    dz[j] = 0.0;
                    if (!r.vis[j])
                        continue;
                    const float *vj = key_row(d, v, pv, b, hk, j);
                    double dp = 0.0;
                    for (size_t dd = 0; dd < D; dd++)
                        dp += (double)doi[dd] * (double)vj[dd];
                    dz[j] = r.p[j] * (dp * r.f[j] - delta);
                }

                for (size_t j = 0; j < r.cols; j++) {
                    if (!r.vis[j])
                        continue;
                    const float *kj = key_row(d, k, pk, b, hk, j);
                    double *dkj, *dvj;
                    if (j < P) {
                        size_t off = ref_prefix_offset(d, bank_entry(d, b), hk, j);
                        dkj = dpk ? dpk + off : NULL;
                        dvj = dpv ? dpv + off : NULL;
                    } else {
                        size_t off = ref_kv_offset(d, b, hk, j - P);
                        dkj = dk ? dk + off : NULL;
                        dvj = dv ? dv + off : NULL;
                    }
                    for (size_t dd = 0; dd < D; dd++) {
                        double g = dim_factor(d, h, dd);
                        if (dq)
                            dq[ref_q_offset(d, b, h, i) + dd] += c * dz[j] * g * (double)kj[dd];
                        if (dkj)
                            dkj[dd] += c * dz[j] * (double)qi[dd] * g;
                        if (dvj)
                            dvj[dd] += r.p[j] * r.f[j] * (double)doi[dd];
                        if (ddim_gain)
                            ddim_gain[h * D + dd] += c * dz[j] * (double)qi[dd] * (double)kj[dd];
                    }
                    dz_s[h] += dz[j] * r.s[j];
                }
            }
        }

    if (dgain)
        for (size_t h = 0; h < d->heads; h++)
            dgain[h] = gain_factor_derivative(d, h) * dz_s[h];
    if (ddim_gain && !d->dim_gain)
        memset(ddim_gain, 0, d->heads * D * sizeof(double));

    free(dz);
    free(oi);
    free(dz_s);
    row_free(&r);
}

/* ---- stats and probabilities ------------------------------------------- */

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

void ref_attention_stats(const pfx_attention_desc *d, const float *q, const float *k,
                         const float *pk, unsigned top_k, double *entropy, double *topk_mass,
                         double *prefix_mass)
{
    check_desc(d, 0, q, k, pk);
    if (top_k == 0)
        ref_fail("top_k == 0");
    ref_row r;
    row_init(&r, d);
    double *sorted = ref_alloc(r.cols, sizeof(double));

    for (size_t h = 0; h < d->heads; h++) {
        double ent = 0.0, top = 0.0, pre = 0.0;
        size_t rows = 0;
        for (size_t b = 0; b < d->batch; b++)
            for (size_t i = 0; i < d->queries; i++) {
                double l = row_softmax(d, q, k, pk, b, h, i, &r);
                if (isinf(l))
                    continue;
                rows++;
                double pz = 0.0, pp = 0.0;
                size_t nvis = 0;
                for (size_t j = 0; j < r.cols; j++) {
                    if (!r.vis[j])
                        continue;
                    pz += r.p[j] * r.z[j];
                    if (j < d->prefix_len)
                        pp += r.p[j];
                    sorted[nvis++] = r.p[j];
                }
                qsort(sorted, nvis, sizeof(double), cmp_desc);
                double t = 0.0;
                for (size_t j = 0; j < nvis && j < top_k; j++)
                    t += sorted[j];
                ent += l - pz;
                top += t;
                pre += pp;
            }
        double inv = rows ? 1.0 / (double)rows : 0.0;
        if (entropy)
            entropy[h] = ent * inv;
        if (topk_mass)
            topk_mass[h] = top * inv;
        if (prefix_mass)
            prefix_mass[h] = pre * inv;
    }
    free(sorted);
    row_free(&r);
}

void ref_softmax_probs(const pfx_attention_desc *d, const float *q, const float *k, const float *pk,
                       size_t item, size_t head, double *probs)
{
    check_desc(d, 0, q, k, pk);
    if (item >= d->batch || head >= d->heads)
        ref_fail("item or head out of range");
    ref_row r;
    row_init(&r, d);
    for (size_t i = 0; i < d->queries; i++) {
        row_softmax(d, q, k, pk, item, head, i, &r);
        memcpy(probs + i * r.cols, r.p, r.cols * sizeof(double));
    }
    row_free(&r);
}

/* ---- comparison -------------------------------------------------------- */

static double rel_l2_impl(const double *ref, const float *gotf, const double *gotd, size_t n)
{
    double diff2 = 0.0, ref2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        double g = gotf ? (double)gotf[i] : gotd[i];
        if (isinf(ref[i]) && ref[i] < 0) {
            if (isinf(g) && g < 0)
                continue;
            return INFINITY;
        }
        if (isnan(ref[i]) && isnan(g))
            continue; /* NaN propagated where the reference has it */
        if (!isfinite(ref[i]) || !isfinite(g))
            return INFINITY;
        diff2 += (ref[i] - g) * (ref[i] - g);
        ref2 += ref[i] * ref[i];
    }
    return ref2 > 0.0 ? sqrt(diff2 / ref2) : sqrt(diff2);
}

double rel_l2(const double *ref, const float *got, size_t n)
{
    return rel_l2_impl(ref, got, NULL, n);
}

double rel_l2_d(const double *ref, const double *got, size_t n)
{
    return rel_l2_impl(ref, NULL, got, n);
}
