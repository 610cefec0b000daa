/* Data parallelism for the training commands (prefixcl train, tune), over MPI
 * when the build has the `mpi` feature (dist_mpi.c), else one process
 * (dist_single.c). Under `mpirun -n R`, each rank runs the same command on its
 * own device and its own shard of every global batch; between the backward
 * and pfx_optimizer_step, dist_reduce_grads replaces every registered
 * gradient by the global one, so every rank takes the same step.
 *
 * Fixed order: rank 0 receives every rank's gradients, sums them in rank
 * order (in double, one rounding to float) and sends the sum back; no
 * MPI_Allreduce, whose order is unspecified. A run is reproducible bit for
 * bit for a given R.
 *
 * Failures: a rank whose command fails calls dist_finish(rc != 0), which
 * aborts every rank with a message naming it. Every exchange waits at most
 * $PREFIXCL_DIST_TIMEOUT seconds (default 600) for its peers, then aborts the
 * job naming the ranks it did not hear from (a rank that is stopped or hangs
 * on its device); a rank that dies is reported by mpirun itself, which ends
 * the job. $PREFIXCL_DIST_CHECK=1 makes every step compare a hash of the
 * parameters of every rank on rank 0 (one line per step on stdout).
 *
 * Without mpirun (or without the feature) every function is the one-process
 * identity: rank 0 of 1, nothing exchanged, nothing changed. */
#ifndef PFX_TOOLS_DIST_H
#define PFX_TOOLS_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/prefixcl.h"

/* Joins the MPI job when started by mpirun (the launcher's environment says
 * so); otherwise nothing. Returns 0, or 1 after printing why. */
int dist_init(int *argc, char ***argv);
/* The exit status of a run stopped by SIGINT (128 + 2), and by SIGTERM
 * (128 + 15). Under several ranks a command returns one of them on every
 * rank, after dist_any agreed on the stop, so it is not a failure. */
#define DIST_EXIT_STOPPED    130
#define DIST_EXIT_TERMINATED 143

/* Leaves the job: rc other than 0 and DIST_EXIT_STOPPED on any rank of a job
 * of several aborts all of them with a message naming this rank (it does not
 * return then). Returns rc. */
int dist_finish(int rc);

int dist_rank(void);       /* 0 without MPI */
int dist_size(void);       /* 1 without MPI */
int dist_local_rank(void); /* rank among the ranks on this machine */

/* The device selector this rank uses: with several ranks on a machine, the
 * devices the selector matches (the default policy's device type for NULL
 * or "", after $PREFIXCL_DEVICE) in platform and device order, taken by
 * local rank round robin, as "P:D" in buf; with one rank, selector itself.
 * NULL after printing why when the selector is malformed or matches nothing. */
const char *dist_device(const char *selector, char *buf, size_t cap);

/* This rank's share of `total` items: [*begin, *begin + *count), the shares
 * of consecutive ranks differing by at most one. */
void dist_shard(size_t total, size_t *begin, size_t *count);

/* Every rank passes the same description of its job (e.g. its options);
 * rank 0 aborts the job, naming the rank, when one differs. */
void dist_agree(const char *what, const char *text);

/* In: *count is this rank's weight (items in its loss: labelled tokens,
 * elements of an MSE) and *mean_loss its mean loss; the optimizer's
 * gradients are those of that mean. Out, on every rank: *count the global
 * count N, *mean_loss the global mean (sum of count x mean over ranks / N),
 * every registered gradient sum over ranks r of (count_r / N) x grad_r; a
 * rank with count 0 adds nothing. N = 0 leaves the gradients at zero.
 * Returns 0, or -1 after printing a device error (the command then fails). */
int dist_reduce_grads(pfx_optimizer *opt, double *count, double *mean_loss);

/* A weighted mean of one number per rank without touching any gradient
 * (e.g. a held-out loss, each rank's over its shard): in, this rank's count
 * and mean; out, on rank 0, the global count and mean, summed in rank order
 * as in dist_reduce_grads; other ranks keep theirs. */
void dist_mean(double *count, double *mean);

/* True on every rank when `mine` is true on any (a stop asked of one rank,
 * e.g. by SIGINT, so that all stop at the same step boundary). */
bool dist_any(bool mine);

/* After optimizer step `step`: with $PREFIXCL_DIST_CHECK=1 and several ranks,
 * rank 0 compares a hash of every rank's parameters and prints
 * "dist check: step S: parameters identical on R ranks (HASH)", or aborts the
 * job naming the rank whose parameters differ. Returns 0 or -1 (device error). */
int dist_check_params(pfx_optimizer *opt, uint64_t step);

/* The library jobs' data-parallel settings (pfx_pretrain_config.dist,
 * pfx_tune_config.dist) for this process: its rank, the number of ranks,
 * and hooks over the functions above (a failure is PFX_ERROR_OPENCL, after
 * the message). */
void dist_job_hooks(pfx_data_parallel *d);

#endif
