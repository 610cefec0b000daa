/* AdamW state as a safetensors file: per parameter "<name>.exp_avg" and
 * "<name>.exp_avg_sq" tensors and a "<name>.step" metadata count, plus the
 * optimizer's "step" and "format". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer_internal.h"

#define STATE_FORMAT "prefixcl-adamw-1"

static pfx_status parse_u64(pfx_runtime *rt, const char *path, const char *key, const char *text,
                            uint64_t *out)
{
    if (!text)
        return pfx_error(rt, PFX_ERROR_FORMAT, "optimizer_load '%s': metadata '%s' is missing",
                         path, key);
    if (pfx_parse_uint(text, PFX_OPTIMIZER_MAX_STEP, out) != PFX_SUCCESS)
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "optimizer_load '%s': metadata '%s' ('%.64s') is not a count "
                         "(decimal digits, at most %llu)",
                         path, key, text, (unsigned long long)PFX_OPTIMIZER_MAX_STEP);
    return PFX_SUCCESS;
}

pfx_status pfx_optimizer_save(pfx_optimizer *opt, const char *path)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_save: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (!path)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_save: path is NULL");
    if (opt->sharded) /* a state file holds every moment: a checkpoint holds a shard */
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_save: the state is sharded over %u processes (write a "
                         "checkpoint per process: pfx_optimizer_save_checkpoint)",
                         opt->shard_ranks);
    size_t n = opt->count;
    pfx_named_tensor *items = calloc(2 * n + 1, sizeof(*items));
    pfx_st_metadata *meta = calloc(n + 2, sizeof(*meta));
    char *names = calloc(n + 1, 3 * (OPT_NAME_MAX + 32)); /* exp_avg, exp_avg_sq, step key */
    char *values = calloc(n + 1, 24);
    if (!items || !meta || !names || !values) {
        free(items);
        free(meta);
        free(names);
        free(values);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "optimizer_save: host allocation failed");
    }
    meta[0] = (pfx_st_metadata){ "format", STATE_FORMAT };
    snprintf(values, 24, "%llu", (unsigned long long)opt->step);
    meta[1] = (pfx_st_metadata){ "step", values };
    for (size_t i = 0; i < n; i++) {
        const opt_param *it = &opt->items[i];
        char *nm = names + i * 3 * (OPT_NAME_MAX + 32), *nv = nm + OPT_NAME_MAX + 32,
             *ns = nv + OPT_NAME_MAX + 32;
        snprintf(nm, OPT_NAME_MAX + 32, "%s.exp_avg", it->name);
        snprintf(nv, OPT_NAME_MAX + 32, "%s.exp_avg_sq", it->name);
        snprintf(ns, OPT_NAME_MAX + 32, "%s.step", it->name);
        char *val = values + (i + 1) * 24;
        snprintf(val, 24, "%llu", (unsigned long long)it->step);
        items[2 * i] = (pfx_named_tensor){ .name = nm, .tensor = it->m };
        items[2 * i + 1] = (pfx_named_tensor){ .name = nv, .tensor = it->v };
        meta[i + 2] = (pfx_st_metadata){ ns, val };
    }
    pfx_status st = pfx_safetensors_save(rt, path, items, 2 * n, meta, n + 2);
    free(items);
    free(meta);
    free(names);
    free(values);
    return st;
}

/* Host copy of one moment tensor of the file, checked against the parameter. */
static pfx_status load_moment(pfx_runtime *rt, const char *path, const pfx_safetensors *f,
                              const opt_param *it, const char *suffix, float *dst)
{
    char key[OPT_NAME_MAX + 32];
    snprintf(key, sizeof(key), "%s.%s", it->name, suffix);
    long idx = pfx_safetensors_find(f, key);
    if (idx < 0)
        return pfx_error(rt, PFX_ERROR_FORMAT, "optimizer_load '%s': tensor '%s' is missing", path,
                         key);
    pfx_st_info info;
    pfx_status st = pfx_safetensors_info(f, (size_t)idx, &info);
    if (st != PFX_SUCCESS)
        return st;
    bool same = info.ndim == it->param->ndim;
    for (unsigned d = 0; same && d < info.ndim; d++)
        same = info.shape[d] == it->param->shape[d];
    if (!same)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "optimizer_load '%s': tensor '%s' has another shape than the parameter",
                         path, key);
    st = pfx_safetensors_read_f32(f, key, dst, it->param->numel);
    if (st != PFX_SUCCESS)
        return pfx_error(rt, st, "optimizer_load '%s': tensor '%s': %s", path, key,
                         pfx_last_error(NULL));
    return PFX_SUCCESS;
}

pfx_status pfx_optimizer_load(pfx_optimizer *opt, const char *path)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_load: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (!path)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_load: path is NULL");
    if (opt->sharded) /* a state file holds every moment: a checkpoint holds a shard */
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_load: the state is sharded over %u processes (each "
                         "one's part is in its checkpoint: pfx_optimizer_restore_checkpoint)",
                         opt->shard_ranks);
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_safetensors_open(path, &f);
    if (st != PFX_SUCCESS)
        return pfx_error(rt, st, "%s", pfx_last_error(NULL));
    const char *format = pfx_safetensors_metadata_get(f, "format");
    if (!format || strcmp(format, STATE_FORMAT) != 0) {
        pfx_safetensors_close(&f);
        return pfx_error(rt, PFX_ERROR_FORMAT, "optimizer_load '%s': metadata 'format' is not '%s'",
                         path, STATE_FORMAT);
    }
    if (pfx_safetensors_count(f) != 2 * opt->count) {
        size_t have = pfx_safetensors_count(f);
        pfx_safetensors_close(&f);
        return pfx_error(
            rt, PFX_ERROR_FORMAT,
            "optimizer_load '%s': %zu tensors, the optimizer has %zu parameters (2 each)", path,
            have, opt->count);
    }
    /* Everything is read and checked before anything changes. */
    uint64_t step = 0;
    uint64_t *steps = calloc(opt->count + 1, sizeof(*steps));
    float **host = calloc(2 * opt->count + 1, sizeof(*host));
    if (!steps || !host)
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "optimizer_load: host allocation failed");
    if (st == PFX_SUCCESS)
        st = parse_u64(rt, path, "step", pfx_safetensors_metadata_get(f, "step"), &step);
    for (size_t i = 0; st == PFX_SUCCESS && i < opt->count; i++) {
        const opt_param *it = &opt->items[i];
        char key[OPT_NAME_MAX + 32];
        snprintf(key, sizeof(key), "%s.step", it->name);
        st = parse_u64(rt, path, key, pfx_safetensors_metadata_get(f, key), &steps[i]);
        for (unsigned k = 0; st == PFX_SUCCESS && k < 2; k++) {
            host[2 * i + k] = malloc(it->param->numel * sizeof(float));
            if (!host[2 * i + k])
                st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY,
                               "optimizer_load: host allocation failed");
            else
                st = load_moment(rt, path, f, it, k ? "exp_avg_sq" : "exp_avg", host[2 * i + k]);
        }
    }
    /* Values are checked by import_param before the first write of each parameter. */
    for (size_t i = 0; st == PFX_SUCCESS && i < opt->count; i++) {
        const opt_param *it = &opt->items[i];
        for (size_t j = 0; j < it->param->numel && st == PFX_SUCCESS; j++)
            if (!isfinite(host[2 * i][j]) || !isfinite(host[2 * i + 1][j]) ||
                host[2 * i + 1][j] < 0.0f)
                st = pfx_error(
                    rt, PFX_ERROR_NOT_FINITE,
                    "optimizer_load '%s': '%s' has a non-finite moment or negative exp_avg_sq "
                    "at %zu",
                    path, it->name, j);
    }
    for (size_t i = 0; st == PFX_SUCCESS && i < opt->count; i++)
        st = pfx_optimizer_import_param(opt, i, steps[i], host[2 * i], host[2 * i + 1]);
    if (st == PFX_SUCCESS)
        opt->step = step;
    if (host)
        for (size_t i = 0; i < 2 * opt->count; i++)
            free(host[i]);
    free(host);
    free(steps);
    pfx_safetensors_close(&f);
    return st;
}
