/*
 * prefixcl: serving prefix adapters. A bank holds the baked prefixes of many
 * adapters once ([T, Hkv, P, D] per layer, shared by every request that uses
 * them); a KV cache holds, per request slot and layer, the keys and values
 * of the tokens seen so far, grown in place up to a maximum length (the
 * prefixes are never copied into it: the attention reads them from the bank
 * with a bank index per item). A step runs a prefill (prompts into empty
 * slots) or a decode step (one token per slot, through the split-K decode
 * path of the attention forward, keys = the cache) and returns the
 * next-token logits of every slot; every slot may use another adapter or
 * none and be at another length.
 *
 * Positions are those of transformers + PEFT (docs/design.md, "Whole
 * models"): the input token t of a slot with an adapter of prefix length P
 * sits at P + t, of a slot without adapter at t.
 *
 * Every call validates all of its arguments before it enqueues anything; a
 * bad argument returns its status and pfx_last_error(rt) names it.
 */
#ifndef PREFIXCL_GENERATE_H
#define PREFIXCL_GENERATE_H

#include "prefixcl/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- adapter bank ---- */

typedef struct pfx_adapter_bank pfx_adapter_bank;

/* A bank of up to `capacity` adapters for `model`; its prefix length is
 * that of the first adapter added (every later one must have the same:
 * PFX_ERROR_INVALID_SHAPE naming both). Device memory is allocated then:
 * 2 * L tensors [capacity, Hkv, P, D] float32 (none for P = 0, a bank of
 * gains files). Host memory: the gains, [capacity, L, H] and the
 * structured gains [capacity, L, H, D] floats. */
PFX_API pfx_status pfx_adapter_bank_create(pfx_model *model, size_t capacity,
                                           pfx_adapter_bank **out);
PFX_API void pfx_adapter_bank_destroy(pfx_adapter_bank **bank);

/* Adds the adapter at `path`: a PEFT prefix-tuning folder (adapter_config.json
 * + adapter_model.safetensors, or that adapter_model.safetensors itself,
 * which stands for its folder; encoder-decoder adapters,
 * num_transformer_submodules 2, are PFX_ERROR_UNSUPPORTED), or a prefixcl
 * prefixes file (safetensors with metadata format "prefixcl-prefixes-1",
 * tensors layers.l.prefix_k / prefix_v [Hkv, P, D] and layers.l.gain [H],
 * gain_mode in the metadata) or a folder holding prefixes.safetensors, or
 * a gains file (io.h, what pretraining and tuning write: metadata format
 * "prefixcl-gains-1", gain_mode off | linear | tanh and structured true |
 * false; tensors "gains" [L, H] exactly with a gain mode and "dim_gains"
 * [L, H, D] exactly when structured; or its legacy per-layer form) or a
 * folder holding gains.safetensors (pretraining's out_dir; a folder's
 * adapter_config.json, then prefixes.safetensors, come first, so a tuning
 * folder gives its PEFT prefixes without the gains beside them). A gains file is an entry without
 * prefix (P = 0) whose gains apply at ramp 1; since a bank has one prefix
 * length, gains files and prefix adapters go into separate banks
 * (PFX_ERROR_INVALID_SHAPE naming the file and the bank's first adapter).
 * The adapter must fit the model: layers, kv heads, heads and head size
 * (PFX_ERROR_INVALID_SHAPE naming the field or tensor and both values). A
 * bad metadata value, a missing or extra gains tensor is PFX_ERROR_FORMAT,
 * a NaN or infinite gain PFX_ERROR_NOT_FINITE (file, tensor and index).
 * *entry gets its index. A full bank is PFX_ERROR_OUT_OF_RANGE. On failure
 * the bank is unchanged. */
PFX_API pfx_status pfx_adapter_bank_add(pfx_adapter_bank *bank, const char *path, int32_t *entry);

/* Loads the adapter at `path` into `entry` (an index pfx_adapter_bank_add
 * gave) in place of what it held, under the same checks; its prefix length
 * must be the bank's (PFX_ERROR_INVALID_SHAPE). The caller makes sure no
 * request reads the entry meanwhile (a server reusing the entry of an
 * adapter it deleted). An entry outside the bank is
 * PFX_ERROR_INVALID_ARGUMENT. On failure the bank is unchanged. */
PFX_API pfx_status pfx_adapter_bank_replace(pfx_adapter_bank *bank, int32_t entry,
                                            const char *path);

/* The prefix length of the adapter at `path` (as pfx_adapter_bank_add reads
 * it; 0 for a gains file), without a model: to size a model's positions
 * before loading it. Errors go to pfx_last_error(NULL). */
PFX_API pfx_status pfx_adapter_prefix_len(const char *path, size_t *prefix_len);

PFX_API size_t pfx_adapter_bank_count(const pfx_adapter_bank *bank);
/* P of the bank (0 while empty). */
PFX_API size_t pfx_adapter_bank_prefix_len(const pfx_adapter_bank *bank);
/* Device bytes of the prefixes (2 * L * capacity * Hkv * P * D * 4): held
 * once however many requests use them. */
PFX_API size_t pfx_adapter_bank_bytes(const pfx_adapter_bank *bank);

/* The bank as the prefix of a whole-model call (pfx_model_forward, ...):
 * bank_index[b] (host, kept by the caller) chooses each item's entry. The
 * gains and structured gains (dim_gains) of entry bank_index[0] are used
 * (the model call has one of each per call; pfx_serve_step_run gives each
 * item its own adapter's), gain_ramp 1. A bank of gains
 * files gives prefix_len 0 and no prefix tensors. */
PFX_API pfx_status pfx_adapter_bank_prefix(const pfx_adapter_bank *bank, const int32_t *bank_index,
                                           size_t batch, pfx_model_prefix *prefix);

/* ---- KV cache ---- */

typedef struct pfx_kv_cache pfx_kv_cache;

/* `slots` request slots of up to `max_len` tokens each (<= the model's
 * positions): 2 * L tensors [slots, max_len, Hkv, D] float32, allocated
 * once. The cache belongs to the model; the steps that fill it run in a
 * context (pfx_serve_step_run), whose max_batch bounds a step's slots. */
PFX_API pfx_status pfx_kv_cache_create(pfx_model *model, size_t slots, size_t max_len,
                                       pfx_kv_cache **out);
/* The same, the keys and values stored as `dtype`: PFX_DTYPE_F32 (as
 * pfx_kv_cache_create), F16 or BF16 (half the bytes, as llama.cpp's default
 * f16 cache; every step rounds its new rows to nearest even and computes in
 * float32). Another dtype is PFX_ERROR_INVALID_ARGUMENT naming dtype. The
 * prefixes stay float32 in their bank; a prefill attends over its fresh
 * float32 keys, the steps after it over the stored ones. */
PFX_API pfx_status pfx_kv_cache_create_dtype(pfx_model *model, size_t slots, size_t max_len,
                                             pfx_dtype dtype, pfx_kv_cache **out);
/* The storage of the cache's keys and values (F32 for NULL). */
PFX_API pfx_dtype pfx_kv_cache_dtype(const pfx_kv_cache *cache);
PFX_API void pfx_kv_cache_destroy(pfx_kv_cache **cache);

/* Tokens held by a slot (0 for a slot out of range). */
PFX_API size_t pfx_kv_cache_len(const pfx_kv_cache *cache, size_t slot);
/* Empties a slot (its adapter is chosen again by its next prefill). */
PFX_API pfx_status pfx_kv_cache_reset(pfx_kv_cache *cache, size_t slot);
PFX_API size_t pfx_kv_cache_bytes(const pfx_kv_cache *cache);
/* Token rows (keys and values of one token in one layer) written into the
 * cache since its creation: each token once per layer, never recopied. */
PFX_API uint64_t pfx_kv_cache_rows_written(const pfx_kv_cache *cache);
/* Layer l's key and value tensors [slots, max_len, Hkv, D] in the cache's
 * dtype (owned by the cache; for inspection). */
PFX_API pfx_status pfx_kv_cache_layer(const pfx_kv_cache *cache, size_t layer,
                                      const pfx_tensor **keys, const pfx_tensor **values);

/* ---- one step ---- */

typedef struct pfx_serve_step {
    size_t batch;           /* slots 0 .. batch-1 take part (<= the cache's slots and
                              * the context's max_batch) */
    size_t tokens;          /* N: new tokens per slot (<= the context's max_tokens); a
                              * slot that holds tokens takes several (a prompt after
                              * reused rows) in a slower step, item by item */
    const int32_t *ids;     /* host [batch * N], right-padded */
    const int32_t *lens;    /* host [batch]: new tokens of each slot, 0..N (0: the slot
                              * idles); NULL: N for every slot */
    const int32_t *adapter; /* host [batch]: bank entry of each slot or -1 (none); NULL:
                              * none. A slot keeps the adapter of its prefill. */
} pfx_serve_step;

/* Appends the new tokens' keys and values to their slots and writes, into
 * logits (F32 [batch, V]), each slot's next-token logits after its last new
 * token (rows of idle slots are unspecified). bank may be NULL when no slot
 * has an adapter. Slots whose adapters carry different gains (per-head or
 * structured, any gain mode) share the step: each attends with its own
 * adapter's gains (the attention's per-item gains). */
PFX_API pfx_status pfx_serve_step_run(pfx_context *ctx, pfx_kv_cache *cache,
                                      const pfx_adapter_bank *bank, const pfx_serve_step *step,
                                      pfx_tensor *logits);

/* ---- sampling and generation ---- */

/* A bias added to one token's logit (OpenAI's logit_bias). */
typedef struct pfx_logit_bias {
    int32_t token; /* in [0, V) */
    float bias;    /* in [-100, 100] */
} pfx_logit_bias;

/* How a token is drawn. The logits are processed first: each logit_bias
 * added, then the repetition penalty (transformers' and llama.cpp's: a
 * token of the prompt or of the generated text has its logit z divided by
 * repetition_penalty when z > 0, multiplied otherwise), then OpenAI's
 * presence and frequency penalties over the generated tokens
 * (z_j -= frequency_penalty * c_j + presence_penalty * (c_j > 0), c_j the
 * times j was generated). Greedy takes the largest processed logit; a draw
 * takes the softmax of the processed logits / temperature cut to the top_k,
 * then to top_p's mass, then to the tokens at least min_p times as likely as
 * the most likely one. Zero in every field after stop_count: plain logits. */
typedef struct pfx_sampling {
    float temperature;     /* 0: greedy (the lowest id among equal maxima) */
    size_t top_k;          /* 0: off */
    float top_p;           /* in (0, 1]; 0 or 1: off */
    size_t max_new_tokens; /* >= 1 */
    const int32_t *stop;   /* stop tokens (the stop token is kept in the output) */
    size_t stop_count;
    float min_p;              /* in [0, 1]; 0: off */
    float presence_penalty;   /* in [-2, 2] */
    float frequency_penalty;  /* in [-2, 2] */
    float repetition_penalty; /* > 0 and finite; 0 or 1: off */
    const pfx_logit_bias *logit_bias;
    size_t logit_bias_count;
} pfx_sampling;

/* One draw from logits[V] (host) with the state of a splitmix64 generator
 * (*rng, advanced): deterministic for a given state. No prompt and nothing
 * generated: the penalties change nothing. */
PFX_API pfx_status pfx_sample_token(const float *logits, size_t vocab, const pfx_sampling *s,
                                    uint64_t *rng, int32_t *token);

#define PFX_TOP_LOGPROBS_MAX 20

/* The log-probabilities of a draw: log-softmax of the processed logits
 * (after logit_bias and the penalties, before temperature, top_k, top_p and
 * min_p), the distribution the penalties leave, whatever the temperature. */
typedef struct pfx_token_logprobs {
    float logprob;    /* of the token drawn */
    size_t top_count; /* set by the caller: how many of the most likely (0..20) */
    int32_t top_ids[PFX_TOP_LOGPROBS_MAX]; /* most likely first, the lower id among equals */
    float top_logprobs[PFX_TOP_LOGPROBS_MAX];
} pfx_token_logprobs;

/* pfx_sample_token after prompt[prompt_len] and generated[generated_len]
 * (the penalties' history; NULL with a length of 0), and *logprobs (may be
 * NULL) of the token drawn. */
PFX_API pfx_status pfx_sample_next(const float *logits, size_t vocab, const pfx_sampling *s,
                                   const int32_t *prompt, size_t prompt_len,
                                   const int32_t *generated, size_t generated_len, uint64_t *rng,
                                   int32_t *token, pfx_token_logprobs *logprobs);

typedef struct pfx_request {
    const int32_t *prompt; /* host ids, 1..len */
    size_t prompt_len;
    int32_t adapter; /* bank entry or -1 */
    uint64_t seed;   /* of this request's sampling */
    int32_t *out;    /* host, room for max_new_tokens ids */
    size_t out_len;  /* set: ids generated */
    bool end;        /* set by on_token: the request ends with the token just given (a stop
                      * string in its text); pfx_generate clears it first */
} pfx_request;

typedef struct pfx_generate_stats {
    size_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds; /* without build_seconds */
    double build_seconds; /* building kernels on their first use (pfx_cache_stats) */
} pfx_generate_stats;

/* Called after each step with every new token (request index, id); it may
 * set the request's `end` to stop it there. */
typedef void (*pfx_token_fn)(void *user, size_t request, int32_t token);

/* Generates for `count` requests (<= the cache's slots and the context's
 * max_batch; prompts up to its max_tokens) as one batch: one
 * prefill of every prompt, then decode steps until each request has
 * max_new_tokens or a stop token; requests whose adapters carry different
 * gains share that batch (pfx_serve_step_run). Slots 0..count-1 are reset
 * first. The tokens of a request do not depend on the others in the batch.
 * stats and on_token may be NULL. */
PFX_API pfx_status pfx_generate(pfx_context *ctx, pfx_kv_cache *cache, const pfx_adapter_bank *bank,
                                pfx_request *requests, size_t count, const pfx_sampling *sampling,
                                pfx_token_fn on_token, void *user, pfx_generate_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
