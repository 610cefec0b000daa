/* Double-precision reference of the attention layer and stack (layer_ref.h). */
#include "layer_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "layer_ref: out of memory\n");
        abort();
    }
    return p;
}

static double gamma_of(pfx_gain_mode mode, double x)
{
    return mode == PFX_GAIN_LINEAR ? 1.0 + x : mode == PFX_GAIN_TANH ? 1.0 + tanh(x) : 1.0;
}

/* d gamma(x) / dx */
static double dgamma_of(pfx_gain_mode mode, double x)
{
    if (mode == PFX_GAIN_LINEAR)
        return 1.0;
    if (mode == PFX_GAIN_TANH) {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    return 0.0;
}

static double base_scale(const ref_layer_dims *d)
{
    return d->scale > 0.0 ? d->scale : 1.0 / sqrt((double)d->head_dim);
}

static double head_factor(const ref_layer_dims *d, const ref_layer_prefix *p, size_t h)
{
    double g = d->gain_mode == PFX_GAIN_OFF ? 0.0 : p->gain[h];
    return base_scale(d) * gamma_of(d->gain_mode, p->ramp * g);
}

/* Pointers to key/value row j of (b, hk): prefix rows first. */
static const double *key_row(const ref_layer_dims *d, const ref_layer_prefix *p, const double *k,
                             size_t b, size_t hk, size_t j)
{
    const size_t P = d->prefix_len, D = d->head_dim;
    if (j < P)
        return p->pk + (hk * P + j) * D;
    return k + ((b * d->tokens + (j - P)) * d->kv_heads + hk) * D;
}

static const double *value_row(const ref_layer_dims *d, const ref_layer_prefix *p, const double *v,
                               size_t b, size_t hk, size_t j)
{
    const size_t P = d->prefix_len, D = d->head_dim;
    if (j < P)
        return p->pv + (hk * P + j) * D;
    return v + ((b * d->tokens + (j - P)) * d->kv_heads + hk) * D;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* probabilities of row (b, h, i) into prob[P + N] (0 where hidden); returns
 * the logits in z. */
static void row_probs(const ref_layer_dims *d, const ref_layer_prefix *p, const double *q,
                      const double *k, size_t b, size_t h, size_t i, double *z, double *prob)
{
    const size_t N = d->tokens, P = d->prefix_len, D = d->head_dim, H = d->heads;
    const size_t hk = h / (H / d->kv_heads);
    const double c = head_factor(d, p, h);
    const double *qi = q + ((b * N + i) * H + h) * D;
    const size_t len = d->lens ? (size_t)d->lens[b] : N;
    if (i >= len) { /* a padding row: nothing visible, O = 0 */
        for (size_t j = 0; j < P + N; j++) {
            z[j] = -INFINITY;
            prob[j] = 0.0;
        }
        return;
    }
    double mx = -INFINITY;
    for (size_t j = 0; j < P + N; j++) {
        bool vis = j < P || ((!d->causal || j - P <= i) && j - P < len);
        z[j] = vis ? c * dot(qi, key_row(d, p, k, b, hk, j), D) : -INFINITY;
        if (z[j] > mx)
            mx = z[j];
    }
    double sum = 0.0;
    for (size_t j = 0; j < P + N; j++) {
        prob[j] = isinf(z[j]) ? 0.0 : exp(z[j] - mx);
        sum += prob[j];
    }
    for (size_t j = 0; j < P + N; j++)
        prob[j] /= sum;
}

void ref_layer_attention(const ref_layer_dims *d, const ref_layer_prefix *p, const double *q,
                         const double *k, const double *v, double *o)
{
    const size_t B = d->batch, N = d->tokens, P = d->prefix_len, D = d->head_dim, H = d->heads;
    double *z = xcalloc(P + N, sizeof(double)), *prob = xcalloc(P + N, sizeof(double));
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            const size_t hk = h / (H / d->kv_heads);
            for (size_t i = 0; i < N; i++) {
                row_probs(d, p, q, k, b, h, i, z, prob);
                double *oi = o + ((b * N + i) * H + h) * D;
                memset(oi, 0, D * sizeof(double));
                for (size_t j = 0; j < P + N; j++) {
                    if (prob[j] == 0.0)
                        continue;
                    const double *vj = value_row(d, p, v, b, hk, j);
                    for (size_t e = 0; e < D; e++)
                        oi[e] += prob[j] * vj[e];
                }
            }
        }
    free(z);
    free(prob);
}

void ref_layer_attention_backward(const ref_layer_dims *d, const ref_layer_prefix *p,
                                  const double *q, const double *k, const double *v,
                                  const double *d_o, double *dq, double *dk, double *dv,
                                  double *dpk, double *dpv, double *dgain)
{
    const size_t B = d->batch, N = d->tokens, P = d->prefix_len, D = d->head_dim, H = d->heads;
    const size_t Hkv = d->kv_heads;
    memset(dq, 0, B * N * H * D * sizeof(double));
    memset(dk, 0, B * N * Hkv * D * sizeof(double));
    memset(dv, 0, B * N * Hkv * D * sizeof(double));
    if (dpk)
        memset(dpk, 0, Hkv * P * D * sizeof(double));
    if (dpv)
        memset(dpv, 0, Hkv * P * D * sizeof(double));
    if (dgain)
        memset(dgain, 0, H * sizeof(double));
    double *z = xcalloc(P + N, sizeof(double)), *prob = xcalloc(P + N, sizeof(double));
    double *dz = xcalloc(P + N, sizeof(double));
    for (size_t h = 0; h < H; h++) {
        const size_t hk = h / (H / Hkv);
        const double c = head_factor(d, p, h);
        double dc = 0.0;
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < N; i++) {
                row_probs(d, p, q, k, b, h, i, z, prob);
                const double *qi = q + ((b * N + i) * H + h) * D;
                const double *doi = d_o + ((b * N + i) * H + h) * D;
                double delta = 0.0;
                for (size_t j = 0; j < P + N; j++) {
                    dz[j] = prob[j] == 0.0 ? 0.0 : dot(doi, value_row(d, p, v, b, hk, j), D);
                    delta += prob[j] * dz[j];
                }
                double *dqi = dq + ((b * N + i) * H + h) * D;
                for (size_t j = 0; j < P + N; j++) {
                    if (prob[j] == 0.0)
                        continue;
                    const double g = prob[j] * (dz[j] - delta);
                    const double *kj = key_row(d, p, k, b, hk, j);
                    dc += g * dot(qi, kj, D);
                    double *dkj = j < P ? (dpk ? dpk + (hk * P + j) * D : NULL)
                                        : dk + ((b * N + (j - P)) * Hkv + hk) * D;
                    double *dvj = j < P ? (dpv ? dpv + (hk * P + j) * D : NULL)
                                        : dv + ((b * N + (j - P)) * Hkv + hk) * D;
                    for (size_t e = 0; e < D; e++) {
                        dqi[e] += c * g * kj[e];
                        if (dkj)
                            dkj[e] += c * g * qi[e];
                        if (dvj)
                            dvj[e] += prob[j] * doi[e];
                    }
                }
            }
        if (dgain && d->gain_mode != PFX_GAIN_OFF)
            dgain[h] = dc * base_scale(d) * p->ramp * dgamma_of(d->gain_mode, p->ramp * p->gain[h]);
    }
    free(z);
    free(prob);
    free(dz);
}

/* out[r][o] = sum_c in[r][c] w[o][c] + b[o] */
static void linear(size_t rows, size_t in_dim, size_t out_dim, const double *in, const double *w,
                   const double *bias, double *out)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out_dim; o++)
            out[r * out_dim + o] =
                dot(in + r * in_dim, w + o * in_dim, in_dim) + (bias ? bias[o] : 0.0);
}

/* din[r][c] (+)= sum_o dout[r][o] w[o][c]; dw[o][c] = sum_r dout[r][o] in[r][c];
 * db[o] = sum_r dout[r][o] */
static void linear_backward(size_t rows, size_t in_dim, size_t out_dim, const double *in,
                            const double *w, const double *dout, double *din, double *dw,
                            double *db)
{
    for (size_t r = 0; din && r < rows; r++)
        for (size_t c = 0; c < in_dim; c++) {
            double s = 0.0;
            for (size_t o = 0; o < out_dim; o++)
                s += dout[r * out_dim + o] * w[o * in_dim + c];
            din[r * in_dim + c] += s;
        }
    for (size_t o = 0; dw && o < out_dim; o++)
        for (size_t c = 0; c < in_dim; c++) {
            double s = 0.0;
            for (size_t r = 0; r < rows; r++)
                s += dout[r * out_dim + o] * in[r * in_dim + c];
            dw[o * in_dim + c] = s;
        }
    for (size_t o = 0; db && o < out_dim; o++) {
        double s = 0.0;
        for (size_t r = 0; r < rows; r++)
            s += dout[r * out_dim + o];
        db[o] = s;
    }
}

typedef struct acts {
    double *q, *k, *v, *o;
} acts;

static void forward_acts(const ref_layer_dims *d, const ref_layer_weights *w,
                         const ref_layer_prefix *p, const double *x, acts *a, double *y)
{
    const size_t rows = d->batch * d->tokens, C = d->model_dim;
    const size_t qd = d->heads * d->head_dim, kvd = d->kv_heads * d->head_dim;
    a->q = xcalloc(rows * qd, sizeof(double));
    a->k = xcalloc(rows * kvd, sizeof(double));
    a->v = xcalloc(rows * kvd, sizeof(double));
    a->o = xcalloc(rows * qd, sizeof(double));
    linear(rows, C, qd, x, w->wq, w->bq, a->q);
    linear(rows, C, kvd, x, w->wk, w->bk, a->k);
    linear(rows, C, kvd, x, w->wv, w->bv, a->v);
    ref_layer_attention(d, p, a->q, a->k, a->v, a->o);
    linear(rows, qd, C, a->o, w->wo, w->bo, y);
    if (d->residual)
        for (size_t i = 0; i < rows * C; i++)
            y[i] += x[i];
}

static void free_acts(acts *a)
{
    free(a->q);
    free(a->k);
    free(a->v);
    free(a->o);
}

void ref_layer_forward(const ref_layer_dims *d, const ref_layer_weights *w,
                       const ref_layer_prefix *p, const double *x, double *y)
{
    acts a;
    forward_acts(d, w, p, x, &a, y);
    free_acts(&a);
}

void ref_layer_backward(const ref_layer_dims *d, const ref_layer_weights *w,
                        const ref_layer_prefix *p, const double *x, const double *dy,
                        const ref_layer_grads *g)
{
    const size_t rows = d->batch * d->tokens, C = d->model_dim;
    const size_t qd = d->heads * d->head_dim, kvd = d->kv_heads * d->head_dim;
    acts a;
    double *y = xcalloc(rows * C, sizeof(double));
    forward_acts(d, w, p, x, &a, y);
    double *d_o = xcalloc(rows * qd, sizeof(double));
    double *dq = xcalloc(rows * qd, sizeof(double));
    double *dk = xcalloc(rows * kvd, sizeof(double));
    double *dv = xcalloc(rows * kvd, sizeof(double));
    linear_backward(rows, qd, C, a.o, w->wo, dy, d_o, g->dwo, w->bo ? g->dbo : NULL);
    ref_layer_attention_backward(d, p, a.q, a.k, a.v, d_o, dq, dk, dv, g->dpk, g->dpv, g->dgain);
    if (g->dx) {
        for (size_t i = 0; i < rows * C; i++)
            g->dx[i] = d->residual ? dy[i] : 0.0;
    }
    linear_backward(rows, C, qd, x, w->wq, dq, g->dx, g->dwq, w->bq ? g->dbq : NULL);
    linear_backward(rows, C, kvd, x, w->wk, dk, g->dx, g->dwk, w->bk ? g->dbk : NULL);
    linear_backward(rows, C, kvd, x, w->wv, dv, g->dx, g->dwv, w->bv ? g->dbv : NULL);
    free(y);
    free(d_o);
    free(dq);
    free(dk);
    free(dv);
    free_acts(&a);
}

void ref_stack_forward(const ref_layer_dims *d, size_t layers, const ref_layer_weights *w,
                       const ref_layer_prefix *p, const double *x, double *y)
{
    const size_t n = d->batch * d->tokens * d->model_dim;
    double *cur = xcalloc(n, sizeof(double)), *next = xcalloc(n, sizeof(double));
    memcpy(cur, x, n * sizeof(double));
    for (size_t l = 0; l < layers; l++) {
        ref_layer_forward(d, &w[l], &p[l], cur, next);
        double *t = cur;
        cur = next;
        next = t;
    }
    memcpy(y, cur, n * sizeof(double));
    free(cur);
    free(next);
}

void ref_stack_backward(const ref_layer_dims *d, size_t layers, const ref_layer_weights *w,
                        const ref_layer_prefix *p, const double *x, const double *dy,
                        const ref_layer_grads *g, double *dx)
{
    const size_t n = d->batch * d->tokens * d->model_dim;
    double **xs = xcalloc(layers + 1, sizeof(double *));
    for (size_t l = 0; l <= layers; l++)
        xs[l] = xcalloc(n, sizeof(double));
    memcpy(xs[0], x, n * sizeof(double));
    for (size_t l = 0; l < layers; l++)
        ref_layer_forward(d, &w[l], &p[l], xs[l], xs[l + 1]);
    double *grad = xcalloc(n, sizeof(double)), *gin = xcalloc(n, sizeof(double));
    memcpy(grad, dy, n * sizeof(double));
    for (size_t l = layers; l-- > 0;) {
        ref_layer_grads gl = g[l];
        gl.dx = gin;
        ref_layer_backward(d, &w[l], &p[l], xs[l], grad, &gl);
        double *t = grad;
        grad = gin;
        gin = t;
    }
    if (dx)
        memcpy(dx, grad, n * sizeof(double));
    for (size_t l = 0; l <= layers; l++)
        free(xs[l]);
    free(xs);
    free(grad);
    free(gin);
}
