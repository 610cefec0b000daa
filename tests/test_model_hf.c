/*
 * Suite 'reference': the whole-model double reference (reference/model_ref.h)
 * against what transformers + PEFT computed for the committed fixtures
 * (tests/fixtures/make_model_fixture.py): logits at the valid positions and
 * the loss of a tiny GPT-2, Llama (GQA, llama3 RoPE, float16 weights) and
 * Qwen2 (q/k/v biases, tied head, bfloat16 weights), with the PEFT prefix
 * adapter and without. Reads the files with the library's safetensors reader;
 * no device. usage: test_model_hf FIXTURE_DIR
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prefixcl/io.h"
#include "reference/model_ref.h"
#include "reference/reference.h"
#include "tolerances.h"

static const char *fixture_dir;

/* Up to 64 tensors read as float, freed together. */
typedef struct arrays {
    float *p[64];
    size_t n;
} arrays;

static float *get(arrays *a, const pfx_safetensors *f, const char *name)
{
    long i = pfx_safetensors_find(f, name);
    if (i < 0)
        fail_msg("tensor %s missing", name);
    pfx_st_info info;
    assert_int_equal(pfx_safetensors_info(f, (size_t)i, &info), PFX_SUCCESS);
    float *x = malloc(info.numel * sizeof(float));
    assert_non_null(x);
    assert_int_equal(pfx_safetensors_read_f32(f, name, x, info.numel), PFX_SUCCESS);
    assert_true(a->n < 64);
    a->p[a->n++] = x;
    return x;
}

static const int32_t *get_i32(const pfx_safetensors *f, const char *name, size_t numel)
{
    long i = pfx_safetensors_find(f, name);
    assert_true(i >= 0);
    pfx_st_info info;
    assert_int_equal(pfx_safetensors_info(f, (size_t)i, &info), PFX_SUCCESS);
    assert_int_equal(info.dtype, PFX_ST_I32);
    assert_int_equal(info.numel, numel);
    return pfx_safetensors_data(f, (size_t)i);
}

static pfx_safetensors *open_file(const char *model, const char *file)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s/%s", fixture_dir, model, file);
    pfx_safetensors *f = NULL;
    if (pfx_safetensors_open(path, &f) != PFX_SUCCESS)
        fail_msg("%s: %s", path, pfx_last_error(NULL));
    return f;
}

static void load_weights(arrays *a, const pfx_safetensors *f, const ref_model_config *c,
                         ref_model_weights *w, ref_model_layer *layers)
{
    char n[128];
    const bool gpt2 = c->family == REF_MODEL_GPT2;
#define GET(...) (snprintf(n, sizeof(n), __VA_ARGS__), get(a, f, n))
    memset(w, 0, sizeof(*w));
    memset(layers, 0, c->layers * sizeof(*layers));
    w->wte = GET(gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight");
    if (gpt2)
        w->wpe = GET("transformer.wpe.weight");
    for (size_t l = 0; l < c->layers; l++) {
        ref_model_layer *y = &layers[l];
        if (gpt2) {
            const char *h = "transformer.h";
            y->ln_1_w = GET("%s.%zu.ln_1.weight", h, l);
            y->ln_1_b = GET("%s.%zu.ln_1.bias", h, l);
            y->c_attn_w = GET("%s.%zu.attn.c_attn.weight", h, l);
            y->c_attn_b = GET("%s.%zu.attn.c_attn.bias", h, l);
            y->attn_proj_w = GET("%s.%zu.attn.c_proj.weight", h, l);
            y->attn_proj_b = GET("%s.%zu.attn.c_proj.bias", h, l);
            y->ln_2_w = GET("%s.%zu.ln_2.weight", h, l);
            y->ln_2_b = GET("%s.%zu.ln_2.bias", h, l);
            y->c_fc_w = GET("%s.%zu.mlp.c_fc.weight", h, l);
            y->c_fc_b = GET("%s.%zu.mlp.c_fc.bias", h, l);
            y->mlp_proj_w = GET("%s.%zu.mlp.c_proj.weight", h, l);
            y->mlp_proj_b = GET("%s.%zu.mlp.c_proj.bias", h, l);
        } else {
            const char *m = "model.layers";
            y->input_norm_w = GET("%s.%zu.input_layernorm.weight", m, l);
            y->q_w = GET("%s.%zu.self_attn.q_proj.weight", m, l);
            y->k_w = GET("%s.%zu.self_attn.k_proj.weight", m, l);
            y->v_w = GET("%s.%zu.self_attn.v_proj.weight", m, l);
            if (c->qkv_bias) {
                y->q_b = GET("%s.%zu.self_attn.q_proj.bias", m, l);
                y->k_b = GET("%s.%zu.self_attn.k_proj.bias", m, l);
                y->v_b = GET("%s.%zu.self_attn.v_proj.bias", m, l);
            }
            y->o_w = GET("%s.%zu.self_attn.o_proj.weight", m, l);
            y->post_norm_w = GET("%s.%zu.post_attention_layernorm.weight", m, l);
            y->gate_w = GET("%s.%zu.mlp.gate_proj.weight", m, l);
            y->up_w = GET("%s.%zu.mlp.up_proj.weight", m, l);
            y->down_w = GET("%s.%zu.mlp.down_proj.weight", m, l);
        }
    }
    w->layer = layers;
    w->final_w = GET(gpt2 ? "transformer.ln_f.weight" : "model.norm.weight");
    if (gpt2)
        w->final_b = GET("transformer.ln_f.bias");
    if (pfx_safetensors_find(f, "lm_head.weight") >= 0)
        w->lm_head = GET("lm_head.weight");
#undef GET
}

/* Relative L2 error over the valid positions (t < lengths[b]) of [B, N, V]. */
static double valid_error(const double *ref, const float *hf, size_t B, size_t N, size_t V,
                          const int32_t *lengths)
{
    double num = 0.0, den = 0.0;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < (size_t)lengths[b]; t++)
            for (size_t v = 0; v < V; v++) {
                const double r = hf[(b * N + t) * V + v], g = ref[(b * N + t) * V + v];
                num += (r - g) * (r - g);
                den += r * r;
            }
    return sqrt(num / den);
}

static void check_model(const char *name, ref_model_config c)
{
    enum { B = 3, N = 13, P = 5 };
    arrays a = { { 0 }, 0 };
    pfx_safetensors *mf = open_file(name, "model.safetensors");
    pfx_safetensors *af = open_file(name, "adapter/adapter_model.safetensors");
    pfx_safetensors *ef = open_file(name, "expected.safetensors");
    ref_model_layer layers[4];
    ref_model_weights w;
    load_weights(&a, mf, &c, &w, layers);
    /* PEFT's [P][L][2][Hkv][D] into per-layer [L][Hkv][P][D] keys and values */
    const size_t L = c.layers, Hkv = c.kv_heads, D = c.head_dim, V = c.vocab;
    const float *pe = get(&a, af, "prompt_embeddings");
    const size_t span = L * Hkv * P * D;
    float *kp = malloc(span * sizeof(float)), *vp = malloc(span * sizeof(float));
    for (size_t p = 0; p < P; p++)
        for (size_t l = 0; l < L; l++)
            for (size_t s = 0; s < 2; s++)
                for (size_t h = 0; h < Hkv; h++)
                    for (size_t d = 0; d < D; d++)
                        (s ? vp : kp)[((l * Hkv + h) * P + p) * D + d] =
                            pe[(((p * L + l) * 2 + s) * Hkv + h) * D + d];
    const int32_t *ids = get_i32(ef, "input_ids", B * N), *lengths = get_i32(ef, "lengths", B);
    const int32_t *labels = get_i32(ef, "labels", B * N);
    const float *logits = get(&a, ef, "logits"), *base_logits = get(&a, ef, "base_logits");
    const float *loss = get(&a, ef, "loss"), *base_loss = get(&a, ef, "base_loss");
    ref_model_batch x = { B, N, ids, lengths, labels };
    double *got = malloc(B * N * V * sizeof(double)), l;

    ref_model_prefix pre = { P, kp, vp, NULL, NULL };
    ref_model_forward(&c, &w, &pre, &x, got, &l);
    const double e1 = valid_error(got, logits, B, N, V, lengths);
    const double e2 = fabs(l - loss[0]) / fabs(loss[0]);
    ref_model_prefix none = { 0, NULL, NULL, NULL, NULL };
    ref_model_forward(&c, &w, &none, &x, got, &l);
    const double e3 = valid_error(got, base_logits, B, N, V, lengths);
    const double e4 = fabs(l - base_loss[0]) / fabs(base_loss[0]);
    if (!(e1 <= TOL_HF_FIXTURE && e2 <= TOL_HF_FIXTURE && e3 <= TOL_HF_FIXTURE &&
          e4 <= TOL_HF_FIXTURE))
        fail_msg("%s: logits %.3g, loss %.3g, base logits %.3g, base loss %.3g (> %.3g)", name, e1,
                 e2, e3, e4, TOL_HF_FIXTURE);
    /* the prefix matters: the two runs differ */
    assert_true(fabs(loss[0] - base_loss[0]) > 1e-3);
    free(got);
    free(kp);
    free(vp);
    for (size_t i = 0; i < a.n; i++)
        free(a.p[i]);
    pfx_safetensors_close(&mf);
    pfx_safetensors_close(&af);
    pfx_safetensors_close(&ef);
}

static void test_gpt2(void **state)
{
    (void)state;
    check_model("gpt2", (ref_model_config){ .family = REF_MODEL_GPT2,
                                            .layers = 2,
                                            .hidden = 48,
                                            .heads = 4,
                                            .kv_heads = 4,
                                            .head_dim = 12,
                                            .inner = 80,
                                            .vocab = 101,
                                            .max_positions = 64,
                                            .eps = 1e-5,
                                            .act = REF_ACT_GELU_TANH });
}

static ref_model_config llama_family(bool qwen2)
{
    ref_model_config c = { .family = REF_MODEL_LLAMA,
                           .layers = 2,
                           .hidden = 48,
                           .heads = 4,
                           .kv_heads = 2,
                           .head_dim = 12,
                           .inner = 88,
                           .vocab = 97,
                           .eps = 1e-6,
                           .act = REF_ACT_SILU,
                           .qkv_bias = qwen2,
                           .rope = { .theta = 10000.0 } };
    if (!qwen2)
        c.rope = (ref_rope){ .theta = 10000.0,
                             .llama3 = true,
                             .factor = 4.0,
                             .low_freq_factor = 1.0,
                             .high_freq_factor = 4.0,
                             .original_max_position_embeddings = 32.0 };
    return c;
}

static void test_llama(void **state)
{
    (void)state;
    check_model("llama", llama_family(false));
}

static void test_qwen2(void **state)
{
    (void)state;
    check_model("qwen2", llama_family(true));
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
    return cmocka_run_group_tests_name("model_hf", tests, NULL, NULL);
}
