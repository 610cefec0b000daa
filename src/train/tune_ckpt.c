/* The checkpoint of the prefix-tuning job (tune_internal.h) as checkpoint.h
 * writes and reads it:
 *   metadata  format prefixcl-tune-checkpoint-1, the options ("config"),
 *             data_epoch, data_index, steps_done, eval_before (the
 *             evaluation loss before training) and the losses ("a,b,c": a
 *             loss may be inf or nan);
 *   tensors   report.grad_norms [steps done], report.mass_before [L * H].
 * Resuming also checks that the data position is where the steps done end. */
#include <stdlib.h>

#include "checkpoint.h"
#include "internal.h"
#include "tune_internal.h"

#define FORMAT "prefixcl-tune-checkpoint-1"

enum { EPOCH, INDEX, DONE, COUNTS };

/* The job's checkpoint, its values in r and mass ([L * H]). */
typedef struct tune_ckpt {
    pfx_tune_job *j;
    size_t examples;
    pfx_ckpt_count counts[COUNTS];
    pfx_ckpt_curve curves[2];
    pfx_ckpt_tensor tensors[2];
    pfx_checkpoint c;
} tune_ckpt;

/* Each step reads one batch: the data position must be where the steps
 * done end. */
static pfx_status check_position(const pfx_checkpoint *c, const char *path)
{
    const tune_ckpt *d = c->user;
    const pfx_tune_job *j = d->j;
    const unsigned long long epoch = c->counts[EPOCH].value, index = c->counts[INDEX].value,
                             done = c->counts[DONE].value;
    const size_t batch = j->cfg->batch, per_epoch = pfx_dataset_batches_per_epoch(j->train, batch);
    if (index >= d->examples)
        return pfx_error(
            j->rt, PFX_ERROR_FORMAT,
            "tune: %s: the metadata 'data_index' (%llu) is past the %zu training examples", path,
            index, d->examples);
    if (per_epoch == 0 || epoch != done / per_epoch || index != done % per_epoch * batch)
        return pfx_error(j->rt, PFX_ERROR_FORMAT,
                         "tune: %s: the metadata 'data_epoch' (%llu) and 'data_index' (%llu) are "
                         "not where %llu steps "
                         "of %zu examples a batch end (epoch %llu, index %llu of %zu examples)",
                         path, epoch, index, done, batch, per_epoch ? done / per_epoch : 0ULL,
                         per_epoch ? done % per_epoch * batch : 0ULL, d->examples);
    return PFX_SUCCESS;
}

static void describe(tune_ckpt *d, pfx_tune_job *j, pfx_tune_result *r, float *mass)
{
    d->j = j;
    d->examples = r->train_examples;
    d->counts[EPOCH] = (pfx_ckpt_count){ "data_epoch", j->pos.epoch, UINT64_MAX, "any" };
    d->counts[INDEX] = (pfx_ckpt_count){ "data_index", j->pos.index, UINT64_MAX, "any" };
    d->counts[DONE] =
        (pfx_ckpt_count){ "steps_done", r->steps_done, j->steps, "the steps planned" };
    d->curves[0] =
        (pfx_ckpt_curve){ "eval_before", &r->eval_before, PFX_CKPT_FIXED, PFX_CKPT_LIST, false };
    d->curves[1] = (pfx_ckpt_curve){ "losses", r->losses, PFX_CKPT_STEPS, PFX_CKPT_LIST, false };
    d->tensors[0] = (pfx_ckpt_tensor){ "report.grad_norms", r->grad_norms, PFX_CKPT_STEPS, 1 };
    d->tensors[1] = (pfx_ckpt_tensor){ "report.mass_before", mass, PFX_CKPT_FIXED, j->L * j->H };
    d->c = (pfx_checkpoint){ .rt = j->rt,
                             .job = "tune",
                             .format = FORMAT,
                             .options_key = "config",
                             .options = j->options,
                             .opt = j->opt,
                             .counts = d->counts,
                             .count_n = COUNTS,
                             .steps = DONE,
                             .curves = d->curves,
                             .curve_n = 2,
                             .tensors = d->tensors,
                             .tensor_n = 2,
                             .check = check_position,
                             .user = d };
}

pfx_status pfx_tune_ckpt_save(pfx_tune_job *j, const char *path, const pfx_tune_result *r)
{
    tune_ckpt d;
    /* read only: the description serves saving and loading */
    describe(&d, j, (pfx_tune_result *)r, r->mass_before);
    return pfx_checkpoint_save(&d.c, path);
}

pfx_status pfx_tune_ckpt_load(pfx_tune_job *j, const char *path, pfx_tune_result *r)
{
    float *mass = malloc(j->L * j->H * sizeof(float));
    if (!mass)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "tune: host memory");
    tune_ckpt d;
    describe(&d, j, r, mass);
    const pfx_status st = pfx_checkpoint_load(&d.c, path);
    if (st != PFX_SUCCESS) {
        free(mass);
        return st;
    }
    j->pos.epoch = d.counts[EPOCH].value;
    j->pos.index = d.counts[INDEX].value;
    r->steps_done = (size_t)d.counts[DONE].value;
    free(r->mass_before);
    r->mass_before = mass;
    return PFX_SUCCESS;
}
