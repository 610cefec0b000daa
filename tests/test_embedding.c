/*
 * Suite 'embedding': token id buffers, the embedding gather with GPT-2's
 * learned positions at an offset (src/ops/embedding.c) for float and half
 * tables, and the gather of each item's last valid hidden row
 * (src/ops/gather.c); ids and lengths out of range, bad arguments.
 */
#include "model_ops_test.h"

static pfx_ids *make_ids(pfx_runtime *rt, ref_rng *rng, size_t n, size_t limit, int32_t *host)
{
    pfx_ids *ids = NULL;
    assert_int_equal(pfx_ids_create(rt, n, &ids), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++)
        host[i] = (int32_t)ref_rng_index(rng, limit);
    assert_int_equal(pfx_ids_write(ids, 0, n, host), PFX_SUCCESS);
    return ids;
}

static void test_ids(void **state)
{
    pfx_runtime *rt = *state;
    const size_t live = pfx_test_live_bytes(rt);
    pfx_ids *ids = NULL;
    assert_int_equal(pfx_ids_create(rt, 0, &ids), PFX_ERROR_INVALID_SHAPE);
    assert_null(ids);
    assert_int_equal(pfx_ids_create(NULL, 3, &ids), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_ids_create(rt, 5, &ids), PFX_SUCCESS);
    const int32_t v[3] = { 4, -100, 7 };
    assert_int_equal(pfx_ids_write(ids, 2, 3, v), PFX_SUCCESS);
    assert_int_equal(ids->host[0], 0);
    assert_int_equal(ids->host[3], -100);
    int32_t back[5];
    assert_int_equal(clEnqueueReadBuffer(rt->queue, ids->mem, CL_TRUE, 0, sizeof(back), back, 0,
                                         NULL, NULL),
                     CL_SUCCESS);
    assert_memory_equal(back, ids->host, sizeof(back));
    assert_status_names(rt, pfx_ids_write(ids, 3, 3, v), PFX_ERROR_OUT_OF_RANGE, "past");
    assert_int_equal(pfx_ids_write(ids, 0, 1, NULL), PFX_ERROR_NULL_ARGUMENT);
    pfx_ids_destroy(&ids);
    assert_null(ids);
    pfx_ids_destroy(&ids);
    assert_int_equal(pfx_test_live_bytes(rt), live);
}

typedef struct emb_case {
    size_t B, N, V, C, P, pos0;
    bool half, wpe;
    uint64_t seed;
} emb_case;

static const emb_case emb_cases[] = {
    { 1, 1, 1, 1, 1, 0, false, true, 41 },
    { 2, 7, 101, 33, 64, 5, false, true, 42 },
    { 3, 43, 1003, 48, 50, 7, true, true, 43 },
    { 4, 5, 97, 257, 0, 0, true, false, 44 },
};

static void test_embedding(void **state)
{
    pfx_runtime *rt = *state;
    for (size_t i = 0; i < sizeof(emb_cases) / sizeof(emb_cases[0]); i++) {
        const emb_case *k = &emb_cases[i];
        ref_rng rng;
        ref_rng_seed(&rng, k->seed);
        const pfx_dtype dt = k->half ? PFX_DTYPE_F16 : PFX_DTYPE_F32;
        const size_t R = k->B * k->N, C = k->C;
        int32_t *hid = malloc(R * sizeof(int32_t));
        pfx_ids *ids = make_ids(rt, &rng, R, k->V, hid);
        hid[R - 1] = (int32_t)k->V - 1; /* the last row of the table too */
        assert_int_equal(pfx_ids_write(ids, R - 1, 1, &hid[R - 1]), PFX_SUCCESS);
        float *hte, *hpe = NULL, *hout;
        pfx_tensor *wte = mo_upload(rt, &rng, dt, k->V * C, 1.0f, &hte);
        pfx_tensor *wpe = k->wpe ? mo_upload(rt, &rng, dt, k->P * C, 1.0f, &hpe) : NULL;
        pfx_tensor *out = mo_upload(rt, &rng, PFX_DTYPE_F32, R * C + 4, 1.0f, &hout);
        double *want = malloc(R * C * sizeof(double));
        for (size_t b = 0; b < k->B; b++)
            for (size_t t = 0; t < k->N; t++)
                for (size_t c = 0; c < C; c++) {
                    const size_t r = b * k->N + t;
                    want[r * C + c] = (double)hte[(size_t)hid[r] * C + c] +
                                      (k->wpe ? (double)hpe[(k->pos0 + t) * C + c] : 0.0);
                }
        pfx_mat vpe = k->wpe ? PFX_MAT(wpe, k->P, C) : PFX_MAT(wte, 1, C);
        assert_int_equal(pfx_op_embedding(rt, ids, k->B, k->N, PFX_MAT(wte, k->V, C),
                                          k->wpe ? &vpe : NULL, k->pos0,
                                          pfx_mat_of(out, 2, R, C, C)),
                         PFX_SUCCESS);
        /* a gather and a float sum: exact up to one rounding */
        mo_expect_view("embedding", out, hout, 2, R, C, C, want, 1e-7);
        free(hid); free(hte); free(hpe); free(hout); free(want);
        pfx_ids_destroy(&ids);
        pfx_tensor_destroy(&wte); pfx_tensor_destroy(&wpe); pfx_tensor_destroy(&out);
    }
}

static void test_embedding_bad(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 45);
    int32_t hid[6];
    pfx_ids *ids = make_ids(rt, &rng, 6, 10, hid);
    pfx_tensor *wte = mo_random(rt, &rng, PFX_DTYPE_F32, 10 * 4);
    pfx_tensor *wpe = mo_random(rt, &rng, PFX_DTYPE_F32, 8 * 4);
    pfx_tensor *out = mo_random(rt, &rng, PFX_DTYPE_F32, 6 * 4);
    pfx_tensor *outh = mo_random(rt, &rng, PFX_DTYPE_F16, 6 * 4);
    const size_t live = pfx_test_live_bytes(rt);
    pfx_mat te = PFX_MAT(wte, 10, 4), pe = PFX_MAT(wpe, 8, 4), o = PFX_MAT(out, 6, 4);
    assert_int_equal(pfx_op_embedding(rt, ids, 2, 3, te, &pe, 5, o), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding(rt, ids, 2, 3, te, &pe, 6, o), PFX_ERROR_OUT_OF_RANGE,
                        "wpe");
    assert_status_names(rt, pfx_op_embedding(rt, NULL, 2, 3, te, &pe, 0, o),
                        PFX_ERROR_NULL_ARGUMENT, "ids");
    assert_status_names(rt, pfx_op_embedding(rt, ids, 3, 3, te, &pe, 0, PFX_MAT(out, 6, 4)),
                        PFX_ERROR_INVALID_SHAPE, "out");
    assert_status_names(rt, pfx_op_embedding(rt, ids, 2, 3, te, &pe, 0, PFX_MAT(outh, 6, 4)),
                        PFX_ERROR_DTYPE_MISMATCH, "out");
    assert_status_names(rt, pfx_op_embedding(rt, ids, 2, 3, PFX_MAT(wte, 10, 3), &pe, 0,
                                             PFX_MAT(out, 6, 3)),
                        PFX_ERROR_INVALID_SHAPE, "wpe");
    const int32_t bad[2] = { 10, -1 };
    assert_int_equal(pfx_ids_write(ids, 4, 1, &bad[0]), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding(rt, ids, 2, 3, te, NULL, 0, o), PFX_ERROR_OUT_OF_RANGE,
                        "ids[4]");
    assert_int_equal(pfx_ids_write(ids, 4, 1, &bad[1]), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding(rt, ids, 2, 3, te, NULL, 0, o), PFX_ERROR_OUT_OF_RANGE,
                        "-1");
    /* ids past their buffer */
    pfx_ids *few = NULL;
    assert_int_equal(pfx_ids_create(rt, 5, &few), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding(rt, few, 2, 3, te, NULL, 0, o), PFX_ERROR_OUT_OF_RANGE,
                        "past");
    pfx_ids_destroy(&few);
    assert_int_equal(pfx_test_live_bytes(rt), live);
    pfx_ids_destroy(&ids);
    pfx_tensor_destroy(&wte); pfx_tensor_destroy(&wpe); pfx_tensor_destroy(&out);
    pfx_tensor_destroy(&outh);
}

static void test_gather_last(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 46);
    const size_t B = 3, N = 7, C = 33;
    float *hh, *ho;
    pfx_tensor *hidden = mo_upload(rt, &rng, PFX_DTYPE_F32, B * N * C, 1.0f, &hh);
    pfx_tensor *out = mo_upload(rt, &rng, PFX_DTYPE_F32, B * (C + 2), 1.0f, &ho);
    const int32_t lengths[3] = { 7, 1, 4 };
    double want[3 * 33];
    for (size_t b = 0; b < B; b++)
        for (size_t c = 0; c < C; c++)
            want[b * C + c] = hh[(b * N + (size_t)lengths[b] - 1) * C + c];
    pfx_mat vh = PFX_MAT(hidden, B * N, C), vo = pfx_mat_of(out, 1, B, C, C + 2);
    assert_int_equal(pfx_op_gather_last(rt, vh, B, N, lengths, vo), PFX_SUCCESS);
    mo_expect_view("gather last", out, ho, 1, B, C, C + 2, want, 0.0);
    const int32_t bad0[3] = { 7, 0, 4 }, bad8[3] = { 8, 1, 1 };
    assert_status_names(rt, pfx_op_gather_last(rt, vh, B, N, bad0, vo), PFX_ERROR_OUT_OF_RANGE,
                        "lengths[1]");
    assert_status_names(rt, pfx_op_gather_last(rt, vh, B, N, bad8, vo), PFX_ERROR_OUT_OF_RANGE,
                        "lengths[0]");
    assert_status_names(rt, pfx_op_gather_last(rt, vh, B, N, NULL, vo), PFX_ERROR_NULL_ARGUMENT,
                        "lengths");
    assert_status_names(rt, pfx_op_gather_last(rt, vh, B, 6, lengths, vo), PFX_ERROR_INVALID_SHAPE,
                        "hidden");
    assert_status_names(rt, pfx_op_gather_last(rt, vh, B, N, lengths, pfx_mat_of(hidden, 0, 3, 33, 33)),
                        PFX_ERROR_ALIASING, "out");
    free(hh); free(ho);
    pfx_tensor_destroy(&hidden); pfx_tensor_destroy(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_embedding_bad),
        cmocka_unit_test(test_gather_last),
    };
    return cmocka_run_group_tests_name("embedding", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
