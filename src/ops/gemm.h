/*
 * The one dense-product wrapper of the library (no hand-written GEMM
 * kernels). Internal, not installed. Two backends behind the same calls,
 * chosen per runtime (rt->gemm, see pfx_gemm_backend in runtime.h):
 *   CLBlast  kernels enqueued on the runtime's in-order queue; nothing waits.
 *   host     the host's CBLAS (OpenBLAS) on the buffers mapped in place (a CPU
 *            device whose buffers are host memory, so mapping copies
 *            nothing): a blocking map waits for the work enqueued before,
 *            the product runs on the calling thread, the unmap is enqueued,
 *            so the queue order is that of the calls either way.
 *
 * Row-major throughout: an operand is a cl_mem, an element offset into it, a
 * leading dimension (the distance in elements between two rows as stored) and,
 * for strided batches, the distance between two batch items.
 *
 *   C[m x n] = alpha * op(A) op(B) + beta * C,  op(X) = X or X^T,
 *   op(A) is m x k, op(B) is k x n (A stored k x m when transposed, etc.).
 *
 * With beta == 0, C is not read (BLAS semantics). Work is enqueued on the
 * runtime's in-order queue; nothing waits. CLBlast compiles its kernels on
 * first use per device and precision (seconds on PoCL) and keeps them in its
 * own in-memory cache for the life of the process.
 *
 * Errors, the same for both backends and checked before anything is
 * enqueued: m, n, k, batch of 0 and a leading dimension smaller than a stored
 * row are PFX_ERROR_INVALID_SHAPE; an operand that reaches past its buffer is
 * PFX_ERROR_OUT_OF_RANGE (both name the operand). What CLBlast rejects beyond
 * that comes back as PFX_ERROR_CLBLAST with the CLBlast name in
 * pfx_last_error(rt), or, for codes in the OpenCL range, through pfx_cl_error
 * (allocation failures as PFX_ERROR_OUT_OF_MEMORY). `what` prefixes the
 * message ("encoder: dW2").
 */
#ifndef PFX_OPS_GEMM_H
#define PFX_OPS_GEMM_H

#include "internal.h"
#include "gemm_rows.h"

typedef struct pfx_gemm_operand {
    cl_mem mem;
    size_t offset; /* elements from the start of mem */
    size_t ld;     /* row stride in elements, as stored */
    size_t stride; /* batch stride in elements (strided batched only; may be 0) */
} pfx_gemm_operand;

/* Operand helpers: PFX_GEMM_OP(mem, offset, ld), PFX_GEMM_OPS(..., stride). */
#define PFX_GEMM_OP(mem_, offset_, ld_) ((pfx_gemm_operand){ (mem_), (offset_), (ld_), 0 })
#define PFX_GEMM_OPS(mem_, offset_, ld_, stride_)                                                  \
    ((pfx_gemm_operand){ (mem_), (offset_), (ld_), (stride_) })

/* C = alpha op(A) op(B) + beta C. */
pfx_status pfx_gemm(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                    size_t n, size_t k, float alpha, pfx_gemm_operand a, pfx_gemm_operand b,
                    float beta, pfx_gemm_operand c);

/* batch products, item i at offsets + i * stride of each operand. */
pfx_status pfx_gemm_strided_batched(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b,
                                    size_t m, size_t n, size_t k, float alpha, pfx_gemm_operand a,
                                    pfx_gemm_operand b, float beta, pfx_gemm_operand c,
                                    size_t batch);

/* batch products with their own offsets (and alpha, beta) per item; all
 * items share the buffers, shapes and leading dimensions. */
pfx_status pfx_gemm_batched(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                            size_t n, size_t k, const float *alphas, cl_mem a,
                            const size_t *a_offsets, size_t lda, cl_mem b, const size_t *b_offsets,
                            size_t ldb, const float *betas, cl_mem c, const size_t *c_offsets,
                            size_t ldc, size_t batch);

/* One product of a batch: element offsets of A, B, C and its scalars. */
typedef struct pfx_gemm_item {
    size_t a, b, c;
    float alpha, beta;
} pfx_gemm_item;

/* The host backend (gemm_host.c): `count` products on buffers a, b, c,
 * already validated. PFX_ERROR_UNSUPPORTED when built without a CBLAS. */
pfx_status pfx_gemm_host(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                         size_t n, size_t k, cl_mem a, size_t lda, cl_mem b, size_t ldb, cl_mem c,
                         size_t ldc, const pfx_gemm_item *items, size_t count);

/* The host backend on a 16-bit weight w stored as w_type (element offset
 * and row stride in its elements; [k, n], or [n, k] with trans_w):
 * C[m x n] = alpha A op(w) + beta C. Up to PFX_GEMM_ROWS_MAX rows read the
 * weight as stored (gemm_rows.h); more rows widen it blockwise into the
 * float32 scratch ws of ws_floats (>= k) elements for the host SGEMM.
 * Operands already validated. */
pfx_status pfx_gemm_host_stored(pfx_runtime *rt, const char *what, size_t m, size_t n, size_t k,
                                float alpha, pfx_gemm_operand a, pfx_gemm_operand w,
                                pfx_gemm_rows_type w_type, bool trans_w, float beta,
                                pfx_gemm_operand c, cl_mem ws, size_t ws_floats);

/* Whether this build has the host backend, and whether a device can use it
 * (a CPU device whose memory is the host's: host-unified, or PoCL). */
bool pfx_gemm_host_built(void);
/* The host BLAS's thread count, which the few-row products use too (1
 * without OpenBLAS). */
int pfx_gemm_host_threads(void);
/* One few-row product on host memory (m <= PFX_GEMM_ROWS_MAX, sizes below
 * INT_MAX), the way pfx_gemm_host takes it: the few-row kernels, or the host
 * BLAS's sgemv where pfx_gemm_rows_wanted says it is faster. */
void pfx_gemm_host_rows(const pfx_gemm_rows_args *g);
bool pfx_gemm_host_usable(const pfx_device_info *info);

/* The CLBlastStatusCode name of a status ("CLBlastInvalidLeadDimA");
 * "CLBlastUnknownStatus" for a code CLBlast does not define. */
const char *pfx_clblast_status_name(int status);

/* Maps a CLBlast status to a pfx_status and records "<what>: CLBlast <name>". */
pfx_status pfx_clblast_error(pfx_runtime *rt, int status, const char *what);

/* Chooses rt->gemm from params, $PREFIXCL_GEMM and the device, and applies a
 * stored CLBlast GEMM tuning for the device (gemm_setup.c); called once by
 * pfx_runtime_create before any buffer exists (the host backend allocates
 * host-mappable ones). Errors are recorded for the thread (pfx_last_error(NULL)). */
pfx_status pfx_gemm_setup(pfx_runtime *rt, const pfx_runtime_params *params);

#endif
