/* The outputs of `prefixcl tune` (tune_out.h). */
#include "tune_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "cli.h"
#include "tune_plot.h"

static int path_in(char *buf, size_t cap, const char *dir, const char *name)
{
    return snprintf(buf, cap, "%s/%s", dir, name) >= (int)cap;
}

/* A picture's chart.h code: 0 when drawn or when the build has no cairo
 * (r->pictures false), else 1 after printing why. */
static int drawn(tune_result *r, const char *path, int code)
{
    if (code == CHART_UNAVAILABLE) {
        r->pictures = false;
        return 0;
    }
    if (code == CHART_OK) {
        r->pictures = true;
        return 0;
    }
    fprintf(stderr, "prefixcl tune: cannot draw %s: %s%s%s\n", path, chart_strerror(code),
            code == CHART_ERR_IO ? ": " : "", code == CHART_ERR_IO ? pfx_last_error(NULL) : "");
    return 1;
}

int tune_out_curve(const char *dir, tune_result *r)
{
    char path[4096];
    if (path_in(path, sizeof(path), dir, "loss.csv"))
        return 1;
    pfx_output_file *f = NULL;
    pfx_status st = pfx_output_open(path, &f);
    if (st == PFX_SUCCESS) {
        FILE *fp = pfx_output_stream(f);
        fprintf(fp, "step,loss,grad_norm\n");
        for (size_t i = 0; i < r->steps_done; i++)
            fprintf(fp, "%zu,%.9g,%.9g\n", i + 1, r->losses[i], (double)r->grad_norms[i]);
        st = pfx_output_commit(&f);
    }
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tune: writing %s: %s\n", path, pfx_last_error(NULL));
        return 1;
    }
    if (r->steps_done && !path_in(path, sizeof(path), dir, "loss.png") &&
        drawn(r, path, tune_plot_loss(path, r)))
        return 1;
    return 0;
}

static int write_gains(tune_job *j, const char *path, float ramp)
{
    const size_t L = j->L, H = j->H;
    pfx_named_tensor *items = calloc(L, sizeof(*items));
    char(*names)[48] = calloc(L, sizeof(*names));
    if (!items || !names) {
        free(items);
        free(names);
        return 1;
    }
    for (size_t l = 0; l < L; l++) {
        snprintf(names[l], sizeof(names[l]), "layers.%zu.gain", l);
        items[l] = (pfx_named_tensor){ .name = names[l], .host = j->gains_host + l * H, .ndim = 1,
                                       .shape = { H }, .dtype = PFX_DTYPE_F32 };
    }
    char layers[32], heads[32], ramp_s[32];
    snprintf(layers, sizeof(layers), "%zu", L);
    snprintf(heads, sizeof(heads), "%zu", H);
    snprintf(ramp_s, sizeof(ramp_s), "%.9g", (double)ramp);
    const char *mode = j->cfg->gain_mode == PFX_GAIN_TANH ? "tanh" : "linear";
    pfx_st_metadata meta[] = {
        { "format", "prefixcl-gains-1" }, { "gain_mode", mode }, { "gain_ramp", ramp_s },
        { "num_layers", layers },         { "num_attention_heads", heads },
        { "note", "per-head attention-logit gains (1 + r g or 1 + tanh(r g)); PEFT does not read this file" },
    };
    pfx_status st = pfx_safetensors_save(NULL, path, items, L, meta, sizeof(meta) / sizeof(meta[0]));
    free(items);
    free(names);
    if (st != PFX_SUCCESS)
        fprintf(stderr, "prefixcl tune: writing %s: %s\n", path, pfx_last_error(NULL));
    return st != PFX_SUCCESS;
}

int tune_out_check(const tune_config *c)
{
    const char *names[10] = { "adapter_config.json", "adapter_model.safetensors", "loss.csv", "loss.png",
                              "attention.png", TUNE_CHECKPOINT };
    size_t n = 6;
    if (c->gain_mode != PFX_GAIN_OFF) {
        names[n++] = TUNE_GAINS;
        names[n++] = "gains.png";
    }
    if (!c->model_dir) { /* the demonstration model's config.json (tune_loop.c) */
        names[n++] = "demo-model/";
        names[n++] = "demo-model/config.json";
    }
    return !cli_check_output_dir("tune", "--out", c->out_dir, names, n);
}

int tune_out_write(tune_job *j, tune_result *r, float ramp)
{
    const char *dir = j->cfg->out_dir;
    char path[4096];
    pfx_peft_save_params pp;
    pfx_peft_default_save_params(&pp);
    pp.task_type = "CAUSAL_LM";
    pp.base_model_name_or_path = r->base_model;
    pp.encoder_hidden_size = j->cfg->hidden;
    /* num_attention_heads 0: the kv heads, token_dim = Hkv x D (PEFT's view of GQA) */
    if (tune_fail(j, pfx_peft_save_prefixes(j->rt, dir, j->pk, j->pv, j->L, &pp), "writing the adapter"))
        return 1;
    if (j->cfg->gain_mode != PFX_GAIN_OFF &&
        (path_in(path, sizeof(path), dir, TUNE_GAINS) || write_gains(j, path, ramp)))
        return 1;
    if (tune_out_curve(dir, r))
        return 1;
    if (r->mass_before && r->mass_after && !path_in(path, sizeof(path), dir, "attention.png") &&
        drawn(r, path, tune_plot_prefix_mass(path, r->mass_before, r->mass_after, j->L, j->H)))
        return 1;
    if (r->gains && !path_in(path, sizeof(path), dir, "gains.png") &&
        drawn(r, path, tune_plot_gains(path, r->gains, j->L, j->H)))
        return 1;
    return 0;
}
