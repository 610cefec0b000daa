/*
 * prefixcl: the attention layer of a frozen model, its residual stack and the
 * MSE loss, forward and backward.
 *
 * One layer, for X [B, N, C] (float32, rows b*N + i):
 *   Q = X Wq^T + bq          [B, N, H, D]     Wq [H*D, C]    bq [H*D]
 *   K = X Wk^T + bk          [B, N, Hkv, D]   Wk [Hkv*D, C]  bk [Hkv*D]
 *   V = X Wv^T + bv          [B, N, Hkv, D]   Wv [Hkv*D, C]  bv [Hkv*D]
 *   O = attention(Q, [Kp; K], [Vp; V])  with per-head gains (attention.h),
 *       BNHD layouts (the projections' natural layout, no transpose)
 *   Y = O Wo^T + bo (+ X with params.residual)   Wo [C, H*D]   bo [C]
 * Weights are in PyTorch's [out, in] layout, frozen, owned by the layer (fill
 * them with pfx_layer_init_random or through pfx_layer_weight); biases exist
 * when params.bias is set. Every product goes through CLBlast.
 *
 * The forward keeps Q, K, V, O and the LSE in a workspace the layer owns
 * (allocated at create for max_batch x max_tokens, accounted): the backward
 * of a layer uses its most recent forward, so a stack runs every forward,
 * then every backward in reverse order. Backward from dY gives dX (with the
 * residual path added), the prefix gradients dKp, dVp ([Hkv, P, D], float32,
 * summed over the batch and the query heads of each kv head) and dgain [H];
 * the frozen weights get gradients only when their outputs are given.
 *
 * A stack: X_{l+1} = X_l + layer_l(X_l) (layers created with residual = true);
 * pfx_stack_forward / pfx_stack_backward run it.
 *
 * Every call validates all of its arguments before it enqueues anything; a
 * bad argument returns its status and pfx_last_error(rt) names it. Work is
 * enqueued on the runtime's in-order queue. Deterministic run after run.
 */
#ifndef PREFIXCL_LAYER_H
#define PREFIXCL_LAYER_H

#include "prefixcl/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_layer pfx_layer;

/* Designated initializers; zero fields take their defaults where noted. */
typedef struct pfx_layer_params {
    size_t model_dim;        /* C >= 1 */
    size_t heads;            /* H >= 1 */
    size_t kv_heads;         /* Hkv >= 1, H % Hkv == 0 */
    size_t head_dim;         /* D >= 1, at most the attention kernels' largest head
                               size (256; PFX_ERROR_UNSUPPORTED above) */
    size_t prefix_len;       /* P (0: no prefix) */
    size_t max_batch;        /* B capacity of the workspace, >= 1 */
    size_t max_tokens;       /* N capacity of the workspace, >= 1 */
    bool bias;               /* bq, bk, bv, bo present */
    bool causal;             /* causal self-attention (prefix always visible) */
    bool residual;           /* Y = X + layer(X) */
    pfx_gain_mode gain_mode; /* OFF, LINEAR or TANH */
    float scale;             /* 0: 1 / sqrt(D) */
} pfx_layer_params;

typedef enum pfx_layer_weight_id {
    PFX_LAYER_WQ = 0, /* [H*D, C] */
    PFX_LAYER_WK,     /* [Hkv*D, C] */
    PFX_LAYER_WV,     /* [Hkv*D, C] */
    PFX_LAYER_WO,     /* [C, H*D] */
    PFX_LAYER_BQ,     /* [H*D] */
    PFX_LAYER_BK,     /* [Hkv*D] */
    PFX_LAYER_BV,     /* [Hkv*D] */
    PFX_LAYER_BO,     /* [C] */
} pfx_layer_weight_id;
#define PFX_LAYER_WEIGHT_COUNT 8

/* Creates a layer: weights (uninitialized) and workspace. */
PFX_API pfx_status pfx_layer_create(pfx_runtime *rt, const pfx_layer_params *params,
                                    pfx_layer **out);
/* Releases everything (accounting returns to where it was); NULL-safe. */
PFX_API void pfx_layer_destroy(pfx_layer **layer);
PFX_API pfx_status pfx_layer_get_params(const pfx_layer *layer, pfx_layer_params *params);

/* A weight tensor (float32, owned by the layer); NULL for a bias of a layer
 * without biases or a bad id. */
PFX_API pfx_tensor *pfx_layer_weight(const pfx_layer *layer, pfx_layer_weight_id which);

/* Seeded host initialization (blocks): one splitmix64 stream from `seed`
 * fills Wq, Wk, Wv, Wo, bq, bk, bv, bo in that order (the biases only when
 * present) uniformly in [-a, a], a = scale / sqrt(fan_in) (C for Wq/Wk/Wv
 * and their biases, H*D for Wo and bo). scale finite, >= 0.
 * As in attention.h: a NaN or infinite scale, gain or ramp is
 * PFX_ERROR_NOT_FINITE, a finite one outside its range (scale < 0, ramp
 * outside [0, 1]) PFX_ERROR_INVALID_ARGUMENT. */
PFX_API pfx_status pfx_layer_init_random(pfx_layer *layer, uint64_t seed, float scale);

/* What the layer attends with, per call. */
typedef struct pfx_layer_prefix {
    const pfx_tensor *k; /* [Hkv, P, D] float32 or half; NULL when P == 0 */
    const pfx_tensor *v;
    const float
        *gain;       /* host [H]: g_h; required unless the gain mode is OFF or gain_tensor is set */
    float gain_ramp; /* r in [0, 1] */
    /* device [H] float32 g_h, or NULL: used instead of `gain`, read on the
     * device (no blocking read in a training step; values not checked) */
    const pfx_tensor *gain_tensor;
} pfx_layer_prefix;

/* y [B, N, C] from x [B, N, C] (float32, distinct, B <= max_batch,
 * N <= max_tokens). Keeps what the backward needs. */
PFX_API pfx_status pfx_layer_forward(pfx_layer *layer, const pfx_tensor *x,
                                     const pfx_layer_prefix *prefix, pfx_tensor *y);

typedef struct pfx_layer_grads {
    pfx_tensor *dx;        /* [B, N, C]; overwritten (NULL: not computed) */
    pfx_tensor *dprefix_k; /* [Hkv, P, D] float32 (NULL: not computed) */
    pfx_tensor *dprefix_v;
    pfx_tensor *dgain;                           /* [H] float32 (zeros with the gain OFF) */
    pfx_tensor *dweight[PFX_LAYER_WEIGHT_COUNT]; /* frozen weights: only when asked */
    bool accumulate; /* add into every gradient but dx instead of overwriting */
} pfx_layer_grads;

/* Gradients of sum(dY * Y) for the most recent forward of this layer, which
 * must have had the same x (same shape) and the same prefix. dy may not be
 * an output. */
PFX_API pfx_status pfx_layer_backward(pfx_layer *layer, const pfx_tensor *x,
                                      const pfx_layer_prefix *prefix, const pfx_tensor *dy,
                                      const pfx_layer_grads *grads);

/* pfx_attention_stats (attention.h) of the layer's most recent forward,
 * which must have used this prefix: per head [H] float32 entropy, top_k mass
 * and prefix mass (each may be NULL). */
PFX_API pfx_status pfx_layer_attention_stats(pfx_layer *layer, const pfx_layer_prefix *prefix,
                                             unsigned top_k, pfx_tensor *entropy,
                                             pfx_tensor *topk_mass, pfx_tensor *prefix_mass);

/* Workspace bytes the layer holds beyond its weights. */
PFX_API size_t pfx_layer_workspace_bytes(const pfx_layer *layer);

/* ---- a residual stack of layers ----
 * acts[0] is the input X_0, acts[l + 1] = layer_l(acts[l]) for l < count
 * (each layer created with residual = true gives X_{l+1} = X_l + ...); all
 * count + 1 tensors [B, N, C], distinct. prefixes[l] belongs to layer l.
 * Every layer of one runtime; errors of both stack calls go to
 * pfx_last_error(layers[0]'s runtime), to pfx_last_error(NULL) only when no
 * layer is given (layers NULL, count 0 or layers[0] NULL). */
PFX_API pfx_status pfx_stack_forward(pfx_layer *const *layers, size_t count,
                                     const pfx_layer_prefix *prefixes, pfx_tensor *const *acts);

/* Backward through the stack from dy (gradient of acts[count]): per layer
 * grads[l] (its dx is ignored), and the input gradient into dx (may be NULL
 * when not needed). scratch: one or two tensors [B, N, C] distinct from
 * everything else (two when count > 1, used alternately). */
PFX_API pfx_status pfx_stack_backward(pfx_layer *const *layers, size_t count,
                                      const pfx_layer_prefix *prefixes, pfx_tensor *const *acts,
                                      const pfx_tensor *dy, const pfx_layer_grads *grads,
                                      pfx_tensor *dx, pfx_tensor *const *scratch);

/* loss = mean((pred - target)^2) over every element (float32 tensors of one
 * element count), a deterministic reduction; grad, when not NULL, receives
 * 2 (pred - target) / n. loss may be NULL when grad is not: then nothing
 * blocks (with loss, the call waits for the result). */
PFX_API pfx_status pfx_mse_loss(const pfx_tensor *pred, const pfx_tensor *target, pfx_tensor *grad,
                                double *loss);

#ifdef __cplusplus
}
#endif

#endif
