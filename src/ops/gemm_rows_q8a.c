/* Few-row products against Q8_0 weights with int8 activations (gemm_rows.h,
 * a_q8): A's rows quantized to blocks of 32 (d = max |x| / 127 as a float,
 * q = round(x / d)), then per block an integer dot of 32 int8 pairs scaled
 * by both blocks' scales, as llama.cpp's q8_0 x q8_0 dot: the weights stay
 * int8 from memory to the multiply (the float path widened and scaled 32 of
 * them a block). AVX-512 VNNI (vpdpbusd on 256 bits), AVX2 (vpmaddubsw,
 * vpmaddwd) or plain C, picked at run time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_rows.h"
#include "half.h"
#include "q8_0.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* Q8_0 blocks of a weight row prefetched ahead (as the float path's rows_q8). */
#define Q8A_AHEAD 256

/* A's rows as int8 blocks: row i's block b at q + (i kb + b) 32, scale d[i kb + b]. */
typedef struct q8a_rows {
    int8_t *q;
    float *d;
    size_t kb;
} q8a_rows;

void pfx_gemm_rows_quantize_row(const float *x, size_t k, int8_t *q, float *d)
{
    for (size_t b = 0; b < k / PFX_Q8_0_BLOCK; b++) {
        const float *xb = x + b * PFX_Q8_0_BLOCK;
        float amax = 0.0f;
        bool finite = true;
        for (int j = 0; j < PFX_Q8_0_BLOCK; j++) {
            amax = fmaxf(amax, fabsf(xb[j]));
            finite = finite && isfinite(xb[j]);
        }
        if (!finite) /* carried as the scale: the sums go NaN, as the float path's */
            amax = NAN;
        const float db = amax / 127.0f, id = db > 0.0f ? 1.0f / db : 0.0f;
        d[b] = db;
        for (int j = 0; j < PFX_Q8_0_BLOCK; j++)
            q[b * PFX_Q8_0_BLOCK + (size_t)j] = isfinite(db) ? (int8_t)roundf(xb[j] * id) : 0;
    }
}

static void store(const pfx_gemm_rows_args *g, size_t i, size_t j, float s)
{
    float *c = g->c + i * g->ldc + j;
    *c = g->alpha * s + (g->beta != 0.0f ? g->beta * *c : 0.0f);
}

/* Outputs [j0, j1) of every row, plain C. */
static void range_plain(const pfx_gemm_rows_args *g, const q8a_rows *a, size_t j0, size_t j1)
{
    const size_t stride = g->ldb / PFX_Q8_0_BLOCK;
    for (size_t j = j0; j < j1; j++) {
        const pfx_q8_0_block *w = (const pfx_q8_0_block *)g->b + j * stride;
        for (size_t i = 0; i < g->m; i++) {
            float s = 0.0f;
            for (size_t b = 0; b < a->kb; b++) {
                const int8_t *x = a->q + (i * a->kb + b) * PFX_Q8_0_BLOCK;
                int32_t dot = 0;
                for (int l = 0; l < PFX_Q8_0_BLOCK; l++)
                    dot += (int32_t)w[b].q[l] * (int32_t)x[l];
                s += (float)dot * (pfx_half_to_float(w[b].d) * a->d[i * a->kb + b]);
            }
            store(g, i, j, s);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define Q8A_X86 1

/* The kernel of one instruction set: DOT(ax, sw) sums 4 products of |x|
 * (unsigned) and w with x's sign (signed) into each of 8 int32 lanes. NJ
 * weight rows a pass: as many independent sums. */
#define Q8A_RANGE(NAME, ATTR, DOT)                                                                 \
    static inline __attribute__((always_inline))                                                   \
    ATTR void NAME##_rows(const pfx_gemm_rows_args *g, const q8a_rows *a, size_t j, const int NJ)  \
    {                                                                                              \
        const size_t stride = g->ldb / PFX_Q8_0_BLOCK;                                             \
        const pfx_q8_0_block *w = (const pfx_q8_0_block *)g->b + j * stride;                       \
        __m256 acc[PFX_GEMM_ROWS_MAX][2];                                                          \
        for (size_t i = 0; i < g->m; i++)                                                          \
            acc[i][0] = acc[i][1] = _mm256_setzero_ps();                                           \
        for (size_t b = 0; b < a->kb; b++) {                                                       \
            __m256i wq[2];                                                                         \
            float dw[2];                                                                           \
            _Pragma("GCC unroll 2") for (int t = 0; t < NJ; t++)                                   \
            {                                                                                      \
                const pfx_q8_0_block *wb = w + (size_t)t * stride + b;                             \
                __builtin_prefetch(wb + Q8A_AHEAD);                                                \
                wq[t] = _mm256_loadu_si256((const __m256i *)wb->q);                                \
                dw[t] = _cvtsh_ss(wb->d);                                                          \
            }                                                                                      \
            for (size_t i = 0; i < g->m; i++) {                                                    \
                const __m256i x =                                                                  \
                    _mm256_loadu_si256((const __m256i *)(a->q + (i * a->kb + b) * 32));            \
                const __m256i ax = _mm256_sign_epi8(x, x);                                         \
                const float dx = a->d[i * a->kb + b];                                              \
                _Pragma("GCC unroll 2") for (int t = 0; t < NJ; t++)                               \
                {                                                                                  \
                    const __m256i s = DOT(ax, _mm256_sign_epi8(wq[t], x));                         \
                    acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw[t] * dx), \
                                                acc[i][t]);                                        \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (size_t i = 0; i < g->m; i++)                                                          \
            for (int t = 0; t < NJ; t++) {                                                         \
                __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[i][t]),                           \
                                      _mm256_extractf128_ps(acc[i][t], 1));                        \
                h = _mm_add_ps(h, _mm_movehl_ps(h, h));                                            \
                h = _mm_add_ss(h, _mm_movehdup_ps(h));                                             \
                store(g, i, j + (size_t)t, _mm_cvtss_f32(h));                                      \
            }                                                                                      \
    }                                                                                              \
    static ATTR void NAME(const pfx_gemm_rows_args *g, const q8a_rows *a, size_t j0, size_t j1)    \
    {                                                                                              \
        size_t j = j0;                                                                             \
        for (; j + 2 <= j1; j += 2)                                                                \
            NAME##_rows(g, a, j, 2);                                                               \
        if (j < j1)                                                                                \
            NAME##_rows(g, a, j, 1);                                                               \
    }

#define AVX2_ATTR __attribute__((target("avx2,fma,f16c")))
static inline __attribute__((always_inline)) AVX2_ATTR __m256i dot_avx2(__m256i ax, __m256i sw)
{
    /* pairs of |x| w fit int16 (2 x 127 x 127), the fours int32 */
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sw), _mm256_set1_epi16(1));
}
Q8A_RANGE(range_avx2, AVX2_ATTR, dot_avx2)

#define VNNI_ATTR __attribute__((target("avx512vnni,avx512vl,avx2,fma,f16c")))
static inline __attribute__((always_inline)) VNNI_ATTR __m256i dot_vnni(__m256i ax, __m256i sw)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sw);
}
Q8A_RANGE(range_vnni, VNNI_ATTR, dot_vnni)
#endif

typedef void (*q8a_range_fn)(const pfx_gemm_rows_args *g, const q8a_rows *a, size_t j0, size_t j1);

/* The kernel of `isa` ("avx512": VNNI, "avx2", "c"; NULL: the best the CPU
 * runs), or NULL where the CPU lacks it. */
static q8a_range_fn kernel_of(const char *isa)
{
#ifdef Q8A_X86
    __builtin_cpu_init();
    const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if ((!isa || !strcmp(isa, "avx512")) && vnni)
        return range_vnni;
    if ((!isa || !strcmp(isa, "avx2")) && avx2)
        return range_avx2;
#endif
    return !isa || !strcmp(isa, "c") ? range_plain : NULL;
}

const char *pfx_gemm_rows_q8a_isa(void)
{
#ifdef Q8A_X86
    q8a_range_fn f = kernel_of(NULL);
    return f == range_vnni ? "avx512vnni" : f == range_avx2 ? "avx2" : "c";
#else
    return "c";
#endif
}

bool pfx_gemm_rows_q8a_takes(const pfx_gemm_rows_args *g)
{
    return g->a_q8 && g->b_type == PFX_ROWS_Q8_0 && g->trans_b && g->k % PFX_Q8_0_BLOCK == 0 &&
           g->m >= 1 && g->m <= PFX_GEMM_ROWS_MAX;
}

bool pfx_gemm_rows_q8a_on(const pfx_gemm_rows_args *g, int threads, const char *isa)
{
    const q8a_range_fn range = kernel_of(isa);
    if (!range)
        return false;
    q8a_rows a = { .kb = g->k / PFX_Q8_0_BLOCK };
    a.q = malloc(g->m * g->k + 64);
    a.d = malloc(g->m * (a.kb + 1) * sizeof(float));
    if (!a.q || !a.d) { /* no room for A's blocks: the float path */
        free(a.q);
        free(a.d);
        pfx_gemm_rows_args f = *g;
        f.a_q8 = false;
        return pfx_gemm_rows_on(&f, threads, isa);
    }
    for (size_t i = 0; i < g->m; i++)
        pfx_gemm_rows_quantize_row(g->a + i * g->lda, g->k, a.q + i * g->k, a.d + i * a.kb);
    /* threads over pairs of weight rows, a second one only from ~64K weights each */
    const size_t units = (g->n + 1) / 2, min_units = 65536 / (2 * (g->k ? g->k : 1)) + 1;
    int t = threads < 1 ? 1 : threads;
    while (t > 1 && units / (size_t)t < min_units)
        t--;
#ifdef _OPENMP
#pragma omp parallel num_threads(t) if (t > 1)
    {
        const size_t id = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        const size_t j0 = 2 * (units * id / nt), j1 = 2 * (units * (id + 1) / nt);
        if (j0 < g->n)
            range(g, &a, j0, j1 < g->n ? j1 : g->n);
    }
#else
    (void)t;
    range(g, &a, 0, g->n);
#endif
    free(a.q);
    free(a.d);
    return true;
}
