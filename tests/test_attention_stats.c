/* pfx_attention_stats and pfx_gain_softmax_probs against the double-precision
 * reference: awkward sizes, shared prefix and bank, GQA/MQA, causal with
 * lengths and fully hidden rows, every gain mode, structured gain, half
 * storage, both layouts, top_k 1/5/32; bad inputs; clean accounting. */
#include <math.h>

#include "internal.h" /* struct pfx_tensor, for aliased views */
#include "pfx_test.h"
#include "reference/attn_fixture.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

/* One random problem: host data (as the device holds it) and its tensors. */
typedef attn_fixture problem;

/* A problem's spec: the fixture's; o_layout, ramp and hidden_item are set
 * here (o_layout as q_layout). */
typedef attn_fixture_spec spec;

static void problem_make(pfx_runtime *rt, const spec *s, problem *p)
{
    assert_true(s->H <= 16 && s->D <= 128 && s->B <= 8);
    attn_fixture_spec fs = *s;
    fs.o_layout = s->q_layout;
    fs.ramp = 0.75f;
    fs.hidden_item = 1;
    ref_rng rng;
    assert_int_equal(attn_fixture_make(rt, &fs, &rng, p), PFX_SUCCESS);
}

static void problem_free(problem *p)
{
    attn_fixture_free(p);
}

static pfx_tensor *head_tensor(pfx_runtime *rt, size_t H)
{
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &H, &t), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(t, NAN), PFX_SUCCESS);
    return t;
}

static void check_stats(pfx_runtime *rt, const problem *p, unsigned top_k)
{
    size_t H = p->d.heads;
    pfx_tensor *te = head_tensor(rt, H), *tt = head_tensor(rt, H), *tp = head_tensor(rt, H);
    if (pfx_attention_stats(rt, &p->d, &p->in, top_k, te, tt, tp) != PFX_SUCCESS)
        fail_msg("stats: %s", pfx_last_error(rt));
    double re[16], rtk[16], rp[16];
    float ge[16], gt[16], gp[16];
    ref_attention_stats(&p->d, p->q, p->k, p->pk, top_k, re, rtk, rp);
    assert_int_equal(pfx_tensor_read(te, 0, H, ge), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(tt, 0, H, gt), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(tp, 0, H, gp), PFX_SUCCESS);
    double ee = rel_l2(re, ge, H), et = rel_l2(rtk, gt, H), ep = rel_l2(rp, gp, H);
    if (!(ee <= TOL_STATS_F32 && et <= TOL_STATS_F32 && ep <= TOL_STATS_F32)) {
        for (size_t h = 0; h < H; h++)
            print_message("h%zu: entropy %.7g/%.7g top%u %.7g/%.7g prefix %.7g/%.7g\n", h, re[h],
                          (double)ge[h], top_k, rtk[h], (double)gt[h], rp[h], (double)gp[h]);
        fail_msg("stats errors: entropy %.3g, top-%u mass %.3g, prefix mass %.3g", ee, top_k, et,
                 ep);
    }
    /* Each output alone gives the same numbers (the others NULL). */
    float alone[16];
    assert_int_equal(pfx_tensor_fill(tt, NAN), PFX_SUCCESS);
    assert_int_equal(pfx_attention_stats(rt, &p->d, &p->in, top_k, NULL, tt, NULL), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(tt, 0, H, alone), PFX_SUCCESS);
    assert_memory_equal(alone, gt, H * sizeof(float));
    pfx_tensor_destroy(&te);
    pfx_tensor_destroy(&tt);
    pfx_tensor_destroy(&tp);
}

static void check_probs(pfx_runtime *rt, const problem *p, size_t item, size_t head)
{
    size_t shape[2] = { p->d.queries, p->d.prefix_len + p->d.keys };
    size_t n = shape[0] * shape[1];
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &t), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(t, NAN), PFX_SUCCESS);
    if (pfx_gain_softmax_probs(rt, &p->d, &p->in, item, head, t) != PFX_SUCCESS)
        fail_msg("probs: %s", pfx_last_error(rt));
    double *ref = malloc(n * sizeof(double));
    float *got = malloc(n * sizeof(float));
    ref_softmax_probs(&p->d, p->q, p->k, p->pk, item, head, ref);
    assert_int_equal(pfx_tensor_read(t, 0, n, got), PFX_SUCCESS);
    double err = rel_l2(ref, got, n);
    if (!(err <= TOL_PROBS_F32))
        fail_msg("probs (item %zu, head %zu): error %.3g", item, head, err);
    for (size_t x = 0; x < n; x++) /* hidden entries exactly 0 */
        if (ref[x] == 0.0 && got[x] != 0.0f)
            fail_msg("probs[%zu][%zu] = %g where the reference has 0", x / shape[1], x % shape[1],
                     (double)got[x]);
    free(ref);
    free(got);
    pfx_tensor_destroy(&t);
}

static void run_spec(pfx_runtime *rt, const spec *s, const unsigned *ks, size_t nk)
{
    size_t base = pfx_test_live_bytes(rt);
    problem p;
    problem_make(rt, s, &p);
    for (size_t i = 0; i < nk; i++)
        check_stats(rt, &p, ks[i]);
    check_probs(rt, &p, 0, 0);
    check_probs(rt, &p, s->B - 1, s->H - 1);
    problem_free(&p);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static const unsigned all_k[] = { 1, 5, 32 };

static void test_shared_prefix_awkward(void **state)
{
    spec s = { .B = 2,
               .H = 4,
               .Hkv = 2,
               .N = 37,
               .M = 53,
               .P = 7,
               .D = 40,
               .gain = PFX_GAIN_LINEAR,
               .amplitude = 1.0f,
               .seed = 11 };
    run_spec(*state, &s, all_k, 3);
}

static void test_bank_causal_lengths(void **state)
{
    spec s = { .B = 3,
               .H = 6,
               .Hkv = 3,
               .N = 29,
               .M = 41,
               .P = 5,
               .D = 33,
               .bank = 4,
               .causal = true,
               .lens = true,
               .gain = PFX_GAIN_TANH,
               .amplitude = 1.5f,
               .seed = 12 };
    run_spec(*state, &s, all_k, 3);
}

static void test_no_prefix_hidden_rows(void **state)
{
    /* P = 0 with kv_len 0 for item 1: its rows see nothing (hidden). */
    spec s = { .B = 2,
               .H = 2,
               .Hkv = 2,
               .N = 19,
               .M = 19,
               .P = 0,
               .D = 32,
               .causal = true,
               .lens = true,
               .amplitude = 1.0f,
               .seed = 13 };
    run_spec(*state, &s, all_k, 3);
    /* Every row hidden: every head 0. */
    spec e = {
        .B = 1, .H = 3, .Hkv = 1, .N = 5, .M = 7, .P = 0, .D = 32, .amplitude = 1.0f, .seed = 14
    };
    problem p;
    problem_make(*state, &e, &p);
    int32_t zero = 0;
    p.d.kv_lens = &zero;
    check_stats(*state, &p, 5);
    check_probs(*state, &p, 0, 2);
    problem_free(&p);
}

static void test_half_bnhd_dim_gain_large_logits(void **state)
{
    /* |q|, |k| up to 4 over D = 64 with gain: logits up to ~+-80. */
    spec s = { .B = 2,
               .H = 4,
               .Hkv = 1,
               .N = 23,
               .M = 47,
               .P = 9,
               .D = 64,
               .q_layout = PFX_LAYOUT_BNHD,
               .kv_layout = PFX_LAYOUT_BNHD,
               .dim_gain = true,
               .half = true,
               .gain = PFX_GAIN_LINEAR,
               .amplitude = 4.0f,
               .seed = 15 };
    run_spec(*state, &s, all_k, 3);
}

static void test_decode_topk1(void **state)
{
    /* A decode step: N = 3 against M = 70, causal bottom-right, MQA. */
    spec s = { .B = 2,
               .H = 4,
               .Hkv = 1,
               .N = 3,
               .M = 70,
               .P = 6,
               .D = 48,
               .causal = true,
               .gain = PFX_GAIN_TANH,
               .amplitude = 2.0f,
               .seed = 16 };
    unsigned k1 = 1;
    run_spec(*state, &s, &k1, 1);
    /* Fewer visible keys than top_k: the whole mass. */
    spec f = { .B = 1,
               .H = 2,
               .Hkv = 2,
               .N = 4,
               .M = 4,
               .P = 1,
               .D = 32,
               .causal = true,
               .amplitude = 1.0f,
               .seed = 17 };
    unsigned k32 = 32;
    run_spec(*state, &f, &k32, 1);
}

/* Logits near the top of float32 (scale 3e38, |q . k| <= 0.72): the same
 * numbers as the reference (one-hot rows), as in the forward. */
static void test_huge_logits(void **state)
{
    spec s = { .B = 2,
               .H = 4,
               .Hkv = 2,
               .N = 9,
               .M = 31,
               .P = 5,
               .D = 32,
               .causal = true,
               .amplitude = 0.15f,
               .seed = 18,
               .scale = 3.0e38f };
    run_spec(*state, &s, all_k, 3);
}

/* Logits beyond float32 from a finite but huge factor (scale 3e38 with
 * |q . k| up to 32; a linear gain of 3e38): the forward's O and LSE, the
 * stats and the map stay finite, and every map row is a distribution (the
 * overflowing logits share the row). They were NaN rows (Inf - Inf). */
static void test_overflowing_logits(void **state)
{
    pfx_runtime *rt = *state;
    for (int variant = 0; variant < 2; variant++) {
        spec s = { .B = 2,
                   .H = 2,
                   .Hkv = 2,
                   .N = 5,
                   .M = 12,
                   .P = 3,
                   .D = 32,
                   .causal = true,
                   .amplitude = 1.0f,
                   .seed = 19,
                   .scale = variant ? 0.0f : 3.0e38f };
        size_t base = pfx_test_live_bytes(rt);
        problem p;
        problem_make(rt, &s, &p);
        if (variant) {
            p.d.gain_mode = PFX_GAIN_LINEAR;
            p.d.gain_ramp = 1.0f;
            p.d.gain = p.gain;
            for (size_t h = 0; h < s.H; h++)
                p.gain[h] = 3.0e38f;
        }
        size_t oshape[4] = { s.B, s.H, s.N, s.D }, lshape[3] = { s.B, s.H, s.N };
        pfx_tensor *o = NULL, *lse = NULL;
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 4, oshape, &o), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, lshape, &lse), PFX_SUCCESS);
        if (pfx_attention_forward(rt, &p.d, &p.in, o, lse) != PFX_SUCCESS)
            fail_msg("forward: %s", pfx_last_error(rt));
        float *got = NULL;
        assert_int_equal(attn_read_all(o, &got), PFX_SUCCESS);
        for (size_t x = 0; x < o->numel; x++)
            if (!isfinite(got[x]))
                fail_msg("variant %d: O[%zu] = %g", variant, x, (double)got[x]);
        free(got);
        assert_int_equal(attn_read_all(lse, &got), PFX_SUCCESS);
        for (size_t x = 0; x < lse->numel; x++)
            if (isnan(got[x]) || got[x] == INFINITY) /* -Inf: a row without keys */
                fail_msg("variant %d: LSE[%zu] = %g", variant, x, (double)got[x]);
        free(got);

        pfx_tensor *te = head_tensor(rt, s.H), *tt = head_tensor(rt, s.H);
        pfx_tensor *tp = head_tensor(rt, s.H);
        if (pfx_attention_stats(rt, &p.d, &p.in, 5, te, tt, tp) != PFX_SUCCESS)
            fail_msg("stats: %s", pfx_last_error(rt));
        float st[3][16];
        assert_int_equal(pfx_tensor_read(te, 0, s.H, st[0]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(tt, 0, s.H, st[1]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(tp, 0, s.H, st[2]), PFX_SUCCESS);
        for (size_t h = 0; h < s.H; h++)
            if (!isfinite(st[0][h]) || !(st[1][h] >= 0.0f && st[1][h] <= 1.0f + 1e-5f) ||
                !(st[2][h] >= 0.0f && st[2][h] <= 1.0f + 1e-5f))
                fail_msg("variant %d, head %zu: entropy %g, top-5 mass %g, prefix mass %g", variant,
                         h, (double)st[0][h], (double)st[1][h], (double)st[2][h]);

        size_t shape[2] = { s.N, s.P + s.M };
        pfx_tensor *map = NULL;
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &map), PFX_SUCCESS);
        for (size_t h = 0; h < s.H; h++) {
            if (pfx_gain_softmax_probs(rt, &p.d, &p.in, 0, h, map) != PFX_SUCCESS)
                fail_msg("probs: %s", pfx_last_error(rt));
            assert_int_equal(attn_read_all(map, &got), PFX_SUCCESS);
            for (size_t i = 0; i < s.N; i++) {
                double sum = 0;
                for (size_t j = 0; j < shape[1]; j++) {
                    float v = got[i * shape[1] + j];
                    if (!(v >= 0.0f && v <= 1.0f))
                        fail_msg("variant %d, head %zu: map[%zu][%zu] = %g", variant, h, i, j,
                                 (double)v);
                    sum += v;
                }
                if (fabs(sum - 1.0) > 1e-5)
                    fail_msg("variant %d, head %zu: map row %zu sums to %.7g", variant, h, i, sum);
            }
            free(got);
        }
        pfx_tensor_destroy(&map);
        pfx_tensor_destroy(&te);
        pfx_tensor_destroy(&tt);
        pfx_tensor_destroy(&tp);
        pfx_tensor_destroy(&o);
        pfx_tensor_destroy(&lse);
        problem_free(&p);
        assert_int_equal(pfx_test_live_bytes(rt), base);
    }
}

static void test_bad_inputs(void **state)
{
    pfx_runtime *rt = *state;
    spec s = {
        .B = 2, .H = 4, .Hkv = 2, .N = 5, .M = 6, .P = 3, .D = 32, .amplitude = 1.0f, .seed = 18
    };
    size_t base = pfx_test_live_bytes(rt);
    problem p;
    problem_make(rt, &s, &p);
    pfx_tensor *e = head_tensor(rt, 4), *t = head_tensor(rt, 4), *wrong = head_tensor(rt, 3);
    pfx_tensor *half = NULL, *probs = NULL, *probs_bad = NULL;
    size_t four = 4, ps[2] = { 5, 9 }, pbad[2] = { 5, 8 };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 1, &four, &half), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, ps, &probs), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, pbad, &probs_bad), PFX_SUCCESS);
    size_t live = pfx_test_live_bytes(rt);

    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 0, e, NULL, NULL),
                        PFX_ERROR_INVALID_ARGUMENT, "top_k");
    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 33, e, NULL, NULL),
                        PFX_ERROR_INVALID_ARGUMENT, "top_k");
    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 5, NULL, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "entropy");
    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 5, e, wrong, NULL),
                        PFX_ERROR_INVALID_SHAPE, "topk_mass");
    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 5, NULL, NULL, half),
                        PFX_ERROR_DTYPE_MISMATCH, "prefix_mass");
    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 5, e, e, NULL), PFX_ERROR_ALIASING,
                        "topk_mass");
    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 5, e, NULL, NULL), PFX_SUCCESS,
                        "");
    /* Shared validation: a bad desc names its field. */
    pfx_attention_desc d = p.d;
    d.heads = 3;
    assert_status_names(rt, pfx_attention_stats(rt, &d, &p.in, 5, e, NULL, NULL),
                        PFX_ERROR_INVALID_SHAPE, "heads");
    d = p.d;
    d.gain_mode = PFX_GAIN_LINEAR;
    float g[4] = { 0, NAN, 0, 0 };
    d.gain = g;
    assert_status_names(rt, pfx_attention_stats(rt, &d, &p.in, 5, e, NULL, NULL),
                        PFX_ERROR_NOT_FINITE, "gain");
    /* one gain per call: per-item gains are the forward's only */
    d = p.d;
    const float ig[2 * 4] = { 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f };
    d.gain_mode = PFX_GAIN_TANH;
    d.item_gain = ig;
    assert_status_names(rt, pfx_attention_stats(rt, &d, &p.in, 5, e, NULL, NULL),
                        PFX_ERROR_UNSUPPORTED, "per-item gains");
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &d, &p.in, 0, 0, probs),
                        PFX_ERROR_UNSUPPORTED, "per-item gains");
    assert_status_names(NULL, pfx_attention_stats(NULL, &p.d, &p.in, 5, e, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "rt");

    /* The map. */
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &p.d, &p.in, 2, 0, probs),
                        PFX_ERROR_OUT_OF_RANGE, "item");
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &p.d, &p.in, 0, 4, probs),
                        PFX_ERROR_OUT_OF_RANGE, "head");
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &p.d, &p.in, 0, 0, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "probs");
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &p.d, &p.in, 0, 0, probs_bad),
                        PFX_ERROR_INVALID_SHAPE, "probs");
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &p.d, &p.in, 0, 0, half),
                        PFX_ERROR_DTYPE_MISMATCH, "probs");
    d = p.d;
    d.queries = 6;
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &d, &p.in, 0, 0, probs),
                        PFX_ERROR_INVALID_SHAPE, "in.q");
    assert_int_equal(pfx_gain_softmax_probs(rt, &p.d, &p.in, 1, 3, probs), PFX_SUCCESS);
    assert_int_equal(pfx_test_live_bytes(rt), live); /* no workspace left behind */

    pfx_tensor_destroy(&e);
    pfx_tensor_destroy(&t);
    pfx_tensor_destroy(&wrong);
    pfx_tensor_destroy(&half);
    pfx_tensor_destroy(&probs);
    pfx_tensor_destroy(&probs_bad);
    problem_free(&p);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

/* Outputs that are inputs: the same buffer under another shape is refused. */
static void test_aliasing(void **state)
{
    pfx_runtime *rt = *state;
    /* q is [1, 4, 1, 1]: 4 floats, like an output [H]. */
    spec s = {
        .B = 1, .H = 4, .Hkv = 4, .N = 1, .M = 4, .P = 2, .D = 1, .amplitude = 1.0f, .seed = 20
    };
    problem p;
    problem_make(rt, &s, &p);
    /* A view of q's buffer declared [H] (internal struct; owns nothing). */
    struct pfx_tensor view = *p.tq;
    view.ndim = 1;
    view.shape[0] = 4;
    view.numel = 4;
    pfx_tensor *e = head_tensor(rt, 4);
    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 1, e, NULL, e), PFX_ERROR_ALIASING,
                        "prefix_mass");
    assert_status_names(rt, pfx_attention_stats(rt, &p.d, &p.in, 1, NULL, &view, NULL),
                        PFX_ERROR_ALIASING, "in.q");
    size_t pshape[2] = { 1, 6 };
    pfx_tensor *probs = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, pshape, &probs), PFX_SUCCESS);
    struct pfx_tensor pview = *p.tpk; /* prefix_k [4, 2, 1]: 8 floats, not 6: shape first */
    pview.ndim = 2;
    pview.shape[0] = 1;
    pview.shape[1] = 6;
    pview.numel = 6;
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &p.d, &p.in, 0, 0, &pview),
                        PFX_ERROR_ALIASING, "in.prefix_k");
    pfx_tensor_destroy(&probs);
    pfx_tensor_destroy(&e);
    problem_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_prefix_awkward),
        cmocka_unit_test(test_bank_causal_lengths),
        cmocka_unit_test(test_no_prefix_hidden_rows),
        cmocka_unit_test(test_half_bnhd_dim_gain_large_logits),
        cmocka_unit_test(test_decode_topk1),
        cmocka_unit_test(test_huge_logits),
        cmocka_unit_test(test_overflowing_logits),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_aliasing),
    };
    return cmocka_run_group_tests_name("attention_stats", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
