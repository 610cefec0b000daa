/*
 * Suite 'layer': the attention layer, its residual stack and the MSE loss
 * (include/prefixcl/layer.h) against the double-precision reference
 * (tests/reference/layer_ref.h), which is itself checked by central finite
 * differences and against ref_attention_forward/backward.
 */
#include <math.h>

#include "pfx_test.h"
#include "reference/layer_ref.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

/* ---- a problem: dims, host weights and prefixes (float and double) ---- */

#define MAXL 3

typedef struct problem {
    ref_layer_dims d;
    size_t layers;
    bool bias;
    float *w[MAXL][PFX_LAYER_WEIGHT_COUNT]; /* NULL biases when !bias */
    double *wd[MAXL][PFX_LAYER_WEIGHT_COUNT];
    float *pk[MAXL], *pv[MAXL], *gain[MAXL];
    double *pkd[MAXL], *pvd[MAXL], *gaind[MAXL];
    float *x, *dy;
    double *xd, *dyd;
    float ramp;
    bool device_gain; /* gains as device tensors (prefix.gain NULL) */
} problem;

static size_t weight_count(const ref_layer_dims *d, int i)
{
    const size_t C = d->model_dim, qd = d->heads * d->head_dim, kvd = d->kv_heads * d->head_dim;
    const size_t n[PFX_LAYER_WEIGHT_COUNT] = { qd * C, kvd * C, kvd * C, C * qd, qd, kvd, kvd, C };
    return n[i];
}

static double *to_double(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof(double));
    assert_non_null(d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static float *random_floats(ref_rng *rng, size_t n, float a)
{
    float *x = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(x);
    ref_rng_fill(rng, x, n, -a, a);
    return x;
}

static void problem_init(problem *pr, size_t layers, bool bias, uint64_t seed)
{
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    const ref_layer_dims *d = &pr->d;
    pr->layers = layers;
    pr->bias = bias;
    const size_t P = d->prefix_len, pn = d->kv_heads * P * d->head_dim;
    for (size_t l = 0; l < layers; l++) {
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++) {
            if (i >= PFX_LAYER_BQ && !bias) {
                pr->w[l][i] = NULL;
                pr->wd[l][i] = NULL;
                continue;
            }
            size_t fan =
                i == PFX_LAYER_WO || i == PFX_LAYER_BO ? d->heads * d->head_dim : d->model_dim;
            pr->w[l][i] = random_floats(&rng, weight_count(d, i), 1.5f / sqrtf((float)fan));
            pr->wd[l][i] = to_double(pr->w[l][i], weight_count(d, i));
        }
        pr->pk[l] = P ? random_floats(&rng, pn, 1.0f) : NULL;
        pr->pv[l] = P ? random_floats(&rng, pn, 1.0f) : NULL;
        pr->pkd[l] = P ? to_double(pr->pk[l], pn) : NULL;
        pr->pvd[l] = P ? to_double(pr->pv[l], pn) : NULL;
        pr->gain[l] = random_floats(&rng, d->heads, 0.8f);
        pr->gaind[l] = to_double(pr->gain[l], d->heads);
    }
    const size_t n = d->batch * d->tokens * d->model_dim;
    pr->x = random_floats(&rng, n, 1.0f);
    pr->dy = random_floats(&rng, n, 1.0f);
    pr->xd = to_double(pr->x, n);
    pr->dyd = to_double(pr->dy, n);
    if (pr->ramp == 0.0f)
        pr->ramp = 1.0f;
}

static void problem_free(problem *pr)
{
    for (size_t l = 0; l < pr->layers; l++) {
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++) {
            free(pr->w[l][i]);
            free(pr->wd[l][i]);
        }
        free(pr->pk[l]);
        free(pr->pv[l]);
        free(pr->pkd[l]);
        free(pr->pvd[l]);
        free(pr->gain[l]);
        free(pr->gaind[l]);
    }
    free(pr->x);
    free(pr->dy);
    free(pr->xd);
    free(pr->dyd);
}

static ref_layer_weights ref_weights(const problem *pr, size_t l)
{
    double *const *w = pr->wd[l];
    return (ref_layer_weights){ w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7] };
}

static ref_layer_prefix ref_prefix(const problem *pr, size_t l)
{
    return (ref_layer_prefix){ pr->pkd[l], pr->pvd[l],
                               pr->d.gain_mode != PFX_GAIN_OFF ? pr->gaind[l] : NULL, pr->ramp };
}

static const char *weight_label(int i)
{
    static const char *const names[PFX_LAYER_WEIGHT_COUNT] = { "dWq", "dWk", "dWv", "dWo",
                                                               "dbq", "dbk", "dbv", "dbo" };
    return names[i];
}

/* ---- device side ---- */

static pfx_tensor *tensor(pfx_runtime *rt, unsigned ndim, size_t d0, size_t d1, size_t d2)
{
    const size_t shape[3] = { d0, d1, d2 };
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, ndim, shape, &t), PFX_SUCCESS);
    return t;
}

static pfx_tensor *upload(pfx_runtime *rt, unsigned ndim, size_t d0, size_t d1, size_t d2,
                          const float *host)
{
    pfx_tensor *t = tensor(rt, ndim, d0, d1, d2);
    assert_int_equal(pfx_tensor_write(t, 0, pfx_tensor_numel(t), host), PFX_SUCCESS);
    return t;
}

static float *read_all(const pfx_tensor *t)
{
    size_t n = pfx_tensor_numel(t);
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    assert_int_equal(pfx_tensor_read(t, 0, n, x), PFX_SUCCESS);
    return x;
}

static void expect_close(const char *what, const double *ref, const float *got, size_t n,
                         double tol)
{
    double err = rel_l2(ref, got, n);
    if (!(err <= tol))
        fail_msg("%s: relative L2 error %.3g > %.3g", what, err, tol);
}

/* A gradient that is zero in exact arithmetic (dbk without a prefix: a shift
 * of every key by bk shifts a row's logits by a constant) is held to an
 * absolute bound instead of a relative one. */
static void expect_close_t(const char *what, const double *ref, const pfx_tensor *t, double tol)
{
    float *got = read_all(t);
    size_t n = pfx_tensor_numel(t);
    double norm = 0.0;
    for (size_t i = 0; i < n; i++)
        norm += ref[i] * ref[i];
    if (sqrt(norm) < 1e-9) {
        for (size_t i = 0; i < n; i++)
            if (!(fabsf(got[i]) <= tol))
                fail_msg("%s: entry %zu is %g, expected ~0", what, i, (double)got[i]);
    } else {
        expect_close(what, ref, got, n, tol);
    }
    free(got);
}

typedef struct device {
    pfx_layer *layer[MAXL];
    pfx_tensor *pk[MAXL], *pv[MAXL], *gain[MAXL];
    pfx_layer_prefix pre[MAXL];
} device;

static pfx_layer_params layer_params(const problem *pr)
{
    const ref_layer_dims *d = &pr->d;
    return (pfx_layer_params){ .model_dim = d->model_dim,
                               .heads = d->heads,
                               .kv_heads = d->kv_heads,
                               .head_dim = d->head_dim,
                               .prefix_len = d->prefix_len,
                               .max_batch = d->batch + 1,
                               .max_tokens = d->tokens + 2,
                               .bias = pr->bias,
                               .causal = d->causal,
                               .residual = d->residual,
                               .gain_mode = d->gain_mode,
                               .scale = (float)d->scale };
}

static void device_init(pfx_runtime *rt, const problem *pr, device *dv)
{
    memset(dv, 0, sizeof(*dv));
    const ref_layer_dims *d = &pr->d;
    pfx_layer_params lp = layer_params(pr);
    for (size_t l = 0; l < pr->layers; l++) {
        pfx_status st = pfx_layer_create(rt, &lp, &dv->layer[l]);
        if (st != PFX_SUCCESS)
            fail_msg("layer_create: %s", pfx_last_error(rt));
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++) {
            pfx_tensor *t = pfx_layer_weight(dv->layer[l], (pfx_layer_weight_id)i);
            if (!pr->w[l][i]) {
                assert_null(t);
                continue;
            }
            assert_non_null(t);
            assert_int_equal(pfx_tensor_numel(t), weight_count(d, i));
            assert_int_equal(pfx_tensor_write(t, 0, weight_count(d, i), pr->w[l][i]), PFX_SUCCESS);
        }
        if (d->prefix_len) {
            dv->pk[l] = upload(rt, 3, d->kv_heads, d->prefix_len, d->head_dim, pr->pk[l]);
            dv->pv[l] = upload(rt, 3, d->kv_heads, d->prefix_len, d->head_dim, pr->pv[l]);
        }
        dv->pre[l] = (pfx_layer_prefix){ dv->pk[l], dv->pv[l], pr->gain[l], pr->ramp, NULL };
        if (pr->device_gain && d->gain_mode != PFX_GAIN_OFF) {
            dv->gain[l] = upload(rt, 1, d->heads, 0, 0, pr->gain[l]);
            dv->pre[l].gain = NULL; /* only the tensor: the test fails if it is ignored */
            dv->pre[l].gain_tensor = dv->gain[l];
        }
    }
}

static void device_free(device *dv)
{
    for (size_t l = 0; l < MAXL; l++) {
        pfx_layer_destroy(&dv->layer[l]);
        pfx_tensor_destroy(&dv->pk[l]);
        pfx_tensor_destroy(&dv->pv[l]);
        pfx_tensor_destroy(&dv->gain[l]);
    }
}

/* ---- the reference against finite differences ---- */

/* L = sum(dy * stack(x)) */
static double ref_loss(const problem *pr)
{
    const size_t n = pr->d.batch * pr->d.tokens * pr->d.model_dim;
    ref_layer_weights w[MAXL];
    ref_layer_prefix p[MAXL];
    for (size_t l = 0; l < pr->layers; l++) {
        w[l] = ref_weights(pr, l);
        p[l] = ref_prefix(pr, l);
    }
    double *y = malloc(n * sizeof(double));
    assert_non_null(y);
    ref_stack_forward(&pr->d, pr->layers, w, p, pr->xd, y);
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += pr->dyd[i] * y[i];
    free(y);
    return s;
}

/* Central differences of ref_loss in every entry of x[0..n). */
static void fd_grad(problem *pr, double *x, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + TOL_LAYER_FD_STEP;
        double lp = ref_loss(pr);
        x[i] = x0 - TOL_LAYER_FD_STEP;
        double lm = ref_loss(pr);
        x[i] = x0;
        out[i] = (lp - lm) / (2.0 * TOL_LAYER_FD_STEP);
    }
}

static void expect_fd(const char *what, problem *pr, double *x, size_t n, const double *analytic)
{
    double *fd = malloc(n * sizeof(double));
    assert_non_null(fd);
    fd_grad(pr, x, n, fd);
    double err = rel_l2_d(fd, analytic, n);
    if (!(err <= TOL_LAYER_FD))
        fail_msg("reference %s vs finite differences: relative L2 %.3g > %.3g", what, err,
                 TOL_LAYER_FD);
    free(fd);
}

static void reference_fd_case(size_t layers, pfx_gain_mode mode, bool causal, bool bias)
{
    problem pr = { .d = { .batch = 2,
                          .tokens = 3,
                          .model_dim = 5,
                          .heads = 4,
                          .kv_heads = 2,
                          .head_dim = 3,
                          .prefix_len = 2,
                          .causal = causal,
                          .residual = layers > 1,
                          .gain_mode = mode },
                   .ramp = 0.75f };
    problem_init(&pr, layers, bias, 100 + layers);
    const ref_layer_dims *d = &pr.d;
    const size_t n = d->batch * d->tokens * d->model_dim,
                 pn = d->kv_heads * d->prefix_len * d->head_dim;
    ref_layer_weights w[MAXL];
    ref_layer_prefix p[MAXL];
    double *dpk[MAXL], *dpv[MAXL], *dg[MAXL], *dw[MAXL][PFX_LAYER_WEIGHT_COUNT];
    ref_layer_grads g[MAXL];
    for (size_t l = 0; l < layers; l++) {
        w[l] = ref_weights(&pr, l);
        p[l] = ref_prefix(&pr, l);
        dpk[l] = calloc(pn, sizeof(double));
        dpv[l] = calloc(pn, sizeof(double));
        dg[l] = calloc(d->heads, sizeof(double));
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++)
            dw[l][i] = calloc(weight_count(d, i), sizeof(double));
        g[l] = (ref_layer_grads){ NULL,     dpk[l],   dpv[l],   dg[l],    dw[l][0], dw[l][1],
                                  dw[l][2], dw[l][3], dw[l][4], dw[l][5], dw[l][6], dw[l][7] };
    }
    double *dx = calloc(n, sizeof(double));
    ref_stack_backward(d, layers, w, p, pr.xd, pr.dyd, g, dx);
    expect_fd("dx", &pr, pr.xd, n, dx);
    for (size_t l = 0; l < layers; l++) {
        expect_fd("dprefix_k", &pr, pr.pkd[l], pn, dpk[l]);
        expect_fd("dprefix_v", &pr, pr.pvd[l], pn, dpv[l]);
        if (mode != PFX_GAIN_OFF)
            expect_fd("dgain", &pr, pr.gaind[l], d->heads, dg[l]);
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++)
            if (pr.wd[l][i])
                expect_fd("dweight", &pr, pr.wd[l][i], weight_count(d, i), dw[l][i]);
    }
    for (size_t l = 0; l < layers; l++) {
        free(dpk[l]);
        free(dpv[l]);
        free(dg[l]);
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++)
            free(dw[l][i]);
    }
    free(dx);
    problem_free(&pr);
}

static void test_reference_fd(void **state)
{
    (void)state;
    reference_fd_case(1, PFX_GAIN_TANH, true, true);
    reference_fd_case(1, PFX_GAIN_LINEAR, false, false);
    reference_fd_case(2, PFX_GAIN_TANH, false, true);
}

/* The layer reference's own attention agrees with ref_attention_*. */
static void test_reference_attention(void **state)
{
    (void)state;
    problem pr = { .d = { .batch = 2,
                          .tokens = 5,
                          .model_dim = 4,
                          .heads = 6,
                          .kv_heads = 2,
                          .head_dim = 3,
                          .prefix_len = 3,
                          .causal = true,
                          .gain_mode = PFX_GAIN_TANH },
                   .ramp = 0.5f };
    problem_init(&pr, 1, false, 7);
    const ref_layer_dims *d = &pr.d;
    ref_rng rng;
    ref_rng_seed(&rng, 8);
    const size_t nq = d->batch * d->tokens * d->heads * d->head_dim;
    const size_t nk = d->batch * d->tokens * d->kv_heads * d->head_dim;
    const size_t pn = d->kv_heads * d->prefix_len * d->head_dim;
    float *q = random_floats(&rng, nq, 1.5f), *k = random_floats(&rng, nk, 1.5f);
    float *v = random_floats(&rng, nk, 1.0f), *d_o = random_floats(&rng, nq, 1.0f);
    double *qd = to_double(q, nq), *kd = to_double(k, nk), *vd = to_double(v, nk);
    double *dod = to_double(d_o, nq);
    pfx_attention_desc ad;
    ref_desc_init(&ad, d->batch, d->heads, d->kv_heads, d->tokens, d->tokens, d->prefix_len,
                  d->head_dim);
    ad.q_layout = ad.kv_layout = ad.o_layout = PFX_LAYOUT_BNHD;
    ad.causal = true;
    ad.gain_mode = PFX_GAIN_TANH;
    ad.gain = pr.gain[0];
    ad.gain_ramp = pr.ramp;
    double *o1 = calloc(nq, sizeof(double)), *o2 = calloc(nq, sizeof(double));
    ref_layer_prefix p = ref_prefix(&pr, 0);
    ref_layer_attention(d, &p, qd, kd, vd, o1);
    ref_attention_forward(&ad, q, k, v, pr.pk[0], pr.pv[0], o2, NULL);
    assert_true(rel_l2_d(o2, o1, nq) <= TOL_REF_EXACT);
    double *g1[6], *g2[6];
    const size_t gn[6] = { nq, nk, nk, pn, pn, d->heads };
    for (int i = 0; i < 6; i++) {
        g1[i] = calloc(gn[i], sizeof(double));
        g2[i] = calloc(gn[i], sizeof(double));
    }
    ref_layer_attention_backward(d, &p, qd, kd, vd, dod, g1[0], g1[1], g1[2], g1[3], g1[4], g1[5]);
    ref_attention_backward(&ad, 0, q, k, v, pr.pk[0], pr.pv[0], d_o, g2[0], g2[1], g2[2], g2[3],
                           g2[4], g2[5], NULL);
    for (int i = 0; i < 6; i++) {
        double err = rel_l2_d(g2[i], g1[i], gn[i]);
        if (!(err <= TOL_REF_EXACT))
            fail_msg("gradient %d: %.3g", i, err);
        free(g1[i]);
        free(g2[i]);
    }
    free(q);
    free(k);
    free(v);
    free(d_o);
    free(qd);
    free(kd);
    free(vd);
    free(dod);
    free(o1);
    free(o2);
    problem_free(&pr);
}

/* ---- device vs reference ---- */

/* Forward and backward of a stack of pr->layers layers (1: a single layer
 * through pfx_layer_*, more: pfx_stack_*), every gradient, weight gradients
 * when with_dw. */
static void device_case(pfx_runtime *rt, problem *pr, bool with_dw)
{
    const size_t before = pfx_test_live_bytes(rt);
    const ref_layer_dims *d = &pr->d;
    const size_t L = pr->layers, B = d->batch, N = d->tokens, C = d->model_dim, n = B * N * C;
    const size_t pn = d->kv_heads * d->prefix_len * d->head_dim;
    device dv;
    device_init(rt, pr, &dv);

    pfx_tensor *acts[MAXL + 1];
    acts[0] = upload(rt, 3, B, N, C, pr->x);
    for (size_t l = 1; l <= L; l++)
        acts[l] = tensor(rt, 3, B, N, C);
    pfx_tensor *dy = upload(rt, 3, B, N, C, pr->dy), *dx = tensor(rt, 3, B, N, C);
    pfx_tensor *scratch[2] = { tensor(rt, 3, B, N, C), tensor(rt, 3, B, N, C) };
    pfx_layer_grads g[MAXL];
    memset(g, 0, sizeof(g));
    for (size_t l = 0; l < L; l++) {
        if (d->prefix_len) {
            g[l].dprefix_k = tensor(rt, 3, d->kv_heads, d->prefix_len, d->head_dim);
            g[l].dprefix_v = tensor(rt, 3, d->kv_heads, d->prefix_len, d->head_dim);
        }
        g[l].dgain = tensor(rt, 1, d->heads, 0, 0);
        for (int i = 0; with_dw && i < PFX_LAYER_WEIGHT_COUNT; i++)
            if (pr->w[l][i]) {
                pfx_tensor *w = pfx_layer_weight(dv.layer[l], (pfx_layer_weight_id)i);
                g[l].dweight[i] =
                    tensor(rt, pfx_tensor_ndim(w), pfx_tensor_dim(w, 0), pfx_tensor_dim(w, 1), 0);
            }
    }
    pfx_status st;
    if (L == 1) {
        st = pfx_layer_forward(dv.layer[0], acts[0], &dv.pre[0], acts[1]);
        if (st != PFX_SUCCESS)
            fail_msg("layer_forward: %s", pfx_last_error(rt));
        g[0].dx = dx;
        st = pfx_layer_backward(dv.layer[0], acts[0], &dv.pre[0], dy, &g[0]);
        if (st != PFX_SUCCESS)
            fail_msg("layer_backward: %s", pfx_last_error(rt));
    } else {
        st = pfx_stack_forward(dv.layer, L, dv.pre, acts);
        if (st != PFX_SUCCESS)
            fail_msg("stack_forward: %s", pfx_last_error(rt));
        st = pfx_stack_backward(dv.layer, L, dv.pre, acts, dy, g, dx, scratch);
        if (st != PFX_SUCCESS)
            fail_msg("stack_backward: %s", pfx_last_error(rt));
    }

    /* reference */
    ref_layer_weights w[MAXL];
    ref_layer_prefix p[MAXL];
    ref_layer_grads rg[MAXL];
    double *rgd[MAXL][4 + PFX_LAYER_WEIGHT_COUNT];
    for (size_t l = 0; l < L; l++) {
        w[l] = ref_weights(pr, l);
        p[l] = ref_prefix(pr, l);
        const size_t sizes[3] = { pn, pn, d->heads };
        for (int i = 0; i < 3; i++)
            rgd[l][i] = calloc(sizes[i] ? sizes[i] : 1, sizeof(double));
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++)
            rgd[l][4 + i] = calloc(weight_count(d, i), sizeof(double));
        rg[l] =
            (ref_layer_grads){ NULL,      rgd[l][0], rgd[l][1], rgd[l][2], rgd[l][4],  rgd[l][5],
                               rgd[l][6], rgd[l][7], rgd[l][8], rgd[l][9], rgd[l][10], rgd[l][11] };
    }
    double *y = malloc(n * sizeof(double)), *rdx = malloc(n * sizeof(double));
    ref_stack_forward(d, L, w, p, pr->xd, y);
    ref_stack_backward(d, L, w, p, pr->xd, pr->dyd, rg, rdx);
    expect_close_t("Y", y, acts[L], TOL_LAYER_FWD);
    expect_close_t("dX", rdx, dx, TOL_LAYER_BWD);
    for (size_t l = 0; l < L; l++) {
        if (d->prefix_len) {
            expect_close_t("dprefix_k", rgd[l][0], g[l].dprefix_k, TOL_LAYER_BWD);
            expect_close_t("dprefix_v", rgd[l][1], g[l].dprefix_v, TOL_LAYER_BWD);
        }
        expect_close_t("dgain", rgd[l][2], g[l].dgain, TOL_LAYER_BWD);
        for (int i = 0; with_dw && i < PFX_LAYER_WEIGHT_COUNT; i++)
            if (g[l].dweight[i])
                expect_close_t(weight_label(i), rgd[l][4 + i], g[l].dweight[i], TOL_LAYER_BWD);
    }
    /* frozen weights untouched, bit for bit */
    for (size_t l = 0; l < L; l++)
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++) {
            if (!pr->w[l][i])
                continue;
            float *got = read_all(pfx_layer_weight(dv.layer[l], (pfx_layer_weight_id)i));
            assert_memory_equal(got, pr->w[l][i], weight_count(d, i) * sizeof(float));
            free(got);
        }

    for (size_t l = 0; l < L; l++) {
        for (int i = 0; i < 4 + PFX_LAYER_WEIGHT_COUNT; i++)
            if (i != 3)
                free(rgd[l][i]);
        pfx_tensor_destroy(&g[l].dprefix_k);
        pfx_tensor_destroy(&g[l].dprefix_v);
        pfx_tensor_destroy(&g[l].dgain);
        for (int i = 0; i < PFX_LAYER_WEIGHT_COUNT; i++)
            pfx_tensor_destroy(&g[l].dweight[i]);
    }
    free(y);
    free(rdx);
    for (size_t l = 0; l <= L; l++)
        pfx_tensor_destroy(&acts[l]);
    pfx_tensor_destroy(&dy);
    pfx_tensor_destroy(&dx);
    pfx_tensor_destroy(&scratch[0]);
    pfx_tensor_destroy(&scratch[1]);
    device_free(&dv);
    assert_int_equal(pfx_test_live_bytes(rt), before);
}

static void test_layer_single(void **state)
{
    pfx_runtime *rt = *state;
    /* awkward sizes, biases, causal, tanh gain with a ramp, weight gradients */
    problem a = { .d = { .batch = 2,
                         .tokens = 7,
                         .model_dim = 13,
                         .heads = 3,
                         .kv_heads = 3,
                         .head_dim = 5,
                         .prefix_len = 3,
                         .causal = true,
                         .gain_mode = PFX_GAIN_TANH },
                  .ramp = 0.6f };
    problem_init(&a, 1, true, 21);
    device_case(rt, &a, true);
    problem_free(&a);
    /* GQA (4 heads on 2 kv heads), no bias, linear gain, residual */
    problem b = { .d = { .batch = 3,
                         .tokens = 9,
                         .model_dim = 10,
                         .heads = 4,
                         .kv_heads = 2,
                         .head_dim = 8,
                         .prefix_len = 5,
                         .residual = true,
                         .gain_mode = PFX_GAIN_LINEAR } };
    problem_init(&b, 1, false, 22);
    device_case(rt, &b, false);
    problem_free(&b);
    /* MQA, no prefix, gain off, bias */
    problem c = { .d = { .batch = 1,
                         .tokens = 6,
                         .model_dim = 7,
                         .heads = 3,
                         .kv_heads = 1,
                         .head_dim = 4,
                         .prefix_len = 0,
                         .gain_mode = PFX_GAIN_OFF } };
    problem_init(&c, 1, true, 23);
    device_case(rt, &c, true);
    problem_free(&c);
}

/* Gains held on the device (prefix.gain_tensor), forward and backward
 * against the reference: the step reads nothing back for them. */
static void test_device_gains(void **state)
{
    pfx_runtime *rt = *state;
    problem a = { .d = { .batch = 2,
                         .tokens = 6,
                         .model_dim = 11,
                         .heads = 4,
                         .kv_heads = 2,
                         .head_dim = 5,
                         .prefix_len = 3,
                         .causal = true,
                         .gain_mode = PFX_GAIN_TANH },
                  .ramp = 0.7f,
                  .device_gain = true };
    problem_init(&a, 2, true, 41);
    device_case(rt, &a, false);
    problem_free(&a);
    problem b = { .d = { .batch = 1,
                         .tokens = 5,
                         .model_dim = 9,
                         .heads = 3,
                         .kv_heads = 3,
                         .head_dim = 4,
                         .prefix_len = 2,
                         .residual = true,
                         .gain_mode = PFX_GAIN_LINEAR },
                  .ramp = 1.0f,
                  .device_gain = true };
    problem_init(&b, 1, true, 42);
    device_case(rt, &b, true);
    problem_free(&b);
}

static void test_stack(void **state)
{
    pfx_runtime *rt = *state;
    problem a = { .d = { .batch = 2,
                         .tokens = 5,
                         .model_dim = 12,
                         .heads = 4,
                         .kv_heads = 2,
                         .head_dim = 6,
                         .prefix_len = 4,
                         .causal = true,
                         .residual = true,
                         .gain_mode = PFX_GAIN_TANH },
                  .ramp = 1.0f };
    problem_init(&a, 2, true, 31);
    device_case(rt, &a, true);
    problem_free(&a);
    problem b = { .d = { .batch = 1,
                         .tokens = 3,
                         .model_dim = 6,
                         .heads = 2,
                         .kv_heads = 1,
                         .head_dim = 3,
                         .prefix_len = 2,
                         .residual = true,
                         .gain_mode = PFX_GAIN_TANH },
                  .ramp = 0.3f };
    problem_init(&b, 3, false, 32);
    device_case(rt, &b, false);
    problem_free(&b);
}

/* accumulate adds; two runs give bit-identical results */
static void test_accumulate_determinism(void **state)
{
    pfx_runtime *rt = *state;
    const size_t before = pfx_test_live_bytes(rt);
    problem pr = { .d = { .batch = 2,
                          .tokens = 6,
                          .model_dim = 9,
                          .heads = 2,
                          .kv_heads = 1,
                          .head_dim = 4,
                          .prefix_len = 3,
                          .residual = true,
                          .gain_mode = PFX_GAIN_TANH } };
    problem_init(&pr, 1, true, 41);
    const ref_layer_dims *d = &pr.d;
    device dv;
    device_init(rt, &pr, &dv);
    pfx_tensor *x = upload(rt, 3, d->batch, d->tokens, d->model_dim, pr.x);
    pfx_tensor *y = tensor(rt, 3, d->batch, d->tokens, d->model_dim);
    pfx_tensor *dy = upload(rt, 3, d->batch, d->tokens, d->model_dim, pr.dy);
    pfx_tensor *dpk = tensor(rt, 3, d->kv_heads, d->prefix_len, d->head_dim);
    pfx_tensor *dgain = tensor(rt, 1, d->heads, 0, 0);
    pfx_tensor *dbq = tensor(rt, 1, d->heads * d->head_dim, 0, 0);
    pfx_layer_grads g = { .dprefix_k = dpk, .dgain = dgain };
    g.dweight[PFX_LAYER_BQ] = dbq;
    assert_int_equal(pfx_layer_forward(dv.layer[0], x, &dv.pre[0], y), PFX_SUCCESS);
    assert_int_equal(pfx_layer_backward(dv.layer[0], x, &dv.pre[0], dy, &g), PFX_SUCCESS);
    float *k1 = read_all(dpk), *g1 = read_all(dgain), *b1 = read_all(dbq);
    assert_int_equal(pfx_layer_backward(dv.layer[0], x, &dv.pre[0], dy, &g), PFX_SUCCESS);
    float *k2 = read_all(dpk);
    assert_memory_equal(k1, k2, pfx_tensor_numel(dpk) * sizeof(float)); /* deterministic */
    g.accumulate = true;
    assert_int_equal(pfx_layer_backward(dv.layer[0], x, &dv.pre[0], dy, &g), PFX_SUCCESS);
    float *k3 = read_all(dpk), *g3 = read_all(dgain), *b3 = read_all(dbq);
    for (size_t i = 0; i < pfx_tensor_numel(dpk); i++)
        assert_float_equal(k3[i], 2 * k1[i], 1e-5 * (1 + fabsf(k1[i])));
    for (size_t i = 0; i < d->heads; i++)
        assert_float_equal(g3[i], 2 * g1[i], 1e-5 * (1 + fabsf(g1[i])));
    for (size_t i = 0; i < pfx_tensor_numel(dbq); i++)
        assert_float_equal(b3[i], 2 * b1[i], 1e-5 * (1 + fabsf(b1[i])));
    free(k1);
    free(k2);
    free(k3);
    free(g1);
    free(g3);
    free(b1);
    free(b3);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y);
    pfx_tensor_destroy(&dy);
    pfx_tensor_destroy(&dpk);
    pfx_tensor_destroy(&dgain);
    pfx_tensor_destroy(&dbq);
    device_free(&dv);
    problem_free(&pr);
    assert_int_equal(pfx_test_live_bytes(rt), before);
}

static void test_mse(void **state)
{
    pfx_runtime *rt = *state;
    const size_t before = pfx_test_live_bytes(rt);
    ref_rng rng;
    ref_rng_seed(&rng, 51);
    const size_t sizes[3] = { 1, 1000, 40000 };
    for (int c = 0; c < 3; c++) {
        size_t n = sizes[c];
        float *a = random_floats(&rng, n, 2.0f), *b = random_floats(&rng, n, 2.0f);
        pfx_tensor *ta = upload(rt, 1, n, 0, 0, a), *tb = upload(rt, 1, n, 0, 0, b);
        pfx_tensor *tg = tensor(rt, 1, n, 0, 0);
        double loss = -1, loss2 = -1, ref = 0;
        double *rg = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            double d = (double)a[i] - b[i];
            ref += d * d;
            rg[i] = 2.0 * d / (double)n;
        }
        ref /= (double)n;
        assert_int_equal(pfx_mse_loss(ta, tb, tg, &loss), PFX_SUCCESS);
        assert_true(fabs(loss - ref) <= TOL_LAYER_FWD * ref);
        expect_close_t("mse grad", rg, tg, TOL_LAYER_FWD);
        assert_int_equal(pfx_mse_loss(ta, tb, NULL, &loss2), PFX_SUCCESS);
        assert_true(loss == loss2);
        assert_status_names(rt, pfx_mse_loss(ta, tb, ta, &loss), PFX_ERROR_ALIASING, "grad");
        /* the gradient alone (nothing read back), then neither: refused */
        pfx_tensor *tg2 = tensor(rt, 1, n, 0, 0);
        assert_int_equal(pfx_mse_loss(ta, tb, tg2, NULL), PFX_SUCCESS);
        expect_close_t("mse grad without the loss", rg, tg2, TOL_LAYER_FWD);
        pfx_tensor_destroy(&tg2);
        assert_status_names(rt, pfx_mse_loss(ta, tb, NULL, NULL), PFX_ERROR_NULL_ARGUMENT, "loss");
        free(a);
        free(b);
        free(rg);
        pfx_tensor_destroy(&ta);
        pfx_tensor_destroy(&tb);
        pfx_tensor_destroy(&tg);
    }
    pfx_tensor *x = tensor(rt, 1, 5, 0, 0), *y = tensor(rt, 1, 6, 0, 0);
    double loss;
    assert_status_names(rt, pfx_mse_loss(x, y, NULL, &loss), PFX_ERROR_INVALID_SHAPE, "target");
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y);
    assert_int_equal(pfx_test_live_bytes(rt), before);
}

static void test_bad_inputs(void **state)
{
    pfx_runtime *rt = *state;
    const size_t before = pfx_test_live_bytes(rt);
    problem pr = { .d = { .batch = 2,
                          .tokens = 4,
                          .model_dim = 6,
                          .heads = 2,
                          .kv_heads = 1,
                          .head_dim = 3,
                          .prefix_len = 2,
                          .residual = true,
                          .gain_mode = PFX_GAIN_TANH } };
    problem_init(&pr, 1, true, 61);
    const ref_layer_dims *d = &pr.d;
    pfx_layer_params lp = layer_params(&pr);
    pfx_layer *bad = NULL;

    /* create */
    assert_int_equal(pfx_layer_create(NULL, &lp, &bad), PFX_ERROR_NULL_ARGUMENT);
    assert_status_names(rt, pfx_layer_create(rt, NULL, &bad), PFX_ERROR_NULL_ARGUMENT, "params");
    assert_status_names(rt, pfx_layer_create(rt, &lp, NULL), PFX_ERROR_NULL_ARGUMENT, "out");
    pfx_layer_params q = lp;
    q.heads = 3;
    q.kv_heads = 2;
    assert_status_names(rt, pfx_layer_create(rt, &q, &bad), PFX_ERROR_INVALID_SHAPE, "kv_heads");
    q = lp;
    q.model_dim = 0;
    assert_status_names(rt, pfx_layer_create(rt, &q, &bad), PFX_ERROR_INVALID_SHAPE, "model_dim");
    q = lp;
    q.max_tokens = 0;
    assert_status_names(rt, pfx_layer_create(rt, &q, &bad), PFX_ERROR_INVALID_SHAPE, "max_tokens");
    q = lp;
    q.gain_mode = (pfx_gain_mode)9;
    assert_status_names(rt, pfx_layer_create(rt, &q, &bad), PFX_ERROR_INVALID_ARGUMENT,
                        "gain_mode");
    q = lp;
    q.scale = NAN;
    assert_status_names(rt, pfx_layer_create(rt, &q, &bad), PFX_ERROR_NOT_FINITE, "scale");
    q = lp;
    q.max_batch = SIZE_MAX / 2;
    assert_status_names(rt, pfx_layer_create(rt, &q, &bad), PFX_ERROR_SIZE_OVERFLOW, "overflow");
    assert_null(bad);
    assert_int_equal(pfx_test_live_bytes(rt), before);

    device dv;
    device_init(rt, &pr, &dv);
    pfx_layer *L = dv.layer[0];
    assert_status_names(rt, pfx_layer_init_random(L, 1, -1.0f), PFX_ERROR_INVALID_ARGUMENT,
                        "scale");
    const size_t B = d->batch, N = d->tokens, C = d->model_dim;
    pfx_tensor *x = upload(rt, 3, B, N, C, pr.x), *y = tensor(rt, 3, B, N, C);
    pfx_tensor *dy = upload(rt, 3, B, N, C, pr.dy), *dx = tensor(rt, 3, B, N, C);
    pfx_tensor *wrong = tensor(rt, 3, B, N, C + 1), *big = tensor(rt, 3, B + 5, N, C);
    pfx_tensor *ywrong = tensor(rt, 3, B, N + 1, C);
    pfx_layer_prefix pre = dv.pre[0];

    /* backward before any forward */
    pfx_layer_grads g = { .dx = dx };
    assert_status_names(rt, pfx_layer_backward(L, x, &pre, dy, &g), PFX_ERROR_INVALID_ARGUMENT,
                        "no forward");
    /* forward */
    assert_int_equal(pfx_layer_forward(NULL, x, &pre, y), PFX_ERROR_NULL_ARGUMENT);
    assert_status_names(rt, pfx_layer_forward(L, NULL, &pre, y), PFX_ERROR_NULL_ARGUMENT, "x");
    assert_status_names(rt, pfx_layer_forward(L, x, NULL, y), PFX_ERROR_NULL_ARGUMENT, "prefix");
    assert_status_names(rt, pfx_layer_forward(L, x, &pre, NULL), PFX_ERROR_NULL_ARGUMENT, "y");
    assert_status_names(rt, pfx_layer_forward(L, wrong, &pre, y), PFX_ERROR_INVALID_SHAPE, "x");
    assert_status_names(rt, pfx_layer_forward(L, x, &pre, ywrong), PFX_ERROR_INVALID_SHAPE, "y");
    assert_status_names(rt, pfx_layer_forward(L, big, &pre, y), PFX_ERROR_OUT_OF_RANGE,
                        "max_batch");
    assert_status_names(rt, pfx_layer_forward(L, x, &pre, x), PFX_ERROR_ALIASING, "y");
    pfx_layer_prefix p2 = pre;
    p2.gain = NULL;
    assert_status_names(rt, pfx_layer_forward(L, x, &p2, y), PFX_ERROR_NULL_ARGUMENT, "gain");
    float nan_gain[2] = { 0.0f, NAN };
    p2 = pre;
    p2.gain = nan_gain;
    assert_status_names(rt, pfx_layer_forward(L, x, &p2, y), PFX_ERROR_NOT_FINITE, "gain[1]");
    p2 = pre;
    p2.gain_ramp = 1.5f;
    assert_status_names(rt, pfx_layer_forward(L, x, &p2, y), PFX_ERROR_INVALID_ARGUMENT,
                        "gain_ramp");
    p2 = pre;
    p2.gain = NULL;
    p2.gain_tensor = x; /* device gains: [H] float32 */
    assert_status_names(rt, pfx_layer_forward(L, x, &p2, y), PFX_ERROR_INVALID_SHAPE,
                        "prefix.gain_tensor");
    {
        const size_t hs = d->heads;
        pfx_tensor *half_gain = NULL;
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 1, &hs, &half_gain), PFX_SUCCESS);
        p2.gain_tensor = half_gain;
        assert_status_names(rt, pfx_layer_forward(L, x, &p2, y), PFX_ERROR_DTYPE_MISMATCH,
                            "prefix.gain_tensor");
        pfx_tensor_destroy(&half_gain);
    }
    p2 = pre;
    p2.v = NULL;
    assert_status_names(rt, pfx_layer_forward(L, x, &p2, y), PFX_ERROR_NULL_ARGUMENT, "prefix.v");
    p2 = pre;
    p2.k = x;
    assert_status_names(rt, pfx_layer_forward(L, x, &p2, y), PFX_ERROR_INVALID_SHAPE, "prefix.k");

    /* backward */
    assert_int_equal(pfx_layer_forward(L, x, &pre, y), PFX_SUCCESS);
    assert_status_names(rt, pfx_layer_backward(L, x, &pre, dy, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "grads");
    assert_status_names(rt, pfx_layer_backward(L, dy, &pre, dy, &g), PFX_ERROR_INVALID_ARGUMENT,
                        "most recent forward");
    assert_status_names(rt, pfx_layer_backward(L, x, &pre, wrong, &g), PFX_ERROR_INVALID_SHAPE,
                        "dy");
    g.dx = dy;
    assert_status_names(rt, pfx_layer_backward(L, x, &pre, dy, &g), PFX_ERROR_ALIASING, "grads.dx");
    g.dx = dx;
    g.dgain = x;
    assert_status_names(rt, pfx_layer_backward(L, x, &pre, dy, &g), PFX_ERROR_INVALID_SHAPE,
                        "grads.dgain");
    g.dgain = NULL;
    g.dweight[PFX_LAYER_WQ] = dx;
    assert_status_names(rt, pfx_layer_backward(L, x, &pre, dy, &g), PFX_ERROR_INVALID_SHAPE, "Wq");
    g.dweight[PFX_LAYER_WQ] = pfx_layer_weight(L, PFX_LAYER_WQ);
    assert_status_names(rt, pfx_layer_backward(L, x, &pre, dy, &g), PFX_ERROR_ALIASING, "Wq");
    g.dweight[PFX_LAYER_WQ] = NULL;
    assert_int_equal(pfx_layer_backward(L, x, &pre, dy, &g), PFX_SUCCESS);

    /* stack */
    pfx_tensor *acts[2] = { x, y };
    pfx_tensor *acts_alias[2] = { x, x };
    assert_status_names(rt, pfx_stack_forward(dv.layer, 1, dv.pre, acts_alias), PFX_ERROR_ALIASING,
                        "acts");
    assert_int_equal(pfx_stack_forward(dv.layer, 0, dv.pre, acts), PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_stack_forward(dv.layer, 1, NULL, acts), PFX_ERROR_NULL_ARGUMENT);
    pfx_layer *two[2] = { L, L };
    pfx_layer_prefix pres[2] = { pre, pre };
    pfx_tensor *acts3[3] = { x, y, dx };
    pfx_layer_grads gs[2] = { { 0 }, { 0 } };
    assert_int_equal(pfx_stack_forward(two, 2, pres, acts3), PFX_SUCCESS);
    assert_status_names(rt, pfx_stack_backward(two, 2, pres, acts3, dy, gs, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "scratch");

    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y);
    pfx_tensor_destroy(&dy);
    pfx_tensor_destroy(&dx);
    pfx_tensor_destroy(&wrong);
    pfx_tensor_destroy(&big);
    pfx_tensor_destroy(&ywrong);
    device_free(&dv);
    problem_free(&pr);
    pfx_layer_destroy(NULL);
    assert_null(pfx_layer_weight(NULL, PFX_LAYER_WQ));
    assert_int_equal(pfx_test_live_bytes(rt), before);
}

/* Layer stats = pfx_attention_stats on the forward's own Q and K. */
static void test_stats(void **state)
{
    pfx_runtime *rt = *state;
    const size_t before = pfx_test_live_bytes(rt);
    problem pr = { .d = { .batch = 2,
                          .tokens = 6,
                          .model_dim = 9,
                          .heads = 4,
                          .kv_heads = 2,
                          .head_dim = 5,
                          .prefix_len = 3,
                          .causal = true,
                          .gain_mode = PFX_GAIN_TANH },
                   .ramp = 0.8f };
    problem_init(&pr, 1, true, 71);
    const ref_layer_dims *d = &pr.d;
    const size_t B = d->batch, N = d->tokens, C = d->model_dim, H = d->heads;
    const size_t qd = H * d->head_dim, kvd = d->kv_heads * d->head_dim;
    device dv;
    device_init(rt, &pr, &dv);
    pfx_tensor *x = upload(rt, 3, B, N, C, pr.x), *y = tensor(rt, 3, B, N, C);
    pfx_tensor *ent = tensor(rt, 1, H, 0, 0), *top = tensor(rt, 1, H, 0, 0);
    pfx_tensor *mass = tensor(rt, 1, H, 0, 0);
    assert_status_names(rt, pfx_layer_attention_stats(dv.layer[0], &dv.pre[0], 2, ent, top, mass),
                        PFX_ERROR_INVALID_ARGUMENT, "no forward");
    assert_int_equal(pfx_layer_forward(dv.layer[0], x, &dv.pre[0], y), PFX_SUCCESS);
    pfx_status st = pfx_layer_attention_stats(dv.layer[0], &dv.pre[0], 2, ent, top, mass);
    if (st != PFX_SUCCESS)
        fail_msg("stats: %s", pfx_last_error(rt));
    /* host Q, K as float from the double projections */
    float *q = malloc(B * N * qd * sizeof(float)), *k = malloc(B * N * kvd * sizeof(float));
    for (size_t r = 0; r < B * N; r++) {
        for (size_t o = 0; o < qd; o++) {
            double s = pr.wd[0][PFX_LAYER_BQ][o];
            for (size_t c = 0; c < C; c++)
                s += pr.xd[r * C + c] * pr.wd[0][PFX_LAYER_WQ][o * C + c];
            q[r * qd + o] = (float)s;
        }
        for (size_t o = 0; o < kvd; o++) {
            double s = pr.wd[0][PFX_LAYER_BK][o];
            for (size_t c = 0; c < C; c++)
                s += pr.xd[r * C + c] * pr.wd[0][PFX_LAYER_WK][o * C + c];
            k[r * kvd + o] = (float)s;
        }
    }
    pfx_attention_desc ad;
    ref_desc_init(&ad, B, H, d->kv_heads, N, N, d->prefix_len, d->head_dim);
    ad.q_layout = ad.kv_layout = ad.o_layout = PFX_LAYOUT_BNHD;
    ad.causal = true;
    ad.gain_mode = PFX_GAIN_TANH;
    ad.gain = pr.gain[0];
    ad.gain_ramp = pr.ramp;
    double re[8], rt_[8], rm[8];
    ref_attention_stats(&ad, q, k, pr.pk[0], 2, re, rt_, rm);
    expect_close_t("entropy", re, ent, TOL_STATS_F32);
    expect_close_t("top-2 mass", rt_, top, TOL_STATS_F32);
    expect_close_t("prefix mass", rm, mass, TOL_STATS_F32);
    free(q);
    free(k);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y);
    pfx_tensor_destroy(&ent);
    pfx_tensor_destroy(&top);
    pfx_tensor_destroy(&mass);
    device_free(&dv);
    problem_free(&pr);
    assert_int_equal(pfx_test_live_bytes(rt), before);
}

/* Accounting: a layer's weights and workspace are accounted and released. */
static void test_accounting(void **state)
{
    pfx_runtime *rt = *state;
    const size_t before = pfx_test_live_bytes(rt);
    pfx_layer_params lp = { .model_dim = 16,
                            .heads = 4,
                            .kv_heads = 2,
                            .head_dim = 8,
                            .prefix_len = 4,
                            .max_batch = 3,
                            .max_tokens = 10,
                            .bias = true };
    pfx_layer *layer = NULL;
    assert_int_equal(pfx_layer_create(rt, &lp, &layer), PFX_SUCCESS);
    const size_t weights = (32 * 16 + 16 * 16 * 2 + 16 * 32 + 32 + 16 + 16 + 16) * sizeof(float);
    const size_t rows = 30;
    const size_t ws = rows * (32 + 16 + 16 + 32 + 4 + 32 + 32 + 16 + 16) * sizeof(float);
    assert_int_equal(pfx_layer_workspace_bytes(layer), ws);
    assert_int_equal(pfx_test_live_bytes(rt) - before, weights + ws);
    assert_int_equal(pfx_layer_init_random(layer, 5, 1.0f), PFX_SUCCESS);
    pfx_layer_params back;
    assert_int_equal(pfx_layer_get_params(layer, &back), PFX_SUCCESS);
    assert_int_equal(back.max_tokens, 10);
    pfx_layer_destroy(&layer);
    assert_null(layer);
    assert_int_equal(pfx_test_live_bytes(rt), before);
}

/* Refusals of the hardening pass: what no forward can run is refused at
 * create; the stack records its errors for the layers' runtime; finite values
 * out of range are INVALID_ARGUMENT, NaN and infinities NOT_FINITE. */
static void test_hostile(void **state)
{
    pfx_runtime *rt = *state;
    const size_t before = pfx_test_live_bytes(rt);
    pfx_layer_params lp = { .model_dim = 8,
                            .heads = 2,
                            .kv_heads = 1,
                            .head_dim = 300,
                            .prefix_len = 1,
                            .max_batch = 1,
                            .max_tokens = 3,
                            .residual = true,
                            .gain_mode = PFX_GAIN_TANH };
    pfx_layer *L = NULL;
    assert_status_names(rt, pfx_layer_create(rt, &lp, &L), PFX_ERROR_UNSUPPORTED, "head_dim 300");
    assert_null(L);
    assert_int_equal(pfx_test_live_bytes(rt), before);
    lp.scale = -1.0f;
    lp.head_dim = 4;
    assert_status_names(rt, pfx_layer_create(rt, &lp, &L), PFX_ERROR_INVALID_ARGUMENT, "scale");
    lp.scale = INFINITY;
    assert_status_names(rt, pfx_layer_create(rt, &lp, &L), PFX_ERROR_NOT_FINITE, "scale");
    lp.scale = 0.0f;
    lp.head_dim = 256;
    assert_int_equal(pfx_layer_create(rt, &lp, &L), PFX_SUCCESS);
    assert_status_names(rt, pfx_layer_init_random(L, 1, NAN), PFX_ERROR_NOT_FINITE, "scale");

    /* Stack errors land in pfx_last_error(rt), not in the thread's. */
    pfx_layer *layers[2] = { L, NULL };
    pfx_layer_prefix pre[2] = { 0 };
    size_t shape[3] = { 1, 3, 8 };
    pfx_tensor *acts[3] = { NULL };
    for (int i = 0; i < 3; i++)
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &acts[i]), PFX_SUCCESS);
    pfx_device_info unused;
    (void)pfx_device_select("no-such-device-for-this-test",
                            &unused); /* an older, unrelated thread message */
    assert_status_names(rt, pfx_stack_forward(layers, 2, pre, acts), PFX_ERROR_NULL_ARGUMENT,
                        "layers[1]");
    assert_status_names(rt, pfx_stack_forward(layers, 1, NULL, acts), PFX_ERROR_NULL_ARGUMENT,
                        "prefixes");
    pfx_layer_grads grads[2] = { 0 };
    assert_status_names(rt, pfx_stack_backward(layers, 2, pre, acts, acts[2], grads, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "layers[1]");
    assert_status_names(rt, pfx_stack_backward(layers, 1, pre, acts, NULL, grads, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "dy");
    assert_null(strstr(pfx_last_error(rt), "no-such-device"));
    assert_int_equal(strncmp(pfx_last_error(rt), "PFX_", 4) == 0, 0);
    for (int i = 0; i < 3; i++)
        pfx_tensor_destroy(&acts[i]);
    pfx_layer_destroy(&L);
    assert_int_equal(pfx_test_live_bytes(rt), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_fd), cmocka_unit_test(test_reference_attention),
        cmocka_unit_test(test_layer_single), cmocka_unit_test(test_stack),
        cmocka_unit_test(test_device_gains), cmocka_unit_test(test_accumulate_determinism),
        cmocka_unit_test(test_mse),          cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_stats),        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests_name("layer", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
