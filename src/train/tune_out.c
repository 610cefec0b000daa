/* The outputs of the prefix-tuning job (tune_internal.h), every file
 * replaced atomically: loss.csv; the PEFT prefix-tuning adapter
 * (adapter_config.json, adapter_model.safetensors) in the output folder
 * itself, so PeftModel.from_pretrained(base, OUT) loads it; gains.safetensors
 * beside it (prefixcl's own: PEFT has no place for gains). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        fprintf(fp, "step,loss,grad_norm\n");
        for (size_t i = 0; i < r->steps_done; i++)
            fprintf(fp, "%zu,%.9g,%.9g\n", i + 1, r->losses[i], (double)r->grad_norms[i]);
        st = pfx_output_commit(&f);
    }
    if (st != PFX_SUCCESS)
        st = path ? pfx_error(j->rt, st, "tune: writing %s: %s", path, pfx_last_error(NULL))
                  : oom(j->rt);
    free(path);
    return st;
}

static pfx_status write_gains(pfx_tune_job *j, float ramp)
{
    const size_t L = j->L, H = j->H;
    char *path = pfx_join_path(j->cfg->out_dir, PFX_TUNE_GAINS);
    pfx_named_tensor *items = calloc(L, sizeof(*items));
    char(*names)[48] = calloc(L, sizeof(*names));
    pfx_status st = path && items && names ? PFX_SUCCESS : oom(j->rt);
    for (size_t l = 0; st == PFX_SUCCESS && l < L; l++) {
        snprintf(names[l], sizeof(names[l]), "layers.%zu.gain", l);
        items[l] = (pfx_named_tensor){ .name = names[l],
                                       .host = j->gains_host + l * H,
                                       .ndim = 1,
                                       .shape = { H },
                                       .dtype = PFX_DTYPE_F32 };
    }
    char layers[32], heads[32], ramp_s[32];
    snprintf(layers, sizeof(layers), "%zu", L);
    snprintf(heads, sizeof(heads), "%zu", H);
    snprintf(ramp_s, sizeof(ramp_s), "%.9g", (double)ramp);
    const char *mode = j->cfg->gain_mode == PFX_GAIN_TANH ? "tanh" : "linear";
    const pfx_st_metadata meta[] = {
        { "format", "prefixcl-gains-1" },
        { "gain_mode", mode },
        { "gain_ramp", ramp_s },
        { "num_layers", layers },
        { "num_attention_heads", heads },
        { "note", "per-head attention-logit gains (1 + r g or 1 + tanh(r g)); PEFT does not read "
                  "this file" },
    };
    if (st == PFX_SUCCESS)
        st = pfx_safetensors_save(j->rt, path, items, L, meta, sizeof(meta) / sizeof(meta[0]));
    free(path);
    free(items);
    free(names);
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
    if (st == PFX_SUCCESS)
        st = pfx_tune_out_curve(j, r);
    return st;
}
