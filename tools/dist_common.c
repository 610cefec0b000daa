/* The parts of dist.h that are the same with and without MPI. */
#include "dist.h"

void dist_shard(size_t total, size_t *begin, size_t *count)
{
    size_t r = (size_t)dist_rank(), n = (size_t)dist_size();
    size_t b = total * r / n, e = total * (r + 1) / n;
    *begin = b;
    *count = e - b;
}

pfx_status dist_reduce_hook(void *user, pfx_optimizer *opt, double *count, double *mean_loss)
{
    (void)user;
    return dist_reduce_grads(opt, count, mean_loss) ? PFX_ERROR_OPENCL : PFX_SUCCESS;
}

bool dist_any_hook(void *user, bool mine)
{
    (void)user;
    return dist_any(mine);
}

pfx_status dist_check_hook(void *user, pfx_optimizer *opt, uint64_t step)
{
    (void)user;
    return dist_check_params(opt, step) ? PFX_ERROR_OPENCL : PFX_SUCCESS;
}
