/* The checkpoint of `prefixcl tune` (tune_job.h): one safetensors file,
 * replaced atomically, so an interrupted save leaves the previous one whole.
 * Tensors: per optimizer parameter NAME its value NAME, its AdamW moments
 * NAME.exp_avg and NAME.exp_avg_sq; report.grad_norms [steps done] and
 * report.mass_before [L * H]. Metadata: the options (config), the optimizer
 * step count, each NAME.step, the data position, the steps done, and the
 * losses and evaluation loss before training as C99 hex floats (exact). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune_job.h"

#define FORMAT "prefixcl-tune-checkpoint-1"

static int fail_io(const char *what, const char *path)
{
    fprintf(stderr, "prefixcl tune: %s %s: %s\n", what, path, pfx_last_error(NULL));
    return 1;
}

int tune_ckpt_save(tune_job *j, const char *path, const tune_result *r)
{
    const size_t n = j->param_count, L = j->L, H = j->H;
    const size_t items_n = 3 * n + 2, meta_n = n + 8;
    pfx_named_tensor *items = calloc(items_n, sizeof(*items));
    pfx_st_metadata *meta = calloc(meta_n, sizeof(*meta));
    char(*names)[160] = calloc(4 * n, sizeof(*names)); /* NAME, .exp_avg, .exp_avg_sq, .step */
    char(*vals)[32] = calloc(n + 6, sizeof(*vals));
    float **moments = calloc(2 * n, sizeof(*moments));
    char *losses = malloc(r->steps_done * 26 + 1);
    int rc = 1;
    if (!items || !meta || !names || !vals || !moments || !losses) {
        fprintf(stderr, "prefixcl tune: out of host memory\n");
        goto out;
    }
    size_t k = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        pfx_optimizer_param_info info;
        pfx_status st = pfx_optimizer_get_param(j->opt, i, &info);
        uint64_t step = 0;
        if (st == PFX_SUCCESS && (!(moments[2 * i] = malloc(info.numel * sizeof(float))) ||
                                  !(moments[2 * i + 1] = malloc(info.numel * sizeof(float)))))
            st = PFX_ERROR_OUT_OF_MEMORY;
        if (st == PFX_SUCCESS)
            st = pfx_optimizer_export_param(j->opt, i, &step, moments[2 * i], moments[2 * i + 1]);
        if (tune_fail(j, st, "exporting the optimizer state"))
            goto out;
        const pfx_tensor *p = j->params[i];
        pfx_named_tensor host = { .ndim = pfx_tensor_ndim(p), .dtype = PFX_DTYPE_F32 };
        for (unsigned d = 0; d < host.ndim; d++)
            host.shape[d] = pfx_tensor_dim(p, d);
        snprintf(names[3 * i], sizeof(names[0]), "%s", info.name);
        snprintf(names[3 * i + 1], sizeof(names[0]), "%s.exp_avg", info.name);
        snprintf(names[3 * i + 2], sizeof(names[0]), "%s.exp_avg_sq", info.name);
        items[k++] = (pfx_named_tensor){ .name = names[3 * i], .tensor = p };
        host.name = names[3 * i + 1];
        host.host = moments[2 * i];
        items[k++] = host;
        host.name = names[3 * i + 2];
        host.host = moments[2 * i + 1];
        items[k++] = host;
        snprintf(names[3 * n + i], sizeof(names[0]), "%s.step", info.name);
        snprintf(vals[i], sizeof(vals[0]), "%llu", (unsigned long long)step);
        meta[m++] = (pfx_st_metadata){ names[3 * n + i], vals[i] };
    }
    if (r->steps_done)
        items[k++] = (pfx_named_tensor){ .name = "report.grad_norms", .host = r->grad_norms, .ndim = 1,
                                         .shape = { r->steps_done }, .dtype = PFX_DTYPE_F32 };
    if (r->mass_before)
        items[k++] = (pfx_named_tensor){ .name = "report.mass_before", .host = r->mass_before, .ndim = 1,
                                         .shape = { L * H }, .dtype = PFX_DTYPE_F32 };
    char *e = losses;
    *e = 0;
    for (size_t i = 0; i < r->steps_done; i++)
        e += sprintf(e, "%s%a", i ? "," : "", r->losses[i]);
    snprintf(vals[n], sizeof(vals[0]), "%llu", (unsigned long long)pfx_optimizer_step_count(j->opt));
    snprintf(vals[n + 1], sizeof(vals[0]), "%llu", (unsigned long long)j->pos.epoch);
    snprintf(vals[n + 2], sizeof(vals[0]), "%llu", (unsigned long long)j->pos.index);
    snprintf(vals[n + 3], sizeof(vals[0]), "%zu", r->steps_done);
    snprintf(vals[n + 4], sizeof(vals[0]), "%a", r->eval_before);
    meta[m++] = (pfx_st_metadata){ "format", FORMAT };
    meta[m++] = (pfx_st_metadata){ "config", j->config_text };
    meta[m++] = (pfx_st_metadata){ "optimizer_step", vals[n] };
    meta[m++] = (pfx_st_metadata){ "data_epoch", vals[n + 1] };
    meta[m++] = (pfx_st_metadata){ "data_index", vals[n + 2] };
    meta[m++] = (pfx_st_metadata){ "steps_done", vals[n + 3] };
    meta[m++] = (pfx_st_metadata){ "eval_before", vals[n + 4] };
    meta[m++] = (pfx_st_metadata){ "losses", losses };
    rc = tune_fail(j, pfx_safetensors_save(j->rt, path, items, k, meta, m), "writing the checkpoint");
out:
    for (size_t i = 0; moments && i < 2 * n; i++)
        free(moments[i]);
    free(moments);
    free(items);
    free(meta);
    free(names);
    free(vals);
    free(losses);
    return rc;
}

/* The checkpoint is an input file like any other: every field read
 * strictly, and each error names the file and the field. */
static int bad_field(const char *path, const char *key, const char *why)
{
    fprintf(stderr, "prefixcl tune: %s: the metadata '%s' %s\n", path, key, why);
    return 1;
}

static int meta_u64(const pfx_safetensors *f, const char *path, const char *key, unsigned long long *out)
{
    const char *v = pfx_safetensors_metadata_get(f, key);
    uint64_t x;
    if (!v || pfx_parse_uint(v, UINT64_MAX, &x) != PFX_SUCCESS)
        return bad_field(path, key, v ? "is not a whole number" : "is missing");
    *out = x;
    return 0;
}

/* One number as "%a" writes it (a loss may be inf or nan): the whole text,
 * no leading space. End of the number in *end. */
static bool parse_loss(const char *s, double *out, const char **end)
{
    char *e = NULL;
    if (!*s || strchr(" \t\n\v\f\r", *s))
        return false;
    *out = strtod(s, &e);
    *end = e;
    return e != s;
}

int tune_ckpt_load(tune_job *j, const char *path, tune_result *r)
{
    pfx_safetensors *f = NULL;
    if (pfx_safetensors_open(path, &f) != PFX_SUCCESS)
        return fail_io("reading the checkpoint", path);
    int rc = 1;
    float *mv = NULL;
    const char *fmt = pfx_safetensors_metadata_get(f, "format");
    const char *cfg = pfx_safetensors_metadata_get(f, "config");
    unsigned long long opt_step, epoch, index, done;
    if (!fmt || strcmp(fmt, FORMAT)) {
        fprintf(stderr, "prefixcl tune: %s is not a prefixcl tune checkpoint\n", path);
        goto out;
    }
    if (!cfg || strcmp(cfg, j->config_text)) {
        fprintf(stderr, "prefixcl tune: %s was written with other options; --resume needs the same ones.\n"
                        "  checkpoint: %s\n  now:        %s\n", path, cfg ? cfg : "(none)", j->config_text);
        goto out;
    }
    if (meta_u64(f, path, "optimizer_step", &opt_step) || meta_u64(f, path, "data_epoch", &epoch) ||
        meta_u64(f, path, "data_index", &index) || meta_u64(f, path, "steps_done", &done))
        goto out;
    if (done > j->steps) {
        fprintf(stderr, "prefixcl tune: %s has %llu steps done, more than the %zu planned\n", path, done, j->steps);
        goto out;
    }
    /* a step advances the optimizer unless it was skipped (NaN/Inf gradients) */
    if (opt_step > done) {
        fprintf(stderr, "prefixcl tune: %s: the metadata 'optimizer_step' (%llu) is more than 'steps_done' (%llu)\n",
                path, opt_step, done);
        goto out;
    }
    /* each step reads one batch: the position `done` batches reach */
    const size_t examples = r->train_examples, per_epoch = pfx_dataset_batches_per_epoch(j->train, j->cfg->batch);
    if (index >= examples) {
        fprintf(stderr, "prefixcl tune: %s: the metadata 'data_index' (%llu) is past the %zu training examples\n",
                path, index, examples);
        goto out;
    }
    if (per_epoch == 0 || epoch != done / per_epoch || index != done % per_epoch * j->cfg->batch) {
        fprintf(stderr, "prefixcl tune: %s: the metadata 'data_epoch' (%llu) and 'data_index' (%llu) are not where "
                        "%llu steps of %zu examples a batch end (epoch %llu, index %llu of %zu examples)\n",
                path, epoch, index, done, j->cfg->batch, per_epoch ? done / per_epoch : 0ULL,
                per_epoch ? done % per_epoch * j->cfg->batch : 0ULL, examples);
        goto out;
    }
    /* the loss curve so far */
    const char *ls = pfx_safetensors_metadata_get(f, "losses"), *eb = pfx_safetensors_metadata_get(f, "eval_before");
    const char *end;
    if (!eb || !parse_loss(eb, &r->eval_before, &end) || *end) {
        bad_field(path, "eval_before", eb ? "is not a number" : "is missing");
        goto out;
    }
    if (!ls) {
        bad_field(path, "losses", "is missing");
        goto out;
    }
    for (size_t i = 0; i < done; i++) {
        if (!parse_loss(ls, &r->losses[i], &end) || (*end != ',' && *end != 0) || (*end == 0) != (i + 1 == done)) {
            fprintf(stderr, "prefixcl tune: %s: the metadata 'losses' does not hold %llu numbers separated by "
                            "commas\n", path, done);
            goto out;
        }
        ls = *end ? end + 1 : end;
    }
    if (done == 0 && *ls) {
        bad_field(path, "losses", "holds numbers, but 'steps_done' is 0");
        goto out;
    }
    if (done && pfx_safetensors_read_f32(f, "report.grad_norms", r->grad_norms, done) != PFX_SUCCESS) {
        fail_io("reading", path);
        goto out;
    }
    r->mass_before = malloc(j->L * j->H * sizeof(float));
    if (!r->mass_before || pfx_safetensors_read_f32(f, "report.mass_before", r->mass_before, j->L * j->H)) {
        fail_io("reading", path);
        goto out;
    }
    /* parameters and their AdamW state */
    for (size_t i = 0; i < j->param_count; i++) {
        pfx_optimizer_param_info info;
        if (tune_fail(j, pfx_optimizer_get_param(j->opt, i, &info), "the optimizer"))
            goto out;
        free(mv);
        mv = malloc(2 * info.numel * sizeof(float));
        char key[192];
        unsigned long long step;
        snprintf(key, sizeof(key), "%s.step", info.name);
        if (!mv || meta_u64(f, path, key, &step))
            goto out;
        if (step != opt_step) { /* every parameter advances with the optimizer */
            fprintf(stderr, "prefixcl tune: %s: the metadata '%s' (%llu) differs from 'optimizer_step' (%llu)\n",
                    path, key, step, opt_step);
            goto out;
        }
        if (tune_fail(j, pfx_safetensors_load_tensor(j->rt, f, info.name, j->params[i]), "loading the checkpoint"))
            goto out;
        snprintf(key, sizeof(key), "%s.exp_avg", info.name);
        if (pfx_safetensors_read_f32(f, key, mv, info.numel) != PFX_SUCCESS) {
            fail_io("reading", path);
            goto out;
        }
        snprintf(key, sizeof(key), "%s.exp_avg_sq", info.name);
        if (pfx_safetensors_read_f32(f, key, mv + info.numel, info.numel) != PFX_SUCCESS) {
            fail_io("reading", path);
            goto out;
        }
        if (tune_fail(j, pfx_optimizer_import_param(j->opt, i, step, mv, mv + info.numel), "the optimizer state"))
            goto out;
    }
    if (tune_fail(j, pfx_optimizer_set_step_count(j->opt, opt_step), "the optimizer step"))
        goto out;
    j->pos.epoch = epoch;
    j->pos.index = index;
    r->steps_done = done;
    rc = 0;
out:
    free(mv);
    pfx_safetensors_close(&f);
    return rc;
}
