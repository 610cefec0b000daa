/*
 * prefixcl: prefix attention with per-head gain, forward and backward.
 *
 * The math is the contract of docs/design.md ("The math"): for head h of
 * item b, keys and values are the prefix followed by the input,
 *   K~ = [Kp ; K], V~ = [Vp ; V]  ((P + M) x D),
 *   z_ij = c_h * sum_d q_id (1 + G_hd) k~_jd,   c_h = scale * gamma(r * g_h),
 *   gamma = 1 (off), 1 + x (linear), 1 + tanh(x) (tanh),
 * softmax over the visible j (prefix always; input column t = j - P iff
 * t < kv_len[b] and, when causal, t <= i + M - N), O_i = sum_j p_ij v~_j,
 * LSE_i = log sum_j exp(z_ij). A row with nothing visible, or i >= q_len[b],
 * gives O_i = 0 and LSE_i = -inf. Nothing of size N x (P + M) is stored.
 * A c_h that float32 cannot hold is refused (PFX_ERROR_NOT_FINITE); a logit
 * z_ij beyond float32 from a finite c_h and finite inputs (a huge gain or
 * scale) saturates to +-FLT_MAX, so the row stays finite: its overflowing
 * logits share its weight (every output, the statistics and the map alike;
 * the backward's gradients of such rows are not meaningful). NaN and
 * infinite inputs propagate.
 *
 * Tensor shapes (float32 or half storage, chosen per tensor; the forward
 * also reads Q, K, V and the prefix as bfloat16, a KV cache's storage;
 * bfloat16 elsewhere is PFX_ERROR_DTYPE_MISMATCH):
 *   Q, O, dQ, dO : [B, H, N, D]   (PFX_LAYOUT_BHND) or [B, N, H, D] (BNHD)
 *   K, V, dK, dV : [B, Hkv, M, D] (PFX_LAYOUT_BHND) or [B, M, Hkv, D] (BNHD)
 *   prefix K/V   : [Hkv, P, D] shared by the batch, or [T, Hkv, P, D] a bank
 *                  with desc.bank_index[b] choosing the entry of item b; in
 *                  the forward, entry -1 is an item without prefix (P = 0 for
 *                  it: several tasks and bare requests in one batch; the
 *                  backward and the statistics refuse it)
 *   LSE          : [B, H, N] float32
 * Gradients are float32.
 *
 * Every call validates all of its arguments before it enqueues anything; a bad
 * argument returns its status and pfx_last_error(rt) names it. Work is
 * enqueued on the runtime's in-order queue; the call returns without waiting.
 */
#ifndef PREFIXCL_ATTENTION_H
#define PREFIXCL_ATTENTION_H

#include "prefixcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pfx_layout {
    PFX_LAYOUT_BHND = 0,
    PFX_LAYOUT_BNHD = 1,
} pfx_layout;

typedef enum pfx_gain_mode {
    PFX_GAIN_OFF = 0,    /* gamma = 1 */
    PFX_GAIN_LINEAR = 1, /* gamma = 1 + r g */
    PFX_GAIN_TANH = 2,   /* gamma = 1 + tanh(r g) */
} pfx_gain_mode;

/* A dropout mask from a counter-based generator (Philox4x32-10,
 * docs/design.md "Dropout"): element (row, col) of the stream of `seed`,
 * `step` and `tag` is kept with probability 1 - p (then scaled by 1/(1-p)),
 * the same bits on every device, run and rank, so a backward regenerates
 * its forward's mask. Rows and columns beyond 2^32 wrap. */
typedef struct pfx_dropout_stream {
    uint64_t seed;
    uint32_t step;       /* the training step */
    uint32_t tag;        /* what the mask is for (the model: micro-batch, layer, site) */
    uint32_t first_item; /* item b of the call is item first_item + b of the stream */
} pfx_dropout_stream;

typedef struct pfx_attention_desc {
    size_t batch;         /* B */
    size_t heads;         /* H */
    size_t kv_heads;      /* Hkv, H % Hkv == 0 */
    size_t queries;       /* N */
    size_t keys;          /* M (M >= N: a decode step against a cache) */
    size_t prefix_len;    /* P, 0 allowed */
    size_t head_dim;      /* D */
    pfx_layout q_layout;  /* Q and dQ */
    pfx_layout kv_layout; /* K, V, dK and dV */
    pfx_layout o_layout;  /* O and dO */
    bool causal;
    float scale; /* 0: 1 / sqrt(D) */
    pfx_gain_mode gain_mode;
    const float *gain;      /* host [H]: g_h; required unless gain_mode is OFF or gain_tensor
                            * (or, for every item, item_gain) is set */
    float gain_ramp;        /* r in [0, 1] */
    const float *dim_gain;  /* host [H * D]: structured gain G_hd, or NULL */
    const int32_t *q_lens;  /* host [B]: valid queries per item (0..N), or NULL for N */
    const int32_t *kv_lens; /* host [B]: valid input keys per item (0..M), or NULL for M */
    const int32_t *
        bank_index; /* host [B]: bank entry per item (forward: or -1, none); required with a 4-D prefix */
    /* device [H] float32 g_h, or NULL. When set it is used instead of `gain`
     * and read on the device: nothing waits for it (a training step keeps its
     * gains there), and its values are not checked for NaN/Inf. */
    const pfx_tensor *gain_tensor;
    /* Per-item gains, forward only (serving adapters whose gains differ in
     * one batch): each item b attends with its own gain mode, g and G. Any
     * of the three set makes the gains per item; unset ones fall back to the
     * per-call field (gain_mode, gain, dim_gain), used by every item. The
     * ramp and scale stay per call; gain_tensor cannot be combined with them
     * (PFX_ERROR_INVALID_ARGUMENT). The backward, the statistics and the map
     * take one gain per call and refuse them (PFX_ERROR_UNSUPPORTED). */
    const pfx_gain_mode *item_gain_mode; /* host [B]: mode of item b, or NULL: gain_mode */
    const float *item_gain;     /* host [B * H]: g_h of item b at [b * H + h], or NULL: gain */
    const float *item_dim_gain; /* host [B * H * D]: G_hd of item b at [(b * H + h) * D + d],
                                 * or NULL: dim_gain */
    /* Dropout on the probabilities (training): p in [0, 1), 0 (default)
     * none. p_ij of item b, head h, query i and key column j (the P prefix
     * columns first) is kept as element (row ((first_item + b) H + h) N + i,
     * col j) of dropout_stream and scaled by 1/(1-p) before the product
     * with V; LSE stays the undropped softmax's. The backward, given the
     * same fields, regenerates the mask (nothing of size N x (P + M) is
     * stored). The statistics and the probability map describe the
     * undropped softmax and refuse it (PFX_ERROR_UNSUPPORTED); a p outside
     * [0, 1) is PFX_ERROR_INVALID_ARGUMENT. */
    float dropout;
    pfx_dropout_stream dropout_stream;
} pfx_attention_desc;

/* Defaults: BHND layouts, no gain, ramp 1, default scale, no masks. */
PFX_API void pfx_attention_desc_init(pfx_attention_desc *desc);

typedef struct pfx_attention_inputs {
    const pfx_tensor *q;
    const pfx_tensor *k;
    const pfx_tensor *v;
    const pfx_tensor *prefix_k; /* NULL when P == 0 */
    const pfx_tensor *prefix_v;
} pfx_attention_inputs;

/* O (same layout rules as Q, float32 or half) and, when lse is not NULL, the
 * per-row log-sum-exp (float32 [B, H, N]) that the backward needs. */
PFX_API pfx_status pfx_attention_forward(pfx_runtime *rt, const pfx_attention_desc *desc,
                                         const pfx_attention_inputs *in, pfx_tensor *o,
                                         pfx_tensor *lse);

typedef struct pfx_attention_grads {
    pfx_tensor *dq;        /* like Q */
    pfx_tensor *dk;        /* like K */
    pfx_tensor *dv;        /* like V */
    pfx_tensor *dprefix_k; /* like the prefix (a bank gets a gradient per entry) */
    pfx_tensor *dprefix_v;
    pfx_tensor *dgain;     /* [H] */
    pfx_tensor *ddim_gain; /* [H, D], only with desc.dim_gain */
    bool accumulate;       /* add into the tensors instead of overwriting them */
} pfx_attention_grads;

/* Gradients of sum(dO * O) for every non-NULL tensor in grads (a NULL one is
 * not computed). Deterministic: bit-identical results run after run on one
 * device (the order of the sums follows the tiles and, on CPU devices, the
 * compute unit count). */
PFX_API pfx_status pfx_attention_backward(pfx_runtime *rt, const pfx_attention_desc *desc,
                                          const pfx_attention_inputs *in, const pfx_tensor *o,
                                          const pfx_tensor *lse, const pfx_tensor *d_o,
                                          const pfx_attention_grads *grads);

/* The largest top_k of the statistics below. */
#define PFX_ATTENTION_TOPK_MAX 32

/* Per head, averaged over the valid rows (i < q_len[b] with at least one
 * visible key) of every item, without storing the map: entropy
 * LSE_i - sum_j p_ij z_ij, the mass of the top_k (1..PFX_ATTENTION_TOPK_MAX)
 * largest p_ij, and the mass on the prefix sum_{j<P} p_ij. Each output is
 * float32 [H] or NULL. */
PFX_API pfx_status pfx_attention_stats(pfx_runtime *rt, const pfx_attention_desc *desc,
                                       const pfx_attention_inputs *in, unsigned top_k,
                                       pfx_tensor *entropy, pfx_tensor *topk_mass,
                                       pfx_tensor *prefix_mass);

/* The explicit probability map p_ij of one (item, head) as float32 [N, P + M]
 * (hidden entries 0). Meant for heat maps of small problems. */
PFX_API pfx_status pfx_gain_softmax_probs(pfx_runtime *rt, const pfx_attention_desc *desc,
                                          const pfx_attention_inputs *in, size_t item, size_t head,
                                          pfx_tensor *probs);

#ifdef __cplusplus
}
#endif

#endif
