/*
 * Suite 'rope': inv_freq (default and llama3, the host helper against the
 * double reference and values transformers 5.24 printed for a Llama-3.1
 * config), RoPE forward and backward (src/ops/rope.c) against the double
 * reference on BNHD rows of awkward sizes, strided (queries inside a fused
 * qkv buffer), large position offsets; bad arguments.
 */
#include "model_ops_test.h"
#include "reference/model_ops_ref.h"

static void test_inv_freq(void **state)
{
    pfx_runtime *rt = *state;
    const size_t dims[] = { 2, 12, 64, 128 };
    for (int llama3 = 0; llama3 < 2; llama3++)
        for (size_t i = 0; i < 4; i++) {
            const size_t D = dims[i];
            pfx_rope_params p = { .theta = llama3 ? 500000.0 : 10000.0,
                                  .head_dim = D,
                                  .type = llama3 ? PFX_ROPE_LLAMA3 : PFX_ROPE_DEFAULT,
                                  .factor = 8.0,
                                  .low_freq_factor = 1.0,
                                  .high_freq_factor = 4.0,
                                  .original_max_position_embeddings = 8192.0 };
            ref_rope r = { p.theta, llama3, 8.0, 1.0, 4.0, 8192.0 };
            float got[64];
            double want[64];
            assert_int_equal(pfx_rope_inv_freq(rt, &p, got), PFX_SUCCESS);
            ref_rope_inv_freq(&r, D, want);
            for (size_t j = 0; j < D / 2; j++)
                assert_true(fabs(got[j] - want[j]) <= 1e-7 * want[j]);
        }
    /* transformers 5.24, _compute_llama3_parameters with rope_theta 500000, head_dim 64,
     * factor 8, low 1, high 4, original 8192 (float32): entries 0..15 untouched, 16 and
     * 17 smoothed, 18.. divided */
    pfx_rope_params p = { .theta = 500000.0,
                          .head_dim = 64,
                          .type = PFX_ROPE_LLAMA3,
                          .factor = 8.0,
                          .low_freq_factor = 1.0,
                          .high_freq_factor = 4.0,
                          .original_max_position_embeddings = 8192.0 };
    float f[32];
    assert_int_equal(pfx_rope_inv_freq(rt, &p, f), PFX_SUCCESS);
    const struct {
        size_t i;
        double v;
    } hf[] = { { 0, 1 },
               { 10, 0.0165604409 },
               { 15, 0.00137189368 },
               { 16, 0.000524846022 },
               { 17, 0.000178507791 },
               { 18, 7.78465546e-05 },
               { 31, 3.7673226e-07 } };
    for (size_t j = 0; j < sizeof(hf) / sizeof(hf[0]); j++)
        /* transformers evaluates pow, 1 / x, the wavelength and the smoothing in float32
         * (measured 2 ulp = 2.2e-7 off the double value at entry 16); a wrong band or
         * formula is off by 1e-2 or more */
        if (!(fabs(f[hf[j].i] - hf[j].v) <= 1e-6 * hf[j].v))
            fail_msg("inv_freq[%zu] = %.9g, transformers %.9g", hf[j].i, (double)f[hf[j].i],
                     hf[j].v);

    pfx_rope_params bad = p;
    bad.head_dim = 7;
    assert_status_names(rt, pfx_rope_inv_freq(rt, &bad, f), PFX_ERROR_INVALID_ARGUMENT, "head_dim");
    bad = p;
    bad.high_freq_factor = 0.5;
    assert_status_names(rt, pfx_rope_inv_freq(rt, &bad, f), PFX_ERROR_INVALID_ARGUMENT,
                        "high_freq_factor");
    bad = p;
    bad.theta = 0.0;
    assert_status_names(rt, pfx_rope_inv_freq(rt, &bad, f), PFX_ERROR_INVALID_ARGUMENT, "theta");
    assert_int_equal(pfx_rope_inv_freq(rt, NULL, f), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_rope_inv_freq(rt, &p, NULL), PFX_ERROR_NULL_ARGUMENT);
}

typedef struct rope_case {
    size_t B, N, H, D, pos0, extra; /* extra: columns after the view in each row (ld) */
    bool llama3;
    uint64_t seed;
} rope_case;

static const rope_case rope_cases[] = {
    { 1, 1, 1, 2, 0, 0, false, 31 },
    { 2, 7, 3, 12, 5, 0, false, 32 },
    { 3, 33, 4, 64, 1000, 24, true, 33 }, /* x is q inside [q | k | v]-like rows */
    { 1, 129, 2, 34, 0, 7, false, 34 },
};

static void test_rope(void **state)
{
    pfx_runtime *rt = *state;
    for (size_t i = 0; i < sizeof(rope_cases) / sizeof(rope_cases[0]); i++) {
        const rope_case *k = &rope_cases[i];
        ref_rng rng;
        ref_rng_seed(&rng, k->seed);
        const size_t R = k->B * k->N, C = k->H * k->D, ld = C + k->extra, off = k->extra ? 3 : 0;
        const size_t n = off + (R - 1) * ld + C;
        pfx_rope_params p = { .theta = k->llama3 ? 500000.0 : 10000.0,
                              .head_dim = k->D,
                              .type = k->llama3 ? PFX_ROPE_LLAMA3 : PFX_ROPE_DEFAULT,
                              .factor = 8.0,
                              .low_freq_factor = 1.0,
                              .high_freq_factor = 4.0,
                              .original_max_position_embeddings = 64.0 };
        float inv[64];
        assert_int_equal(pfx_rope_inv_freq(rt, &p, inv), PFX_SUCCESS);
        float *hx, *hf;
        pfx_tensor *x = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 2.0f, &hx);
        pfx_tensor *f = mo_upload(rt, &rng, PFX_DTYPE_F32, k->D / 2 + 1, 1.0f, &hf);
        assert_int_equal(pfx_tensor_write(f, 1, k->D / 2, inv), PFX_SUCCESS);
        double *want = mo_gather(hx, off, R, C, ld);
        ref_rope_apply(k->B, k->N, k->H, k->D, k->pos0, inv, 1.0, want);
        pfx_mat vx = pfx_mat_of(x, off, R, C, ld), vf = PFX_VEC(f, 1, k->D / 2);
        assert_int_equal(pfx_op_rope_forward(rt, vx, k->B, k->N, k->H, k->D, k->pos0, vf),
                         PFX_SUCCESS);
        mo_expect_view("rope forward", x, hx, off, R, C, R > 1 ? ld : C, want, TOL_OPS_F32);
        /* backward: the transpose, on the rotated rows, gives the input back */
        float *rotated = mo_read(x);
        double *back = mo_gather(rotated, off, R, C, ld);
        ref_rope_apply(k->B, k->N, k->H, k->D, k->pos0, inv, -1.0, back);
        assert_int_equal(pfx_op_rope_backward(rt, vx, k->B, k->N, k->H, k->D, k->pos0, vf),
                         PFX_SUCCESS);
        mo_expect_view("rope backward", x, rotated, off, R, C, R > 1 ? ld : C, back, TOL_OPS_F32);
        double *orig = mo_gather(hx, off, R, C, ld);
        float *again = mo_read(x);
        float *g = mo_gather_f(again, off, R, C, ld);
        mo_expect_close("rope round trip", orig, g, R * C, TOL_OPS_F32);
        free(orig);
        free(again);
        free(g);
        free(back);
        free(rotated);
        free(want);
        free(hx);
        free(hf);
        pfx_tensor_destroy(&x);
        pfx_tensor_destroy(&f);
    }
}

static void test_bad_arguments(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 35);
    pfx_tensor *x = mo_random(rt, &rng, PFX_DTYPE_F32, 96);
    pfx_tensor *f = mo_random(rt, &rng, PFX_DTYPE_F32, 8);
    pfx_tensor *fh = mo_random(rt, &rng, PFX_DTYPE_F16, 8);
    const size_t live = pfx_test_live_bytes(rt);
    pfx_mat vx = PFX_MAT(x, 4, 24), vf = PFX_VEC(f, 0, 6);
    assert_int_equal(pfx_op_rope_forward(rt, vx, 2, 2, 2, 12, 0, vf), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_rope_forward(rt, vx, 2, 2, 2, 11, 0, vf),
                        PFX_ERROR_INVALID_SHAPE, "head_dim");
    assert_status_names(rt, pfx_op_rope_forward(rt, vx, 2, 3, 2, 12, 0, vf),
                        PFX_ERROR_INVALID_SHAPE, "x");
    assert_status_names(rt, pfx_op_rope_forward(rt, vx, 2, 2, 2, 12, 0, PFX_VEC(f, 0, 5)),
                        PFX_ERROR_INVALID_SHAPE, "inv_freq");
    assert_status_names(rt, pfx_op_rope_forward(rt, vx, 2, 2, 2, 12, 0, PFX_VEC(fh, 0, 6)),
                        PFX_ERROR_DTYPE_MISMATCH, "inv_freq");
    assert_status_names(rt, pfx_op_rope_forward(rt, vx, 2, 2, 2, 12, 0, PFX_VEC(x, 90, 6)),
                        PFX_ERROR_ALIASING, "inv_freq");
    assert_status_names(rt, pfx_op_rope_backward(rt, vx, 2, 2, 2, 12, (size_t)1 << 24, vf),
                        PFX_ERROR_OUT_OF_RANGE, "positions");
    assert_status_names(rt,
                        pfx_op_rope_backward(rt, pfx_mat_of(x, 1, 4, 24, 24), 2, 2, 2, 12, 0, vf),
                        PFX_ERROR_OUT_OF_RANGE, "x");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&f);
    pfx_tensor_destroy(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inv_freq),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests_name("rope", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
