/*
 * prefixcl: whole decoder-only models loaded from Hugging Face folders
 * (what save_pretrained writes), forward, causal-LM loss and the backward to
 * per-layer prefixes and gains. The math is docs/design.md, "Whole models".
 *
 * A folder holds config.json and either model.safetensors or a sharded
 * checkpoint (model.safetensors.index.json naming the shard of every
 * tensor). Families (config.json "model_type"):
 *   gpt2                    LayerNorm, Conv1D weights [in, out], learned
 *                           positions, activation_function, lm_head = wte
 *   llama, qwen2, mistral   RMSNorm, Linear weights [out, in], RoPE
 *                           (rotate-half; rope type default or llama3), GQA,
 *                           SwiGLU; q/k/v biases for qwen2 (attention_bias
 *                           for llama); lm_head or tied embed_tokens
 * Anything else, or a field this library does not compute (an unknown
 * activation, another rope type, scale_attn_by_inverse_layer_idx,
 * reorder_and_upcast_attn, a sliding window shorter than a context's
 * length, mlp_bias, cross-attention), is PFX_ERROR_UNSUPPORTED naming the
 * model_type or the field.
 *
 * Weights are read from F32, F16 or BF16 tensors and stored float32
 * (default), half or bfloat16 on the device; compute is float32 and every dense
 * product goes through CLBlast. Tied embeddings are stored once. A checkpoint
 * whose tensor names or shapes disagree with its config (PFX_ERROR_FORMAT for
 * a missing or unexpected name, PFX_ERROR_INVALID_SHAPE for a shape), an
 * integer tensor where a weight is expected (PFX_ERROR_DTYPE_MISMATCH), a
 * missing shard (PFX_ERROR_IO) or a truncated one (the safetensors reader's
 * status, io.h) fails the load with a message naming the file and the tensor;
 * nothing stays allocated. The index is the contract: a tensor of a shard
 * that it does not list, or lists under another shard, and a tensor it lists
 * that its shard lacks are PFX_ERROR_FORMAT. All of this is checked before
 * the first device allocation (a config of more layers than the checkpoint
 * holds costs no more than its tensor count); a shape message names the
 * config.json field that sets it (vocab_size, n_positions, n_inner,
 * intermediate_size, ...). Then the config's sizes are checked against the
 * device: a weight beyond its largest allocation, or all of them beyond its
 * memory (unless the runtime overcommits), is PFX_ERROR_OUT_OF_MEMORY. A
 * sharded checkpoint's shards are read twice (checked, then loaded), one at
 * a time.
 *
 * Positions: with a prefix of length P (PEFT passes it as past_key_values),
 * the input token t of every item sits at position P + t (GPT-2's wpe row
 * P + t, Llama's RoPE angle of P + t); prefix keys are used as stored, never
 * rotated. Padding is on the right: item b has lens[b] valid tokens; rows
 * t >= lens[b] attend to nothing (their logits are those of a zero attention
 * output and mean nothing).
 *
 * Every call validates all of its arguments before it enqueues anything; a
 * bad argument returns its status and pfx_last_error(rt) names it.
 */
#ifndef PREFIXCL_MODEL_H
#define PREFIXCL_MODEL_H

#include "prefixcl/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_model pfx_model;

/* What loading needs. Zero fields take their defaults; use designated
 * initializers. */
typedef struct pfx_model_params {
    pfx_dtype storage; /* weights on the device: PFX_DTYPE_F32 (default), F16 or BF16
                        * (rounded to nearest even at load), or Q8_0: the
                        * matrices of the products and the token embedding
                        * quantized at load (tensor.h) when their rows are
                        * whole blocks of 32, the rest float32; Q8_0 costs
                        * about 0.27 of float32's memory and reads */
} pfx_model_params;

/* The most end-of-sequence ids a config.json may list. */
#define PFX_MODEL_MAX_EOS 8

/* What config.json says, and the parameter count of the frozen model
 * (tied embeddings counted once, as torch's parameters() does). */
typedef struct pfx_model_shape {
    char model_type[32];  /* "gpt2", "llama", "qwen2", "mistral" */
    size_t layers;        /* L */
    size_t heads;         /* H */
    size_t kv_heads;      /* Hkv */
    size_t head_dim;      /* D */
    size_t hidden;        /* C */
    size_t intermediate;  /* MLP width */
    size_t vocab;         /* V */
    size_t max_positions; /* n_positions / max_position_embeddings */
    bool tied_embeddings; /* LM head = input embeddings */
    size_t parameters;
    int32_t eos_ids[PFX_MODEL_MAX_EOS]; /* eos_token_id: one id or a list (transformers'
                                         * generate stops at any of them) */
    size_t eos_count;                   /* 0: absent or null */
    /* Training dropout (pfx_model_dropout): GPT-2's embd_pdrop, attn_pdrop,
     * resid_pdrop (transformers' default 0.1 when absent); the Llama
     * family's attention_dropout (default 0) and no other. */
    float embd_pdrop, attn_pdrop, resid_pdrop;
} pfx_model_shape;

/* The shape of dir/config.json (no runtime, no weights). Errors go to
 * pfx_last_error(NULL). */
PFX_API pfx_status pfx_model_read_config(const char *dir, pfx_model_shape *shape);

/* Loads the folder onto rt. params may be NULL (defaults). On failure *out
 * is NULL and nothing stays allocated. */
PFX_API pfx_status pfx_model_load(pfx_runtime *rt, const char *dir, const pfx_model_params *params,
                                  pfx_model **out);

/* Same shape from dir/config.json alone, weights drawn from a seeded
 * generator instead of a checkpoint (matrices and embeddings uniform with
 * standard deviation 0.02, norm weights 1, biases 0): benchmarks and memory
 * figures of real shapes without their files. */
PFX_API pfx_status pfx_model_create_random(pfx_runtime *rt, const char *dir,
                                           const pfx_model_params *params, uint64_t seed,
                                           pfx_model **out);

/* A new model from dir/config.json alone, initialized as transformers'
 * _init_weights initializes the family (pre-training from scratch):
 * matrices and embeddings normal(0, initializer_range) (config.json,
 * default 0.02), GPT-2's attention and MLP c_proj weights
 * normal(0, initializer_range / sqrt(2 n_layer)), biases 0, norm weights 1,
 * and for the Llama family the embedding row of pad_token_id 0 (nn.Embedding's
 * padding_idx; a pad_token_id outside the vocabulary is
 * PFX_ERROR_INVALID_SHAPE). The values come from `seed` (splitmix64, normals
 * by Box-Muller in double): the same seed gives the same weights on every
 * device, but not the values torch draws for it. */
PFX_API pfx_status pfx_model_init(pfx_runtime *rt, const char *dir, const pfx_model_params *params,
                                  uint64_t seed, pfx_model **out);

/* Writes the model as a Hugging Face folder that from_pretrained (and
 * pfx_model_load) reads: dir/config.json as the model was created from,
 * the weights under their checkpoint names in the storage dtype (the Llama
 * family's stacked q | k | v as q_proj, k_proj and v_proj again), with
 * metadata {"format": "pt"}: model.safetensors, or, past max_shard_bytes,
 * model-0000k-of-0000n.safetensors shards in checkpoint order with
 * model.safetensors.index.json (save_pretrained's layout); the other
 * layout's main file left by an earlier save is removed. Every file is
 * replaced atomically (io.h). The folder is created when missing. Trained
 * gains and prefixes are not weights of the model: save them apart. A model
 * loaded with Q8_0 storage is not saved (PFX_ERROR_UNSUPPORTED). */
typedef struct pfx_model_save_params {
    size_t max_shard_bytes; /* 0: 5 GB, save_pretrained's default; a larger
                              * tensor gets a shard of its own */
} pfx_model_save_params;

PFX_API pfx_status pfx_model_save(pfx_model *model, const char *dir,
                                  const pfx_model_save_params *params);

/* Releases the weights and sets *model to NULL; NULL-safe. Contexts still
 * open over the model keep it alive: it is released with the last of them
 * (pfx_context_destroy), and until then they compute as before. */
PFX_API void pfx_model_destroy(pfx_model **model);

PFX_API pfx_status pfx_model_get_shape(const pfx_model *model, pfx_model_shape *shape);
PFX_API pfx_status pfx_model_get_params(const pfx_model *model, pfx_model_params *params);

/* ---- contexts: the workspace of the calls ----
 *
 * A context holds everything a call writes (the residual streams, the
 * blocks' intermediates and kept activations, the loss's logits chunk, the
 * token ids and labels, the profile), sized for its capacity; the model
 * holds the weights and is only read by calls. Several contexts may run
 * over one model (a training and an evaluation workspace, two banks of
 * other prefix lengths); their calls give the bits one context alone gives.
 * Calls on one runtime are not thread-safe, whatever the context. */
typedef struct pfx_context pfx_context;

/* Zero fields take their defaults; use designated initializers. */
typedef struct pfx_context_params {
    size_t max_batch;         /* B capacity of the workspace; 0: 1 */
    size_t max_tokens;        /* N capacity; 0: min(max positions, 1024) */
    size_t max_prefix_len;    /* largest P a call may use (0: none); P + N must fit
                              * the model's positions and a sliding window */
    size_t logits_chunk_rows; /* rows of logits held at once by the loss; 0: as many
                              * as fit 64 MiB (at least 1) */
    bool recompute;           /* the backward keeps only each block's input and runs
                              * the block again (less memory, one more forward);
                              * default: every block's activations are kept */
} pfx_context_params;

/* A workspace over `model` (params NULL: defaults). Capacities beyond the
 * model (P + N past GPT-2's learned positions: PFX_ERROR_OUT_OF_RANGE; past
 * a sliding window: PFX_ERROR_UNSUPPORTED; B x N past 2^31 rows:
 * PFX_ERROR_SIZE_OVERFLOW) are refused naming the field, before anything is
 * allocated. On failure *out is NULL and nothing stays allocated. */
PFX_API pfx_status pfx_context_create(pfx_model *model, const pfx_context_params *params,
                                      pfx_context **out);

/* Releases the workspace and sets *ctx to NULL; NULL-safe. */
PFX_API void pfx_context_destroy(pfx_context **ctx);

/* The capacities as the context was made (defaults filled in, the logits
 * chunk as used). */
PFX_API pfx_status pfx_context_get_params(const pfx_context *ctx, pfx_context_params *params);

/* The model a context runs (NULL for a NULL context). */
PFX_API pfx_model *pfx_context_model(const pfx_context *ctx);

/* One batch of token ids, right-padded. */
typedef struct pfx_model_batch {
    size_t batch;          /* B, 1..the context's max_batch */
    size_t tokens;         /* N, 1..the context's max_tokens */
    const int32_t *ids;    /* host [B * N], each in [0, V) (padding included) */
    const int32_t *lens;   /* host [B], 1..N valid tokens; NULL: all N */
    const int32_t *labels; /* host [B * N] HF labels (the loss of position t
                              * predicts labels[t + 1]; -100 not counted);
                              * NULL: the ids, with t >= lens[b] not counted */
} pfx_model_batch;

/* The per-layer prefixes and gains a call attends with. A zeroed struct is
 * no prefix and no gain: exactly the frozen model. */
typedef struct pfx_model_prefix {
    size_t prefix_len;         /* P (0: none) */
    pfx_tensor *const *keys;   /* L tensors [Hkv, P, D] (shared by the batch) or
                                   * [T, Hkv, P, D] (a bank; F32 or F16) */
    pfx_tensor *const *values; /* like keys */
    const int32_t *bank_index; /* host [B]: entry of each item, with a bank */
    pfx_gain_mode gain_mode;   /* OFF (default), LINEAR or TANH */
    const float *gains;        /* host [L * H]: g of layer l head h at l * H + h */
    const float *dim_gains;    /* host [L * H * D]: the structured gain G of layer l
                                   * at l * H * D (head h, dim d at h * D + d): the
                                   * query of head h scaled by 1 + r G_hd (docs/design.md),
                                   * alone or with a per-head gain; NULL: none */
    float gain_ramp;           /* r in [0, 1] (read with a gain mode or dim_gains) */
} pfx_model_prefix;

/* Folds gains into the model's query projections (docs/design.md, "Folding
 * gains"), so that the model without gains computes what it computed with
 * them: head h's query rows and bias (GPT-2: columns of c_attn's q part)
 * scaled by gamma = 1 + r g_h (LINEAR) or 1 + tanh(r g_h) (TANH), and with
 * dim_gains each query dimension d of head h by 1 + r G_hd too (r =
 * gains->gain_ramp). Exact in real numbers; float32 rounds the products
 * once. A rotary model (the Llama family) takes dim_gains only where each
 * pair of dimensions (d, d + D/2) that the rotation turns together shares
 * its G: otherwise PFX_ERROR_INVALID_ARGUMENT naming the heads. Key and
 * value rows are never touched (GQA's shared keys stay); a prefix is not
 * folded (prefix_len, keys, values or bank_index set:
 * PFX_ERROR_INVALID_ARGUMENT). Refused before anything changes: a bad gain
 * mode or r outside [0, 1] (PFX_ERROR_INVALID_ARGUMENT), gains NULL with a
 * mode (PFX_ERROR_NULL_ARGUMENT), a non-finite gain (PFX_ERROR_NOT_FINITE),
 * a query projection not stored as float32 (PFX_ERROR_UNSUPPORTED). Then
 * pfx_model_save writes a folder any Hugging Face loader reads. */
PFX_API pfx_status pfx_model_fold_gains(pfx_model *model, const pfx_model_prefix *gains);

/* logits: F32 [B, N, V] (the whole tensor: small vocabularies and tests). */
PFX_API pfx_status pfx_model_forward(pfx_context *ctx, const pfx_model_batch *batch,
                                     const pfx_model_prefix *prefix, pfx_tensor *logits);

/* logits: F32 [B, V], the logits of each item's last valid position
 * (lens[b] - 1): the next-token distribution for generation. */
PFX_API pfx_status pfx_model_last_logits(pfx_context *ctx, const pfx_model_batch *batch,
                                         const pfx_model_prefix *prefix, pfx_tensor *logits);

/* HF's causal-LM cross-entropy: mean over the counted labels of
 * logsumexp(z_t) - z_t[label_{t+1}], computed in chunks of rows (never the
 * whole [B, N, V]). No counted label at all: PFX_ERROR_INVALID_ARGUMENT.
 * Blocks for the result. */
PFX_API pfx_status pfx_model_loss(pfx_context *ctx, const pfx_model_batch *batch,
                                  const pfx_model_prefix *prefix, double *loss);

/* ---- weights (full training) ----
 *
 * The tensors a model holds, in checkpoint order, each by its checkpoint
 * name, except that the Llama family's q, k and v projections (weights, and
 * biases where the config has them) are held stacked as one tensor per
 * layer, "model.layers.<l>.self_attn.qkv_proj.weight" [QD + 2 KVD, C]
 * (q_proj's rows, then k_proj's, then v_proj's), as the forward uses them.
 * A tied LM head is the token embedding: it has no entry of its own. With
 * Q8_0 storage, GPT-2's Conv1D weights [in, out] are held [out, in] (the
 * shape given; blocks of 32 along the products' reduction, as llama.cpp
 * holds them). pfx_model_weight_tensor gives the device tensor itself: an optimizer
 * updates it in place, and every later call computes with the new values. */
typedef enum pfx_weight_kind {
    PFX_WEIGHT_MATRIX = 0,    /* a projection's weight (an untied LM head too) */
    PFX_WEIGHT_EMBEDDING = 1, /* token embeddings, GPT-2's learned positions */
    PFX_WEIGHT_BIAS = 2,      /* a projection's or a LayerNorm's bias */
    PFX_WEIGHT_NORM = 3,      /* a LayerNorm / RMSNorm weight */
} pfx_weight_kind;

typedef struct pfx_model_weight_info {
    char name[96];
    pfx_weight_kind kind;
    size_t layer;  /* its block, or SIZE_MAX (embeddings, final norm, head) */
    unsigned ndim; /* 1 or 2 */
    size_t shape[2];
    size_t numel;
} pfx_model_weight_info;

/* The number of weights (0 for a NULL model). */
PFX_API size_t pfx_model_weight_count(const pfx_model *model);
/* Weight `index` (< pfx_model_weight_count): PFX_ERROR_OUT_OF_RANGE beyond. */
PFX_API pfx_status pfx_model_get_weight(const pfx_model *model, size_t index,
                                        pfx_model_weight_info *info);
PFX_API pfx_status pfx_model_weight_tensor(pfx_model *model, size_t index, pfx_tensor **tensor);

/* Gradients of that loss. keys / values: L float32 tensors shaped like the
 * prefixes (a bank gets one gradient per entry); gains: L float32 tensors
 * [H] (zeros with the gain OFF); dim_gains: L float32 tensors [H, D], the
 * gradient of the structured gain G (zeros without prefix.dim_gains; like a
 * per-head gain's, it carries the factor r); weights: pfx_model_weight_count entries,
 * the gradient of weight i (float32, shaped like it) or NULL (frozen). Any
 * array or entry may be NULL (not computed): prefix tuning, gain-only tuning
 * and full training are the same call with other entries set. Weight
 * gradients need float32 storage (params.storage F32); a weight is never
 * written by the backward.
 *
 * Weight gradients are the dense products dW = X^T dY of each projection
 * (through the runtime's GEMM backend, like the forward), column sums for
 * biases, sum_rows dy * xhat for norm weights, and row gathers for the
 * embeddings (a tied LM head's dlogits^T X adds into the token embedding's
 * gradient; GPT-2's position row P + t gathers position t of every item).
 * Every sum runs in a fixed order: the same call gives the same bits. */
/* Dropout of a training pass, as transformers applies it in train mode:
 * `embd` on the embeddings (GPT-2: wte + wpe), `attn` on the attention
 * probabilities inside the fused attention, `resid` on each block's
 * attention output projection and MLP output before the residual add;
 * each in [0, 1) (0: none), kept values scaled by 1/(1-p). Masks come from
 * a counter-based generator keyed by (seed, step, micro_batch, layer, site,
 * element), so a recomputed block, a resumed run and a data-parallel rank
 * (first_item: its first row in the whole micro-batch) draw the same ones.
 * p all 0 gives the bits of no dropout. */
typedef struct pfx_model_dropout {
    float embd, attn, resid;
    uint64_t seed;
    uint32_t step;
    uint32_t micro_batch; /* < 65536 */
    uint32_t first_item;  /* item b of the batch is item first_item + b of the micro-batch */
} pfx_model_dropout;

typedef struct pfx_model_grads {
    pfx_tensor *const *keys;
    pfx_tensor *const *values;
    pfx_tensor *const *gains;
    pfx_tensor *const *dim_gains;
    pfx_tensor *const *weights;
    bool accumulate;                  /* add into the tensors instead of overwriting them
                                   * (gradient accumulation over micro-batches) */
    const pfx_model_dropout *dropout; /* NULL: none (evaluation never drops) */
} pfx_model_grads;

/* Forward, loss and backward in one call (each block's activations kept, or
 * with the context's recompute recomputed from the block's input); the loss goes to
 * *loss when it is not NULL. With loss, one blocking read at the end, after
 * the whole backward is enqueued; without, nothing blocks (a step can run
 * ahead of the device, the loss of a logging step only being read). */
PFX_API pfx_status pfx_model_backward(pfx_context *ctx, const pfx_model_batch *batch,
                                      const pfx_model_prefix *prefix, const pfx_model_grads *grads,
                                      double *loss);

/* Per layer and head, averaged over the valid rows of the batch (see
 * pfx_attention_stats): the mass on the prefix, the entropy, and the mass of
 * the top_k (1..PFX_ATTENTION_TOPK_MAX = 32) largest probabilities of each
 * row, into host arrays [L * H] (layer l head h at l * H + h; any may be
 * NULL, not all). One forward pass of its own (each layer's statistics
 * taken right after its block), no head or loss; blocks for the results.
 * A top_k outside 1..32 is PFX_ERROR_INVALID_ARGUMENT, all three outputs
 * NULL PFX_ERROR_NULL_ARGUMENT, before anything is enqueued. */
PFX_API pfx_status pfx_model_head_stats(pfx_context *ctx, const pfx_model_batch *batch,
                                        const pfx_model_prefix *prefix, uint32_t top_k,
                                        float *prefix_mass, float *entropy, float *top_k_mass);

/* pfx_model_head_stats without the top-k mass (prefix_mass and entropy,
 * either may be NULL, not both). */
PFX_API pfx_status pfx_model_attention_stats(pfx_context *ctx, const pfx_model_batch *batch,
                                             const pfx_model_prefix *prefix, float *prefix_mass,
                                             float *entropy);

/* hidden: F32 [B, N, C], the output of the final norm (what the LM head
 * reads) for every position; rows past lens[b] unspecified. A forward pass
 * without the head. The tensor is checked (runtime, dtype, shape, not a
 * prefix) with the rest before anything is enqueued. */
PFX_API pfx_status pfx_model_hidden_states(pfx_context *ctx, const pfx_model_batch *batch,
                                           const pfx_model_prefix *prefix, pfx_tensor *hidden);

/* The attention probabilities p_ij of one head of one layer for batch item
 * `item` (see pfx_gain_softmax_probs, attention.h): probs F32 [N, P + N],
 * the prefix columns first; rows past lens[item] and hidden entries are 0.
 * Runs the blocks before `layer` (a separate pass; for heat maps). */
PFX_API pfx_status pfx_model_attention_probs(pfx_context *ctx, const pfx_model_batch *batch,
                                             const pfx_model_prefix *prefix, size_t item,
                                             size_t layer, size_t head, pfx_tensor *probs);

/* Where the time of a context's calls goes (each context keeps its own
 * profile): while profiling is on, each product, attention call and loss
 * chunk is bracketed by pfx_runtime_finish and its wall time added to its
 * part (serializing the queue costs a little). */
typedef enum pfx_model_part {
    PFX_MODEL_PART_GEMM = 0, /* the blocks' dense products */
    PFX_MODEL_PART_HEAD,     /* the LM head's products (forward and backward) */
    PFX_MODEL_PART_ATTN_FWD,
    PFX_MODEL_PART_ATTN_BWD,
    PFX_MODEL_PART_LOSS, /* the fused cross-entropy */
    PFX_MODEL_PART_COUNT
} pfx_model_part;

/* Switches profiling on (clearing the times) or off. */
PFX_API pfx_status pfx_model_profile_enable(pfx_context *ctx, bool on);

/* The wall ms of each part since profiling was last switched on, into
 * ms[0, PFX_MODEL_PART_COUNT) (count at least that). */
PFX_API pfx_status pfx_model_profile_read(const pfx_context *ctx, double *ms, size_t count);

/* FLOPs of one token of a training step (forward and backward) as nanoGPT
 * and llm.c count them for the model FLOPs utilization (MFU):
 * 6 N + 12 L T d, with N the model's parameters, L its layers, T the keys a
 * query attends to (the block, plus a prefix) and d = heads x head size;
 * without weight gradients (frozen weights: prefix tuning) the backward
 * takes no weight product, 4 N + 12 L T d. The MFU is tokens/s times this
 * over the FMA peak (profile.h, pfx_peak_fma_gflops). 0 for NULL. */
PFX_API double pfx_model_train_flops(const pfx_model_shape *shape, size_t keys, bool weight_grads);

#ifdef __cplusplus
}
#endif

#endif