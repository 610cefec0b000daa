/* The full-training job's outputs: checkpoint, loss curve, model, gains
 * (removed after a run without them: an earlier run's in the folder would
 * pass for the new model's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gains_file.h"
#include "io_internal.h"
#include "job.h"
#include "pretrain_internal.h"

/* ---- outputs ---- */

static pfx_status write_gains(pfx_pretrain_job *j)
{
    char *path = pfx_join_path(j->cfg->out_dir, PFX_GAINS_FILE);
    if (!path)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    pfx_status st = pfx_pretrain_read_gains(j);
    const pfx_gains_values v = { .gain_mode = j->gain ? j->cfg->gain_mode : PFX_GAIN_OFF,
                                 .structured = j->dim != NULL,
                                 .gain_ramp = pfx_optimizer_gain_ramp(j->opt),
                                 .gains = j->gains_host,
                                 .dim_gains = j->dim_host };
    if (st == PFX_SUCCESS)
        st = pfx_gains_file_write(j->rt, path, j->L, j->H, j->D, &v);
    free(path);
    return st;
}

static pfx_status write_curve(pfx_pretrain_job *j, const pfx_pretrain_result *r)
{
    char *path = pfx_join_path(j->cfg->out_dir, "loss.csv");
    pfx_output_file *f = NULL;
    pfx_status st = path ? pfx_output_open(path, &f) : PFX_ERROR_OUT_OF_MEMORY;
    free(path);
    if (st != PFX_SUCCESS)
        return pfx_error(j->rt, st, "pretrain: loss.csv: %s", pfx_last_error(NULL));
    FILE *out = pfx_output_stream(f);
    fprintf(out, "step,loss,grad_norm,eval_loss,lr\n");
    if (isfinite(r->eval_losses[0]))
        fprintf(out, "0,,,%.9g,\n", r->eval_losses[0]);
    for (size_t s = 0; s < r->steps_done; s++) {
        fprintf(out, "%zu,%.9g,%.9g,", s + 1, r->losses[s], (double)r->grad_norms[s]);
        if (isfinite(r->eval_losses[s + 1]))
            fprintf(out, "%.9g", r->eval_losses[s + 1]);
        fputc(',', out);
        if (isfinite(r->lrs[s]))
            fprintf(out, "%.9g", (double)r->lrs[s]);
        fprintf(out, "\n");
    }
    st = pfx_output_commit(&f);
    return st == PFX_SUCCESS ? st
                             : pfx_error(j->rt, st, "pretrain: loss.csv: %s", pfx_last_error(NULL));
}

pfx_status pfx_pretrain_write_outputs(pfx_pretrain_job *j, const pfx_pretrain_result *r, bool model)
{
    char *ckpt = pfx_join_path(j->cfg->out_dir, PFX_PRETRAIN_CHECKPOINT);
    pfx_status st = ckpt ? pfx_pretrain_ckpt_save(j, ckpt, r)
                         : pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    free(ckpt);
    if (st == PFX_SUCCESS)
        st = write_curve(j, r);
    if (st == PFX_SUCCESS && model)
        st = pfx_model_save(j->model, j->cfg->out_dir, NULL);
    if (st == PFX_SUCCESS && model)
        st = pfx_pretrain_write_tokenizer(j);
    if (st == PFX_SUCCESS && model && j->any_gain)
        st = write_gains(j);
    else if (st == PFX_SUCCESS && model) /* an earlier gain run's would pass for this model's */
        st = pfx_remove_stale(j->rt, "pretrain", j->cfg->out_dir, PFX_GAINS_FILE);
    return st;
}
