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

enum { EPOCH, INDEX, DONE };

/* The job's checkpoint, its values in r. */
static void describe(pfx_checkpoint *c, pfx_pretrain_job *j, pfx_pretrain_result *r)
{
    *c = (pfx_checkpoint){
        .rt = j->rt,
        .job = "pretrain",
        .format = FORMAT,
        .options_key = "options",
        .options = j->options,
        .opt = j->opt,
        .counts = { [EPOCH] = { "data_epoch", j->pos.epoch, UINT32_MAX, "2^32 - 1" },
                    [INDEX] = { "data_index", j->pos.index, pfx_blocks_count(j->train),
                                "the training blocks" },
                    [DONE] = { "steps_done", r->steps_done, r->steps, "the steps planned" } },
        .count_n = 3,
        .steps = DONE,
        .curves = { { "losses", r->losses, PFX_CKPT_STEPS, PFX_CKPT_LIST_ENDED, true },
                    { "eval_losses", r->eval_losses, PFX_CKPT_START_AND_STEPS, PFX_CKPT_AT_STEPS,
                      true } },
        .curve_n = 2,
        .tensors = { { "grad_norms", r->grad_norms, PFX_CKPT_STEPS, 1, false },
                     { "gain_trace", r->gains, PFX_CKPT_START_AND_STEPS, j->L * j->H, false },
                     /* absent from the files of earlier versions: NaN */
                     { "lrs", r->lrs, PFX_CKPT_STEPS, 1, true } },
        .tensor_n = 3,
    };
}

pfx_status pfx_pretrain_ckpt_save(pfx_pretrain_job *j, const char *path,
                                  const pfx_pretrain_result *r)
{
    pfx_checkpoint c;
    /* read only: the description serves saving and loading */
    describe(&c, j, (pfx_pretrain_result *)r);
    return pfx_checkpoint_save(&c, path);
}

pfx_status pfx_pretrain_ckpt_load(pfx_pretrain_job *j, const char *path, pfx_pretrain_result *r)
{
    pfx_checkpoint c;
    describe(&c, j, r);
    const pfx_status st = pfx_checkpoint_load(&c, path);
    if (st == PFX_SUCCESS) {
        j->pos.epoch = c.counts[EPOCH].value;
        j->pos.index = c.counts[INDEX].value;
        r->steps_done = (size_t)c.counts[DONE].value;
        r->first_step = r->steps_done;
    }
    return st;
}
