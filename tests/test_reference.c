/*
 * Self-test of the double-precision reference (tests/reference/): every
 * gradient against central finite differences of L = sum(dO * O), forward
 * invariants (layouts, shared prefix vs bank, prefix as ordinary keys, hidden
 * rows), and stats / probability-map consistency. No OpenCL needed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

/* ---- a random problem -------------------------------------------------- */

#define MAXB 8
#define MAXH 16

typedef struct problem {
    pfx_attention_desc d;
    size_t bank_entries; /* T, 1 for a shared prefix */
    float *q, *k, *v, *pk, *pv, *d_o;
    float gain[MAXH];
    float *dim_gain;
    int32_t q_lens[MAXB], kv_lens[MAXB], bank_index[MAXB];
    ref_rng rng;
} problem;

static float *rand_floats(ref_rng *rng, size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(x);
    ref_rng_fill(rng, x, n, -1.0f, 1.0f);
    return x;
}

static double *dalloc(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof(double));
    assert_non_null(x);
    return x;
}

static problem *problem_new(size_t B, size_t H, size_t Hkv, size_t N, size_t M, size_t P, size_t D,
                            uint64_t seed)
{
    assert_true(B <= MAXB && H <= MAXH);
    problem *pr = calloc(1, sizeof(*pr));
    assert_non_null(pr);
    ref_rng_seed(&pr->rng, seed);
    ref_desc_init(&pr->d, B, H, Hkv, N, M, P, D);
    pr->bank_entries = 1;
    pr->q = rand_floats(&pr->rng, ref_q_count(&pr->d));
    pr->d_o = rand_floats(&pr->rng, ref_q_count(&pr->d));
    pr->k = rand_floats(&pr->rng, ref_kv_count(&pr->d));
    pr->v = rand_floats(&pr->rng, ref_kv_count(&pr->d));
    pr->pk = rand_floats(&pr->rng, ref_prefix_count(&pr->d, 1));
    pr->pv = rand_floats(&pr->rng, ref_prefix_count(&pr->d, 1));
    ref_rng_fill(&pr->rng, pr->gain, H, -1.0f, 1.0f);
    return pr;
}

static void problem_free(problem *pr)
{
    free(pr->q);
    free(pr->d_o);
    free(pr->k);
    free(pr->v);
    free(pr->pk);
    free(pr->pv);
    free(pr->dim_gain);
    free(pr);
}

static void problem_gain(problem *pr, pfx_gain_mode mode, float ramp)
{
    pr->d.gain_mode = mode;
    pr->d.gain_ramp = ramp;
    pr->d.gain = pr->gain;
}

static void problem_dim_gain(problem *pr)
{
    pr->dim_gain = malloc(pr->d.heads * pr->d.head_dim * sizeof(float));
    assert_non_null(pr->dim_gain);
    ref_rng_fill(&pr->rng, pr->dim_gain, pr->d.heads * pr->d.head_dim, -0.5f, 0.5f);
    pr->d.dim_gain = pr->dim_gain;
}

static void problem_lens(problem *pr, const int32_t *q_lens, const int32_t *kv_lens)
{
    if (q_lens) {
        memcpy(pr->q_lens, q_lens, pr->d.batch * sizeof(int32_t));
        pr->d.q_lens = pr->q_lens;
    }
    if (kv_lens) {
        memcpy(pr->kv_lens, kv_lens, pr->d.batch * sizeof(int32_t));
        pr->d.kv_lens = pr->kv_lens;
    }
}

/* Replace the shared prefix by a random bank of T entries. */
static void problem_bank(problem *pr, size_t T, const int32_t *index)
{
    memcpy(pr->bank_index, index, pr->d.batch * sizeof(int32_t));
    pr->d.bank_index = pr->bank_index;
    pr->bank_entries = T;
    free(pr->pk);
    free(pr->pv);
    pr->pk = rand_floats(&pr->rng, ref_prefix_count(&pr->d, T));
    pr->pv = rand_floats(&pr->rng, ref_prefix_count(&pr->d, T));
}

typedef struct grads {
    double *dq, *dk, *dv, *dpk, *dpv, *dgain, *ddim_gain;
} grads;

static grads grads_compute(const problem *pr)
{
    const pfx_attention_desc *d = &pr->d;
    grads g;
    g.dq = dalloc(ref_q_count(d));
    g.dk = dalloc(ref_kv_count(d));
    g.dv = dalloc(ref_kv_count(d));
    g.dpk = dalloc(ref_prefix_count(d, pr->bank_entries));
    g.dpv = dalloc(ref_prefix_count(d, pr->bank_entries));
    g.dgain = dalloc(d->heads);
    g.ddim_gain = dalloc(d->heads * d->head_dim);
    ref_attention_backward(d, pr->bank_entries, pr->q, pr->k, pr->v, pr->pk, pr->pv, pr->d_o, g.dq,
                           g.dk, g.dv, g.dpk, g.dpv, g.dgain, g.ddim_gain);
    return g;
}

static void grads_free(grads *g)
{
    free(g->dq);
    free(g->dk);
    free(g->dv);
    free(g->dpk);
    free(g->dpv);
    free(g->dgain);
    free(g->ddim_gain);
}

static bool all_zero(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0)
            return false;
    return true;
}

/* ---- finite differences ------------------------------------------------ */

/* L = sum(dO * O), O from the reference forward. */
static double loss(const problem *pr)
{
    size_t n = ref_q_count(&pr->d);
    double *o = dalloc(n);
    ref_attention_forward(&pr->d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, NULL);
    double l = 0.0;
    for (size_t i = 0; i < n; i++)
        l += (double)pr->d_o[i] * o[i];
    free(o);
    return l;
}

/* Central differences of L in every element of x (an input of pr), divided by
 * the step actually taken in float; compared with the analytic gradient. */
static void fd_check(problem *pr, float *x, size_t n, const double *analytic, const char *name)
{
    double *fd = dalloc(n);
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i];
        float xp = (float)((double)x0 + TOL_FD_STEP);
        float xm = (float)((double)x0 - TOL_FD_STEP);
        x[i] = xp;
        double lp = loss(pr);
        x[i] = xm;
        double lm = loss(pr);
        x[i] = x0;
        fd[i] = (lp - lm) / ((double)xp - (double)xm);
    }
    double err = rel_l2_d(fd, analytic, n);
    if (!(err <= TOL_FD_REL)) {
        print_error("%s: finite-difference rel L2 %.3e > %.1e\n", name, err, TOL_FD_REL);
        for (size_t i = 0; i < n; i++)
            print_error("  %s[%zu] analytic %.12f fd %.12f\n", name, i, analytic[i], fd[i]);
    }
    assert_true(err <= TOL_FD_REL);
    /* a gradient that is all zero would make the comparison vacuous */
    assert_false(all_zero(fd, n));
    free(fd);
}

static void fd_check_all(problem *pr)
{
    const pfx_attention_desc *d = &pr->d;
    grads g = grads_compute(pr);
    fd_check(pr, pr->q, ref_q_count(d), g.dq, "dq");
    fd_check(pr, pr->k, ref_kv_count(d), g.dk, "dk");
    fd_check(pr, pr->v, ref_kv_count(d), g.dv, "dv");
    if (d->prefix_len) {
        fd_check(pr, pr->pk, ref_prefix_count(d, pr->bank_entries), g.dpk, "dpk");
        fd_check(pr, pr->pv, ref_prefix_count(d, pr->bank_entries), g.dpv, "dpv");
    }
    if (d->gain_mode != PFX_GAIN_OFF)
        fd_check(pr, pr->gain, d->heads, g.dgain, "dgain");
    else
        assert_true(all_zero(g.dgain, d->heads));
    if (d->dim_gain)
        fd_check(pr, pr->dim_gain, d->heads * d->head_dim, g.ddim_gain, "ddim_gain");
    else
        assert_true(all_zero(g.ddim_gain, d->heads * d->head_dim));
    grads_free(&g);
}

/* Shared prefix, not causal, masks with a hidden row (q_len 2 < N), linear
 * gain with ramp 0.7 where head 1 has gamma(r g) = 0, structured gain. */
static void test_fd_shared_linear(void **state)
{
    (void)state;
    problem *pr = problem_new(2, 4, 2, 3, 5, 2, 3, 1);
    problem_lens(pr, (const int32_t[]){ 3, 2 }, (const int32_t[]){ 5, 3 });
    problem_gain(pr, PFX_GAIN_LINEAR, 0.7f);
    pr->gain[0] = 0.3f;
    pr->gain[1] = -1.0f / 0.7f; /* gamma(r g) = 0 up to float rounding */
    pr->gain[2] = 1.2f;
    pr->gain[3] = -0.4f;
    problem_dim_gain(pr);
    assert_true(fabs(ref_gain_factor(&pr->d, 1)) < 1e-6);
    fd_check_all(pr);
    problem_free(pr);
}

/* Exactly gamma = 0 in linear mode (r = 1, g = -1): the direct sum for dgain. */
static void test_fd_gain_zero_exact(void **state)
{
    (void)state;
    problem *pr = problem_new(2, 2, 2, 3, 4, 2, 3, 2);
    problem_gain(pr, PFX_GAIN_LINEAR, 1.0f);
    pr->gain[0] = -1.0f;
    pr->gain[1] = 0.5f;
    pr->d.causal = true;
    assert_true(ref_gain_factor(&pr->d, 0) == 0.0);
    fd_check_all(pr);
    problem_free(pr);
}

/* Bank of 3 entries (item 0 -> 2, item 1 -> 0; entry 1 unused), causal,
 * tanh gain with ramp 0.7, mixed layouts, structured gain. */
static void test_fd_bank_tanh_causal(void **state)
{
    (void)state;
    problem *pr = problem_new(2, 4, 2, 3, 5, 2, 3, 3);
    problem_bank(pr, 3, (const int32_t[]){ 2, 0 });
    problem_lens(pr, (const int32_t[]){ 2, 3 }, (const int32_t[]){ 4, 5 });
    problem_gain(pr, PFX_GAIN_TANH, 0.7f);
    problem_dim_gain(pr);
    pr->d.causal = true;
    pr->d.q_layout = PFX_LAYOUT_BNHD;
    pr->d.kv_layout = PFX_LAYOUT_BNHD;
    pr->d.o_layout = PFX_LAYOUT_BHND;
    fd_check_all(pr);
    /* the unused entry gets exactly 0 */
    grads g = grads_compute(pr);
    size_t e = ref_prefix_count(&pr->d, 1);
    assert_true(all_zero(g.dpk + e, e));
    assert_true(all_zero(g.dpv + e, e));
    grads_free(&g);
    problem_free(pr);
}

/* Both items share bank entry 1 (summed over items), MQA (Hkv = 1), explicit
 * scale, tanh gain, not causal. */
static void test_fd_bank_shared_entry_mqa(void **state)
{
    (void)state;
    problem *pr = problem_new(2, 4, 1, 3, 5, 2, 3, 4);
    problem_bank(pr, 2, (const int32_t[]){ 1, 1 });
    problem_gain(pr, PFX_GAIN_TANH, 0.7f);
    pr->d.scale = 0.37f;
    pr->d.o_layout = PFX_LAYOUT_BNHD;
    fd_check_all(pr);
    problem_free(pr);
}

/* P = 0, causal, item 1 with kv_len 0 (every row hidden), gain off. */
static void test_fd_no_prefix_hidden_item(void **state)
{
    (void)state;
    problem *pr = problem_new(2, 4, 2, 3, 5, 0, 3, 5);
    problem_lens(pr, (const int32_t[]){ 2, 3 }, (const int32_t[]){ 4, 0 });
    pr->d.causal = true;
    fd_check_all(pr);
    problem_free(pr);
}

/* Cross attention with fewer keys than queries (M < N), MHA, not causal. */
static void test_fd_cross_mha(void **state)
{
    (void)state;
    problem *pr = problem_new(2, 3, 3, 5, 3, 2, 4, 6);
    problem_lens(pr, NULL, (const int32_t[]){ 1, 3 });
    problem_gain(pr, PFX_GAIN_LINEAR, 0.7f);
    problem_dim_gain(pr);
    fd_check_all(pr);
    problem_free(pr);
}

/* ---- forward invariants ------------------------------------------------ */

/* Copy rows of D elements between two layouts of the same tensor. */
typedef size_t (*offset_fn)(const pfx_attention_desc *, size_t, size_t, size_t);

static void relayout_f(const pfx_attention_desc *ds, const pfx_attention_desc *dd, offset_fn off,
                       size_t heads, size_t rows, const float *src, float *dst)
{
    for (size_t b = 0; b < ds->batch; b++)
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < rows; i++)
                memcpy(dst + off(dd, b, h, i), src + off(ds, b, h, i),
                       ds->head_dim * sizeof(float));
}

static void relayout_d(const pfx_attention_desc *ds, const pfx_attention_desc *dd, offset_fn off,
                       size_t heads, size_t rows, const double *src, double *dst)
{
    for (size_t b = 0; b < ds->batch; b++)
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < rows; i++)
                memcpy(dst + off(dd, b, h, i), src + off(ds, b, h, i),
                       ds->head_dim * sizeof(double));
}

static void check_layouts(size_t P)
{
    problem *pr = problem_new(2, 4, 2, 7, 9, P, 5, 10 + P);
    problem_lens(pr, (const int32_t[]){ 7, 5 }, (const int32_t[]){ 9, 6 });
    problem_gain(pr, PFX_GAIN_TANH, 0.7f);
    problem_dim_gain(pr);
    pr->d.causal = true;
    const pfx_attention_desc *a = &pr->d;
    pfx_attention_desc t = pr->d;
    t.q_layout = t.kv_layout = t.o_layout = PFX_LAYOUT_BNHD;
    size_t nq = ref_q_count(a), nk = ref_kv_count(a), nl = ref_lse_count(a);

    float *q = malloc(nq * sizeof(float)), *d_o = malloc(nq * sizeof(float));
    float *k = malloc(nk * sizeof(float)), *v = malloc(nk * sizeof(float));
    relayout_f(a, &t, ref_q_offset, 4, 7, pr->q, q);
    relayout_f(a, &t, ref_o_offset, 4, 7, pr->d_o, d_o);
    relayout_f(a, &t, ref_kv_offset, 2, 9, pr->k, k);
    relayout_f(a, &t, ref_kv_offset, 2, 9, pr->v, v);

    double *o1 = dalloc(nq), *o2 = dalloc(nq), *o2t = dalloc(nq);
    double *l1 = dalloc(nl), *l2 = dalloc(nl);
    ref_attention_forward(a, pr->q, pr->k, pr->v, pr->pk, pr->pv, o1, l1);
    ref_attention_forward(&t, q, k, v, pr->pk, pr->pv, o2, l2);
    relayout_d(&t, a, ref_o_offset, 4, 7, o2, o2t);
    assert_true(rel_l2_d(o1, o2t, nq) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(l1, l2, nl) <= TOL_REF_EXACT);

    grads g1 = grads_compute(pr);
    double *dq = dalloc(nq), *dk = dalloc(nk), *dv = dalloc(nk);
    double *dpk = dalloc(ref_prefix_count(a, 1)), *dpv = dalloc(ref_prefix_count(a, 1));
    ref_attention_backward(&t, 1, q, k, v, pr->pk, pr->pv, d_o, dq, dk, dv, dpk, dpv, NULL, NULL);
    relayout_d(&t, a, ref_q_offset, 4, 7, dq, o2t);
    assert_true(rel_l2_d(g1.dq, o2t, nq) <= TOL_REF_EXACT);
    double *tmp = dalloc(nk);
    relayout_d(&t, a, ref_kv_offset, 2, 9, dk, tmp);
    assert_true(rel_l2_d(g1.dk, tmp, nk) <= TOL_REF_EXACT);
    relayout_d(&t, a, ref_kv_offset, 2, 9, dv, tmp);
    assert_true(rel_l2_d(g1.dv, tmp, nk) <= TOL_REF_EXACT);
    if (P) {
        assert_true(rel_l2_d(g1.dpk, dpk, ref_prefix_count(a, 1)) <= TOL_REF_EXACT);
        assert_true(rel_l2_d(g1.dpv, dpv, ref_prefix_count(a, 1)) <= TOL_REF_EXACT);
    }

    grads_free(&g1);
    free(q);
    free(d_o);
    free(k);
    free(v);
    free(o1);
    free(o2);
    free(o2t);
    free(l1);
    free(l2);
    free(dq);
    free(dk);
    free(dv);
    free(dpk);
    free(dpv);
    free(tmp);
    problem_free(pr);
}

/* BHND and BNHD give the same O, LSE and gradients after transposition. */
static void test_layouts_equivalent(void **state)
{
    (void)state;
    check_layouts(0);
    check_layouts(3);
}

/* A shared prefix equals a bank whose every item indexes the same entry. */
static void test_shared_equals_bank(void **state)
{
    (void)state;
    problem *sh = problem_new(3, 4, 2, 6, 8, 3, 5, 20);
    problem_lens(sh, (const int32_t[]){ 6, 4, 1 }, (const int32_t[]){ 8, 5, 2 });
    problem_gain(sh, PFX_GAIN_LINEAR, 0.7f);
    problem_dim_gain(sh);
    sh->d.causal = true;
    pfx_attention_desc bd = sh->d;
    const int32_t idx[3] = { 1, 1, 1 };
    bd.bank_index = idx;
    size_t e = ref_prefix_count(&sh->d, 1);
    ref_rng rng;
    ref_rng_seed(&rng, 21);
    float *bpk = rand_floats(&rng, 3 * e), *bpv = rand_floats(&rng, 3 * e);
    memcpy(bpk + e, sh->pk, e * sizeof(float));
    memcpy(bpv + e, sh->pv, e * sizeof(float));

    size_t nq = ref_q_count(&bd), nk = ref_kv_count(&bd), nl = ref_lse_count(&bd);
    double *o1 = dalloc(nq), *o2 = dalloc(nq), *l1 = dalloc(nl), *l2 = dalloc(nl);
    ref_attention_forward(&sh->d, sh->q, sh->k, sh->v, sh->pk, sh->pv, o1, l1);
    ref_attention_forward(&bd, sh->q, sh->k, sh->v, bpk, bpv, o2, l2);
    assert_true(rel_l2_d(o1, o2, nq) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(l1, l2, nl) <= TOL_REF_EXACT);

    grads g = grads_compute(sh);
    double *dq = dalloc(nq), *dk = dalloc(nk), *dv = dalloc(nk);
    double *dpk = dalloc(3 * e), *dpv = dalloc(3 * e), *dg = dalloc(4), *ddg = dalloc(20);
    ref_attention_backward(&bd, 3, sh->q, sh->k, sh->v, bpk, bpv, sh->d_o, dq, dk, dv, dpk, dpv, dg,
                           ddg);
    assert_true(rel_l2_d(g.dq, dq, nq) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.dk, dk, nk) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.dv, dv, nk) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.dpk, dpk + e, e) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.dpv, dpv + e, e) <= TOL_REF_EXACT);
    assert_true(all_zero(dpk, e) && all_zero(dpk + 2 * e, e));
    assert_true(all_zero(dpv, e) && all_zero(dpv + 2 * e, e));
    assert_true(rel_l2_d(g.dgain, dg, 4) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.ddim_gain, ddg, 20) <= TOL_REF_EXACT);

    grads_free(&g);
    free(bpk);
    free(bpv);
    free(o1);
    free(o2);
    free(l1);
    free(l2);
    free(dq);
    free(dk);
    free(dv);
    free(dpk);
    free(dpv);
    free(dg);
    free(ddg);
    problem_free(sh);
}

/* A bank with different entries per item equals each item run alone with its
 * entry as a shared prefix. */
static void test_bank_per_item(void **state)
{
    (void)state;
    problem *pr = problem_new(2, 4, 2, 5, 6, 3, 4, 30);
    problem_bank(pr, 3, (const int32_t[]){ 2, 0 });
    problem_gain(pr, PFX_GAIN_TANH, 1.0f);
    const pfx_attention_desc *d = &pr->d;
    size_t nq = ref_q_count(d), nl = ref_lse_count(d), e = ref_prefix_count(d, 1);
    double *o = dalloc(nq), *l = dalloc(nl);
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, l);
    for (size_t b = 0; b < 2; b++) {
        pfx_attention_desc one = *d;
        one.batch = 1;
        one.bank_index = NULL;
        size_t qs = nq / 2, ks = ref_kv_count(d) / 2, ls = nl / 2;
        size_t ent = (size_t)pr->bank_index[b];
        double *o1 = dalloc(qs), *l1 = dalloc(ls);
        ref_attention_forward(&one, pr->q + b * qs, pr->k + b * ks, pr->v + b * ks,
                              pr->pk + ent * e, pr->pv + ent * e, o1, l1);
        assert_true(rel_l2_d(o + b * qs, o1, qs) <= TOL_REF_EXACT);
        assert_true(rel_l2_d(l + b * ls, l1, ls) <= TOL_REF_EXACT);
        free(o1);
        free(l1);
    }
    free(o);
    free(l);
    problem_free(pr);
}

/* The prefix concatenated in front of the keys (P = 0, M' = P + M, not
 * causal, kv_len' = P + kv_len) equals the prefix run, forward and backward. */
static void test_prefix_as_keys(void **state)
{
    (void)state;
    const size_t B = 2, H = 4, Hkv = 2, N = 4, M = 6, P = 3, D = 5;
    problem *pr = problem_new(B, H, Hkv, N, M, P, D, 40);
    problem_lens(pr, (const int32_t[]){ 4, 3 }, (const int32_t[]){ 6, 2 });
    problem_gain(pr, PFX_GAIN_LINEAR, 0.7f);
    problem_dim_gain(pr);
    const pfx_attention_desc *d = &pr->d;

    pfx_attention_desc c = *d;
    c.prefix_len = 0;
    c.keys = P + M;
    int32_t kvl[2] = { (int32_t)P + 6, (int32_t)P + 2 };
    c.kv_lens = kvl;
    size_t nk2 = ref_kv_count(&c);
    float *k2 = malloc(nk2 * sizeof(float)), *v2 = malloc(nk2 * sizeof(float));
    for (size_t b = 0; b < B; b++)
        for (size_t hk = 0; hk < Hkv; hk++)
            for (size_t j = 0; j < P + M; j++) {
                size_t dst = ref_kv_offset(&c, b, hk, j);
                size_t src =
                    j < P ? ref_prefix_offset(d, 0, hk, j) : ref_kv_offset(d, b, hk, j - P);
                memcpy(k2 + dst, (j < P ? pr->pk : pr->k) + src, D * sizeof(float));
                memcpy(v2 + dst, (j < P ? pr->pv : pr->v) + src, D * sizeof(float));
            }

    size_t nq = ref_q_count(d), nl = ref_lse_count(d), nk = ref_kv_count(d);
    double *o1 = dalloc(nq), *o2 = dalloc(nq), *l1 = dalloc(nl), *l2 = dalloc(nl);
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o1, l1);
    ref_attention_forward(&c, pr->q, k2, v2, NULL, NULL, o2, l2);
    assert_true(rel_l2_d(o1, o2, nq) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(l1, l2, nl) <= TOL_REF_EXACT);

    grads g = grads_compute(pr);
    double *dq = dalloc(nq), *dk2 = dalloc(nk2), *dv2 = dalloc(nk2), *dg = dalloc(H);
    double *ddg = dalloc(H * D);
    ref_attention_backward(&c, 1, pr->q, k2, v2, NULL, NULL, pr->d_o, dq, dk2, dv2, NULL, NULL, dg,
                           ddg);
    assert_true(rel_l2_d(g.dq, dq, nq) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.dgain, dg, H) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.ddim_gain, ddg, H * D) <= TOL_REF_EXACT);
    /* split dK' into the prefix part (summed over items) and the input part */
    size_t ne = ref_prefix_count(d, 1);
    double *dpk = dalloc(ne), *dpv = dalloc(ne), *dk = dalloc(nk), *dv = dalloc(nk);
    for (size_t b = 0; b < B; b++)
        for (size_t hk = 0; hk < Hkv; hk++)
            for (size_t j = 0; j < P + M; j++)
                for (size_t x = 0; x < D; x++) {
                    size_t src = ref_kv_offset(&c, b, hk, j) + x;
                    if (j < P) {
                        dpk[ref_prefix_offset(d, 0, hk, j) + x] += dk2[src];
                        dpv[ref_prefix_offset(d, 0, hk, j) + x] += dv2[src];
                    } else {
                        dk[ref_kv_offset(d, b, hk, j - P) + x] = dk2[src];
                        dv[ref_kv_offset(d, b, hk, j - P) + x] = dv2[src];
                    }
                }
    assert_true(rel_l2_d(g.dk, dk, nk) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.dv, dv, nk) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.dpk, dpk, ne) <= TOL_REF_EXACT);
    assert_true(rel_l2_d(g.dpv, dpv, ne) <= TOL_REF_EXACT);

    grads_free(&g);
    free(k2);
    free(v2);
    free(o1);
    free(o2);
    free(l1);
    free(l2);
    free(dq);
    free(dk2);
    free(dv2);
    free(dg);
    free(ddg);
    free(dpk);
    free(dpv);
    free(dk);
    free(dv);
    problem_free(pr);
}

/* Rows past q_len and rows with nothing visible: O = 0, LSE = -inf, no
 * gradient; keys past kv_len and causally hidden keys get no gradient. */
static void test_hidden_rows(void **state)
{
    (void)state;
    const size_t B = 3, H = 2, N = 4, M = 6, D = 3;
    problem *pr = problem_new(B, H, 1, N, M, 0, D, 50);
    const int32_t ql[3] = { 4, 2, 4 }, kl[3] = { 5, 6, 0 };
    problem_lens(pr, ql, kl);
    pr->d.causal = true;
    const pfx_attention_desc *d = &pr->d;
    size_t nq = ref_q_count(d), nl = ref_lse_count(d);
    double *o = dalloc(nq), *l = dalloc(nl);
    for (size_t x = 0; x < nq; x++)
        o[x] = 123.0; /* must be overwritten */
    ref_attention_forward(d, pr->q, pr->k, pr->v, NULL, NULL, o, l);
    grads g = grads_compute(pr);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < N; i++) {
                bool hidden = i >= (size_t)ql[b] || kl[b] == 0;
                double lse = l[(b * H + h) * N + i];
                const double *oi = o + ref_o_offset(d, b, h, i);
                const double *dqi = g.dq + ref_q_offset(d, b, h, i);
                if (hidden) {
                    assert_true(isinf(lse) && lse < 0);
                    for (size_t x = 0; x < D; x++) {
                        assert_true(oi[x] == 0.0);
                        assert_true(dqi[x] == 0.0);
                    }
                } else {
                    assert_true(isfinite(lse));
                    assert_false(all_zero(dqi, D));
                }
            }
    /* key t of item b is seen by some valid row iff t < kv_len and
     * t <= (q_len - 1) + M - N */
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < M; t++) {
            bool seen =
                (int32_t)t < kl[b] && ql[b] > 0 && (long)t <= (long)ql[b] - 1 + (long)M - (long)N;
            const double *dkt = g.dk + ref_kv_offset(d, b, 0, t);
            const double *dvt = g.dv + ref_kv_offset(d, b, 0, t);
            assert_true(all_zero(dvt, D) == !seen);
            if (!seen)
                assert_true(all_zero(dkt, D));
        }
    grads_free(&g);
    free(o);
    free(l);
    problem_free(pr);
}

/* Gain semantics: OFF ignores gain; ramp 0 equals OFF; scale 0 means
 * 1/sqrt(D); a zero structured gain equals none; c_h formulas. */
static void test_gain_semantics(void **state)
{
    (void)state;
    problem *pr = problem_new(2, 4, 2, 5, 5, 2, 16, 60);
    pfx_attention_desc *d = &pr->d;
    size_t nq = ref_q_count(d);
    double *base = dalloc(nq), *o = dalloc(nq);
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, base, NULL);

    d->gain = pr->gain; /* present but OFF */
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, NULL);
    assert_true(rel_l2_d(base, o, nq) == 0.0);

    problem_gain(pr, PFX_GAIN_LINEAR, 0.0f);
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, NULL);
    assert_true(rel_l2_d(base, o, nq) == 0.0);
    problem_gain(pr, PFX_GAIN_TANH, 0.0f);
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, NULL);
    assert_true(rel_l2_d(base, o, nq) == 0.0);

    d->gain_mode = PFX_GAIN_OFF;
    d->scale = 0.25f; /* = 1 / sqrt(16) exactly */
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, NULL);
    assert_true(rel_l2_d(base, o, nq) == 0.0);
    d->scale = 0.0f;

    float *zeros = calloc(d->heads * d->head_dim, sizeof(float));
    d->dim_gain = zeros;
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, NULL);
    assert_true(rel_l2_d(base, o, nq) == 0.0);
    d->dim_gain = NULL;
    free(zeros);

    problem_gain(pr, PFX_GAIN_TANH, 0.7f);
    pr->gain[2] = 0.9f;
    assert_true(fabs(ref_gain_factor(d, 2) - 0.25 * (1.0 + tanh(0.7 * 0.9))) < 1e-7);
    problem_gain(pr, PFX_GAIN_LINEAR, 0.7f);
    assert_true(fabs(ref_gain_factor(d, 2) - 0.25 * (1.0 + 0.7 * 0.9)) < 1e-7);
    /* a linear gain that changes the logits changes O */
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, NULL);
    assert_true(rel_l2_d(base, o, nq) > 1e-3);

    free(base);
    free(o);
    problem_free(pr);
}

/* ---- stats and probabilities ------------------------------------------- */

static int cmp_desc_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static void test_probs_stats(void **state)
{
    (void)state;
    const size_t B = 2, H = 4, N = 6, M = 8, P = 3, D = 5, J = P + M;
    problem *pr = problem_new(B, H, 2, N, M, P, D, 70);
    problem_lens(pr, (const int32_t[]){ 6, 4 }, (const int32_t[]){ 8, 3 });
    problem_gain(pr, PFX_GAIN_TANH, 0.7f);
    problem_dim_gain(pr);
    pr->d.causal = true;
    pr->d.q_layout = PFX_LAYOUT_BNHD;
    const pfx_attention_desc *d = &pr->d;

    size_t nq = ref_q_count(d), nl = ref_lse_count(d);
    double *o = dalloc(nq), *l = dalloc(nl), *probs = dalloc(N * J), *sorted = dalloc(J);
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, l);
    const unsigned ks[3] = { 1, 3, 32 };
    for (size_t kk = 0; kk < 3; kk++) {
        double ent[4], top[4], pre[4];
        ref_attention_stats(d, pr->q, pr->k, pr->pk, ks[kk], ent, top, pre);
        for (size_t h = 0; h < H; h++) {
            double e_sum = 0.0, t_sum = 0.0, p_sum = 0.0;
            size_t rows = 0;
            for (size_t b = 0; b < B; b++) {
                ref_softmax_probs(d, pr->q, pr->k, pr->pk, b, h, probs);
                for (size_t i = 0; i < N; i++) {
                    const double *pi = probs + i * J;
                    double lse = l[(b * H + h) * N + i];
                    double s = 0.0, ent_i = 0.0, pm = 0.0;
                    for (size_t j = 0; j < J; j++) {
                        bool vis =
                            i < (size_t)pr->q_lens[b] &&
                            (j < P || ((int32_t)(j - P) < pr->kv_lens[b] && j - P <= i + M - N));
                        if (!vis)
                            assert_true(pi[j] == 0.0);
                        else
                            assert_true(pi[j] > 0.0);
                        s += pi[j];
                        if (pi[j] > 0.0)
                            ent_i -= pi[j] * log(pi[j]);
                        if (j < P)
                            pm += pi[j];
                        sorted[j] = pi[j];
                    }
                    if (isinf(lse)) {
                        assert_true(s == 0.0);
                        continue;
                    }
                    assert_true(fabs(s - 1.0) < 1e-12);
                    /* O from the map equals the forward O */
                    size_t hk = h / 2;
                    for (size_t x = 0; x < D; x++) {
                        double ox = 0.0;
                        for (size_t j = 0; j < J; j++) {
                            const float *vj = j < P ? pr->pv + ref_prefix_offset(d, 0, hk, j)
                                                    : pr->v + ref_kv_offset(d, b, hk, j - P);
                            ox += pi[j] * (double)vj[x];
                        }
                        assert_true(fabs(ox - o[ref_o_offset(d, b, h, i) + x]) < 1e-12);
                    }
                    qsort(sorted, J, sizeof(double), cmp_desc_d);
                    double t = 0.0;
                    for (size_t j = 0; j < J && j < ks[kk]; j++)
                        t += sorted[j];
                    rows++;
                    e_sum += ent_i;
                    t_sum += t;
                    p_sum += pm;
                }
            }
            assert_true(rows > 0);
            assert_true(fabs(ent[h] - e_sum / (double)rows) < 1e-10);
            assert_true(fabs(top[h] - t_sum / (double)rows) < 1e-12);
            assert_true(fabs(pre[h] - p_sum / (double)rows) < 1e-12);
            assert_true(pre[h] > 0.0 && pre[h] < 1.0);
            if (ks[kk] == 32)
                assert_true(fabs(top[h] - 1.0) < 1e-12);
        }
    }
    free(o);
    free(l);
    free(probs);
    free(sorted);
    problem_free(pr);
}

/* A head with no valid row reports 0 stats rather than NaN. */
static void test_stats_no_valid_rows(void **state)
{
    (void)state;
    problem *pr = problem_new(1, 2, 2, 3, 3, 0, 4, 80);
    problem_lens(pr, NULL, (const int32_t[]){ 0 });
    double ent[2], top[2], pre[2];
    ref_attention_stats(&pr->d, pr->q, pr->k, NULL, 2, ent, top, pre);
    for (size_t h = 0; h < 2; h++)
        assert_true(ent[h] == 0.0 && top[h] == 0.0 && pre[h] == 0.0);
    problem_free(pr);
}

/* ---- the design's dgain identity and a realistic size ------------------- */

/* B=2, H=4, Hkv=2, N=M=77, P=13, D=64: runs quickly, and
 * dg_h = r gamma'(r g_h) / gamma(r g_h) * sum_{b,i} q_i . dQ_i (design.md, with
 * the ramp) and sum_d (1 + G_hd) ddim_gain_hd = sum_{b,i} q_i . dQ_i (dQ taken
 * per head h). */
static void test_realistic_size_identities(void **state)
{
    (void)state;
    const size_t H = 4, N = 77, D = 64;
    problem *pr = problem_new(2, H, 2, N, 77, 13, D, 90);
    problem_lens(pr, (const int32_t[]){ 77, 50 }, (const int32_t[]){ 77, 60 });
    problem_gain(pr, PFX_GAIN_TANH, 0.7f);
    problem_dim_gain(pr);
    pr->d.causal = true;
    const pfx_attention_desc *d = &pr->d;

    clock_t t0 = clock();
    size_t nq = ref_q_count(d);
    double *o = dalloc(nq), *l = dalloc(ref_lse_count(d));
    ref_attention_forward(d, pr->q, pr->k, pr->v, pr->pk, pr->pv, o, l);
    grads g = grads_compute(pr);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    print_message("reference fwd+bwd at B=2 H=4 N=M=77 P=13 D=64: %.3f s\n", secs);

    for (size_t h = 0; h < H; h++) {
        double qdq = 0.0;
        for (size_t b = 0; b < 2; b++)
            for (size_t i = 0; i < N; i++) {
                size_t off = ref_q_offset(d, b, h, i);
                for (size_t x = 0; x < D; x++)
                    qdq += (double)pr->q[off + x] * g.dq[off + x];
            }
        double r = (double)d->gain_ramp, x = r * (double)pr->gain[h], th = tanh(x);
        double expect = r * (1.0 - th * th) / (1.0 + th) * qdq;
        assert_true(fabs(g.dgain[h] - expect) <= 1e-10 * (fabs(expect) + 1e-3));
        double s = 0.0;
        for (size_t x2 = 0; x2 < D; x2++)
            s += (1.0 + (double)pr->dim_gain[h * D + x2]) * g.ddim_gain[h * D + x2];
        assert_true(fabs(s - qdq) <= 1e-10 * (fabs(qdq) + 1e-3));
    }
    grads_free(&g);
    free(o);
    free(l);
    problem_free(pr);
}

/* ---- rel_l2 -------------------------------------------------------------- */

static void test_rel_l2(void **state)
{
    (void)state;
    const double ref[4] = { 3.0, -INFINITY, 4.0, 0.0 };
    float got[4] = { 3.0f, -INFINITY, 4.0f, 0.0f };
    assert_true(rel_l2(ref, got, 4) == 0.0);
    got[0] = 3.5f; /* |diff| 0.5 over norm 5 */
    assert_true(fabs(rel_l2(ref, got, 4) - 0.1) < 1e-15);
    got[0] = 3.0f;
    got[1] = 0.0f;
    assert_true(isinf(rel_l2(ref, got, 4)));
    got[1] = -INFINITY;
    got[2] = NAN;
    assert_true(isinf(rel_l2(ref, got, 4)));
    got[2] = -INFINITY;
    assert_true(isinf(rel_l2(ref, got, 4)));
    const double zero[2] = { 0.0, 0.0 };
    const float small[2] = { 3e-3f, 4e-3f };
    assert_true(fabs(rel_l2(zero, small, 2) - 5e-3) < 1e-9);
    assert_true(rel_l2_d(ref, ref, 4) == 0.0);
}

static void test_rng(void **state)
{
    (void)state;
    ref_rng a, b;
    ref_rng_seed(&a, 7);
    ref_rng_seed(&b, 7);
    double lo = 1.0, hi = -1.0, sum = 0.0;
    for (int i = 0; i < 10000; i++) {
        double x = ref_rng_uniform(&a, -2.0, 3.0);
        assert_true(x == ref_rng_uniform(&b, -2.0, 3.0));
        assert_true(x >= -2.0 && x <= 3.0);
        lo = fmin(lo, x);
        hi = fmax(hi, x);
        sum += x;
    }
    assert_true(lo < -1.9 && hi > 2.9);
    assert_true(fabs(sum / 10000.0 - 0.5) < 0.05);
    ref_rng_seed(&b, 8);
    assert_true(ref_rng_next(&a) != ref_rng_next(&b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_rel_l2),
        cmocka_unit_test(test_fd_shared_linear),
        cmocka_unit_test(test_fd_gain_zero_exact),
        cmocka_unit_test(test_fd_bank_tanh_causal),
        cmocka_unit_test(test_fd_bank_shared_entry_mqa),
        cmocka_unit_test(test_fd_no_prefix_hidden_item),
        cmocka_unit_test(test_fd_cross_mha),
        cmocka_unit_test(test_layouts_equivalent),
        cmocka_unit_test(test_shared_equals_bank),
        cmocka_unit_test(test_bank_per_item),
        cmocka_unit_test(test_prefix_as_keys),
        cmocka_unit_test(test_hidden_rows),
        cmocka_unit_test(test_gain_semantics),
        cmocka_unit_test(test_probs_stats),
        cmocka_unit_test(test_stats_no_valid_rows),
        cmocka_unit_test(test_realistic_size_identities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
