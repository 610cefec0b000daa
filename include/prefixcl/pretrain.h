/*
 * prefixcl: the full-training job. Every weight of a decoder-only model
 * (model.h) trains, with or without a learnable gain per head on the
 * attention logits (docs/design.md, "Full training"): pre-training from a
 * config.json alone (pfx_model_init) or full fine-tuning of a Hugging Face
 * checkpoint.
 *
 * Data: a text or JSONL file (data.h) tokenized with append_eos and the
 * post-processor's tokens, its documents joined and cut into blocks of
 * `block` tokens (pfx_blocks), every position a label, positions 0 .. T-1;
 * or token shards (data.h: llm.c's layout, or nanoGPT's headerless uint16),
 * memory-mapped and read a block at a time, so that the start does not
 * grow with the corpus and the memory stays flat (pfx_shards_write's shards
 * of a file give the same blocks as the file). Evaluation on eval_path's
 * blocks, else on the last twentieth of the blocks (at least one) held out.
 * The blocks are served in an order shuffled per epoch from the seed; with
 * several processes each reads only its rows of every batch.
 *
 * One step: r and the learning rate of the step from the optimizer's
 * schedules; `accumulate` micro-batches of `batch` blocks, each a forward
 * and backward into the gradients (added after the first), which are then
 * averaged; global gradient-norm clipping over every trained tensor, gains
 * included; AdamW with the weights in one group (lr, weight_decay), biases
 * and norm weights in a second without decay when no_decay_norms, and the
 * gains in their own (gain_lr, no decay, since decay would pull them back to
 * plain attention); a step whose gradient norm is NaN or Inf is skipped.
 * Learning rate: linear warm-up over warmup_steps, then cosine to
 * min_lr_ratio at the last step; gain ramp r from 0 to 1 over
 * gain_ramp_steps (optimizer.h's schedules).
 *
 * Outputs in out_dir, each file replaced atomically: config.json and
 * model.safetensors (pfx_model_save: a folder transformers loads; it does
 * not apply the gains), config.json given what the tokenizer knows and the
 * config lacks (vocab_size, bos_token_id, eos_token_id, pad_token_id; the
 * EOS as BOS when the tokenizer has none, GPT-2's convention;
 * result.config_filled names them), the tokenizer's files copied beside
 * them (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
 * vocab.json, merges.txt, ... those its folder has; a tokenizer_config.json
 * naming PreTrainedTokenizerFast and the special tokens when it has
 * tokenizer.json alone), so that the folder is what save_pretrained of a
 * model and its tokenizer leaves, gains.safetensors with a gain (the gains file of
 * io.h: "gains" [L, H] and/or "dim_gains" [L, H, D], metadata gain_mode,
 * structured and the last gain_ramp; a run without a gain removes an
 * earlier run's when it writes the model), loss.csv (step, loss, gradient norm, evaluation loss
 * where measured, the weights' learning rate) and checkpoint.safetensors: every trained tensor's value
 * and AdamW moments and step, the data position, the curves so far and the
 * options; resume continues from it bit for bit. A stop (stop_flag or
 * stop_after) takes effect at a step boundary and writes the checkpoint; an
 * interrupted write leaves the previous checkpoint whole.
 *
 * Every option and input is checked before the first step: a missing or
 * unreadable file (PFX_ERROR_IO), an out_dir that is not a folder
 * (PFX_ERROR_IO), a bad option (PFX_ERROR_INVALID_ARGUMENT naming the field),
 * data that fills no block or leaves nothing to hold out
 * (PFX_ERROR_OUT_OF_RANGE), a freeze list that leaves nothing to train or
 * holds a part that is in no weight's name (PFX_ERROR_INVALID_ARGUMENT),
 * gain heads beyond the model's layers or heads (PFX_ERROR_INVALID_ARGUMENT),
 * token ids beyond the model's vocabulary (shards: when the block that holds
 * one is read, PFX_ERROR_FORMAT naming the shard and the offset; text: before
 * the first step, PFX_ERROR_INVALID_SHAPE), a checkpoint written with other
 * options (PFX_ERROR_INVALID_ARGUMENT naming the option); the message is in
 * pfx_last_error(rt).
 */
#ifndef PREFIXCL_PRETRAIN_H
#define PREFIXCL_PRETRAIN_H

#include <signal.h>

#include "prefixcl/data.h"
#include "prefixcl/model.h"
#include "prefixcl/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PFX_PRETRAIN_CHECKPOINT "checkpoint.safetensors"

/* One attention head of the model: layer (0-based) and head within it. */
typedef struct pfx_layer_head {
    size_t layer, head;
} pfx_layer_head;

/* What data_path and eval_path hold. */
typedef enum pfx_pretrain_data {
    PFX_PRETRAIN_DATA_AUTO = 0, /* shards when the path holds a glob character or its file starts
                                 * with an llm.c magic; else text or JSONL */
    PFX_PRETRAIN_DATA_TEXT,     /* text or JSONL (data.h) */
    PFX_PRETRAIN_DATA_SHARDS,   /* llm.c's token shards (PFX_SHARD_LLMC) */
    PFX_PRETRAIN_DATA_RAW_U16,  /* nanoGPT's headerless uint16 tokens (PFX_SHARD_RAW_U16) */
} pfx_pretrain_data;

typedef struct pfx_pretrain_config {
    const char *model_dir;         /* a Hugging Face folder to fine-tune, or NULL */
    const char *config_dir;        /* or a folder with config.json: a new model (pfx_model_init) */
    const char *tokenizer_dir;     /* NULL: model_dir, else config_dir */
    const char *data_path;         /* text or JSONL, or token shards (a glob(3) pattern) */
    const char *eval_path;         /* NULL: a held-out slice of the data */
    pfx_pretrain_data data_format; /* of data_path and eval_path */
    const char *out_dir;
    size_t block;      /* T, tokens a row */
    size_t batch;      /* rows a micro-batch */
    size_t accumulate; /* micro-batches a step */
    size_t steps;      /* optimizer steps; 0: epochs over the data */
    size_t epochs;
    float lr;            /* the weights */
    float gain_lr;       /* the gains */
    float weight_decay;  /* the weights (never the gains) */
    bool no_decay_norms; /* no decay on biases and norm weights either */
    float max_grad_norm; /* 0: no clipping */
    uint32_t warmup_steps;
    float min_lr_ratio;        /* the cosine's floor, a fraction of each lr */
    pfx_gain_mode gain_mode;   /* OFF, LINEAR or TANH: a gain per head; gains start at 0 */
    bool structured_gain;      /* a gain per head and dimension, q * (1 + r G) (docs/design.md),
                                * alone or with gain_mode; starts at 0 */
    uint32_t gain_ramp_steps;  /* 0: r = 1 from the start */
    float gain_init;           /* 0: the gains start at 0 (plain attention); A > 0: each trained
                                * gain (g, or each G_hd) starts uniform in [-A, A], drawn from
                                * the seed; finite, >= 0 */
    float gain_decay_fraction; /* the gains' learning rate decays on a cosine of its own that
                                * reaches min_lr_ratio after this fraction of the weights' decay
                                * steps (optimizer.h's decay_fraction: 0.5 twice as fast);
                                * 0 or 1: the weights' schedule; in [0, 1] */
    const pfx_layer_head *gain_heads; /* [gain_head_count] the heads with a trained gain;
                                * the others keep gain 0 (plain attention) for the whole run:
                                * their gradient is zeroed before clipping (nothing in the global
                                * norm) and they are never updated. NULL: every head. Read with
                                * a gain mode or the structured gain (which it masks per head,
                                * all D dims); checked against the model once it is loaded: a
                                * layer or head beyond it, a head given twice, a list given
                                * without a gain or with a count of 0 is
                                * PFX_ERROR_INVALID_ARGUMENT naming config.gain_heads (and the
                                * entry). A checkpoint keeps the selection: resuming with another
                                * one is refused (every head selected is the same as NULL). */
    size_t gain_head_count;
    const char *freeze;      /* comma-separated name parts: weights whose name
                                * contains one stay frozen (each part must be in
                                * some weight's name); NULL: none */
    size_t eval_every;       /* also evaluate every N steps; 0: before and after */
    size_t eval_blocks;      /* blocks an evaluation reads; 0: all */
    size_t checkpoint_every; /* also write the checkpoint every N steps */
    bool recompute;          /* the backward recomputes each block (less memory) */
    uint64_t seed;           /* a new model's weights, the data order and the dropout masks */
    float dropout;           /* -1 (default): config.json's (attn_pdrop, resid_pdrop, embd_pdrop;
                                * attention_dropout); else p on every dropout of the family */
    bool resume;             /* continue from out_dir's checkpoint (same options) */
    size_t stop_after; /* stop (with a checkpoint) after this many steps of this run; 0: never */
    volatile sig_atomic_t *stop_flag; /* when set: stop at the next step boundary */
    pfx_data_parallel dist; /* several processes (optimizer.h), each with its rows of every
                                * micro-batch; zeroed: one process */
} pfx_pretrain_config;

/* The recipe of gain pre-training: block 128, batch 8, accumulate 1, 1
 * epoch, lr 1e-4, gain_lr 5e-5, weight decay 0.01 on every weight,
 * clipping 1.0, warm-up 100 steps, cosine to 0.1, gain off (ramp 100
 * steps when on), seed 1. */
PFX_API void pfx_pretrain_default_config(pfx_pretrain_config *cfg);

/* What the step callback sees after each step (it is not called before the
 * first: the start is result.gains[0] and result.eval_losses[0]). */
typedef struct pfx_pretrain_step {
    size_t step, steps; /* 1-based, and the total */
    uint64_t epoch;     /* of the step's last batch (1-based) */
    double loss;        /* mean token loss of the step's micro-batches */
    float grad_norm;    /* before clipping */
    bool skipped;       /* non-finite gradients: nothing changed */
    float lr_factor, gain_ramp;
    double eval_loss; /* NAN unless evaluated after this step */
    double build_s;   /* seconds this run spent building kernels (pfx_cache_stats), left out
                       * of tokens_per_s and eta_s: they count steady-state work only */
    double tokens_per_s, eta_s;
    pfx_context *ctx;               /* the job's evaluation context over the model after this step
                                * (pfx_context_model), valid during the callback: the
                                * callback may run forward-only calls in it (pfx_model_head_stats,
                                * pfx_model_loss, pfx_model_hidden_states, ...) with at most the
                                * job's batch rows and block tokens; it must not change weights.
                                * Such calls leave the training's results bit for bit the same */
    const pfx_model_prefix *prefix; /* the gains as they are after this step, with r = gain_ramp
                                * above (what the next step's forward and an evaluation use); no
                                * prefix, and no gain (a zeroed struct's meaning) without one */
} pfx_pretrain_step;

typedef void (*pfx_pretrain_step_fn)(const pfx_pretrain_step *step, void *user);

typedef struct pfx_pretrain_result {
    size_t steps, steps_done; /* planned, completed (resumed ones included) */
    size_t first_step;        /* where this run started (0, or the checkpoint's) */
    bool stopped;             /* ended early, checkpoint written */
    double *losses;           /* [steps] */
    float *grad_norms;        /* [steps] */
    float *lrs;               /* [steps] the weights' learning rate (NAN for steps a checkpoint
                               * written without them resumed) */
    double *eval_losses; /* [steps + 1]: after step s at s (0: before); NAN where not measured */
    float *gains;        /* [steps + 1][L * H]: each head's gain after each step (0: at the
                                * start): g, or with the structured gain alone the mean of G over
                                * the head's dimensions; NULL without a gain */
    size_t train_blocks, eval_blocks, tokens_per_step;
    size_t trained_weights, trained_values; /* tensors and values the optimizer updates */
    pfx_model_shape shape;
    char config_filled[160]; /* what config.json took from the tokenizer, e.g. "vocab_size
                                * 2197, bos_token_id 0" ("": nothing was missing) */
    double seconds;          /* the steps of this run */
} pfx_pretrain_result;

/* Runs the job on rt. on_step may be NULL. On an error before the first
 * step nothing is written to out_dir; later errors leave the last
 * checkpoint. */
PFX_API pfx_status pfx_pretrain_run(pfx_runtime *rt, const pfx_pretrain_config *cfg,
                                    pfx_pretrain_step_fn on_step, void *user,
                                    pfx_pretrain_result *result);

/* Releases the result's arrays; NULL-safe. */
PFX_API void pfx_pretrain_result_free(pfx_pretrain_result *result);

#ifdef __cplusplus
}
#endif

#endif
