/*
 * Double-precision plain-C reference for the prefix encoder
 * (docs/design.md, "Prefix encoder"; include/prefixcl/encoder.h):
 *   T = tanh(E W1^T + b1),  Y = T W2^T + b2,  Y viewed as [m][L][2][Hkv][D].
 * Parameters are float in PyTorch's layout: E [m, e], W1 [h, e], b1 [h],
 * W2 [O, h], b2 [O], O = 2 L Hkv D. Prefixes and their gradients are
 * contiguous over layers: kp[l][hk][t][d] (each layer a [Hkv, m, D] block,
 * layer l at offset l * Hkv * m * D). Outputs are double and overwritten.
 */
#ifndef PFX_TEST_ENCODER_REF_H
#define PFX_TEST_ENCODER_REF_H

#include <stddef.h>

typedef struct ref_encoder_dims {
    size_t layers, kv_heads, head_dim, prefix_len, embed_dim, hidden_dim;
} ref_encoder_dims;

typedef struct ref_encoder_params {
    const float *e, *w1, *b1, *w2, *b2;
} ref_encoder_params;

/* O = 2 L Hkv D, and the element counts of each parameter and of one
 * layer's prefix (Hkv m D). */
size_t ref_encoder_out_dim(const ref_encoder_dims *d);
size_t ref_encoder_param_count(const ref_encoder_dims *d, int which); /* 0..4: E W1 b1 W2 b2 */
size_t ref_encoder_prefix_count(const ref_encoder_dims *d);

/* kp, vp: [L][Hkv][m][D] (either may be NULL). */
void ref_encoder_forward(const ref_encoder_dims *d, const ref_encoder_params *p, double *kp,
                         double *vp);

/* Gradients of sum(dkp * Kp) + sum(dvp * Vp); dkp / dvp [L][Hkv][m][D] or NULL
 * (zeros). Any output may be NULL. */
void ref_encoder_backward(const ref_encoder_dims *d, const ref_encoder_params *p, const float *dkp,
                          const float *dvp, double *de, double *dw1, double *db1, double *dw2,
                          double *db2);

/* sum(dkp * Kp) + sum(dvp * Vp) in double (the loss of the finite differences). */
double ref_encoder_loss(const ref_encoder_dims *d, const ref_encoder_params *p, const float *dkp,
                        const float *dvp);

#endif
