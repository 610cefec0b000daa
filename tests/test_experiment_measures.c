/*
 * The pure measures of `prefixcl experiment gain` (tools/experiment/):
 * the settled-heads measure on hand-made gain histories (settled positive
 * and negative, a sign flip in the window, a value below the threshold, a
 * flip before the window that does not count, histories too short, the
 * threshold's edge, a zero gain), and the linear probe on synthetic data
 * (separable: near-perfect; labels independent of the features: near the
 * majority class; the same result twice).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "probe.h"
#include "settled.h"

/* 10 measurements at steps 10, 20, ..., 100 of 100: the window is steps
 * 80, 90, 100 (5 s >= 400). */
static const size_t steps10[10] = { 10, 20, 30, 40, 50, 60, 70, 80, 90, 100 };

static void test_window(void **state)
{
    (void)state;
    size_t first;
    assert_int_equal(settled_window(steps10, 10, 100, &first), 3);
    assert_int_equal(first, 7);
    /* 79 of 99: 5 * 79 = 395 < 396, 80: in */
    const size_t s[3] = { 78, 79, 80 };
    assert_int_equal(settled_window(s, 3, 99, &first), 1);
    assert_int_equal(first, 2);
    assert_int_equal(settled_window(s, 0, 99, &first), 0);
}

/* heads: 0 settled positive, 1 settled negative, 2 flips sign inside the
 * window, 3 dips below the threshold inside it, 4 flipped before the window
 * and stays negative after, 5 stays at 0, 6 exactly at the threshold. */
static void test_settled_heads(void **state)
{
    (void)state;
    enum { H = 7, M = 10 };
    float hist[M][H];
    for (int i = 0; i < M; i++) {
        hist[i][0] = 0.02f * (float)(i + 1);
        hist[i][1] = -0.2f;
        hist[i][2] = i == 8 ? -0.3f : 0.3f;
        hist[i][3] = i == 9 ? 0.01f : 0.3f;
        hist[i][4] = i < 5 ? 0.4f : -0.4f;
        hist[i][5] = 0.0f;
        hist[i][6] = 0.05f;
    }
    int8_t sign[H];
    /* head 0 is 0.16 .. 0.2 in the window */
    assert_int_equal(settled_heads(&hist[0][0], steps10, M, H, 100, 0.05f, sign), 4);
    const int8_t want[H] = { 1, -1, 0, 0, -1, 0, 1 };
    assert_memory_equal(sign, want, sizeof(want));
    /* above head 6 and head 0's smallest window value: fewer */
    assert_int_equal(settled_heads(&hist[0][0], steps10, M, H, 100, 0.17f, sign), 2);
    assert_int_equal(sign[0], 0);
    assert_int_equal(sign[1], -1);
    assert_int_equal(sign[4], -1);
    assert_int_equal(sign[6], 0);
    /* threshold 0: every non-zero one-signed head, never a zero gain */
    assert_int_equal(settled_heads(&hist[0][0], steps10, M, H, 100, 0.0f, sign), 5);
    assert_int_equal(sign[3], 1);
    assert_int_equal(sign[5], 0);
    /* a threshold above every gain: none */
    assert_int_equal(settled_heads(&hist[0][0], steps10, M, H, 100, 10.0f, sign), 0);
}

/* Since when a head has held its sign beyond the threshold. */
static void test_settled_since(void **state)
{
    (void)state;
    enum { H = 3, M = 10 };
    float hist[M][H];
    for (int i = 0; i < M; i++) {
        hist[i][0] = i < 3 ? 0.01f : 0.2f;  /* beyond 0.05 from step 40 */
        hist[i][1] = i == 6 ? 0.3f : -0.3f; /* a flip at step 70: since 80 */
        hist[i][2] = i == 9 ? 0.0f : 0.5f;  /* the last one is 0: never */
    }
    assert_int_equal(settled_since(&hist[0][0], steps10, M, H, 0, 0.05f), 40);
    assert_int_equal(settled_since(&hist[0][0], steps10, M, H, 0, 0.01f), 10);
    assert_int_equal(settled_since(&hist[0][0], steps10, M, H, 1, 0.05f), 80);
    assert_int_equal(settled_since(&hist[0][0], steps10, M, H, 2, 0.05f), 0);
    assert_int_equal(settled_since(&hist[0][0], steps10, 0, H, 0, 0.05f), 0);
}

/* Too few measurements in the window: -1 and every sign 0. */
static void test_short_histories(void **state)
{
    (void)state;
    const float one[2] = { 0.5f, -0.5f };
    int8_t sign[2] = { 7, 7 };
    const size_t at100[1] = { 100 };
    assert_int_equal(settled_heads(one, at100, 1, 2, 100, 0.05f, sign), -1);
    assert_int_equal(sign[0], 0);
    assert_int_equal(sign[1], 0);
    assert_int_equal(settled_heads(one, at100, 0, 2, 100, 0.05f, sign), -1);
    /* two measurements, only one of them late */
    const float two[4] = { 0.5f, -0.5f, 0.5f, -0.5f };
    const size_t s2[2] = { 50, 100 };
    assert_int_equal(settled_heads(two, s2, 2, 2, 100, 0.05f, sign), -1);
    /* two late ones: enough */
    const size_t s3[2] = { 90, 100 };
    assert_int_equal(settled_heads(two, s3, 2, 2, 100, 0.05f, sign), 2);
    assert_int_equal(sign[0], 1);
    assert_int_equal(sign[1], -1);
    /* a NaN gain never settles */
    const float bad[4] = { NAN, 0.5f, 0.5f, 0.5f };
    assert_int_equal(settled_heads(bad, s3, 2, 2, 100, 0.05f, sign), 1);
    assert_int_equal(sign[0], 0);
}

/* splitmix64 for the synthetic data (tools/common/tool_util.c draws the same way). */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
    return (double)(mix(s) >> 11) * 0x1.0p-53;
}

/* n rows of dim features in `classes` clusters around well-separated
 * centres (separable) or labels drawn apart from the features. */
static void make_data(size_t n, size_t dim, size_t classes, bool separable, uint64_t seed, float *x,
                      int32_t *y)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        y[i] = (int32_t)(mix(&s) % classes);
        for (size_t d = 0; d < dim; d++) {
            const double centre = separable ? (d % classes == (size_t)y[i] ? 4.0 : 0.0) : 0.0;
            x[i * dim + d] = (float)(centre + 2.0 * unit(&s) - 1.0 +
                                     100.0); /* offset: standardization matters */
        }
    }
}

/* The probe fitted on the first half of n synthetic rows and scored on
 * the second: the test accuracy, the majority baseline in *majority, the
 * fitted model in *m. */
static double fit_half(size_t n, size_t dim, size_t classes, bool separable, uint64_t seed,
                       probe_model *m, double *majority)
{
    float *x = malloc(n * dim * sizeof(float));
    int32_t *y = malloc(n * sizeof(int32_t));
    assert_non_null(x);
    assert_non_null(y);
    make_data(n, dim, classes, separable, seed, x, y);
    probe_params p;
    probe_default_params(&p);
    assert_int_equal(probe_fit(x, y, n / 2, dim, classes, &p, m), 0);
    const double acc = probe_accuracy(m, x + (n / 2) * dim, y + n / 2, n - n / 2);
    *majority = probe_majority_accuracy(y, n / 2, y + n / 2, n - n / 2, classes);
    free(x);
    free(y);
    return acc;
}

static void test_probe_separable(void **state)
{
    (void)state;
    probe_model m, m2;
    double maj;
    const double acc = fit_half(400, 12, 5, true, 1, &m, &maj);
    print_message("  separable: test accuracy %.3f, train loss %.4f\n", acc, m.train_loss);
    assert_true(acc >= 0.98);
    /* the same fit again: the same weights */
    assert_true(fit_half(400, 12, 5, true, 1, &m2, &maj) == acc);
    assert_memory_equal(m.w, m2.w, 5 * 12 * sizeof(float));
    probe_free(&m);
    probe_free(&m2);
}

static void test_probe_noise(void **state)
{
    (void)state;
    probe_model m;
    double maj;
    const double acc = fit_half(600, 8, 3, false, 2, &m, &maj);
    print_message("  labels apart from features: test accuracy %.3f, majority %.3f\n", acc, maj);
    /* chance is 1/3: a probe that learned noise lands near it */
    assert_true(acc > 0.2 && acc < 0.45);
    assert_true(maj > 0.25 && maj < 0.42);
    probe_free(&m);
}

static void test_probe_refuses(void **state)
{
    (void)state;
    const float x[4] = { 0, 1, 2, 3 };
    const int32_t y[2] = { 0, 3 };
    probe_params p;
    probe_default_params(&p);
    probe_model m;
    assert_int_equal(probe_fit(x, y, 2, 2, 3, &p, &m), -1); /* label 3 of 3 classes */
    assert_null(m.w);
    assert_int_equal(probe_fit(x, y, 0, 2, 3, &p, &m), -1);
    const int32_t a[3] = { 2, 2, 1 }, b[4] = { 2, 1, 1, 2 };
    assert_true(fabs(probe_majority_accuracy(a, 3, b, 4, 3) - 0.5) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),          cmocka_unit_test(test_settled_heads),
        cmocka_unit_test(test_short_histories), cmocka_unit_test(test_settled_since),
        cmocka_unit_test(test_probe_separable), cmocka_unit_test(test_probe_noise),
        cmocka_unit_test(test_probe_refuses),
    };
    return cmocka_run_group_tests_name("experiment_measures", tests, NULL, NULL);
}
