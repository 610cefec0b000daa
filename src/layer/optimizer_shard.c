/* The optimizer's state sharded over processes (ZeRO stage 1, as
 * torch.distributed.optim.ZeroRedundancyOptimizer shards it: whole
 * parameters, so each process runs the unsharded kernels on its own
 * tensors and the results are the unsharded run's bit for bit). The
 * exchanges themselves are dist/'s (opt_collective). */
#include <stdlib.h>

#include "optimizer_internal.h"

pfx_status opt_shard(pfx_optimizer *opt, size_t first, size_t end, unsigned rank, unsigned ranks,
                     const opt_collective *coll)
{
    if (!opt || !coll || !coll->partials || !coll->params || !coll->same_step)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_shard: %s is NULL",
                         !opt ? "opt" : "a collective");
    if (first > end || end > opt->count || rank >= ranks)
        return pfx_error(opt->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_shard: parameters [%zu, %zu) of %zu, rank %u of %u", first, end,
                         opt->count, rank, ranks);
    clFinish(opt->rt->queue); /* no kernel may still read a moment that goes */
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; i < opt->count; i++) {
        opt_param *it = &opt->items[i];
        if (i < first || i >= end || st != PFX_SUCCESS) {
            pfx_tensor_destroy(&it->m);
            pfx_tensor_destroy(&it->v);
        } else if (!it->m && (st = opt_alloc_moments(it)) != PFX_SUCCESS) {
            clFinish(opt->rt->queue);
            pfx_tensor_destroy(&it->m);
            pfx_tensor_destroy(&it->v);
        }
    }
    if (st != PFX_SUCCESS) /* every moment released: the optimizer cannot step */
        return st;
    opt->defer_moments = false;
    opt->sharded = true;
    opt->own_first = first;
    opt->own_end = end;
    opt->shard_rank = rank;
    opt->shard_ranks = ranks;
    opt->coll = coll;
    return PFX_SUCCESS;
}

pfx_status opt_not_held(const pfx_optimizer *opt, const char *fn, size_t index)
{
    return pfx_error(opt->rt, PFX_ERROR_INVALID_ARGUMENT,
                     "%s: the state of parameter '%s' is held by another process (the "
                     "optimizer's state is sharded over %u processes)",
                     fn, opt->items[index].name, opt->shard_ranks);
}

pfx_status opt_share_partials(pfx_optimizer *opt)
{
    pfx_runtime *rt = opt->rt;
    const size_t total = opt->partial_total;
    const size_t lo = opt->own_first < opt->count ? opt->items[opt->own_first].partial_offset
                                                  : total,
                 hi = opt->own_end < opt->count ? opt->items[opt->own_end].partial_offset : total;
    float *host = calloc(total ? total : 1, sizeof(float));
    if (!host)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "optimizer_step: host memory for %zu sums",
                         total);
    cl_int err = hi > lo ? clEnqueueReadBuffer(rt->queue, opt->partial, CL_TRUE, lo * sizeof(float),
                                               (hi - lo) * sizeof(float), host + lo, 0, NULL, NULL)
                         : CL_SUCCESS;
    pfx_status st = err == CL_SUCCESS
                        ? PFX_SUCCESS
                        : pfx_cl_error(rt, err, "optimizer_step: reading the partial sums");
    if (st == PFX_SUCCESS)
        st = opt->coll->partials(opt->coll->user, opt, host);
    if (st == PFX_SUCCESS &&
        (err = clEnqueueWriteBuffer(rt->queue, opt->partial, CL_TRUE, 0, total * sizeof(float),
                                    host, 0, NULL, NULL)) != CL_SUCCESS)
        st = pfx_cl_error(rt, err, "optimizer_step: writing the partial sums");
    free(host);
    return st;
}

pfx_status opt_undefer(pfx_optimizer *opt)
{
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; opt->defer_moments && i < opt->count && st == PFX_SUCCESS; i++)
        if (!opt->items[i].m)
            st = opt_alloc_moments(&opt->items[i]);
    if (st == PFX_SUCCESS)
        opt->defer_moments = false;
    return st;
}
