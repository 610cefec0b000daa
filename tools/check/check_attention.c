/* `prefixcl check` cases of the attention operations: forward, backward
 * (every gradient), stats and the probability map, each on random problems
 * against the double-precision reference (tests/reference). Sizes are small
 * enough that the whole table runs in well under a minute on PoCL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reference/attn_fixture.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

typedef struct att_spec {
    const char *tag; /* what the shape line says besides the sizes */
    size_t B, H, Hkv, N, M, P, D, bank;
    pfx_layout q_layout, kv_layout, o_layout;
    bool causal, lens, dim_gain, half;
    pfx_gain_mode gain;
    float amplitude;
    uint64_t seed;
} att_spec;

typedef struct att_problem {
    attn_fixture f; /* descriptor, Q, K, V, prefix K/V */
    char shape[96];
} att_problem;

static void problem_free(att_problem *p)
{
    attn_fixture_free(&p->f);
}

static pfx_status problem_make(pfx_runtime *rt, const att_spec *s, att_problem *p)
{
    attn_fixture_spec fs = { .B = s->B,
                             .H = s->H,
                             .Hkv = s->Hkv,
                             .N = s->N,
                             .M = s->M,
                             .P = s->P,
                             .D = s->D,
                             .bank = s->bank,
                             .q_layout = s->q_layout,
                             .kv_layout = s->kv_layout,
                             .o_layout = s->o_layout,
                             .causal = s->causal,
                             .lens = s->lens,
                             .dim_gain = s->dim_gain,
                             .half = s->half,
                             .gain = s->gain,
                             .ramp = 0.8f,
                             .amplitude = s->amplitude,
                             .hidden_item = s->B - 1,
                             .seed = s->seed };
    ref_rng rng;
    pfx_status st = attn_fixture_make(rt, &fs, &rng, &p->f);
    static const char *gains[] = { "off", "lin", "tanh" };
    snprintf(p->shape, sizeof(p->shape), "B%zu H%zu/%zu N%zu M%zu P%zu D%zu %s%s%s %s", s->B, s->H,
             s->Hkv, s->N, s->M, s->P, s->D, gains[s->gain], s->half ? " f16" : "",
             s->causal ? " causal" : "", s->tag);
    return st;
}

static pfx_status tensor_f32(pfx_runtime *rt, unsigned ndim, const size_t *shape, pfx_tensor **t)
{
    pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, ndim, shape, t);
    return st == PFX_SUCCESS ? pfx_tensor_fill(*t, NAN) : st;
}

static size_t q_shape(const pfx_attention_desc *d, pfx_layout l, size_t *s)
{
    s[0] = d->batch;
    s[1] = l == PFX_LAYOUT_BHND ? d->heads : d->queries;
    s[2] = l == PFX_LAYOUT_BHND ? d->queries : d->heads;
    s[3] = d->head_dim;
    return 4;
}

/* ---- forward ----------------------------------------------------------- */

static const att_spec forward_specs[] = {
    { "shared", 2, 4, 2, 37, 53, 7, 64, 0, 0, 0, 0, false, false, false, false, PFX_GAIN_LINEAR,
      1.0f, 101 },
    { "bank lens", 3, 4, 4, 29, 41, 11, 32, 4, 0, 0, 0, true, true, false, false, PFX_GAIN_TANH,
      1.5f, 102 },
    { "GQA bnhd", 2, 8, 2, 33, 33, 5, 80, 0, 1, 1, 1, true, false, false, false, PFX_GAIN_OFF, 1.0f,
      103 },
    { "MQA decode", 2, 4, 1, 3, 300, 16, 128, 0, 0, 1, 0, true, false, false, false,
      PFX_GAIN_LINEAR, 1.0f, 104 },
    { "dim-gain P=0", 1, 2, 2, 47, 47, 0, 96, 0, 0, 0, 1, false, false, true, false, PFX_GAIN_TANH,
      1.0f, 105 },
    { "half", 2, 4, 2, 41, 57, 9, 64, 0, 1, 0, 0, true, true, false, true, PFX_GAIN_LINEAR, 1.0f,
      106 },
};

static void forward_case(pfx_runtime *rt, check_totals *totals, const att_spec *s)
{
    att_problem p;
    pfx_tensor *o = NULL, *lse = NULL;
    float *go = NULL, *glse = NULL;
    double *ro = NULL, *rlse = NULL;
    size_t os[4], ls[3] = { s->B, s->H, s->N };
    pfx_status st = problem_make(rt, s, &p);
    q_shape(&p.f.d, s->o_layout, os);
    if (st == PFX_SUCCESS) {
        st = pfx_tensor_create(rt, s->half ? PFX_DTYPE_F16 : PFX_DTYPE_F32, 4, os, &o);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_fill(o, NAN);
    }
    if (st == PFX_SUCCESS)
        st = tensor_f32(rt, 3, ls, &lse);
    if (st == PFX_SUCCESS)
        st = pfx_attention_forward(rt, &p.f.d, &p.f.in, o, lse);
    if (st == PFX_SUCCESS)
        st = attn_read_all(o, &go);
    if (st == PFX_SUCCESS)
        st = attn_read_all(lse, &glse);
    double eo = INFINITY, el = INFINITY;
    if (st == PFX_SUCCESS) {
        ro = malloc(ref_q_count(&p.f.d) * sizeof(double));
        rlse = malloc(ref_lse_count(&p.f.d) * sizeof(double));
        ref_attention_forward(&p.f.d, p.f.q, p.f.k, p.f.v, p.f.pk, p.f.pv, ro, rlse);
        eo = rel_l2(ro, go, ref_q_count(&p.f.d));
        el = rel_l2(rlse, glse, ref_lse_count(&p.f.d));
    }
    check_report(totals, "attn_fwd O", p.shape, st, rt, eo, s->half ? TOL_FWD_F16 : TOL_FWD_F32);
    check_report(totals, "attn_fwd LSE", p.shape, st, rt, el, TOL_FWD_F32); /* always f32 */
    free(go);
    free(glse);
    free(ro);
    free(rlse);
    pfx_tensor_destroy(&o);
    pfx_tensor_destroy(&lse);
    problem_free(&p);
}

void check_attention_forward(pfx_runtime *rt, check_totals *totals)
{
    for (size_t i = 0; i < sizeof(forward_specs) / sizeof(forward_specs[0]); i++)
        forward_case(rt, totals, &forward_specs[i]);
}

/* ---- backward ---------------------------------------------------------- */

static const att_spec backward_specs[] = {
    { "shared", 2, 4, 2, 23, 31, 5, 64, 0, 0, 0, 0, false, false, false, false, PFX_GAIN_LINEAR,
      1.0f, 201 },
    { "bank lens", 3, 4, 2, 19, 27, 6, 32, 2, 0, 1, 0, true, true, false, false, PFX_GAIN_TANH,
      1.0f, 202 },
    { "dim-gain decode", 2, 4, 1, 4, 70, 8, 64, 0, 1, 0, 1, true, false, true, false,
      PFX_GAIN_LINEAR, 1.0f, 203 },
};

static void backward_case(pfx_runtime *rt, check_totals *totals, const att_spec *s)
{
    att_problem p;
    pfx_status st = problem_make(rt, s, &p);
    const pfx_attention_desc *d = &p.f.d;
    size_t os[4], qs[4], ls[3] = { s->B, s->H, s->N }, hs[2] = { s->H, s->D };
    q_shape(d, s->o_layout, os);
    q_shape(d, s->q_layout, qs);
    pfx_tensor *o = NULL, *lse = NULL, *d_o = NULL;
    pfx_tensor *g[7] = { 0 }; /* dq dk dv dpk dpv dgain ddim_gain */
    float *hdo = NULL;
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, os, &o);
    if (st == PFX_SUCCESS)
        st = tensor_f32(rt, 3, ls, &lse);
    if (st == PFX_SUCCESS) {
        ref_rng rng;
        ref_rng_seed(&rng, s->seed + 1000);
        st = attn_upload(rt, &rng, PFX_DTYPE_F32, 4, os, 1.0f, &hdo, &d_o);
    }
    const pfx_tensor *like[5] = { p.f.tq, p.f.tk, p.f.tv, p.f.tpk, p.f.tpv };
    for (int i = 0; i < 5 && st == PFX_SUCCESS; i++) {
        if (!like[i])
            continue;
        size_t shape[PFX_MAX_DIMS];
        unsigned nd = pfx_tensor_ndim(like[i]);
        for (unsigned x = 0; x < nd; x++)
            shape[x] = pfx_tensor_dim(like[i], x);
        st = tensor_f32(rt, nd, shape, &g[i]);
    }
    if (st == PFX_SUCCESS && s->gain != PFX_GAIN_OFF)
        st = tensor_f32(rt, 1, hs, &g[5]);
    if (st == PFX_SUCCESS && s->dim_gain)
        st = tensor_f32(rt, 2, hs, &g[6]);
    if (st == PFX_SUCCESS)
        st = pfx_attention_forward(rt, d, &p.f.in, o, lse);
    pfx_attention_grads grads = { g[0], g[1], g[2], g[3], g[4], g[5], g[6], false };
    if (st == PFX_SUCCESS)
        st = pfx_attention_backward(rt, d, &p.f.in, o, lse, d_o, &grads);

    static const char *names[7] = { "dQ", "dK", "dV", "dKp", "dVp", "dgain", "ddim_gain" };
    size_t counts[7] = { ref_q_count(d),
                         ref_kv_count(d),
                         ref_kv_count(d),
                         ref_prefix_count(d, s->bank),
                         ref_prefix_count(d, s->bank),
                         s->H,
                         s->H * s->D };
    double *ref[7] = { 0 };
    for (int i = 0; i < 7; i++)
        if (g[i])
            ref[i] = malloc(counts[i] * sizeof(double));
    if (st == PFX_SUCCESS)
        ref_attention_backward(d, s->bank, p.f.q, p.f.k, p.f.v, p.f.pk, p.f.pv, hdo, ref[0], ref[1],
                               ref[2], ref[3], ref[4], ref[5], ref[6]);
    for (int i = 0; i < 7; i++) {
        if (!g[i])
            continue;
        float *got = NULL;
        pfx_status rs = st == PFX_SUCCESS ? attn_read_all(g[i], &got) : st;
        double err = rs == PFX_SUCCESS ? rel_l2(ref[i], got, counts[i]) : INFINITY;
        char op[32];
        snprintf(op, sizeof(op), "attn_bwd %s", names[i]);
        check_report(totals, op, p.shape, rs, rt, err, TOL_BWD_F32);
        free(got);
        free(ref[i]);
        pfx_tensor_destroy(&g[i]);
    }
    free(hdo);
    pfx_tensor_destroy(&o);
    pfx_tensor_destroy(&lse);
    pfx_tensor_destroy(&d_o);
    problem_free(&p);
}

void check_attention_backward(pfx_runtime *rt, check_totals *totals)
{
    for (size_t i = 0; i < sizeof(backward_specs) / sizeof(backward_specs[0]); i++)
        backward_case(rt, totals, &backward_specs[i]);
}

/* ---- stats and the probability map ------------------------------------- */

static const att_spec stats_specs[] = {
    { "shared k=5", 2, 4, 2, 37, 53, 7, 64, 0, 0, 0, 0, false, false, false, false, PFX_GAIN_LINEAR,
      1.0f, 301 },
    { "bank lens k=32", 3, 4, 2, 29, 41, 5, 32, 3, 1, 1, 1, true, true, true, true, PFX_GAIN_TANH,
      2.0f, 302 },
    { "decode k=1", 2, 4, 1, 3, 200, 8, 128, 0, 0, 0, 0, true, false, false, false, PFX_GAIN_OFF,
      1.0f, 303 },
};
static const unsigned stats_k[] = { 5, 32, 1 };

static void stats_case(pfx_runtime *rt, check_totals *totals, const att_spec *s, unsigned top_k)
{
    att_problem p;
    pfx_status st = problem_make(rt, s, &p);
    size_t H = s->H;
    pfx_tensor *t[3] = { 0 };
    for (int i = 0; i < 3 && st == PFX_SUCCESS; i++)
        st = tensor_f32(rt, 1, &H, &t[i]);
    if (st == PFX_SUCCESS)
        st = pfx_attention_stats(rt, &p.f.d, &p.f.in, top_k, t[0], t[1], t[2]);
    double *ref = malloc(3 * H * sizeof(double));
    if (st == PFX_SUCCESS)
        ref_attention_stats(&p.f.d, p.f.q, p.f.k, p.f.pk, top_k, ref, ref + H, ref + 2 * H);
    static const char *names[3] = { "attn_stats entropy", "attn_stats top-k mass",
                                    "attn_stats prefix mass" };
    for (int i = 0; i < 3; i++) {
        float *got = NULL;
        pfx_status rs = st == PFX_SUCCESS ? attn_read_all(t[i], &got) : st;
        double err = rs == PFX_SUCCESS ? rel_l2(ref + i * H, got, H) : INFINITY;
        check_report(totals, names[i], p.shape, rs, rt, err, TOL_STATS_F32);
        free(got);
        pfx_tensor_destroy(&t[i]);
    }
    free(ref);

    /* The map of the last (item, head). */
    size_t ms[2] = { s->N, s->P + s->M }, n = ms[0] * ms[1];
    pfx_tensor *map = NULL;
    float *got = NULL;
    double *rp = NULL, err = INFINITY;
    st = p.f.tq ? tensor_f32(rt, 2, ms, &map) : st;
    if (st == PFX_SUCCESS)
        st = pfx_gain_softmax_probs(rt, &p.f.d, &p.f.in, s->B - 1, s->H - 1, map);
    if (st == PFX_SUCCESS)
        st = attn_read_all(map, &got);
    if (st == PFX_SUCCESS) {
        rp = malloc(n * sizeof(double));
        ref_softmax_probs(&p.f.d, p.f.q, p.f.k, p.f.pk, s->B - 1, s->H - 1, rp);
        err = rel_l2(rp, got, n);
    }
    check_report(totals, "gain_softmax_probs map", p.shape, st, rt, err, TOL_PROBS_F32);
    free(got);
    free(rp);
    pfx_tensor_destroy(&map);
    problem_free(&p);
}

void check_attention_stats(pfx_runtime *rt, check_totals *totals)
{
    for (size_t i = 0; i < sizeof(stats_specs) / sizeof(stats_specs[0]); i++)
        stats_case(rt, totals, &stats_specs[i], stats_k[i]);
}
