/* Data parallelism for the training jobs (pretrain.h, tune.h) and for an
 * application's own loop: started by `mpirun -n R` in a build with the `mpi`
 * feature, each rank runs the same program on its own device and its own
 * shard of every global batch; between the backward and pfx_optimizer_step,
 * pfx_dist_reduce_grads replaces every registered gradient by the global one,
 * so every rank takes the same step. The header is the same with and without
 * MPI; without it (or without mpirun) every call is the one-process identity:
 * rank 0 of 1, nothing exchanged, nothing changed.
 *
 * A job uses it in four calls:
 *
 *     pfx_dist_init(&argc, &argv);                  // joins the MPI job, if any
 *     pfx_dist_device(selector, buf, sizeof(buf), &dev);  // this rank's device
 *     pfx_dist_hooks(&tune_config.dist);            // the job sums the gradients
 *     return pfx_dist_finish(rc);                   // leaves the job
 *
 * Fixed order: every element of the global gradient is the sum over ranks in
 * rank order (in double, one rounding to float), never an MPI_Allreduce, whose
 * order is unspecified: a run is reproducible bit for bit for a given R.
 *
 * Errors: argument errors and device errors come back as a pfx_status with
 * pfx_last_error(NULL) naming the argument, the peer rank or the device error.
 * The one abort (MPI_Abort of every rank, with a message naming the rank on
 * stderr) is for a job that can no longer agree: a peer that does not answer
 * within $PREFIXCL_DIST_TIMEOUT seconds (default 600; a rank that is stopped
 * or hangs on its device), an MPI error, a rank that reports a negative count,
 * and pfx_dist_finish with a failure status on any rank. A rank that dies is
 * reported by mpirun itself, which ends the job. $PREFIXCL_DIST_CHECK=1 makes
 * pfx_dist_check_params compare every rank's parameters after each step.
 *
 * Not thread safe: one thread of the process calls these functions. */
#ifndef PREFIXCL_DIST_H
#define PREFIXCL_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/common.h"
#include "prefixcl/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The exit status of a run stopped by SIGINT (128 + 2), and by SIGTERM
 * (128 + 15). Under several ranks a program returns one of them on every
 * rank, after pfx_dist_any agreed on the stop, so it is not a failure. */
#define PFX_DIST_EXIT_STOPPED    130
#define PFX_DIST_EXIT_TERMINATED 143

/* Whether this build of the library can join an MPI job (the `mpi` feature). */
PFX_API bool pfx_dist_available(void);

/* Joins the MPI job when started by mpirun (the launcher's environment says
 * so); otherwise nothing. argc and argv are both NULL or both given (MPI_Init
 * may read them). Errors: one of them NULL, a malformed
 * $PREFIXCL_DIST_TIMEOUT (seconds, 1..86400; MPI is not started then), MPI_Init
 * failing (PFX_ERROR_UNSUPPORTED). Calling it again after success does nothing. */
PFX_API pfx_status pfx_dist_init(int *argc, char ***argv);

/* Leaves the job: rc other than 0, PFX_DIST_EXIT_STOPPED and
 * PFX_DIST_EXIT_TERMINATED on any rank of a job of several aborts all of them
 * with a message naming this rank (it does not return then). Returns rc. */
PFX_API int pfx_dist_finish(int rc);

PFX_API int pfx_dist_rank(void);       /* 0 without MPI */
PFX_API int pfx_dist_size(void);       /* 1 without MPI */
PFX_API int pfx_dist_local_rank(void); /* rank among the ranks on this machine */

/* The device selector this rank uses, in *out: with several ranks on a
 * machine, the devices the selector matches (the default policy's device type
 * for NULL or "", after $PREFIXCL_DEVICE) in platform and device order, taken
 * by local rank round robin, written as "P:D" into buf; with one rank,
 * selector itself (*out may be NULL then). Errors: NULL buf or out, cap 0, a
 * malformed selector (PFX_ERROR_INVALID_ARGUMENT), a selector that matches no
 * device (PFX_ERROR_DEVICE_NOT_FOUND, with several ranks); *out is NULL. */
PFX_API pfx_status pfx_dist_device(const char *selector, char *buf, size_t cap, const char **out);

/* This rank's share of `total` items: [*begin, *begin + *count), the shares
 * of consecutive ranks differing by at most one. Errors: NULL begin or count. */
PFX_API pfx_status pfx_dist_shard(size_t total, size_t *begin, size_t *count);

/* Every rank passes the same description of its job (e.g. its options); on
 * rank 0, PFX_ERROR_INVALID_ARGUMENT naming the first rank whose text differs
 * ("rank R was started with another WHAT than rank 0"); the program then fails
 * and pfx_dist_finish ends every rank. Errors: NULL what or text. */
PFX_API pfx_status pfx_dist_agree(const char *what, const char *text);

/* In: *count is this rank's weight (items in its loss: labelled tokens,
 * elements of an MSE; finite, >= 0) and *mean_loss its mean loss; the
 * optimizer's gradients are those of that mean. Out, on every rank: *count the
 * global count N, *mean_loss the global mean (sum of count x mean over ranks /
 * N), every registered gradient sum over ranks r of (count_r / N) x grad_r; a
 * rank with count 0 adds nothing. N = 0 leaves the gradients at zero. Errors:
 * NULL argument, a negative or non-finite count, a device error reading or
 * writing the gradients. One process: nothing changes. */
PFX_API pfx_status pfx_dist_reduce_grads(pfx_optimizer *opt, double *count, double *mean_loss);

/* ZeRO stage 1: every rank keeps the AdamW state of its share of opt's
 * parameters only (whole parameters in registration order, the shares'
 * values as near F/R each as the parameters' boundaries allow; the largest
 * parameter bounds the largest share) and releases the rest. From then on
 * pfx_dist_reduce_grads leaves on each rank the global gradients of its own
 * parameters only (reduce-scatter, summed in rank order as before), and
 * pfx_optimizer_step updates those, sharing the gradients' partial sums of
 * squares (the clipping norm is global and the same bits as unsharded) and
 * then every rank's updated parameters (all-gather): the parameters are
 * those of the unsharded run bit for bit. A checkpoint
 * (pfx_optimizer_save_checkpoint) then holds this rank's parameters and
 * their state, and restores on the same rank of as many ranks only (a whole
 * one restores on any). Every rank calls it once, every parameter
 * registered, before the first step; each prints its share and the state's
 * bytes on stderr. Errors: NULL opt, an optimizer already sharded. One
 * process: nothing changes. */
PFX_API pfx_status pfx_dist_shard_optimizer(pfx_optimizer *opt);

/* A weighted mean of one number per rank without touching any gradient (e.g.
 * a held-out loss, each rank's over its shard): in, this rank's count and
 * mean; out, on rank 0, the global count and mean, summed in rank order as in
 * pfx_dist_reduce_grads; other ranks keep theirs. Errors: NULL argument, a
 * negative or non-finite count. */
PFX_API pfx_status pfx_dist_mean(double *count, double *mean);

/* True on every rank when `mine` is true on any (a stop asked of one rank,
 * e.g. by SIGINT, so that all stop at the same step boundary). */
PFX_API bool pfx_dist_any(bool mine);

/* After optimizer step `step`: with $PREFIXCL_DIST_CHECK=1 and several ranks,
 * rank 0 compares a hash of every rank's parameters and prints
 * "dist check: step S: parameters identical on R ranks (HASH)" on stdout, or
 * returns PFX_ERROR_INVALID_ARGUMENT naming the rank whose parameters differ.
 * Errors: NULL opt, a device error reading the parameters. */
PFX_API pfx_status pfx_dist_check_params(pfx_optimizer *opt, uint64_t step);

/* The jobs' data-parallel settings (pfx_pretrain_config.dist,
 * pfx_tune_config.dist) for this process: its rank, the number of ranks, and
 * hooks over the functions above (shard: pfx_dist_shard_optimizer; set it to
 * NULL to keep every moment on every rank). Errors: NULL out. */
PFX_API pfx_status pfx_dist_hooks(pfx_data_parallel *out);

#ifdef __cplusplus
}
#endif

#endif
