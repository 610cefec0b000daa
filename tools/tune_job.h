/* What the pieces of `prefixcl tune` share (tune_loop.c, tune_ckpt.c,
 * tune_out.c): the objects of one run. Not a public interface. */
#ifndef PFX_TOOLS_TUNE_JOB_H
#define PFX_TOOLS_TUNE_JOB_H

#include "tune_loop.h"

typedef struct tune_job {
    const tune_config *cfg;
    pfx_runtime *rt;
    pfx_model *model;
    pfx_model_shape shape;
    pfx_tokenizer *tok;
    pfx_dataset *train, *eval;
    pfx_encoder *enc;
    size_t L, H;
    pfx_tensor **pk, **pv;       /* [L] prefixes the model attends with */
    pfx_tensor **dpk, **dpv;     /* [L] their gradients */
    pfx_tensor **gain, **dgain;  /* [L] [H] (gain on) */
    float *gains_host;           /* [L * H] */
    pfx_tensor *enc_grad[PFX_ENCODER_PARAM_COUNT];
    pfx_optimizer *opt;
    pfx_tensor **params;         /* the optimizer's parameters in registration order */
    size_t param_count;
    int32_t *ids, *labels, *lens; /* one batch */
    pfx_data_position pos;
    size_t steps;                /* planned */
    char config_text[1024];      /* the options a checkpoint must agree with */
} tune_job;

/* Prints "prefixcl tune: what: status (detail)" and returns 1 unless st is
 * PFX_SUCCESS (then 0). The detail is j's runtime's, or the thread's when j
 * is NULL (calls without a runtime: the data set's) or the runtime has none. */
int tune_fail(const tune_job *j, pfx_status st, const char *what);

/* The checkpoint (tune_ckpt.c): every optimizer parameter's value, AdamW
 * moments and step, the data position, the loss curve so far and the
 * evaluation loss before training, in one safetensors file written
 * atomically. 0 on success, 1 after printing the error. */
int tune_ckpt_save(tune_job *j, const char *path, const tune_result *r);
/* Loads it into the job; the file's options must equal j->config_text. */
int tune_ckpt_load(tune_job *j, const char *path, tune_result *r);

/* The demonstration model's folder (tune_demo.c): beside its config.json,
 * the weights j->model holds (model.safetensors) and the demonstration's
 * tokenizer.json, so that generate, eval and attn-map open the folder. 0, or
 * 1 after printing the error. */
int tune_demo_write_model(const tune_job *j, const char *dir);

#endif
