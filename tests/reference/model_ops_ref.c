/* Double-precision references of the whole-model pieces (model_ops_ref.h). */
#include "model_ops_ref.h"

#include <math.h>

#define PI 3.14159265358979323846

double ref_act(ref_activation act, double u)
{
    switch (act) {
    case REF_ACT_GELU_TANH:
        return 0.5 * u * (1.0 + tanh(sqrt(2.0 / PI) * (u + 0.044715 * u * u * u)));
    case REF_ACT_GELU: return 0.5 * u * (1.0 + erf(u / sqrt(2.0)));
    case REF_ACT_RELU: return u > 0.0 ? u : 0.0;
    case REF_ACT_SILU: return u / (1.0 + exp(-u));
    }
    return NAN;
}

double ref_act_grad(ref_activation act, double u)
{
    switch (act) {
    case REF_ACT_GELU_TANH: {
        const double k = sqrt(2.0 / PI), t = tanh(k * (u + 0.044715 * u * u * u));
        return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * u * u);
    }
    case REF_ACT_GELU:
        return 0.5 * (1.0 + erf(u / sqrt(2.0))) + u * exp(-0.5 * u * u) / sqrt(2.0 * PI);
    case REF_ACT_RELU: return u > 0.0 ? 1.0 : 0.0;
    case REF_ACT_SILU: {
        const double s = 1.0 / (1.0 + exp(-u));
        return s * (1.0 + u * (1.0 - s));
    }
    }
    return NAN;
}

/* mean and rstd of one row (mean 0 for rms) */
static void row_stats(size_t cols, const double *x, bool rms, double eps, double *mean,
                      double *rstd)
{
    double mu = 0.0;
    if (!rms) {
        for (size_t c = 0; c < cols; c++)
            mu += x[c];
        mu /= (double)cols;
    }
    double v = 0.0;
    for (size_t c = 0; c < cols; c++)
        v += (x[c] - mu) * (x[c] - mu);
    *mean = mu;
    *rstd = 1.0 / sqrt(v / (double)cols + eps);
}

static void norm_forward(size_t rows, size_t cols, bool rms, const double *x, const double *w,
                         const double *b, double eps, double *y, double *mean, double *rstd)
{
    for (size_t r = 0; r < rows; r++) {
        double mu, rs;
        row_stats(cols, x + r * cols, rms, eps, &mu, &rs);
        if (mean)
            mean[r] = mu;
        if (rstd)
            rstd[r] = rs;
        for (size_t c = 0; y && c < cols; c++)
            y[r * cols + c] = (x[r * cols + c] - mu) * rs * w[c] + (b ? b[c] : 0.0);
    }
}

static void norm_backward(size_t rows, size_t cols, bool rms, const double *x, const double *w,
                          double eps, const double *dy, double *dx)
{
    for (size_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols, *dyr = dy + r * cols;
        double mu, rs, mg = 0.0, mgx = 0.0;
        row_stats(cols, xr, rms, eps, &mu, &rs);
        for (size_t c = 0; c < cols; c++) {
            const double g = dyr[c] * w[c];
            mg += g;
            mgx += g * (xr[c] - mu) * rs;
        }
        mg = rms ? 0.0 : mg / (double)cols;
        mgx /= (double)cols;
        for (size_t c = 0; c < cols; c++)
            dx[r * cols + c] = rs * (dyr[c] * w[c] - mg - (xr[c] - mu) * rs * mgx);
    }
}

void ref_layernorm(size_t rows, size_t cols, const double *x, const double *w, const double *b,
                   double eps, double *y, double *mean, double *rstd)
{
    norm_forward(rows, cols, false, x, w, b, eps, y, mean, rstd);
}

void ref_layernorm_backward(size_t rows, size_t cols, const double *x, const double *w, double eps,
                            const double *dy, double *dx)
{
    norm_backward(rows, cols, false, x, w, eps, dy, dx);
}

void ref_rmsnorm(size_t rows, size_t cols, const double *x, const double *w, double eps, double *y,
                 double *rstd)
{
    norm_forward(rows, cols, true, x, w, NULL, eps, y, NULL, rstd);
}

void ref_rmsnorm_backward(size_t rows, size_t cols, const double *x, const double *w, double eps,
                          const double *dy, double *dx)
{
    norm_backward(rows, cols, true, x, w, eps, dy, dx);
}

void ref_norm_param_grad(size_t rows, size_t cols, const double *x, const double *mean,
                         const double *rstd, const double *dy, double *dw, double *db)
{
    for (size_t c = 0; c < cols; c++) {
        double sw = 0.0, sb = 0.0;
        for (size_t r = 0; r < rows; r++) {
            const double g = dy[r * cols + c];
            sw += g * (x[r * cols + c] - (mean ? mean[r] : 0.0)) * rstd[r];
            sb += g;
        }
        dw[c] = sw;
        if (db)
            db[c] = sb;
    }
}

void ref_rope_inv_freq(const ref_rope *r, size_t head_dim, double *inv_freq)
{
    for (size_t i = 0; i < head_dim / 2; i++) {
        const double f = pow(r->theta, -(double)(2 * i) / (double)head_dim);
        inv_freq[i] = f;
        if (!r->llama3)
            continue;
        /* written as transformers writes it: where(wavelen > low, f / factor, f), then
         * the smoothed value where neither wavelen < high nor wavelen > low */
        const double old = r->original_max_position_embeddings;
        const double low_wavelen = old / r->low_freq_factor;
        const double high_wavelen = old / r->high_freq_factor;
        const double wavelen = 2.0 * PI / f;
        const double scaled = wavelen > low_wavelen ? f / r->factor : f;
        const double smooth =
            (old / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
        const double smoothed = (1.0 - smooth) * scaled / r->factor + smooth * scaled;
        const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        inv_freq[i] = medium ? smoothed : scaled;
    }
}

void ref_rope_apply(size_t batch, size_t tokens, size_t heads, size_t head_dim, size_t pos0,
                    const float *inv_freq, double sign, double *x)
{
    const size_t half = head_dim / 2;
    for (size_t b = 0; b < batch; b++)
        for (size_t t = 0; t < tokens; t++)
            for (size_t h = 0; h < heads; h++) {
                double *p = x + ((b * tokens + t) * heads + h) * head_dim;
                for (size_t d = 0; d < half; d++) {
                    const double a = (double)((float)(pos0 + t) * inv_freq[d]);
                    const double c = cos(a), s = sign * sin(a);
                    const double x1 = p[d], x2 = p[d + half];
                    p[d] = x1 * c - x2 * s;
                    p[d + half] = x2 * c + x1 * s;
                }
            }
}

double ref_cross_entropy_row(size_t vocab, const double *z, int32_t label, double scale, double *dz)
{
    double mx = -INFINITY;
    for (size_t c = 0; c < vocab; c++)
        mx = z[c] > mx ? z[c] : mx;
    double sum = 0.0;
    for (size_t c = 0; c < vocab; c++)
        sum += exp(z[c] - mx);
    for (size_t c = 0; dz && c < vocab; c++)
        dz[c] = (exp(z[c] - mx) / sum - ((size_t)label == c ? 1.0 : 0.0)) * scale;
    return mx + log(sum) - z[label];
}
