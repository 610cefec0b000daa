/* The checkpoint of the prefix-tuning job (tune_internal.h) as checkpoint.h
 * writes and reads it:
 *   metadata  format prefixcl-tune-checkpoint-1, the options ("config"),
 *             data_epoch, data_index, steps_done, eval_before (the
 *             evaluation loss before training), the losses ("a,b,c": a
 *             loss may be inf or nan) and, with eval_every, the evaluation
 *             losses ("0:a,10:b,": eval_losses);
 *   tensors   report.grad_norms and report.lrs [steps done] (a file without
 *             report.lrs, written before it was kept, gives NaN learning
 *             rates), report.mass_before [L * H].
 * Resuming also checks that the data position is where the steps done end. */
#include <stdlib.h>

#include "checkpoint.h"
#include "internal.h"
#include "tune_internal.h"

#define FORMAT "prefixcl-tune-checkpoint-1"

enum { EPOCH, INDEX, DONE };

/* What the position check needs beside the counts. */
typedef struct tune_data {
    const pfx_tune_job *j;
    size_t examples;
} tune_data;

/* Each step reads one batch: the data position must be where the steps
 * done end. */
static pfx_status check_position(const pfx_checkpoint *c, const char *path)
{
    const tune_data *d = c->user;
    const unsigned long long epoch = c->counts[EPOCH].value, index = c->counts[INDEX].value;
    unsigned long long done = c->counts[DONE].value;
    const size_t batch = d->j->cfg->batch,
                 per_epoch = pfx_dataset_batches_per_epoch(d->j->train, batch);
    done *= d->j->accumulate; /* batches read */
    if (index >= d->examples)
        return pfx_error(
            c->rt, PFX_ERROR_FORMAT,
            "tune: %s: the metadata 'data_index' (%llu) is past the %zu training examples", path,
            index, d->examples);
    if (per_epoch == 0 || epoch != done / per_epoch || index != done % per_epoch * batch)
        return pfx_error(c->rt, PFX_ERROR_FORMAT,
                         "tune: %s: the metadata 'data_epoch' (%llu) and 'data_index' (%llu) are "
                         "not where %llu batches "
                         "of %zu examples end (epoch %llu, index %llu of %zu examples)",
                         path, epoch, index, done, batch, per_epoch ? done / per_epoch : 0ULL,
                         per_epoch ? done % per_epoch * batch : 0ULL, d->examples);
    return PFX_SUCCESS;
}

/* The job's checkpoint, its values in r and mass ([L * H]). */
static void describe(pfx_checkpoint *c, tune_data *d, pfx_tune_job *j, pfx_tune_result *r,
                     float *mass)
{
    *d = (tune_data){ j, r->train_examples };
    *c = (pfx_checkpoint){
        .rt = j->rt,
        .job = "tune",
        .format = FORMAT,
        .options_key = "config",
        .options = j->options,
        .opt = j->opt,
        .counts = { [EPOCH] = { "data_epoch", j->pos.epoch, UINT64_MAX, "any" },
                    [INDEX] = { "data_index", j->pos.index, UINT64_MAX, "any" },
                    [DONE] = { "steps_done", r->steps_done, j->steps, "the steps planned" } },
        .count_n = 3,
        .steps = DONE,
        .curves = { { "eval_before", &r->eval_before, PFX_CKPT_FIXED, PFX_CKPT_LIST, false },
                    { "losses", r->losses, PFX_CKPT_STEPS, PFX_CKPT_LIST, false },
                    { "eval_losses", r->eval_losses, PFX_CKPT_START_AND_STEPS, PFX_CKPT_AT_STEPS,
                      true } },
        .curve_n = j->cfg->eval_every ? 3 : 2, /* the curve of runs that evaluate between */
        .tensors = { { "report.grad_norms", r->grad_norms, PFX_CKPT_STEPS, 1, false },
                     { "report.mass_before", mass, PFX_CKPT_FIXED, j->L * j->H, false },
                     { "report.lrs", r->lrs, PFX_CKPT_STEPS, 1, true } },
        .tensor_n = 3,
        .check = check_position,
        .user = d,
    };
}

pfx_status pfx_tune_ckpt_save(pfx_tune_job *j, const char *path, const pfx_tune_result *r)
{
    pfx_checkpoint c;
    tune_data d;
    /* read only: the description serves saving and loading */
    describe(&c, &d, j, (pfx_tune_result *)r, r->mass_before);
    return pfx_checkpoint_save(&c, path);
}

pfx_status pfx_tune_ckpt_load(pfx_tune_job *j, const char *path, pfx_tune_result *r)
{
    float *mass = malloc(j->L * j->H * sizeof(float));
    if (!mass)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "tune: host memory");
    pfx_checkpoint c;
    tune_data d;
    describe(&c, &d, j, r, mass);
    const pfx_status st = pfx_checkpoint_load(&c, path);
    if (st != PFX_SUCCESS) {
        free(mass);
        return st;
    }
    j->pos.epoch = c.counts[EPOCH].value;
    j->pos.index = c.counts[INDEX].value;
    r->steps_done = (size_t)c.counts[DONE].value;
    free(r->mass_before);
    r->mass_before = mass;
    return PFX_SUCCESS;
}
