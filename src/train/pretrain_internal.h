/* Shared by the full-training job (pretrain.c) and its checkpoint
 * (pretrain_ckpt.c). Not installed. */
#ifndef PFX_TRAIN_PRETRAIN_INTERNAL_H
#define PFX_TRAIN_PRETRAIN_INTERNAL_H

#include "prefixcl/data.h"
#include "prefixcl/optimizer.h"
#include "prefixcl/pretrain.h"
#include "prefixcl/tokenizer.h"

typedef struct pfx_pretrain_job {
    const pfx_pretrain_config *cfg;
    pfx_runtime *rt;
    pfx_tokenizer *tok;
    pfx_blocks *train, *eval;
    pfx_model *model;
    pfx_context *ctx;      /* the steps' workspace */
    pfx_context *eval_ctx; /* the evaluations' (no activations kept) */
    pfx_model_shape shape;
    size_t weight_count;
    pfx_tensor **dw; /* [weight_count]: NULL for a frozen weight */
    size_t L, H, D;
    pfx_tensor **gain, **dgain; /* [L] of [H] with a per-head gain */
    pfx_tensor **dim, **ddim;   /* [L] of [H, D] with the structured gain */
    float *gains_host;          /* [L * H] */
    float *dim_host;            /* [L * H * D] */
    pfx_optimizer *opt;
    bool any_gain;       /* a per-head or a structured gain */
    uint8_t *gain_heads; /* [L * H] the heads with a trained gain (config.gain_heads);
                                * NULL: every one */
    size_t gain_count;   /* heads with a trained gain */
    pfx_tensor **params; /* the optimizer's tensors in registration order */
    size_t param_count;
    int32_t *ids; /* [batch * block] */
    pfx_data_position pos;
    char options[8192];  /* what a checkpoint must agree with: "key=value" lines */
    bool sharded;        /* the optimizer's state sharded over the ranks (dist.shard) */
    uint64_t shard_step; /* rank > 0, sharded: the step of its part on disk; 0: none */
} pfx_pretrain_job;

/* The checkpoint (pretrain_ckpt.c through checkpoint.h): every optimizer tensor's value, moments
 * and step, the data position and the curves of r, in one safetensors file
 * written atomically. */
pfx_status pfx_pretrain_ckpt_save(pfx_pretrain_job *j, const char *path,
                                  const pfx_pretrain_result *r);
/* Reads it into the job and r (the options must equal j->options): every
 * field checked before anything changes. */
pfx_status pfx_pretrain_ckpt_load(pfx_pretrain_job *j, const char *path, pfx_pretrain_result *r);

/* The checkpoint as a run writes it (pretrain_shard.c): rank 0's file;
 * sharded, first every other rank's part of this step
 * (checkpoint.rank-R.step-S.safetensors), then, every part written, rank
 * 0's file (the one that names the step: a run cut anywhere resumes from
 * the last whole set), then the parts of the step before go. Every rank
 * calls it at the same step. With `model` the model and its gains too. */
pfx_status pfx_pretrain_save(pfx_pretrain_job *j, const pfx_pretrain_result *r, bool model);
/* Resumes from OUT/checkpoint.safetensors, sharded from this rank's part of
 * the step it names. */
pfx_status pfx_pretrain_resume(pfx_pretrain_job *j, pfx_pretrain_result *r);

/* The job's pieces, each in its own file. */
pfx_status pfx_pretrain_load_data(pfx_pretrain_job *j);               /* pretrain_data.c */
pfx_status pfx_pretrain_check_ids(pfx_pretrain_job *j, pfx_blocks *b, /* pretrain_data.c */
                                  const char *what);
pfx_status pfx_pretrain_build_model(pfx_pretrain_job *j, pfx_pretrain_result *r); /* setup */
pfx_status pfx_pretrain_build_optimizer(pfx_pretrain_job *j, size_t steps);       /* setup */
/* The folder (pretrain_folder.c): the tokenizer's folder (config.tokenizer_dir,
 * else the model's or the config's); the model loaded or initialized with
 * its config.json completed from the tokenizer (r->config_filled says
 * what); the tokenizer's files copied into out_dir. */
const char *pfx_pretrain_tokenizer_dir(const pfx_pretrain_config *c);
pfx_status pfx_pretrain_open_model(pfx_pretrain_job *j, pfx_pretrain_result *r);
pfx_status pfx_pretrain_write_tokenizer(pfx_pretrain_job *j);
/* The gains' host copies from the device (what the next forward reads). */
pfx_status pfx_pretrain_read_gains(pfx_pretrain_job *j);
/* Checkpoint and loss curve; with `model` the model and its gains too. */
pfx_status pfx_pretrain_write_outputs(pfx_pretrain_job *j, const pfx_pretrain_result *r,
                                      bool model);

#endif
