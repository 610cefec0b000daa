/*
 * prefixcl: the prefix encoder (MLP reparameterization of prefix tuning).
 *
 * The math is docs/design.md ("Prefix encoder"): a table E (m x e),
 *   T = tanh(E W1^T + b1)        (m x h)
 *   Y = T W2^T + b2              (m x 2*L*Hkv*D)
 * with the weights in PyTorch's [out, in] layout: W1 [h, e], b1 [h],
 * W2 [2*L*Hkv*D, h], b2 [2*L*Hkv*D]. Y viewed as [m][L][2][Hkv][D] gives
 * layer l's prefixes in the layout the attention reads ([Hkv, P = m, D]):
 *   Kp_l[hk][t][d] = Y[t][l][0][hk][d],  Vp_l[hk][t][d] = Y[t][l][1][hk][d]
 * (the order of PEFT's PrefixEncoder).
 *
 * Two modes:
 *  - MLP mode: the parameters are E, W1, b1, W2, b2 (float32 tensors owned by
 *    the encoder); forward produces the 2L prefixes, backward turns the 2L
 *    prefix gradients into parameter gradients.
 *  - direct mode: the 2L prefixes themselves are the parameters (no MLP).
 *    pfx_encoder_bake() turns an MLP-mode encoder into a direct one holding
 *    the prefixes of the current parameters and frees the MLP.
 *
 * Usage:
 *   pfx_encoder_params p = { .layers = 12, .kv_heads = 12, .head_dim = 64,
 *                            .prefix_len = 20, .embed_dim = 512, .hidden_dim = 512 };
 *   pfx_encoder *enc;
 *   pfx_encoder_create(rt, &p, &enc);
 *   pfx_encoder_init_random(enc, 1234, 1.0f);
 *   pfx_encoder_forward(enc, kp, vp);            // kp[l], vp[l]: [Hkv, m, D]
 *   ... attention backward gives dkp[l], dvp[l] ...
 *   pfx_encoder_backward(enc, dkp, dvp, &(pfx_encoder_grads){ .de = dE, ... });
 *   pfx_encoder_bake(enc);                      // serve: MLP gone
 *   pfx_encoder_destroy(&enc);
 *
 * Every call validates all of its arguments before it enqueues anything; a
 * bad argument returns its status and pfx_last_error(rt) names it. Work is
 * enqueued on the runtime's in-order queue. Results are deterministic
 * (bit-identical run after run on one device).
 */
#ifndef PREFIXCL_ENCODER_H
#define PREFIXCL_ENCODER_H

#include "prefixcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_encoder pfx_encoder;

/* Zero-initialized fields take their defaults; use designated initializers. */
typedef struct pfx_encoder_params {
    size_t layers;          /* L >= 1 */
    size_t kv_heads;        /* Hkv >= 1 */
    size_t head_dim;        /* D >= 1 */
    size_t prefix_len;      /* m = P >= 1: rows of E, prefix positions */
    size_t embed_dim;       /* e >= 1 (ignored in direct mode) */
    size_t hidden_dim;      /* h >= 1 (ignored in direct mode) */
    bool direct;            /* the prefixes are the parameters, no MLP */
    pfx_dtype prefix_dtype; /* storage of the prefixes the encoder holds (direct
                             * mode, after bake): PFX_DTYPE_F32 (default) or F16 */
} pfx_encoder_params;

typedef struct pfx_encoder_param_counts {
    size_t trainable;          /* parameters the optimizer updates (MLP, or the prefixes) */
    size_t mlp;                /* E, W1, b1, W2, b2 (0 in direct mode) */
    size_t baked_per_position; /* 2 * L * Hkv * D */
    size_t baked;              /* m * baked_per_position: values of all 2L prefixes */
} pfx_encoder_param_counts;

/* Counts for a parameter set (no runtime needed). For L=12, Hkv=12, D=64,
 * m=20, e=h=512: trainable 9,728,512, baked 18,432 per prefix position.
 * Errors: NULL, a zero dimension, PFX_ERROR_SIZE_OVERFLOW. */
PFX_API pfx_status pfx_encoder_params_counts(const pfx_encoder_params *params,
                                             pfx_encoder_param_counts *counts);

/* Creates an encoder: allocates the parameters (MLP mode: E, W1, b1, W2, b2
 * and a workspace; direct mode: 2L prefixes [Hkv, m, D]), uninitialized. */
PFX_API pfx_status pfx_encoder_create(pfx_runtime *rt, const pfx_encoder_params *params,
                                      pfx_encoder **out);

/* Releases everything the encoder owns and sets *enc to NULL; NULL-safe. */
PFX_API void pfx_encoder_destroy(pfx_encoder **enc);

/* Its current parameters (after bake: direct = true) and counts. */
PFX_API pfx_status pfx_encoder_get_params(const pfx_encoder *enc, pfx_encoder_params *params);
PFX_API pfx_status pfx_encoder_counts(const pfx_encoder *enc, pfx_encoder_param_counts *counts);
PFX_API bool pfx_encoder_is_direct(const pfx_encoder *enc);

typedef enum pfx_encoder_param {
    PFX_ENCODER_E = 0,  /* [m, e] */
    PFX_ENCODER_W1 = 1, /* [h, e] */
    PFX_ENCODER_B1 = 2, /* [h] */
    PFX_ENCODER_W2 = 3, /* [2*L*Hkv*D, h] */
    PFX_ENCODER_B2 = 4, /* [2*L*Hkv*D] */
} pfx_encoder_param;
#define PFX_ENCODER_PARAM_COUNT 5

/* A parameter tensor of the MLP (float32, owned by the encoder: an optimizer
 * updates it, a loader fills it); NULL in direct mode or for a bad `which`. */
PFX_API pfx_tensor *pfx_encoder_tensor(const pfx_encoder *enc, pfx_encoder_param which);

/* PEFT's state-dict name of a parameter ("prefix_encoder.embedding.weight",
 * "prefix_encoder.transform.0.weight", ".0.bias", ".2.weight", ".2.bias");
 * NULL for a bad `which`. */
PFX_API const char *pfx_encoder_param_name(pfx_encoder_param which);

/* Layer l's prefix K or V ([Hkv, m, D], prefix_dtype) held in direct mode;
 * NULL in MLP mode or for l >= L. */
PFX_API pfx_tensor *pfx_encoder_prefix_k(const pfx_encoder *enc, size_t layer);
PFX_API pfx_tensor *pfx_encoder_prefix_v(const pfx_encoder *enc, size_t layer);

/* Seeded host initialization (blocks). One splitmix64 stream from `seed`
 * fills, in order and row-major, E, W1, b1, W2, b2 (direct mode: Kp_0, Vp_0,
 * Kp_1, ...) with u = (x >> 40) * 2^-24 in [0, 1) mapped to [-a, a]:
 *   E and direct prefixes: a = scale
 *   W1, b1: a = scale / sqrt(e)     W2, b2: a = scale / sqrt(h)
 * (scale = 1 gives PyTorch's nn.Linear default init). scale finite, >= 0. */
PFX_API pfx_status pfx_encoder_init_random(pfx_encoder *enc, uint64_t seed, float scale);

/* Writes the 2L prefixes: prefix_k[l], prefix_v[l] are [Hkv, m, D] float32 or
 * half tensors of the encoder's runtime, all distinct. In direct mode they
 * receive copies of the held prefixes (a held tensor passed as its own
 * destination is left as is). */
PFX_API pfx_status pfx_encoder_forward(pfx_encoder *enc, pfx_tensor *const *prefix_k,
                                       pfx_tensor *const *prefix_v);

typedef struct pfx_encoder_grads {
    pfx_tensor *de;  /* like E, float32; NULL: not computed */
    pfx_tensor *dw1; /* like W1 */
    pfx_tensor *db1; /* like b1 */
    pfx_tensor *dw2; /* like W2 */
    pfx_tensor *db2; /* like b2 */
    bool accumulate; /* add into the tensors instead of overwriting them */
} pfx_encoder_grads;

/* MLP mode only. Gradients of sum_l (dKp_l . Kp_l + dVp_l . Vp_l) with respect
 * to the parameters. dprefix_k / dprefix_v are arrays of L tensors [Hkv, m, D]
 * (float32 or half), a NULL array or entry standing for zeros. The hidden
 * layer is recomputed from the current parameters (no forward needed first).
 * Bias gradients are fixed-order reductions: deterministic. */
PFX_API pfx_status pfx_encoder_backward(pfx_encoder *enc, const pfx_tensor *const *dprefix_k,
                                        const pfx_tensor *const *dprefix_v,
                                        const pfx_encoder_grads *grads);

/* MLP mode: computes the prefixes once, keeps them (prefix_dtype), frees E,
 * W1, b1, W2, b2 and the workspace; the encoder is in direct mode afterwards.
 * Blocks until done. In direct mode it does nothing. */
PFX_API pfx_status pfx_encoder_bake(pfx_encoder *enc);

#ifdef __cplusplus
}
#endif

#endif
