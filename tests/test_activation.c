/*
 * Suite 'activation': the MLP activations (gelu_new, gelu, relu, silu)
 * forward and backward, SwiGLU forward and backward, the bias added to rows,
 * column blocks split and joined (src/ops/activation.c, bias.c, columns.c)
 * against the double reference, on awkward
 * sizes, strided views (gate and up as halves of one fused buffer), in place,
 * half biases; name parsing; bad arguments.
 */
#include "model_ops_test.h"
#include "reference/model_ops_ref.h"

static void test_parse(void **state)
{
    pfx_runtime *rt = *state;
    static const struct {
        const char *name;
        pfx_activation act;
    } ok[] = { { "gelu_new", PFX_ACT_GELU_TANH }, { "gelu_pytorch_tanh", PFX_ACT_GELU_TANH },
               { "gelu", PFX_ACT_GELU },          { "relu", PFX_ACT_RELU },
               { "silu", PFX_ACT_SILU },          { "swish", PFX_ACT_SILU } };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        pfx_activation a = PFX_ACT_RELU;
        assert_int_equal(pfx_activation_parse(rt, ok[i].name, &a), PFX_SUCCESS);
        assert_int_equal(a, ok[i].act);
    }
    assert_string_equal(pfx_activation_name(PFX_ACT_GELU_TANH), "gelu_new");
    pfx_activation a;
    assert_status_names(rt, pfx_activation_parse(rt, "quick_gelu", &a), PFX_ERROR_UNSUPPORTED,
                        "quick_gelu");
    assert_status_names(rt, pfx_activation_parse(rt, "GELU", &a), PFX_ERROR_UNSUPPORTED, "GELU");
    assert_int_equal(pfx_activation_parse(rt, NULL, &a), PFX_ERROR_UNSUPPORTED);
    assert_int_equal(pfx_activation_parse(rt, "gelu", NULL), PFX_ERROR_NULL_ARGUMENT);
}

typedef struct act_case {
    size_t rows, cols, offset, ld;
    bool in_place;
    uint64_t seed;
} act_case;

static const act_case act_cases[] = {
    { 1, 1, 0, 1, false, 21 },
    { 7, 33, 3, 40, true, 22 },
    { 129, 257, 0, 257, false, 23 },
    /* contiguous from an odd offset (8-element steps off alignment), one
     * strided row (contiguous too), a tail-free count */
    { 5, 24, 5, 24, true, 24 },
    { 1, 37, 2, 50, false, 25 },
};

static void test_activations(void **state)
{
    pfx_runtime *rt = *state;
    for (int act = PFX_ACT_GELU_TANH; act <= PFX_ACT_SILU; act++)
        for (size_t i = 0; i < sizeof(act_cases) / sizeof(act_cases[0]); i++) {
            const act_case *k = &act_cases[i];
            ref_rng rng;
            ref_rng_seed(&rng, k->seed * 10 + (uint64_t)act);
            const size_t R = k->rows, C = k->cols, n = k->offset + (R - 1) * k->ld + C + 2;
            float *hx, *hy, *hdy;
            pfx_tensor *x = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 6.0f, &hx);
            pfx_tensor *y = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hy);
            pfx_tensor *dy = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hdy);
            double *X = mo_gather(hx, k->offset, R, C, k->ld);
            double *DY = mo_gather(hdy, k->offset, R, C, k->ld);
            double *Y = malloc(R * C * sizeof(double)), *DX = malloc(R * C * sizeof(double));
            for (size_t j = 0; j < R * C; j++) {
                Y[j] = ref_act((ref_activation)act, X[j]);
                DX[j] = ref_act_grad((ref_activation)act, X[j]) * DY[j];
            }
            pfx_mat vx = pfx_mat_of(x, k->offset, R, C, k->ld);
            pfx_mat vdy = pfx_mat_of(dy, k->offset, R, C, k->ld);
            /* backward in place on dy (dx may be dy) */
            assert_int_equal(pfx_op_activation_backward(rt, (pfx_activation)act, vx, vdy, vdy),
                             PFX_SUCCESS);
            mo_expect_view("activation dx", dy, hdy, k->offset, R, C, k->ld, DX, TOL_OPS_F32);
            pfx_tensor *out = k->in_place ? x : y;
            const float *before = k->in_place ? hx : hy;
            assert_int_equal(pfx_op_activation_forward(rt, (pfx_activation)act, vx,
                                                       pfx_mat_of(out, k->offset, R, C, k->ld)),
                             PFX_SUCCESS);
            mo_expect_view("activation y", out, before, k->offset, R, C, k->ld, Y, TOL_OPS_F32);
            free(hx);
            free(hy);
            free(hdy);
            free(X);
            free(DY);
            free(Y);
            free(DX);
            pfx_tensor_destroy(&x);
            pfx_tensor_destroy(&y);
            pfx_tensor_destroy(&dy);
        }
}

/* gate and up as the two halves of one fused [R, 2C] buffer (ld 2C), or
 * (contiguous views) as its first and second R x C blocks; the backward
 * writes dgate over gate and dup over up. */
static void test_swiglu(void **state)
{
    pfx_runtime *rt = *state;
    const size_t sizes[][3] = {
        { 1, 1, 0 }, { 7, 33, 0 }, { 129, 257, 0 }, { 9, 41, 1 }, { 64, 96, 1 }
    };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        const size_t R = sizes[i][0], C = sizes[i][1], n = R * 2 * C;
        const bool blocks = sizes[i][2];
        const size_t ld = blocks ? C : 2 * C, up_at = blocks ? R * C : C;
        ref_rng rng;
        ref_rng_seed(&rng, 300 + i);
        float *hgu, *hd, *ho;
        pfx_tensor *gu = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 5.0f, &hgu);
        pfx_tensor *d = mo_upload(rt, &rng, PFX_DTYPE_F32, R * C, 1.0f, &hd);
        pfx_tensor *o = mo_upload(rt, &rng, PFX_DTYPE_F32, R * C, 1.0f, &ho);
        double *G = mo_gather(hgu, 0, R, C, ld), *U = mo_gather(hgu, up_at, R, C, ld);
        double *O = malloc(R * C * sizeof(double)), *DG = malloc(R * C * sizeof(double));
        double *DU = malloc(R * C * sizeof(double));
        for (size_t j = 0; j < R * C; j++) {
            const double s = 1.0 / (1.0 + exp(-G[j]));
            O[j] = G[j] * s * U[j];
            DG[j] = hd[j] * U[j] * ref_act_grad(REF_ACT_SILU, G[j]);
            DU[j] = hd[j] * G[j] * s;
        }
        pfx_mat vg = pfx_mat_of(gu, 0, R, C, ld), vu = pfx_mat_of(gu, up_at, R, C, ld);
        assert_int_equal(pfx_op_swiglu_forward(rt, vg, vu, PFX_MAT(o, R, C)), PFX_SUCCESS);
        mo_expect_view("swiglu out", o, ho, 0, R, C, C, O, TOL_OPS_F32);
        assert_int_equal(pfx_op_swiglu_backward(rt, vg, vu, PFX_MAT(d, R, C), vg, vu), PFX_SUCCESS);
        float *got = mo_read(gu);
        float *gd = mo_gather_f(got, 0, R, C, ld), *ud = mo_gather_f(got, up_at, R, C, ld);
        mo_expect_close("swiglu dgate", DG, gd, R * C, TOL_OPS_F32);
        mo_expect_close("swiglu dup", DU, ud, R * C, TOL_OPS_F32);
        /* out in place over up */
        free(got);
        free(gd);
        free(ud);
        free(hgu);
        free(hd);
        free(ho);
        free(G);
        free(U);
        free(O);
        free(DG);
        free(DU);
        pfx_tensor_destroy(&gu);
        pfx_tensor_destroy(&d);
        pfx_tensor_destroy(&o);
    }
}

static void test_bias(void **state)
{
    pfx_runtime *rt = *state;
    /* and widths of whole 8-column chunks (the kernel's vector form) */
    const size_t sizes[][2] = { { 1, 1 }, { 7, 33 }, { 129, 257 }, { 5, 24 }, { 3, 64 } };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (int kind = 0; kind < 3; kind++) {
            const int half = kind > 0, strided = kind == 1;
            const size_t R = sizes[i][0], C = sizes[i][1], ld = C + 5, off = 2;
            const size_t n = off + (R - 1) * ld + C;
            ref_rng rng;
            ref_rng_seed(&rng, 400 + i * 3 + (uint64_t)kind);
            float *hy, *hb;
            pfx_tensor *y = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hy);
            /* the bias inside a fused [3C] bias, like GPT-2's key slice */
            pfx_tensor *b =
                mo_upload(rt, &rng, half ? PFX_DTYPE_F16 : PFX_DTYPE_F32, 3 * C, 1.0f, &hb);
            /* the middle slice, or (half) a strided column: every third element */
            const pfx_mat bv = strided ? pfx_mat_of(b, 1, C, 1, 3) : PFX_VEC(b, C, C);
            double *Y = mo_gather(hy, off, R, C, ld);
            for (size_t r = 0; r < R; r++)
                for (size_t c = 0; c < C; c++)
                    Y[r * C + c] += hb[strided ? 1 + 3 * c : C + c];
            assert_int_equal(pfx_op_bias_add(rt, pfx_mat_of(y, off, R, C, ld), bv), PFX_SUCCESS);
            mo_expect_view("bias", y, hy, off, R, C, R > 1 ? ld : C, Y, TOL_OPS_F32);
            free(hy);
            free(hb);
            free(Y);
            pfx_tensor_destroy(&y);
            pfx_tensor_destroy(&b);
        }
}

/* The bias gradient db[c] (+)= sum_r dy[r, c]: dy a strided view; db the
 * middle slice of a fused [3C] bias, a strided column (every third element)
 * or a 1 x C row; written over random contents or added to them. Without
 * accumulation a second run gives bit-identical results. */
static void test_bias_grad(void **state)
{
    pfx_runtime *rt = *state;
    /* one row, one column, more columns than a work-group, rows > 64 */
    const size_t sizes[][2] = { { 1, 1 },   { 7, 33 },  { 129, 257 },
                                { 1, 300 }, { 200, 1 }, { 65, 1000 } };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (int kind = 0; kind < 3; kind++)
            for (int acc = 0; acc < 2; acc++) {
                const size_t R = sizes[i][0], C = sizes[i][1], ld = C + 5, off = 2;
                const size_t n = off + (R - 1) * ld + C + 1;
                ref_rng rng;
                ref_rng_seed(&rng, 800 + i * 6 + (uint64_t)kind * 2 + (uint64_t)acc);
                float *hy, *hb;
                pfx_tensor *dy = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hy);
                pfx_tensor *db = mo_upload(rt, &rng, PFX_DTYPE_F32, 3 * C + 1, 1.0f, &hb);
                const size_t boff = kind == 0 ? C : 1, bstep = kind == 1 ? 3 : 1;
                const pfx_mat bv = kind == 0   ? PFX_VEC(db, C, C)
                                   : kind == 1 ? pfx_mat_of(db, 1, C, 1, 3)
                                               : pfx_mat_of(db, 1, 1, C, C);
                double *DB = calloc(C, sizeof(double));
                assert_non_null(DB);
                for (size_t c = 0; c < C; c++) {
                    for (size_t r = 0; r < R; r++)
                        DB[c] += hy[off + r * ld + c];
                    if (acc)
                        DB[c] += hb[boff + c * bstep];
                }
                const pfx_mat vdy = pfx_mat_of(dy, off, R, C, ld);
                assert_int_equal(pfx_op_bias_grad(rt, vdy, bv, acc), PFX_SUCCESS);
                mo_expect_view("bias grad", db, hb, boff, C, 1, bstep, DB, TOL_OPS_F32);
                float *after = mo_read(dy);
                assert_memory_equal(after, hy, n * sizeof(float));
                free(after);
                if (!acc) {
                    float *b1 = mo_read(db);
                    assert_int_equal(pfx_op_bias_grad(rt, vdy, bv, false), PFX_SUCCESS);
                    float *b2 = mo_read(db);
                    assert_memory_equal(b1, b2, (3 * C + 1) * sizeof(float));
                    free(b1);
                    free(b2);
                }
                free(hy);
                free(hb);
                free(DB);
                pfx_tensor_destroy(&dy);
                pfx_tensor_destroy(&db);
            }
}

/* Bad arguments of the bias gradient: each status, nothing written. */
static void test_bias_grad_bad(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 10);
    pfx_tensor *x = mo_random(rt, &rng, PFX_DTYPE_F32, 64);
    pfx_tensor *xh = mo_random(rt, &rng, PFX_DTYPE_F16, 64);
    pfx_runtime *rt2 = pfx_test_runtime();
    pfx_tensor *other = mo_random(rt2, &rng, PFX_DTYPE_F32, 64);
    float *hx = mo_read(x), *hxh = mo_read(xh);
    const size_t live = pfx_test_live_bytes(rt);
    const pfx_mat a = PFX_MAT(x, 4, 8);
    assert_status_names(NULL, pfx_op_bias_grad(NULL, a, PFX_VEC(x, 40, 8), true),
                        PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(rt, pfx_op_bias_grad(rt, PFX_MAT(NULL, 4, 8), PFX_VEC(x, 40, 8), true),
                        PFX_ERROR_NULL_ARGUMENT, "dy");
    assert_status_names(rt, pfx_op_bias_grad(rt, a, PFX_VEC(NULL, 40, 8), true),
                        PFX_ERROR_NULL_ARGUMENT, "db");
    assert_status_names(rt, pfx_op_bias_grad(rt, PFX_MAT(xh, 4, 8), PFX_VEC(x, 40, 8), true),
                        PFX_ERROR_DTYPE_MISMATCH, "dy");
    assert_status_names(rt, pfx_op_bias_grad(rt, a, PFX_VEC(xh, 40, 8), true),
                        PFX_ERROR_DTYPE_MISMATCH, "db");
    assert_status_names(rt, pfx_op_bias_grad(rt, a, PFX_VEC(other, 40, 8), true),
                        PFX_ERROR_RUNTIME_MISMATCH, "db");
    assert_status_names(rt, pfx_op_bias_grad(rt, a, PFX_VEC(x, 40, 7), true),
                        PFX_ERROR_INVALID_SHAPE, "db");
    assert_status_names(rt, pfx_op_bias_grad(rt, a, pfx_mat_of(x, 40, 2, 8, 8), true),
                        PFX_ERROR_INVALID_SHAPE, "db");
    assert_status_names(rt,
                        pfx_op_bias_grad(rt, pfx_mat_of(x, 0, 4, 8, 7), PFX_VEC(x, 40, 8), true),
                        PFX_ERROR_INVALID_SHAPE, "dy");
    assert_status_names(rt, pfx_op_bias_grad(rt, a, PFX_VEC(x, 57, 8), true),
                        PFX_ERROR_OUT_OF_RANGE, "db");
    assert_status_names(rt, pfx_op_bias_grad(rt, a, pfx_mat_of(x, 40, 8, 1, 4), true),
                        PFX_ERROR_OUT_OF_RANGE, "db");
    assert_status_names(rt, pfx_op_bias_grad(rt, PFX_MAT(x, 9, 8), PFX_VEC(xh, 0, 8), true),
                        PFX_ERROR_OUT_OF_RANGE, "dy");
    assert_status_names(rt, pfx_op_bias_grad(rt, a, PFX_VEC(x, 28, 8), true), PFX_ERROR_ALIASING,
                        "db");
    assert_status_names(
        rt, pfx_op_bias_grad(rt, pfx_mat_of(x, 1, 4, 3, 8), pfx_mat_of(x, 2, 1, 3, 3), true),
        PFX_ERROR_ALIASING, "db");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    float *ax = mo_read(x), *axh = mo_read(xh);
    assert_memory_equal(ax, hx, 64 * sizeof(float));
    assert_memory_equal(axh, hxh, 64 * sizeof(float));
    free(ax);
    free(axh);
    free(hx);
    free(hxh);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&xh);
    pfx_tensor_destroy(&other);
    pfx_runtime_destroy(&rt2);
}

/* Column blocks: x split into parts (with a bias slice, float or half, or
 * none) and the parts joined back, on strided views of awkward widths and
 * of whole 8-column chunks (the kernels' vector form). */
static void test_columns(void **state)
{
    pfx_runtime *rt = *state;
    /* { 3, 4, 4, 8 }: a total of whole chunks with parts that are not */
    const size_t sizes[][4] = { { 1, 1, 1, 1 },    { 7, 5, 3, 9 },     { 33, 24, 8, 16 },
                                { 5, 64, 16, 16 }, { 129, 40, 8, 24 }, { 3, 6, 0, 0 },
                                { 2, 16, 8, 0 },   { 3, 4, 4, 8 } };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (int kind = 0; kind < 3; kind++) {
            const size_t R = sizes[i][0], parts = sizes[i][3] ? 3 : sizes[i][2] ? 2 : 1;
            size_t W = 0, col[3];
            for (size_t p = 0; p < parts; p++) {
                col[p] = W;
                W += sizes[i][1 + p];
            }
            const size_t xld = W + 3, xoff = 1;
            ref_rng rng;
            ref_rng_seed(&rng, 700 + i * 3 + (uint64_t)kind);
            float *hx, *hb, *hy[3];
            pfx_tensor *x = mo_upload(rt, &rng, PFX_DTYPE_F32, xoff + (R - 1) * xld + W, 1.0f, &hx);
            pfx_tensor *b = mo_upload(rt, &rng, kind == 2 ? PFX_DTYPE_F16 : PFX_DTYPE_F32,
                                      2 * W + 2, 1.0f, &hb);
            pfx_tensor *y[3] = { NULL, NULL, NULL };
            pfx_mat yv[3];
            size_t yld[3], yoff[3];
            for (size_t p = 0; p < parts; p++) {
                const size_t w = sizes[i][1 + p];
                yld[p] = w + p; /* strided but the first */
                yoff[p] = 2 * p;
                y[p] = mo_upload(rt, &rng, PFX_DTYPE_F32, yoff[p] + (R - 1) * yld[p] + w, 1.0f,
                                 &hy[p]);
                yv[p] = pfx_mat_of(y[p], yoff[p], R, w, yld[p]);
            }
            /* split: the bias from element 2 of its tensor, every element
             * (float) or every second one (half); kind 0: none */
            const size_t bstep = kind == 2 ? 2 : 1;
            const pfx_mat bv = pfx_mat_of(b, 2, W, 1, bstep);
            assert_int_equal(pfx_op_split_columns(rt, pfx_mat_of(x, xoff, R, W, xld),
                                                  kind ? &bv : NULL, parts, yv),
                             PFX_SUCCESS);
            for (size_t p = 0; p < parts; p++) {
                const size_t w = sizes[i][1 + p];
                double *Y = mo_gather(hx, xoff + col[p], R, w, xld);
                for (size_t r = 0; kind && r < R; r++)
                    for (size_t c = 0; c < w; c++)
                        Y[r * w + c] += hb[2 + (col[p] + c) * bstep];
                mo_expect_view("split columns", y[p], hy[p], yoff[p], R, w, R > 1 ? yld[p] : w, Y,
                               TOL_OPS_F32);
                free(Y);
                free(hy[p]);
                hy[p] = mo_read(y[p]);
            }
            /* join: the parts as they are now back into x, cleared first
             * (without a bias the parts are x's own values) */
            assert_int_equal(pfx_tensor_fill(x, 0.5f), PFX_SUCCESS);
            for (size_t e = 0; e < pfx_tensor_numel(x); e++)
                hx[e] = 0.5f;
            assert_int_equal(pfx_op_join_columns(rt, parts, yv, pfx_mat_of(x, xoff, R, W, xld)),
                             PFX_SUCCESS);
            double *X = malloc(R * W * sizeof(double));
            assert_non_null(X);
            for (size_t p = 0; p < parts; p++)
                for (size_t r = 0; r < R; r++)
                    for (size_t c = 0; c < sizes[i][1 + p]; c++)
                        X[r * W + col[p] + c] = hy[p][yoff[p] + r * yld[p] + c];
            mo_expect_view("join columns", x, hx, xoff, R, W, R > 1 ? xld : W, X, 0.0);
            free(X);
            free(hx);
            free(hb);
            for (size_t p = 0; p < parts; p++) {
                free(hy[p]);
                pfx_tensor_destroy(&y[p]);
            }
            pfx_tensor_destroy(&x);
            pfx_tensor_destroy(&b);
        }
}

static void test_bad_arguments(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 9);
    pfx_tensor *x = mo_random(rt, &rng, PFX_DTYPE_F32, 64);
    pfx_tensor *xh = mo_random(rt, &rng, PFX_DTYPE_F16, 64);
    pfx_runtime *rt2 = pfx_test_runtime();
    pfx_tensor *other = mo_random(rt2, &rng, PFX_DTYPE_F32, 64);
    const size_t live = pfx_test_live_bytes(rt);
    pfx_mat a = PFX_MAT(x, 4, 8), b = pfx_mat_of(x, 32, 4, 8, 8);
    assert_status_names(rt, pfx_op_activation_forward(rt, (pfx_activation)7, a, b),
                        PFX_ERROR_INVALID_ARGUMENT, "act");
    assert_status_names(rt, pfx_op_activation_forward(rt, PFX_ACT_GELU, PFX_MAT(xh, 4, 8), b),
                        PFX_ERROR_DTYPE_MISMATCH, "x");
    assert_status_names(rt,
                        pfx_op_activation_forward(rt, PFX_ACT_GELU, a, pfx_mat_of(x, 1, 4, 8, 8)),
                        PFX_ERROR_ALIASING, "y");
    assert_status_names(rt, pfx_op_activation_forward(rt, PFX_ACT_GELU, a, PFX_MAT(other, 4, 8)),
                        PFX_ERROR_RUNTIME_MISMATCH, "y");
    assert_status_names(rt, pfx_op_activation_backward(rt, PFX_ACT_SILU, a, b, a),
                        PFX_ERROR_ALIASING, "dx");
    assert_status_names(rt, pfx_op_activation_backward(rt, PFX_ACT_SILU, a, b, PFX_MAT(x, 4, 9)),
                        PFX_ERROR_INVALID_SHAPE, "dx");
    assert_status_names(rt, pfx_op_swiglu_forward(rt, a, pfx_mat_of(x, 33, 4, 8, 8), b),
                        PFX_ERROR_OUT_OF_RANGE, "up");
    assert_status_names(rt, pfx_op_swiglu_forward(rt, a, b, pfx_mat_of(x, 4, 4, 8, 8)),
                        PFX_ERROR_ALIASING, "out");
    assert_status_names(rt, pfx_op_swiglu_backward(rt, a, b, PFX_MAT(other, 4, 8), a, b),
                        PFX_ERROR_RUNTIME_MISMATCH, "dout");
    assert_status_names(rt, pfx_op_swiglu_backward(rt, a, b, a, a, b), PFX_ERROR_ALIASING, "dgate");
    assert_status_names(rt, pfx_op_bias_add(rt, a, PFX_VEC(x, 40, 7)), PFX_ERROR_INVALID_SHAPE,
                        "bias");
    assert_status_names(rt, pfx_op_bias_add(rt, a, PFX_VEC(x, 4, 8)), PFX_ERROR_ALIASING, "bias");
    assert_status_names(NULL, pfx_op_bias_add(NULL, a, PFX_VEC(x, 40, 8)), PFX_ERROR_NULL_ARGUMENT,
                        "rt");
    pfx_mat parts[3] = { pfx_mat_of(x, 32, 4, 3, 3), pfx_mat_of(x, 44, 4, 5, 5),
                         PFX_MAT(xh, 4, 5) };
    pfx_mat bias8 = PFX_VEC(xh, 0, 8);
    assert_status_names(rt, pfx_op_split_columns(rt, a, NULL, 0, parts), PFX_ERROR_INVALID_ARGUMENT,
                        "parts");
    assert_status_names(rt, pfx_op_split_columns(rt, a, NULL, 4, parts), PFX_ERROR_INVALID_ARGUMENT,
                        "parts");
    assert_status_names(rt, pfx_op_split_columns(rt, a, NULL, 2, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "y");
    assert_status_names(rt, pfx_op_split_columns(rt, a, NULL, 3, parts), PFX_ERROR_DTYPE_MISMATCH,
                        "y[2]");
    assert_status_names(rt, pfx_op_split_columns(rt, a, NULL, 1, parts), PFX_ERROR_INVALID_SHAPE,
                        "widths");
    assert_status_names(rt, pfx_op_split_columns(rt, a, &parts[0], 2, parts),
                        PFX_ERROR_INVALID_SHAPE, "bias");
    assert_int_equal(pfx_op_split_columns(rt, a, &bias8, 2, parts), PFX_SUCCESS);
    parts[1] = pfx_mat_of(x, 40, 4, 5, 5);
    assert_status_names(rt, pfx_op_split_columns(rt, a, &bias8, 2, parts), PFX_ERROR_ALIASING,
                        "y[1]");
    pfx_mat bias_over_y0 = PFX_VEC(x, 32, 8);
    parts[1] = pfx_mat_of(x, 44, 4, 5, 5);
    assert_status_names(rt, pfx_op_split_columns(rt, a, &bias_over_y0, 2, parts),
                        PFX_ERROR_ALIASING, "y[0]");
    parts[1] = pfx_mat_of(x, 20, 4, 5, 5);
    assert_status_names(rt, pfx_op_join_columns(rt, 2, parts, a), PFX_ERROR_ALIASING, "y[1]");
    parts[1] = pfx_mat_of(x, 44, 3, 5, 5);
    assert_status_names(rt, pfx_op_join_columns(rt, 2, parts, a), PFX_ERROR_INVALID_SHAPE, "y[1]");
    parts[1] = pfx_mat_of(x, 44, 4, 5, 5);
    assert_status_names(rt, pfx_op_join_columns(rt, 2, parts, PFX_MAT(other, 4, 8)),
                        PFX_ERROR_RUNTIME_MISMATCH, "x");
    assert_status_names(NULL, pfx_op_join_columns(NULL, 2, parts, a), PFX_ERROR_NULL_ARGUMENT,
                        "rt");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&xh);
    pfx_tensor_destroy(&other);
    pfx_runtime_destroy(&rt2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),     cmocka_unit_test(test_activations),
        cmocka_unit_test(test_swiglu),    cmocka_unit_test(test_bias),
        cmocka_unit_test(test_bias_grad), cmocka_unit_test(test_bias_grad_bad),
        cmocka_unit_test(test_columns),   cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests_name("activation", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
