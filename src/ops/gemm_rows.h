/*
 * Products of a few rows against a weight, on the host (the decode step of
 * the host backend, gemm_host.c): C[m x n] = alpha A op(B) + beta C with A
 * row-major [m, k] and B stored [k, n] or, trans_b, [n, k], in float32, as
 * half or bfloat16 bits, or as Q8_0 blocks (src/runtime/q8_0.h). One pass
 * over B computes all m rows (OpenBLAS's
 * sgemm packs B for a few rows and reads it about four times as slowly; its
 * sgemv takes one row at a time), 16-bit values widened in registers as they
 * are read (bfloat16 by a shift: no AVX512_BF16 needed), Q8_0 values
 * converted and scaled 16 at a time. Vector code for
 * AVX-512, AVX2 + F16C + FMA or plain C, picked at run time. With beta == 0,
 * C is not read. Threads: column ranges of B, one per thread.
 */
#ifndef PFX_OPS_GEMM_ROWS_H
#define PFX_OPS_GEMM_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most rows one pass takes. */
#define PFX_GEMM_ROWS_MAX 8

/* How B is stored. */
typedef enum pfx_gemm_rows_type {
    PFX_ROWS_F32 = 0,
    PFX_ROWS_F16,  /* uint16_t half bits */
    PFX_ROWS_BF16, /* uint16_t bfloat16 bits */
    PFX_ROWS_Q8_0, /* pfx_q8_0_block: blocks of 32 elements along B's rows */
} pfx_gemm_rows_type;

typedef struct pfx_gemm_rows_args {
    bool trans_b;
    pfx_gemm_rows_type b_type;
    size_t m, n, k;
    float alpha, beta;
    const float *a;
    size_t lda;
    const void *b; /* elements of b_type (Q8_0: element 0 starts a block) */
    size_t ldb;    /* Q8_0: a multiple of 32 */
    float *c;
    size_t ldc;
    /* With B Q8_0 [n, k] (trans_b, k whole blocks): A's rows quantized to
     * int8 blocks of 32 first and integer dot products taken, as llama.cpp's
     * q8_0 x q8_0 dot (gemm_rows_q8a.c); each row of A then carries a
     * rounding of half a step of its block's max / 127. Elsewhere ignored. */
    bool a_q8;
} pfx_gemm_rows_args;

/* Runs the product on up to `threads` threads; m must be 1..PFX_GEMM_ROWS_MAX. */
void pfx_gemm_rows(const pfx_gemm_rows_args *g, int threads);

/* The same with the kernels of one instruction set ("avx512", "avx2", "c"),
 * for tests; false (nothing done) where the CPU lacks it. */
bool pfx_gemm_rows_on(const pfx_gemm_rows_args *g, int threads, const char *isa);

/* False where $PREFIXCL_GEMM_ROWS is "off": every product then goes to the
 * host BLAS, 16-bit weights widened first (the comparison of the two). */
bool pfx_gemm_rows_enabled(void);

/* Whether pfx_gemm_rows beats the host BLAS on this float32 product (the
 * measured choice: bench/README.md, "Few-row products"). */
bool pfx_gemm_rows_wanted(size_t m, size_t n, size_t k, bool trans_b);

/* A 16-bit or Q8_0 matrix widened into float32 on the host: the many-row
 * products of a CPU device widen blockwise into a scratch for the host BLAS. */
typedef struct pfx_gemm_rows_widen_args {
    pfx_gemm_rows_type type; /* PFX_ROWS_F16, PFX_ROWS_BF16 or PFX_ROWS_Q8_0 */
    size_t rows, cols;
    const void *src;   /* uint16_t bits, or Q8_0 blocks */
    size_t src_offset; /* elements from src to element [0, 0] */
    size_t ld_src;
    float *dst;
    size_t ld_dst;
} pfx_gemm_rows_widen_args;

/* dst = src as float32 on up to `threads` threads, with the best kernels the
 * CPU runs. */
void pfx_gemm_rows_widen(const pfx_gemm_rows_widen_args *w, int threads);

/* The same with the kernels of one instruction set; false where the CPU
 * lacks it (as pfx_gemm_rows_on). */
bool pfx_gemm_rows_widen_on(const pfx_gemm_rows_widen_args *w, int threads, const char *isa);

/* int8 activations (a_q8): whether g takes them; the product on up to
 * `threads` threads with the kernel of one instruction set ("avx512": AVX-512
 * VNNI, "avx2", "c"; NULL: the best the CPU runs), false where the CPU lacks
 * it; the kernel pfx_gemm_rows takes ("avx512vnni", "avx2", "c"). */
bool pfx_gemm_rows_q8a_takes(const pfx_gemm_rows_args *g);
bool pfx_gemm_rows_q8a_on(const pfx_gemm_rows_args *g, int threads, const char *isa);
const char *pfx_gemm_rows_q8a_isa(void);
/* x[0, k) (k whole blocks of 32) as int8 blocks: d[b] = max |x| / 127 over
 * block b, q = round(x / d[b]); a block with a value that is not finite gets
 * d NaN. */
void pfx_gemm_rows_quantize_row(const float *x, size_t k, int8_t *q, float *d);

/* fn(ctx, i0, i1) over [0, n) in up to `threads` contiguous ranges, each on
 * a thread of the few-row products' team (the host decode step's attention
 * over the cache: memory-bound at batch 8, as the weights). */
void pfx_gemm_rows_parallel(size_t n, int threads, void (*fn)(void *ctx, size_t i0, size_t i1),
                            void *ctx);

/* The instruction set pfx_gemm_rows runs with ("avx512", "avx2", "c"). */
const char *pfx_gemm_rows_isa(void);

#endif
