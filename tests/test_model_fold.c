/* Gains folded into the query projections (pfx_model_fold_gains) against
 * transformers: the committed fixtures of tests/fixtures/make_fold_fixture.py
 * (linear, tanh and structured gains for the tiny GPT-2, Llama with llama3
 * RoPE and Qwen2 with q biases of tests/fixtures/models), whose logits
 * transformers computed for the model *with* the gains (the query scaled
 * after the projection and the rotation, independently of any folding).
 * Per model and kind: the gain model here, the folded model without gains,
 * and the folded model saved and loaded again agree with them within
 * TOL_FOLD_HF. The refusals: structured gains that split a rotated pair
 * (naming the heads), half storage, a NaN gain, a prefix; the model
 * unchanged after each.
 * usage: test_model_fold FIXTURES_DIR (tests/fixtures) */
#include <math.h>

#include "model_folder.h"
#include "pfx_test.h"
#include "tolerances.h"

static const char *fixtures;

typedef struct case_data {
    pfx_model_shape s;
    size_t B, N, V;
    int32_t ids[64];
    float *logits; /* [B, N, V] */
    float *want;   /* the gain model's, from the fixture */
    pfx_tensor *out;
} case_data;

static float *read_f32(pfx_safetensors *f, const char *name, size_t n)
{
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    if (pfx_safetensors_read_f32(f, name, x, n) != PFX_SUCCESS)
        fail_msg("%s: %s", name, pfx_last_error(NULL));
    return x;
}

/* The fixture's input ids and the logits of `kind` ("plain" for none). */
static void read_expected(const char *name, const char *kind, case_data *c)
{
    char path[1200], key[64];
    snprintf(path, sizeof(path), "%s/fold/%s/expected.safetensors", fixtures, name);
    pfx_safetensors *f = NULL;
    if (pfx_safetensors_open(path, &f) != PFX_SUCCESS)
        fail_msg("%s", pfx_last_error(NULL));
    pfx_st_info info;
    assert_int_equal(pfx_safetensors_info(f, (size_t)pfx_safetensors_find(f, "input_ids"), &info),
                     PFX_SUCCESS);
    c->B = info.shape[0];
    c->N = info.shape[1];
    assert_true(c->B * c->N <= 64);
    memcpy(c->ids, pfx_safetensors_data(f, (size_t)pfx_safetensors_find(f, "input_ids")),
           c->B * c->N * sizeof(int32_t));
    c->V = c->s.vocab;
    snprintf(key, sizeof(key), "%s_logits", kind);
    free(c->want);
    c->want = read_f32(f, key, c->B * c->N * c->V);
    pfx_safetensors_close(&f);
}

/* The gains file fold/NAME/KIND.safetensors as a prefix (ramp 1). */
static void read_gains(const char *name, const char *kind, const pfx_model_shape *s,
                       pfx_gains_values *g, pfx_model_prefix *p)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/fold/%s/%s.safetensors", fixtures, name, kind);
    pfx_safetensors *f = NULL;
    g->gains = calloc(s->layers * s->heads, sizeof(float));
    g->dim_gains = calloc(s->layers * s->heads * s->head_dim, sizeof(float));
    assert_true(g->gains && g->dim_gains);
    if (pfx_safetensors_open(path, &f) != PFX_SUCCESS ||
        pfx_gains_file_read(f, path, s->layers, s->heads, s->head_dim, g) != PFX_SUCCESS)
        fail_msg("%s", pfx_last_error(NULL));
    pfx_safetensors_close(&f);
    *p = (pfx_model_prefix){ .gain_mode = g->gain_mode,
                             .gains = g->gains,
                             .dim_gains = g->structured ? g->dim_gains : NULL,
                             .gain_ramp = 1.0f };
}

/* The largest |logit - want| of a forward of m with p. */
static double max_diff(pfx_model *m, case_data *c, const pfx_model_prefix *p)
{
    pfx_context *ctx = NULL;
    const pfx_context_params cp = { .max_batch = c->B, .max_tokens = c->N };
    if (pfx_context_create(m, &cp, &ctx) != PFX_SUCCESS)
        fail_msg("%s", pfx_last_error(NULL));
    const pfx_model_batch b = { c->B, c->N, c->ids, NULL, NULL };
    assert_int_equal(pfx_model_forward(ctx, &b, p, c->out), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(c->out, 0, c->B * c->N * c->V, c->logits), PFX_SUCCESS);
    pfx_context_destroy(&ctx);
    double d = 0.0;
    for (size_t i = 0; i < c->B * c->N * c->V; i++)
        d = fmax(d, fabs((double)c->logits[i] - c->want[i]));
    return d;
}

static pfx_model *load(pfx_runtime *rt, const char *dir, pfx_dtype storage)
{
    const pfx_model_params params = { .storage = storage };
    pfx_model *m = NULL;
    if (pfx_model_load(rt, dir, &params, &m) != PFX_SUCCESS)
        fail_msg("%s: %s", dir, pfx_last_error(rt));
    return m;
}

static void setup_case(pfx_runtime *rt, const char *name, case_data *c)
{
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/models/%s", fixtures, name);
    memset(c, 0, sizeof(*c));
    assert_int_equal(pfx_model_read_config(dir, &c->s), PFX_SUCCESS);
    read_expected(name, "plain", c);
    c->logits = malloc(c->B * c->N * c->V * sizeof(float));
    const size_t shape[3] = { c->B, c->N, c->V };
    assert_non_null(c->logits);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &c->out), PFX_SUCCESS);
}

static void free_case(case_data *c)
{
    free(c->logits);
    free(c->want);
    pfx_tensor_destroy(&c->out);
}

static void check_model(pfx_runtime *rt, const char *name)
{
    static const char *const kinds[3] = { "linear", "tanh", "dim" };
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/models/%s", fixtures, name);
    case_data c;
    setup_case(rt, name, &c);
    const size_t live0 = pfx_test_live_bytes(rt);
    char *tmp = tf_tempdir("fold");
    for (int k = 0; k < 3; k++) {
        read_expected(name, kinds[k], &c);
        pfx_gains_values g = { 0 };
        pfx_model_prefix p;
        read_gains(name, kinds[k], &c.s, &g, &p);
        pfx_model *m = load(rt, dir, PFX_DTYPE_F32);
        const pfx_model_prefix none = { 0 };
        const double with = max_diff(m, &c, &p);
        assert_int_equal(pfx_model_fold_gains(m, &p), PFX_SUCCESS);
        const double folded = max_diff(m, &c, &none);
        assert_int_equal(pfx_model_save(m, tmp, NULL), PFX_SUCCESS);
        pfx_model_destroy(&m);
        m = load(rt, tmp, PFX_DTYPE_F32);
        const double saved = max_diff(m, &c, &none);
        pfx_model_destroy(&m);
        print_message("  %s %s: max |logit - transformers'| with the gains %.3g, folded %.3g, "
                      "folded and saved %.3g\n",
                      name, kinds[k], with, folded, saved);
        assert_true(with <= TOL_FOLD_HF && folded <= TOL_FOLD_HF && saved <= TOL_FOLD_HF);
        free(g.gains);
        free(g.dim_gains);
    }
    tf_rmdir(tmp);
    free(tmp);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
    free_case(&c);
}

static void test_gpt2(void **state)
{
    check_model(*state, "gpt2");
}

static void test_llama(void **state)
{
    check_model(*state, "llama");
}

static void test_qwen2(void **state)
{
    check_model(*state, "qwen2");
}

/* Each refusal leaves the model computing its plain logits. */
static void test_refusals(void **state)
{
    pfx_runtime *rt = *state;
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/models/llama", fixtures);
    case_data c;
    setup_case(rt, "llama", &c);
    pfx_gains_values g = { 0 };
    pfx_model_prefix p;
    read_gains("llama", "dim", &c.s, &g, &p);
    pfx_model *m = load(rt, dir, PFX_DTYPE_F32);
    const pfx_model_prefix none = { 0 };
    const size_t D = c.s.head_dim, H = c.s.heads;
    /* layer 1 head 2 and layer 0 head 3 split a rotated pair */
    g.dim_gains[(1 * H + 2) * D + 1] += 0.25f;
    g.dim_gains[(0 * H + 3) * D + D - 1] -= 0.125f;
    assert_int_equal(pfx_model_fold_gains(m, &p), PFX_ERROR_INVALID_ARGUMENT);
    const char *msg = pfx_last_error(rt);
    assert_non_null(strstr(msg, "2 heads"));
    assert_non_null(strstr(msg, "layer 0 head 3"));
    assert_non_null(strstr(msg, "layer 1 head 2"));
    g.dim_gains[(1 * H + 2) * D + 1] -= 0.25f;
    g.dim_gains[(0 * H + 3) * D + D - 1] += 0.125f;
    /* a NaN, a prefix, r outside [0, 1], NULL */
    const float keep = g.dim_gains[5];
    g.dim_gains[5] = NAN;
    assert_int_equal(pfx_model_fold_gains(m, &p), PFX_ERROR_NOT_FINITE);
    g.dim_gains[5] = keep;
    pfx_model_prefix q = p;
    q.prefix_len = 2;
    assert_int_equal(pfx_model_fold_gains(m, &q), PFX_ERROR_INVALID_ARGUMENT);
    q = p;
    q.gain_ramp = 1.5f;
    assert_int_equal(pfx_model_fold_gains(m, &q), PFX_ERROR_INVALID_ARGUMENT);
    q = p;
    q.gain_mode = PFX_GAIN_LINEAR;
    q.gains = NULL;
    assert_int_equal(pfx_model_fold_gains(m, &q), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_model_fold_gains(NULL, &p), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_model_fold_gains(m, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_true(max_diff(m, &c, &none) <= TOL_FOLD_HF);
    pfx_model_destroy(&m);
    /* half storage: the projection is not float32 */
    m = load(rt, dir, PFX_DTYPE_F16);
    assert_int_equal(pfx_model_fold_gains(m, &p), PFX_ERROR_UNSUPPORTED);
    assert_non_null(strstr(pfx_last_error(rt), "float32"));
    pfx_model_destroy(&m);
    free(g.gains);
    free(g.dim_gains);
    free_case(&c);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FIXTURES_DIR\n", argv[0]);
        return 2;
    }
    fixtures = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
