/* Whole models against transformers + PEFT: the committed fixtures of
 * tests/fixtures/make_model_fixture.py (tiny GPT-2, Llama with llama3 RoPE,
 * Qwen2 with q/k/v biases; weights stored float32, float16, bfloat16; a PEFT
 * prefix-tuning adapter each). Logits at the valid positions and the HF
 * causal-LM loss agree within 1e-5 relative, with the adapter's prefixes and
 * for the base model alone.
 * usage: test_model_fixture FIXTURE_DIR (tests/fixtures/models) */
#include <math.h>

#include "pfx_test.h"
#include "tolerances.h"

static const char *fixture_dir;

typedef struct expected {
    pfx_safetensors *f;
    size_t B, N, V;
    const int32_t *ids, *lens, *labels; /* views of the file's data */
    float *logits, *base_logits;
    float loss, base_loss;
} expected;

static const void *int_tensor(pfx_safetensors *f, const char *name, size_t count)
{
    long i = pfx_safetensors_find(f, name);
    assert_true(i >= 0);
    pfx_st_info info;
    assert_int_equal(pfx_safetensors_info(f, (size_t)i, &info), PFX_SUCCESS);
    assert_int_equal(info.dtype, PFX_ST_I32);
    assert_int_equal(info.numel, count);
    return pfx_safetensors_data(f, (size_t)i); /* little-endian int32, as this host */
}

static float *float_tensor(pfx_safetensors *f, const char *name, size_t count)
{
    float *x = malloc(count * sizeof(float));
    assert_non_null(x);
    assert_int_equal(pfx_safetensors_read_f32(f, name, x, count), PFX_SUCCESS);
    return x;
}

static void read_expected(const char *dir, expected *e)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/expected.safetensors", dir);
    memset(e, 0, sizeof(*e));
    if (pfx_safetensors_open(path, &e->f) != PFX_SUCCESS)
        fail_msg("%s", pfx_last_error(NULL));
    pfx_st_info info;
    assert_int_equal(
        pfx_safetensors_info(e->f, (size_t)pfx_safetensors_find(e->f, "logits"), &info),
        PFX_SUCCESS);
    assert_int_equal(info.ndim, 3);
    e->B = info.shape[0];
    e->N = info.shape[1];
    e->V = info.shape[2];
    e->ids = int_tensor(e->f, "input_ids", e->B * e->N);
    e->lens = int_tensor(e->f, "lengths", e->B);
    e->labels = int_tensor(e->f, "labels", e->B * e->N);
    e->logits = float_tensor(e->f, "logits", e->B * e->N * e->V);
    e->base_logits = float_tensor(e->f, "base_logits", e->B * e->N * e->V);
    float *l = float_tensor(e->f, "loss", 1), *bl = float_tensor(e->f, "base_loss", 1);
    e->loss = l[0];
    e->base_loss = bl[0];
    free(l);
    free(bl);
}

static void free_expected(expected *e)
{
    free(e->logits);
    free(e->base_logits);
    pfx_safetensors_close(&e->f);
}

/* Relative L2 error over the valid positions t < lens[b]. */
static double valid_rel(const expected *e, const float *ref, const float *got)
{
    double num = 0, den = 0;
    for (size_t b = 0; b < e->B; b++)
        for (size_t t = 0; t < (size_t)e->lens[b]; t++)
            for (size_t v = 0; v < e->V; v++) {
                size_t i = (b * e->N + t) * e->V + v;
                double d = (double)ref[i] - got[i];
                num += d * d;
                den += (double)ref[i] * ref[i];
            }
    return sqrt(num / den);
}

static void check_fixture(pfx_runtime *rt, const char *name, pfx_dtype storage)
{
    char dir[1024], adapter[1100];
    snprintf(dir, sizeof(dir), "%s/%s", fixture_dir, name);
    snprintf(adapter, sizeof(adapter), "%s/adapter", dir);
    expected e;
    read_expected(dir, &e);
    size_t live0 = pfx_test_live_bytes(rt);
    pfx_model_shape s;
    assert_int_equal(pfx_model_read_config(dir, &s), PFX_SUCCESS);
    pfx_peft_config pc;
    assert_int_equal(pfx_peft_read_config(adapter, &pc), PFX_SUCCESS);
    const size_t P = pc.num_virtual_tokens;
    pfx_model_params params = { .storage = storage };
    pfx_context_params cp = { .max_batch = e.B, .max_tokens = e.N, .max_prefix_len = P };
    pfx_model *m = NULL;
    pfx_context *ctx = NULL;
    if (pfx_model_load(rt, dir, &params, &m) != PFX_SUCCESS ||
        pfx_context_create(m, &cp, &ctx) != PFX_SUCCESS)
        fail_msg("%s: %s", dir, pfx_last_error(rt));
    assert_int_equal(s.vocab, e.V);
    pfx_tensor **k = calloc(s.layers, sizeof(pfx_tensor *)),
               **v = calloc(s.layers, sizeof(pfx_tensor *));
    assert_true(k && v);
    if (pfx_peft_load_prefixes(rt, adapter, s.kv_heads, k, v, s.layers, NULL) != PFX_SUCCESS)
        fail_msg("%s: %s", adapter, pfx_last_error(rt));

    size_t shape[3] = { e.B, e.N, e.V };
    pfx_tensor *logits = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &logits), PFX_SUCCESS);
    float *got = malloc(e.B * e.N * e.V * sizeof(float));
    assert_non_null(got);
    pfx_model_batch batch = { e.B, e.N, e.ids, e.lens, e.labels };
    const pfx_model_prefix with = { .prefix_len = P, .keys = k, .values = v }, without = { 0 };
    const pfx_model_prefix *pre[2] = { &with, &without };
    const float *ref[2] = { e.logits, e.base_logits };
    const float ref_loss[2] = { e.loss, e.base_loss };
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pfx_model_forward(ctx, &batch, pre[i], logits), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(logits, 0, e.B * e.N * e.V, got), PFX_SUCCESS);
        double el = valid_rel(&e, ref[i], got), loss = 0;
        assert_int_equal(pfx_model_loss(ctx, &batch, pre[i], &loss), PFX_SUCCESS);
        double ell = fabs(loss - ref_loss[i]) / fabs(ref_loss[i]);
        print_message("  %s%s %s: logits rel %.3g, loss %.7f (HF %.7f) rel %.3g\n", name,
                      storage == PFX_DTYPE_F16 ? " (half storage)" : "",
                      i ? "base" : "with the adapter", el, loss, (double)ref_loss[i], ell);
        assert_true(el < TOL_MODEL_HF);
        assert_true(ell < TOL_MODEL_HF);
    }
    free(got);
    pfx_tensor_destroy(&logits);
    for (size_t l = 0; l < s.layers; l++) {
        pfx_tensor_destroy(&k[l]);
        pfx_tensor_destroy(&v[l]);
    }
    free(k);
    free(v);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&m);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
    free_expected(&e);
}

static void test_gpt2(void **state)
{
    check_fixture(*state, "gpt2", PFX_DTYPE_F32);
}

static void test_llama(void **state)
{
    check_fixture(*state, "llama", PFX_DTYPE_F32);
    check_fixture(*state, "llama",
                  PFX_DTYPE_F16); /* float16 weights: half storage holds them exactly */
}

static void test_qwen2(void **state)
{
    check_fixture(*state, "qwen2", PFX_DTYPE_F32);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_qwen2),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
