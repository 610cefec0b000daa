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
    attn_fixture_spec f;
} att_spec;

/* A row of the tables: the tag, the sizes B, H, Hkv, N, M, P, D, then other
 * fields of attn_fixture_spec by name. */
#define ATT_SPEC(tag, B_, H_, Hkv_, N_, M_, P_, D_, ...)                                           \
    {                                                                                              \
        (tag),                                                                                     \
        {                                                                                          \
            .B = (B_), .H = (H_), .Hkv = (Hkv_), .N = (N_), .M = (M_), .P = (P_), .D = (D_),       \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }

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
    attn_fixture_spec fs = s->f;
    fs.ramp = 0.8f;
    fs.hidden_item = fs.B - 1;
    ref_rng rng;
    pfx_status st = attn_fixture_make(rt, &fs, &rng, &p->f);
    static const char *gains[] = { "off", "lin", "tanh" };
    snprintf(p->shape, sizeof(p->shape), "B%zu H%zu/%zu N%zu M%zu P%zu D%zu %s%s%s %s", fs.B, fs.H,
             fs.Hkv, fs.N, fs.M, fs.P, fs.D, gains[fs.gain], fs.half ? " f16" : "",
             fs.causal ? " causal" : "", s->tag);
    return st;
}

static pfx_status tensor_f32(pfx_runtime *rt, unsigned ndim, const size_t *shape, pfx_tensor **t)
{
    pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, ndim, shape, t);
    return st == PFX_SUCCESS ? pfx_tensor_fill(*t, NAN) : st;
}

/* ---- forward ----------------------------------------------------------- */

static const att_spec forward_specs[] = {
    ATT_SPEC("shared", 2, 4, 2, 37, 53, 7, 64, .gain = PFX_GAIN_LINEAR, .amplitude = 1.0f,
             .seed = 101),
    ATT_SPEC("bank lens", 3, 4, 4, 29, 41, 11, 32, .bank = 4, .causal = true, .lens = true,
             .gain = PFX_GAIN_TANH, .amplitude = 1.5f, .seed = 102),
    ATT_SPEC("GQA bnhd", 2, 8, 2, 33, 33, 5, 80, .q_layout = PFX_LAYOUT_BNHD,
             .kv_layout = PFX_LAYOUT_BNHD, .o_layout = PFX_LAYOUT_BNHD, .causal = true,
             .amplitude = 1.0f, .seed = 103),
    ATT_SPEC("MQA decode", 2, 4, 1, 3, 300, 16, 128, .kv_layout = PFX_LAYOUT_BNHD, .causal = true,
             .gain = PFX_GAIN_LINEAR, .amplitude = 1.0f, .seed = 104),
    ATT_SPEC("dim-gain P=0", 1, 2, 2, 47, 47, 0, 96, .o_layout = PFX_LAYOUT_BNHD, .dim_gain = true,
             .gain = PFX_GAIN_TANH, .amplitude = 1.0f, .seed = 105),
    ATT_SPEC("half", 2, 4, 2, 41, 57, 9, 64, .q_layout = PFX_LAYOUT_BNHD, .causal = true,
             .lens = true, .half = true, .gain = PFX_GAIN_LINEAR, .amplitude = 1.0f, .seed = 106),
};

static void forward_case(pfx_runtime *rt, check_totals *totals, const att_spec *s)
{
    att_problem p;
    pfx_tensor *o = NULL, *lse = NULL;
    float *go = NULL, *glse = NULL;
    double *ro = NULL, *rlse = NULL;
    size_t os[4], ls[3] = { s->f.B, s->f.H, s->f.N };
    pfx_status st = problem_make(rt, s, &p);
    attn_shape(&p.f.d, ATTN_O, os);
    if (st == PFX_SUCCESS) {
        st = pfx_tensor_create(rt, s->f.half ? PFX_DTYPE_F16 : PFX_DTYPE_F32, 4, os, &o);
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
    check_report(totals, "attn_fwd O", p.shape, st, rt, eo, s->f.half ? TOL_FWD_F16 : TOL_FWD_F32);
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
    ATT_SPEC("shared", 2, 4, 2, 23, 31, 5, 64, .gain = PFX_GAIN_LINEAR, .amplitude = 1.0f,
             .seed = 201),
    ATT_SPEC("bank lens", 3, 4, 2, 19, 27, 6, 32, .bank = 2, .kv_layout = PFX_LAYOUT_BNHD,
             .causal = true, .lens = true, .gain = PFX_GAIN_TANH, .amplitude = 1.0f, .seed = 202),
    ATT_SPEC("dim-gain decode", 2, 4, 1, 4, 70, 8, 64, .q_layout = PFX_LAYOUT_BNHD,
             .o_layout = PFX_LAYOUT_BNHD, .causal = true, .dim_gain = true, .gain = PFX_GAIN_LINEAR,
             .amplitude = 1.0f, .seed = 203),
};

static void backward_case(pfx_runtime *rt, check_totals *totals, const att_spec *s)
{
    att_problem p;
    pfx_status st = problem_make(rt, s, &p);
    const pfx_attention_desc *d = &p.f.d;
    size_t os[4], ls[3] = { s->f.B, s->f.H, s->f.N }, hs[2] = { s->f.H, s->f.D };
    attn_shape(d, ATTN_O, os);
    pfx_tensor *o = NULL, *lse = NULL, *d_o = NULL;
    pfx_tensor *g[7] = { 0 }; /* dq dk dv dpk dpv dgain ddim_gain */
    float *hdo = NULL;
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, os, &o);
    if (st == PFX_SUCCESS)
        st = tensor_f32(rt, 3, ls, &lse);
    if (st == PFX_SUCCESS) {
        ref_rng rng;
        ref_rng_seed(&rng, s->f.seed + 1000);
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
    if (st == PFX_SUCCESS && s->f.gain != PFX_GAIN_OFF)
        st = tensor_f32(rt, 1, hs, &g[5]);
    if (st == PFX_SUCCESS && s->f.dim_gain)
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
                         ref_prefix_count(d, s->f.bank),
                         ref_prefix_count(d, s->f.bank),
                         s->f.H,
                         s->f.H * s->f.D };
    double *ref[7] = { 0 };
    for (int i = 0; i < 7; i++)
        if (g[i])
            ref[i] = malloc(counts[i] * sizeof(double));
    if (st == PFX_SUCCESS)
        ref_attention_backward(d, s->f.bank, p.f.q, p.f.k, p.f.v, p.f.pk, p.f.pv, hdo, ref[0],
                               ref[1], ref[2], ref[3], ref[4], ref[5], ref[6]);
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
    ATT_SPEC("shared k=5", 2, 4, 2, 37, 53, 7, 64, .gain = PFX_GAIN_LINEAR, .amplitude = 1.0f,
             .seed = 301),
    ATT_SPEC("bank lens k=32", 3, 4, 2, 29, 41, 5, 32, .bank = 3, .q_layout = PFX_LAYOUT_BNHD,
             .kv_layout = PFX_LAYOUT_BNHD, .o_layout = PFX_LAYOUT_BNHD, .causal = true,
             .lens = true, .dim_gain = true, .half = true, .gain = PFX_GAIN_TANH, .amplitude = 2.0f,
             .seed = 302),
    ATT_SPEC("decode k=1", 2, 4, 1, 3, 200, 8, 128, .causal = true, .amplitude = 1.0f, .seed = 303),
};
static const unsigned stats_k[] = { 5, 32, 1 };

static void stats_case(pfx_runtime *rt, check_totals *totals, const att_spec *s, unsigned top_k)
{
    att_problem p;
    pfx_status st = problem_make(rt, s, &p);
    size_t H = s->f.H;
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
    size_t ms[2] = { s->f.N, s->f.P + s->f.M }, n = ms[0] * ms[1];
    pfx_tensor *map = NULL;
    float *got = NULL;
    double *rp = NULL, err = INFINITY;
    st = p.f.tq ? tensor_f32(rt, 2, ms, &map) : st;
    if (st == PFX_SUCCESS)
        st = pfx_gain_softmax_probs(rt, &p.f.d, &p.f.in, s->f.B - 1, s->f.H - 1, map);
    if (st == PFX_SUCCESS)
        st = attn_read_all(map, &got);
    if (st == PFX_SUCCESS) {
        rp = malloc(n * sizeof(double));
        ref_softmax_probs(&p.f.d, p.f.q, p.f.k, p.f.pk, s->f.B - 1, s->f.H - 1, rp);
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
