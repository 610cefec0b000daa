/* Few-row products on the host (gemm_rows.h). */
#include "gemm_rows.h"

/* v16 values pass only between inline functions of one instruction set. */
#pragma GCC diagnostic ignored "-Wpsabi"

#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "q8_0.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* 16 floats; v16u the same read from any float address. */
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));

/* Rows of B [k, n] read side by side (range_mr in gemm_rows_kernel.h), and
 * how far ahead along each row the kernels prefetch, in bytes (0: none).
 * bench_gemm_rows on a 2-core Zen 5 (bench/README.md): 16 rows and 1 KB
 * ahead read one row 1.1x (float32) to 1.35x (16-bit) as fast as 32 rows
 * without prefetches, 8 rows 1.25-1.5x; 4 or 8 rows or 2 KB ahead read
 * slower, 32 rows with the prefetches alike. */
#define ROWS_KB 16
#define ROWS_PF 1024
/* Q8_0 blocks prefetched ahead: B [n, k] read along its rows (256 blocks,
 * 8.5 KB: 6 GB/s without, 26 GB/s with, one thread, a 41 MB weight from
 * memory on a 2-core EPYC), B [k, n] a row's blocks 8 visits ahead (+15 %). */
#define ROWS_Q8_ROWS_AHEAD 256
#define ROWS_Q8_COLS_AHEAD 8

static float b_at(const pfx_gemm_rows_args *g, size_t e)
{
    if (g->b_type == PFX_ROWS_F32)
        return ((const float *)g->b)[e];
    if (g->b_type == PFX_ROWS_Q8_0)
        return pfx_q8_0_at(g->b, e);
    return pfx_16bit_to_float(((const uint16_t *)g->b)[e], g->b_type == PFX_ROWS_BF16);
}

/* Columns [j0, j1) of B [k, n] one at a time (the columns after the last
 * whole block of 32). */
static void rows_columns_plain(const pfx_gemm_rows_args *g, size_t j0, size_t j1)
{
    for (size_t i = 0; i < g->m; i++)
        for (size_t j = j0; j < j1; j++) {
            float s = 0.0f;
            for (size_t p = 0; p < g->k; p++)
                s += g->a[i * g->lda + p] * b_at(g, p * g->ldb + j);
            float *c = g->c + i * g->ldc + j;
            *c = g->alpha * s + (g->beta != 0.0f ? g->beta * *c : 0.0f);
        }
}

/* Plain C: the compiler's vectors for the build's baseline. */
static inline __attribute__((always_inline)) v16 half16_plain(const uint16_t *p)
{
    v16 r;
    for (int l = 0; l < 16; l++)
        r[l] = pfx_half_to_float(p[l]);
    return r;
}
static inline __attribute__((always_inline)) v16 bf16x16_plain(const uint16_t *p)
{
    v16 r;
    for (int l = 0; l < 16; l++)
        r[l] = pfx_bf16_to_float(p[l]);
    return r;
}
static inline __attribute__((always_inline)) v16 q8x16_plain(const int8_t *p)
{
    v16 r;
    for (int l = 0; l < 16; l++)
        r[l] = (float)p[l];
    return r;
}
#define ROWS_ATTR
#define ROWS_NAME(x)         x##_plain
#define ROWS_FMA(acc, x, v)  ((acc) + (x) * (v))
#define ROWS_FMAV(acc, x, v) ((acc) + (x) * (v))
#define ROWS_HALF(p)         half16_plain(p)
#define ROWS_BF16(p)         bf16x16_plain(p)
#define ROWS_Q8(p)           q8x16_plain(p)
#define ROWS_SCALE(h)        pfx_half_to_float(h)
#include "gemm_rows_kernel.h"
#undef ROWS_ATTR
#undef ROWS_NAME
#undef ROWS_FMA
#undef ROWS_FMAV
#undef ROWS_HALF
#undef ROWS_BF16
#undef ROWS_Q8
#undef ROWS_SCALE

#if defined(__x86_64__) && defined(__GNUC__)
#define PFX_ROWS_X86 1

/* AVX2 + FMA + F16C: a v16 is two ymm registers. */
#define AVX2_ATTR __attribute__((target("avx2,fma,f16c")))
typedef union {
    __m256 h[2];
    v16 v;
} v16_avx2;
static inline __attribute__((always_inline)) AVX2_ATTR v16 fma_avx2(v16 acc, v16 x, v16 b)
{
    v16_avx2 r = { .v = acc }, xs = { .v = x }, bs = { .v = b };
    r.h[0] = _mm256_fmadd_ps(xs.h[0], bs.h[0], r.h[0]);
    r.h[1] = _mm256_fmadd_ps(xs.h[1], bs.h[1], r.h[1]);
    return r.v;
}
static inline __attribute__((always_inline)) AVX2_ATTR v16 half16_avx2(const uint16_t *p)
{
    v16_avx2 r;
    r.h[0] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    r.h[1] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8)));
    return r.v;
}
/* bfloat16 to float: zero-extend to 32 bits, shift into the upper half */
static inline __attribute__((always_inline)) AVX2_ATTR __m256 bf16x8_avx2(const uint16_t *p)
{
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline __attribute__((always_inline)) AVX2_ATTR v16 bf16x16_avx2(const uint16_t *p)
{
    v16_avx2 r;
    r.h[0] = bf16x8_avx2(p);
    r.h[1] = bf16x8_avx2(p + 8);
    return r.v;
}
static inline __attribute__((always_inline)) AVX2_ATTR v16 q8x16_avx2(const int8_t *p)
{
    v16_avx2 r;
    r.h[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
    r.h[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8))));
    return r.v;
}
#define ROWS_ATTR            AVX2_ATTR
#define ROWS_NAME(x)         x##_avx2
#define ROWS_FMA(acc, x, v)  fma_avx2((acc), (v16){ 0 } + (x), (v))
#define ROWS_FMAV(acc, x, v) fma_avx2((acc), (x), (v))
#define ROWS_HALF(p)         half16_avx2(p)
#define ROWS_BF16(p)         bf16x16_avx2(p)
#define ROWS_Q8(p)           q8x16_avx2(p)
#define ROWS_SCALE(h)        _cvtsh_ss(h)
#include "gemm_rows_kernel.h"
#undef ROWS_ATTR
#undef ROWS_NAME
#undef ROWS_FMA
#undef ROWS_FMAV
#undef ROWS_HALF
#undef ROWS_BF16
#undef ROWS_Q8
#undef ROWS_SCALE

/* AVX-512F: a v16 is one zmm register. */
#define AVX512_ATTR __attribute__((target("avx512f,avx2,fma,f16c")))
static inline __attribute__((always_inline)) AVX512_ATTR v16 fma_avx512(v16 acc, v16 x, v16 b)
{
    return (v16)_mm512_fmadd_ps((__m512)x, (__m512)b, (__m512)acc);
}
static inline __attribute__((always_inline)) AVX512_ATTR v16 half16_avx512(const uint16_t *p)
{
    return (v16)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
static inline __attribute__((always_inline)) AVX512_ATTR v16 bf16x16_avx512(const uint16_t *p)
{
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return (v16)_mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
static inline __attribute__((always_inline)) AVX512_ATTR v16 q8x16_avx512(const int8_t *p)
{
    return (v16)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
#define ROWS_ATTR            AVX512_ATTR
#define ROWS_NAME(x)         x##_avx512
#define ROWS_FMA(acc, x, v)  fma_avx512((acc), (v16){ 0 } + (x), (v))
#define ROWS_FMAV(acc, x, v) fma_avx512((acc), (x), (v))
#define ROWS_HALF(p)         half16_avx512(p)
#define ROWS_BF16(p)         bf16x16_avx512(p)
#define ROWS_Q8(p)           q8x16_avx512(p)
#define ROWS_SCALE(h)        _cvtsh_ss(h)
#include "gemm_rows_kernel.h"
#undef ROWS_ATTR
#undef ROWS_NAME
#undef ROWS_FMA
#undef ROWS_FMAV
#undef ROWS_HALF
#undef ROWS_BF16
#undef ROWS_Q8
#undef ROWS_SCALE
#endif

typedef void (*rows_range_fn)(const pfx_gemm_rows_args *g, size_t j0, size_t j1);
typedef void (*rows_widen_fn)(const pfx_gemm_rows_widen_args *w, size_t r0, size_t r1);

/* The kernels of one instruction set. */
typedef struct rows_kernels {
    const char *name;
    rows_range_fn range;
    rows_widen_fn widen;
} rows_kernels;

/* The kernels of `isa` ("avx512", "avx2", "c"; NULL: the best the CPU runs),
 * or NULL where the CPU lacks it. */
static const rows_kernels *kernels_of(const char *isa)
{
    static const rows_kernels plain = { "c", range_plain, widen_plain };
#ifdef PFX_ROWS_X86
    static const rows_kernels avx512 = { "avx512", range_avx512, widen_avx512 };
    static const rows_kernels avx2 = { "avx2", range_avx2, widen_avx2 };
    __builtin_cpu_init();
    const bool has_avx512 = __builtin_cpu_supports("avx512f");
    /* every AVX2 + FMA CPU has F16C */
    const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if ((!isa || !strcmp(isa, "avx512")) && has_avx512)
        return &avx512;
    if ((!isa || !strcmp(isa, "avx2")) && has_avx2)
        return &avx2;
#endif
    return !isa || !strcmp(isa, "c") ? &plain : NULL;
}

const char *pfx_gemm_rows_isa(void)
{
    return kernels_of(NULL)->name;
}

bool pfx_gemm_rows_on(const pfx_gemm_rows_args *g, int threads, const char *isa)
{
    if (pfx_gemm_rows_q8a_takes(g))
        return pfx_gemm_rows_q8a_on(g, threads, isa);
    const rows_kernels *ks = kernels_of(isa);
    if (!ks)
        return false;
    const rows_range_fn range = ks->range;
    /* a thread's share: whole blocks (32 columns of B [k, n], 2 rows of B [n, k], 4 of Q8_0) */
    const size_t unit = g->trans_b ? (g->b_type == PFX_ROWS_Q8_0 ? 4 : 2) : 32;
    const size_t units = (g->n + unit - 1) / unit;
    /* a second thread only from ~64K weights each (a guess: not measured) */
    const size_t min_units = (65536 / (g->k ? g->k : 1) + unit - 1) / unit + 1;
    int t = threads < 1 ? 1 : threads;
    while (t > 1 && units / (size_t)t < min_units)
        t--;
    if (t == 1) {
        range(g, 0, g->n);
        return true;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(t)
    {
        const size_t id = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        const size_t u0 = units * id / nt, u1 = units * (id + 1) / nt;
        const size_t j1 = u1 * unit < g->n ? u1 * unit : g->n;
        if (u0 * unit < j1)
            range(g, u0 * unit, j1);
    }
#else
    range(g, 0, g->n);
#endif
    return true;
}

bool pfx_gemm_rows_widen_on(const pfx_gemm_rows_widen_args *w, int threads, const char *isa)
{
    const rows_kernels *ks = kernels_of(isa);
    if (!ks)
        return false;
    /* a second thread only from ~64K elements each (as the products) */
    const size_t min_rows = 65536 / (w->cols ? w->cols : 1) + 1;
    int t = threads < 1 ? 1 : threads;
    while (t > 1 && w->rows / (size_t)t < min_rows)
        t--;
    if (t == 1) {
        ks->widen(w, 0, w->rows);
        return true;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(t)
    {
        const size_t id = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        ks->widen(w, w->rows * id / nt, w->rows * (id + 1) / nt);
    }
#else
    ks->widen(w, 0, w->rows);
#endif
    return true;
}

void pfx_gemm_rows_widen(const pfx_gemm_rows_widen_args *w, int threads)
{
    pfx_gemm_rows_widen_on(w, threads, NULL);
}

void pfx_gemm_rows(const pfx_gemm_rows_args *g, int threads)
{
    pfx_gemm_rows_on(g, threads, NULL);
}

bool pfx_gemm_rows_enabled(void)
{
    const char *v = getenv("PREFIXCL_GEMM_ROWS");
    return !v || strcmp(v, "off") != 0;
}

bool pfx_gemm_rows_wanted(size_t m, size_t n, size_t k, bool trans_b)
{
    (void)n, (void)k;
    /* bench_gemm_rows on GPT-2 small's weights (bench/README.md): 1.1-2.3x
     * OpenBLAS's sgemm from 2 rows, 1.0-1.2x its sgemv on one row of B
     * [k, n]; one row of B [n, k] (the tied head) 0.95x: sgemv kept */
    if (m < 1 || m > PFX_GEMM_ROWS_MAX || (m == 1 && trans_b))
        return false;
    return pfx_gemm_rows_enabled();
}

void pfx_gemm_rows_parallel(size_t n, int threads, void (*fn)(void *ctx, size_t i0, size_t i1),
                            void *ctx)
{
    int t = threads < 1 ? 1 : threads;
    if ((size_t)t > n)
        t = (int)n;
    if (t <= 1) {
        if (n)
            fn(ctx, 0, n);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(t)
    {
        const size_t id = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        if (n * id / nt < n * (id + 1) / nt)
            fn(ctx, n * id / nt, n * (id + 1) / nt);
    }
#else
    fn(ctx, 0, n);
#endif
}
