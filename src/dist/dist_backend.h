/* What dist.h needs of a transport: dist_mpi.c over MPI, dist_single.c for
 * one process. dist_common.c validates every argument, then calls these; with
 * one rank it calls none but dist_join and the rank queries. */
#ifndef PFX_DIST_BACKEND_H
#define PFX_DIST_BACKEND_H

#include "prefixcl/dist.h"

/* Joins the launcher's job, if any (arguments checked). */
pfx_status dist_join(int *argc, char ***argv);
/* rank 0: PFX_ERROR_INVALID_ARGUMENT naming a rank whose text differs */
pfx_status dist_agree_text(const char *what, const char *text);
/* the sums of pfx_dist_reduce_grads and pfx_dist_mean, several ranks */
pfx_status dist_reduce(pfx_optimizer *opt, double *count, double *mean_loss);
void dist_mean_of(double *count, double *mean);
bool dist_any_of(bool mine);
/* pfx_dist_shard_optimizer, several ranks */
pfx_status dist_shard(pfx_optimizer *opt);
/* compares the parameters' hash when $PREFIXCL_DIST_CHECK=1 */
pfx_status dist_check(pfx_optimizer *opt, uint64_t step);

#endif
