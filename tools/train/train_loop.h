/* The prefix-tuning run behind `prefixcl train`: a frozen residual stack of
 * attention layers with seeded random weights, a teacher with hidden random
 * prefixes and gains, and a student that learns its prefixes through the
 * prefix encoder (MLP) and its gains (tanh mode, ramped in) with AdamW, on
 * the MSE between the two stacks' outputs for fresh random inputs. */
#ifndef PFX_TOOLS_TRAIN_LOOP_H
#define PFX_TOOLS_TRAIN_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/prefixcl.h"

typedef struct train_config {
    size_t steps, layers;
    uint64_t seed;
    size_t batch, tokens, model_dim, heads, kv_heads, head_dim, prefix_len;
    size_t embed_dim, hidden_dim; /* encoder MLP */
    float lr;                     /* prefix group; gains at lr / 2 */
    float max_grad_norm;
    uint32_t warmup_steps, gain_ramp_steps;
    float weight_scale;               /* frozen weights: uniform +-scale/sqrt(fan_in) */
    float teacher_prefix_scale;       /* teacher prefixes: uniform +-scale */
    float teacher_gain_scale;         /* teacher gains: uniform +-scale */
    size_t eval_every;                /* loss on a held-out batch every N steps; 0: never */
    volatile sig_atomic_t *stop_flag; /* set (by SIGINT or SIGTERM): stop after the step under way,
                                         then analyse and save what is trained (NULL: none) */
} train_config;

void train_default_config(train_config *cfg);
/* Shortens the lr warm-up (<= steps/10) and the gain ramp (<= steps/4) for
 * short runs; call after setting cfg->steps. */
void train_fit_schedules(train_config *cfg);

typedef struct train_step_info {
    size_t step;     /* 1-based */
    double loss;     /* MSE before this step's update */
    float grad_norm; /* before clipping */
    float lr_factor, gain_ramp;
    bool skipped;
    double elapsed_s;    /* since the first step began */
    double tokens_per_s; /* student tokens (B*N per step) per second */
} train_step_info;

typedef void (*train_step_fn)(const train_step_info *info, void *user);

typedef struct train_layer_stats {
    double prefix_mass, entropy; /* student, averaged over heads */
    double teacher_prefix_mass, teacher_entropy;
} train_layer_stats;

typedef struct train_result {
    double *losses;    /* [steps] (malloc'ed; train_result_free) */
    float *grad_norms; /* [steps] */
    float *lrs;        /* [steps] learning rate of the prefix group */
    size_t steps_done;
    bool stopped;                        /* ended early by stop_flag (outputs of steps_done) */
    size_t eval_count;                   /* held-out evaluations (train_config.eval_every) */
    size_t *eval_steps;                  /* [eval_count] 1-based step of each */
    double *eval_losses;                 /* [eval_count] MSE on the held-out batch, before that
                                        step's update */
    double first_loss, final_loss;       /* loss of step 1, mean of the last min(10, steps) */
    pfx_encoder_param_counts counts;     /* before bake (trainable = the MLP) */
    size_t gain_params;                  /* L * H */
    float *gains, *teacher_gains;        /* [L * H] the learned gain parameters and the hidden
                                        ones (tanh mode: gamma = 1 + tanh(g)) */
    train_layer_stats *layer_stats;      /* [layers] */
    double train_seconds, setup_seconds; /* the loop; runtime + allocation before it */
    double first_step_seconds;           /* step 1 alone: kernel builds land here */
    char device[300];
} train_result;

void train_result_free(train_result *r);

/* Runs the whole job; out_dir (created) receives prefixes.safetensors and the
 * PEFT folder peft/. Returns 0 or prints the error (stderr) and returns 1. */
int train_run(const char *device, const train_config *cfg, const char *out_dir,
              train_step_fn on_step, void *user, train_result *result);

#endif
