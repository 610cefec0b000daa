/* Double-precision reference of the prefix encoder: straight loops. */
#include <math.h>
#include <stdlib.h>

#include "encoder_ref.h"

size_t ref_encoder_out_dim(const ref_encoder_dims *d)
{
    return 2 * d->layers * d->kv_heads * d->head_dim;
}

size_t ref_encoder_param_count(const ref_encoder_dims *d, int which)
{
    const size_t O = ref_encoder_out_dim(d);
    switch (which) {
    case 0: return d->prefix_len * d->embed_dim;
    case 1: return d->hidden_dim * d->embed_dim;
    case 2: return d->hidden_dim;
    case 3: return O * d->hidden_dim;
    default: return O;
    }
}

size_t ref_encoder_prefix_count(const ref_encoder_dims *d)
{
    return d->kv_heads * d->prefix_len * d->head_dim;
}

/* T [m, h] = tanh(E W1^T + b1). */
static double *hidden(const ref_encoder_dims *d, const ref_encoder_params *p)
{
    const size_t m = d->prefix_len, e = d->embed_dim, h = d->hidden_dim;
    double *t = malloc(m * h * sizeof(double));
    if (!t)
        abort();
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < h; j++) {
            double s = p->b1[j];
            for (size_t c = 0; c < e; c++)
                s += (double)p->e[i * e + c] * p->w1[j * e + c];
            t[i * h + j] = tanh(s);
        }
    return t;
}

/* Column of Y (and row of W2) of prefix element (l, s, hk, dd); offset of the
 * same element at row t in the [L][Hkv][m][D] prefix arrays. */
static size_t y_col(const ref_encoder_dims *d, size_t l, size_t s, size_t hk, size_t dd)
{
    return ((l * 2 + s) * d->kv_heads + hk) * d->head_dim + dd;
}

static size_t prefix_at(const ref_encoder_dims *d, size_t l, size_t hk, size_t t, size_t dd)
{
    return ((l * d->kv_heads + hk) * d->prefix_len + t) * d->head_dim + dd;
}

void ref_encoder_forward(const ref_encoder_dims *d, const ref_encoder_params *p, double *kp,
                         double *vp)
{
    const size_t h = d->hidden_dim;
    double *t = hidden(d, p);
    for (size_t l = 0; l < d->layers; l++)
        for (size_t s = 0; s < 2; s++) {
            double *out = s ? vp : kp;
            if (!out)
                continue;
            for (size_t hk = 0; hk < d->kv_heads; hk++)
                for (size_t i = 0; i < d->prefix_len; i++)
                    for (size_t dd = 0; dd < d->head_dim; dd++) {
                        size_t col = y_col(d, l, s, hk, dd);
                        double y = p->b2[col];
                        for (size_t j = 0; j < h; j++)
                            y += t[i * h + j] * p->w2[col * h + j];
                        out[prefix_at(d, l, hk, i, dd)] = y;
                    }
        }
    free(t);
}

void ref_encoder_backward(const ref_encoder_dims *d, const ref_encoder_params *p, const float *dkp,
                          const float *dvp, double *de, double *dw1, double *db1, double *dw2,
                          double *db2)
{
    const size_t m = d->prefix_len, e = d->embed_dim, h = d->hidden_dim;
    const size_t O = ref_encoder_out_dim(d);
    double *t = hidden(d, p);
    /* dY [m, O] */
    double *dy = calloc(m * O, sizeof(double));
    double *da = calloc(m * h, sizeof(double));
    if (!dy || !da)
        abort();
    for (size_t l = 0; l < d->layers; l++)
        for (size_t s = 0; s < 2; s++) {
            const float *g = s ? dvp : dkp;
            if (!g)
                continue;
            for (size_t hk = 0; hk < d->kv_heads; hk++)
                for (size_t i = 0; i < m; i++)
                    for (size_t dd = 0; dd < d->head_dim; dd++)
                        dy[i * O + y_col(d, l, s, hk, dd)] = g[prefix_at(d, l, hk, i, dd)];
        }
    if (dw2)
        for (size_t o = 0; o < O; o++)
            for (size_t j = 0; j < h; j++) {
                double s = 0;
                for (size_t i = 0; i < m; i++)
                    s += dy[i * O + o] * t[i * h + j];
                dw2[o * h + j] = s;
            }
    if (db2)
        for (size_t o = 0; o < O; o++) {
            double s = 0;
            for (size_t i = 0; i < m; i++)
                s += dy[i * O + o];
            db2[o] = s;
        }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < h; j++) {
            double s = 0;
            for (size_t o = 0; o < O; o++)
                s += dy[i * O + o] * p->w2[o * h + j];
            double tv = t[i * h + j];
            da[i * h + j] = s * (1.0 - tv * tv);
        }
    if (db1)
        for (size_t j = 0; j < h; j++) {
            double s = 0;
            for (size_t i = 0; i < m; i++)
                s += da[i * h + j];
            db1[j] = s;
        }
    if (dw1)
        for (size_t j = 0; j < h; j++)
            for (size_t c = 0; c < e; c++) {
                double s = 0;
                for (size_t i = 0; i < m; i++)
                    s += da[i * h + j] * p->e[i * e + c];
                dw1[j * e + c] = s;
            }
    if (de)
        for (size_t i = 0; i < m; i++)
            for (size_t c = 0; c < e; c++) {
                double s = 0;
                for (size_t j = 0; j < h; j++)
                    s += da[i * h + j] * p->w1[j * e + c];
                de[i * e + c] = s;
            }
    free(t);
    free(dy);
    free(da);
}

double ref_encoder_loss(const ref_encoder_dims *d, const ref_encoder_params *p, const float *dkp,
                        const float *dvp)
{
    size_t n = d->layers * ref_encoder_prefix_count(d);
    double *kp = malloc(n * sizeof(double)), *vp = malloc(n * sizeof(double));
    if (!kp || !vp)
        abort();
    ref_encoder_forward(d, p, kp, vp);
    double loss = 0;
    for (size_t i = 0; i < n; i++)
        loss += (dkp ? dkp[i] * kp[i] : 0.0) + (dvp ? dvp[i] * vp[i] : 0.0);
    free(kp);
    free(vp);
    return loss;
}
