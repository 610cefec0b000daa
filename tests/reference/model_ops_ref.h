/*
 * Double-precision references of the whole-model pieces (src/ops/model_ops.h):
 * LayerNorm, RMSNorm (and their weight gradients), activations, SwiGLU, RoPE
 * and inv_freq, causal-LM cross-entropy. Plain loops over row-major double
 * arrays; outputs are overwritten. The whole-model reference (model_ref.h)
 * is built from them.
 */
#ifndef PFX_TEST_MODEL_OPS_REF_H
#define PFX_TEST_MODEL_OPS_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Same order as pfx_activation (src/ops/model_ops.h). */
typedef enum ref_activation {
    REF_ACT_GELU_TANH = 0, /* gelu_new, gelu_pytorch_tanh */
    REF_ACT_GELU = 1,      /* exact, erf */
    REF_ACT_RELU = 2,      /* derivative 0 at 0 */
    REF_ACT_SILU = 3,
} ref_activation;

double ref_act(ref_activation act, double u);
double ref_act_grad(ref_activation act, double u); /* d act / du */

/* LayerNorm rows of x [rows, cols]: y (may be NULL), mean and rstd [rows]
 * (each may be NULL); b may be NULL. */
void ref_layernorm(size_t rows, size_t cols, const double *x, const double *w, const double *b,
                   double eps, double *y, double *mean, double *rstd);
/* dx of sum(dy * layernorm(x)) with w frozen (statistics recomputed). */
void ref_layernorm_backward(size_t rows, size_t cols, const double *x, const double *w, double eps,
                            const double *dy, double *dx);

/* RMSNorm: y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps); y, rstd may be NULL. */
void ref_rmsnorm(size_t rows, size_t cols, const double *x, const double *w, double eps, double *y,
                 double *rstd);
void ref_rmsnorm_backward(size_t rows, size_t cols, const double *x, const double *w, double eps,
                          const double *dy, double *dx);

/* The norm's weight and bias gradients from the given statistics (those the
 * forward kept): xhat = (x - mean) * rstd (x * rstd when mean is NULL:
 * RMSNorm), dw[c] = sum_r dy[r, c] xhat[r, c], db[c] = sum_r dy[r, c] (db
 * may be NULL). x, dy [rows, cols]; mean, rstd [rows]; dw, db [cols]. */
void ref_norm_param_grad(size_t rows, size_t cols, const double *x, const double *mean,
                         const double *rstd, const double *dy, double *dw, double *db);

typedef struct ref_rope {
    double theta; /* rope_theta */
    bool llama3;  /* rope_scaling type llama3 */
    double factor, low_freq_factor, high_freq_factor, original_max_position_embeddings;
} ref_rope;

/* inv_freq[i], i < D/2: theta^(-2i/D), rescaled by wavelength for llama3
 * (transformers' _compute_llama3_parameters), in double. */
void ref_rope_inv_freq(const ref_rope *r, size_t head_dim, double *inv_freq);

/* In place on x [batch * tokens, heads * D] (BNHD rows): rotation of the
 * pairs (d, d + D/2) by sign * a, a = pos * inv_freq[d] with pos = pos0 + t,
 * the product rounded to float32 as transformers forms it (inv_freq float32). */
void ref_rope_apply(size_t batch, size_t tokens, size_t heads, size_t head_dim, size_t pos0,
                    const float *inv_freq, double sign, double *x);

/* One row of logits z [V]: returns logsumexp(z) - z[label]; dz (may be NULL)
 * = (softmax(z) - onehot(label)) * scale. label in [0, V). */
double ref_cross_entropy_row(size_t vocab, const double *z, int32_t label, double scale,
                             double *dz);

#ifdef __cplusplus
}
#endif

#endif
