/* A training checkpoint (optimizer.h): the optimizer's state with the
 * parameters' values, and the job's own tensors and metadata, in one
 * safetensors file; the training jobs (tune, pretrain) read and write theirs
 * through it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer_internal.h"

#define KEY_MAX (OPT_NAME_MAX + 32)

pfx_status pfx_optimizer_save_checkpoint(pfx_optimizer *opt, const char *path,
                                         const pfx_named_tensor *extra, size_t extra_count,
                                         const pfx_st_metadata *meta, size_t meta_count)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_save_checkpoint: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (!path || (extra_count && !extra) || (meta_count && !meta))
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_save_checkpoint: %s is NULL",
                         !path                 ? "path"
                         : !meta && meta_count ? "meta"
                                               : "extra");
    const size_t n = opt->count;
    pfx_named_tensor *items = calloc(3 * n + extra_count + 1, sizeof(*items));
    pfx_st_metadata *all = calloc(n + meta_count + 3, sizeof(*all));
    char(*keys)[KEY_MAX] = calloc(3 * n + 1, sizeof(*keys));
    char(*counts)[24] = calloc(n + 1, sizeof(*counts));
    if (!items || !all || !keys || !counts) {
        free(items);
        free(all);
        free(keys);
        free(counts);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "optimizer_save_checkpoint: host memory");
    }
    /* the moments travel as the device tensors they are: nothing staged;
     * sharded, this process's parameters only, and which they are */
    size_t k = 0, m = 0;
    char shard[48] = "", shard_params[48] = "";
    if (opt->sharded) {
        snprintf(shard, sizeof(shard), "%u/%u", opt->shard_rank, opt->shard_ranks);
        snprintf(shard_params, sizeof(shard_params), "%zu,%zu", opt->own_first, opt->own_end);
        all[m++] = (pfx_st_metadata){ "optimizer_shard", shard };
        all[m++] = (pfx_st_metadata){ "optimizer_shard_params", shard_params };
    }
    for (size_t i = 0; i < n; i++) {
        const opt_param *it = &opt->items[i];
        if (!opt_owns(opt, i))
            continue;
        snprintf(keys[3 * i], KEY_MAX, "%s.exp_avg", it->name);
        snprintf(keys[3 * i + 1], KEY_MAX, "%s.exp_avg_sq", it->name);
        snprintf(keys[3 * i + 2], KEY_MAX, "%s.step", it->name);
        snprintf(counts[i], sizeof(counts[0]), "%llu", (unsigned long long)it->step);
        items[k++] = (pfx_named_tensor){ .name = it->name, .tensor = it->param };
        items[k++] = (pfx_named_tensor){ .name = keys[3 * i], .tensor = it->m };
        items[k++] = (pfx_named_tensor){ .name = keys[3 * i + 1], .tensor = it->v };
        all[m++] = (pfx_st_metadata){ keys[3 * i + 2], counts[i] };
    }
    snprintf(counts[n], sizeof(counts[0]), "%llu", (unsigned long long)opt->step);
    all[m++] = (pfx_st_metadata){ "optimizer_step", counts[n] };
    for (size_t i = 0; i < extra_count; i++)
        items[k++] = extra[i];
    for (size_t i = 0; i < meta_count; i++)
        all[m++] = meta[i];
    pfx_status st = pfx_safetensors_save(rt, path, items, k, all, m);
    free(items);
    free(all);
    free(keys);
    free(counts);
    return st;
}

/* A metadata count of the file, the whole text (pfx_parse_uint). */
static pfx_status meta_count(pfx_runtime *rt, const pfx_safetensors *f, const char *label,
                             const char *key, uint64_t *out)
{
    const char *v = pfx_safetensors_metadata_get(f, key);
    if (!v)
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the metadata '%s' is missing", label, key);
    if (pfx_parse_uint(v, PFX_OPTIMIZER_MAX_STEP, out) != PFX_SUCCESS)
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the metadata '%s' is not a whole number", label,
                         key);
    return PFX_SUCCESS;
}

/* Tensor `key` of the file holds numel values. */
static pfx_status has_tensor(pfx_runtime *rt, const pfx_safetensors *f, const char *label,
                             const char *key, size_t numel)
{
    long i = pfx_safetensors_find(f, key);
    pfx_st_info info;
    if (i < 0 || pfx_safetensors_info(f, (size_t)i, &info) != PFX_SUCCESS || info.numel != numel)
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: the tensor '%s' is missing or not of %zu values", label, key, numel);
    return PFX_SUCCESS;
}

/* A sharded checkpoint (metadata optimizer_shard "RANK/RANKS" and
 * optimizer_shard_params "FIRST,END") resumes only the same shard; a whole
 * one resumes any (each process takes its part). */
static pfx_status check_shard(const pfx_optimizer *opt, const pfx_safetensors *f, const char *label)
{
    const char *shard = pfx_safetensors_metadata_get(f, "optimizer_shard"),
               *params = pfx_safetensors_metadata_get(f, "optimizer_shard_params");
    if (!shard && !params)
        return PFX_SUCCESS;
    char mine[48] = "", mine_params[48] = "";
    if (opt->sharded) {
        snprintf(mine, sizeof(mine), "%u/%u", opt->shard_rank, opt->shard_ranks);
        snprintf(mine_params, sizeof(mine_params), "%zu,%zu", opt->own_first, opt->own_end);
    }
    if (!shard || !params || strlen(shard) > 40)
        return pfx_error(opt->rt, PFX_ERROR_FORMAT,
                         "%s: the metadata 'optimizer_shard%s' is missing or too long", label,
                         shard ? "_params" : "");
    const char *slash = strchr(shard, '/');
    if (!opt->sharded)
        return pfx_error(opt->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: holds one part of an optimizer state sharded over %s ranks "
                         "(rank %.*s's): resume with %s ranks, the state sharded",
                         label, slash ? slash + 1 : shard, slash ? (int)(slash - shard) : 0, shard,
                         slash ? slash + 1 : shard);
    if (strcmp(shard, mine) != 0)
        return pfx_error(opt->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: holds rank %.*s's part of an optimizer state sharded over %s ranks; "
                         "this process is rank %u of %u: resume with %s ranks (re-sharding a "
                         "sharded checkpoint is not supported)",
                         label, slash ? (int)(slash - shard) : 0, shard, slash ? slash + 1 : shard,
                         opt->shard_rank, opt->shard_ranks, slash ? slash + 1 : shard);
    if (strcmp(params, mine_params) != 0)
        return pfx_error(opt->rt, PFX_ERROR_FORMAT,
                         "%s: holds the state of parameters '%.40s' (first,end); this process "
                         "updates %s",
                         label, params, mine_params);
    return PFX_SUCCESS;
}

pfx_status pfx_optimizer_check_checkpoint(const pfx_optimizer *opt, const pfx_safetensors *f,
                                          const char *label, uint64_t max_step,
                                          const char *max_name, uint64_t *step)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_check_checkpoint: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (!f || !label || !max_name || !step)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_check_checkpoint: %s is NULL",
                         !f          ? "f"
                         : !label    ? "label"
                         : !max_name ? "max_name"
                                     : "step");
    uint64_t s = 0;
    pfx_status st = meta_count(rt, f, label, "optimizer_step", &s);
    if (st != PFX_SUCCESS)
        return st;
    /* a step advances the optimizer unless it was skipped (NaN/Inf gradients) */
    if (s > max_step)
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: the metadata 'optimizer_step' (%llu) is more than '%s' (%llu)", label,
                         (unsigned long long)s, max_name, (unsigned long long)max_step);
    if ((st = check_shard(opt, f, label)))
        return st;
    for (size_t i = 0; i < opt->count; i++) {
        const opt_param *it = &opt->items[i];
        char key[KEY_MAX];
        uint64_t own = 0;
        if (!opt_owns(opt, i)) /* a shard holds its own; the others come from their files */
            continue;
        snprintf(key, sizeof(key), "%s.step", it->name);
        if ((st = meta_count(rt, f, label, key, &own)))
            return st;
        if (own != s) /* every parameter advances with the optimizer */
            return pfx_error(rt, PFX_ERROR_FORMAT,
                             "%s: the metadata '%s' (%llu) differs from 'optimizer_step' (%llu)",
                             label, key, (unsigned long long)own, (unsigned long long)s);
        static const char *const tails[3] = { "", ".exp_avg", ".exp_avg_sq" };
        for (int t = 0; t < 3; t++) {
            snprintf(key, sizeof(key), "%s%s", it->name, tails[t]);
            if ((st = has_tensor(rt, f, label, key, it->param->numel)))
                return st;
        }
    }
    *step = s;
    return PFX_SUCCESS;
}

pfx_status pfx_optimizer_restore_checkpoint(pfx_optimizer *opt, const pfx_safetensors *f,
                                            const char *label)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT,
                         "optimizer_restore_checkpoint: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (!f || !label)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_restore_checkpoint: %s is NULL",
                         !f ? "f" : "label");
    uint64_t step = 0;
    pfx_status st = pfx_optimizer_check_checkpoint(opt, f, label, PFX_OPTIMIZER_MAX_STEP,
                                                   "the largest step", &step);
    /* every moment checked (finite, v >= 0) before the first write */
    for (size_t i = 0; st == PFX_SUCCESS && i < opt->count; i++) {
        const opt_param *it = &opt->items[i];
        const size_t n = it->param->numel;
        if (!opt_owns(opt, i))
            continue;
        float *v = malloc(2 * n * sizeof(float));
        char key[KEY_MAX];
        st =
            v ? PFX_SUCCESS
              : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "optimizer_restore_checkpoint: host memory");
        for (int t = 0; st == PFX_SUCCESS && t < 2; t++) {
            snprintf(key, sizeof(key), "%s%s", it->name, t ? ".exp_avg_sq" : ".exp_avg");
            if (pfx_safetensors_read_f32(f, key, v + (size_t)t * n, n) != PFX_SUCCESS)
                st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: %s", label, pfx_last_error(NULL));
        }
        for (size_t e = 0; st == PFX_SUCCESS && e < n; e++)
            if (!isfinite(v[e]) || !isfinite(v[n + e]) || v[n + e] < 0.0f)
                st = pfx_error(rt, PFX_ERROR_NOT_FINITE,
                               "%s: '%s' has a non-finite moment or a negative exp_avg_sq at %zu",
                               label, it->name, e);
        free(v);
    }
    for (size_t i = 0; st == PFX_SUCCESS && i < opt->count; i++) {
        const opt_param *it = &opt->items[i];
        const size_t n = it->param->numel;
        if (!opt_owns(opt, i))
            continue;
        float *v = malloc(3 * n * sizeof(float));
        char key[KEY_MAX];
        st =
            v ? PFX_SUCCESS
              : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "optimizer_restore_checkpoint: host memory");
        static const char *const tails[3] = { "", ".exp_avg", ".exp_avg_sq" };
        for (int t = 0; st == PFX_SUCCESS && t < 3; t++) {
            snprintf(key, sizeof(key), "%s%s", it->name, tails[t]);
            if (pfx_safetensors_read_f32(f, key, v + (size_t)t * n, n) != PFX_SUCCESS)
                st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: %s", label, pfx_last_error(NULL));
        }
        /* import_param checks the moments (finite, v >= 0) before it writes them */
        if (st == PFX_SUCCESS)
            st = pfx_optimizer_import_param(opt, i, step, v + n, v + 2 * n);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_write(it->param, 0, n, v);
        free(v);
    }
    if (st == PFX_SUCCESS)
        opt->step = step;
    /* sharded: the other parameters from the processes that restored them */
    for (size_t i = 0; st == PFX_SUCCESS && opt->sharded && i < opt->count; i++)
        opt->items[i].step = step;
    if (st == PFX_SUCCESS && opt->sharded)
        st = opt->coll->same_step(opt->coll->user, opt, step);
    if (st == PFX_SUCCESS && opt->sharded)
        st = opt->coll->params(opt->coll->user, opt);
    return st;
}
