/* The parts of dist.h that are the same with and without MPI. */
#include "dist.h"

void dist_shard(size_t total, size_t *begin, size_t *count)
{
    size_t r = (size_t)dist_rank(), n = (size_t)dist_size();
    size_t b = total * r / n, e = total * (r + 1) / n;
    *begin = b;
    *count = e - b;
}

static pfx_status reduce_hook(void *user, pfx_optimizer *opt, double *count, double *mean_loss)
{
    (void)user;
    return dist_reduce_grads(opt, count, mean_loss) ? PFX_ERROR_OPENCL : PFX_SUCCESS;
}

static bool any_hook(void *user, bool mine)
{
    (void)user;
    return dist_any(mine);
}

static pfx_status check_hook(void *user, pfx_optimizer *opt, uint64_t step)
{
    (void)user;
    return dist_check_params(opt, step) ? PFX_ERROR_OPENCL : PFX_SUCCESS;
}

void dist_job_hooks(pfx_data_parallel *d)
{
    *d = (pfx_data_parallel){ .rank = (size_t)dist_rank(),
                              .ranks = (size_t)dist_size(),
                              .reduce = reduce_hook,
                              .any = any_hook,
                              .check = check_hook };
}
