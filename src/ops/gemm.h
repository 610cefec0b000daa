/*
 * The one dense-product wrapper of the library: every matrix product goes
 * through CLBlast (no hand-written GEMM kernels). Internal, not installed.
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
 * Errors: m, n, k, batch of 0 are PFX_ERROR_INVALID_SHAPE (checked here);
 * what CLBlast itself rejects (a leading dimension too small, a buffer too
 * small for the offsets and shapes, ...) comes back as PFX_ERROR_CLBLAST with
 * the CLBlast name ("CLBlastInsufficientMemoryC") in pfx_last_error(rt), or,
 * for codes in the OpenCL range, through pfx_cl_error (allocation failures as
 * PFX_ERROR_OUT_OF_MEMORY). `what` prefixes the message ("encoder: dW2").
 */
#ifndef PFX_OPS_GEMM_H
#define PFX_OPS_GEMM_H

#include "internal.h"

typedef struct pfx_gemm_operand {
    cl_mem mem;
    size_t offset;  /* elements from the start of mem */
    size_t ld;      /* row stride in elements, as stored */
    size_t stride;  /* batch stride in elements (strided batched only; may be 0) */
} pfx_gemm_operand;

/* Operand helpers: PFX_GEMM_OP(mem, offset, ld), PFX_GEMM_OPS(..., stride). */
#define PFX_GEMM_OP(mem_, offset_, ld_) ((pfx_gemm_operand){ (mem_), (offset_), (ld_), 0 })
#define PFX_GEMM_OPS(mem_, offset_, ld_, stride_) \
    ((pfx_gemm_operand){ (mem_), (offset_), (ld_), (stride_) })

/* C = alpha op(A) op(B) + beta C. */
pfx_status pfx_gemm(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                    size_t n, size_t k, float alpha, pfx_gemm_operand a, pfx_gemm_operand b,
                    float beta, pfx_gemm_operand c);

/* batch products, item i at offsets + i * stride of each operand. */
pfx_status pfx_gemm_strided_batched(pfx_runtime *rt, const char *what, bool trans_a,
                                    bool trans_b, size_t m, size_t n, size_t k, float alpha,
                                    pfx_gemm_operand a, pfx_gemm_operand b, float beta,
                                    pfx_gemm_operand c, size_t batch);

/* batch products with their own offsets (and alpha, beta) per item; all
 * items share the buffers, shapes and leading dimensions. */
pfx_status pfx_gemm_batched(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b,
                            size_t m, size_t n, size_t k, const float *alphas, cl_mem a,
                            const size_t *a_offsets, size_t lda, cl_mem b,
                            const size_t *b_offsets, size_t ldb, const float *betas, cl_mem c,
                            const size_t *c_offsets, size_t ldc, size_t batch);

/* The CLBlastStatusCode name of a status ("CLBlastInvalidLeadDimA");
 * "CLBlastUnknownStatus" for a code CLBlast does not define. */
const char *pfx_clblast_status_name(int status);

/* Maps a CLBlast status to a pfx_status and records "<what>: CLBlast <name>". */
pfx_status pfx_clblast_error(pfx_runtime *rt, int status, const char *what);

#endif
