/*
 * Suite 'reference': the whole-model double reference (reference/model_ref.h)
 * checked on its own: prefix, gain and weight gradients of the causal-LM
 * loss by central finite differences (GPT-2 and Llama family: GQA, qkv biases,
 * llama3 RoPE, padding, ignored labels, P = 0), its attention with lengths
 * against the contract reference (reference.h), tied and untied heads, a zero
 * linear gain equal to no gain. No OpenCL.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reference/layer_ref.h"
#include "reference/model_ref.h"
#include "reference/reference.h"
#include "tolerances.h"

typedef struct model_case {
    ref_model_config c;
    size_t B, N, P;
    int32_t lengths[4];
    uint64_t seed;
} model_case;

static ref_model_config gpt2_config(void)
{
    return (ref_model_config){ .family = REF_MODEL_GPT2,
                               .layers = 2,
                               .hidden = 12,
                               .heads = 3,
                               .kv_heads = 3,
                               .head_dim = 4,
                               .inner = 20,
                               .vocab = 23,
                               .max_positions = 16,
                               .eps = 1e-5,
                               .act = REF_ACT_GELU_TANH,
                               .gain_mode = PFX_GAIN_TANH,
                               .gain_ramp = 0.75 };
}

static ref_model_config llama_config(void)
{
    return (ref_model_config){ .family = REF_MODEL_LLAMA,
                               .layers = 2,
                               .hidden = 10,
                               .heads = 4,
                               .kv_heads = 2,
                               .head_dim = 6,
                               .inner = 14,
                               .vocab = 19,
                               .eps = 1e-6,
                               .act = REF_ACT_SILU,
                               .qkv_bias = true,
                               .rope = { .theta = 10000.0,
                                         .llama3 = true,
                                         .factor = 4.0,
                                         .low_freq_factor = 1.0,
                                         .high_freq_factor = 3.0,
                                         .original_max_position_embeddings = 16.0 },
                               .gain_mode = PFX_GAIN_LINEAR,
                               .gain_ramp = 1.0 };
}

/* A problem: random weights, prefixes, gains, ids, labels (-100 at padding
 * and at every fourth position). */
typedef struct problem {
    ref_model_config c;
    ref_model_weights w;
    ref_model_storage s;
    ref_model_prefix p;
    ref_model_batch x;
    float *kp, *vp, *gain;
    int32_t *ids, *labels;
    size_t span; /* L * Hkv * P * D */
} problem;

static void problem_make(problem *pr, const model_case *k)
{
    memset(pr, 0, sizeof(*pr));
    pr->c = k->c;
    ref_rng rng;
    ref_rng_seed(&rng, k->seed);
    ref_model_random(&pr->c, &rng, &pr->w, &pr->s);
    const size_t L = pr->c.layers, H = pr->c.heads, rows = k->B * k->N;
    pr->span = L * pr->c.kv_heads * k->P * pr->c.head_dim;
    pr->kp = malloc((pr->span + 1) * sizeof(float));
    pr->vp = malloc((pr->span + 1) * sizeof(float));
    pr->gain = malloc(L * H * sizeof(float));
    ref_rng_fill(&rng, pr->kp, pr->span, -1.0f, 1.0f);
    ref_rng_fill(&rng, pr->vp, pr->span, -1.0f, 1.0f);
    ref_rng_fill(&rng, pr->gain, L * H, -0.5f, 0.5f);
    pr->p = (ref_model_prefix){ k->P, k->P ? pr->kp : NULL, k->P ? pr->vp : NULL, pr->gain, NULL };
    pr->ids = malloc(rows * sizeof(int32_t));
    pr->labels = malloc(rows * sizeof(int32_t));
    for (size_t b = 0; b < k->B; b++)
        for (size_t t = 0; t < k->N; t++) {
            const size_t r = b * k->N + t;
            pr->ids[r] = (int32_t)ref_rng_index(&rng, pr->c.vocab);
            const bool pad = t >= (size_t)k->lengths[b];
            pr->labels[r] = pad || t % 4 == 3 ? -100 : pr->ids[r];
        }
    pr->x = (ref_model_batch){ k->B, k->N, pr->ids, k->lengths, pr->labels };
}

static void problem_free(problem *pr)
{
    ref_model_storage_free(&pr->s);
    free(pr->kp);
    free(pr->vp);
    free(pr->gain);
    free(pr->ids);
    free(pr->labels);
}

static double loss_at(problem *pr)
{
    double l;
    ref_model_forward(&pr->c, &pr->w, &pr->p, &pr->x, NULL, &l);
    return l;
}

/* Central difference of the loss in *v (a float input), by the step taken. */
static double fd(problem *pr, float *v)
{
    const float v0 = *v;
    const float hi = (float)(v0 + TOL_FD_STEP), lo = (float)(v0 - TOL_FD_STEP);
    *v = hi;
    const double lp = loss_at(pr);
    *v = lo;
    const double lm = loss_at(pr);
    *v = v0;
    return (lp - lm) / ((double)hi - (double)lo);
}

static void check_gradients(const model_case *k)
{
    problem pr;
    problem_make(&pr, k);
    const size_t LH = pr.c.layers * pr.c.heads;
    double *dkp = calloc(pr.span + 1, sizeof(double)), *dvp = calloc(pr.span + 1, sizeof(double));
    double *dg = calloc(LH, sizeof(double)), loss = 0.0;
    ref_model_backward(&pr.c, &pr.w, &pr.p, &pr.x, &loss, dkp, dvp, dg);
    assert_true(isfinite(loss) && loss > 0.0);
    assert_true(fabs(loss - loss_at(&pr)) <= TOL_REF_EXACT * loss);
    /* up to 40 entries of each prefix (spread over layers and heads), every gain */
    double want[128], got[128];
    size_t n = 0;
    const size_t stride = pr.span / 40 + 1;
    for (size_t i = 0; pr.span && i < pr.span; i += stride) {
        want[n] = fd(&pr, &pr.kp[i]);
        got[n++] = dkp[i];
        want[n] = fd(&pr, &pr.vp[(i * 7) % pr.span]);
        got[n++] = dvp[(i * 7) % pr.span];
    }
    const double err_p = n ? rel_l2_d(want, got, n) : 0.0;
    size_t m = 0;
    for (size_t i = 0; pr.c.gain_mode != PFX_GAIN_OFF && i < LH; i++) {
        want[n + m] = fd(&pr, &pr.gain[i]);
        got[n + m] = dg[i];
        m++;
    }
    const double err_g = m ? rel_l2_d(want + n, got + n, m) : 0.0;
    if (!(err_p <= TOL_FD_REL) || !(err_g <= TOL_FD_REL))
        fail_msg("seed %llu: prefix gradient error %.3g, gain gradient error %.3g (> %.3g)",
                 (unsigned long long)k->seed, err_p, err_g, TOL_FD_REL);
    /* the gradients are not trivially zero */
    double norm = 0.0;
    for (size_t i = 0; i < n + m; i++)
        norm += got[i] * got[i];
    assert_true(norm > 1e-10);
    free(dkp);
    free(dvp);
    free(dg);
    problem_free(&pr);
}

/* One weight array and its gradient, for the finite differences. */
typedef struct weight_pair {
    const char *name;
    float *w;
    const double *g;
    size_t n;
} weight_pair;

/* Every weight of pr (cast: the arrays live in pr->s, which the test owns)
 * with its gradient in g; returns the count. */
static size_t weight_pairs(problem *pr, const ref_model_grads *g, weight_pair *out)
{
    const ref_model_config *c = &pr->c;
    const size_t L = c->layers, C = c->hidden, I = c->inner, V = c->vocab;
    const size_t qd = c->heads * c->head_dim, kvd = c->kv_heads * c->head_dim;
    size_t n = 0;
#define PAIR(label, wp, gp, count)                                                                 \
    do {                                                                                           \
        if ((wp) && (gp))                                                                          \
            out[n++] = (weight_pair){ label, (float *)(wp), (gp), (count) };                       \
    } while (0)
    PAIR("wte", pr->w.wte, g->wte, V * C);
    PAIR("wpe", pr->w.wpe, g->wpe, c->max_positions * C);
    PAIR("final_w", pr->w.final_w, g->final_w, C);
    PAIR("final_b", pr->w.final_b, g->final_b, C);
    PAIR("lm_head", pr->w.lm_head, g->lm_head, V * C);
    for (size_t l = 0; l < L; l++) {
        const ref_model_layer *w = &pr->w.layer[l];
        const ref_model_layer_grads *y = &g->layer[l];
        PAIR("ln_1_w", w->ln_1_w, y->ln_1_w, C);
        PAIR("ln_1_b", w->ln_1_b, y->ln_1_b, C);
        PAIR("c_attn_w", w->c_attn_w, y->c_attn_w, 3 * C * C);
        PAIR("c_attn_b", w->c_attn_b, y->c_attn_b, 3 * C);
        PAIR("attn_proj_w", w->attn_proj_w, y->attn_proj_w, C * C);
        PAIR("attn_proj_b", w->attn_proj_b, y->attn_proj_b, C);
        PAIR("ln_2_w", w->ln_2_w, y->ln_2_w, C);
        PAIR("ln_2_b", w->ln_2_b, y->ln_2_b, C);
        PAIR("c_fc_w", w->c_fc_w, y->c_fc_w, C * I);
        PAIR("c_fc_b", w->c_fc_b, y->c_fc_b, I);
        PAIR("mlp_proj_w", w->mlp_proj_w, y->mlp_proj_w, I * C);
        PAIR("mlp_proj_b", w->mlp_proj_b, y->mlp_proj_b, C);
        PAIR("input_norm_w", w->input_norm_w, y->input_norm_w, C);
        PAIR("q_w", w->q_w, y->q_w, qd * C);
        PAIR("k_w", w->k_w, y->k_w, kvd * C);
        PAIR("v_w", w->v_w, y->v_w, kvd * C);
        PAIR("q_b", c->qkv_bias ? w->q_b : NULL, y->q_b, qd);
        PAIR("k_b", c->qkv_bias ? w->k_b : NULL, y->k_b, kvd);
        PAIR("v_b", c->qkv_bias ? w->v_b : NULL, y->v_b, kvd);
        PAIR("o_w", w->o_w, y->o_w, C * qd);
        PAIR("post_norm_w", w->post_norm_w, y->post_norm_w, C);
        PAIR("gate_w", w->gate_w, y->gate_w, I * C);
        PAIR("up_w", w->up_w, y->up_w, I * C);
        PAIR("down_w", w->down_w, y->down_w, C * I);
    }
#undef PAIR
    return n;
}

/* The weight gradients of ref_model_backward_weights against central
 * differences: a few entries of every weight array (wpe: the rows in use),
 * each array's error on its own; the prefix and gain gradients it returns
 * equal ref_model_backward's. `untied` gives the model its own LM head. */
static void check_weight_gradients(const model_case *k, bool untied)
{
    problem pr;
    problem_make(&pr, k);
    float *head = NULL;
    if (untied) {
        head = malloc(pr.c.vocab * pr.c.hidden * sizeof(float));
        for (size_t i = 0; i < pr.c.vocab * pr.c.hidden; i++)
            head[i] = 0.5f * pr.w.wte[(i * 7) % (pr.c.vocab * pr.c.hidden)];
        pr.w.lm_head = head;
    }
    ref_model_grads g;
    ref_model_grads_alloc(&pr.c, untied, &g);
    const size_t LH = pr.c.layers * pr.c.heads;
    double *dg = calloc(LH, sizeof(double)), *dg0 = calloc(LH, sizeof(double)), loss = 0.0,
           loss0 = 0.0;
    ref_model_backward_weights(&pr.c, &pr.w, &pr.p, &pr.x, &loss, NULL, NULL, dg, &g);
    ref_model_backward(&pr.c, &pr.w, &pr.p, &pr.x, &loss0, NULL, NULL, dg0);
    assert_true(loss == loss0);
    assert_memory_equal(dg, dg0, LH * sizeof(double));
    weight_pair pairs[64 + 24 * 8];
    const size_t count = weight_pairs(&pr, &g, pairs);
    assert_true(count >= 5);
    for (size_t a = 0; a < count; a++) {
        const weight_pair *wp = &pairs[a];
        /* wpe: only rows P .. P + N - 1 are read */
        const size_t first = wp->g == g.wpe ? k->P * pr.c.hidden : 0;
        const size_t span = wp->g == g.wpe ? k->N * pr.c.hidden : wp->n;
        double want[8], got[8], norm = 0.0;
        size_t n = 0;
        for (size_t i = first + (a * 5) % 7 % span; n < 8 && i < first + span; i += span / 8 + 1) {
            want[n] = fd(&pr, &wp->w[i]);
            got[n++] = wp->g[i];
            norm += wp->g[i] * wp->g[i];
        }
        const double err = rel_l2_d(want, got, n);
        if (!(err <= TOL_FD_REL) || !(norm > 1e-14))
            fail_msg("seed %llu: %s gradient error %.3g (> %.3g), norm %.3g",
                     (unsigned long long)k->seed, wp->name, err, TOL_FD_REL, sqrt(norm));
    }
    ref_model_grads_free(&g);
    free(dg);
    free(dg0);
    free(head);
    problem_free(&pr);
}

/* The structured gain's gradient (ref_model_grads.dim_gain) against
 * central differences, alone and with a per-head gain, r below 1. */
static void check_dim_gain(const model_case *k)
{
    problem pr;
    problem_make(&pr, k);
    const size_t n = pr.c.layers * pr.c.heads * pr.c.head_dim;
    float *G = malloc(n * sizeof(float));
    ref_rng rng;
    ref_rng_seed(&rng, k->seed + 1000);
    ref_rng_fill(&rng, G, n, -0.5f, 0.5f);
    pr.p.dim_gain = G;
    ref_model_grads g;
    ref_model_grads_alloc(&pr.c, false, &g);
    g.dim_gain = calloc(n, sizeof(double));
    double loss = 0.0, want[64], got[64];
    ref_model_backward_weights(&pr.c, &pr.w, &pr.p, &pr.x, &loss, NULL, NULL, NULL, &g);
    size_t m = 0;
    for (size_t i = 0; i < n && m < 64; i += n / 40 + 1) {
        want[m] = fd(&pr, &G[i]);
        got[m++] = g.dim_gain[i];
    }
    const double err = rel_l2_d(want, got, m);
    if (!(err <= TOL_FD_REL))
        fail_msg("seed %llu: structured gain gradient error %.3g (> %.3g)",
                 (unsigned long long)k->seed, err, TOL_FD_REL);
    /* G = 0 is no structured gain */
    double with = 0.0, without = 0.0;
    memset(G, 0, n * sizeof(float));
    ref_model_forward(&pr.c, &pr.w, &pr.p, &pr.x, NULL, &with);
    pr.p.dim_gain = NULL;
    ref_model_forward(&pr.c, &pr.w, &pr.p, &pr.x, NULL, &without);
    assert_true(fabs(with - without) <= TOL_REF_EXACT * without);
    free(g.dim_gain);
    ref_model_grads_free(&g);
    free(G);
    problem_free(&pr);
}

static void test_dim_gain_gradients(void **state)
{
    (void)state;
    model_case k = { .c = gpt2_config(), .B = 2, .N = 6, .P = 2, .lengths = { 6, 4 }, .seed = 121 };
    k.c.gain_mode = PFX_GAIN_OFF;
    k.c.gain_ramp = 0.7;
    check_dim_gain(&k);
    k = (model_case){
        .c = llama_config(), .B = 2, .N = 5, .P = 0, .lengths = { 5, 5 }, .seed = 122
    };
    k.c.gain_ramp = 0.4; /* with the per-head linear gain */
    check_dim_gain(&k);
}

static void test_gpt2_weight_gradients(void **state)
{
    (void)state;
    model_case k = { .c = gpt2_config(), .B = 2, .N = 7, .P = 3, .lengths = { 7, 5 }, .seed = 111 };
    check_weight_gradients(&k, false);
    k.P = 0;
    k.c.gain_mode = PFX_GAIN_LINEAR;
    k.seed = 112;
    check_weight_gradients(&k, true);
}

static void test_llama_weight_gradients(void **state)
{
    (void)state;
    model_case k = {
        .c = llama_config(), .B = 2, .N = 6, .P = 2, .lengths = { 6, 4 }, .seed = 113
    };
    check_weight_gradients(&k, true);
    k.c.qkv_bias = false;
    k.c.kv_heads = 1;
    k.c.gain_mode = PFX_GAIN_OFF;
    k.P = 0;
    k.seed = 114;
    check_weight_gradients(&k, false);
}

static void test_gpt2_gradients(void **state)
{
    (void)state;
    model_case k = { .c = gpt2_config(), .B = 2, .N = 7, .P = 3, .lengths = { 7, 5 }, .seed = 101 };
    check_gradients(&k);
    k.c.act = REF_ACT_GELU;
    k.c.gain_mode = PFX_GAIN_LINEAR;
    k.P = 1;
    k.lengths[0] = 4;
    k.seed = 102;
    check_gradients(&k);
}

static void test_llama_gradients(void **state)
{
    (void)state;
    model_case k = {
        .c = llama_config(), .B = 2, .N = 6, .P = 2, .lengths = { 6, 3 }, .seed = 103
    };
    check_gradients(&k);
    /* no bias, default RoPE, tanh gain, P = 0 (gains only), MQA */
    k.c.qkv_bias = false;
    k.c.rope.llama3 = false;
    k.c.gain_mode = PFX_GAIN_TANH;
    k.c.kv_heads = 1;
    k.P = 0;
    k.seed = 104;
    check_gradients(&k);
}

/* layer_ref's double attention with lengths agrees with the contract
 * reference (reference.c) on float inputs. */
static void test_attention_lengths(void **state)
{
    (void)state;
    const size_t B = 3, N = 5, H = 4, Hkv = 2, D = 3, P = 2;
    const int32_t lens[3] = { 5, 2, 1 };
    ref_rng rng;
    ref_rng_seed(&rng, 105);
    float q[3 * 5 * 4 * 3], k[3 * 5 * 2 * 3], v[3 * 5 * 2 * 3], pk[2 * 2 * 3], pv[2 * 2 * 3];
    float gain[4];
    ref_rng_fill(&rng, q, sizeof(q) / 4, -1.0f, 1.0f);
    ref_rng_fill(&rng, k, sizeof(k) / 4, -1.0f, 1.0f);
    ref_rng_fill(&rng, v, sizeof(v) / 4, -1.0f, 1.0f);
    ref_rng_fill(&rng, pk, sizeof(pk) / 4, -1.0f, 1.0f);
    ref_rng_fill(&rng, pv, sizeof(pv) / 4, -1.0f, 1.0f);
    ref_rng_fill(&rng, gain, 4, -0.5f, 0.5f);
    pfx_attention_desc d;
    ref_desc_init(&d, B, H, Hkv, N, N, P, D);
    d.q_layout = d.kv_layout = d.o_layout = PFX_LAYOUT_BNHD;
    d.causal = true;
    d.gain_mode = PFX_GAIN_TANH;
    d.gain = gain;
    d.gain_ramp = 0.5f;
    d.q_lens = lens;
    d.kv_lens = lens;
    double want[3 * 5 * 4 * 3], got[3 * 5 * 4 * 3];
    ref_attention_forward(&d, q, k, v, pk, pv, want, NULL);
    double qd[3 * 5 * 4 * 3], kd[3 * 5 * 2 * 3], vd[3 * 5 * 2 * 3], pkd[12], pvd[12], gd[4];
    for (size_t i = 0; i < 180; i++)
        qd[i] = q[i];
    for (size_t i = 0; i < 90; i++) {
        kd[i] = k[i];
        vd[i] = v[i];
    }
    for (size_t i = 0; i < 12; i++) {
        pkd[i] = pk[i];
        pvd[i] = pv[i];
    }
    for (size_t i = 0; i < 4; i++)
        gd[i] = gain[i];
    ref_layer_dims ld = { .batch = B,
                          .tokens = N,
                          .model_dim = H * D,
                          .heads = H,
                          .kv_heads = Hkv,
                          .head_dim = D,
                          .prefix_len = P,
                          .causal = true,
                          .gain_mode = PFX_GAIN_TANH,
                          .lens = lens };
    ref_layer_prefix lp = { pkd, pvd, gd, (double)0.5f };
    ref_layer_attention(&ld, &lp, qd, kd, vd, got);
    assert_true(rel_l2_d(want, got, 180) <= TOL_REF_EXACT);
    /* padding rows are 0 */
    for (size_t e = 0; e < H * D; e++)
        assert_true(got[(1 * N + 3) * H * D + e] == 0.0);
}

static void test_tied_and_zero_gain(void **state)
{
    (void)state;
    model_case k = { .c = llama_config(), .B = 1, .N = 4, .P = 2, .lengths = { 4 }, .seed = 106 };
    problem pr;
    problem_make(&pr, &k);
    const size_t n = k.N * pr.c.vocab;
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
    ref_model_forward(&pr.c, &pr.w, &pr.p, &pr.x, a, NULL);
    pr.w.lm_head = pr.w.wte; /* untied, same values */
    ref_model_forward(&pr.c, &pr.w, &pr.p, &pr.x, b, NULL);
    assert_memory_equal(a, b, n * sizeof(double));
    /* a different head changes the logits */
    float *head = malloc(pr.c.vocab * pr.c.hidden * sizeof(float));
    for (size_t i = 0; i < pr.c.vocab * pr.c.hidden; i++)
        head[i] = -pr.w.wte[i];
    pr.w.lm_head = head;
    ref_model_forward(&pr.c, &pr.w, &pr.p, &pr.x, b, NULL);
    assert_true(rel_l2_d(a, b, n) > 1.0);
    pr.w.lm_head = NULL;
    /* a linear gain of 0 is no gain */
    for (size_t i = 0; i < pr.c.layers * pr.c.heads; i++)
        pr.gain[i] = 0.0f;
    ref_model_forward(&pr.c, &pr.w, &pr.p, &pr.x, a, NULL);
    pr.c.gain_mode = PFX_GAIN_OFF;
    ref_model_forward(&pr.c, &pr.w, &pr.p, &pr.x, b, NULL);
    assert_true(rel_l2_d(a, b, n) <= TOL_REF_EXACT);
    free(a);
    free(b);
    free(head);
    problem_free(&pr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_gradients),         cmocka_unit_test(test_llama_gradients),
        cmocka_unit_test(test_gpt2_weight_gradients),  cmocka_unit_test(test_dim_gain_gradients),
        cmocka_unit_test(test_llama_weight_gradients), cmocka_unit_test(test_attention_lengths),
        cmocka_unit_test(test_tied_and_zero_gain),
    };
    return cmocka_run_group_tests_name("model_ref", tests, NULL, NULL);
}
