/* The outputs of the prefix-tuning job (tune_internal.h), every file
 * replaced atomically: loss.csv; the PEFT prefix-tuning adapter
 * (adapter_config.json, adapter_model.safetensors) in the output folder
 * itself, so PeftModel.from_pretrained(base, OUT) loads it; gains.safetensors
 * beside it (prefixcl's own gains file, io.h, as pretraining writes it: PEFT
 * has no place for gains), removed after a run without gains. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gains_file.h"
#include "io_internal.h"
#include "internal.h"
#include "tune_internal.h"

static pfx_status oom(pfx_runtime *rt)
{
    return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "tune: host memory");
}

pfx_status pfx_tune_out_curve(pfx_tune_job *j, const pfx_tune_result *r)
{
    char *path = pfx_join_path(j->cfg->out_dir, "loss.csv");
    pfx_output_file *f = NULL;
    pfx_status st = path ? pfx_output_open(path, &f) : PFX_ERROR_OUT_OF_MEMORY;
    if (st == PFX_SUCCESS) {
        FILE *fp = pfx_output_stream(f);
        fprintf(fp, "step,loss,grad_norm,eval_loss,lr\n"); /* pretrain's columns */
        if (isfinite(r->eval_losses[0]))
            fprintf(fp, "0,,,%.9g,\n", r->eval_losses[0]);
        for (size_t i = 0; i < r->steps_done; i++) {
            fprintf(fp, "%zu,%.9g,%.9g,", i + 1, r->losses[i], (double)r->grad_norms[i]);
            if (isfinite(r->eval_losses[i + 1]))
                fprintf(fp, "%.9g", r->eval_losses[i + 1]);
            fputc(',', fp);
            if (isfinite(r->lrs[i]))
                fprintf(fp, "%.9g", (double)r->lrs[i]);
            fputc('\n', fp);
        }
        st = pfx_output_commit(&f);
    }
    if (st != PFX_SUCCESS)
        st = path ? pfx_error(j->rt, st, "tune: writing %s: %s", path, pfx_last_error(NULL))
                  : oom(j->rt);
    free(path);
    return st;
}

/* The gains at the last ramp, in the one gains file layout (gains_file.h). */
static pfx_status write_gains(pfx_tune_job *j, float ramp)
{
    char *path = pfx_join_path(j->cfg->out_dir, PFX_TUNE_GAINS);
    if (!path)
        return oom(j->rt);
    const pfx_gains_values v = { .gain_mode = j->cfg->gain_mode,
                                 .gain_ramp = ramp,
                                 .gains = j->gains_host };
    pfx_status st = pfx_gains_file_write(j->rt, path, j->L, j->H, j->shape.head_dim, &v);
    free(path);
    return st;
}

pfx_status pfx_tune_out_write(pfx_tune_job *j, const pfx_tune_result *r, float ramp)
{
    pfx_peft_save_params pp;
    pfx_peft_default_save_params(&pp);
    pp.task_type = "CAUSAL_LM";
    pp.base_model_name_or_path = r->base_model;
    pp.encoder_hidden_size = j->cfg->hidden;
    /* num_attention_heads 0: the kv heads, token_dim = Hkv x D (PEFT's view of GQA) */
    pfx_status st = pfx_peft_save_prefixes(j->rt, j->cfg->out_dir, j->pk, j->pv, j->L, &pp);
    if (st == PFX_SUCCESS && j->cfg->gain_mode != PFX_GAIN_OFF)
        st = write_gains(j, ramp);
    else if (st == PFX_SUCCESS) /* an earlier gain run's would be loaded with this adapter */
        st = pfx_remove_stale(j->rt, "tune", j->cfg->out_dir, PFX_TUNE_GAINS);
    if (st == PFX_SUCCESS)
        st = pfx_tune_out_curve(j, r);
    return st;
}
