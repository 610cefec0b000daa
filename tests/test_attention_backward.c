/* pfx_attention_backward against the double-precision reference: every
 * gradient, awkward sizes, P = 0, N = 1, M > N, GQA and MQA, mixed layouts,
 * lengths with fully hidden rows, every gain mode with the ramp (and a head
 * where gamma = 0), structured gain, shared prefix and bank (with an unused
 * entry), half storage; determinism; accumulate vs overwrite; subsets of
 * outputs; bad inputs; clean accounting. O and LSE come from the reference
 * (the backward does not need the forward kernel). */
#include <math.h>

#include "attn_configs.h" /* every tile configuration, forced */
#include "internal.h"     /* struct pfx_tensor */
#include "pfx_test.h"
#include "reference/attn_fixture.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

struct problem;

typedef struct spec {
    /* the problem drawn (base_spec: item 1 hidden, bank entries 1..T-2 unused) */
    attn_fixture_spec f;
    void (*poke)(
        struct problem *p); /* changes inputs (host and device) before the reference runs */
} spec;

typedef struct problem {
    attn_fixture f; /* descriptor, Q, K, V, prefix K/V */
    float *o, *lse, *d_o;
    pfx_tensor *to, *tlse, *tdo;
} problem;

/* The seven gradients: device tensors and the reference. */
enum { G_DQ, G_DK, G_DV, G_DPK, G_DPV, G_DGAIN, G_DDIM, G_COUNT };
static const char *const grad_names[G_COUNT] = { "dq",        "dk",    "dv",       "dprefix_k",
                                                 "dprefix_v", "dgain", "ddim_gain" };

typedef struct grads {
    pfx_tensor *t[G_COUNT];
    size_t n[G_COUNT];
    double *ref[G_COUNT];
    pfx_attention_grads g;
} grads;

static void problem_make(pfx_runtime *rt, const spec *s, problem *p)
{
    memset(p, 0, sizeof(*p));
    assert_true(s->f.H <= 16 && s->f.D <= 256 && s->f.B <= 8);
    ref_rng rng;
    assert_int_equal(attn_fixture_make(rt, &s->f, &rng, &p->f), PFX_SUCCESS);
    pfx_attention_desc *d = &p->f.d;
    pfx_dtype dt = s->f.half ? PFX_DTYPE_F16 : PFX_DTYPE_F32;
    size_t os[4];
    attn_shape(d, ATTN_O, os);
    assert_int_equal(attn_upload(rt, &rng, dt, 4, os, 1.0f, &p->d_o, &p->tdo), PFX_SUCCESS);

    if (s->poke)
        s->poke(p);
    /* O and LSE from the reference (float; -inf rows stay -inf). */
    size_t nq = ref_q_count(d), nl = ref_lse_count(d);
    double *o = malloc(nq * sizeof(double)), *lse = malloc(nl * sizeof(double));
    p->o = malloc(nq * sizeof(float));
    p->lse = malloc(nl * sizeof(float));
    assert_true(o && lse && p->o && p->lse);
    ref_attention_forward(d, p->f.q, p->f.k, p->f.v, p->f.pk, p->f.pv, o, lse);
    for (size_t i = 0; i < nq; i++)
        p->o[i] = (float)o[i];
    for (size_t i = 0; i < nl; i++)
        p->lse[i] = (float)lse[i];
    free(o);
    free(lse);
    assert_int_equal(pfx_tensor_create(rt, dt, 4, os, &p->to), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(p->to, 0, nq, p->o), PFX_SUCCESS);
    size_t ls[3] = { s->f.B, s->f.H, s->f.N };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ls, &p->tlse), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(p->tlse, 0, nl, p->lse), PFX_SUCCESS);
}

static void problem_free(problem *p)
{
    attn_fixture_free(&p->f);
    pfx_tensor **ts[] = { &p->to, &p->tlse, &p->tdo };
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
        pfx_tensor_destroy(ts[i]);
    float *hs[] = { p->o, p->lse, p->d_o };
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        free(hs[i]);
}

/* Creates the requested gradient tensors (mask: bit per G_*), filled with
 * `fill`, and computes the reference. */
static void grads_make(pfx_runtime *rt, const problem *p, unsigned mask, float fill, grads *g)
{
    memset(g, 0, sizeof(*g));
    const pfx_attention_desc *d = &p->f.d;
    size_t qs[4], ks[4], ps[4];
    attn_shape(d, ATTN_Q, qs);
    attn_shape(d, ATTN_KV, ks);
    const unsigned pnd = attn_prefix_shape(d, p->f.bank, ps);
    size_t hs[2] = { d->heads, d->head_dim };
    const size_t *shapes[G_COUNT] = { qs, ks, ks, ps, ps, hs, hs };
    unsigned ndims[G_COUNT] = { 4, 4, 4, pnd, pnd, 1, 2 };
    for (int i = 0; i < G_COUNT; i++) {
        g->n[i] = 1;
        for (unsigned j = 0; j < ndims[i]; j++)
            g->n[i] *= shapes[i][j];
        if (!(mask & (1u << i)))
            continue;
        g->ref[i] = malloc(g->n[i] * sizeof(double));
        assert_non_null(g->ref[i]);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, ndims[i], shapes[i], &g->t[i]),
                         PFX_SUCCESS);
        assert_int_equal(pfx_tensor_fill(g->t[i], fill), PFX_SUCCESS);
    }
    ref_attention_backward(d, p->f.bank, p->f.q, p->f.k, p->f.v, p->f.pk, p->f.pv, p->d_o,
                           g->ref[G_DQ], g->ref[G_DK], g->ref[G_DV], g->ref[G_DPK], g->ref[G_DPV],
                           g->ref[G_DGAIN], g->ref[G_DDIM]);
    g->g = (pfx_attention_grads){ g->t[G_DQ],  g->t[G_DK],    g->t[G_DV],   g->t[G_DPK],
                                  g->t[G_DPV], g->t[G_DGAIN], g->t[G_DDIM], false };
}

static void grads_free(grads *g)
{
    for (int i = 0; i < G_COUNT; i++) {
        pfx_tensor_destroy(&g->t[i]);
        free(g->ref[i]);
    }
}

static float *read_all(const pfx_tensor *t)
{
    float *x = NULL;
    assert_int_equal(attn_read_all(t, &x), PFX_SUCCESS);
    return x;
}

static unsigned all_mask(const problem *p)
{
    unsigned m = (1u << G_DQ) | (1u << G_DK) | (1u << G_DV) | (1u << G_DGAIN);
    if (p->f.d.prefix_len)
        m |= (1u << G_DPK) | (1u << G_DPV);
    if (p->f.d.dim_gain)
        m |= 1u << G_DDIM;
    return m;
}

static void run_spec_mask(pfx_runtime *rt, const spec *s, unsigned mask, double tol)
{
    problem p;
    problem_make(rt, s, &p);
    if (!mask)
        mask = all_mask(&p);
    grads g;
    grads_make(rt, &p, mask, NAN, &g); /* NaN: every element must be written */
    pfx_status st = pfx_attention_backward(rt, &p.f.d, &p.f.in, p.to, p.tlse, p.tdo, &g.g);
    if (st != PFX_SUCCESS)
        fail_msg("backward: %s", pfx_last_error(rt));
    for (int i = 0; i < G_COUNT; i++) {
        if (!g.t[i])
            continue;
        float *got = read_all(g.t[i]);
        double err = rel_l2(g.ref[i], got, g.n[i]);
        printf("  B%zu H%zu/%zu N%zu M%zu P%zu D%zu T%zu %-10s rel_l2 %.2e\n", s->f.B, s->f.H,
               s->f.Hkv, s->f.N, s->f.M, s->f.P, s->f.D, s->f.bank, grad_names[i], err);
        if (!(err <= tol))
            fail_msg("%s: rel_l2 %.3e > %.1e (seed %llu)", grad_names[i], err, tol,
                     (unsigned long long)s->f.seed);
        free(got);
    }
    grads_free(&g);
    problem_free(&p);
}

static void run_spec(pfx_runtime *rt, const spec *s)
{
    run_spec_mask(rt, s, 0, s->f.half ? TOL_BWD_F16 : TOL_BWD_F32);
}

static spec base_spec(void)
{
    spec s = { .f = { .B = 2,
                      .H = 4,
                      .Hkv = 2,
                      .N = 37,
                      .M = 45,
                      .P = 7,
                      .D = 64,
                      .amplitude = 1.0f,
                      .seed = 1,
                      .ramp = 1.0f,
                      .hidden_item = 1,
                      .bank_alternate = true } };
    return s;
}

static void test_basic(void **state)
{
    spec s = base_spec();
    s.f.gain = PFX_GAIN_LINEAR;
    run_spec(*state, &s);
    /* logits up to ~+-20: peaked rows. dgain is a sum of dz_ij s_ij whose terms
     * cancel (sum_j dz_ij = 0); float O and LSE as inputs set its error floor
     * (~8e-5 at amplitude 4), so 3 keeps a margin to TOL_BWD_F32. */
    s.f.amplitude = 3.0f;
    s.f.seed = 17;
    run_spec(*state, &s);
}

static void test_causal_lens_mqa_decode_cache(void **state)
{
    /* MQA, M > N, causal bottom-right, per-item lengths, item 1 sees only the
     * prefix, hidden rows. */
    spec s = base_spec();
    s.f.B = 3;
    s.f.H = 4;
    s.f.Hkv = 1;
    s.f.N = 19;
    s.f.M = 53;
    s.f.P = 5;
    s.f.D = 32;
    s.f.causal = true;
    s.f.lens = true;
    s.f.seed = 2;
    run_spec(*state, &s);
    s.f.P = 0; /* item 1: no visible key at all, rows -inf */
    s.f.seed = 3;
    run_spec(*state, &s);
}

static void test_decode_no_prefix(void **state)
{
    spec s = base_spec();
    s.f.N = 1;
    s.f.M = 70;
    s.f.P = 0;
    s.f.D = 40; /* not a bucket */
    s.f.Hkv = 4;
    s.f.causal = true;
    s.f.seed = 4;
    run_spec(*state, &s);
}

/* The CPU path's single pass splits each (item, kv head)'s key tiles into
 * chunks for 4 work-items per compute unit: one chunk once B * Hkv reaches
 * that, several (as many as the key tiles at most) below it. Both, on any
 * device (elsewhere the two-kernel path runs them). */
static void test_single_pass_chunks(void **state)
{
    pfx_runtime *rt = *state;
    const size_t cus = rt->info.compute_units ? rt->info.compute_units : 1;
    spec s = base_spec();
    s.f.gain = PFX_GAIN_LINEAR;
    /* one chunk: B * Hkv >= 4 per compute unit (the fixture holds B <= 8, H <= 16) */
    s.f.B = 4 * cus < 8 ? 4 * cus : 8;
    s.f.H = s.f.Hkv = (4 * cus + s.f.B - 1) / s.f.B;
    if (s.f.H > 16) {
        printf("  %zu compute units: B * Hkv = 128 takes several chunks here\n", cus);
        s.f.H = s.f.Hkv = 16;
    }
    s.f.N = 9;
    s.f.M = 70;
    s.f.P = 3;
    s.f.causal = true;
    s.f.seed = 31;
    run_spec(rt, &s);
    s.f.B = 1; /* 4 * cus chunks of the key tiles, fewer when there are fewer tiles */
    s.f.H = 2;
    s.f.Hkv = 1;
    s.f.N = 75;
    s.f.M = 400;
    s.f.P = 70;
    s.f.lens = true;
    s.f.seed = 32;
    run_spec(rt, &s);
}

static void test_causal_m_less_than_n(void **state)
{
    /* causal with M < N: the first N - M rows see only the prefix */
    spec s = base_spec();
    s.f.N = 50;
    s.f.M = 21;
    s.f.P = 3;
    s.f.causal = true;
    s.f.seed = 5;
    run_spec(*state, &s);
}

static void test_layouts_mixed(void **state)
{
    spec s = base_spec();
    s.f.q_layout = PFX_LAYOUT_BNHD;
    s.f.kv_layout = PFX_LAYOUT_BHND;
    s.f.o_layout = PFX_LAYOUT_BHND;
    s.f.seed = 6;
    run_spec(*state, &s);
    s.f.q_layout = PFX_LAYOUT_BHND;
    s.f.kv_layout = PFX_LAYOUT_BNHD;
    s.f.o_layout = PFX_LAYOUT_BNHD;
    s.f.D = 128;
    s.f.N = 40;
    s.f.M = 33;
    s.f.P = 3;
    s.f.seed = 7;
    run_spec(*state, &s);
}

static void test_gains(void **state)
{
    spec s = base_spec();
    s.f.gain = PFX_GAIN_TANH;
    s.f.ramp = 0.75f;
    s.f.causal = true;
    s.f.seed = 8;
    run_spec(*state, &s);
    /* linear with a head where gamma = 1 + r g = 0 exactly: dgain is still
     * exact (the direct sum, not dQ-based division). */
    s.f.gain = PFX_GAIN_LINEAR;
    s.f.ramp = 0.5f;
    s.f.zero_gamma = true;
    s.f.seed = 9;
    run_spec(*state, &s);
}

static void test_dim_gain_gqa(void **state)
{
    spec s = base_spec();
    s.f.H = 6;
    s.f.Hkv = 3;
    s.f.N = 33;
    s.f.M = 33;
    s.f.P = 16;
    s.f.D = 80;
    s.f.causal = true;
    s.f.dim_gain = true;
    s.f.gain = PFX_GAIN_TANH;
    s.f.ramp = 0.5f;
    s.f.seed = 10;
    run_spec(*state, &s);
}

static void test_bank(void **state)
{
    spec s = base_spec();
    s.f.B = 3;
    s.f.bank = 3; /* items use entries 0, 2, 0: entry 1 unused, gets 0 */
    s.f.P = 9;
    s.f.lens = true;
    s.f.gain = PFX_GAIN_LINEAR;
    s.f.seed = 11;
    run_spec(*state, &s);
    /* entry -1 (an item without prefix) is a forward-only batch */
    pfx_runtime *rt = *state;
    problem p;
    problem_make(rt, &s, &p);
    grads g;
    grads_make(rt, &p, 1u << G_DQ, 0.0f, &g);
    p.f.bank_index[1] = -1;
    pfx_attention_inputs in = { p.f.tq, p.f.tk, p.f.tv, p.f.tpk, p.f.tpv };
    assert_status_names(rt, pfx_attention_backward(rt, &p.f.d, &in, p.to, p.tlse, p.tdo, &g.g),
                        PFX_ERROR_UNSUPPORTED, "bank_index[1]");
    assert_status_names(rt, pfx_attention_stats(rt, &p.f.d, &in, 1, g.t[G_DQ], NULL, NULL),
                        PFX_ERROR_UNSUPPORTED, "bank_index[1]");
    grads_free(&g);
    problem_free(&p);
}

static void test_half(void **state)
{
    spec s = base_spec();
    s.f.half = true;
    s.f.N = 29;
    s.f.M = 31;
    s.f.P = 6;
    s.f.gain = PFX_GAIN_TANH;
    s.f.dim_gain = true;
    s.f.D = 64;
    s.f.seed = 12;
    run_spec(*state, &s);
}

static void test_subsets(void **state)
{
    pfx_runtime *rt = *state;
    spec s = base_spec();
    s.f.gain = PFX_GAIN_LINEAR;
    s.f.dim_gain = true;
    s.f.seed = 13;
    /* only prefix gradients; only dK/dV; only dgain; only ddim_gain and dV */
    run_spec_mask(rt, &s, (1u << G_DPK) | (1u << G_DPV), TOL_BWD_F32);
    run_spec_mask(rt, &s, (1u << G_DK) | (1u << G_DV), TOL_BWD_F32);
    run_spec_mask(rt, &s, 1u << G_DGAIN, TOL_BWD_F32);
    run_spec_mask(rt, &s, (1u << G_DDIM) | (1u << G_DV) | (1u << G_DPV), TOL_BWD_F32);
}

static void test_determinism(void **state)
{
    pfx_runtime *rt = *state;
    spec s = base_spec();
    s.f.B = 3;
    s.f.bank = 2;
    s.f.P = 20;
    s.f.N = 70;
    s.f.M = 70;
    s.f.causal = true;
    s.f.gain = PFX_GAIN_TANH;
    s.f.dim_gain = true;
    s.f.seed = 14;
    problem p;
    problem_make(rt, &s, &p);
    grads g1, g2;
    grads_make(rt, &p, all_mask(&p), 0.0f, &g1);
    grads_make(rt, &p, all_mask(&p), 1.0f, &g2);
    assert_int_equal(pfx_attention_backward(rt, &p.f.d, &p.f.in, p.to, p.tlse, p.tdo, &g1.g),
                     PFX_SUCCESS);
    assert_int_equal(pfx_attention_backward(rt, &p.f.d, &p.f.in, p.to, p.tlse, p.tdo, &g2.g),
                     PFX_SUCCESS);
    for (int i = 0; i < G_COUNT; i++) {
        if (!g1.t[i])
            continue;
        float *a = read_all(g1.t[i]), *b = read_all(g2.t[i]);
        if (memcmp(a, b, g1.n[i] * sizeof(float)))
            fail_msg("%s differs between two runs", grad_names[i]);
        free(a);
        free(b);
    }
    grads_free(&g1);
    grads_free(&g2);
    problem_free(&p);
}

static void test_accumulate(void **state)
{
    pfx_runtime *rt = *state;
    spec s = base_spec();
    s.f.B = 3;
    s.f.bank = 3; /* entry 1 unused: left untouched */
    s.f.P = 9;
    s.f.gain = PFX_GAIN_LINEAR;
    s.f.dim_gain = true;
    s.f.seed = 15;
    problem p;
    problem_make(rt, &s, &p);
    grads fresh, acc;
    grads_make(rt, &p, all_mask(&p), NAN, &fresh);
    grads_make(rt, &p, all_mask(&p), 0.0f, &acc);
    float *init[G_COUNT] = { 0 };
    ref_rng rng;
    ref_rng_seed(&rng, 99);
    for (int i = 0; i < G_COUNT; i++) {
        if (!acc.t[i])
            continue;
        init[i] = malloc(acc.n[i] * sizeof(float));
        ref_rng_fill(&rng, init[i], acc.n[i], -2.0f, 2.0f);
        assert_int_equal(pfx_tensor_write(acc.t[i], 0, acc.n[i], init[i]), PFX_SUCCESS);
    }
    acc.g.accumulate = true;
    assert_int_equal(pfx_attention_backward(rt, &p.f.d, &p.f.in, p.to, p.tlse, p.tdo, &fresh.g),
                     PFX_SUCCESS);
    assert_int_equal(pfx_attention_backward(rt, &p.f.d, &p.f.in, p.to, p.tlse, p.tdo, &acc.g),
                     PFX_SUCCESS);
    for (int i = 0; i < G_COUNT; i++) {
        if (!acc.t[i])
            continue;
        float *f = read_all(fresh.t[i]), *a = read_all(acc.t[i]);
        for (size_t e = 0; e < acc.n[i]; e++) {
            float want = init[i][e] + f[e];
            if (memcmp(&want, &a[e], sizeof(float)))
                fail_msg("%s[%zu]: accumulated %.9g, initial + gradient %.9g", grad_names[i], e,
                         (double)a[e], (double)want);
        }
        free(f);
        free(a);
        free(init[i]);
    }
    grads_free(&fresh);
    grads_free(&acc);
    problem_free(&p);
}

static void test_bad_inputs(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    spec s = base_spec();
    s.f.gain = PFX_GAIN_LINEAR;
    s.f.N = 9;
    s.f.M = 11;
    s.f.P = 3;
    s.f.D = 32;
    problem p;
    problem_make(rt, &s, &p);
    grads g;
    grads_make(rt, &p, all_mask(&p), 0.0f, &g);
    pfx_tensor *half_dq = NULL, *bad_lse = NULL, *half_lse = NULL, *dpk_none = NULL;
    size_t qs[4] = { 2, 4, 9, 32 }, ls[3] = { 2, 4, 8 }, ls_ok[3] = { 2, 4, 9 };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 4, qs, &half_dq), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ls, &bad_lse), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 3, ls_ok, &half_lse), PFX_SUCCESS);
    pfx_tensor *bf16_k = NULL;
    size_t ks[4];
    for (unsigned i = 0; i < 4; i++)
        ks[i] = pfx_tensor_dim(p.f.tk, i);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_BF16, 4, ks, &bf16_k), PFX_SUCCESS);
    size_t live = pfx_test_live_bytes(rt);
    pfx_attention_grads gg = g.g;
#define BWD(o_, lse_, do_, grads_)                                                                 \
    pfx_attention_backward(rt, &p.f.d, &p.f.in, (o_), (lse_), (do_), (grads_))

    assert_status_names(NULL,
                        pfx_attention_backward(NULL, &p.f.d, &p.f.in, p.to, p.tlse, p.tdo, &gg),
                        PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(rt, BWD(NULL, p.tlse, p.tdo, &gg), PFX_ERROR_NULL_ARGUMENT, "o");
    assert_status_names(rt, BWD(p.to, p.tlse, NULL, &gg), PFX_ERROR_NULL_ARGUMENT, "d_o");
    assert_status_names(rt, BWD(p.to, bad_lse, p.tdo, &gg), PFX_ERROR_INVALID_SHAPE, "lse");
    assert_status_names(rt, BWD(p.to, half_lse, p.tdo, &gg), PFX_ERROR_DTYPE_MISMATCH, "lse");
    assert_status_names(rt, BWD(p.f.tk, p.tlse, p.tdo, &gg), PFX_ERROR_INVALID_SHAPE, "o");
    assert_status_names(rt, BWD(p.to, p.tlse, p.f.tk, &gg), PFX_ERROR_INVALID_SHAPE, "d_o");
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, NULL), PFX_ERROR_NULL_ARGUMENT, "grads");
    pfx_attention_grads none = { 0 };
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &none), PFX_ERROR_INVALID_ARGUMENT, "grads");

    pfx_attention_grads bad = gg;
    bad.dq = half_dq;
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_DTYPE_MISMATCH, "grads.dq");
    bad = gg;
    bad.dk = g.t[G_DQ]; /* wrong shape */
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_INVALID_SHAPE, "grads.dk");
    bad = gg;
    bad.dgain = g.t[G_DPK];
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_INVALID_SHAPE, "grads.dgain");
    bad = gg;
    bad.dprefix_v = g.t[G_DQ];
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_INVALID_SHAPE,
                        "grads.dprefix_v");
    /* ddim_gain without desc.dim_gain */
    size_t hd[2] = { 4, 32 };
    pfx_tensor *ddim = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, hd, &ddim), PFX_SUCCESS);
    bad = gg;
    bad.ddim_gain = ddim;
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_INVALID_ARGUMENT,
                        "grads.ddim_gain");
    pfx_tensor_destroy(&ddim);

    /* aliasing: an output that is an input, or another output */
    bad = gg;
    bad.dq = p.f.tq->dtype == PFX_DTYPE_F32 ? (pfx_tensor *)p.f.tq : bad.dq;
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_ALIASING, "in.q");
    bad = gg;
    bad.dq = (pfx_tensor *)p.tdo;
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_ALIASING, "d_o");
    bad = gg;
    bad.dv = bad.dk;
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_ALIASING, "grads.dk");
    bad = gg;
    bad.dk = (pfx_tensor *)p.f.tk;
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_ALIASING, "in.k");
    bad = gg;
    bad.dprefix_k = (pfx_tensor *)p.f.tpv;
    assert_status_names(rt, BWD(p.to, p.tlse, p.tdo, &bad), PFX_ERROR_ALIASING, "in.prefix_v");

    /* prefix gradients with P = 0 */
    pfx_attention_desc d0 = p.f.d;
    d0.prefix_len = 0;
    pfx_attention_inputs in0 = { p.f.tq, p.f.tk, p.f.tv, NULL, NULL };
    bad = gg;
    assert_status_names(rt, pfx_attention_backward(rt, &d0, &in0, p.to, p.tlse, p.tdo, &bad),
                        PFX_ERROR_INVALID_ARGUMENT, "grads.dprefix_k");

    /* shared validation names the desc field */
    pfx_attention_desc d = p.f.d;
    d.kv_lens = p.f.kv_lens;
    p.f.kv_lens[0] = 12; /* > M */
    p.f.kv_lens[1] = 1;
    assert_status_names(rt, pfx_attention_backward(rt, &d, &p.f.in, p.to, p.tlse, p.tdo, &gg),
                        PFX_ERROR_OUT_OF_RANGE, "kv_lens[0]");
    d = p.f.d;
    d.head_dim = 300;
    assert_status_names(rt, pfx_attention_backward(rt, &d, &p.f.in, p.to, p.tlse, p.tdo, &gg),
                        PFX_ERROR_INVALID_SHAPE, "in.q");
    /* the backward takes one gain per call */
    d = p.f.d;
    const pfx_gain_mode modes[2] = { PFX_GAIN_LINEAR, PFX_GAIN_TANH };
    d.item_gain_mode = modes;
    d.gain = (const float[]){ 0.1f, 0.2f, 0.3f, 0.4f };
    assert_status_names(rt, pfx_attention_backward(rt, &d, &p.f.in, p.to, p.tlse, p.tdo, &gg),
                        PFX_ERROR_UNSUPPORTED, "per-item gains");
    /* only the forward reads bfloat16 (a KV cache's storage) */
    pfx_attention_inputs in_bf16 = p.f.in;
    in_bf16.k = bf16_k;
    assert_status_names(rt, pfx_attention_backward(rt, &p.f.d, &in_bf16, p.to, p.tlse, p.tdo, &gg),
                        PFX_ERROR_DTYPE_MISMATCH, "in.k");
    (void)dpk_none;
    assert_int_equal(pfx_test_live_bytes(rt), live); /* no workspace left, nothing enqueued */
#undef BWD
    pfx_tensor_destroy(&half_dq);
    pfx_tensor_destroy(&bad_lse);
    pfx_tensor_destroy(&half_lse);
    pfx_tensor_destroy(&bf16_k);
    grads_free(&g);
    problem_free(&p);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static void test_head_dim_unsupported(void **state)
{
    /* D = 300 is valid for the problem but beyond the kernels' buckets. */
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    spec s = base_spec();
    s.f.B = 1;
    s.f.H = 1;
    s.f.Hkv = 1;
    s.f.N = 2;
    s.f.M = 2;
    s.f.P = 0;
    s.f.D = 300;
    pfx_attention_desc d;
    pfx_attention_desc_init(&d);
    d.batch = d.heads = d.kv_heads = 1;
    d.queries = d.keys = 2;
    d.head_dim = s.f.D;
    size_t shp[4] = { 1, 1, 2, s.f.D }, ls[3] = { 1, 1, 2 };
    pfx_tensor *q = NULL, *k = NULL, *v = NULL, *o = NULL, *dO = NULL, *lse = NULL, *dq = NULL;
    pfx_tensor **all[] = { &q, &k, &v, &o, &dO, &dq };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 4, shp, all[i]), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ls, &lse), PFX_SUCCESS);
    pfx_attention_inputs in = { q, k, v, NULL, NULL };
    pfx_attention_grads g = { .dq = dq };
    assert_status_names(rt, pfx_attention_backward(rt, &d, &in, o, lse, dO, &g),
                        PFX_ERROR_UNSUPPORTED, "head_dim");
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        pfx_tensor_destroy(all[i]);
    pfx_tensor_destroy(&lse);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

/* Every configuration the registry may pick, for any vendor family or this
 * device (DSPLIT > 1: several work-items per row; other tile sizes; both
 * paths), gives the reference's gradients here too: the full head size of
 * the class and an awkward smaller one, causal with lengths, GQA, the gain
 * and dim gain; then half storage with a bank, MQA and token-major layouts. */
static void config_cases(pfx_runtime *rt, unsigned head_dim, void *arg)
{
    unsigned *seed = arg;
    const size_t dims[2] = { head_dim, head_dim > 16 ? head_dim / 2 + 3 : 13 };
    for (int i = 0; i < 2; i++) {
        spec s = base_spec();
        s.f.N = 21;
        s.f.M = 26;
        s.f.P = 5;
        s.f.D = dims[i];
        s.f.causal = i == 0;
        s.f.lens = i == 1;
        s.f.gain = PFX_GAIN_TANH;
        s.f.dim_gain = true;
        s.f.seed = 100 + (*seed)++;
        run_spec(rt, &s);
    }
    /* dropout 0.3 on the probabilities, the reference applying the same
     * mask: every gradient at once (the CPU path's single pass), dQ alone
     * and dK/dV alone (its two kernels) */
    {
        spec sd = base_spec();
        sd.f.B = 1;
        sd.f.N = 19;
        sd.f.M = 19;
        sd.f.P = 3;
        sd.f.D = dims[1];
        sd.f.causal = true;
        sd.f.gain = PFX_GAIN_LINEAR;
        sd.f.dropout = 0.3f;
        sd.f.seed = 100 + (*seed)++;
        run_spec(rt, &sd);
        run_spec_mask(rt, &sd, 1u << G_DQ | 1u << G_DGAIN, TOL_BWD_F32);
        run_spec_mask(rt, &sd, 1u << G_DK | 1u << G_DV | 1u << G_DPK | 1u << G_DPV, TOL_BWD_F32);
    }
    /* half storage, a bank with an unused entry, MQA, token-major layouts,
     * lengths: no tile edge lines up (N 9, M 30, P 6) */
    spec s = base_spec();
    s.f.B = 3;
    s.f.Hkv = 1;
    s.f.N = 9;
    s.f.M = 30;
    s.f.P = 6;
    s.f.D = head_dim;
    s.f.bank = 3;
    s.f.half = true;
    s.f.lens = true;
    s.f.q_layout = s.f.kv_layout = s.f.o_layout = PFX_LAYOUT_BNHD;
    s.f.seed = 100 + (*seed)++;
    run_spec(rt, &s);
}

static void test_every_config(void **state)
{
    unsigned seed = 0;
    assert_true(attn_for_each_config(*state, "attention_bwd", config_cases, &seed) > 0);
}

/* Gradient i where a row of Q is NaN: NaN must reach every entry the
 * reference has NaN (the row's dQ, the dK/dV of the keys it sees, dgain...)
 * and every other entry of dQ must match. dK, dV and the reductions may be NaN
 * beyond the reference (a hidden pair of a tile multiplies the NaN q by a
 * zero weight); their finite entries must match. */
static void check_nan_grad(int i, const double *ref, const float *got, size_t n)
{
    double *r = malloc(n * sizeof(double));
    float *g = malloc(n * sizeof(float));
    size_t nan_ref = 0;
    for (size_t x = 0; x < n; x++) {
        if (isnan(ref[x]) && !isnan(got[x]))
            fail_msg("%s[%zu]: reference NaN, got %g (NaN lost)", grad_names[i], x, (double)got[x]);
        if (i == G_DQ && !isnan(ref[x]) && isnan(got[x]))
            fail_msg("dq[%zu]: NaN where the reference has %g", x, ref[x]);
        nan_ref += isnan(ref[x]);
        bool skip = isnan(ref[x]) || isnan(got[x]);
        r[x] = skip ? 0.0 : ref[x];
        g[x] = skip ? 0.0f : got[x];
    }
    double err = rel_l2(r, g, n);
    printf("  NaN row: %-10s %zu reference NaN, finite rel_l2 %.2e\n", grad_names[i], nan_ref, err);
    if (!(err <= TOL_BWD_F32))
        fail_msg("%s: rel_l2 %.3e of the finite entries", grad_names[i], err);
    free(r);
    free(g);
}

static void poke_nan_q(struct problem *p)
{
    size_t at = (2 * 37 + 2) * 32 + 5; /* (b0, h2, i2), d5; BHND, N 37, D 32 */
    p->f.q[at] = NAN;
    assert_int_equal(pfx_tensor_write(p->f.tq, at, 1, &p->f.q[at]), PFX_SUCCESS);
}

/* One NaN in Q: the backward's outputs for that row (dQ; O and LSE from the
 * reference are NaN there) are NaN, the other rows' dQ exact. */
static void test_nan_propagates(void **state)
{
    pfx_runtime *rt = *state;
    spec s = base_spec();
    s.f.D = 32;
    s.f.causal = true;
    s.f.gain = PFX_GAIN_LINEAR;
    s.f.seed = 17;
    s.poke = poke_nan_q;
    problem p;
    problem_make(rt, &s, &p);
    grads g;
    grads_make(rt, &p, all_mask(&p), 0.0f, &g);
    assert_true(isnan(p.lse[2 * 37 + 2]));
    assert_int_equal(pfx_attention_backward(rt, &p.f.d, &p.f.in, p.to, p.tlse, p.tdo, &g.g),
                     PFX_SUCCESS);
    for (int i = 0; i < G_COUNT; i++) {
        if (!g.t[i])
            continue;
        float *got = read_all(g.t[i]);
        check_nan_grad(i, g.ref[i], got, g.n[i]);
        free(got);
    }
    /* O and LSE from the device's forward instead: its NaN row (not an empty
     * row's 0 and -inf) carries on into the backward */
    assert_int_equal(pfx_attention_forward(rt, &p.f.d, &p.f.in, p.to, p.tlse), PFX_SUCCESS);
    assert_int_equal(pfx_attention_backward(rt, &p.f.d, &p.f.in, p.to, p.tlse, p.tdo, &g.g),
                     PFX_SUCCESS);
    for (int i = 0; i < G_COUNT; i++) {
        if (!g.t[i])
            continue;
        float *got = read_all(g.t[i]);
        check_nan_grad(i, g.ref[i], got, g.n[i]);
        free(got);
    }
    grads_free(&g);
    problem_free(&p);
}

static void test_accounting(void **state)
{
    pfx_runtime *rt = *state;
    size_t base = pfx_test_live_bytes(rt);
    spec s = base_spec();
    s.f.gain = PFX_GAIN_TANH;
    s.f.bank = 2;
    s.f.seed = 16;
    run_spec(rt, &s);
    assert_int_equal(pfx_runtime_finish(rt), PFX_SUCCESS);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

/* An argument runs only the tests it matches (cmocka_set_test_filter: the
 * exhaustive sweep runs test_every_config alone). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_causal_lens_mqa_decode_cache),
        cmocka_unit_test(test_decode_no_prefix),
        cmocka_unit_test(test_single_pass_chunks),
        cmocka_unit_test(test_causal_m_less_than_n),
        cmocka_unit_test(test_layouts_mixed),
        cmocka_unit_test(test_gains),
        cmocka_unit_test(test_dim_gain_gqa),
        cmocka_unit_test(test_bank),
        cmocka_unit_test(test_half),
        cmocka_unit_test(test_subsets),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_head_dim_unsupported),
        cmocka_unit_test(test_nan_propagates),
        cmocka_unit_test(test_every_config),
        cmocka_unit_test(test_accounting),
    };
    return cmocka_run_group_tests_name("attention_backward", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
