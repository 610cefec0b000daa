/*
 * Double-precision plain-C reference of whole decoder-only models with
 * per-layer prefixes and per-head gains (docs/design.md, "Whole models"):
 * GPT-2 and the Llama family (GQA, RoPE rotate-half with default or llama3
 * inv_freq, optional q/k/v biases as in Qwen2, SwiGLU), final norm, tied or
 * untied LM head, HF's causal-LM loss, and the exact gradients of the loss
 * with respect to the prefixes and the gains. No OpenCL; clarity over speed.
 *
 * Weights are float host arrays in the Hugging Face layouts, exactly as the
 * checkpoint stores them (what a loader reads from model.safetensors):
 *   GPT-2 (Conv1D, [in, out], y = x W + b):
 *     wte [V, C], wpe [max_positions, C], per layer ln_1 (w, b) [C],
 *     c_attn [C, 3C] + [3C] (columns [q | k | v], head h at h*D..h*D+D-1),
 *     attn c_proj [C, C] + [C], ln_2 (w, b), c_fc [C, I] + [I],
 *     mlp c_proj [I, C] + [C]; ln_f (w, b); the LM head is wte.
 *   Llama family (Linear, [out, in], y = x W^T (+ b)):
 *     embed_tokens [V, C], per layer input_layernorm [C], q_proj [H*D, C],
 *     k_proj, v_proj [Hkv*D, C] (+ biases [H*D], [Hkv*D] when qkv_bias),
 *     o_proj [C, H*D], post_attention_layernorm [C], gate_proj, up_proj
 *     [I, C], down_proj [C, I]; norm [C]; lm_head [V, C] (NULL when tied:
 *     embed_tokens).
 * Internally everything is double.
 *
 * Positions: the input tokens sit at P + t (wpe row P + t for GPT-2, RoPE
 * angle (P + t) * inv_freq for Llama), whatever the padding; prefix keys are
 * used as stored, never rotated. Attention per layer: keys/values
 * [Kp_l ; K], causal, input key t visible iff t < len[b]; query rows
 * t >= len[b] (right padding) give attention output 0 (the library's
 * contract), the rest of the block still runs on them. Their logits are thus
 * defined, but transformers computes something else there: compare padded
 * rows only with this reference.
 *
 * Loss (HF's): labels are given unshifted, as HF takes them ([B, N], -100
 * ignored); row (b, t), t < N - 1, is scored against labels[b, t + 1]; the
 * loss is the mean over the counted labels (NaN when none is counted).
 */
#ifndef PFX_TEST_MODEL_REF_H
#define PFX_TEST_MODEL_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/attention.h"
#include "reference/model_ops_ref.h" /* ref_activation, ref_rope */
#include "reference/random.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ref_model_family {
    REF_MODEL_GPT2 = 0,
    REF_MODEL_LLAMA = 1, /* llama, qwen2 (qkv_bias), mistral */
} ref_model_family;

typedef struct ref_model_config {
    ref_model_family family;
    size_t layers, hidden, heads, kv_heads, head_dim; /* L, C, H, Hkv, D */
    size_t inner;            /* I: GPT-2 n_inner (4C when null), Llama intermediate_size */
    size_t vocab;            /* V */
    size_t max_positions;    /* GPT-2: rows of wpe (P + N must not exceed it) */
    double eps;              /* layer_norm_epsilon / rms_norm_eps */
    ref_activation act;      /* GPT-2's MLP activation; Llama's SwiGLU gate (silu) */
    bool qkv_bias;           /* Llama family: q/k/v biases (Qwen2) */
    ref_rope rope;           /* Llama family */
    pfx_gain_mode gain_mode; /* per-layer per-head gains; OFF is exactly HF + PEFT */
    double gain_ramp;        /* r */
} ref_model_config;

/* One block; a family reads its own fields and ignores the others. */
typedef struct ref_model_layer {
    /* GPT-2 */
    const float *ln_1_w, *ln_1_b, *c_attn_w, *c_attn_b, *attn_proj_w, *attn_proj_b;
    const float *ln_2_w, *ln_2_b, *c_fc_w, *c_fc_b, *mlp_proj_w, *mlp_proj_b;
    /* Llama family (q_b, k_b, v_b only with qkv_bias) */
    const float *input_norm_w, *q_w, *k_w, *v_w, *q_b, *k_b, *v_b, *o_w;
    const float *post_norm_w, *gate_w, *up_w, *down_w;
} ref_model_layer;

typedef struct ref_model_weights {
    const float *wte;             /* [V, C]: wte / embed_tokens */
    const float *wpe;             /* GPT-2 [max_positions, C] */
    const ref_model_layer *layer; /* [L] */
    const float *final_w;         /* ln_f.weight / norm.weight [C] */
    const float *final_b;         /* ln_f.bias [C] (GPT-2) */
    const float *lm_head;         /* [V, C], or NULL: tied to wte */
} ref_model_weights;

/* Per-layer prefixes and gains (what is trained). */
typedef struct ref_model_prefix {
    size_t len;            /* P (0: no prefix; kp, vp may be NULL) */
    const float *kp, *vp;  /* [L, Hkv, P, D]: layer l's Kp_l at l * Hkv*P*D */
    const float *gain;     /* [L, H] (NULL when gain_mode is OFF) */
    const float *dim_gain; /* [L, H, D]: the structured gain, queries scaled by
                            * 1 + r G (c.gain_ramp); NULL: none */
} ref_model_prefix;

typedef struct ref_model_batch {
    size_t batch, tokens;   /* B, N */
    const int32_t *ids;     /* [B, N], each in [0, V) (padding included) */
    const int32_t *lengths; /* [B] valid tokens 1..N (right padding), NULL: all N */
    const int32_t *labels;  /* [B, N] unshifted, -100 ignored; NULL: no loss */
} ref_model_batch;

/* Counted labels of the batch (labels[b, t] != -100 for 1 <= t < N). */
size_t ref_model_label_count(const ref_model_batch *x);

/* Logits [B, N, V] (or NULL) and the loss (or NULL; needs labels). */
void ref_model_forward(const ref_model_config *c, const ref_model_weights *w,
                       const ref_model_prefix *p, const ref_model_batch *x, double *logits,
                       double *loss);

/* The attention probabilities of one (layer, head) of item `item`: probs
 * [N, P + N], the prefix columns first (causal; rows past the item's length
 * and hidden entries 0). The default scale 1/sqrt(D) times the head's gain. */
void ref_model_attention_probs(const ref_model_config *c, const ref_model_weights *w,
                               const ref_model_prefix *p, const ref_model_batch *x, size_t item,
                               size_t layer, size_t head, double *probs);

/* The final norm's output [B, N, C] (what the LM head reads). */
void ref_model_hidden(const ref_model_config *c, const ref_model_weights *w,
                      const ref_model_prefix *p, const ref_model_batch *x, double *hidden);

/* Per layer and head ([L, H], any output may be NULL), averaged over the
 * valid rows (t < lengths[b]) of every item, from the maps of
 * ref_model_attention_probs: the mass on the prefix, the entropy
 * -sum_j p_j log p_j and the mass of the top_k largest p_j of each row. */
void ref_model_head_stats(const ref_model_config *c, const ref_model_weights *w,
                          const ref_model_prefix *p, const ref_model_batch *x, unsigned top_k,
                          double *prefix_mass, double *entropy, double *top_k_mass);

/* The loss and its exact gradients with respect to the prefixes (dkp, dvp
 * [L, Hkv, P, D]) and the gains (dgain [L, H], 0 when the gain is off); any
 * output may be NULL. Needs labels with at least one counted entry. */
void ref_model_backward(const ref_model_config *c, const ref_model_weights *w,
                        const ref_model_prefix *p, const ref_model_batch *x, double *loss,
                        double *dkp, double *dvp, double *dgain);

/* The gradients of every weight, double, laid out like the weights (a
 * family fills its own fields; the others stay NULL). */
typedef struct ref_model_layer_grads {
    double *ln_1_w, *ln_1_b, *c_attn_w, *c_attn_b, *attn_proj_w, *attn_proj_b;
    double *ln_2_w, *ln_2_b, *c_fc_w, *c_fc_b, *mlp_proj_w, *mlp_proj_b;
    double *input_norm_w, *q_w, *k_w, *v_w, *q_b, *k_b, *v_b, *o_w;
    double *post_norm_w, *gate_w, *up_w, *down_w;
} ref_model_layer_grads;

typedef struct ref_model_grads {
    double *wte; /* a tied LM head's gradient adds into it */
    double *wpe; /* GPT-2 */
    double *final_w, *final_b;
    double *lm_head; /* untied only */
    ref_model_layer_grads *layer;
    size_t layers;
    double *dim_gain; /* [L, H, D] with a structured gain (else NULL) */
} ref_model_grads;

/* The gradient in g of the weight array `weight` (one of w's pointers), or
 * NULL. */
const double *ref_model_grad_of(const ref_model_config *c, const ref_model_weights *w,
                                const ref_model_grads *g, const float *weight);

/* Zeroed gradients for a config (lm_head only when `untied`; dim_gain is
 * left NULL: point it at L * H * D doubles to have the structured gain's). */
void ref_model_grads_alloc(const ref_model_config *c, bool untied, ref_model_grads *g);
void ref_model_grads_free(ref_model_grads *g);

/* ref_model_backward and the gradient of every weight, ADDED into g (from
 * ref_model_grads_alloc; may be NULL). */
void ref_model_backward_weights(const ref_model_config *c, const ref_model_weights *w,
                                const ref_model_prefix *p, const ref_model_batch *x, double *loss,
                                double *dkp, double *dvp, double *dgain, ref_model_grads *g);

/* Random weights for a config, in HF layouts, held in one block: norm
 * weights 1 + U(-0.2, 0.2), biases U(-0.1, 0.1), embeddings U(-1, 1) (wpe
 * U(-0.5, 0.5)), matrices U(-1, 1) / sqrt(fan-in); the LM head tied
 * (lm_head NULL: point it at a [V, C] array to untie). */
typedef struct ref_model_storage {
    float *data;
    size_t count, used;
    ref_model_layer *layers;
} ref_model_storage;
void ref_model_random(const ref_model_config *c, ref_rng *rng, ref_model_weights *w,
                      ref_model_storage *s);
void ref_model_storage_free(ref_model_storage *s);

#ifdef __cplusplus
}
#endif

#endif
