/*
 * Suite 'gemm_rows': the few-row products of the host backend
 * (src/ops/gemm_rows.c) against a double product of the same values, with
 * every instruction set the CPU runs (AVX-512, AVX2, plain C), one and two
 * threads: 1..8 rows; B stored [k, n] (GPT-2's Conv1D) and [n, k] (Llama,
 * the tied head), float32, half and bfloat16; sizes off the kernels' blocks (columns
 * of 32, rows of 2, sums of 16, B's rows taken 16 at a time), row strides
 * wider than the rows, alpha/beta; C with beta 0 holding NaN (not read) and
 * its elements between rows left as they were. The host widening of 16-bit
 * matrices (pfx_gemm_rows_widen) bit for bit against the scalar conversion
 * on every bit pattern's kind (subnormals, infinities, NaN). Q8_0 blocks
 * likewise: products against the double product of the dequantized values,
 * widening bit for bit from views that start inside a block; with int8
 * activations (a_q8: VNNI, AVX2, C) against the double product of A as
 * quantized. No OpenCL device.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gemm_rows.h"
#include "half.h"
#include "q8_0.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

#define F32  PFX_ROWS_F32
#define F16  PFX_ROWS_F16
#define BF16 PFX_ROWS_BF16

typedef struct rows_case {
    size_t m, n, k;
    bool trans_b;
    pfx_gemm_rows_type type;
    float alpha, beta;
} rows_case;

static const rows_case cases[] = {
    { 1, 1, 1, false, F32, 1.0f, 0.0f },
    { 1, 97, 33, false, F32, 1.0f, 0.0f },
    { 2, 64, 100, false, F16, 0.5f, 1.0f },
    { 3, 33, 17, true, F32, 1.0f, 1.0f },
    { 4, 129, 65, false, F32, 2.0f, 0.0f },
    { 5, 31, 47, true, F16, 1.0f, 0.0f },
    { 6, 161, 96, false, F16, 1.0f, 0.5f },
    { 7, 101, 16, true, F32, 1.0f, 0.0f },
    { 8, 300, 75, false, F32, 1.0f, 1.0f },
    { 8, 257, 131, true, F16, 0.25f, 1.0f },
    { 8, 96, 1, false, F16, 1.0f, 0.0f },
    { 1, 2304, 768, true, F32, 1.0f, 0.0f }, /* enough work for two threads */
    { 8, 2304, 768, false, F16, 1.0f, 1.0f },
    { 2, 3000, 100, false, F32, 1.0f, 0.0f },
    { 1, 45, 19, false, BF16, 1.0f, 0.0f },
    { 3, 70, 77, true, BF16, 1.0f, 0.5f },
    { 6, 161, 96, false, BF16, 2.0f, 1.0f },
    { 8, 257, 131, true, BF16, 1.0f, 0.0f },
    { 8, 2304, 768, false, BF16, 1.0f, 0.0f },
    { 2, 2304, 768, true, BF16, 0.5f, 1.0f },
    { 3, 64, 16, false, F32, 1.0f, 0.0f },  /* B's rows: one whole block */
    { 1, 95, 32, false, BF16, 1.0f, 0.0f }, /* two whole blocks, odd n */
    { 5, 33, 48, false, F16, 1.0f, 1.0f },  /* three */
};

static const char *const isas[] = { "avx512", "avx2", "c" };

/* B stored as rc->type: float32, 16-bit (b16) or Q8_0 blocks (bq; ldb whole
 * blocks) from uniform values; b32 the values stored, which the reference
 * multiplies. */
static void run_case(const rows_case *rc, const char *isa, int threads, uint64_t seed, bool a_q8)
{
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    const size_t m = rc->m, n = rc->n, k = rc->k;
    const size_t lda = k + 3, ldc = n + 5;
    const bool q8 = rc->type == PFX_ROWS_Q8_0;
    const size_t br = rc->trans_b ? n : k, bc = rc->trans_b ? k : n;
    const size_t ldb = q8 ? (bc + 31) / 32 * 32 + 32 : bc + 7;
    float *a = malloc(m * lda * sizeof(float)), *b32 = malloc(br * ldb * sizeof(float));
    uint16_t *b16 = malloc(br * ldb * sizeof(uint16_t));
    pfx_q8_0_block *bq = malloc(br * ldb / 32 * sizeof(*bq));
    float *c = malloc(m * ldc * sizeof(float)), *c0 = malloc(m * ldc * sizeof(float));
    double *want = malloc(m * n * sizeof(double));
    float *got = malloc(m * n * sizeof(float));
    assert_true(a && b32 && b16 && bq && c && c0 && want && got);
    for (size_t i = 0; i < m * lda; i++)
        a[i] = (float)ref_rng_uniform(&rng, -1.0, 1.0);
    for (size_t i = 0; i < br * ldb; i++) {
        /* the reference multiplies the 16-bit values exactly as stored */
        const int bf16 = rc->type == PFX_ROWS_BF16;
        b16[i] = pfx_float_to_16bit((float)ref_rng_uniform(&rng, -1.0, 1.0), bf16);
        b32[i] = rc->type != PFX_ROWS_F32 ? pfx_16bit_to_float(b16[i], bf16)
                                          : (float)ref_rng_uniform(&rng, -1.0, 1.0);
    }
    for (size_t i = 0; q8 && i < br * ldb / 32; i++) {
        assert_true(pfx_q8_0_quantize(b32 + 32 * i, &bq[i]));
        for (size_t j = 0; j < 32; j++)
            b32[32 * i + j] = pfx_q8_0_value(&bq[i], (int)j);
    }
    for (size_t i = 0; i < m * ldc; i++)
        c0[i] = rc->beta == 0.0f && i % ldc < n ? NAN : (float)ref_rng_uniform(&rng, -1.0, 1.0);
    memcpy(c, c0, m * ldc * sizeof(float));
    /* int8 activations: the reference multiplies A's rows as quantized,
     * each value within half a step of its block's scale */
    double *aq = malloc(m * lda * sizeof(double));
    int8_t *q = malloc(k + 32);
    float *d = malloc((k / 32 + 1) * sizeof(float));
    assert_true(aq && q && d);
    const bool quantized = pfx_gemm_rows_q8a_takes(&(pfx_gemm_rows_args){
        .trans_b = rc->trans_b, .b_type = rc->type, .m = m, .k = k, .a_q8 = a_q8 });
    for (size_t i = 0; i < m; i++) {
        if (quantized)
            pfx_gemm_rows_quantize_row(a + i * lda, k, q, d);
        for (size_t p = 0; p < k; p++) {
            aq[i * lda + p] = a[i * lda + p];
            if (!quantized)
                continue;
            aq[i * lda + p] = (double)d[p / 32] * q[p];
            assert_true(fabs(aq[i * lda + p] - a[i * lda + p]) <= 0.5001 * d[p / 32]);
        }
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t p = 0; p < k; p++)
                s += aq[i * lda + p] * b32[rc->trans_b ? j * ldb + p : p * ldb + j];
            want[i * n + j] =
                rc->alpha * s + (rc->beta != 0.0f ? rc->beta * (double)c0[i * ldc + j] : 0.0);
        }
    const pfx_gemm_rows_args g = { .trans_b = rc->trans_b,
                                   .b_type = rc->type,
                                   .m = m,
                                   .n = n,
                                   .k = k,
                                   .alpha = rc->alpha,
                                   .beta = rc->beta,
                                   .a = a,
                                   .lda = lda,
                                   .b = q8                         ? (const void *)bq
                                        : rc->type != PFX_ROWS_F32 ? (const void *)b16
                                                                   : b32,
                                   .ldb = ldb,
                                   .c = c,
                                   .ldc = ldc,
                                   .a_q8 = a_q8 };
    if (pfx_gemm_rows_on(&g, threads, isa)) {
        for (size_t i = 0; i < m; i++) {
            memcpy(got + i * n, c + i * ldc, n * sizeof(float));
            for (size_t j = n; j < ldc; j++) /* between rows: untouched */
                assert_memory_equal(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float));
        }
        const double err = rel_l2(want, got, m * n);
        static const char *const type_names[] = { "", " half", " bfloat16", " Q8_0" };
        if (!(err <= TOL_ENC_F32))
            fail_msg("%s, %d threads, m=%zu n=%zu k=%zu%s%s%s: relative L2 error %.3g > %.3g", isa,
                     threads, m, n, k, rc->trans_b ? " B^T" : "", type_names[rc->type],
                     quantized ? ", int8 A" : "", err, TOL_ENC_F32);
    }
    free(aq), free(q), free(d);
    free(a), free(b32), free(b16), free(bq), free(c), free(c0), free(want), free(got);
}

/* Every case with every instruction set, one and two threads. */
static void run_cases(const rows_case *cs, size_t n, uint64_t seed, bool a_q8)
{
    for (size_t i = 0; i < n; i++)
        for (size_t s = 0; s < sizeof(isas) / sizeof(isas[0]); s++)
            for (int threads = 1; threads <= 2; threads++)
                run_case(&cs[i], isas[s], threads, seed + i, a_q8);
}

static void test_rows_against_double(void **state)
{
    (void)state;
    run_cases(cases, sizeof(cases) / sizeof(cases[0]), 1000, false);
}

/* The plain C kernels exist everywhere; the best set is one of the three. */
static void test_rows_isa(void **state)
{
    (void)state;
    const char *best = pfx_gemm_rows_isa();
    assert_true(!strcmp(best, "avx512") || !strcmp(best, "avx2") || !strcmp(best, "c"));
    float a = 2.0f, b = 3.0f, c = NAN;
    const pfx_gemm_rows_args g = { .m = 1,
                                   .n = 1,
                                   .k = 1,
                                   .alpha = 1.0f,
                                   .a = &a,
                                   .lda = 1,
                                   .b = &b,
                                   .ldb = 1,
                                   .c = &c,
                                   .ldc = 1 };
    assert_true(pfx_gemm_rows_on(&g, 1, "c"));
    assert_true(c == 6.0f);
    assert_false(pfx_gemm_rows_on(&g, 1, "no such set"));
}

typedef struct widen_case {
    size_t rows, cols;
    pfx_gemm_rows_type type;
} widen_case;

static void widen_case_run(const widen_case *wc, const char *isa, int threads, uint64_t seed)
{
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    const size_t ld_src = wc->cols + 3, ld_dst = wc->cols + 5;
    uint16_t *src = malloc(wc->rows * ld_src * sizeof(uint16_t));
    float *dst = malloc(wc->rows * ld_dst * sizeof(float));
    assert_true(src && dst);
    for (size_t i = 0; i < wc->rows * ld_src; i++)
        src[i] = (uint16_t)(ref_rng_next(&rng) >> 48); /* any bit pattern */
    for (size_t i = 0; i < wc->rows * ld_dst; i++)
        dst[i] = -7.0f;
    const pfx_gemm_rows_widen_args w = { .type = wc->type,
                                         .rows = wc->rows,
                                         .cols = wc->cols,
                                         .src = src,
                                         .ld_src = ld_src,
                                         .dst = dst,
                                         .ld_dst = ld_dst };
    if (pfx_gemm_rows_widen_on(&w, threads, isa)) {
        const int bf16 = wc->type == PFX_ROWS_BF16;
        for (size_t r = 0; r < wc->rows; r++)
            for (size_t c = 0; c < ld_dst; c++) {
                const float got = dst[r * ld_dst + c];
                if (c >= wc->cols) { /* between rows: untouched */
                    assert_true(got == -7.0f);
                    continue;
                }
                const float want = pfx_16bit_to_float(src[r * ld_src + c], bf16);
                if (isnan(want) ? !isnan(got) : memcmp(&got, &want, sizeof(float)) != 0)
                    fail_msg("%s, %d threads, %zu x %zu%s: [%zu, %zu] of 0x%04x: %a, not %a", isa,
                             threads, wc->rows, wc->cols, bf16 ? " bfloat16" : " half", r, c,
                             src[r * ld_src + c], (double)got, (double)want);
            }
    }
    free(src), free(dst);
}

static void test_widen_exact(void **state)
{
    (void)state;
    static const widen_case wcases[] = {
        { 1, 1, F16 },   { 3, 15, F16 },   { 5, 16, BF16 },    { 7, 37, F16 },
        { 2, 33, BF16 }, { 64, 768, F16 }, { 300, 257, BF16 }, { 200, 2304, F16 },
    };
    for (size_t i = 0; i < sizeof(wcases) / sizeof(wcases[0]); i++)
        for (size_t s = 0; s < sizeof(isas) / sizeof(isas[0]); s++)
            for (int threads = 1; threads <= 2; threads++)
                widen_case_run(&wcases[i], isas[s], threads, 2000 + i);
    const pfx_gemm_rows_widen_args none = { .type = F16 };
    assert_false(pfx_gemm_rows_widen_on(&none, 1, "no such set"));
}

static void test_rows_q8_0(void **state)
{
    (void)state;
    static const rows_case q8_cases[] = {
        { 1, 1, 1, false, PFX_ROWS_Q8_0, 1.0f, 0.0f },
        { 1, 97, 33, false, PFX_ROWS_Q8_0, 1.0f, 0.0f },
        { 2, 64, 100, true, PFX_ROWS_Q8_0, 0.5f, 1.0f },
        { 3, 33, 47, true, PFX_ROWS_Q8_0, 1.0f, 1.0f },
        { 5, 161, 96, false, PFX_ROWS_Q8_0, 1.0f, 0.5f },
        { 7, 101, 16, true, PFX_ROWS_Q8_0, 2.0f, 0.0f },
        { 8, 300, 75, false, PFX_ROWS_Q8_0, 1.0f, 1.0f },
        { 8, 257, 131, true, PFX_ROWS_Q8_0, 0.25f, 0.0f },
        { 1, 2304, 768, true, PFX_ROWS_Q8_0, 1.0f, 0.0f },
        { 1, 2304, 768, false, PFX_ROWS_Q8_0, 1.0f, 0.0f },
        { 8, 2304, 768, false, PFX_ROWS_Q8_0, 1.0f, 1.0f },
        /* B [k, n] 4, 2 and 1 blocks a row a pass, and what remains */
        { 2, 200, 70, false, PFX_ROWS_Q8_0, 1.0f, 0.0f },
        { 3, 161, 64, false, PFX_ROWS_Q8_0, 0.5f, 1.0f },
        { 4, 100, 40, false, PFX_ROWS_Q8_0, 1.0f, 0.0f },
    };
    run_cases(q8_cases, sizeof(q8_cases) / sizeof(q8_cases[0]), 3000, false);
}

/* Q8_0 B [n, k] with int8 activations (a_q8): against the double product of
 * A as quantized (the integer dots exact, the scales' products rounded
 * once); where a_q8 does not apply (B [k, n], k not whole blocks, float32
 * B), the float path. */
static void test_rows_q8_0_int8_a(void **state)
{
    (void)state;
    static const rows_case qa_cases[] = {
        { 1, 1, 32, true, PFX_ROWS_Q8_0, 1.0f, 0.0f },
        { 1, 97, 64, true, PFX_ROWS_Q8_0, 1.0f, 0.0f },
        { 2, 64, 96, true, PFX_ROWS_Q8_0, 0.5f, 1.0f },
        { 3, 33, 32, true, PFX_ROWS_Q8_0, 1.0f, 1.0f },
        { 5, 161, 128, true, PFX_ROWS_Q8_0, 1.0f, 0.5f },
        { 7, 101, 160, true, PFX_ROWS_Q8_0, 2.0f, 0.0f },
        { 8, 257, 96, true, PFX_ROWS_Q8_0, 0.25f, 0.0f },
        { 1, 2304, 768, true, PFX_ROWS_Q8_0, 1.0f, 0.0f },
        { 8, 769, 768, true, PFX_ROWS_Q8_0, 1.0f, 1.0f },
        { 2, 64, 100, true, PFX_ROWS_Q8_0, 1.0f, 0.0f },  /* k not whole blocks */
        { 3, 161, 64, false, PFX_ROWS_Q8_0, 0.5f, 1.0f }, /* B [k, n] */
        { 2, 70, 64, true, PFX_ROWS_F32, 1.0f, 0.0f },
    };
    run_cases(qa_cases, sizeof(qa_cases) / sizeof(qa_cases[0]), 5000, true);
    const char *best = pfx_gemm_rows_q8a_isa();
    assert_true(!strcmp(best, "avx512vnni") || !strcmp(best, "avx2") || !strcmp(best, "c"));
    /* a value that is not finite reaches its row of C, as the float path's */
    pfx_q8_0_block w[2];
    float x[64], c[2] = { 0.0f, 0.0f };
    for (int j = 0; j < 64; j++)
        x[j] = (float)(j % 7) - 3.0f;
    assert_true(pfx_q8_0_quantize(x, &w[0]) && pfx_q8_0_quantize(x + 32, &w[1]));
    x[40] = INFINITY;
    const pfx_gemm_rows_args g = { .trans_b = true,
                                   .b_type = PFX_ROWS_Q8_0,
                                   .m = 1,
                                   .n = 1,
                                   .k = 64,
                                   .alpha = 1.0f,
                                   .a = x,
                                   .lda = 64,
                                   .b = w,
                                   .ldb = 64,
                                   .c = c,
                                   .ldc = 1,
                                   .a_q8 = true };
    for (size_t s = 0; s < sizeof(isas) / sizeof(isas[0]); s++)
        if (pfx_gemm_rows_on(&g, 1, isas[s]))
            assert_true(isnan(c[0]));
}

/* Q8_0 widened from views that start anywhere in a block, bit for bit. */
static void test_widen_q8_0(void **state)
{
    (void)state;
    static const struct {
        size_t rows, cols, offset;
    } wq[] = { { 1, 1, 0 }, { 3, 37, 5 }, { 4, 64, 16 }, { 9, 50, 31 }, { 70, 768, 32 } };
    for (size_t i = 0; i < sizeof(wq) / sizeof(wq[0]); i++) {
        const size_t ld_src = (wq[i].cols + 31) / 32 * 32 + 32, ld_dst = wq[i].cols + 5;
        const size_t blocks = (wq[i].offset + wq[i].rows * ld_src) / 32 + 1;
        pfx_q8_0_block *src = malloc(blocks * sizeof(*src));
        float *dst = malloc(wq[i].rows * ld_dst * sizeof(float));
        assert_true(src && dst);
        ref_rng rng;
        ref_rng_seed(&rng, 4000 + i);
        for (size_t b = 0; b < blocks; b++) {
            float x[32];
            for (int j = 0; j < 32; j++)
                x[j] = (float)ref_rng_uniform(&rng, -5.0, 5.0);
            assert_true(pfx_q8_0_quantize(x, &src[b]));
        }
        for (size_t s = 0; s < sizeof(isas) / sizeof(isas[0]); s++)
            for (int threads = 1; threads <= 2; threads++) {
                for (size_t e = 0; e < wq[i].rows * ld_dst; e++)
                    dst[e] = -7.0f;
                const pfx_gemm_rows_widen_args w = { .type = PFX_ROWS_Q8_0,
                                                     .rows = wq[i].rows,
                                                     .cols = wq[i].cols,
                                                     .src = src,
                                                     .src_offset = wq[i].offset,
                                                     .ld_src = ld_src,
                                                     .dst = dst,
                                                     .ld_dst = ld_dst };
                if (!pfx_gemm_rows_widen_on(&w, threads, isas[s]))
                    continue;
                for (size_t r = 0; r < wq[i].rows; r++)
                    for (size_t c = 0; c < ld_dst; c++) {
                        const float got = dst[r * ld_dst + c];
                        const float want = c < wq[i].cols
                                               ? pfx_q8_0_at(src, wq[i].offset + r * ld_src + c)
                                               : -7.0f;
                        if (memcmp(&got, &want, sizeof(float)))
                            fail_msg("%s, Q8_0 %zu x %zu at %zu: [%zu, %zu] %a, not %a", isas[s],
                                     wq[i].rows, wq[i].cols, wq[i].offset, r, c, (double)got,
                                     (double)want);
                    }
            }
        free(src), free(dst);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_against_double), cmocka_unit_test(test_rows_isa),
        cmocka_unit_test(test_widen_exact),         cmocka_unit_test(test_rows_q8_0),
        cmocka_unit_test(test_widen_q8_0),          cmocka_unit_test(test_rows_q8_0_int8_a),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
