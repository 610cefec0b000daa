/*
 * prefixcl: the prefix-tuning job. A frozen decoder-only model (model.h, a
 * Hugging Face folder) learns per-layer key/value prefixes, through the
 * prefix encoder's MLP (encoder.h) or directly, and optionally a gain per
 * head on the attention logits (docs/design.md, "Training"); its weights
 * never change.
 *
 * Data: a text or JSONL file (data.h: one example a line, or prompt +
 * completion with the loss on the completion only), each example built as
 * eval.h builds it (pfx_example_rule: special tokens, EOS unless no_eos,
 * cut at max_length tokens), served in batches of `batch` examples in an order
 * shuffled per epoch from the seed; evaluation on eval_path in file order,
 * else on a held-back tenth of the examples (at least 1, at most 200).
 *
 * One step: r and the learning rate of the step from the optimizer's
 * schedules; the prefixes of the current encoder (or the direct prefixes),
 * `accumulate` batches' forward and backward through the frozen model into
 * the prefixes' (and gains') gradients, averaged over the batches (as
 * pretraining and HF's gradient accumulation do), the encoder's backward; global
 * gradient-norm clipping; AdamW with the prefix parameters in one group (lr,
 * weight_decay) and the gains in their own (gain_lr, no decay); a step whose
 * gradient norm is NaN or Inf is skipped. Learning rate: linear warm-up over
 * warmup_steps (at most the steps, as pretraining's), then cosine to a
 * tenth at the last step; gain ramp r from 0 to 1 over gain_ramp_steps.
 *
 * Outputs in out_dir, each file replaced atomically: the PEFT prefix-tuning
 * adapter (adapter_config.json, adapter_model.safetensors) in out_dir itself
 * (PeftModel.from_pretrained(base, out_dir) and pfx_adapter_bank_add read
 * it), gains.safetensors beside it with a gain (the gains file of io.h, as
 * pretraining writes it: "gains" [L, H], gain_mode, structured false, the
 * last gain_ramp; PEFT has no place for gains; a run without a gain removes
 * an earlier run's), loss.csv (step, loss, gradient norm,
 * the prefixes' learning rate, the evaluation loss where measured)
 * and checkpoint.safetensors: every trained tensor's value and AdamW moments
 * and step, the data position (the data order is a function of the seed and
 * the epoch, so the position is the whole random state), the curve so far,
 * the evaluation loss and attention on the prefix before training, and the
 * options; resume continues from it bit for bit. A stop (stop_flag or
 * stop_after) takes effect at a step boundary and writes the checkpoint and
 * loss.csv; an interrupted write leaves the previous checkpoint whole.
 *
 * Every option and input is checked before the first step, and nothing is
 * written to out_dir (nor the folder made) on an error found then: a bad
 * option (PFX_ERROR_INVALID_ARGUMENT naming the field), a missing or
 * unreadable file or an out_dir that is not a folder (PFX_ERROR_IO), once
 * the model is loaded a prefix_len that leaves fewer than 2 of its
 * positions for the tokens or a max_length + prefix_len beyond them
 * (PFX_ERROR_INVALID_ARGUMENT naming the fields and the longest max_length
 * that fits), too few examples to hold some back
 * (PFX_ERROR_OUT_OF_RANGE), a tokenizer larger than the model's vocabulary
 * (PFX_ERROR_INVALID_SHAPE), a checkpoint written with other options
 * (PFX_ERROR_INVALID_ARGUMENT) or with a bad field (PFX_ERROR_FORMAT naming
 * it); the message is in pfx_last_error(rt). The job prints nothing.
 */
#ifndef PREFIXCL_TUNE_H
#define PREFIXCL_TUNE_H

#include <signal.h>

#include "prefixcl/data.h"
#include "prefixcl/encoder.h"
#include "prefixcl/model.h"
#include "prefixcl/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PFX_TUNE_CHECKPOINT "checkpoint.safetensors"
#define PFX_TUNE_GAINS      "gains.safetensors"
/* What max_length 0 keeps when the model's positions allow it (data.h). */
#define PFX_TUNE_DEFAULT_MAX_LENGTH PFX_DATA_DEFAULT_MAX_LENGTH

typedef struct pfx_tune_config {
    const char *model_dir;     /* the frozen model: a Hugging Face folder */
    const char *tokenizer_dir; /* tokenizer.json's folder; NULL: model_dir */
    const char *data_path;     /* text or JSONL */
    const char *eval_path;     /* NULL: a held-back slice of the data */
    const char *out_dir;
    size_t prefix_len; /* P */
    size_t hidden;     /* encoder MLP hidden size (and its embedding width); 0: direct prefixes */
    size_t epochs;     /* used when steps is 0 */
    size_t steps;      /* optimizer steps; 0: epochs x batches per epoch */
    size_t batch;      /* examples a batch */
    size_t accumulate; /* batches a step (their gradients averaged); 0 or 1: one */
    size_t max_length; /* tokens kept of an example; with prefix_len at most the model's
                        * positions; 0: fit the model, PFX_TUNE_DEFAULT_MAX_LENGTH or the
                        * positions the prefix leaves when fewer (result.max_length) */
    bool no_eos;       /* examples without EOS (data.h, pfx_example_rule) */
    float lr;          /* the prefix group */
    float gain_lr;     /* the gain group; < 0: lr / 2 */
    pfx_gain_mode gain_mode;  /* OFF, LINEAR or TANH: a gain per head, starting at 0 */
    uint32_t gain_ramp_steps; /* 0: r = 1 from the start */
    float weight_decay;       /* the prefix group (never the gains) */
    float max_grad_norm;      /* 0: no clipping */
    uint32_t warmup_steps;
    uint64_t seed;     /* the encoder's initial values, the data order and the dropout masks */
    float dropout;     /* -1 (default): the base model's config.json dropout (active while
                        * tuning, as PEFT tunes); else p on every dropout of the family */
    pfx_dtype storage; /* the frozen weights on the device: F32, F16, BF16 or Q8_0 */
    size_t
        checkpoint_every; /* also write the checkpoint every N steps; 0: at the end or a stop only */
    size_t eval_every;    /* also evaluate every N steps (step.eval_loss, result.eval_losses);
                           * 0: before and after only */
    bool recompute;       /* the backward recomputes each block (less memory, the same values) */
    bool resume;          /* continue from out_dir's checkpoint (same options) */
    size_t stop_after;    /* stop (with a checkpoint) once this many steps are done, resumed ones
                                * included; 0: never */
    volatile sig_atomic_t *stop_flag; /* when set: stop at the next step boundary */
    pfx_data_parallel dist; /* several processes (optimizer.h), each with its rows of every
                                * batch; only rank 0 evaluates; zeroed: one process */
} pfx_tune_config;

/* Prefix 20, hidden 512, 1 epoch, batch 8, accumulate 1, max length 0 (128,
 * or what fits beside the prefix), EOS appended, lr 1e-2, gains off (gain_lr
 * -1: lr / 2; ramp 20 steps when on), weight decay 0, clipping 1, warm-up
 * 10, no evaluation between, seed 1, float32 weights. The warm-up and the
 * ramp are shorter than pretraining's (100 each): a tuning run is hundreds
 * of steps, and only the prefixes (and gains) train. */
PFX_API void pfx_tune_default_config(pfx_tune_config *cfg);

/* What the step callback sees after each step, on every rank. */
typedef struct pfx_tune_step {
    size_t step, steps; /* 1-based, and the total */
    uint64_t epoch;     /* of the batch this step used (1-based) */
    size_t max_length;  /* tokens kept of an example (config.max_length 0 resolved) */
    double loss;        /* mean token loss of the step's batch (over every rank) */
    float grad_norm;    /* before clipping */
    bool skipped;       /* non-finite gradients: nothing changed */
    float lr_factor, gain_ramp;
    float lr;                       /* the prefixes' learning rate this step used */
    double eval_loss;               /* NAN unless evaluated after this step (eval_every) */
    double build_s;                 /* seconds this run spent building kernels
                                     * (pfx_cache_stats), left out of tokens_per_s and eta_s:
                                     * they count steady-state work only */
    double tokens_per_s;            /* tokens of this run's steps per second */
    double eta_s;                   /* seconds left at this pace */
    pfx_context *ctx;               /* the job's context over the frozen model (pfx_context_model),
                                * valid during the callback: forward-only calls in it
                                * (pfx_model_head_stats, pfx_model_loss, ...) with at most the job's
                                * batch rows and max_length tokens leave the run bit for bit the same */
    const pfx_model_prefix *prefix; /* the prefixes and gains as the step left them, r = gain_ramp:
                                * what the next step's forward uses; valid during the callback */
} pfx_tune_step;

typedef void (*pfx_tune_step_fn)(const pfx_tune_step *step, void *user);

typedef struct pfx_tune_result {
    size_t steps, steps_done; /* planned, completed (resumed ones included) */
    size_t first_step;        /* where this run started (0, or the checkpoint's) */
    bool stopped;             /* ended early by stop_flag or stop_after, checkpoint written */
    double *losses;           /* [steps] */
    float *grad_norms;        /* [steps] */
    float *lrs;               /* [steps] the prefixes' learning rate (NAN for steps a checkpoint
                               * written without them resumed) */
    double *eval_losses;      /* [steps + 1]: after step s at s (0: before); NAN where not
                               * measured (eval_every) */
    double eval_before;       /* mean token loss on the evaluation set before the first step */
    double eval_after;        /* after the last; NAN when stopped */
    size_t train_examples, eval_examples, eval_tokens;
    size_t max_length;     /* tokens kept of an example (config.max_length 0 resolved) */
    pfx_example_rule rule; /* how the examples were built */
    pfx_model_shape shape;
    pfx_encoder_param_counts counts; /* the prefix parameters */
    size_t gain_params;              /* L * H with a gain, else 0 */
    float *gains; /* [L * H] final gains, g of layer l head h at l * H + h; NULL without */
    float *mass_before,
        *mass_after;      /* [L * H] attention mass on the prefix, first evaluation batch;
                                * mass_after NULL when stopped */
    double seconds;       /* the steps of this run */
    char base_model[512]; /* model_dir's absolute path: the adapter's base_model_name_or_path */
} pfx_tune_result;

/* Runs the job on rt. on_step may be NULL. On an error before the first
 * step nothing is written; later errors leave the last checkpoint. On rank
 * 0 of several, and in one process, the result holds everything; the other
 * ranks' hold the curve. */
PFX_API pfx_status pfx_tune_run(pfx_runtime *rt, const pfx_tune_config *cfg,
                                pfx_tune_step_fn on_step, void *user, pfx_tune_result *result);

/* Releases the result's arrays; NULL-safe. */
PFX_API void pfx_tune_result_free(pfx_tune_result *result);

#ifdef __cplusplus
}
#endif

#endif
