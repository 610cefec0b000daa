/*
 * Suite 'gemm_weight': products with a frozen weight of any storage
 * (pfx_gemm_weight in src/ops/gemm.c; half and bfloat16 widened block by
 * block into a float32 workspace, then SGEMM (on the host backend widened
 * by the CPU, gemm_rows.h); up to 8 rows on the
 * host backend read the 16-bit weight as stored, gemm_rows.c) and the conversion
 * itself (pfx_op_to_float), against a double product of the values the
 * device holds; both orientations (GPT-2 Conv1D [in, out], Llama [out, in]),
 * workspaces from one column to the whole weight, alpha/beta, strided
 * weights; Q8_0 weights (rows of whole blocks, the view on a block; the
 * many-row blocks of columns starting inside a block); bad arguments.
 */
#include "half.h"
#include "model_ops_test.h"

typedef struct gw_case {
    size_t m, n, k, ws_cols; /* ws_cols: workspace of ws_cols * k elements (0: none) */
    bool trans_w;
    pfx_dtype storage;
    float alpha, beta;
    uint64_t seed;
} gw_case;

#define F32  PFX_DTYPE_F32
#define F16  PFX_DTYPE_F16
#define BF16 PFX_DTYPE_BF16
#define Q8   PFX_DTYPE_Q8_0

static const gw_case gw_cases[] = {
    { 1, 1, 1, 1, false, F16, 1.0f, 0.0f, 61 },
    { 7, 33, 48, 5, false, F16, 1.0f, 1.0f, 62 },
    { 7, 33, 48, 5, true, F16, 0.5f, 1.0f, 63 },
    { 129, 101, 48, 1, true, F16, 1.0f, 0.0f, 64 },    /* one column per block */
    { 13, 257, 33, 1000, false, F16, 1.0f, 0.0f, 65 }, /* one block */
    { 13, 257, 33, 0, false, F32, 1.0f, 1.0f, 66 },
    { 13, 257, 33, 0, true, F32, 2.0f, 0.0f, 67 },
    { 1, 257, 33, 0, false, F32, 0.5f, 1.0f, 68 }, /* one row: matrix-vector on the host */
    { 1, 257, 33, 0, true, F32, 1.0f, 1.0f, 69 },
    { 1, 101, 48, 1, true, F16, 1.0f, 0.0f, 70 },
    /* up to 8 rows on the host backend: the 16-bit weight read as stored */
    { 8, 70, 100, 2, false, F16, 1.0f, 0.5f, 71 },
    { 8, 70, 100, 2, true, F16, 2.0f, 0.0f, 72 },
    { 5, 300, 40, 0, false, F32, 1.0f, 1.0f, 73 },
    /* bfloat16: widened blockwise (many rows) or read as stored (a few) */
    { 1, 1, 1, 1, false, BF16, 1.0f, 0.0f, 74 },
    { 13, 257, 33, 7, false, BF16, 1.0f, 0.5f, 75 },
    { 129, 101, 48, 3, true, BF16, 0.5f, 0.0f, 76 },
    { 1, 101, 48, 1, true, BF16, 1.0f, 1.0f, 77 },
    { 8, 70, 100, 2, false, BF16, 1.0f, 0.5f, 78 },
    { 3, 77, 99, 2, true, BF16, 2.0f, 0.0f, 79 },
    /* 9 rows: widened blockwise (on the host backend by the CPU); rows and
     * blocks off the 16-wide conversions */
    { 9, 45, 37, 3, true, F16, 1.0f, 0.5f, 80 },
    { 9, 45, 37, 4, false, BF16, 0.5f, 0.0f, 81 },
    { 17, 130, 21, 1000, true, BF16, 1.0f, 1.0f, 82 },
    /* Q8_0: a few rows read the blocks as stored, more widen them */
    { 1, 1, 1, 1, false, Q8, 1.0f, 0.0f, 83 },
    { 1, 97, 64, 2, true, Q8, 1.0f, 0.0f, 84 },
    { 1, 97, 50, 2, false, Q8, 0.5f, 1.0f, 85 },
    { 8, 70, 100, 2, false, Q8, 1.0f, 0.5f, 86 },
    { 5, 77, 99, 2, true, Q8, 2.0f, 0.0f, 87 },
    { 9, 45, 37, 3, true, Q8, 1.0f, 0.5f, 88 },
    { 13, 257, 33, 7, false, Q8, 1.0f, 0.0f, 89 }, /* blocks of 7 columns */
    { 129, 101, 48, 1000, true, Q8, 0.5f, 1.0f, 90 },
};

static void test_gemm_weight(void **state)
{
    pfx_runtime *rt = *state;
    for (size_t i = 0; i < sizeof(gw_cases) / sizeof(gw_cases[0]); i++) {
        const gw_case *g = &gw_cases[i];
        ref_rng rng;
        ref_rng_seed(&rng, g->seed);
        const size_t m = g->m, n = g->n, k = g->k;
        /* W stored [n, k] (trans) or [k, n], inside a wider buffer: ld = cols + 3, offset 2
         * (Q8_0: the next whole blocks) */
        const bool q8 = g->storage == Q8;
        const size_t wr = g->trans_w ? n : k, wc = g->trans_w ? k : n;
        const size_t ld = q8 ? (wc + 31) / 32 * 32 + 32 : wc + 3, off = q8 ? 32 : 2;
        float *ha, *hw, *hc, *hws = NULL;
        pfx_tensor *a = mo_upload(rt, &rng, PFX_DTYPE_F32, m * k, 1.0f, &ha);
        pfx_tensor *w = mo_upload(rt, &rng, g->storage, off + wr * ld, 1.0f, &hw);
        pfx_tensor *c = mo_upload(rt, &rng, PFX_DTYPE_F32, m * n, 1.0f, &hc);
        pfx_tensor *ws =
            g->ws_cols ? mo_upload(rt, &rng, PFX_DTYPE_F32, g->ws_cols * k + 1, 1.0f, &hws) : NULL;
        double *want = malloc(m * n * sizeof(double));
        for (size_t r = 0; r < m; r++)
            for (size_t j = 0; j < n; j++) {
                double s = 0.0;
                for (size_t e = 0; e < k; e++)
                    s += (double)ha[r * k + e] * hw[off + (g->trans_w ? j * ld + e : e * ld + j)];
                want[r * n + j] = g->alpha * s + g->beta * (double)hc[r * n + j];
            }
        assert_int_equal(pfx_gemm_weight(rt, "test", m, n, k, g->alpha, PFX_GEMM_OP(a->mem, 0, k),
                                         pfx_mat_of(w, off, wr, wc, ld), g->trans_w, g->beta,
                                         PFX_GEMM_OP(c->mem, 0, n), ws),
                         PFX_SUCCESS);
        float *got = mo_read(c);
        mo_expect_close("gemm_weight", want, got, m * n, TOL_OPS_GEMM);
        free(got);
        free(want);
        free(ha);
        free(hw);
        free(hc);
        free(hws);
        pfx_tensor_destroy(&a);
        pfx_tensor_destroy(&w);
        pfx_tensor_destroy(&c);
        pfx_tensor_destroy(&ws);
    }
}

static void to_float_case(pfx_runtime *rt, pfx_dtype storage)
{
    ref_rng rng;
    ref_rng_seed(&rng, 68);
    /* Q8_0: rows of whole blocks, the view from inside the first */
    const size_t R = 9, C = 33, ld = storage == Q8 ? 64 : 40;
    const size_t numel = storage == Q8 ? R * ld + 32 : 1 + (R - 1) * ld + C;
    float *hs, *hd;
    pfx_tensor *src = mo_upload(rt, &rng, storage, numel, 70000.0f, &hs);
    pfx_tensor *dst = mo_upload(rt, &rng, PFX_DTYPE_F32, R * C + 2, 1.0f, &hd);
    double *want = mo_gather(hs, 1, R, C, ld); /* stored values (half: inf beyond 65504) */
    assert_int_equal(pfx_op_to_float(rt, pfx_mat_of(src, 1, R, C, ld), pfx_mat_of(dst, 1, R, C, C)),
                     PFX_SUCCESS);
    float *got = mo_read(dst);
    for (size_t i = 0; i < R * C; i++)
        assert_memory_equal(&got[1 + i], &(float){ (float)want[i] }, sizeof(float));
    assert_true(got[0] == hd[0] && got[R * C + 1] == hd[R * C + 1]);
    free(got);
    free(want);
    free(hs);
    free(hd);
    pfx_tensor_destroy(&src);
    pfx_tensor_destroy(&dst);
}

static void test_to_float(void **state)
{
    to_float_case(*state, PFX_DTYPE_F16);
    to_float_case(*state, PFX_DTYPE_BF16);
    to_float_case(*state, Q8);
}

/* The other way (a half KV cache's new rows): a strided float32 view
 * rounded to nearest even into a strided half or bfloat16 one, ties to
 * even and past half's range included, as the host rounds; nothing outside
 * the view written. */
static void from_float_case(pfx_runtime *rt, pfx_dtype storage)
{
    ref_rng rng;
    ref_rng_seed(&rng, 69);
    const size_t R = 7, C = 29, ld_s = 35, ld_d = 31, ns = 3 + (R - 1) * ld_s + C;
    const bool bf16 = storage == PFX_DTYPE_BF16;
    float *hs, *hd;
    pfx_tensor *src = mo_upload(rt, &rng, PFX_DTYPE_F32, ns, 70000.0f, &hs);
    pfx_tensor *dst = mo_upload(rt, &rng, storage, 2 + (R - 1) * ld_d + C + 2, 1.0f, &hd);
    /* halfway between two neighbours: to the even one (up, then down) */
    const float ulp = bf16 ? 0x1p-7f : 0x1p-10f;
    const float ties[4] = { 1.0f + 0.5f * ulp, 1.0f + 1.5f * ulp, -2.0f - ulp, 65520.0f };
    memcpy(hs + 3, ties, sizeof(ties));
    assert_int_equal(pfx_tensor_write(src, 3, 4, ties), PFX_SUCCESS);
    assert_int_equal(
        pfx_op_from_float(rt, pfx_mat_of(src, 3, R, C, ld_s), pfx_mat_of(dst, 2, R, C, ld_d)),
        PFX_SUCCESS);
    float *got = mo_read(dst);
    for (size_t n = pfx_tensor_numel(dst), i = 0; i < n; i++) {
        const size_t r = (i - 2) / ld_d, c = (i - 2) % ld_d;
        const bool in = i >= 2 && r < R && c < C;
        const float want =
            in ? pfx_16bit_to_float(pfx_float_to_16bit(hs[3 + r * ld_s + c], bf16), bf16) : hd[i];
        if (memcmp(&got[i], &want, sizeof(float)))
            fail_msg("%s element %zu: %.9g, expected %.9g", pfx_dtype_name(storage), i,
                     (double)got[i], (double)want);
    }
    assert_true(got[2] == 1.0f && got[3] == 1.0f + 2.0f * ulp && got[4] == -2.0f);
    assert_true(bf16 ? got[5] == 65536.0f : isinf(got[5]));
    free(got);
    free(hs);
    free(hd);
    pfx_tensor_destroy(&src);
    pfx_tensor_destroy(&dst);
}

static void test_from_float(void **state)
{
    from_float_case(*state, PFX_DTYPE_F16);
    from_float_case(*state, PFX_DTYPE_BF16);
    pfx_runtime *rt = *state;
    pfx_tensor *f = NULL, *h = NULL, *q = NULL;
    const size_t shape[2] = { 4, 32 };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &f), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 2, shape, &h), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_Q8_0, 2, shape, &q), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_from_float(rt, PFX_MAT(h, 4, 32), PFX_MAT(h, 4, 32)),
                        PFX_ERROR_DTYPE_MISMATCH, "src");
    assert_status_names(rt, pfx_op_from_float(rt, PFX_MAT(f, 4, 32), PFX_MAT(q, 4, 32)),
                        PFX_ERROR_DTYPE_MISMATCH, "dst");
    assert_status_names(rt, pfx_op_from_float(rt, PFX_MAT(f, 4, 32), PFX_MAT(h, 4, 31)),
                        PFX_ERROR_INVALID_SHAPE, "dst");
    pfx_tensor_destroy(&f);
    pfx_tensor_destroy(&h);
    pfx_tensor_destroy(&q);
}

/* A Q8_0 weight's view starts on a block, its rows whole blocks; the
 * kernels that read weights without blocks refuse it. */
static void test_q8_0_views(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 91);
    pfx_tensor *a = mo_random(rt, &rng, PFX_DTYPE_F32, 4 * 64);
    pfx_tensor *w = mo_random(rt, &rng, Q8, 64 * 64 + 32);
    pfx_tensor *c = mo_random(rt, &rng, PFX_DTYPE_F32, 4 * 64);
    pfx_tensor *ws = mo_random(rt, &rng, PFX_DTYPE_F32, 64 * 64);
    const size_t live = pfx_test_live_bytes(rt);
    pfx_gemm_operand oa = PFX_GEMM_OP(a->mem, 0, 64), oc = PFX_GEMM_OP(c->mem, 0, 64);
    assert_int_equal(pfx_gemm_weight(rt, "t", 4, 64, 64, 1.0f, oa, pfx_mat_of(w, 32, 64, 64, 64),
                                     false, 0.0f, oc, ws),
                     PFX_SUCCESS);
    assert_status_names(rt,
                        pfx_gemm_weight(rt, "t", 4, 64, 64, 1.0f, oa, pfx_mat_of(w, 16, 64, 64, 64),
                                        false, 0.0f, oc, ws),
                        PFX_ERROR_INVALID_SHAPE, "block");
    assert_status_names(rt,
                        pfx_gemm_weight(rt, "t", 4, 63, 64, 1.0f, oa, pfx_mat_of(w, 0, 64, 63, 63),
                                        false, 0.0f, oc, ws),
                        PFX_ERROR_INVALID_SHAPE, "row stride 63");
    assert_status_names(
        rt,
        pfx_gemm_weight(rt, "t", 4, 64, 64, 1.0f, oa, PFX_MAT(w, 64, 64), false, 0.0f, oc, NULL),
        PFX_ERROR_NULL_ARGUMENT, "Q8_0 weight needs a workspace");
    assert_status_names(rt,
                        pfx_op_layernorm_forward(rt, PFX_MAT(c, 4, 64), PFX_VEC(w, 0, 64), NULL,
                                                 1e-5f, PFX_MAT(c, 4, 64), NULL, NULL),
                        PFX_ERROR_DTYPE_MISMATCH, "Q8_0");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    pfx_tensor_destroy(&a);
    pfx_tensor_destroy(&w);
    pfx_tensor_destroy(&c);
    pfx_tensor_destroy(&ws);
}

static void test_bad_arguments(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 69);
    pfx_tensor *a = mo_random(rt, &rng, PFX_DTYPE_F32, 4 * 6);
    pfx_tensor *w = mo_random(rt, &rng, PFX_DTYPE_F16, 6 * 5);
    pfx_tensor *c = mo_random(rt, &rng, PFX_DTYPE_F32, 4 * 5);
    pfx_tensor *ws = mo_random(rt, &rng, PFX_DTYPE_F32, 6);
    pfx_tensor *wsh = mo_random(rt, &rng, PFX_DTYPE_F16, 60);
    const size_t live = pfx_test_live_bytes(rt);
    pfx_gemm_operand oa = PFX_GEMM_OP(a->mem, 0, 6), oc = PFX_GEMM_OP(c->mem, 0, 5);
    pfx_mat vw = PFX_MAT(w, 6, 5);
    assert_int_equal(pfx_gemm_weight(rt, "t", 4, 5, 6, 1.0f, oa, vw, false, 0.0f, oc, ws),
                     PFX_SUCCESS);
    assert_status_names(rt, pfx_gemm_weight(rt, "t", 4, 5, 6, 1.0f, oa, vw, false, 0.0f, oc, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "workspace");
    assert_status_names(rt, pfx_gemm_weight(rt, "t", 4, 5, 6, 1.0f, oa, vw, false, 0.0f, oc, wsh),
                        PFX_ERROR_DTYPE_MISMATCH, "workspace");
    assert_status_names(rt, pfx_gemm_weight(rt, "t", 4, 5, 6, 1.0f, oa, vw, true, 0.0f, oc, ws),
                        PFX_ERROR_INVALID_SHAPE, "weight");
    assert_status_names(rt, pfx_gemm_weight(rt, "t", 4, 5, 7, 1.0f, oa, vw, false, 0.0f, oc, ws),
                        PFX_ERROR_INVALID_SHAPE, "weight");
    assert_status_names(
        rt, pfx_gemm_weight(rt, "t", 4, 5, 6, 1.0f, oa, PFX_MAT(w, 7, 5), false, 0.0f, oc, ws),
        PFX_ERROR_OUT_OF_RANGE, "weight");
    assert_status_names(rt,
                        pfx_gemm_weight(rt, "t", 4, 5, 6, 1.0f, oa, vw, false, 0.0f,
                                        PFX_GEMM_OP(ws->mem, 0, 5), ws),
                        PFX_ERROR_ALIASING, "workspace");
    assert_status_names(rt, pfx_gemm_weight(rt, "t", 0, 5, 6, 1.0f, oa, vw, false, 0.0f, oc, ws),
                        PFX_ERROR_INVALID_SHAPE, "m=0");
    pfx_tensor *tiny = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, (size_t[]){ 5 }, &tiny), PFX_SUCCESS);
    assert_status_names(rt, pfx_gemm_weight(rt, "t", 4, 5, 6, 1.0f, oa, vw, false, 0.0f, oc, tiny),
                        PFX_ERROR_INVALID_SHAPE, "workspace");
    pfx_tensor_destroy(&tiny);
    assert_status_names(rt, pfx_op_to_float(rt, vw, PFX_MAT(c, 4, 5)), PFX_ERROR_INVALID_SHAPE,
                        "dst");
    assert_status_names(rt, pfx_op_to_float(rt, PFX_MAT(c, 4, 5), PFX_MAT(c, 4, 5)),
                        PFX_ERROR_ALIASING, "dst");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    pfx_tensor_destroy(&a);
    pfx_tensor_destroy(&w);
    pfx_tensor_destroy(&c);
    pfx_tensor_destroy(&ws);
    pfx_tensor_destroy(&wsh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_weight), cmocka_unit_test(test_to_float),
        cmocka_unit_test(test_from_float),  cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_q8_0_views),
    };
    return cmocka_run_group_tests_name("gemm_weight", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
