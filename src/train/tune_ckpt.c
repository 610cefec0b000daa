/* The checkpoint of the prefix-tuning job (tune_internal.h): the
 * optimizer's checkpoint (optimizer.h: every parameter's value, AdamW
 * moments and step, the step count) in one safetensors file replaced
 * atomically, so an interrupted save leaves the previous one whole, with the
 * job's own: tensors report.grad_norms [steps done] and report.mass_before
 * [L * H]; metadata the options (config), the data position, the steps
 * done, and the losses and evaluation loss before training as C99 hex
 * floats (exact; a loss may be inf or nan). Loading reads every field
 * strictly, each error naming the file and the field, before anything
 * changes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "job.h"
#include "tune_internal.h"

#define FORMAT "prefixcl-tune-checkpoint-1"

pfx_status pfx_tune_ckpt_save(pfx_tune_job *j, const char *path, const pfx_tune_result *r)
{
    char *losses = malloc(r->steps_done * 26 + 1);
    if (!losses)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "tune: host memory for the checkpoint");
    pfx_named_tensor extra[2];
    size_t k = 0;
    if (r->steps_done)
        extra[k++] = (pfx_named_tensor){ .name = "report.grad_norms",
                                         .host = r->grad_norms,
                                         .ndim = 1,
                                         .shape = { r->steps_done },
                                         .dtype = PFX_DTYPE_F32 };
    if (r->mass_before)
        extra[k++] = (pfx_named_tensor){ .name = "report.mass_before",
                                         .host = r->mass_before,
                                         .ndim = 1,
                                         .shape = { j->L * j->H },
                                         .dtype = PFX_DTYPE_F32 };
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
        { "format", FORMAT },      { "config", j->options },  { "data_epoch", vals[0] },
        { "data_index", vals[1] }, { "steps_done", vals[2] }, { "eval_before", vals[3] },
        { "losses", losses },
    };
    pfx_status st =
        pfx_optimizer_save_checkpoint(j->opt, path, extra, k, meta, sizeof(meta) / sizeof(meta[0]));
    free(losses);
    return st;
}

static pfx_status bad_field(pfx_runtime *rt, const char *path, const char *key, const char *why)
{
    return pfx_error(rt, PFX_ERROR_FORMAT, "tune: %s: the metadata '%s' %s", path, key, why);
}

static pfx_status meta_u64(pfx_runtime *rt, const pfx_safetensors *f, const char *path,
                           const char *key, unsigned long long *out)
{
    const char *v = pfx_safetensors_metadata_get(f, key);
    uint64_t x;
    if (!v || pfx_parse_uint(v, UINT64_MAX, &x) != PFX_SUCCESS)
        return bad_field(rt, path, key, v ? "is not a whole number" : "is missing");
    *out = x;
    return PFX_SUCCESS;
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

/* The curve so far into losses [done], eval_before. */
static pfx_status read_curve(pfx_runtime *rt, const pfx_safetensors *f, const char *path,
                             size_t done, double *losses, double *eval_before)
{
    const char *ls = pfx_safetensors_metadata_get(f, "losses"),
               *eb = pfx_safetensors_metadata_get(f, "eval_before");
    const char *end;
    if (!eb || !parse_loss(eb, eval_before, &end) || *end)
        return bad_field(rt, path, "eval_before", eb ? "is not a number" : "is missing");
    if (!ls)
        return bad_field(rt, path, "losses", "is missing");
    for (size_t i = 0; i < done; i++) {
        if (!parse_loss(ls, &losses[i], &end) || (*end != ',' && *end != 0) ||
            (*end == 0) != (i + 1 == done))
            return pfx_error(
                rt, PFX_ERROR_FORMAT,
                "tune: %s: the metadata 'losses' does not hold %zu numbers separated by commas",
                path, done);
        ls = *end ? end + 1 : end;
    }
    if (done == 0 && *ls)
        return bad_field(rt, path, "losses", "holds numbers, but 'steps_done' is 0");
    return PFX_SUCCESS;
}

/* Each step reads one batch: the data position must be where `done`
 * batches end. */
static pfx_status check_position(pfx_tune_job *j, const char *path, unsigned long long epoch,
                                 unsigned long long index, unsigned long long done, size_t examples)
{
    const size_t batch = j->cfg->batch, per_epoch = pfx_dataset_batches_per_epoch(j->train, batch);
    if (index >= examples)
        return pfx_error(
            j->rt, PFX_ERROR_FORMAT,
            "tune: %s: the metadata 'data_index' (%llu) is past the %zu training examples", path,
            index, examples);
    if (per_epoch == 0 || epoch != done / per_epoch || index != done % per_epoch * batch)
        return pfx_error(j->rt, PFX_ERROR_FORMAT,
                         "tune: %s: the metadata 'data_epoch' (%llu) and 'data_index' (%llu) are "
                         "not where %llu steps "
                         "of %zu examples a batch end (epoch %llu, index %llu of %zu examples)",
                         path, epoch, index, done, batch, per_epoch ? done / per_epoch : 0ULL,
                         per_epoch ? done % per_epoch * batch : 0ULL, examples);
    return PFX_SUCCESS;
}

pfx_status pfx_tune_ckpt_load(pfx_tune_job *j, const char *path, pfx_tune_result *r)
{
    pfx_runtime *rt = j->rt;
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_safetensors_open(path, &f);
    if (st != PFX_SUCCESS)
        return pfx_error(rt, st, "tune: resume: %s", pfx_last_error(NULL));
    const char *fmt = pfx_safetensors_metadata_get(f, "format");
    const char *cfg = pfx_safetensors_metadata_get(f, "config");
    unsigned long long epoch = 0, index = 0, done = 0;
    uint64_t opt_step = 0;
    const size_t LH = j->L * j->H;
    double eval_before = 0.0;
    float *mass = malloc(LH * sizeof(float));
    if (!mass) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "tune: host memory");
    } else if (!fmt || strcmp(fmt, FORMAT)) {
        st = pfx_error(rt, PFX_ERROR_FORMAT, "tune: %s is not a prefixcl tune checkpoint", path);
    } else if (!cfg || strcmp(cfg, j->options)) {
        char diff[1200];
        pfx_job_first_difference(j->options, cfg ? cfg : "", diff, sizeof(diff));
        st = pfx_error(
            rt, PFX_ERROR_INVALID_ARGUMENT,
            "tune: resume: %s was written with other options: %s; resume with the same ones", path,
            diff);
    } else if (!(st = meta_u64(rt, f, path, "data_epoch", &epoch)) &&
               !(st = meta_u64(rt, f, path, "data_index", &index)) &&
               !(st = meta_u64(rt, f, path, "steps_done", &done))) {
        if (done > j->steps)
            st = pfx_error(rt, PFX_ERROR_FORMAT,
                           "tune: %s has %llu steps done, more than the %zu planned", path, done,
                           j->steps);
        /* the optimizer's part: its step (at most the steps done: a skipped
         * step does not advance it), every parameter's tensors and steps */
        else if (!(st = pfx_optimizer_check_checkpoint(j->opt, f, path, done, "steps_done",
                                                       &opt_step)) &&
                 !(st = check_position(j, path, epoch, index, done, r->train_examples)) &&
                 !(st = read_curve(rt, f, path, (size_t)done, r->losses, &eval_before))) {
            if (done && pfx_safetensors_read_f32(f, "report.grad_norms", r->grad_norms,
                                                 (size_t)done) != PFX_SUCCESS)
                st = pfx_error(rt, PFX_ERROR_FORMAT, "tune: reading %s: %s", path,
                               pfx_last_error(NULL));
            else if (pfx_safetensors_read_f32(f, "report.mass_before", mass, LH) != PFX_SUCCESS)
                st = pfx_error(rt, PFX_ERROR_FORMAT, "tune: reading %s: %s", path,
                               pfx_last_error(NULL));
        }
    }
    /* every field checked: the parameters, their AdamW state and the step count */
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_restore_checkpoint(j->opt, f, path);
    pfx_safetensors_close(&f);
    if (st != PFX_SUCCESS) {
        free(mass);
        return st;
    }
    j->pos.epoch = epoch;
    j->pos.index = index;
    r->steps_done = (size_t)done;
    r->eval_before = eval_before;
    free(r->mass_before);
    r->mass_before = mass;
    return PFX_SUCCESS;
}
