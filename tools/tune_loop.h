/* The prefix-tuning job behind `prefixcl tune`: a frozen decoder-only model
 * (a Hugging Face folder, or the demonstration's GPT-2 small shape with
 * seeded random weights), its tokenizer, a text or JSONL data set, per-layer
 * prefixes learned through the prefix encoder (or directly) and optional
 * per-head gains, AdamW (gains in their own group), and the outputs: a PEFT
 * prefix-tuning folder, the gains beside it, the loss curve, per-layer
 * attention on the prefix, and a checkpoint that --resume continues bit for
 * bit (prefix/encoder and gain values, AdamW moments and step counts, the
 * data position; the data order is a function of the seed and the epoch, so
 * the position is the whole random state). */
#ifndef PFX_TOOLS_TUNE_LOOP_H
#define PFX_TOOLS_TUNE_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/prefixcl.h"

/* The checkpoint's file name inside the output folder. */
#define TUNE_CHECKPOINT "checkpoint.safetensors"

typedef struct tune_config {
    const char *model_dir;     /* NULL: the demonstration model (demo_dir's tokenizer) */
    const char *demo_dir;      /* tokenizer.json (+ train.txt, eval.txt) of the demonstration */
    const char *data_path;     /* text or JSONL */
    const char *eval_path;     /* NULL: a held-back slice of the data */
    const char *out_dir;
    const char *device;        /* NULL: the default device */
    size_t prefix_len;         /* P */
    size_t hidden;             /* encoder MLP hidden size (and its embedding width); 0: direct */
    size_t epochs;             /* used when steps is 0 */
    size_t steps;              /* optimizer steps; 0: epochs x batches per epoch */
    size_t batch, max_length;
    float lr;                  /* prefix group */
    float gain_lr;             /* gain group; < 0: lr / 2 */
    pfx_gain_mode gain_mode;
    uint32_t gain_ramp_steps;
    float weight_decay;        /* prefix group (gains: none) */
    float max_grad_norm;       /* 0: no clipping */
    uint32_t warmup_steps;
    uint64_t seed;
    pfx_dtype storage;         /* frozen weights on the device */
    size_t demo_layers;        /* demonstration model depth (GPT-2 small: 12) */
    size_t checkpoint_every;   /* also every N steps; 0: only at the end or on a stop */
    bool resume;               /* continue from out_dir's checkpoint */
    size_t stop_after;         /* stop (with a checkpoint) once this many steps are done; 0: never */
    volatile sig_atomic_t *stop_flag; /* set (by SIGINT or SIGTERM): stop at the next step boundary */
} tune_config;

/* Defaults: prefix 20, hidden 512, 1 epoch, batch 8, max length 128, lr 1e-2,
 * gains off (lr / 2, ramp 20 steps when on), weight decay 0, clipping 1,
 * warm-up 10, seed 1, float32 weights, 12 demonstration layers. */
void tune_default_config(tune_config *cfg);

typedef struct tune_step_info {
    size_t step, steps;        /* 1-based, and the total */
    uint64_t epoch;            /* of the batch this step used (1-based) */
    double loss;
    float grad_norm;           /* before clipping */
    bool skipped;
    double tokens_per_s;       /* tokens of this run's steps per second */
    double eta_s;              /* seconds left at this pace */
} tune_step_info;

typedef void (*tune_step_fn)(const tune_step_info *info, void *user);

typedef struct tune_result {
    double *losses;            /* [steps] over the whole run, resumed steps included */
    float *grad_norms;         /* [steps] */
    size_t steps, steps_done;  /* planned, completed */
    size_t first_step;         /* the step this process started from (0, or the checkpoint's) */
    bool stopped;              /* ended early by stop_flag or stop_after (checkpoint written) */
    double eval_before, eval_after; /* mean token loss on the evaluation set */
    size_t eval_examples, eval_tokens;
    size_t train_examples;
    pfx_model_shape shape;
    pfx_encoder_param_counts counts;
    size_t gain_params;
    float *gains;              /* [L * H] final gains (NULL with the gain off) */
    float *mass_before, *mass_after; /* [L * H] attention mass on the prefix */
    bool pictures;             /* the .png files were drawn (false in a build without cairo) */
    double seconds;            /* the training loop of this process */
    char device[300];
    char base_model[512];      /* base_model_name_or_path written to the adapter */
} tune_result;

void tune_result_free(tune_result *r);

/* Runs the job. 0: done (or stopped with a checkpoint when r->stopped);
 * 1: an error, printed on stderr. */
int tune_run(const tune_config *cfg, tune_step_fn on_step, void *user, tune_result *r);

#endif
