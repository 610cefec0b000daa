/* dist.h for a build without the `mpi` feature: one process, rank 0 of 1.
 * dist_common.c never calls the exchanges with one rank; they are here for
 * the linker only. */
#include "dist_backend.h"

bool pfx_dist_available(void)
{
    return false;
}

pfx_status dist_join(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return PFX_SUCCESS;
}

int pfx_dist_finish(int rc)
{
    return rc;
}

int pfx_dist_rank(void)
{
    return 0;
}

int pfx_dist_size(void)
{
    return 1;
}

int pfx_dist_local_rank(void)
{
    return 0;
}

pfx_status dist_agree_text(const char *what, const char *text)
{
    (void)what;
    (void)text;
    return PFX_SUCCESS;
}

pfx_status dist_reduce(pfx_optimizer *opt, double *count, double *mean_loss)
{
    (void)opt;
    (void)count;
    (void)mean_loss;
    return PFX_SUCCESS;
}

void dist_mean_of(double *count, double *mean)
{
    (void)count;
    (void)mean;
}

bool dist_any_of(bool mine)
{
    return mine;
}

pfx_status dist_check(pfx_optimizer *opt, uint64_t step)
{
    (void)opt;
    (void)step;
    return PFX_SUCCESS;
}

pfx_status dist_shard(pfx_optimizer *opt)
{
    (void)opt;
    return PFX_SUCCESS;
}
