/*
 * prefixcl: the evaluation job. The held-out causal-LM loss and perplexity
 * of a model (a Hugging Face folder) on a data file, for the frozen model
 * and, with an adapter, a second pass with its prefix: what `prefixcl eval`
 * prints.
 *
 * Data: a text or JSONL file (data.h: one example a line, or prompt +
 * completion with only the completion scored) tokenized by the folder's
 * tokenizer, each example built as the tuning job builds it
 * (pfx_example_rule: special tokens, EOS unless no_eos, cut at max_length
 * tokens; so an adapter's loss here is the loss tune reports), in file order, in
 * batches of `batch` examples. The loss is the mean over every scored token
 * of the data set (a label at t >= 1 that is not PFX_LABEL_IGNORE), so the
 * batch size does not change it; the perplexity is exp(loss).
 *
 * The adapter (adapter_path: what pfx_adapter_bank_add reads, a PEFT
 * prefix-tuning folder, its adapter_model.safetensors, or a gains file)
 * takes its prefix's positions before the tokens: max_length is capped at
 * the model's positions less the prefix, and 0 is PFX_DATA_DEFAULT_MAX_LENGTH
 * so capped (result->max_length is the length used).
 *
 * Every option is checked before anything is loaded: a bad option
 * (PFX_ERROR_INVALID_ARGUMENT naming config.<field>); then a missing or bad
 * model, tokenizer, adapter or data file (its loader's status), an adapter
 * whose prefix leaves no position (PFX_ERROR_OUT_OF_RANGE), a data set that
 * scores no token (PFX_ERROR_OUT_OF_RANGE). The message is in
 * pfx_last_error(rt). A stop (stop_flag) takes effect before the next batch:
 * the pass it interrupts gives no loss. The job prints nothing and writes
 * nothing.
 */
#ifndef PREFIXCL_EVAL_H
#define PREFIXCL_EVAL_H

#include <signal.h>

#include "prefixcl/data.h"
#include "prefixcl/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_eval_config {
    const char *model_dir;            /* a Hugging Face folder */
    const char *tokenizer_dir;        /* tokenizer.json's folder; NULL: model_dir */
    const char *adapter_path;         /* NULL: the frozen model only */
    const char *data_path;            /* text or JSONL */
    size_t batch;                     /* examples a forward */
    size_t max_length;                /* tokens kept of an example (capped, see above);
                                       * 0: PFX_DATA_DEFAULT_MAX_LENGTH */
    bool no_eos;                      /* examples without EOS (data.h, pfx_example_rule) */
    pfx_dtype storage;                /* the weights on the device: F32, F16, BF16 or Q8_0 */
    volatile sig_atomic_t *stop_flag; /* when set: stop before the next batch */
} pfx_eval_config;

/* Batch 4, max length 0 (PFX_DATA_DEFAULT_MAX_LENGTH), EOS appended,
 * float32 weights, no adapter: the examples of the tuning job's defaults. */
PFX_API void pfx_eval_default_config(pfx_eval_config *cfg);

/* What the progress callback sees after each batch. */
typedef struct pfx_eval_progress {
    size_t pass, passes;   /* 1-based: 1 the frozen model, 2 with the adapter */
    size_t batch, batches; /* 1-based within the pass, and the pass's total */
    size_t tokens;         /* scored so far in this pass */
    double loss;           /* their mean so far (NAN before any) */
} pfx_eval_progress;

typedef void (*pfx_eval_progress_fn)(const pfx_eval_progress *progress, void *user);

typedef struct pfx_eval_result {
    double loss, perplexity;                 /* the frozen model; NAN when its pass was stopped */
    double adapter_loss, adapter_perplexity; /* with the adapter; NAN without one or when stopped */
    size_t passes, passes_done;              /* 1, or 2 with an adapter; those completed */
    size_t batches;                          /* a pass's */
    size_t batches_done;     /* of the last pass begun (all of them unless stopped) */
    size_t examples, tokens; /* the data set's, and the tokens a pass scores */
    size_t max_length;       /* tokens kept per example */
    pfx_example_rule rule;   /* how the examples were built */
    size_t prefix_len;       /* the adapter's (0 without, or for a gains file) */
    bool stopped;            /* ended early by stop_flag */
    double seconds;
} pfx_eval_result;

/* Runs the evaluation on rt. on_batch may be NULL. A stop is not an error:
 * PFX_SUCCESS with result->stopped. */
PFX_API pfx_status pfx_eval_run(pfx_runtime *rt, const pfx_eval_config *cfg,
                                pfx_eval_progress_fn on_batch, void *user, pfx_eval_result *result);

#ifdef __cplusplus
}
#endif

#endif
