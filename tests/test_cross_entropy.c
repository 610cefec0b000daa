/*
 * Suite 'cross_entropy': the fused causal-LM loss over chunks of logit rows
 * (src/ops/cross_entropy.c) against the double reference: per-row losses and
 * dlogits = (softmax - onehot) / count in place, labels -100 ignored, a batch
 * processed in chunks equals the whole, large logits (max subtraction),
 * bit-identical reruns; labels out of range and bad arguments.
 */
#include "model_ops_test.h"
#include "reference/model_ops_ref.h"

typedef struct ce_case {
    size_t rows, vocab, chunk, ld;
    float amp; /* logits uniform in [-amp, amp] */
    uint64_t seed;
} ce_case;

static const ce_case ce_cases[] = {
    { 1, 1, 1, 1, 1.0f, 51 },
    { 7, 1003, 3, 1003, 4.0f, 52 },
    { 129, 257, 129, 260, 2.0f, 53 },
    { 9, 33, 4, 33, 60.0f, 54 }, /* exp of unshifted logits would overflow */
};

static void run_case(pfx_runtime *rt, const ce_case *k)
{
    ref_rng rng;
    ref_rng_seed(&rng, k->seed);
    const size_t R = k->rows, V = k->vocab;
    int32_t *labels = malloc(R * sizeof(int32_t));
    size_t count = 0;
    for (size_t r = 0; r < R; r++) {
        labels[r] = (R > 1 && r % 3 == 1) ? PFX_LABEL_IGNORE : (int32_t)ref_rng_index(&rng, V);
        count += labels[r] != PFX_LABEL_IGNORE;
    }
    pfx_ids *ids = NULL;
    assert_int_equal(pfx_ids_create(rt, R, &ids), PFX_SUCCESS);
    assert_int_equal(pfx_ids_write(ids, 0, R, labels), PFX_SUCCESS);
    /* the whole batch's logits, as the host would get them chunk by chunk */
    float *all = malloc(R * V * sizeof(float));
    ref_rng_fill(&rng, all, R * V, -k->amp, k->amp);
    double *want_dz = malloc(R * V * sizeof(double)), *want_loss = malloc(R * sizeof(double));
    double total = 0.0;
    for (size_t r = 0; r < R; r++) {
        double *z = mo_f2d(all + r * V, V);
        if (labels[r] == PFX_LABEL_IGNORE) {
            want_loss[r] = 0.0;
            memset(want_dz + r * V, 0, V * sizeof(double));
        } else {
            want_loss[r] =
                ref_cross_entropy_row(V, z, labels[r], 1.0 / (double)count, want_dz + r * V);
        }
        total += want_loss[r];
        free(z);
    }
    /* one chunk buffer [chunk, ld], reused for each chunk */
    const size_t n = (k->chunk - 1) * k->ld + V;
    float *hc, *hl;
    pfx_tensor *chunk = mo_upload(rt, &rng, PFX_DTYPE_F32, n, 1.0f, &hc);
    pfx_tensor *loss = mo_upload(rt, &rng, PFX_DTYPE_F32, R, 1.0f, &hl);
    float *got_dz = malloc(R * V * sizeof(float));
    for (size_t r0 = 0; r0 < R; r0 += k->chunk) {
        const size_t rows = R - r0 < k->chunk ? R - r0 : k->chunk;
        for (size_t r = 0; r < rows; r++)
            assert_int_equal(pfx_tensor_write(chunk, r * k->ld, V, all + (r0 + r) * V),
                             PFX_SUCCESS);
        pfx_mat z = pfx_mat_of(chunk, 0, rows, V, k->ld), l = PFX_VEC(loss, r0, rows);
        assert_int_equal(pfx_op_cross_entropy(rt, z, ids, r0, count, true, &l), PFX_SUCCESS);
        for (size_t r = 0; r < rows; r++)
            assert_int_equal(pfx_tensor_read(chunk, r * k->ld, V, got_dz + (r0 + r) * V),
                             PFX_SUCCESS);
    }
    float *got_loss = mo_read(loss);
    mo_expect_close("row loss", want_loss, got_loss, R, TOL_OPS_F32);
    mo_expect_close("dlogits", want_dz, got_dz, R * V, TOL_OPS_F32);
    double sum = 0.0;
    for (size_t r = 0; r < R; r++)
        sum += got_loss[r];
    if (!(fabs(sum - total) <= TOL_OPS_F32 * fabs(total) + 1e-12))
        fail_msg("loss sum %.9g, reference %.9g", sum, total);
    /* without grad the logits stay as they are */
    assert_int_equal(pfx_tensor_write(chunk, 0, V, all), PFX_SUCCESS);
    pfx_mat l0 = PFX_VEC(loss, 0, 1);
    assert_int_equal(pfx_op_cross_entropy(rt, PFX_MAT(chunk, 1, V), ids, 0, count, false, &l0),
                     PFX_SUCCESS);
    float *row = malloc(V * sizeof(float));
    assert_int_equal(pfx_tensor_read(chunk, 0, V, row), PFX_SUCCESS);
    assert_memory_equal(row, all, V * sizeof(float));
    free(row);
    free(labels);
    free(all);
    free(want_dz);
    free(want_loss);
    free(hc);
    free(hl);
    free(got_dz);
    free(got_loss);
    pfx_ids_destroy(&ids);
    pfx_tensor_destroy(&chunk);
    pfx_tensor_destroy(&loss);
}

static void test_cross_entropy(void **state)
{
    for (size_t i = 0; i < sizeof(ce_cases) / sizeof(ce_cases[0]); i++)
        run_case(*state, &ce_cases[i]);
}

static void test_labels_shift(void **state)
{
    (void)state;
    const int32_t labels[2 * 4] = { 5, 6, -100, 7, -100, 1, 2, -100 };
    int32_t shifted[8];
    assert_int_equal(pfx_labels_shift(labels, 2, 4, shifted), 4);
    const int32_t want[8] = { 6, -100, 7, -100, 1, 2, -100, -100 };
    assert_memory_equal(shifted, want, sizeof(want));
}

static void test_deterministic(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 55);
    const size_t R = 5, V = 50003;
    int32_t labels[5] = { 0, 50002, 17, -100, 9999 };
    pfx_ids *ids = NULL;
    assert_int_equal(pfx_ids_create(rt, R, &ids), PFX_SUCCESS);
    assert_int_equal(pfx_ids_write(ids, 0, R, labels), PFX_SUCCESS);
    float *hz, *hl;
    pfx_tensor *z = mo_upload(rt, &rng, PFX_DTYPE_F32, R * V, 8.0f, &hz);
    pfx_tensor *loss = mo_upload(rt, &rng, PFX_DTYPE_F32, R, 1.0f, &hl);
    pfx_mat l = PFX_VEC(loss, 0, R);
    assert_int_equal(pfx_op_cross_entropy(rt, PFX_MAT(z, R, V), ids, 0, 4, true, &l), PFX_SUCCESS);
    float *d1 = mo_read(z), *l1 = mo_read(loss);
    assert_int_equal(pfx_tensor_write(z, 0, R * V, hz), PFX_SUCCESS);
    assert_int_equal(pfx_op_cross_entropy(rt, PFX_MAT(z, R, V), ids, 0, 4, true, &l), PFX_SUCCESS);
    float *d2 = mo_read(z), *l2 = mo_read(loss);
    assert_memory_equal(d1, d2, R * V * sizeof(float));
    assert_memory_equal(l1, l2, R * sizeof(float));
    free(d1);
    free(d2);
    free(l1);
    free(l2);
    free(hz);
    free(hl);
    pfx_ids_destroy(&ids);
    pfx_tensor_destroy(&z);
    pfx_tensor_destroy(&loss);
}

static void test_bad_arguments(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 56);
    pfx_tensor *z = mo_random(rt, &rng, PFX_DTYPE_F32, 4 * 10);
    pfx_tensor *zh = mo_random(rt, &rng, PFX_DTYPE_F16, 4 * 10);
    pfx_tensor *loss = mo_random(rt, &rng, PFX_DTYPE_F32, 4);
    pfx_ids *ids = NULL;
    assert_int_equal(pfx_ids_create(rt, 6, &ids), PFX_SUCCESS);
    const int32_t labels[6] = { 1, -100, 9, 0, 10, -5 };
    assert_int_equal(pfx_ids_write(ids, 0, 6, labels), PFX_SUCCESS);
    const size_t live = pfx_test_live_bytes(rt);
    pfx_mat vz = PFX_MAT(z, 4, 10), vl = PFX_VEC(loss, 0, 4);
    assert_int_equal(pfx_op_cross_entropy(rt, vz, ids, 0, 3, true, &vl), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_cross_entropy(rt, vz, ids, 1, 3, true, &vl),
                        PFX_ERROR_OUT_OF_RANGE, "labels[4] = 10");
    assert_status_names(rt, pfx_op_cross_entropy(rt, PFX_MAT(z, 2, 10), ids, 4, 3, true, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "labels[4]");
    assert_status_names(rt, pfx_op_cross_entropy(rt, PFX_MAT(z, 3, 10), ids, 4, 3, true, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "past");
    assert_status_names(rt, pfx_op_cross_entropy(rt, vz, ids, 0, 2, true, &vl),
                        PFX_ERROR_INVALID_ARGUMENT, "count");
    assert_status_names(rt, pfx_op_cross_entropy(rt, vz, ids, 0, 0, true, &vl),
                        PFX_ERROR_INVALID_ARGUMENT, "count");
    assert_status_names(rt, pfx_op_cross_entropy(rt, vz, NULL, 0, 3, true, &vl),
                        PFX_ERROR_NULL_ARGUMENT, "labels");
    assert_status_names(rt, pfx_op_cross_entropy(rt, PFX_MAT(zh, 4, 10), ids, 0, 3, true, &vl),
                        PFX_ERROR_DTYPE_MISMATCH, "logits");
    pfx_mat short_loss = PFX_VEC(loss, 0, 3), inside = PFX_VEC(z, 35, 4);
    assert_status_names(rt, pfx_op_cross_entropy(rt, vz, ids, 0, 3, true, &short_loss),
                        PFX_ERROR_INVALID_SHAPE, "row_loss");
    assert_status_names(rt, pfx_op_cross_entropy(rt, vz, ids, 0, 3, true, &inside),
                        PFX_ERROR_ALIASING, "row_loss");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    pfx_ids_destroy(&ids);
    pfx_tensor_destroy(&z);
    pfx_tensor_destroy(&zh);
    pfx_tensor_destroy(&loss);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_labels_shift),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests_name("cross_entropy", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
