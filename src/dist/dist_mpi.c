/* dist.h over MPI (the `mpi` feature). Every exchange is point to point
 * (nonblocking, polled against a deadline), so that a rank that stops
 * answering is named instead of hanging the job, and every sum runs in rank
 * order. MPI errors return (MPI_ERRORS_RETURN) and abort the job with MPI's
 * message: once ranks disagree on what was exchanged, none can go on. */
#include "dist_backend.h"

#include <limits.h>
#include <stdarg.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "dist_mpi_internal.h"

dist_mpi_state dist_g = { .size = 1, .timeout_s = 600 };

bool pfx_dist_available(void)
{
    return true;
}

int pfx_dist_rank(void)
{
    return dist_g.rank;
}

int pfx_dist_size(void)
{
    return dist_g.size;
}

int pfx_dist_local_rank(void)
{
    return dist_g.local_rank;
}

_Noreturn void dist_fatal(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "prefixcl: rank %d of %d: %s; stopping every rank\n", dist_g.rank, dist_g.size,
            msg);
    fflush(stderr);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* MPI_Abort does not return; keeps _Noreturn honest */
}

void dist_mpi_ok(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    dist_fatal(3, "%s: %s", what, text);
}

/* Waits for n requests; each request i is an exchange with rank peer[i]. */
void dist_wait_all(MPI_Request *req, const int *peer, int n, const char *what)
{
    struct timespec start, now, nap = { 0, 200000 };
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int done = 0;
        dist_mpi_ok(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE), what);
        if (done)
            return;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) + 1e-9 * (double)(now.tv_nsec - start.tv_nsec) >
            (double)dist_g.timeout_s)
            break;
        nanosleep(&nap, NULL);
    }
    char late[512] = "";
    size_t used = 0;
    int last = -1; /* a rank's requests are adjacent: name it once */
    for (int i = 0; i < n; i++) {
        int flag = 0;
        if (req[i] == MPI_REQUEST_NULL)
            continue;
        MPI_Request_get_status(req[i], &flag, MPI_STATUS_IGNORE);
        if (flag || peer[i] == last)
            continue;
        last = peer[i];
        if (used < sizeof(late))
            used += (size_t)snprintf(late + used, sizeof(late) - used, "%s%d", used ? ", " : "",
                                     peer[i]);
    }
    if (!used) { /* all of them completed after the last test: collect them */
        dist_mpi_ok(MPI_Waitall(n, req, MPI_STATUSES_IGNORE), what);
        return;
    }
    dist_fatal(4, "%s: nothing from rank %s within %u s (PREFIXCL_DIST_TIMEOUT)", what, late,
               dist_g.timeout_s);
}

pfx_status dist_join(int *argc, char ***argv)
{
    /* Only a launcher's child joins a job: run by hand, a program stays one
     * process and never starts MPI. */
    if (dist_g.on ||
        (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_RANK")))
        return PFX_SUCCESS;
    const char *t = getenv("PREFIXCL_DIST_TIMEOUT");
    uint64_t v;
    if (t && *t) {
        if (pfx_parse_uint(t, 86400, &v) != PFX_SUCCESS || v < 1)
            return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                             "bad PREFIXCL_DIST_TIMEOUT '%.64s' (seconds, 1..86400)", t);
        dist_g.timeout_s = (unsigned)v;
    }
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "MPI_Init failed");
    dist_g.on = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    dist_mpi_ok(MPI_Comm_rank(MPI_COMM_WORLD, &dist_g.rank), "MPI_Comm_rank");
    dist_mpi_ok(MPI_Comm_size(MPI_COMM_WORLD, &dist_g.size), "MPI_Comm_size");
    MPI_Comm node;
    dist_mpi_ok(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, dist_g.rank,
                                    MPI_INFO_NULL, &node),
                "MPI_Comm_split_type");
    dist_mpi_ok(MPI_Comm_rank(node, &dist_g.local_rank), "MPI_Comm_rank (node)");
    MPI_Comm_free(&node);
    const char *c = getenv("PREFIXCL_DIST_CHECK");
    dist_g.check = c && !strcmp(c, "1");
    return PFX_SUCCESS;
}

int pfx_dist_finish(int rc)
{
    if (!dist_g.on)
        return rc;
    if (rc != 0 && rc != PFX_DIST_EXIT_STOPPED && rc != PFX_DIST_EXIT_TERMINATED && dist_g.size > 1)
        dist_fatal(rc, "the command failed (exit status %d)", rc);
    free(dist_g.buf);
    free(dist_g.all);
    free(dist_g.pbound);
    free(dist_g.fbound);
    dist_g.buf = dist_g.all = NULL;
    dist_g.pbound = dist_g.fbound = NULL;
    dist_g.sharded = NULL;
    MPI_Finalize();
    dist_g.on = false;
    return rc;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}
#define FNV_START UINT64_C(0xcbf29ce484222325)

/* Every rank's 64-bit value at rank 0 (vals[size]); other ranks send theirs. */
void dist_gather_u64(uint64_t mine, uint64_t *vals, int tag, const char *what)
{
    if (dist_g.rank != 0) {
        MPI_Request req;
        int peer = 0;
        dist_mpi_ok(MPI_Isend(&mine, 1, MPI_UINT64_T, 0, tag, MPI_COMM_WORLD, &req), what);
        dist_wait_all(&req, &peer, 1, what);
        return;
    }
    MPI_Request *req = calloc((size_t)dist_g.size, sizeof(*req));
    int *peer = calloc((size_t)dist_g.size, sizeof(*peer));
    if (!req || !peer)
        dist_fatal(5, "%s: out of host memory", what);
    vals[0] = mine;
    for (int r = 1; r < dist_g.size; r++) {
        peer[r - 1] = r;
        dist_mpi_ok(MPI_Irecv(&vals[r], 1, MPI_UINT64_T, r, tag, MPI_COMM_WORLD, &req[r - 1]),
                    what);
    }
    dist_wait_all(req, peer, dist_g.size - 1, what);
    free(req);
    free(peer);
}

pfx_status dist_agree_text(const char *what, const char *text)
{
    if (!dist_g.on || dist_g.size == 1)
        return PFX_SUCCESS;
    uint64_t *vals = dist_g.rank == 0 ? calloc((size_t)dist_g.size, sizeof(uint64_t)) : NULL;
    if (dist_g.rank == 0 && !vals)
        dist_fatal(5, "comparing the %s: out of host memory", what);
    char label[128];
    snprintf(label, sizeof(label), "comparing the %s", what);
    dist_gather_u64(fnv1a(FNV_START, text, strlen(text)), vals, TAG_AGREE, label);
    pfx_status st = PFX_SUCCESS;
    for (int r = 1; dist_g.rank == 0 && r < dist_g.size && st == PFX_SUCCESS; r++)
        if (vals[r] != vals[0])
            st = pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                           "rank %d was started with another %s than rank 0", r, what);
    free(vals);
    return st;
}

void dist_mean_of(double *count, double *mean)
{
    if (!dist_g.on || dist_g.size == 1)
        return;
    const char *what = "averaging over the ranks";
    uint64_t *vals = dist_g.rank == 0 ? calloc(2 * (size_t)dist_g.size, sizeof(uint64_t)) : NULL;
    if (dist_g.rank == 0 && !vals)
        dist_fatal(5, "%s: out of host memory", what);
    /* doubles travel bit for bit as 64-bit words */
    double sum = *count > 0 ? *count * *mean : 0.0;
    uint64_t c, s;
    memcpy(&c, count, sizeof(c));
    memcpy(&s, &sum, sizeof(s));
    dist_gather_u64(c, vals, TAG_MEAN_COUNT, what);
    dist_gather_u64(s, vals ? vals + dist_g.size : NULL, TAG_MEAN_SUM, what);
    if (dist_g.rank == 0) {
        double n = 0.0, total = 0.0;
        for (int r = 0; r < dist_g.size; r++) {
            double cr, sr;
            memcpy(&cr, &vals[r], sizeof(cr));
            memcpy(&sr, &vals[dist_g.size + r], sizeof(sr));
            n += cr;
            total += sr;
        }
        *count = n;
        *mean = n > 0 ? total / n : 0.0;
    }
    free(vals);
}

bool dist_any_of(bool mine)
{
    if (!dist_g.on || dist_g.size == 1)
        return mine;
    const char *what = "agreeing on a stop";
    uint64_t *vals = dist_g.rank == 0 ? calloc((size_t)dist_g.size, sizeof(uint64_t)) : NULL;
    if (dist_g.rank == 0 && !vals)
        dist_fatal(5, "%s: out of host memory", what);
    dist_gather_u64(mine, vals, TAG_ANY, what);
    uint64_t any = 0;
    if (dist_g.rank == 0) {
        for (int r = 0; r < dist_g.size; r++)
            any |= vals[r];
        MPI_Request *req = calloc((size_t)dist_g.size, sizeof(*req));
        int *peer = calloc((size_t)dist_g.size, sizeof(*peer));
        if (!req || !peer)
            dist_fatal(5, "%s: out of host memory", what);
        for (int r = 1; r < dist_g.size; r++) {
            peer[r - 1] = r;
            dist_mpi_ok(
                MPI_Isend(&any, 1, MPI_UINT64_T, r, TAG_ANY_BACK, MPI_COMM_WORLD, &req[r - 1]),
                what);
        }
        dist_wait_all(req, peer, dist_g.size - 1, what);
        free(req);
        free(peer);
    } else {
        MPI_Request req;
        int peer = 0;
        dist_mpi_ok(MPI_Irecv(&any, 1, MPI_UINT64_T, 0, TAG_ANY_BACK, MPI_COMM_WORLD, &req), what);
        dist_wait_all(&req, &peer, 1, what);
    }
    free(vals);
    return any != 0;
}

/* Packs (or, with back = true, unpacks) the registered gradients (or, with
 * params, the parameters) [first, end) into their places in dist_g.buf. */
pfx_status dist_pack_range(pfx_optimizer *opt, bool params, bool back, size_t first, size_t end)
{
    size_t n = pfx_optimizer_param_count(opt), off = 0;
    for (size_t i = 0; i < n && i < end; i++) {
        pfx_tensor *t = NULL;
        pfx_status st = params ? pfx_optimizer_param_tensors(opt, i, &t, NULL)
                               : pfx_optimizer_param_tensors(opt, i, NULL, &t);
        if (st != PFX_SUCCESS)
            return st;
        size_t k = pfx_tensor_numel(t);
        if (i >= first)
            st = back ? pfx_tensor_write(t, 0, k, dist_g.buf + off)
                      : pfx_tensor_read(t, 0, k, dist_g.buf + off);
        if (st != PFX_SUCCESS)
            return pfx_error(NULL, st, "rank %d: %s %s: %s (%s)", dist_g.rank,
                             back ? "writing the summed" : "reading the",
                             params ? "parameters" : "gradients", pfx_status_string(st),
                             pfx_last_error(pfx_tensor_runtime(t)));
        off += k;
    }
    return PFX_SUCCESS;
}

static pfx_status pack(pfx_optimizer *opt, bool back)
{
    return dist_pack_range(opt, false, back, 0, SIZE_MAX);
}

static size_t grad_floats(pfx_optimizer *opt)
{
    size_t n = pfx_optimizer_param_count(opt), total = 0;
    for (size_t i = 0; i < n; i++) {
        pfx_optimizer_param_info info;
        if (pfx_optimizer_get_param(opt, i, &info) == PFX_SUCCESS)
            total += info.numel;
    }
    return total;
}

/* Chunk c of F floats over R ranks: [F c / R, F (c + 1) / R), or, the
 * optimizer sharded, rank c's parameters. */
size_t dist_chunk_begin(size_t F, int c)
{
    if (dist_g.sharded)
        return dist_g.fbound[c];
    return F / (size_t)dist_g.size * (size_t)c +
           F % (size_t)dist_g.size * (size_t)c / (size_t)dist_g.size;
}

/* The most floats a chunk has. */
static size_t chunk_max(size_t F)
{
    size_t most = 0;
    for (int r = 0; r < dist_g.size; r++) {
        const size_t n = dist_chunk_begin(F, r + 1) - dist_chunk_begin(F, r);
        most = n > most ? n : most;
    }
    return most;
}

void dist_ensure_buffers(size_t floats)
{
    const size_t chunk = chunk_max(floats); /* every chunk is at most this */
    if (chunk > (size_t)INT_MAX)
        dist_fatal(5, "%zu gradient floats over %d ranks exceed one MPI message (%d)", floats,
                   dist_g.size, INT_MAX);
    if (!dist_g.buf || dist_g.floats != floats) {
        free(dist_g.buf);
        dist_g.buf = malloc((floats ? floats : 1) * sizeof(float));
        dist_g.floats = floats;
    }
    const size_t want = chunk * (size_t)(dist_g.size - 1);
    if (!dist_g.all || dist_g.all_floats != want) {
        free(dist_g.all);
        dist_g.all = malloc((want ? want : 1) * sizeof(float));
        dist_g.all_floats = want;
    }
    if (!dist_g.buf || !dist_g.all)
        dist_fatal(5, "no host memory for %zu gradient floats", floats);
}

/* Every rank's (count, loss sum) on every rank, heads[2 r], heads[2 r + 1]. */
static void exchange_heads(const double *mine, double *heads, const char *what)
{
    const int R = dist_g.size;
    MPI_Request *req = malloc((size_t)R * 2 * sizeof(MPI_Request));
    int *peer = calloc((size_t)R * 2, sizeof(int));
    if (!req || !peer)
        dist_fatal(5, "%s: out of host memory", what);
    int n = 0;
    heads[2 * dist_g.rank] = mine[0];
    heads[2 * dist_g.rank + 1] = mine[1];
    for (int r = 0; r < R; r++) {
        if (r == dist_g.rank)
            continue;
        peer[n] = r;
        dist_mpi_ok(
            MPI_Irecv(heads + 2 * r, 2, MPI_DOUBLE, r, TAG_COUNT, MPI_COMM_WORLD, &req[n++]), what);
        peer[n] = r;
        dist_mpi_ok(MPI_Isend(mine, 2, MPI_DOUBLE, r, TAG_COUNT, MPI_COMM_WORLD, &req[n++]), what);
    }
    dist_wait_all(req, peer, n, what);
    free(req);
    free(peer);
}

/* Reduce-scatter then all-gather, both point to point: rank c owns chunk c
 * of the packed gradients, receives it from every other rank, sums the
 * weighted parts in rank order (double, one rounding to float) and sends the
 * sum to every other rank. Each rank sends 2 (R - 1) / R of the gradients a
 * step (rank 0's old gather sent R - 1 times them and held them all), and
 * every element is the same sum in the same order whatever the chunking: a
 * run is reproducible bit for bit for a given R. */
pfx_status dist_reduce(pfx_optimizer *opt, double *count, double *mean_loss)
{
    if (!dist_g.on || dist_g.size == 1)
        return PFX_SUCCESS;
    const char *what = "summing the gradients";
    const int R = dist_g.size;
    const size_t F = grad_floats(opt);
    if (dist_g.sharded && (dist_g.sharded != opt || F != dist_g.fbound[R]))
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_dist_reduce_grads: another optimizer than the one sharded");
    dist_ensure_buffers(F);
    /* a device error here leaves this rank out of the exchange: its
     * program fails and pfx_dist_finish ends the job */
    pfx_status st = pack(opt, false);
    if (st != PFX_SUCCESS)
        return st;
    const double mine[2] = { *count, *count > 0 ? *count * *mean_loss : 0.0 };
    double *heads = malloc((size_t)R * 2 * sizeof(double)), *w = malloc((size_t)R * sizeof(double));
    MPI_Request *req = malloc((size_t)R * 2 * sizeof(MPI_Request));
    int *peer = calloc((size_t)R * 2, sizeof(int));
    if (!heads || !w || !req || !peer)
        dist_fatal(5, "%s: out of host memory", what);
    exchange_heads(mine, heads, what);
    /* in rank order: N, the loss sum, the weights (the same on every rank) */
    double sum[2] = { 0.0, 0.0 };
    for (int r = 0; r < R; r++) {
        if (!(heads[2 * r] >= 0.0))
            dist_fatal(5, "rank %d reported a count of %g", r, heads[2 * r]);
        sum[0] += heads[2 * r];
        sum[1] += heads[2 * r + 1];
    }
    for (int r = 0; r < R; r++)
        w[r] = sum[0] > 0 ? heads[2 * r] / sum[0] : 0.0;
    const size_t b0 = dist_chunk_begin(F, dist_g.rank),
                 n0 = dist_chunk_begin(F, dist_g.rank + 1) - b0;
    const size_t stride = chunk_max(F); /* dist_g.all's slots: every chunk fits */
    /* reduce-scatter: my chunk from every rank, every rank's chunk from me */
    int n = 0;
    for (int r = 0, k = 0; r < R; r++) {
        if (r == dist_g.rank)
            continue;
        const size_t br = dist_chunk_begin(F, r), nr = dist_chunk_begin(F, r + 1) - br;
        peer[n] = r;
        dist_mpi_ok(MPI_Irecv(dist_g.all + (size_t)k++ * stride, (int)n0, MPI_FLOAT, r, TAG_GRAD,
                              MPI_COMM_WORLD, &req[n++]),
                    what);
        peer[n] = r;
        dist_mpi_ok(
            MPI_Isend(dist_g.buf + br, (int)nr, MPI_FLOAT, r, TAG_GRAD, MPI_COMM_WORLD, &req[n++]),
            what);
    }
    dist_wait_all(req, peer, n, what);
    for (size_t i = 0; i < n0; i++) {
        double acc = 0.0;
        for (int r = 0, k = 0; r < R; r++) {
            const float v =
                r == dist_g.rank ? dist_g.buf[b0 + i] : dist_g.all[(size_t)k++ * stride + i];
            if (w[r] > 0)
                acc += w[r] * (double)v;
        }
        dist_g.buf[b0 + i] = (float)acc;
    }
    const bool sharded = dist_g.sharded == opt;
    /* all-gather: my summed chunk to every rank, theirs into place (sharded:
     * each rank keeps its own, the updated parameters travel instead) */
    n = 0;
    for (int r = 0; r < R && !sharded; r++) {
        if (r == dist_g.rank)
            continue;
        const size_t br = dist_chunk_begin(F, r), nr = dist_chunk_begin(F, r + 1) - br;
        peer[n] = r;
        dist_mpi_ok(MPI_Irecv(dist_g.buf + br, (int)nr, MPI_FLOAT, r, TAG_SUM_GRAD, MPI_COMM_WORLD,
                              &req[n++]),
                    what);
        peer[n] = r;
        dist_mpi_ok(MPI_Isend(dist_g.buf + b0, (int)n0, MPI_FLOAT, r, TAG_SUM_GRAD, MPI_COMM_WORLD,
                              &req[n++]),
                    what);
    }
    dist_wait_all(req, peer, n, what);
    if (!dist_g.told && dist_g.rank == 0) {
        const double sent = 2.0 * (double)(F - n0) * sizeof(float);
        if (sharded)
            fprintf(stderr,
                    "prefixcl: %d ranks: rank 0 sends %.2f MiB of gradients a step "
                    "(reduce-scatter, summed in rank order) and %.2f MiB of updated parameters "
                    "(all-gather)\n",
                    R, (double)(F - n0) * sizeof(float) / 1048576.0,
                    (double)n0 * (R - 1) * sizeof(float) / 1048576.0);
        else
            fprintf(stderr,
                    "prefixcl: %d ranks: each sends about %.2f MiB of gradients a step "
                    "(reduce-scatter and all-gather, summed in rank order)\n",
                    R, sent / 1048576.0);
        dist_g.told = true;
    }
    free(heads);
    free(w);
    free(req);
    free(peer);
    *count = sum[0];
    *mean_loss = sum[0] > 0 ? sum[1] / sum[0] : 0.0;
    return sharded ? dist_pack_range(opt, false, true, dist_g.pbound[dist_g.rank],
                                     dist_g.pbound[dist_g.rank + 1])
                   : pack(opt, true);
}

pfx_status dist_check(pfx_optimizer *opt, uint64_t step)
{
    if (!dist_g.on || dist_g.size == 1 || !dist_g.check)
        return PFX_SUCCESS;
    size_t n = pfx_optimizer_param_count(opt);
    uint64_t h = FNV_START;
    for (size_t i = 0; i < n; i++) {
        pfx_tensor *param = NULL;
        pfx_status st = pfx_optimizer_param_tensors(opt, i, &param, NULL);
        if (st != PFX_SUCCESS)
            return st;
        size_t k = pfx_tensor_numel(param);
        float *v = malloc((k ? k : 1) * sizeof(float));
        if (!v)
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY,
                             "rank %d: reading the parameters: out of host memory", dist_g.rank);
        st = pfx_tensor_read(param, 0, k, v);
        if (st != PFX_SUCCESS) {
            free(v);
            return pfx_error(NULL, st, "rank %d: reading the parameters: %s", dist_g.rank,
                             pfx_last_error(pfx_tensor_runtime(param)));
        }
        h = fnv1a(h, v, k * sizeof(float));
        free(v);
    }
    uint64_t *vals = dist_g.rank == 0 ? calloc((size_t)dist_g.size, sizeof(uint64_t)) : NULL;
    if (dist_g.rank == 0 && !vals)
        dist_fatal(5, "comparing the parameters: out of host memory");
    dist_gather_u64(h, vals, TAG_HASH, "comparing the parameters");
    if (dist_g.rank == 0) {
        for (int r = 1; r < dist_g.size; r++)
            if (vals[r] != vals[0]) {
                free(vals);
                return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                                 "after step %llu the parameters of rank %d differ from rank 0's",
                                 (unsigned long long)step, r);
            }
        printf("dist check: step %llu: parameters identical on %d ranks (%016llx)\n",
               (unsigned long long)step, dist_g.size, (unsigned long long)h);
        fflush(stdout);
    }
    free(vals);
    return PFX_SUCCESS;
}
