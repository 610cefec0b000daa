/*
 * Suite 'embedding': token id buffers, the embedding gather with GPT-2's
 * learned positions at an offset (src/ops/embedding.c) for float, half and
 * bfloat16 tables and Q8_0 token tables (positions float32 beside them), the gradients of both tables (added, deterministic), and the
 * gather of each item's last valid hidden row (src/ops/gather.c); ids and
 * lengths out of range, bad arguments.
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
    assert_int_equal(
        clEnqueueReadBuffer(rt->queue, ids->mem, CL_TRUE, 0, sizeof(back), back, 0, NULL, NULL),
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
    pfx_dtype storage;
    bool wpe;
    uint64_t seed;
} emb_case;

static const emb_case emb_cases[] = {
    { 1, 1, 1, 1, 1, 0, PFX_DTYPE_F32, true, 41 },
    { 2, 7, 101, 33, 64, 5, PFX_DTYPE_F32, true, 42 },
    { 3, 43, 1003, 48, 50, 7, PFX_DTYPE_F16, true, 43 },
    { 4, 5, 97, 257, 0, 0, PFX_DTYPE_F16, false, 44 },
    { 3, 11, 301, 40, 30, 9, PFX_DTYPE_BF16, true, 45 },
    { 2, 5, 97, 33, 0, 0, PFX_DTYPE_BF16, false, 46 },
    { 3, 9, 211, 64, 40, 3, PFX_DTYPE_Q8_0, true, 47 },
    { 2, 5, 97, 96, 0, 0, PFX_DTYPE_Q8_0, false, 48 },
};

static void test_embedding(void **state)
{
    pfx_runtime *rt = *state;
    for (size_t i = 0; i < sizeof(emb_cases) / sizeof(emb_cases[0]); i++) {
        const emb_case *k = &emb_cases[i];
        ref_rng rng;
        ref_rng_seed(&rng, k->seed);
        const pfx_dtype dt = k->storage;
        const size_t R = k->B * k->N, C = k->C;
        int32_t *hid = malloc(R * sizeof(int32_t));
        pfx_ids *ids = make_ids(rt, &rng, R, k->V, hid);
        hid[R - 1] = (int32_t)k->V - 1; /* the last row of the table too */
        assert_int_equal(pfx_ids_write(ids, R - 1, 1, &hid[R - 1]), PFX_SUCCESS);
        float *hte, *hpe = NULL, *hout;
        pfx_tensor *wte = mo_upload(rt, &rng, dt, k->V * C, 1.0f, &hte);
        const pfx_dtype pe_dt = dt == PFX_DTYPE_Q8_0 ? PFX_DTYPE_F32 : dt;
        pfx_tensor *wpe = k->wpe ? mo_upload(rt, &rng, pe_dt, k->P * C, 1.0f, &hpe) : NULL;
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
        free(hid);
        free(hte);
        free(hpe);
        free(hout);
        free(want);
        pfx_ids_destroy(&ids);
        pfx_tensor_destroy(&wte);
        pfx_tensor_destroy(&wpe);
        pfx_tensor_destroy(&out);
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
    assert_status_names(
        rt, pfx_op_embedding(rt, ids, 2, 3, PFX_MAT(wte, 10, 3), &pe, 0, PFX_MAT(out, 6, 3)),
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
    pfx_tensor_destroy(&wte);
    pfx_tensor_destroy(&wpe);
    pfx_tensor_destroy(&out);
    pfx_tensor_destroy(&outh);
}

typedef struct emb_grad_case {
    size_t B, N, V, C;
    uint64_t seed;
} emb_grad_case;

/* one row; a repeat-heavy few ids (long gathers); rows > 64; more columns
 * than a work-group over a large table */
static const emb_grad_case emb_grad_cases[] = {
    { 1, 1, 1, 1, 61 },   { 2, 7, 101, 33, 62 },   { 3, 43, 50, 70, 63 },
    { 1, 200, 3, 5, 64 }, { 4, 5, 1003, 257, 65 },
};

/* dwte += the scatter of dout's rows by id: dout a strided view at an offset,
 * dwte a strided view (ld > C) of a random table; ids hit the first and last
 * rows of the table, and repeat. A second run from the same table gives
 * bit-identical results. */
static void test_embedding_backward(void **state)
{
    pfx_runtime *rt = *state;
    for (size_t i = 0; i < sizeof(emb_grad_cases) / sizeof(emb_grad_cases[0]); i++) {
        const emb_grad_case *k = &emb_grad_cases[i];
        ref_rng rng;
        ref_rng_seed(&rng, k->seed);
        const size_t R = k->B * k->N, C = k->C, V = k->V;
        const size_t dld = C + 2, doff = 3, tld = C + 3, toff = 1;
        int32_t *hid = malloc(R * sizeof(int32_t));
        assert_non_null(hid);
        pfx_ids *ids = make_ids(rt, &rng, R, V, hid);
        hid[0] = 0;
        hid[R - 1] = (int32_t)V - 1;
        if (R > 2)
            hid[R / 2] = (int32_t)V - 1; /* a repeat of the last row */
        assert_int_equal(pfx_ids_write(ids, 0, R, hid), PFX_SUCCESS);
        const size_t nd = doff + (R - 1) * dld + C + 2, nt = toff + (V - 1) * tld + C + 2;
        float *hd, *ht;
        pfx_tensor *dout = mo_upload(rt, &rng, PFX_DTYPE_F32, nd, 1.0f, &hd);
        pfx_tensor *dwte = mo_upload(rt, &rng, PFX_DTYPE_F32, nt, 1.0f, &ht);
        double *want = mo_gather(ht, toff, V, C, tld);
        for (size_t r = 0; r < R; r++)
            for (size_t c = 0; c < C; c++)
                want[(size_t)hid[r] * C + c] += hd[doff + r * dld + c];
        const pfx_mat vd = pfx_mat_of(dout, doff, R, C, dld),
                      vt = pfx_mat_of(dwte, toff, V, C, tld);
        assert_int_equal(pfx_op_embedding_backward(rt, ids, k->B, k->N, vd, vt), PFX_SUCCESS);
        mo_expect_view("embedding backward", dwte, ht, toff, V, C, V > 1 ? tld : C, want,
                       TOL_OPS_F32);
        /* the rows the ids touch on their own (the untouched ones dilute the
         * relative error over the whole table) */
        double *rows_want = malloc(R * C * sizeof(double));
        float *rows_got = malloc(R * C * sizeof(float)), *got = mo_read(dwte);
        assert_true(rows_want && rows_got);
        for (size_t r = 0; r < R; r++)
            for (size_t c = 0; c < C; c++) {
                rows_want[r * C + c] = want[(size_t)hid[r] * C + c];
                rows_got[r * C + c] = got[toff + (size_t)hid[r] * tld + c];
            }
        mo_expect_close("embedding backward rows", rows_want, rows_got, R * C, TOL_OPS_F32);
        float *after = mo_read(dout);
        assert_memory_equal(after, hd, nd * sizeof(float));
        /* deterministic: again from the same table */
        assert_int_equal(pfx_tensor_write(dwte, 0, nt, ht), PFX_SUCCESS);
        assert_int_equal(pfx_op_embedding_backward(rt, ids, k->B, k->N, vd, vt), PFX_SUCCESS);
        float *again = mo_read(dwte);
        assert_memory_equal(again, got, nt * sizeof(float));
        free(hid);
        free(hd);
        free(ht);
        free(want);
        free(rows_want);
        free(rows_got);
        free(got);
        free(after);
        free(again);
        pfx_ids_destroy(&ids);
        pfx_tensor_destroy(&dout);
        pfx_tensor_destroy(&dwte);
    }
}

typedef struct pos_grad_case {
    size_t B, N, P, C, pos0;
    uint64_t seed;
} pos_grad_case;

/* one row; batch > 1 at pos0 > 0; tokens > 64 up to the table's last row;
 * more columns than a work-group, up to the last row */
static const pos_grad_case pos_grad_cases[] = {
    { 1, 1, 1, 1, 0, 71 },
    { 3, 7, 20, 33, 5, 72 },
    { 2, 70, 80, 3, 10, 73 },
    { 4, 5, 9, 257, 4, 74 },
};

/* dwpe[pos0 + t] += sum_b dout[b * N + t]: strided views, a random table,
 * deterministic. */
static void test_position_backward(void **state)
{
    pfx_runtime *rt = *state;
    for (size_t i = 0; i < sizeof(pos_grad_cases) / sizeof(pos_grad_cases[0]); i++) {
        const pos_grad_case *k = &pos_grad_cases[i];
        ref_rng rng;
        ref_rng_seed(&rng, k->seed);
        const size_t R = k->B * k->N, C = k->C, P = k->P;
        const size_t dld = C + 4, doff = 1, pld = C + 1, poff = 2;
        const size_t nd = doff + (R - 1) * dld + C + 1, np = poff + (P - 1) * pld + C + 3;
        float *hd, *hp;
        pfx_tensor *dout = mo_upload(rt, &rng, PFX_DTYPE_F32, nd, 1.0f, &hd);
        pfx_tensor *dwpe = mo_upload(rt, &rng, PFX_DTYPE_F32, np, 1.0f, &hp);
        double *want = mo_gather(hp, poff, P, C, pld);
        for (size_t b = 0; b < k->B; b++)
            for (size_t t = 0; t < k->N; t++)
                for (size_t c = 0; c < C; c++)
                    want[(k->pos0 + t) * C + c] += hd[doff + (b * k->N + t) * dld + c];
        const pfx_mat vd = pfx_mat_of(dout, doff, R, C, dld),
                      vp = pfx_mat_of(dwpe, poff, P, C, pld);
        assert_int_equal(pfx_op_position_backward(rt, k->B, k->N, vd, vp, k->pos0), PFX_SUCCESS);
        mo_expect_view("position backward", dwpe, hp, poff, P, C, P > 1 ? pld : C, want,
                       TOL_OPS_F32);
        /* the positions written, on their own */
        float *got = mo_read(dwpe);
        float *pos_got = mo_gather_f(got, poff + k->pos0 * pld, k->N, C, pld);
        mo_expect_close("position backward rows", want + k->pos0 * C, pos_got, k->N * C,
                        TOL_OPS_F32);
        assert_int_equal(pfx_tensor_write(dwpe, 0, np, hp), PFX_SUCCESS);
        assert_int_equal(pfx_op_position_backward(rt, k->B, k->N, vd, vp, k->pos0), PFX_SUCCESS);
        float *again = mo_read(dwpe);
        assert_memory_equal(again, got, np * sizeof(float));
        free(hd);
        free(hp);
        free(want);
        free(got);
        free(pos_got);
        free(again);
        pfx_tensor_destroy(&dout);
        pfx_tensor_destroy(&dwpe);
    }
}

/* Bad arguments of both gradients: each status, the tables untouched. */
static void test_embedding_backward_bad(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 75);
    int32_t hid[6];
    pfx_ids *ids = make_ids(rt, &rng, 6, 10, hid);
    pfx_tensor *wte = mo_random(rt, &rng, PFX_DTYPE_F32, 10 * 4);
    pfx_tensor *wpe = mo_random(rt, &rng, PFX_DTYPE_F32, 8 * 4);
    pfx_tensor *d = mo_random(rt, &rng, PFX_DTYPE_F32, 6 * 4);
    pfx_tensor *dh = mo_random(rt, &rng, PFX_DTYPE_F16, 10 * 4);
    pfx_runtime *rt2 = pfx_test_runtime();
    pfx_tensor *other = mo_random(rt2, &rng, PFX_DTYPE_F32, 10 * 4);
    const pfx_mat te = PFX_MAT(wte, 10, 4), pe = PFX_MAT(wpe, 8, 4), o = PFX_MAT(d, 6, 4);
    assert_int_equal(pfx_op_embedding_backward(rt, ids, 2, 3, o, te), PFX_SUCCESS);
    assert_int_equal(pfx_op_position_backward(rt, 2, 3, o, pe, 5), PFX_SUCCESS);
    float *hte = mo_read(wte), *hpe = mo_read(wpe), *hd = mo_read(d);
    const size_t live = pfx_test_live_bytes(rt);

    assert_status_names(NULL, pfx_op_embedding_backward(NULL, ids, 2, 3, o, te),
                        PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(rt, pfx_op_embedding_backward(rt, NULL, 2, 3, o, te),
                        PFX_ERROR_NULL_ARGUMENT, "ids");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, PFX_MAT(NULL, 6, 4), te),
                        PFX_ERROR_NULL_ARGUMENT, "dout");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, o, PFX_MAT(NULL, 10, 4)),
                        PFX_ERROR_NULL_ARGUMENT, "dwte");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, PFX_MAT(dh, 6, 4), te),
                        PFX_ERROR_DTYPE_MISMATCH, "dout");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, o, PFX_MAT(dh, 10, 4)),
                        PFX_ERROR_DTYPE_MISMATCH, "dwte");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, o, PFX_MAT(other, 10, 4)),
                        PFX_ERROR_RUNTIME_MISMATCH, "dwte");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 0, 3, o, te),
                        PFX_ERROR_INVALID_SHAPE, "batch");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 0, o, te),
                        PFX_ERROR_INVALID_SHAPE, "tokens");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 1, 3, o, te),
                        PFX_ERROR_INVALID_SHAPE, "dout");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, PFX_MAT(d, 6, 3), te),
                        PFX_ERROR_INVALID_SHAPE, "dout");
    assert_status_names(rt,
                        pfx_op_embedding_backward(rt, ids, 2, 3, o, pfx_mat_of(wte, 1, 10, 4, 4)),
                        PFX_ERROR_OUT_OF_RANGE, "dwte");
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, o, pfx_mat_of(d, 0, 6, 4, 4)),
                        PFX_ERROR_ALIASING, "dwte");
    /* ids out of the table: past its last row, negative, the ignored label */
    const int32_t bad[3] = { 10, -1, PFX_LABEL_IGNORE };
    assert_int_equal(pfx_ids_write(ids, 4, 1, &bad[0]), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, o, te), PFX_ERROR_OUT_OF_RANGE,
                        "ids[4]");
    /* one row fewer in the table: ids hitting its last row fail */
    assert_int_equal(pfx_ids_write(ids, 4, 1, &hid[4]), PFX_SUCCESS);
    const int32_t nine = 9;
    assert_int_equal(pfx_ids_write(ids, 2, 1, &nine), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, o, PFX_MAT(wte, 9, 4)),
                        PFX_ERROR_OUT_OF_RANGE, "ids[2]");
    assert_int_equal(pfx_ids_write(ids, 2, 1, &hid[2]), PFX_SUCCESS);
    assert_int_equal(pfx_ids_write(ids, 0, 1, &bad[1]), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, o, te), PFX_ERROR_OUT_OF_RANGE,
                        "-1");
    assert_int_equal(pfx_ids_write(ids, 5, 1, &bad[2]), PFX_SUCCESS);
    assert_int_equal(pfx_ids_write(ids, 0, 1, &hid[0]), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding_backward(rt, ids, 2, 3, o, te), PFX_ERROR_OUT_OF_RANGE,
                        "-100");
    pfx_ids *few = NULL;
    assert_int_equal(pfx_ids_create(rt, 5, &few), PFX_SUCCESS);
    assert_status_names(rt, pfx_op_embedding_backward(rt, few, 2, 3, o, te), PFX_ERROR_OUT_OF_RANGE,
                        "past");
    pfx_ids_destroy(&few);

    assert_status_names(NULL, pfx_op_position_backward(NULL, 2, 3, o, pe, 0),
                        PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, PFX_MAT(NULL, 6, 4), pe, 0),
                        PFX_ERROR_NULL_ARGUMENT, "dout");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, PFX_MAT(NULL, 8, 4), 0),
                        PFX_ERROR_NULL_ARGUMENT, "dwpe");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, PFX_MAT(dh, 8, 4), 0),
                        PFX_ERROR_DTYPE_MISMATCH, "dwpe");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, PFX_MAT(dh, 6, 4), pe, 0),
                        PFX_ERROR_DTYPE_MISMATCH, "dout");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, PFX_MAT(other, 8, 4), 0),
                        PFX_ERROR_RUNTIME_MISMATCH, "dwpe");
    assert_status_names(rt, pfx_op_position_backward(rt, 0, 3, o, pe, 0), PFX_ERROR_INVALID_SHAPE,
                        "batch");
    assert_status_names(rt, pfx_op_position_backward(rt, 3, 3, o, pe, 0), PFX_ERROR_INVALID_SHAPE,
                        "dout");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, PFX_MAT(wpe, 8, 3), 0),
                        PFX_ERROR_INVALID_SHAPE, "dout");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, pfx_mat_of(wpe, 2, 8, 4, 4), 0),
                        PFX_ERROR_OUT_OF_RANGE, "dwpe");
    /* positions past the table: pos0 + tokens - 1 = 8, and pos0 past it */
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, pe, 6), PFX_ERROR_OUT_OF_RANGE,
                        "dwpe");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, pe, 9), PFX_ERROR_OUT_OF_RANGE,
                        "dwpe");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, pe, SIZE_MAX),
                        PFX_ERROR_OUT_OF_RANGE, "dwpe");
    assert_status_names(rt, pfx_op_position_backward(rt, 2, 3, o, pfx_mat_of(d, 0, 6, 4, 4), 0),
                        PFX_ERROR_ALIASING, "dwpe");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    float *ate = mo_read(wte), *ape = mo_read(wpe), *ad = mo_read(d);
    assert_memory_equal(ate, hte, 10 * 4 * sizeof(float));
    assert_memory_equal(ape, hpe, 8 * 4 * sizeof(float));
    assert_memory_equal(ad, hd, 6 * 4 * sizeof(float));
    free(ate);
    free(ape);
    free(ad);
    free(hte);
    free(hpe);
    free(hd);
    pfx_ids_destroy(&ids);
    pfx_tensor_destroy(&wte);
    pfx_tensor_destroy(&wpe);
    pfx_tensor_destroy(&d);
    pfx_tensor_destroy(&dh);
    pfx_tensor_destroy(&other);
    pfx_runtime_destroy(&rt2);
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
    assert_status_names(rt,
                        pfx_op_gather_last(rt, vh, B, N, lengths, pfx_mat_of(hidden, 0, 3, 33, 33)),
                        PFX_ERROR_ALIASING, "out");
    free(hh);
    free(ho);
    pfx_tensor_destroy(&hidden);
    pfx_tensor_destroy(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_embedding_bad),
        cmocka_unit_test(test_embedding_backward),
        cmocka_unit_test(test_position_backward),
        cmocka_unit_test(test_embedding_backward_bad),
        cmocka_unit_test(test_gather_last),
    };
    return cmocka_run_group_tests_name("embedding", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
