/* Shared by the prefix-tuning job (tune.c), its checkpoint (tune_ckpt.c)
 * and its outputs (tune_out.c). Not installed. */
#ifndef PFX_TRAIN_TUNE_INTERNAL_H
#define PFX_TRAIN_TUNE_INTERNAL_H

#include "prefixcl/data.h"
#include "prefixcl/encoder.h"
#include "prefixcl/optimizer.h"
#include "prefixcl/tokenizer.h"
#include "prefixcl/tune.h"

typedef struct pfx_tune_job {
    const pfx_tune_config *cfg;
    pfx_runtime *rt;
    pfx_model *model;
    pfx_context *ctx; /* the steps' and the evaluations' workspace */
    pfx_model_shape shape;
    pfx_tokenizer *tok;
    pfx_dataset *train, *eval;
    pfx_encoder *enc;
    size_t L, H;
    size_t max_length;     /* config.max_length, or what 0 resolved to for the model */
    size_t ranks, rank;    /* ranks >= 1 */
    size_t accumulate;     /* batches a step, >= 1 */
    pfx_tensor **pk, **pv; /* [L] prefixes the model attends with (the encoder's own when direct) */
    pfx_tensor **dpk, **dpv;    /* [L] their gradients */
    pfx_tensor **gain, **dgain; /* [L] of [H] with a gain */
    float *gains_host;          /* [L * H] */
    pfx_tensor *enc_grad[PFX_ENCODER_PARAM_COUNT];
    pfx_optimizer *opt;
    int32_t *ids, *labels, *lens; /* one batch */
    pfx_data_position pos;
    size_t steps;       /* planned */
    char options[4096]; /* what a checkpoint must agree with: "key=value" lines */
} pfx_tune_job;

/* The checkpoint (tune_ckpt.c through checkpoint.h): every optimizer parameter's value, AdamW
 * moments and step, the data position, the loss curve so far, the
 * evaluation loss and prefix attention before training, in one safetensors
 * file written atomically. */
pfx_status pfx_tune_ckpt_save(pfx_tune_job *j, const char *path, const pfx_tune_result *r);
/* Reads it into the job and r; the file's options must equal j->options.
 * Every field is checked before anything changes. */
pfx_status pfx_tune_ckpt_load(pfx_tune_job *j, const char *path, pfx_tune_result *r);

/* The outputs (tune_out.c), each replaced atomically: loss.csv of the steps
 * done; everything (the adapter from j->pk, j->pv, the gains from
 * j->gains_host with r = ramp, loss.csv). */
pfx_status pfx_tune_out_curve(pfx_tune_job *j, const pfx_tune_result *r);
pfx_status pfx_tune_out_write(pfx_tune_job *j, const pfx_tune_result *r, float ramp);

#endif
