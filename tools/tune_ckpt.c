/* The checkpoint of `prefixcl tune` (tune_job.h): the optimizer's
 * checkpoint (optimizer.h: every parameter's value, AdamW moments and step,
 * the step count) in one safetensors file replaced atomically, so an
 * interrupted save leaves the previous one whole, with the job's own:
 * tensors report.grad_norms [steps done] and report.mass_before [L * H];
 * metadata the options (config), the data position, the steps done, and the
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
    const size_t L = j->L, H = j->H;
    char *losses = malloc(r->steps_done * 26 + 1);
    if (!losses) {
        fprintf(stderr, "prefixcl tune: out of host memory\n");
        return 1;
    }
    pfx_named_tensor extra[2];
    size_t k = 0;
    if (r->steps_done)
        extra[k++] = (pfx_named_tensor){ .name = "report.grad_norms", .host = r->grad_norms, .ndim = 1,
                                         .shape = { r->steps_done }, .dtype = PFX_DTYPE_F32 };
    if (r->mass_before)
        extra[k++] = (pfx_named_tensor){ .name = "report.mass_before", .host = r->mass_before, .ndim = 1,
                                         .shape = { L * H }, .dtype = PFX_DTYPE_F32 };
    char *e = losses;
    *e = 0;
    for (size_t i = 0; i < r->steps_done; i++)
        e += sprintf(e, "%s%a", i ? "," : "", r->losses[i]);
    char vals[4][32];
    snprintf(vals[0], sizeof(vals[0]), "%llu", (unsigned long long)j->pos.epoch);
    snprintf(vals[1], sizeof(vals[0]), "%llu", (unsigned long long)j->pos.index);
    snprintf(vals[2], sizeof(vals[0]), "%zu", r->steps_done);
    snprintf(vals[3], sizeof(vals[0]), "%a", r->eval_before);
    const pfx_st_metadata meta[] = {
        { "format", FORMAT },       { "config", j->config_text }, { "data_epoch", vals[0] },
        { "data_index", vals[1] },  { "steps_done", vals[2] },    { "eval_before", vals[3] },
        { "losses", losses },
    };
    int rc = tune_fail(j, pfx_optimizer_save_checkpoint(j->opt, path, extra, k, meta, sizeof(meta) / sizeof(meta[0])),
                       "writing the checkpoint");
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
    const char *fmt = pfx_safetensors_metadata_get(f, "format");
    const char *cfg = pfx_safetensors_metadata_get(f, "config");
    unsigned long long epoch, index, done;
    if (!fmt || strcmp(fmt, FORMAT)) {
        fprintf(stderr, "prefixcl tune: %s is not a prefixcl tune checkpoint\n", path);
        goto out;
    }
    if (!cfg || strcmp(cfg, j->config_text)) {
        fprintf(stderr, "prefixcl tune: %s was written with other options; --resume needs the same ones.\n"
                        "  checkpoint: %s\n  now:        %s\n", path, cfg ? cfg : "(none)", j->config_text);
        goto out;
    }
    if (meta_u64(f, path, "data_epoch", &epoch) || meta_u64(f, path, "data_index", &index) ||
        meta_u64(f, path, "steps_done", &done))
        goto out;
    if (done > j->steps) {
        fprintf(stderr, "prefixcl tune: %s has %llu steps done, more than the %zu planned\n", path, done, j->steps);
        goto out;
    }
    /* the optimizer's part: its step (at most the steps done: a skipped step
     * does not advance it), every parameter's tensors and steps */
    uint64_t opt_step = 0;
    if (tune_fail(j, pfx_optimizer_check_checkpoint(j->opt, f, path, done, "steps_done", &opt_step),
                  "the checkpoint"))
        goto out;
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
    /* every field checked: the parameters, their AdamW state and the step count */
    if (tune_fail(j, pfx_optimizer_restore_checkpoint(j->opt, f, path), "loading the checkpoint"))
        goto out;
    j->pos.epoch = epoch;
    j->pos.index = index;
    r->steps_done = done;
    rc = 0;
out:
    pfx_safetensors_close(&f);
    return rc;
}
