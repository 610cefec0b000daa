/* dist.h for a build without the `mpi` feature: one process, rank 0 of 1. */
#include "dist.h"

int dist_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int dist_finish(int rc)
{
    return rc;
}

int dist_rank(void)
{
    return 0;
}

int dist_size(void)
{
    return 1;
}

int dist_local_rank(void)
{
    return 0;
}

const char *dist_device(const char *selector, char *buf, size_t cap)
{
    (void)buf;
    (void)cap;
    return selector;
}

void dist_agree(const char *what, const char *text)
{
    (void)what;
    (void)text;
}

int dist_reduce_grads(pfx_optimizer *opt, double *count, double *mean_loss)
{
    (void)opt;
    (void)count;
    (void)mean_loss;
    return 0;
}

void dist_mean(double *count, double *mean)
{
    (void)count;
    (void)mean;
}

bool dist_any(bool mine)
{
    return mine;
}

int dist_check_params(pfx_optimizer *opt, uint64_t step)
{
    (void)opt;
    (void)step;
    return 0;
}
