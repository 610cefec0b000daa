/* The parts of dist.h that are the same with and without MPI. */
#include "dist.h"

void dist_shard(size_t total, size_t *begin, size_t *count)
{
    size_t r = (size_t)dist_rank(), n = (size_t)dist_size();
    size_t b = total * r / n, e = total * (r + 1) / n;
    *begin = b;
    *count = e - b;
}
