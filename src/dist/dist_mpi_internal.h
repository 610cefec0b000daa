/* What dist_mpi.c (the exchanges) shares with dist_mpi_shard.c (the
 * optimizer's state sharded over the ranks). Not installed. */
#ifndef PFX_DIST_MPI_INTERNAL_H
#define PFX_DIST_MPI_INTERNAL_H

#include <mpi.h>

#include "dist_backend.h"
#include "internal.h"
#include "optimizer_internal.h"

enum {
    TAG_AGREE = 1,
    TAG_COUNT,
    TAG_GRAD,
    TAG_SUM_GRAD,
    TAG_HASH,
    TAG_ANY,
    TAG_ANY_BACK,
    TAG_MEAN_COUNT,
    TAG_MEAN_SUM,
    TAG_PARTIAL,
    TAG_PARAMS,
    TAG_SAME_STEP,
    TAG_SAME_STEP_BACK
};

typedef struct dist_mpi_state {
    bool on;
    int rank, size, local_rank;
    unsigned timeout_s;
    bool check;
    float *buf; /* this rank's packed gradients, then the sum */
    float *all; /* the other ranks' parts of this rank's chunk, [size - 1][chunk] */
    size_t floats, all_floats;
    bool told; /* the bytes a step sends were printed */
    /* the optimizer sharded (pfx_dist_shard_optimizer): rank r updates
     * parameters [pbound[r], pbound[r + 1]), floats [fbound[r], fbound[r + 1])
     * of the packed gradients */
    const pfx_optimizer *sharded;
    size_t *pbound, *fbound;
} dist_mpi_state;
extern dist_mpi_state dist_g;

/* Ends every rank with the message, naming this one. */
_Noreturn void dist_fatal(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* dist_fatal with MPI's message unless rc is MPI_SUCCESS. */
void dist_mpi_ok(int rc, const char *what);
/* Waits for n requests; each request i is an exchange with rank peer[i]. */
void dist_wait_all(MPI_Request *req, const int *peer, int n, const char *what);
/* Every rank's 64-bit value at rank 0 (vals[size]); other ranks send theirs. */
void dist_gather_u64(uint64_t mine, uint64_t *vals, int tag, const char *what);
/* Packs (or, with back = true, unpacks) the registered gradients (or, with
 * params, the parameters) [first, end) into their places in dist_g.buf. */
pfx_status dist_pack_range(pfx_optimizer *opt, bool params, bool back, size_t first, size_t end);
/* Chunk c of F floats over the ranks: the even split, or, the optimizer
 * sharded, rank c's parameters. */
size_t dist_chunk_begin(size_t F, int c);
/* dist_g.buf for floats values, dist_g.all for the others' chunks. */
void dist_ensure_buffers(size_t floats);

#endif
