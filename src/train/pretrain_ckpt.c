/* The checkpoint of the full-training job (pretrain_internal.h) as
 * checkpoint.h writes and reads it:
 *   metadata  format prefixcl-pretrain-checkpoint-1, the options
 *             ("options"), data_epoch, data_index, steps_done, the losses
 *             ("a,b,c,", finite) and the evaluation losses ("step:value,"
 *             for the steps evaluated, 0 before the first step);
 *   tensors   grad_norms [steps done]; gain_trace [steps done + 1, L * H]
 *             with a gain. */
#include "checkpoint.h"
#include "io_internal.h"
#include "pretrain_internal.h"

#define FORMAT "prefixcl-pretrain-checkpoint-1"

enum { EPOCH, INDEX, DONE, COUNTS };

/* The job's checkpoint, its values in r. */
typedef struct pretrain_ckpt {
    pfx_ckpt_count counts[COUNTS];
    pfx_ckpt_curve curves[2];
    pfx_ckpt_tensor tensors[2];
    pfx_checkpoint c;
} pretrain_ckpt;

static void describe(pretrain_ckpt *d, pfx_pretrain_job *j, pfx_pretrain_result *r)
{
    d->counts[EPOCH] = (pfx_ckpt_count){ "data_epoch", j->pos.epoch, UINT32_MAX, "2^32 - 1" };
    d->counts[INDEX] = (pfx_ckpt_count){ "data_index", j->pos.index, pfx_blocks_count(j->train),
                                         "the training blocks" };
    d->counts[DONE] =
        (pfx_ckpt_count){ "steps_done", r->steps_done, r->steps, "the steps planned" };
    d->curves[0] =
        (pfx_ckpt_curve){ "losses", r->losses, PFX_CKPT_STEPS, PFX_CKPT_LIST_ENDED, true };
    d->curves[1] = (pfx_ckpt_curve){ "eval_losses", r->eval_losses, PFX_CKPT_START_AND_STEPS,
                                     PFX_CKPT_AT_STEPS, true };
    d->tensors[0] = (pfx_ckpt_tensor){ "grad_norms", r->grad_norms, PFX_CKPT_STEPS, 1 };
    d->tensors[1] =
        (pfx_ckpt_tensor){ "gain_trace", r->gains, PFX_CKPT_START_AND_STEPS, j->L * j->H };
    d->c = (pfx_checkpoint){ .rt = j->rt,
                             .job = "pretrain",
                             .format = FORMAT,
                             .options_key = "options",
                             .options = j->options,
                             .opt = j->opt,
                             .counts = d->counts,
                             .count_n = COUNTS,
                             .steps = DONE,
                             .curves = d->curves,
                             .curve_n = 2,
                             .tensors = d->tensors,
                             .tensor_n = 2 };
}

pfx_status pfx_pretrain_ckpt_save(pfx_pretrain_job *j, const char *path,
                                  const pfx_pretrain_result *r)
{
    pretrain_ckpt d;
    /* read only: the description serves saving and loading */
    describe(&d, j, (pfx_pretrain_result *)r);
    return pfx_checkpoint_save(&d.c, path);
}

pfx_status pfx_pretrain_ckpt_load(pfx_pretrain_job *j, const char *path, pfx_pretrain_result *r)
{
    pretrain_ckpt d;
    describe(&d, j, r);
    const pfx_status st = pfx_checkpoint_load(&d.c, path);
    if (st == PFX_SUCCESS) {
        j->pos.epoch = d.counts[EPOCH].value;
        j->pos.index = d.counts[INDEX].value;
        r->steps_done = (size_t)d.counts[DONE].value;
        r->first_step = r->steps_done;
    }
    return st;
}
