/* The checkpoint of a training job (tune, pretrain): one safetensors file,
 * replaced atomically (an interrupted save leaves the previous one whole),
 * holding the optimizer's part (optimizer.h: every trained tensor's value,
 * AdamW moments and step) and what the job describes here:
 *   metadata  "format"; the job's options ("key=value" lines a resume must
 *             repeat); counts (the data position, the steps done) in
 *             decimal; curves of doubles as C99 hex floats (exact, "%a");
 *   tensors   F32 curves and records of the job (gradient norms, ...).
 * Loading reads and checks every field, each error naming the job, the
 * file and the field, before the optimizer changes. Not installed. */
#ifndef PFX_TRAIN_CHECKPOINT_H
#define PFX_TRAIN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/io.h"
#include "prefixcl/optimizer.h"

/* How many values a curve or tensor holds, given the steps done. */
typedef enum pfx_ckpt_length {
    PFX_CKPT_FIXED,          /* width */
    PFX_CKPT_STEPS,          /* steps done x width */
    PFX_CKPT_START_AND_STEPS /* (steps done + 1) x width: before the first step, then each */
} pfx_ckpt_length;

/* How a curve is written in its metadata. */
typedef enum pfx_ckpt_curve_form {
    PFX_CKPT_LIST,       /* "a,b,c": every value, separated by commas */
    PFX_CKPT_LIST_ENDED, /* "a,b,c,": every value, each followed by a comma */
    PFX_CKPT_AT_STEPS    /* "0:a,3:b,": the finite values, each after its index, ascending;
                          * an index without a value reads as NaN */
} pfx_ckpt_curve_form;

/* A whole number in the metadata. */
typedef struct pfx_ckpt_count {
    const char *key;
    uint64_t value;       /* saved; loaded */
    uint64_t max;         /* the largest a load accepts */
    const char *max_name; /* names max in the message: "the steps planned" */
} pfx_ckpt_count;

/* Doubles in the metadata. */
typedef struct pfx_ckpt_curve {
    const char *key;
    double *values; /* saved from; loaded into */
    pfx_ckpt_length length;
    pfx_ckpt_curve_form form;
    bool finite; /* a load refuses inf and nan (the writer never has them) */
} pfx_ckpt_curve;

/* A float tensor: 1-D [n] for a fixed length or a width of 1, else
 * [rows, width]. Not in the file when it holds no value. */
typedef struct pfx_ckpt_tensor {
    const char *name;
    float *values; /* saved from; loaded into; NULL: not in this job's checkpoint */
    pfx_ckpt_length length;
    size_t width;
    bool optional; /* absent from a file (one written before the job kept it): read as NaN */
} pfx_ckpt_tensor;

/* The most counts, curves, tensors a job describes. */
#define PFX_CKPT_MAX_FIELDS 4

typedef struct pfx_checkpoint {
    pfx_runtime *rt;         /* errors go to its pfx_last_error (NULL: the thread's) */
    const char *job;         /* names the job in messages: "tune" */
    const char *format;      /* the metadata "format" */
    const char *options_key; /* the metadata holding the options */
    const char *options;     /* this run's: a checkpoint must hold the same */
    pfx_optimizer *opt;      /* its part of the file; NULL: none */
    pfx_ckpt_count counts[PFX_CKPT_MAX_FIELDS]; /* written in this order after the options */
    size_t count_n;
    size_t steps;                               /* counts[steps] is the steps done */
    pfx_ckpt_curve curves[PFX_CKPT_MAX_FIELDS]; /* written in this order after the counts */
    size_t curve_n;
    pfx_ckpt_tensor tensors[PFX_CKPT_MAX_FIELDS];
    size_t tensor_n;
    /* the job's own checks of the counts as read (c->counts[i].value),
     * after every field is read, before anything changes; NULL: none */
    pfx_status (*check)(const struct pfx_checkpoint *c, const char *path);
    void *user; /* for check */
} pfx_checkpoint;

/* Writes c to path atomically. */
pfx_status pfx_checkpoint_save(const pfx_checkpoint *c, const char *path);

/* Reads the open file f (named path in messages) into c's counts, curves
 * and tensors: format, options, every count, the optimizer's part (checked,
 * not restored), every curve and tensor, then c->check. On failure the
 * values read are meaningless. */
pfx_status pfx_checkpoint_read(pfx_checkpoint *c, const pfx_safetensors *f, const char *path);

/* Opens path, reads it as above, then restores the optimizer's part (which
 * checks every moment before the first write). */
pfx_status pfx_checkpoint_load(pfx_checkpoint *c, const char *path);

#endif
