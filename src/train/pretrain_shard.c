/* The full-training job's checkpoint as a run writes and resumes it
 * (pretrain_internal.h), whole on rank 0 or, the optimizer's state sharded
 * over the ranks (dist.shard), one part a rank: rank 0's file is the
 * manifest (the step, the job's fields, rank 0's part), each other rank's
 * part of step S is checkpoint.rank-R.step-S.safetensors beside it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "io_internal.h"
#include "job.h"
#include "pretrain_internal.h"

/* The process that writes the outputs: rank 0, or the only one. */
static bool lead(const pfx_pretrain_job *j)
{
    return j->cfg->dist.ranks <= 1 || j->cfg->dist.rank == 0;
}

/* OUT/checkpoint.rank-R.step-S.safetensors */
static char *part_path(const pfx_pretrain_job *j, uint64_t step)
{
    char name[96];
    snprintf(name, sizeof(name), "checkpoint.rank-%zu.step-%llu.safetensors", j->cfg->dist.rank,
             (unsigned long long)step);
    return pfx_join_path(j->cfg->out_dir, name);
}

/* Whether any rank failed (every rank calls it at the same point). */
static pfx_status all_wrote(pfx_pretrain_job *j, pfx_status st, const char *what)
{
    const pfx_pretrain_config *c = j->cfg;
    const bool failed = pfx_job_any(c->dist.ranks, c->dist.any, c->dist.user, st != PFX_SUCCESS);
    if (st != PFX_SUCCESS || !failed)
        return st;
    return pfx_error(j->rt, PFX_ERROR_IO, "pretrain: another rank could not write %s", what);
}

pfx_status pfx_pretrain_save(pfx_pretrain_job *j, const pfx_pretrain_result *r, bool model)
{
    if (!j->sharded)
        return lead(j) ? pfx_pretrain_write_outputs(j, r, model) : PFX_SUCCESS;
    const uint64_t step = r->steps_done;
    pfx_status st = PFX_SUCCESS;
    if (!lead(j)) {
        char *path = part_path(j, step);
        st = path ? pfx_pretrain_ckpt_save(j, path, r)
                  : pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
        free(path);
    }
    if ((st = all_wrote(j, st, "its part of the checkpoint")))
        return st;
    if (lead(j)) /* the set is whole from here on */
        st = pfx_pretrain_write_outputs(j, r, model);
    if ((st = all_wrote(j, st, "the checkpoint")))
        return st;
    if (!lead(j) && j->shard_step && j->shard_step != step) {
        char *old = part_path(j, j->shard_step);
        if (old && remove(old) != 0 && errno != ENOENT)
            st = pfx_error(j->rt, PFX_ERROR_IO, "pretrain: cannot remove '%s': %s", old,
                           strerror(errno));
        free(old);
    }
    j->shard_step = step;
    return st;
}

/* Rank > 0, sharded: the file with this rank's part, as rank 0's file
 * names it (a whole checkpoint: that file itself). */
static pfx_status part_of(pfx_pretrain_job *j, const char *manifest, char **out)
{
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_safetensors_open(manifest, &f);
    if (st != PFX_SUCCESS)
        return pfx_error(j->rt, st, "pretrain: resume: %s", pfx_last_error(NULL));
    const char *shard = pfx_safetensors_metadata_get(f, "optimizer_shard"),
               *done = pfx_safetensors_metadata_get(f, "steps_done");
    const char *slash = shard ? strchr(shard, '/') : NULL;
    uint64_t ranks = 0, step = 0;
    if (!shard) {
        *out = pfx_join_path(j->cfg->out_dir, PFX_PRETRAIN_CHECKPOINT);
    } else if (!slash || pfx_parse_uint(slash + 1, UINT32_MAX, &ranks) != PFX_SUCCESS || !done ||
               pfx_parse_uint(done, UINT64_MAX - 1, &step) != PFX_SUCCESS) {
        st = pfx_error(j->rt, PFX_ERROR_FORMAT,
                       "pretrain: %s: the metadata 'optimizer_shard' or 'steps_done' is not "
                       "'RANK/RANKS' or a count",
                       manifest);
    } else if (ranks != j->cfg->dist.ranks) {
        st = pfx_error(j->rt, PFX_ERROR_INVALID_ARGUMENT,
                       "pretrain: %s: the optimizer's state is sharded over %llu ranks; this run "
                       "has %zu: resume with %llu ranks (re-sharding a sharded checkpoint is not "
                       "supported)",
                       manifest, (unsigned long long)ranks, j->cfg->dist.ranks,
                       (unsigned long long)ranks);
    } else {
        *out = part_path(j, step);
        j->shard_step = step;
    }
    pfx_safetensors_close(&f);
    if (st == PFX_SUCCESS && !*out)
        st = pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    return st;
}

pfx_status pfx_pretrain_resume(pfx_pretrain_job *j, pfx_pretrain_result *r)
{
    char *manifest = pfx_join_path(j->cfg->out_dir, PFX_PRETRAIN_CHECKPOINT), *path = NULL;
    pfx_status st =
        manifest ? PFX_SUCCESS : pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    if (st == PFX_SUCCESS && j->sharded && !lead(j))
        st = part_of(j, manifest, &path);
    if (st == PFX_SUCCESS)
        st = pfx_pretrain_ckpt_load(j, path ? path : manifest, r);
    free(manifest);
    free(path);
    return st;
}
