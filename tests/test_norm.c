/*
 * Suite 'norm': LayerNorm and RMSNorm forward (with the kept statistics) and
 * their dX backward (src/ops/norm.c) against the double reference
 * (tests/reference/model_ops_ref.h) on awkward sizes, strided views, half
 * and bfloat16 weights, in place; bad arguments.
 */
#include "model_ops_test.h"
#include "reference/model_ops_ref.h"

typedef struct norm_case {
    size_t rows, cols, offset, ld; /* x, y, dy, dx views share offset and ld */
    pfx_dtype storage;             /* of the weights and bias */
    bool bias, in_place, accumulate;
    uint64_t seed;
    size_t wstep; /* weights and bias every wstep elements from 1 (0: contiguous from 0) */
} norm_case;

#define F32  PFX_DTYPE_F32
#define F16  PFX_DTYPE_F16
#define BF16 PFX_DTYPE_BF16

static const norm_case cases[] = {
    { 1, 1, 0, 1, F32, true, false, false, 11, 0 },
    { 7, 33, 0, 33, F32, true, false, true, 12, 0 },
    { 129, 257, 0, 257, F16, true, true, false, 13, 0 },
    { 5, 1000, 7, 1003, F32, false, false, true, 14, 0 },
    { 3, 63, 2, 70, F16, false, true, true, 15, 0 },
    /* strided weights and bias (the 8-column chunks gather them) */
    { 4, 45, 1, 50, F32, true, false, false, 16, 3 },
    { 6, 64, 0, 64, F16, true, false, true, 17, 2 },
    /* bfloat16 weights and bias, contiguous and strided */
    { 9, 70, 3, 77, BF16, true, false, false, 18, 0 },
    { 5, 48, 0, 48, BF16, true, true, true, 19, 2 },
};

static void run_case(pfx_runtime *rt, const norm_case *k, bool rms)
{
    ref_rng rng;
    ref_rng_seed(&rng, k->seed + (rms ? 100 : 0));
    /* RMSNorm of one column is x / |x|: its dx vanishes up to eps and a relative
     * comparison is meaningless, so rms runs that case on two columns */
    const size_t C = rms && k->cols == 1 ? 2 : k->cols, R = k->rows;
    const size_t ld = k->ld < C ? C : k->ld;
    const size_t n = k->offset + (R - 1) * ld + C + 3;
    const pfx_dtype wdt = k->storage;
    const double eps = rms ? 1e-6 : 1e-5;
    float *hx, *hy, *hdy, *hdx, *hw, *hb, *hm, *hr;
    pfx_tensor *x = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 3.0f, &hx);
    pfx_tensor *y = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hy);
    pfx_tensor *dy = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hdy);
    pfx_tensor *dx = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hdx);
    const size_t wstep = k->wstep ? k->wstep : 1, w0 = k->wstep ? 1 : 0;
    pfx_tensor *w = mo_upload(rt, &rng, wdt, w0 + C * wstep, 1.5f, &hw);
    pfx_tensor *b = mo_upload(rt, &rng, wdt, w0 + C * wstep, 1.0f, &hb);
    pfx_tensor *mean = mo_upload(rt, &rng, PFX_DTYPE_F32, R + 2, 1.0f, &hm);
    pfx_tensor *rstd = mo_upload(rt, &rng, PFX_DTYPE_F32, R + 2, 1.0f, &hr);

    double *X = mo_gather(hx, k->offset, R, C, ld);
    double *W = mo_gather(hw, w0, C, 1, wstep), *Bv = mo_gather(hb, w0, C, 1, wstep);
    double *DY = mo_gather(hdy, k->offset, R, C, ld);
    double *Y = calloc(R * C, sizeof(double)), *M = calloc(R, sizeof(double));
    double *RS = calloc(R, sizeof(double)), *DX = calloc(R * C, sizeof(double));
    if (rms) {
        ref_rmsnorm(R, C, X, W, eps, Y, RS);
        ref_rmsnorm_backward(R, C, X, W, eps, DY, DX);
    } else {
        ref_layernorm(R, C, X, W, k->bias ? Bv : NULL, eps, Y, M, RS);
        ref_layernorm_backward(R, C, X, W, eps, DY, DX);
    }
    if (k->accumulate)
        for (size_t r = 0; r < R; r++)
            for (size_t c = 0; c < C; c++)
                DX[r * C + c] += hdx[k->offset + r * ld + c];

    /* backward first: the in-place forward overwrites x */
    pfx_mat vx = pfx_mat_of(x, k->offset, R, C, ld);
    pfx_mat vdy = pfx_mat_of(dy, k->offset, R, C, ld), vdx = pfx_mat_of(dx, k->offset, R, C, ld);
    pfx_mat vw = pfx_mat_of(w, w0, C, 1, wstep), vb = pfx_mat_of(b, w0, C, 1, wstep);
    pfx_mat vm = PFX_VEC(mean, 1, R), vr = PFX_VEC(rstd, 1, R);
    pfx_mat vy = k->in_place ? vx : pfx_mat_of(y, k->offset, R, C, ld);
    /* statistics from a first forward into y's tensor (not in place) */
    pfx_mat vtmp = pfx_mat_of(y, k->offset, R, C, ld);
    if (rms) {
        assert_int_equal(pfx_op_rmsnorm_forward(rt, vx, vw, (float)eps, vtmp, &vr), PFX_SUCCESS);
        assert_int_equal(pfx_op_rmsnorm_backward(rt, vx, vw, vr, vdy, vdx, k->accumulate),
                         PFX_SUCCESS);
    } else {
        assert_int_equal(
            pfx_op_layernorm_forward(rt, vx, vw, k->bias ? &vb : NULL, (float)eps, vtmp, &vm, &vr),
            PFX_SUCCESS);
        assert_int_equal(pfx_op_layernorm_backward(rt, vx, vw, vm, vr, vdy, vdx, k->accumulate),
                         PFX_SUCCESS);
    }
    mo_expect_view("dx", dx, hdx, k->offset, R, C, ld, DX, TOL_OPS_F32);
    float *got_r = mo_read(rstd);
    mo_expect_close("rstd", RS, got_r + 1, R, TOL_OPS_F32);
    assert_true(got_r[0] == hr[0] && got_r[R + 1] == hr[R + 1]);
    if (!rms) {
        float *got_m = mo_read(mean);
        /* mean is compared absolutely: it may be near 0 */
        for (size_t r = 0; r < R; r++)
            assert_true(fabs(got_m[r + 1] - M[r]) <= TOL_OPS_F32 * 3.0);
        free(got_m);
    }
    free(got_r);
    if (!k->in_place) {
        mo_expect_view("y", y, hy, k->offset, R, C, ld, Y, TOL_OPS_F32);
    } else {
        float *before = mo_read(x);
        if (rms)
            assert_int_equal(pfx_op_rmsnorm_forward(rt, vx, vw, (float)eps, vy, NULL), PFX_SUCCESS);
        else
            assert_int_equal(pfx_op_layernorm_forward(rt, vx, vw, k->bias ? &vb : NULL, (float)eps,
                                                      vy, NULL, NULL),
                             PFX_SUCCESS);
        mo_expect_view("y in place", x, before, k->offset, R, C, ld, Y, TOL_OPS_F32);
        free(before);
    }

    free(X);
    free(W);
    free(Bv);
    free(DY);
    free(Y);
    free(M);
    free(RS);
    free(DX);
    free(hx);
    free(hy);
    free(hdy);
    free(hdx);
    free(hw);
    free(hb);
    free(hm);
    free(hr);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y);
    pfx_tensor_destroy(&dy);
    pfx_tensor_destroy(&dx);
    pfx_tensor_destroy(&w);
    pfx_tensor_destroy(&b);
    pfx_tensor_destroy(&mean);
    pfx_tensor_destroy(&rstd);
}

static void test_layernorm(void **state)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(*state, &cases[i], false);
}

static void test_rmsnorm(void **state)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(*state, &cases[i], true);
}

/* Two runs give bit-identical outputs (fixed-order reductions). */
static void test_deterministic(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 77);
    const size_t R = 9, C = 3001;
    float *hx, *hw, *h1, *h2;
    pfx_tensor *x = mo_upload(rt, &rng, PFX_DTYPE_F32, R * C, 2.0f, &hx);
    pfx_tensor *w = mo_upload(rt, &rng, PFX_DTYPE_F32, C, 1.0f, &hw);
    pfx_tensor *y = mo_upload(rt, &rng, PFX_DTYPE_F32, R * C, 1.0f, &h1);
    free(h1);
    assert_int_equal(pfx_op_layernorm_forward(rt, PFX_MAT(x, R, C), PFX_VEC(w, 0, C), NULL, 1e-5f,
                                              PFX_MAT(y, R, C), NULL, NULL),
                     PFX_SUCCESS);
    h1 = mo_read(y);
    assert_int_equal(pfx_op_layernorm_forward(rt, PFX_MAT(x, R, C), PFX_VEC(w, 0, C), NULL, 1e-5f,
                                              PFX_MAT(y, R, C), NULL, NULL),
                     PFX_SUCCESS);
    h2 = mo_read(y);
    assert_memory_equal(h1, h2, R * C * sizeof(float));
    free(hx);
    free(hw);
    free(h1);
    free(h2);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&w);
    pfx_tensor_destroy(&y);
}

static void test_bad_arguments(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 5);
    pfx_tensor *x = mo_random(rt, &rng, PFX_DTYPE_F32, 40);
    pfx_tensor *xh = mo_random(rt, &rng, PFX_DTYPE_F16, 40);
    pfx_tensor *y = mo_random(rt, &rng, PFX_DTYPE_F32, 40);
    pfx_tensor *w = mo_random(rt, &rng, PFX_DTYPE_F32, 8);
    pfx_tensor *s = mo_random(rt, &rng, PFX_DTYPE_F32, 8);
    pfx_runtime *rt2 = pfx_test_runtime();
    pfx_tensor *other = mo_random(rt2, &rng, PFX_DTYPE_F32, 40);
    const size_t live = pfx_test_live_bytes(rt);
    pfx_mat vx = PFX_MAT(x, 5, 8), vy = PFX_MAT(y, 5, 8), vw = PFX_VEC(w, 0, 8);
    pfx_mat vs = PFX_VEC(s, 0, 5), vs2 = PFX_VEC(s, 3, 5), vs_far = PFX_VEC(s, 4, 5);

    assert_status_names(NULL, pfx_op_layernorm_forward(NULL, vx, vw, NULL, 1e-5f, vy, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(
        rt, pfx_op_layernorm_forward(rt, PFX_MAT(NULL, 5, 8), vw, NULL, 1e-5f, vy, NULL, NULL),
        PFX_ERROR_NULL_ARGUMENT, "x");
    assert_status_names(
        rt, pfx_op_layernorm_forward(rt, PFX_MAT(xh, 5, 8), vw, NULL, 1e-5f, vy, NULL, NULL),
        PFX_ERROR_DTYPE_MISMATCH, "x");
    assert_status_names(
        rt, pfx_op_layernorm_forward(rt, vx, vw, NULL, 1e-5f, PFX_MAT(other, 5, 8), NULL, NULL),
        PFX_ERROR_RUNTIME_MISMATCH, "y");
    assert_status_names(rt,
                        pfx_op_layernorm_forward(rt, PFX_MAT(x, 6, 8), vw, NULL, 1e-5f,
                                                 PFX_MAT(y, 6, 8), NULL, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "x");
    assert_status_names(
        rt,
        pfx_op_layernorm_forward(rt, pfx_mat_of(x, 0, 5, 8, 7), vw, NULL, 1e-5f, vy, NULL, NULL),
        PFX_ERROR_INVALID_SHAPE, "x");
    assert_status_names(
        rt, pfx_op_layernorm_forward(rt, vx, vw, NULL, 1e-5f, PFX_MAT(y, 5, 7), NULL, NULL),
        PFX_ERROR_INVALID_SHAPE, "y");
    assert_status_names(
        rt, pfx_op_layernorm_forward(rt, vx, PFX_VEC(w, 0, 7), NULL, 1e-5f, vy, NULL, NULL),
        PFX_ERROR_INVALID_SHAPE, "w");
    assert_status_names(rt, pfx_op_layernorm_forward(rt, vx, vw, NULL, NAN, vy, NULL, NULL),
                        PFX_ERROR_NOT_FINITE, "eps");
    assert_status_names(rt, pfx_op_layernorm_forward(rt, vx, vw, NULL, 1e-5f, vy, &vs, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "rstd");
    assert_status_names(rt, pfx_op_layernorm_forward(rt, vx, vw, NULL, 1e-5f, vy, &vs, &vs2),
                        PFX_ERROR_ALIASING, "mean");
    assert_status_names(rt,
                        pfx_op_layernorm_forward(rt, PFX_MAT(x, 4, 8), vw, NULL, 1e-5f,
                                                 pfx_mat_of(x, 1, 4, 8, 8), NULL, NULL),
                        PFX_ERROR_ALIASING, "y");
    assert_status_names(rt, pfx_op_rmsnorm_forward(rt, vx, vw, 1e-5f, vy, &vs_far),
                        PFX_ERROR_OUT_OF_RANGE, "rstd");
    assert_status_names(rt, pfx_op_rmsnorm_backward(rt, vx, vw, vs, vy, vy, false),
                        PFX_ERROR_ALIASING, "dx");
    assert_status_names(rt, pfx_op_rmsnorm_backward(rt, vx, vw, vs, vy, vx, false),
                        PFX_ERROR_ALIASING, "dx");
    assert_status_names(rt,
                        pfx_op_layernorm_backward(rt, vx, vw, PFX_VEC(s, 0, 4), vs, vy,
                                                  PFX_MAT(other, 5, 8), false),
                        PFX_ERROR_RUNTIME_MISMATCH, "dx");
    assert_status_names(
        rt,
        pfx_op_layernorm_backward(rt, vx, vw, PFX_VEC(s, 0, 4), vs, vy, PFX_MAT(y, 2, 8), false),
        PFX_ERROR_INVALID_SHAPE, "dx");
    assert_int_equal(pfx_test_live_bytes(rt), live);

    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&xh);
    pfx_tensor_destroy(&y);
    pfx_tensor_destroy(&w);
    pfx_tensor_destroy(&s);
    pfx_tensor_destroy(&other);
    pfx_runtime_destroy(&rt2);
}

/* Vectors of the weight-gradient tests, in a tensor of vec_numel(n)
 * elements: kind 0 contiguous from element 1 (an n x 1 column), kind 1 every
 * third element from 2 (a column of row stride 3), kind 2 a 1 x n row from 1. */
static size_t vec_numel(size_t n)
{
    return 3 * n + 4;
}

static pfx_mat vec_view(pfx_tensor *t, int kind, size_t n)
{
    return kind == 1   ? pfx_mat_of(t, 2, n, 1, 3)
           : kind == 2 ? pfx_mat_of(t, 1, 1, n, n)
                       : PFX_VEC(t, 1, n);
}

/* The vector's elements (offset, rows, ld for mo_gather / mo_expect_view as
 * an n x 1 view). */
static size_t vec_off(int kind)
{
    return kind == 1 ? 2 : 1;
}

static size_t vec_ld(int kind)
{
    return kind == 1 ? 3 : 1;
}

typedef struct param_case {
    size_t rows, cols, offset, ld; /* x and dy share offset and ld */
    int vkind;                     /* mean, rstd, dw, db: see vec_view */
    uint64_t seed;
} param_case;

static const param_case param_cases[] = {
    { 1, 1, 0, 1, 0, 51 },
    /* one row, more columns than a work-group */
    { 1, 300, 2, 300, 2, 52 },
    /* one column, many rows, ld > cols */
    { 200, 1, 1, 3, 1, 53 },
    { 7, 33, 3, 40, 1, 54 },
    { 129, 257, 0, 257, 0, 55 },
    { 65, 1000, 7, 1003, 2, 56 },
};

/* mode 0: LayerNorm with db, 1: LayerNorm without, 2: RMSNorm (no mean). The
 * statistics are random (rstd positive), fed as the device holds them; dw and
 * db start random (overwritten, or added to). Without accumulation a second
 * run gives bit-identical results. */
static void run_param_case(pfx_runtime *rt, const param_case *k, int mode, bool accumulate)
{
    ref_rng rng;
    ref_rng_seed(&rng, k->seed * 10 + (uint64_t)mode * 2 + accumulate);
    const size_t R = k->rows, C = k->cols, ld = k->ld;
    const size_t n = k->offset + (R - 1) * ld + C + 3;
    const bool rms = mode == 2, has_db = mode == 0;
    const int vk = k->vkind;
    float *hx, *hdy, *hm, *hr, *hw, *hb;
    pfx_tensor *x = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 3.0f, &hx);
    pfx_tensor *dy = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hdy);
    pfx_tensor *mean = mo_upload(rt, &rng, PFX_DTYPE_F32, vec_numel(R), 1.0f, &hm);
    pfx_tensor *rstd = mo_upload(rt, &rng, PFX_DTYPE_F32, vec_numel(R), 1.0f, &hr);
    for (size_t i = 0; i < vec_numel(R); i++)
        hr[i] = 0.25f + fabsf(hr[i]);
    assert_int_equal(pfx_tensor_write(rstd, 0, vec_numel(R), hr), PFX_SUCCESS);
    pfx_tensor *dw = mo_upload(rt, &rng, PFX_DTYPE_F32, vec_numel(C), 1.0f, &hw);
    pfx_tensor *db = mo_upload(rt, &rng, PFX_DTYPE_F32, vec_numel(C), 1.0f, &hb);

    double *X = mo_gather(hx, k->offset, R, C, ld), *DY = mo_gather(hdy, k->offset, R, C, ld);
    double *M = mo_gather(hm, vec_off(vk), R, 1, vec_ld(vk));
    double *RS = mo_gather(hr, vec_off(vk), R, 1, vec_ld(vk));
    double *DW = malloc(C * sizeof(double)), *DB = malloc(C * sizeof(double));
    assert_true(DW && DB);
    ref_norm_param_grad(R, C, X, rms ? NULL : M, RS, DY, DW, has_db ? DB : NULL);
    for (size_t c = 0; accumulate && c < C; c++) {
        DW[c] += hw[vec_off(vk) + c * vec_ld(vk)];
        DB[c] += hb[vec_off(vk) + c * vec_ld(vk)];
    }

    pfx_mat vx = pfx_mat_of(x, k->offset, R, C, ld), vdy = pfx_mat_of(dy, k->offset, R, C, ld);
    pfx_mat vm = vec_view(mean, vk, R), vr = vec_view(rstd, vk, R);
    pfx_mat vw = vec_view(dw, vk, C), vb = vec_view(db, vk, C);
    assert_int_equal(pfx_op_norm_param_grad(rt, vx, rms ? NULL : &vm, vr, vdy, vw,
                                            has_db ? &vb : NULL, accumulate),
                     PFX_SUCCESS);
    mo_expect_view("norm dw", dw, hw, vec_off(vk), C, 1, vec_ld(vk), DW, TOL_OPS_F32);
    if (has_db) {
        mo_expect_view("norm db", db, hb, vec_off(vk), C, 1, vec_ld(vk), DB, TOL_OPS_F32);
    } else {
        float *after = mo_read(db);
        assert_memory_equal(after, hb, vec_numel(C) * sizeof(float));
        free(after);
    }
    /* the inputs are only read */
    float *after_x = mo_read(x), *after_m = mo_read(mean);
    assert_memory_equal(after_x, hx, n * sizeof(float));
    assert_memory_equal(after_m, hm, vec_numel(R) * sizeof(float));
    free(after_x);
    free(after_m);
    if (!accumulate) {
        float *w1 = mo_read(dw), *b1 = mo_read(db);
        assert_int_equal(pfx_op_norm_param_grad(rt, vx, rms ? NULL : &vm, vr, vdy, vw,
                                                has_db ? &vb : NULL, false),
                         PFX_SUCCESS);
        float *w2 = mo_read(dw), *b2 = mo_read(db);
        assert_memory_equal(w1, w2, vec_numel(C) * sizeof(float));
        assert_memory_equal(b1, b2, vec_numel(C) * sizeof(float));
        free(w1);
        free(b1);
        free(w2);
        free(b2);
    }

    free(X);
    free(DY);
    free(M);
    free(RS);
    free(DW);
    free(DB);
    free(hx);
    free(hdy);
    free(hm);
    free(hr);
    free(hw);
    free(hb);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&dy);
    pfx_tensor_destroy(&mean);
    pfx_tensor_destroy(&rstd);
    pfx_tensor_destroy(&dw);
    pfx_tensor_destroy(&db);
}

static void test_param_grad(void **state)
{
    for (size_t i = 0; i < sizeof(param_cases) / sizeof(param_cases[0]); i++)
        for (int mode = 0; mode < 3; mode++)
            for (int acc = 0; acc < 2; acc++)
                run_param_case(*state, &param_cases[i], mode, acc);
}

/* Bad arguments of the weight gradient: each status, and dw and db untouched. */
static void test_param_grad_bad(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 57);
    pfx_tensor *x = mo_random(rt, &rng, PFX_DTYPE_F32, 40);
    pfx_tensor *xh = mo_random(rt, &rng, PFX_DTYPE_F16, 40);
    pfx_tensor *dy = mo_random(rt, &rng, PFX_DTYPE_F32, 40);
    pfx_tensor *s = mo_random(rt, &rng, PFX_DTYPE_F32, 10);
    pfx_tensor *sh = mo_random(rt, &rng, PFX_DTYPE_F16, 10);
    pfx_tensor *w = mo_random(rt, &rng, PFX_DTYPE_F32, 16);
    pfx_runtime *rt2 = pfx_test_runtime();
    pfx_tensor *other = mo_random(rt2, &rng, PFX_DTYPE_F32, 16);
    float *hw = mo_read(w), *hdy = mo_read(dy), *hx = mo_read(x);
    const size_t live = pfx_test_live_bytes(rt);
    pfx_mat vx = PFX_MAT(x, 5, 8), vdy = PFX_MAT(dy, 5, 8);
    pfx_mat vm = PFX_VEC(s, 0, 5), vr = PFX_VEC(s, 5, 5);
    pfx_mat vw = PFX_VEC(w, 0, 8), vb = PFX_VEC(w, 8, 8);
    assert_int_equal(pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, vw, &vb, true), PFX_SUCCESS);
    float *hw_ok = mo_read(w);
    assert_memory_not_equal(hw_ok, hw, 16 * sizeof(float));
    free(hw);
    hw = hw_ok;

    assert_status_names(NULL, pfx_op_norm_param_grad(NULL, vx, &vm, vr, vdy, vw, &vb, true),
                        PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(
        rt, pfx_op_norm_param_grad(rt, PFX_MAT(NULL, 5, 8), &vm, vr, vdy, vw, &vb, true),
        PFX_ERROR_NULL_ARGUMENT, "x");
    assert_status_names(
        rt, pfx_op_norm_param_grad(rt, vx, &vm, PFX_VEC(NULL, 0, 5), vdy, vw, &vb, true),
        PFX_ERROR_NULL_ARGUMENT, "rstd");
    assert_status_names(
        rt, pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, PFX_VEC(NULL, 0, 8), &vb, true),
        PFX_ERROR_NULL_ARGUMENT, "dw");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, PFX_MAT(xh, 5, 8), &vm, vr, vdy, vw, &vb, true),
                        PFX_ERROR_DTYPE_MISMATCH, "x");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, vx, &vm, vr, PFX_MAT(xh, 5, 8), vw, &vb, true),
                        PFX_ERROR_DTYPE_MISMATCH, "dy");
    const pfx_mat mh = PFX_VEC(sh, 0, 5), bh = PFX_VEC(sh, 0, 8);
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &mh, vr, vdy, vw, &vb, true),
                        PFX_ERROR_DTYPE_MISMATCH, "mean");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, vx, &vm, PFX_VEC(sh, 5, 5), vdy, vw, &vb, true),
                        PFX_ERROR_DTYPE_MISMATCH, "rstd");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, PFX_VEC(sh, 0, 8), &vb, true),
                        PFX_ERROR_DTYPE_MISMATCH, "dw");
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, vw, &bh, true),
                        PFX_ERROR_DTYPE_MISMATCH, "db");
    assert_status_names(
        rt, pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, PFX_VEC(other, 0, 8), &vb, true),
        PFX_ERROR_RUNTIME_MISMATCH, "dw");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, vx, &vm, vr, PFX_MAT(dy, 5, 7), vw, &vb, true),
                        PFX_ERROR_INVALID_SHAPE, "dy");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, vx, &vm, PFX_VEC(s, 5, 4), vdy, vw, &vb, true),
                        PFX_ERROR_INVALID_SHAPE, "rstd");
    const pfx_mat m4 = PFX_VEC(s, 0, 4), b7 = PFX_VEC(w, 8, 7);
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &m4, vr, vdy, vw, &vb, true),
                        PFX_ERROR_INVALID_SHAPE, "mean");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, PFX_VEC(w, 0, 7), &vb, true),
                        PFX_ERROR_INVALID_SHAPE, "dw");
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, vw, &b7, true),
                        PFX_ERROR_INVALID_SHAPE, "db");
    /* views past their tensors */
    const pfx_mat b_far = PFX_VEC(w, 9, 8), m_far = PFX_VEC(s, 6, 5);
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, vw, &b_far, true),
                        PFX_ERROR_OUT_OF_RANGE, "db");
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &m_far, vr, vdy, vw, &vb, true),
                        PFX_ERROR_OUT_OF_RANGE, "mean");
    assert_status_names(
        rt, pfx_op_norm_param_grad(rt, PFX_MAT(x, 6, 8), &vm, vr, PFX_MAT(dy, 6, 8), vw, &vb, true),
        PFX_ERROR_OUT_OF_RANGE, "x");
    assert_status_names(
        rt, pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, pfx_mat_of(w, 9, 8, 1, 1), NULL, true),
        PFX_ERROR_OUT_OF_RANGE, "dw");
    /* outputs over inputs or each other */
    const pfx_mat b_over_w = PFX_VEC(w, 7, 8), b_over_dy = PFX_VEC(dy, 32, 8);
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, vw, &b_over_w, true),
                        PFX_ERROR_ALIASING, "dw overlaps db");
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, vw, &b_over_dy, true),
                        PFX_ERROR_ALIASING, "db");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, PFX_VEC(x, 32, 8), &vb, true),
                        PFX_ERROR_ALIASING, "dw");
    assert_status_names(rt,
                        pfx_op_norm_param_grad(rt, vx, &vm, vr, vdy, PFX_VEC(s, 2, 8), NULL, true),
                        PFX_ERROR_ALIASING, "dw");
    const pfx_mat m_over_w = PFX_VEC(w, 3, 5);
    assert_status_names(rt, pfx_op_norm_param_grad(rt, vx, &m_over_w, vr, vdy, vw, NULL, true),
                        PFX_ERROR_ALIASING, "mean");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    float *after_w = mo_read(w), *after_dy = mo_read(dy), *after_x = mo_read(x);
    assert_memory_equal(after_w, hw, 16 * sizeof(float));
    assert_memory_equal(after_dy, hdy, 40 * sizeof(float));
    assert_memory_equal(after_x, hx, 40 * sizeof(float));
    free(after_w);
    free(after_dy);
    free(after_x);
    free(hw);
    free(hdy);
    free(hx);

    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&xh);
    pfx_tensor_destroy(&dy);
    pfx_tensor_destroy(&s);
    pfx_tensor_destroy(&sh);
    pfx_tensor_destroy(&w);
    pfx_tensor_destroy(&other);
    pfx_runtime_destroy(&rt2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),     cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_deterministic), cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_param_grad),    cmocka_unit_test(test_param_grad_bad),
    };
    return cmocka_run_group_tests_name("norm", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
