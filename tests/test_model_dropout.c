/* Training dropout (model.h, pfx_model_dropout; docs/design.md "Dropout"):
 * the elementwise op's masks against the C reference of the generator, the
 * kept share and the 1/(1-p) scaling, a batch item's mask keyed by its
 * place in the whole micro-batch; on a tiny GPT-2 folder, p = 0 gives the
 * bits of no dropout, the gradients under a fixed mask match finite
 * differences of the loss under that mask, a recomputed block draws the
 * same mask, a data-parallel split of the batch draws the whole batch's
 * masks, evaluation never drops, and the config's probabilities are read. */
#include <math.h>

#include "dropout.h"
#include "model_folder.h"
#include "pfx_test.h"
#include "reference/dropout_ref.h"
#include "reference/random.h"
#include "tolerances.h"

#define ROWS 256
#define COLS 250

/* The op on x = 1 + r/ROWS: every element its reference factor times x,
 * bit for bit; the kept share within 4 standard deviations of 1 - p. */
static void test_op_masks(void **state)
{
    pfx_runtime *rt = *state;
    const size_t n = (size_t)ROWS * COLS, shape[2] = { ROWS, COLS };
    float *host = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    assert_true(host && got);
    for (size_t e = 0; e < n; e++)
        host[e] = 1.0f + (float)(e / COLS) / ROWS;
    pfx_tensor *x = NULL, *base = NULL, *out = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &x), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &base), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &out), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(x, 0, n, host), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(base, 0.5f), PFX_SUCCESS);
    const float ps[3] = { 0.1f, 0.25f, 0.6f };
    for (int k = 0; k < 3; k++) {
        const float p = ps[k];
        const pfx_dropout_stream s = { .seed = 0xfeedbeef12345ull + (uint64_t)k,
                                       .step = 3,
                                       .tag = pfx_dropout_tag(1, 2, PFX_DROP_MLP_OUT),
                                       .first_item = 4 };
        const size_t tokens = 16; /* rows are items of 16 tokens: row r is stream row 64 + r */
        const pfx_mat bm = PFX_MAT(base, ROWS, COLS);
        assert_int_equal(pfx_op_dropout(rt, p, &s, tokens, PFX_MAT(x, ROWS, COLS), &bm,
                                        PFX_MAT(out, ROWS, COLS)),
                         PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(out, 0, n, got), PFX_SUCCESS);
        const float scale = (float)(1.0 / (1.0 - (double)p));
        size_t kept = 0;
        for (size_t e = 0; e < n; e++) {
            const double f =
                ref_dropout_factor(&s, p, (uint32_t)(4 * tokens + e / COLS), (uint32_t)(e % COLS));
            const float want = 0.5f + host[e] * (float)f;
            if (got[e] != want)
                fail_msg("p %g: element %zu is %.9g, the reference mask gives %.9g", (double)p, e,
                         (double)got[e], (double)want);
            assert_true(f == 0.0 || f == (double)scale);
            kept += f != 0.0;
        }
        const double share = (double)kept / (double)n,
                     sd = sqrt((double)p * (1.0 - (double)p) / (double)n);
        if (fabs(share - (1.0 - (double)p)) > 4.0 * sd)
            fail_msg("p %g: kept share %.5f, expected %.5f +- %.5f", (double)p, share,
                     1.0 - (double)p, 4.0 * sd);
        /* the mean of the dropped x equals the mean of x within sampling error */
        double sum = 0.0, sum_x = 0.0;
        for (size_t e = 0; e < n; e++) {
            sum += got[e] - 0.5f;
            sum_x += host[e];
        }
        assert_true(fabs(sum / sum_x - 1.0) < 5.0 * sqrt((double)p / (1.0 - (double)p) / n));
    }
    /* bad arguments, nothing enqueued */
    const pfx_dropout_stream s = { 0 };
    assert_status_names(
        rt,
        pfx_op_dropout(rt, 1.0f, &s, 16, PFX_MAT(x, ROWS, COLS), NULL, PFX_MAT(out, ROWS, COLS)),
        PFX_ERROR_INVALID_ARGUMENT, "p (1)");
    assert_status_names(
        rt, pfx_op_dropout(rt, 0.5f, &s, 7, PFX_MAT(x, ROWS, COLS), NULL, PFX_MAT(out, ROWS, COLS)),
        PFX_ERROR_INVALID_SHAPE, "items of 7 tokens");
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&base);
    pfx_tensor_destroy(&out);
    free(host);
    free(got);
}

/* ---- a tiny GPT-2 ---- */

#define B 2
#define N 9

typedef struct fixture {
    pfx_runtime *rt;
    char *dir;
    pfx_model *model;
    pfx_context *ctx, *ctx_recompute;
    size_t count;
    pfx_tensor *grad[64];
    int32_t ids[B * N];
} fixture;

static void fixture_make(pfx_runtime *rt, fixture *f, const char *extra_json)
{
    memset(f, 0, sizeof(*f));
    f->rt = rt;
    ref_model_config c = { 0 };
    c.family = REF_MODEL_GPT2;
    c.layers = 2;
    c.hidden = 24;
    c.heads = 3;
    c.kv_heads = 3;
    c.head_dim = 8;
    c.inner = 40;
    c.vocab = 31;
    c.max_positions = 16;
    c.eps = 1e-5;
    c.act = REF_ACT_GELU_TANH;
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 77);
    snprintf(m.extra_json, sizeof(m.extra_json), "%s", extra_json);
    f->dir = tf_tempdir("dropout");
    assert_int_equal(tf_write(&m, f->dir, 1), 0);
    tf_model_free(&m);
    pfx_context_params cp = { .max_batch = B, .max_tokens = N };
    assert_int_equal(pfx_model_load(rt, f->dir, NULL, &f->model), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(f->model, &cp, &f->ctx), PFX_SUCCESS);
    cp.recompute = true;
    assert_int_equal(pfx_context_create(f->model, &cp, &f->ctx_recompute), PFX_SUCCESS);
    f->count = pfx_model_weight_count(f->model);
    assert_true(f->count <= 64);
    for (size_t i = 0; i < f->count; i++) {
        pfx_model_weight_info info;
        assert_int_equal(pfx_model_get_weight(f->model, i, &info), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, info.ndim, info.shape, &f->grad[i]),
                         PFX_SUCCESS);
    }
    ref_rng rng;
    ref_rng_seed(&rng, 5);
    for (size_t r = 0; r < B * N; r++)
        f->ids[r] = (int32_t)ref_rng_index(&rng, c.vocab);
}

static void fixture_free(fixture *f)
{
    for (size_t i = 0; i < f->count; i++)
        pfx_tensor_destroy(&f->grad[i]);
    pfx_context_destroy(&f->ctx);
    pfx_context_destroy(&f->ctx_recompute);
    pfx_model_destroy(&f->model);
    tf_rmdir(f->dir);
    free(f->dir);
}

/* Loss (and, with grads, every weight's gradient) of items [b0, b0 + nb). */
static double run(fixture *f, pfx_context *ctx, const pfx_model_dropout *d, bool grads, size_t b0,
                  size_t nb)
{
    pfx_model_batch batch = { nb, N, f->ids + b0 * N, NULL, NULL };
    pfx_model_grads g = { .weights = grads ? f->grad : NULL, .dropout = d };
    double loss = NAN;
    if (pfx_model_backward(ctx, &batch, NULL, &g, &loss) != PFX_SUCCESS)
        fail_msg("backward: %s", pfx_last_error(f->rt));
    return loss;
}

static float *read_grads(const fixture *f, size_t *total)
{
    size_t n = 0;
    for (size_t i = 0; i < f->count; i++)
        n += f->grad[i]->numel;
    float *all = malloc(n * sizeof(float)), *at = all;
    assert_non_null(all);
    for (size_t i = 0; i < f->count; i++) {
        assert_int_equal(pfx_tensor_read(f->grad[i], 0, f->grad[i]->numel, at), PFX_SUCCESS);
        at += f->grad[i]->numel;
    }
    *total = n;
    return all;
}

static const pfx_model_dropout drop_all = {
    .embd = 0.2f, .attn = 0.3f, .resid = 0.25f, .seed = 42, .step = 5, .micro_batch = 1
};

/* p = 0 gives the bits of no dropout (loss and every gradient), with and
 * without recompute; p > 0 changes them; the recomputed blocks draw the
 * forward's masks (the same bits as keeping the activations). */
static void test_zero_and_recompute(void **state)
{
    pfx_runtime *rt = *state;
    fixture f;
    fixture_make(rt, &f, ", \"attn_pdrop\": 0.0, \"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0");
    const pfx_model_dropout zero = { .seed = 42, .step = 5 };
    size_t n = 0;
    const double l_none = run(&f, f.ctx, NULL, true, 0, B);
    float *g_none = read_grads(&f, &n);
    const double l_zero = run(&f, f.ctx, &zero, true, 0, B);
    float *g_zero = read_grads(&f, &n);
    assert_true(l_none == l_zero);
    assert_memory_equal(g_none, g_zero, n * sizeof(float));
    const double l_drop = run(&f, f.ctx, &drop_all, true, 0, B);
    float *g_drop = read_grads(&f, &n);
    assert_true(l_drop != l_none);
    const double l_rec = run(&f, f.ctx_recompute, &drop_all, true, 0, B);
    float *g_rec = read_grads(&f, &n);
    assert_true(l_rec == l_drop);
    assert_memory_equal(g_rec, g_drop, n * sizeof(float));
    /* evaluation never drops: the loss call after a dropout pass is the undropped loss */
    pfx_model_batch batch = { B, N, f.ids, NULL, NULL };
    double l_eval = NAN;
    assert_int_equal(pfx_model_loss(f.ctx, &batch, NULL, &l_eval), PFX_SUCCESS);
    assert_true(fabs(l_eval - l_none) <= TOL_DROPOUT_SPLIT * fabs(l_none));
    /* another step draws other masks */
    pfx_model_dropout next = drop_all;
    next.step++;
    assert_true(run(&f, f.ctx, &next, false, 0, B) != l_drop);
    /* a bad probability, a micro-batch past the tag's range */
    pfx_model_dropout bad = drop_all;
    bad.attn = 1.0f;
    pfx_model_grads g = { .dropout = &bad };
    assert_status_names(rt, pfx_model_backward(f.ctx, &batch, NULL, &g, NULL),
                        PFX_ERROR_INVALID_ARGUMENT, "grads.dropout.attn");
    bad = drop_all;
    bad.micro_batch = 70000;
    assert_status_names(rt, pfx_model_backward(f.ctx, &batch, NULL, &g, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "micro_batch");
    free(g_none);
    free(g_zero);
    free(g_drop);
    free(g_rec);
    fixture_free(&f);
}

/* Each item's masks are keyed by its place in the micro-batch: the items
 * run one at a time (first_item 0, then 1) give the losses whose mean is the
 * whole batch's. */
static void test_data_parallel_masks(void **state)
{
    pfx_runtime *rt = *state;
    fixture f;
    fixture_make(rt, &f, "");
    const double whole = run(&f, f.ctx, &drop_all, false, 0, B);
    pfx_model_dropout d = drop_all;
    const double l0 = run(&f, f.ctx, &d, false, 0, 1);
    d.first_item = 1;
    const double l1 = run(&f, f.ctx, &d, false, 1, 1);
    if (!(fabs((l0 + l1) / 2 - whole) <= TOL_DROPOUT_SPLIT * fabs(whole)))
        fail_msg("items alone %.9g, %.9g (mean %.9g); the batch %.9g", l0, l1, (l0 + l1) / 2,
                 whole);
    d.first_item = 0; /* item 1 with item 0's masks: another loss */
    assert_true(run(&f, f.ctx, &d, false, 1, 1) != l1);
    /* the config's probabilities: GPT-2's transformers defaults when absent */
    pfx_model_shape s;
    assert_int_equal(pfx_model_get_shape(f.model, &s), PFX_SUCCESS);
    assert_true(s.embd_pdrop == 0.1f && s.attn_pdrop == 0.1f && s.resid_pdrop == 0.1f);
    fixture_free(&f);
}

/* The gradient of the loss under a fixed mask against central differences
 * of that loss (float32: the elements of largest gradient of a few
 * weights, step 1e-2). */
static void test_finite_differences(void **state)
{
    pfx_runtime *rt = *state;
    fixture f;
    fixture_make(rt, &f, "");
    run(&f, f.ctx, &drop_all, true, 0, B);
    size_t checked = 0;
    for (size_t i = 0; i < f.count; i++) {
        pfx_model_weight_info info;
        assert_int_equal(pfx_model_get_weight(f.model, i, &info), PFX_SUCCESS);
        if (!strstr(info.name, "wte") && !strstr(info.name, "c_attn.weight") &&
            !strstr(info.name, "mlp.c_proj.weight") && !strstr(info.name, "attn.c_proj.bias"))
            continue;
        float *g = malloc(info.numel * sizeof(float)), *w = malloc(info.numel * sizeof(float));
        assert_true(g && w);
        assert_int_equal(pfx_tensor_read(f.grad[i], 0, info.numel, g), PFX_SUCCESS);
        pfx_tensor *wt = NULL;
        assert_int_equal(pfx_model_weight_tensor(f.model, i, &wt), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(wt, 0, info.numel, w), PFX_SUCCESS);
        size_t at = 0;
        for (size_t e = 1; e < info.numel; e++)
            if (fabsf(g[e]) > fabsf(g[at]))
                at = e;
        const float h = 1e-2f, w0 = w[at];
        float v = w0 + h;
        assert_int_equal(pfx_tensor_write(wt, at, 1, &v), PFX_SUCCESS);
        const double up = run(&f, f.ctx, &drop_all, false, 0, B);
        v = w0 - h;
        assert_int_equal(pfx_tensor_write(wt, at, 1, &v), PFX_SUCCESS);
        const double down = run(&f, f.ctx, &drop_all, false, 0, B);
        assert_int_equal(pfx_tensor_write(wt, at, 1, &w0), PFX_SUCCESS);
        const double fd = (up - down) / (2.0 * h);
        printf("  %-36s [%zu]: gradient %.6g, finite difference %.6g\n", info.name, at,
               (double)g[at], fd);
        if (!(fabs(fd - g[at]) <= TOL_DROPOUT_FD * fabs(g[at]) + TOL_DROPOUT_FD_ABS))
            fail_msg("%s[%zu]: gradient %.6g, finite difference %.6g", info.name, at, (double)g[at],
                     fd);
        checked++;
        free(g);
        free(w);
    }
    assert_true(checked >= 4);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_masks),
        cmocka_unit_test(test_zero_and_recompute),
        cmocka_unit_test(test_data_parallel_masks),
        cmocka_unit_test(test_finite_differences),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
