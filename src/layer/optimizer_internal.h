/* The optimizer's state shared by the AdamW step (optimizer.c) and its state
 * files (optimizer_state.c). Not installed. */
#ifndef PFX_OPTIMIZER_INTERNAL_H
#define PFX_OPTIMIZER_INTERNAL_H

#include "internal.h"

#define OPT_NAME_MAX 128

typedef struct opt_param {
    pfx_tensor *param, *grad;
    unsigned group;
    char *name;
    pfx_tensor *m, *v; /* moments, the parameter's shape (accounted); NULL when
                        * another process holds them (opt_shard) */
    size_t bytes;      /* of m (and of v) */
    uint64_t step;
    cl_uint partial_offset; /* first slot of this gradient's partials */
    size_t partial_groups;  /* work-groups of its sum-of-squares launch */
} opt_param;

struct pfx_optimizer {
    pfx_runtime *rt;
    pfx_optimizer_params params;
    pfx_optimizer_group_params *groups;
    size_t group_count;
    opt_param *items;
    size_t count, cap;
    size_t partial_total; /* partial slots the registered gradients need */
    cl_mem partial;
    size_t partial_cap; /* slots allocated */
    cl_mem status;      /* 3 floats: norm, scale, skip */
    uint64_t step;
    /* the state sharded over processes (opt_shard): this one updates
     * parameters [own_first, own_end) and holds their moments */
    bool sharded;
    bool defer_moments; /* add_param allocates none: opt_shard allocates this
                         * process's (set before the first add_param) */
    size_t own_first, own_end;
    unsigned shard_rank, shard_ranks;
    const struct opt_collective *coll;
};

/* What a sharded step asks of the other processes (dist/), every process
 * calling them at the same point of the same step. */
typedef struct opt_collective {
    /* partial[0, total) on the host holds this process's slots
     * [items[own_first].partial_offset, ...) of the gradients' partial sums
     * of squares: fill in every other process's, the same floats they
     * computed (the norm is then the unsharded one bit for bit) */
    pfx_status (*partials)(void *user, pfx_optimizer *opt, float *partial);
    /* after an update: every other process's parameters from it */
    pfx_status (*params)(void *user, pfx_optimizer *opt);
    /* a restored checkpoint: PFX_ERROR_FORMAT on every process unless every
     * process restored the same optimizer step */
    pfx_status (*same_step)(void *user, pfx_optimizer *opt, uint64_t step);
    void *user;
} opt_collective;

/* The moments of it, zero (accounted); on failure the caller destroys them. */
pfx_status opt_alloc_moments(opt_param *it);

/* Shards the state: this process (rank of ranks) updates parameters
 * [first, end) only and releases the others' moments (or, deferred,
 * allocates its own only); coll (kept, not copied) joins the steps. Every
 * parameter is registered before. */
pfx_status opt_shard(pfx_optimizer *opt, size_t first, size_t end, unsigned rank, unsigned ranks,
                     const opt_collective *coll);

/* The partial sums of squares of every process's gradients into
 * opt->partial (coll->partials); blocks. */
pfx_status opt_share_partials(pfx_optimizer *opt);

/* PFX_ERROR_INVALID_ARGUMENT: "FN: parameter 'NAME' is updated by rank R
 * (the optimizer's state is sharded over N processes)". */
pfx_status opt_not_held(const pfx_optimizer *opt, const char *fn, size_t index);

/* Allocates the moments deferred (defer_moments) when no opt_shard did:
 * every one; on failure the optimizer cannot step. */
pfx_status opt_undefer(pfx_optimizer *opt);

/* Whether this process updates parameter i. */
static inline bool opt_owns(const pfx_optimizer *opt, size_t i)
{
    return !opt->sharded || (i >= opt->own_first && i < opt->own_end);
}

#endif
