/* The optimizer's state sharded over the ranks (dist.h,
 * pfx_dist_shard_optimizer) over MPI: the partition, and the exchanges a
 * sharded step asks for (opt_collective), point to point as dist_mpi.c's. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_mpi_internal.h"

/* buf[bound[r], bound[r + 1]) from rank r, for every other rank; this
 * rank's own range to every other. */
static void allgather_ranges(float *buf, const size_t *bound, int tag, const char *what)
{
    const int R = dist_g.size;
    MPI_Request *req = malloc((size_t)R * 2 * sizeof(MPI_Request));
    int *peer = calloc((size_t)R * 2, sizeof(int));
    if (!req || !peer)
        dist_fatal(5, "%s: out of host memory", what);
    int n = 0;
    const size_t b0 = bound[dist_g.rank], n0 = bound[dist_g.rank + 1] - b0;
    for (int r = 0; r < R; r++) {
        if (r == dist_g.rank)
            continue;
        const size_t br = bound[r], nr = bound[r + 1] - br;
        if (nr > (size_t)INT_MAX || n0 > (size_t)INT_MAX)
            dist_fatal(5, "%s: a part exceeds one MPI message (%d floats)", what, INT_MAX);
        peer[n] = r;
        dist_mpi_ok(MPI_Irecv(buf + br, (int)nr, MPI_FLOAT, r, tag, MPI_COMM_WORLD, &req[n++]),
                    what);
        peer[n] = r;
        dist_mpi_ok(MPI_Isend(buf + b0, (int)n0, MPI_FLOAT, r, tag, MPI_COMM_WORLD, &req[n++]),
                    what);
    }
    dist_wait_all(req, peer, n, what);
    free(req);
    free(peer);
}

static pfx_status share_partials(void *user, pfx_optimizer *opt, float *partial)
{
    (void)user;
    size_t *slot = malloc(((size_t)dist_g.size + 1) * sizeof(size_t));
    if (!slot)
        dist_fatal(5, "sharing the gradients' norm: out of host memory");
    for (int r = 0; r <= dist_g.size; r++)
        slot[r] = dist_g.pbound[r] < opt->count ? opt->items[dist_g.pbound[r]].partial_offset
                                                : opt->partial_total;
    allgather_ranges(partial, slot, TAG_PARTIAL, "sharing the gradients' norm");
    free(slot);
    return PFX_SUCCESS;
}

static pfx_status gather_params(void *user, pfx_optimizer *opt)
{
    (void)user;
    dist_ensure_buffers(dist_g.fbound[dist_g.size]);
    pfx_status st = dist_pack_range(opt, true, false, dist_g.pbound[dist_g.rank],
                                    dist_g.pbound[dist_g.rank + 1]);
    if (st != PFX_SUCCESS)
        return st;
    allgather_ranges(dist_g.buf, dist_g.fbound, TAG_PARAMS, "gathering the updated parameters");
    for (int r = 0; r < dist_g.size && st == PFX_SUCCESS; r++)
        if (r != dist_g.rank)
            st = dist_pack_range(opt, true, true, dist_g.pbound[r], dist_g.pbound[r + 1]);
    return st;
}

static pfx_status same_step(void *user, pfx_optimizer *opt, uint64_t step)
{
    (void)user;
    (void)opt;
    const char *what = "comparing the checkpoints' steps";
    uint64_t *vals = dist_g.rank == 0 ? calloc((size_t)dist_g.size, sizeof(uint64_t)) : NULL;
    if (dist_g.rank == 0 && !vals)
        dist_fatal(5, "%s: out of host memory", what);
    dist_gather_u64(step, vals, TAG_SAME_STEP, what);
    int odd = 0;
    for (int r = 1; dist_g.rank == 0 && r < dist_g.size && !odd; r++)
        odd = vals[r] != vals[0] ? r : 0;
    const bool any = dist_any_of(odd != 0);
    pfx_status st = PFX_SUCCESS;
    if (any && dist_g.rank == 0)
        st = pfx_error(NULL, PFX_ERROR_FORMAT,
                       "the ranks' checkpoints hold different steps (rank 0: %llu, rank %d: %llu): "
                       "a save was cut short; start again",
                       (unsigned long long)vals[0], odd, (unsigned long long)vals[odd]);
    else if (any)
        st = pfx_error(NULL, PFX_ERROR_FORMAT,
                       "the ranks' checkpoints hold different steps (rank 0 names them)");
    free(vals);
    return st;
}

static const opt_collective collective = { .partials = share_partials,
                                           .params = gather_params,
                                           .same_step = same_step };

/* Rank r's first parameter: rank r - 1 takes the share of the values left
 * over the ranks left, to the nearest boundary, and one parameter at least
 * (when one is left). */
static void partition(const size_t *prefix, size_t count)
{
    const size_t F = prefix[count];
    dist_g.pbound[0] = 0;
    for (int r = 1; r < dist_g.size; r++) {
        size_t i = dist_g.pbound[r - 1];
        const size_t want = prefix[i] + (F - prefix[i]) / (size_t)(dist_g.size - r + 1);
        while (i < count && (prefix[i] < want || i == dist_g.pbound[r - 1]))
            i++;
        if (i > dist_g.pbound[r - 1] + 1 && want - prefix[i - 1] < prefix[i] - want)
            i--;
        dist_g.pbound[r] = i;
    }
    dist_g.pbound[dist_g.size] = count;
    for (int r = 0; r <= dist_g.size; r++)
        dist_g.fbound[r] = prefix[dist_g.pbound[r]];
}

pfx_status dist_shard(pfx_optimizer *opt)
{
    if (!dist_g.on || dist_g.size == 1)
        return PFX_SUCCESS;
    if (opt->sharded || dist_g.sharded)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_dist_shard_optimizer: %s is already sharded",
                         opt->sharded ? "this optimizer" : "another optimizer");
    const size_t count = pfx_optimizer_param_count(opt);
    size_t *prefix = calloc(count + 1, sizeof(size_t));
    free(dist_g.pbound);
    free(dist_g.fbound);
    dist_g.pbound = calloc((size_t)dist_g.size + 1, sizeof(size_t));
    dist_g.fbound = calloc((size_t)dist_g.size + 1, sizeof(size_t));
    if (!prefix || !dist_g.pbound || !dist_g.fbound)
        dist_fatal(5, "sharding the optimizer: out of host memory");
    for (size_t i = 0; i < count; i++)
        prefix[i + 1] = prefix[i] + opt->items[i].param->numel;
    partition(prefix, count);
    free(prefix);
    const size_t first = dist_g.pbound[dist_g.rank], end = dist_g.pbound[dist_g.rank + 1];
    pfx_status st =
        opt_shard(opt, first, end, (unsigned)dist_g.rank, (unsigned)dist_g.size, &collective);
    if (st != PFX_SUCCESS)
        return st;
    dist_g.sharded = opt;
    const size_t mine = dist_g.fbound[dist_g.rank + 1] - dist_g.fbound[dist_g.rank],
                 all = dist_g.fbound[dist_g.size];
    fprintf(stderr,
            "prefixcl: rank %d of %d: AdamW state of %zu of %zu parameter tensors (%zu of %zu "
            "values): %.1f MiB (unsharded: %.1f MiB)\n",
            dist_g.rank, dist_g.size, end - first, count, mine, all,
            2.0 * (double)mine * sizeof(float) / 1048576.0,
            2.0 * (double)all * sizeof(float) / 1048576.0);
    return PFX_SUCCESS;
}
