/* Full training against PyTorch + transformers: the committed fixtures of
 * tests/fixtures/make_train_fixture.py (tiny GPT-2 and GQA Llama with an
 * untied head). The loss and the gradient of every weight and of the gains,
 * without gain, with linear and tanh gains and with the structured gain; then ten AdamW steps with two
 * groups, clipping, warm-up and cosine decay and the gain ramp, step by step
 * (loss, gradient norm) and the weights and gains at the end. argv[1]: the
 * fixtures folder. */
#include <math.h>

#include "pfx_test.h"
#include "prefixcl/optimizer.h"
#include "tolerances.h"

#define MAX_WEIGHTS 40
#define MAX_LH      16

static const char *fixture_dir;

typedef struct fixture {
    char dir[1024];
    pfx_safetensors *e;
    size_t B, N, L, H;
    const int32_t *ids, *labels;
    float gains[MAX_LH], ramp;
    pfx_model *model;
    pfx_context *ctx;
    size_t count;
    pfx_model_weight_info info[MAX_WEIGHTS];
    pfx_tensor *w[MAX_WEIGHTS], *dw[MAX_WEIGHTS], *dg[8];
} fixture;

static const int32_t *int_tensor(pfx_safetensors *f, const char *name, size_t count)
{
    long i = pfx_safetensors_find(f, name);
    if (i < 0)
        fail_msg("expected.safetensors has no %s", name);
    pfx_st_info info;
    assert_int_equal(pfx_safetensors_info(f, (size_t)i, &info), PFX_SUCCESS);
    assert_int_equal(info.dtype, PFX_ST_I32);
    assert_int_equal(info.numel, count);
    return pfx_safetensors_data(f, (size_t)i); /* little-endian int32, as this host */
}

/* An expected tensor of `count` floats, or NULL when the file has none. */
static float *expected(const fixture *fx, const char *name, size_t count)
{
    if (pfx_safetensors_find(fx->e, name) < 0)
        return NULL;
    float *x = malloc(count * sizeof(float));
    assert_non_null(x);
    if (pfx_safetensors_read_f32(fx->e, name, x, count) != PFX_SUCCESS)
        fail_msg("%s: %s", name, pfx_last_error(NULL));
    return x;
}

/* PyTorch's value of weight `name` under `key` (ARM.grad or step.final):
 * the stacked q | k | v from q_proj, k_proj and v_proj. */
static float *expected_weight(const fixture *fx, const char *key, const char *name, size_t count)
{
    char full[256];
    size_t l;
    char kind[8];
    if (sscanf(name, "model.layers.%zu.self_attn.qkv_proj.%7s", &l, kind) == 2) {
        static const char *const parts[3] = { "q_proj", "k_proj", "v_proj" };
        float *x = malloc(count * sizeof(float));
        size_t at = 0;
        for (int i = 0; i < 3; i++) {
            snprintf(full, sizeof(full), "%s.model.layers.%zu.self_attn.%s.%s", key, l, parts[i],
                     kind);
            long k = pfx_safetensors_find(fx->e, full);
            assert_true(k >= 0);
            pfx_st_info info;
            assert_int_equal(pfx_safetensors_info(fx->e, (size_t)k, &info), PFX_SUCCESS);
            assert_true(at + info.numel <= count);
            assert_int_equal(pfx_safetensors_read_f32(fx->e, full, x + at, info.numel),
                             PFX_SUCCESS);
            at += info.numel;
        }
        assert_int_equal(at, count);
        return x;
    }
    snprintf(full, sizeof(full), "%s.%s", key, name);
    float *x = expected(fx, full, count);
    if (!x)
        fail_msg("expected.safetensors has no %s", full);
    return x;
}

static void open_fixture(pfx_runtime *rt, const char *name, fixture *fx)
{
    memset(fx, 0, sizeof(*fx));
    snprintf(fx->dir, sizeof(fx->dir), "%s/%s", fixture_dir, name);
    char path[1100];
    snprintf(path, sizeof(path), "%s/expected.safetensors", fx->dir);
    if (pfx_safetensors_open(path, &fx->e) != PFX_SUCCESS)
        fail_msg("%s", pfx_last_error(NULL));
    pfx_st_info info;
    assert_int_equal(
        pfx_safetensors_info(fx->e, (size_t)pfx_safetensors_find(fx->e, "gains"), &info),
        PFX_SUCCESS);
    fx->L = info.shape[0];
    fx->H = info.shape[1];
    assert_true(fx->L * fx->H <= MAX_LH && fx->L <= 8);
    assert_int_equal(
        pfx_safetensors_info(fx->e, (size_t)pfx_safetensors_find(fx->e, "input_ids"), &info),
        PFX_SUCCESS);
    fx->B = info.shape[0];
    fx->N = info.shape[1];
    fx->ids = int_tensor(fx->e, "input_ids", fx->B * fx->N);
    fx->labels = int_tensor(fx->e, "labels", fx->B * fx->N);
    assert_int_equal(pfx_safetensors_read_f32(fx->e, "gains", fx->gains, fx->L * fx->H),
                     PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_read_f32(fx->e, "ramp", &fx->ramp, 1), PFX_SUCCESS);
    pfx_context_params params = { .max_batch = fx->B, .max_tokens = fx->N };
    if (pfx_model_load(rt, fx->dir, NULL, &fx->model) != PFX_SUCCESS ||
        pfx_context_create(fx->model, &params, &fx->ctx) != PFX_SUCCESS)
        fail_msg("load %s: %s", fx->dir, pfx_last_error(rt));
    fx->count = pfx_model_weight_count(fx->model);
    assert_true(fx->count <= MAX_WEIGHTS);
    for (size_t i = 0; i < fx->count; i++) {
        assert_int_equal(pfx_model_get_weight(fx->model, i, &fx->info[i]), PFX_SUCCESS);
        assert_int_equal(pfx_model_weight_tensor(fx->model, i, &fx->w[i]), PFX_SUCCESS);
        assert_int_equal(
            pfx_tensor_create(rt, PFX_DTYPE_F32, fx->info[i].ndim, fx->info[i].shape, &fx->dw[i]),
            PFX_SUCCESS);
    }
    const size_t hshape[1] = { fx->H };
    for (size_t l = 0; l < fx->L; l++)
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hshape, &fx->dg[l]), PFX_SUCCESS);
}

static void close_fixture(fixture *fx)
{
    for (size_t i = 0; i < fx->count; i++)
        pfx_tensor_destroy(&fx->dw[i]);
    for (size_t l = 0; l < fx->L; l++)
        pfx_tensor_destroy(&fx->dg[l]);
    pfx_context_destroy(&fx->ctx);
    pfx_model_destroy(&fx->model);
    pfx_safetensors_close(&fx->e);
}

/* Relative L2 error of got against want (float arrays). */
static double rel_err(const float *want, const float *got, size_t n)
{
    double d = 0.0, w = 0.0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        w += (double)want[i] * want[i];
    }
    return sqrt(d / (w > 0.0 ? w : 1e-30));
}

static void check_tensor(const char *what, const char *name, const float *want, const pfx_tensor *t,
                         size_t n, double tol)
{
    float *got = malloc(n * sizeof(float));
    assert_int_equal(pfx_tensor_read(t, 0, n, got), PFX_SUCCESS);
    const double e = rel_err(want, got, n);
    if (!(e < tol))
        fail_msg("%s %s: rel error %.3g (> %.3g)", what, name, e, tol);
    free(got);
}

/* The loss and every gradient of one arm (dim: the structured gain). */
static void check_arm(pfx_runtime *rt, fixture *fx, const char *arm, pfx_gain_mode mode, bool dim)
{
    pfx_model_batch batch = { fx->B, fx->N, fx->ids, NULL, fx->labels };
    pfx_st_info info;
    long gi = pfx_safetensors_find(fx->e, "dim_gains");
    assert_true(gi >= 0 && pfx_safetensors_info(fx->e, (size_t)gi, &info) == PFX_SUCCESS);
    const size_t HD = info.numel / fx->L;
    float *G = expected(fx, "dim_gains", info.numel);
    pfx_tensor *dd[8] = { 0 };
    const size_t dshape[2] = { fx->H, HD / fx->H };
    for (size_t l = 0; dim && l < fx->L; l++)
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, dshape, &dd[l]), PFX_SUCCESS);
    pfx_model_prefix pre = { .gain_mode = mode,
                             .gains = mode ? fx->gains : NULL,
                             .dim_gains = dim ? G : NULL,
                             .gain_ramp = fx->ramp };
    pfx_model_grads grads = { .gains = fx->dg, .dim_gains = dim ? dd : NULL, .weights = fx->dw };
    double loss = 0.0;
    if (pfx_model_backward(fx->ctx, &batch, &pre, &grads, &loss) != PFX_SUCCESS)
        fail_msg("backward: %s", pfx_last_error(rt));
    char key[64];
    snprintf(key, sizeof(key), "%s.loss", arm);
    float *want_loss = expected(fx, key, 1);
    assert_non_null(want_loss);
    if (!(fabs(loss - *want_loss) <= TOL_TRAIN_HF * *want_loss))
        fail_msg("%s loss %.8f, PyTorch %.8f", arm, loss, (double)*want_loss);
    free(want_loss);
    snprintf(key, sizeof(key), "%s.grad", arm);
    for (size_t i = 0; i < fx->count; i++) {
        float *want = expected_weight(fx, key, fx->info[i].name, fx->info[i].numel);
        check_tensor(key, fx->info[i].name, want, fx->dw[i], fx->info[i].numel, TOL_TRAIN_HF);
        free(want);
    }
    snprintf(key, sizeof(key), "%s.grad.gains", arm);
    float *want = expected(fx, key, fx->L * fx->H);
    assert_true((want != NULL) == (mode != PFX_GAIN_OFF));
    for (size_t l = 0; want && l < fx->L; l++)
        check_tensor(key, "layer", want + l * fx->H, fx->dg[l], fx->H, TOL_TRAIN_HF);
    free(want);
    float *want_dim = dim ? expected(fx, "dim.grad.dim_gains", fx->L * HD) : NULL;
    assert_true(!dim || want_dim);
    for (size_t l = 0; dim && l < fx->L; l++)
        check_tensor("dim.grad.dim_gains", "layer", want_dim + l * HD, dd[l], HD, TOL_TRAIN_HF);
    for (size_t l = 0; l < fx->L; l++)
        pfx_tensor_destroy(&dd[l]);
    free(want_dim);
    free(G);
}

static void test_gradients(void **state)
{
    pfx_runtime *rt = *state;
    static const char *const models[] = { "gpt2", "llama" };
    for (size_t m = 0; m < 2; m++) {
        fixture fx;
        open_fixture(rt, models[m], &fx);
        check_arm(rt, &fx, "off", PFX_GAIN_OFF, false);
        check_arm(rt, &fx, "linear", PFX_GAIN_LINEAR, false);
        check_arm(rt, &fx, "tanh", PFX_GAIN_TANH, false);
        check_arm(rt, &fx, "dim", PFX_GAIN_OFF, true);
        close_fixture(&fx);
    }
}

/* GPT-2's q | k | v bias after the steps. The key bias's gradient is zero
 * in exact arithmetic (it adds q . b_k to every logit of a row, which the
 * softmax cancels); float64 torch leaves noise far below AdamW's eps, float32
 * noise near it, which AdamW turns into steps of up to about lr in any
 * direction. So: the q and v thirds within TOL_TRAIN_STEPS, the k third
 * within the sum of the learning rates (`drift`). */
static void check_key_bias(const float *want, const pfx_tensor *t, size_t n, double drift)
{
    float *got = malloc(n * sizeof(float));
    assert_int_equal(pfx_tensor_read(t, 0, n, got), PFX_SUCCESS);
    const size_t C = n / 3;
    float *qv_want = malloc(2 * C * sizeof(float)), *qv_got = malloc(2 * C * sizeof(float));
    memcpy(qv_want, want, C * sizeof(float));
    memcpy(qv_want + C, want + 2 * C, C * sizeof(float));
    memcpy(qv_got, got, C * sizeof(float));
    memcpy(qv_got + C, got + 2 * C, C * sizeof(float));
    const double e = rel_err(qv_want, qv_got, 2 * C);
    if (!(e < TOL_TRAIN_STEPS))
        fail_msg("after the steps: c_attn.bias q and v: rel error %.3g (> %.3g)", e,
                 TOL_TRAIN_STEPS);
    for (size_t i = C; i < 2 * C; i++)
        if (!(fabsf(got[i] - want[i]) <= drift))
            fail_msg("after the steps: c_attn.bias k[%zu] %g, PyTorch %g", i - C, (double)got[i],
                     (double)want[i]);
    free(qv_want);
    free(qv_got);
    free(got);
}

/* Ten steps of the fixture's recipe (make_train_fixture.py's constants). */
static void test_training_steps(void **state)
{
    pfx_runtime *rt = *state;
    static const char *const models[] = { "gpt2", "llama" };
    for (size_t m = 0; m < 2; m++) {
        fixture fx;
        open_fixture(rt, models[m], &fx);
        const size_t LH = fx.L * fx.H, steps = 10;
        pfx_optimizer_params op = { .max_grad_norm = 1.0f,
                                    .warmup_steps = 3,
                                    .decay = PFX_LR_COSINE,
                                    .decay_steps = 7,
                                    .min_lr_ratio = 0.1f,
                                    .gain_ramp_steps = 4 };
        pfx_optimizer *opt = NULL;
        assert_int_equal(pfx_optimizer_create(rt, &op, &opt), PFX_SUCCESS);
        pfx_optimizer_group_params wg = PFX_OPTIMIZER_GROUP_DEFAULTS,
                                   gg = PFX_OPTIMIZER_GROUP_DEFAULTS;
        wg.lr = 1e-3f;
        wg.weight_decay = 0.01f;
        gg.lr = 5e-4f;
        gg.weight_decay = 0.0f;
        unsigned gw = 0, ggain = 0;
        assert_int_equal(pfx_optimizer_add_group(opt, &wg, &gw), PFX_SUCCESS);
        assert_int_equal(pfx_optimizer_add_group(opt, &gg, &ggain), PFX_SUCCESS);
        for (size_t i = 0; i < fx.count; i++)
            assert_int_equal(pfx_optimizer_add_param(opt, gw, fx.w[i], fx.dw[i], fx.info[i].name),
                             PFX_SUCCESS);
        pfx_tensor *gain[8] = { 0 };
        const size_t hshape[1] = { fx.H };
        for (size_t l = 0; l < fx.L; l++) {
            char name[32];
            snprintf(name, sizeof(name), "gain.%zu", l);
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hshape, &gain[l]),
                             PFX_SUCCESS);
            assert_int_equal(pfx_tensor_write(gain[l], 0, fx.H, fx.gains + l * fx.H), PFX_SUCCESS);
            assert_int_equal(pfx_optimizer_add_param(opt, ggain, gain[l], fx.dg[l], name),
                             PFX_SUCCESS);
        }
        float *want_loss = expected(&fx, "step.loss", steps),
              *want_norm = expected(&fx, "step.grad_norm", steps);
        assert_true(want_loss && want_norm);
        float host_gains[MAX_LH];
        pfx_model_batch batch = { fx.B, fx.N, fx.ids, NULL, fx.labels };
        pfx_model_grads grads = { .gains = fx.dg, .weights = fx.dw };
        for (size_t t = 0; t < steps; t++) {
            for (size_t l = 0; l < fx.L; l++)
                assert_int_equal(pfx_tensor_read(gain[l], 0, fx.H, host_gains + l * fx.H),
                                 PFX_SUCCESS);
            pfx_model_prefix pre = { .gain_mode = PFX_GAIN_LINEAR,
                                     .gains = host_gains,
                                     .gain_ramp = pfx_optimizer_gain_ramp(opt) };
            double loss = 0.0;
            if (pfx_model_backward(fx.ctx, &batch, &pre, &grads, &loss) != PFX_SUCCESS)
                fail_msg("backward: %s", pfx_last_error(rt));
            pfx_optimizer_report rep;
            assert_int_equal(pfx_optimizer_step(opt, &rep), PFX_SUCCESS);
            assert_false(rep.skipped);
            print_message("  %s step %zu: loss %.7f (torch %.7f), norm %.6f (%.6f)\n", models[m],
                          t + 1, loss, (double)want_loss[t], (double)rep.grad_norm,
                          (double)want_norm[t]);
            if (!(fabs(loss - want_loss[t]) <= TOL_TRAIN_HF * want_loss[t]) ||
                !(fabsf(rep.grad_norm - want_norm[t]) <= TOL_TRAIN_HF * want_norm[t]))
                fail_msg("%s step %zu: loss %.8f norm %.7f, PyTorch %.8f %.7f", models[m], t + 1,
                         loss, (double)rep.grad_norm, (double)want_loss[t], (double)want_norm[t]);
        }
        for (size_t i = 0; i < fx.count; i++) {
            float *want = expected_weight(&fx, "step.final", fx.info[i].name, fx.info[i].numel);
            if (strstr(fx.info[i].name, "attn.c_attn.bias"))
                check_key_bias(want, fx.w[i], fx.info[i].numel, steps * 1e-3);
            else
                check_tensor("after the steps", fx.info[i].name, want, fx.w[i], fx.info[i].numel,
                             TOL_TRAIN_STEPS);
            free(want);
        }
        float *want_gains = expected(&fx, "step.final.gains", LH);
        for (size_t l = 0; l < fx.L; l++)
            check_tensor("after the steps", "gains", want_gains + l * fx.H, gain[l], fx.H,
                         TOL_TRAIN_STEPS);
        free(want_gains);
        free(want_loss);
        free(want_norm);
        pfx_optimizer_destroy(&opt);
        for (size_t l = 0; l < fx.L; l++)
            pfx_tensor_destroy(&gain[l]);
        close_fixture(&fx);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_training_steps),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
