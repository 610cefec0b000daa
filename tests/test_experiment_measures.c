/*
 * The pure measures of `prefixcl experiment gain` (tools/experiment/):
 * the settled-heads measure on hand-made gain histories (settled positive
 * and negative, a sign flip in the window, a value below the threshold, a
 * flip before the window that does not count, histories too short, the
 * threshold's edge, a zero gain), and the linear probe on synthetic data
 * (separable: near-perfect; labels independent of the features: near the
 * majority class; the same result twice), and the verdict rule on hand-made
 * per-seed tables (an interval holding 0, one on each side, a single seed,
 * NaN and infinity, equal values, differences of float32 noise, ranges),
 * and the files --resume reads back (saved.h): written, read back the same,
 * and their refusals; the classification's label contexts and scores
 * (classify.h: shared prefixes computed once, the argmax against scores
 * summed by hand, ties, a token outside the vocabulary) and the unigram
 * perplexity (unigram.h) against a hand count.
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

#include "classify.h"
#include "probe.h"
#include "saved.h"
#include "settled.h"
#include "unigram.h"
#include "verdict.h"

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

/* Three seeds: differences -1, -0.9, -1.1 (sd 0.1): 4.303 x 0.1 / sqrt 3. */
static void test_verdict_sides(void **state)
{
    (void)state;
    const double b[3] = { 100.0, 101.0, 102.0 }, a[3] = { 99.0, 100.1, 100.9 };
    verdict v = verdict_paired(a, b, 3, -1, VERDICT_F32_NOISE);
    assert_int_equal(v.kind, VERDICT_AGREES);
    assert_int_equal(v.n, 3);
    assert_true(fabs(v.mean + 1.0) < 1e-12);
    assert_true(fabs(v.half - 4.303 * 0.1 / sqrt(3.0)) < 1e-9);
    assert_int_equal(verdict_paired(a, b, 3, 1, VERDICT_F32_NOISE).kind, VERDICT_DISAGREES);
    assert_int_equal(verdict_paired(b, a, 3, 1, VERDICT_F32_NOISE).kind, VERDICT_AGREES);
    char buf[256];
    verdict_text(&v, "%.3f", 400, buf, sizeof(buf));
    assert_non_null(strstr(buf, "agrees"));
    assert_non_null(strstr(buf, "3 seeds of 400 steps"));
    assert_non_null(strstr(buf, "-1.000 ± 0.248"));
    /* equal differences: no spread, the interval is the point */
    const double c[3] = { 99.0, 100.0, 101.0 };
    v = verdict_paired(c, b, 3, -1, VERDICT_F32_NOISE);
    assert_int_equal(v.kind, VERDICT_AGREES);
    assert_true(v.half == 0.0);
}

/* Differences -0.5, +0.8, -0.1: the interval holds 0 for either claim. */
static void test_verdict_holds_zero(void **state)
{
    (void)state;
    const double b[3] = { 10.5, 10.2, 12.1 }, a[3] = { 10.0, 11.0, 12.0 };
    for (int sign = -1; sign <= 1; sign += 2) {
        const verdict v = verdict_paired(a, b, 3, sign, VERDICT_F32_NOISE);
        assert_int_equal(v.kind, VERDICT_INCONCLUSIVE);
        assert_false(v.below_noise);
        char buf[256];
        assert_non_null(strstr(verdict_text(&v, "%.3f", 10, buf, sizeof(buf)), "holds 0"));
    }
    /* two seeds of one sign with a wide spread: t(1) = 12.7 */
    const double a2[2] = { 9.0, 10.19 };
    assert_int_equal(verdict_paired(a2, b, 2, -1, VERDICT_F32_NOISE).kind, VERDICT_INCONCLUSIVE);
}

static void test_verdict_one_seed_and_missing(void **state)
{
    (void)state;
    const double a[1] = { 4.0 }, b[1] = { 5.0 };
    verdict v = verdict_paired(a, b, 1, -1, VERDICT_F32_NOISE);
    assert_int_equal(v.kind, VERDICT_ONE_SEED);
    assert_true(v.mean == -1.0);
    assert_true(isnan(v.half));
    char buf[256];
    verdict_text(&v, "%.3f", 50, buf, sizeof(buf));
    assert_non_null(strstr(buf, "no verdict"));
    assert_null(strstr(buf, "agrees"));
    assert_int_equal(verdict_paired(a, b, 0, -1, 0.0).kind, VERDICT_MISSING);
    assert_int_equal(verdict_range(a, 1, 0.0, 10.0).kind, VERDICT_ONE_SEED);
    assert_int_equal(verdict_range(a, 0, 0.0, 10.0).kind, VERDICT_MISSING);
}

static void test_verdict_not_finite(void **state)
{
    (void)state;
    const double b[3] = { 1.0, 2.0, 3.0 };
    double a[3] = { 0.0, NAN, 1.0 };
    verdict v = verdict_paired(a, b, 3, -1, VERDICT_F32_NOISE);
    assert_int_equal(v.kind, VERDICT_NOT_FINITE);
    assert_int_equal(v.bad_index, 1);
    a[1] = 0.0;
    a[2] = INFINITY;
    assert_int_equal(verdict_paired(b, a, 3, -1, 0.0).bad_index, 2);
    /* before the single seed's figures-only answer */
    assert_int_equal(verdict_paired(a + 2, b, 1, -1, 0.0).kind, VERDICT_NOT_FINITE);
    a[0] = NAN;
    v = verdict_range(a, 3, 0.0, 1.0);
    assert_int_equal(v.kind, VERDICT_NOT_FINITE);
    assert_int_equal(v.bad_index, 0);
    char buf[256];
    assert_non_null(strstr(verdict_text(&v, "%.3f", 0, buf, sizeof(buf)), "not finite"));
}

/* Equal arms, and arms apart by ~1e-7 relative with one sign in every seed
 * (a gain too small to matter): float32 noise, not a direction. */
static void test_verdict_noise(void **state)
{
    (void)state;
    const double b[3] = { 1731.354, 1731.354, 1731.354 };
    verdict v = verdict_paired(b, b, 3, -1, VERDICT_F32_NOISE);
    assert_int_equal(v.kind, VERDICT_INCONCLUSIVE);
    assert_true(v.below_noise);
    double a[3];
    for (int k = 0; k < 3; k++)
        a[k] = b[k] * (1.0 - 1e-7 * (1.0 + 0.01 * k));
    v = verdict_paired(a, b, 3, -1, VERDICT_F32_NOISE);
    assert_int_equal(v.kind, VERDICT_INCONCLUSIVE);
    assert_true(v.below_noise);
    char buf[256];
    assert_non_null(strstr(verdict_text(&v, "%.3f", 0, buf, sizeof(buf)), "float32 noise"));
    /* without the noise rule the same table would have agreed */
    assert_int_equal(verdict_paired(a, b, 3, -1, 0.0).kind, VERDICT_AGREES);
    /* without it, equal figures (the same accuracy on every seed) are no
     * noise: their interval [0, 0] holds 0 */
    v = verdict_paired(b, b, 3, 1, 0.0);
    assert_int_equal(v.kind, VERDICT_INCONCLUSIVE);
    assert_false(v.below_noise);
    assert_non_null(strstr(verdict_text(&v, "%+.1f", 0, buf, sizeof(buf)), "holds 0"));
    /* 1e-4 relative is past the noise */
    for (int k = 0; k < 3; k++)
        a[k] = b[k] * (1.0 - 1e-4 * (1.0 + 0.01 * k));
    assert_int_equal(verdict_paired(a, b, 3, -1, VERDICT_F32_NOISE).kind, VERDICT_AGREES);
}

static void test_verdict_range(void **state)
{
    (void)state;
    const double in[3] = { 0.65, 0.66, 0.64 }, out[3] = { 0.30, 0.31, 0.29 },
                 across[3] = { 0.55, 0.70, 0.62 };
    assert_int_equal(verdict_range(in, 3, 0.6, 0.7).kind, VERDICT_AGREES);
    assert_int_equal(verdict_range(out, 3, 0.6, 0.7).kind, VERDICT_DISAGREES);
    assert_int_equal(verdict_range(across, 3, 0.6, 0.7).kind, VERDICT_INCONCLUSIVE);
    assert_int_equal(verdict_range(out, 3, 0.1, INFINITY).kind, VERDICT_AGREES);
    const double zeros[3] = { 0.0, 0.0, 0.0 };
    assert_int_equal(verdict_range(zeros, 3, 0.5, INFINITY).kind, VERDICT_DISAGREES);
    char buf[256];
    const verdict v = verdict_range(in, 3, 0.6, 0.7);
    assert_non_null(strstr(verdict_text(&v, "%.2f", 0, buf, sizeof(buf)), "[0.60, 0.70]"));
    assert_true(verdict_t975(1) == 12.706 && verdict_t975(2) == 4.303 &&
                verdict_t975(30) == 2.042 && verdict_t975(100) == 2.042);
}

static void test_saved_files(void **state)
{
    (void)state;
    char *const argv[3] = { "experiment", "gain", "--out" };
    char *text = saved_args_text(3, argv), err[256], **back = NULL;
    int argc = 0;
    assert_non_null(text);
    assert_int_equal(saved_args_read(text, strlen(text), &argc, &back, err, sizeof(err)), 0);
    assert_int_equal(argc, 3);
    assert_string_equal(back[2], "--out");
    assert_null(back[3]);
    saved_args_free(argc, back);
    free(text);
    const char *bad[] = { "{\"format\": \"other\", \"argv\": [\"a\"]}",
                          "{\"format\": \"prefixcl-experiment-1\", \"argv\": [\"a\\u0000b\"]}",
                          "{\"format\": \"prefixcl-experiment-1\", \"argv\": [1]}", "[" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(saved_args_read(bad[i], strlen(bad[i]), &argc, &back, err, sizeof(err)),
                         -1);
        assert_null(back);
    }
    /* measures: NaN as null, float32 values exactly */
    const size_t steps[2] = { 3, 7 };
    const float e[4] = { 1.25f, NAN, 0.1f, 3.0e-8f }, t[4] = { 0.5f, 0.25f, 1.0f, 0.0f };
    text = saved_measures_text(steps, e, t, 2, 2);
    assert_non_null(text);
    size_t st[4], m = 0;
    float e2[8], t2[8];
    assert_int_equal(
        saved_measures_read(text, strlen(text), 2, 4, 7, st, e2, t2, &m, err, sizeof(err)), 0);
    assert_int_equal(m, 2);
    assert_int_equal(st[1], 7);
    assert_true(e2[0] == e[0] && isnan(e2[1]) && e2[2] == e[2] && e2[3] == e[3]);
    assert_memory_equal(t2, t, sizeof(t));
    /* another head count, too few slots, a step past the run */
    assert_int_equal(
        saved_measures_read(text, strlen(text), 3, 4, 7, st, e2, t2, &m, err, sizeof(err)), -1);
    assert_int_equal(
        saved_measures_read(text, strlen(text), 2, 1, 7, st, e2, t2, &m, err, sizeof(err)), -1);
    assert_int_equal(
        saved_measures_read(text, strlen(text), 2, 4, 6, st, e2, t2, &m, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "steps"));
    free(text);
    /* a finished classification */
    size_t correct = 0, examples = 0;
    text = saved_classify_text(7, 12);
    assert_non_null(text);
    assert_int_equal(saved_classify_read(text, strlen(text), &correct, &examples, err, sizeof(err)),
                     0);
    assert_true(correct == 7 && examples == 12);
    free(text);
    const char *bad_cls[] = {
        "{\"format\": \"prefixcl-experiment-classify-1\", \"correct\": 13, \"examples\": 12}",
        "{\"format\": \"prefixcl-experiment-classify-1\", \"correct\": 1.5, \"examples\": 3}",
        "{\"format\": \"prefixcl-experiment-classify-1\", \"correct\": 0, \"examples\": 0}",
        "{\"format\": \"prefixcl-experiment-1\", \"correct\": 0, \"examples\": 1}"
    };
    for (size_t i = 0; i < sizeof(bad_cls) / sizeof(bad_cls[0]); i++)
        assert_int_equal(saved_classify_read(bad_cls[i], strlen(bad_cls[i]), &correct, &examples,
                                             err, sizeof(err)),
                         -1);
}

/* Labels "a b c", "a b d", "a e" and "f" (as token ids 1..6): the contexts
 * are the prompt, "a", "a b" (shared by two labels), each computed once. */
static void test_classify_contexts(void **state)
{
    (void)state;
    const int32_t l0[] = { 1, 2, 3 }, l1[] = { 1, 2, 4 }, l2[] = { 1, 5 }, l3[] = { 6 };
    const int32_t *ids[] = { l0, l1, l2, l3 };
    const size_t len[] = { 3, 3, 2, 1 };
    classify_contexts c;
    assert_int_equal(classify_contexts_build(ids, len, 4, &c), 0);
    assert_int_equal(c.count, 3);
    assert_int_equal(c.ctx_len[0], 0);
    assert_int_equal(c.ctx_len[1], 1);
    assert_int_equal(c.ctx_len[2], 2);
    assert_int_equal(c.at[4], 9);
    /* label 1's tokens predicted from the prompt, "a" and "a b" */
    assert_int_equal(c.ctx_of[c.at[1]], 0);
    assert_int_equal(c.ctx_of[c.at[1] + 1], 1);
    assert_int_equal(c.ctx_of[c.at[1] + 2], 2);
    assert_int_equal(c.ctx_of[c.at[3]], 0);
    /* log-probabilities over a vocabulary of 8 for the three contexts */
    const size_t V = 8;
    float lp[3 * 8];
    for (size_t i = 0; i < 3 * V; i++)
        lp[i] = (float)(-(double)(i % 5) - 1.0);
    classify_log_softmax(lp, 3, V);
    double score[4];
    const int32_t best = classify_best(&c, lp, V, score);
    for (size_t k = 0; k < 4; k++) {
        double want = 0.0;
        for (size_t p = c.at[k]; p < c.at[k + 1]; p++)
            want += lp[c.ctx_of[p] * V + (size_t)c.ids[p]];
        assert_true(fabs(score[k] - want) < 1e-12);
    }
    int32_t top = 0;
    for (int32_t k = 1; k < 4; k++)
        top = score[k] > score[top] ? k : top;
    assert_int_equal(best, top);
    /* equal scores: the lowest label */
    for (size_t i = 0; i < 3 * V; i++)
        lp[i] = 0.0f;
    assert_int_equal(classify_best(&c, lp, V, NULL), 0);
    /* each row of the log-softmax sums to 1 as probabilities */
    float row[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
    classify_log_softmax(row, 1, 4);
    double sum = 0.0;
    for (int i = 0; i < 4; i++)
        sum += exp(row[i]);
    assert_true(fabs(sum - 1.0) < 1e-6);
    /* a token outside the vocabulary */
    assert_int_equal(classify_best(&c, lp, 5, NULL), -1);
    classify_contexts_free(&c);
    /* a label without tokens */
    const size_t none[] = { 3, 0, 2, 1 };
    assert_int_equal(classify_contexts_build(ids, none, 4, &c), -1);
}

/* Counts {3, 1, 0} of 4 training tokens, vocabulary 3: p = 4/7, 2/7, 1/7. */
static void test_unigram(void **state)
{
    (void)state;
    const uint64_t counts[3] = { 3, 1, 0 };
    const int32_t ids[4] = { 0, 1, 2, 0 };
    const double want = -(2 * log(4.0 / 7) + log(2.0 / 7) + log(1.0 / 7)) / 4;
    assert_true(fabs(unigram_loss(counts, 3, 4, ids, 4) - want) < 1e-12);
    const int32_t bad[1] = { 3 };
    assert_true(isnan(unigram_loss(counts, 3, 4, bad, 1)));
    assert_true(isnan(unigram_loss(counts, 3, 4, ids, 0)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_settled_heads),
        cmocka_unit_test(test_short_histories),
        cmocka_unit_test(test_settled_since),
        cmocka_unit_test(test_probe_separable),
        cmocka_unit_test(test_probe_noise),
        cmocka_unit_test(test_probe_refuses),
        cmocka_unit_test(test_verdict_sides),
        cmocka_unit_test(test_verdict_holds_zero),
        cmocka_unit_test(test_verdict_one_seed_and_missing),
        cmocka_unit_test(test_verdict_not_finite),
        cmocka_unit_test(test_verdict_noise),
        cmocka_unit_test(test_verdict_range),
        cmocka_unit_test(test_saved_files),
        cmocka_unit_test(test_classify_contexts),
        cmocka_unit_test(test_unigram),
    };
    return cmocka_run_group_tests_name("experiment_measures", tests, NULL, NULL);
}
