/* Loading whole models (include/prefixcl/model.h): shapes from config.json
 * alone (GPT-2 small, a Llama-3.2-1B-shaped config), every refused config
 * field and every bad checkpoint with its status and a message naming the
 * file and tensor, nothing left allocated; argument checks of the calls;
 * saved weights load back bit for bit. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "pfx_test.h"
#include "model_folder.h"

static ref_model_config tiny_gpt2(void)
{
    ref_model_config c = { 0 };
    c.family = REF_MODEL_GPT2;
    c.layers = 2;
    c.hidden = 18;
    c.heads = 3;
    c.kv_heads = 3;
    c.head_dim = 6;
    c.inner = 25;
    c.vocab = 29;
    c.max_positions = 24;
    c.eps = 1e-5;
    return c;
}

static ref_model_config tiny_llama(void)
{
    ref_model_config c = { 0 };
    c.family = REF_MODEL_LLAMA;
    c.layers = 2;
    c.hidden = 16;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 4;
    c.inner = 22;
    c.vocab = 31;
    c.max_positions = 64;
    c.eps = 1e-6;
    c.act = REF_ACT_SILU;
    c.rope.theta = 10000.0;
    return c;
}

static const char gpt2_small[] =
    "{\"model_type\": \"gpt2\", \"activation_function\": \"gelu_new\", \"n_embd\": 768, "
    "\"n_head\": 12, "
    "\"n_inner\": null, \"n_layer\": 12, \"n_positions\": 1024, \"vocab_size\": 50257, "
    "\"layer_norm_epsilon\": 1e-05, \"scale_attn_weights\": true, "
    "\"scale_attn_by_inverse_layer_idx\": false, "
    "\"reorder_and_upcast_attn\": false, \"tie_word_embeddings\": true}";

static void test_shape_from_config(void **state)
{
    (void)state;
    char *dir = tf_tempdir("cfg");
    assert_int_equal(tf_write_config_text(dir, gpt2_small), 0);
    pfx_model_shape s;
    assert_int_equal(pfx_model_read_config(dir, &s), PFX_SUCCESS);
    assert_string_equal(s.model_type, "gpt2");
    assert_int_equal(s.parameters, 124439808);
    assert_int_equal(s.layers, 12);
    assert_int_equal(s.heads, 12);
    assert_int_equal(s.kv_heads, 12);
    assert_int_equal(s.head_dim, 64);
    assert_int_equal(s.intermediate, 3072);
    assert_true(s.tied_embeddings);
    assert_int_equal(s.eos_count, 0); /* no eos_token_id */
    /* the prefix encoder on it: prefix 20, hidden 512 */
    pfx_encoder_params ep = { .layers = s.layers,
                              .kv_heads = s.kv_heads,
                              .head_dim = s.head_dim,
                              .prefix_len = 20,
                              .embed_dim = 512,
                              .hidden_dim = 512 };
    pfx_encoder_param_counts counts;
    assert_int_equal(pfx_encoder_params_counts(&ep, &counts), PFX_SUCCESS);
    assert_int_equal(counts.trainable, 9728512);

    /* Llama 3.2 1B's published shape: 1,235,814,400 parameters (tied) */
    assert_int_equal(
        tf_write_config_text(
            dir,
            "{\"model_type\": \"llama\", \"hidden_size\": 2048, \"intermediate_size\": 8192, "
            "\"num_hidden_layers\": 16, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, "
            "\"head_dim\": 64, "
            "\"vocab_size\": 128256, \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-05, "
            "\"hidden_act\": \"silu\", \"tie_word_embeddings\": true, \"rope_theta\": 500000.0, "
            "\"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": "
            "1.0, "
            "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}}"),
        0);
    assert_int_equal(pfx_model_read_config(dir, &s), PFX_SUCCESS);
    assert_int_equal(s.parameters, 1235814400);
    assert_int_equal(s.kv_heads, 8);

    /* eos_token_id: one id, a list (Llama 3's), null */
    static const struct {
        const char *value;
        size_t count;
        int32_t ids[3];
    } eos[] = { { "50256", 1, { 50256 } },
                { "[128001, 128008, 128009]", 3, { 128001, 128008, 128009 } },
                { "null", 0, { 0 } } };
    for (size_t k = 0; k < sizeof(eos) / sizeof(eos[0]); k++) {
        char text[sizeof(gpt2_small) + 64];
        snprintf(text, sizeof(text), "{\"eos_token_id\": %s, %s", eos[k].value, gpt2_small + 1);
        assert_int_equal(tf_write_config_text(dir, text), 0);
        assert_int_equal(pfx_model_read_config(dir, &s), PFX_SUCCESS);
        assert_int_equal(s.eos_count, eos[k].count);
        for (size_t i = 0; i < eos[k].count; i++)
            assert_int_equal(s.eos_ids[i], eos[k].ids[i]);
    }
    tf_rmdir(dir);
    free(dir);
}

typedef struct bad_config {
    const char *json;
    pfx_status status;
    const char *needle;
} bad_config;

static void test_bad_configs(void **state)
{
    pfx_runtime *rt = *state;
    static const bad_config cases[] = {
        { "{\"model_type\": \"bert\", \"hidden_size\": 8}", PFX_ERROR_UNSUPPORTED, "bert" },
        { "{\"n_embd\": 8}", PFX_ERROR_FORMAT, "model_type" },
        { "{\"model_type\": \"gpt2\", \"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 9, "
          "\"n_positions\": 8}",
          PFX_ERROR_FORMAT, "n_embd" },
        { "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
          "\"vocab_size\": 9, "
          "\"n_positions\": 8, \"activation_function\": \"swishy\"}",
          PFX_ERROR_UNSUPPORTED, "activation_function" },
        { "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
          "\"vocab_size\": 9, "
          "\"n_positions\": 8, \"scale_attn_by_inverse_layer_idx\": true}",
          PFX_ERROR_UNSUPPORTED, "scale_attn_by_inverse_layer_idx" },
        { "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
          "\"vocab_size\": 9, "
          "\"n_positions\": 8, \"reorder_and_upcast_attn\": true}",
          PFX_ERROR_UNSUPPORTED, "reorder_and_upcast_attn" },
        { "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 3, "
          "\"vocab_size\": 9, "
          "\"n_positions\": 8}",
          PFX_ERROR_INVALID_SHAPE, "n_head" },
        { "{\"model_type\": \"gpt2\", \"n_embd\": -8, \"n_layer\": 1, \"n_head\": 2, "
          "\"vocab_size\": 9, "
          "\"n_positions\": 8}",
          PFX_ERROR_FORMAT, "n_embd" },
        { "{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 8, "
          "\"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 4, \"vocab_size\": 9, \"max_position_embeddings\": 8, "
          "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 2.0}}",
          PFX_ERROR_UNSUPPORTED, "yarn" },
        { "{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 8, "
          "\"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 4, \"vocab_size\": 9, \"max_position_embeddings\": 8, "
          "\"rope_parameters\": {\"rope_type\": \"dynamic\", \"rope_theta\": 10000.0}}",
          PFX_ERROR_UNSUPPORTED, "dynamic" },
        { "{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 8, "
          "\"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 4, \"vocab_size\": 9, \"max_position_embeddings\": 8, "
          "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 2.0}}",
          PFX_ERROR_FORMAT, "low_freq_factor" },
        { "{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 8, "
          "\"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 4, \"vocab_size\": 9, \"max_position_embeddings\": 8, "
          "\"hidden_act\": \"gelu\"}",
          PFX_ERROR_UNSUPPORTED, "hidden_act" },
        { "{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 8, "
          "\"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 4, \"vocab_size\": 9, \"max_position_embeddings\": 8, "
          "\"mlp_bias\": true}",
          PFX_ERROR_UNSUPPORTED, "mlp_bias" },
        { "{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 8, "
          "\"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 4, \"vocab_size\": 9, \"max_position_embeddings\": 8, "
          "\"attention_bias\": true}",
          PFX_ERROR_UNSUPPORTED, "attention_bias" },
        { "{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 8, "
          "\"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 4, \"num_key_value_heads\": 3, \"vocab_size\": 9, "
          "\"max_position_embeddings\": 8}",
          PFX_ERROR_INVALID_SHAPE, "num_key_value_heads" },
        { "{\"model_type\": \"qwen2\", \"hidden_size\": 16, \"intermediate_size\": 8, "
          "\"num_hidden_layers\": 1, "
          "\"num_attention_heads\": 4, \"vocab_size\": 9, \"max_position_embeddings\": 8, "
          "\"is_encoder_decoder\": true}",
          PFX_ERROR_UNSUPPORTED, "is_encoder_decoder" },
        { "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
          "\"vocab_size\": 9, "
          "\"n_positions\": 8, \"eos_token_id\": -1}",
          PFX_ERROR_FORMAT, "eos_token_id" },
        { "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
          "\"vocab_size\": 9, "
          "\"n_positions\": 8, \"eos_token_id\": [1, \"2\"]}",
          PFX_ERROR_FORMAT, "eos_token_id" },
        { "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
          "\"vocab_size\": 9, "
          "\"n_positions\": 8, \"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}",
          PFX_ERROR_FORMAT, "eos_token_id" },
        { "{\"model_type\": \"gpt2\", \"model_type\": \"llama\"}", PFX_ERROR_FORMAT, "twice" },
        { "[1, 2]", PFX_ERROR_FORMAT, "object" },
        { "{\"model_type\": ", PFX_ERROR_FORMAT, "JSON" },
    };
    char *dir = tf_tempdir("badcfg");
    size_t live0 = pfx_test_live_bytes(rt);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(tf_write_config_text(dir, cases[i].json), 0);
        pfx_model_shape s;
        assert_status_names(NULL, pfx_model_read_config(dir, &s), cases[i].status, cases[i].needle);
        pfx_model *m = (pfx_model *)&s; /* must come back NULL */
        assert_status_names(rt, pfx_model_load(rt, dir, NULL, &m), cases[i].status,
                            cases[i].needle);
        assert_null(m);
        assert_status_names(rt, pfx_model_create_random(rt, dir, NULL, 1, &m), cases[i].status,
                            cases[i].needle);
        assert_null(m);
        assert_int_equal(pfx_test_live_bytes(rt), live0);
    }
    /* mistral: a sliding window shorter than what the caller asks for */
    assert_int_equal(
        tf_write_config_text(dir, "{\"model_type\": \"mistral\", \"hidden_size\": 16, "
                                  "\"intermediate_size\": 8, \"num_hidden_layers\": 1, "
                                  "\"num_attention_heads\": 4, \"vocab_size\": 9, "
                                  "\"max_position_embeddings\": 64, \"sliding_window\": 12}"),
        0);
    pfx_model *m = NULL;
    pfx_context *ctx = NULL;
    pfx_model_params p = { 0 };
    pfx_context_params cp = { .max_tokens = 10, .max_prefix_len = 3 };
    assert_int_equal(pfx_model_create_random(rt, dir, &p, 1, &m), PFX_SUCCESS);
    assert_status_names(rt, pfx_context_create(m, &cp, &ctx), PFX_ERROR_UNSUPPORTED,
                        "sliding_window");
    assert_null(ctx);
    cp.max_prefix_len = 2; /* 12 keys fit the window */
    assert_int_equal(pfx_context_create(m, &cp, &ctx), PFX_SUCCESS);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&m);
    /* GPT-2: P + N beyond n_positions */
    assert_int_equal(tf_write_config_text(dir, "{\"model_type\": \"gpt2\", \"n_embd\": 8, "
                                               "\"n_layer\": 1, \"n_head\": 2, \"vocab_size\": 9, "
                                               "\"n_positions\": 16}"),
                     0);
    cp.max_tokens = 12;
    cp.max_prefix_len = 5;
    assert_int_equal(pfx_model_create_random(rt, dir, &p, 1, &m), PFX_SUCCESS);
    assert_status_names(rt, pfx_context_create(m, &cp, &ctx), PFX_ERROR_OUT_OF_RANGE,
                        "n_positions");
    pfx_model_destroy(&m);
    p.storage = (pfx_dtype)7;
    assert_status_names(rt, pfx_model_create_random(rt, dir, &p, 1, &m), PFX_ERROR_INVALID_ARGUMENT,
                        "storage");
    assert_int_equal(pfx_test_live_bytes(rt), live0);
    /* no config at all */
    char path[600];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    unlink(path);
    assert_status_names(rt, pfx_model_load(rt, dir, NULL, &m), PFX_ERROR_IO, "config.json");
    assert_status_names(rt, pfx_model_load(rt, NULL, NULL, &m), PFX_ERROR_NULL_ARGUMENT, "dir");
    assert_status_names(NULL, pfx_model_load(NULL, dir, NULL, &m), PFX_ERROR_NULL_ARGUMENT, "rt");
    tf_rmdir(dir);
    free(dir);
}

/* Writes `m` into a fresh folder, expects the load to fail with `status`
 * and a message naming every needle, and nothing left allocated. */
static void expect_load_failure(pfx_runtime *rt, tf_model *m, unsigned shards,
                                void (*mutate)(const char *dir), pfx_status status,
                                const char *needle, const char *needle2)
{
    char *dir = tf_tempdir("badckpt");
    assert_int_equal(tf_write(m, dir, shards), 0);
    if (mutate)
        mutate(dir);
    size_t live0 = pfx_test_live_bytes(rt);
    pfx_model *model = NULL;
    assert_status_names(rt, pfx_model_load(rt, dir, NULL, &model), status, needle);
    if (needle2 && !strstr(pfx_last_error(rt), needle2))
        fail_msg("message '%s' does not name '%s'", pfx_last_error(rt), needle2);
    assert_null(model);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
    tf_rmdir(dir);
    free(dir);
}

static void remove_shard2(const char *dir)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/model-00002-of-00003.safetensors", dir);
    assert_int_equal(unlink(path), 0);
}

static void truncate_shard3(const char *dir)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/model-00003-of-00003.safetensors", dir);
    FILE *fp = fopen(path, "rb+");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fclose(fp);
    assert_int_equal(truncate(path, n - 10), 0);
}

static void index_escapes(const char *dir)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs("{\"weight_map\": {\"model.embed_tokens.weight\": "
          "\"../model-00001-of-00003.safetensors\"}}",
          fp);
    fclose(fp);
}

static void remove_single(const char *dir)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    assert_int_equal(unlink(path), 0);
}

static void test_bad_checkpoints(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config g = tiny_gpt2(), l = tiny_llama();
    tf_model m;

    /* a missing tensor: the last one (ln_f.bias) left out of the file */
    tf_model_init(&m, &g, true, "gpt2", 1);
    m.count--;
    expect_load_failure(rt, &m, 1, NULL, PFX_ERROR_FORMAT, "transformer.ln_f.bias",
                        "model.safetensors");
    m.count++;
    tf_model_free(&m);

    /* a shape that disagrees with the config */
    tf_model_init(&m, &g, true, "gpt2", 2);
    tf_tensor *t = tf_find(&m, "transformer.h.1.mlp.c_fc.weight");
    assert_non_null(t);
    t->shape[0] = g.inner;
    t->shape[1] = g.hidden; /* [I, C]: a Linear's orientation, not Conv1D's */
    expect_load_failure(rt, &m, 1, NULL, PFX_ERROR_INVALID_SHAPE, "transformer.h.1.mlp.c_fc.weight",
                        "model.safetensors");
    tf_model_free(&m);

    /* an integer tensor where a weight is expected */
    tf_model_init(&m, &g, true, "gpt2", 3);
    t = tf_find(&m, "transformer.h.0.ln_2.weight");
    snprintf(t->dtype, sizeof(t->dtype), "I32");
    expect_load_failure(rt, &m, 1, NULL, PFX_ERROR_DTYPE_MISMATCH, "transformer.h.0.ln_2.weight",
                        "I32");
    tf_model_free(&m);

    /* a tensor of a layer the config does not have */
    tf_model_init(&m, &g, true, "gpt2", 4);
    t = tf_find(&m, "transformer.h.1.ln_1.bias");
    snprintf(t->name, sizeof(t->name), "transformer.h.2.ln_1.bias");
    expect_load_failure(rt, &m, 1, NULL, PFX_ERROR_FORMAT, "transformer.h.2.ln_1.bias", "2 layers");
    tf_model_free(&m);

    /* no weights file at all */
    tf_model_init(&m, &g, true, "gpt2", 5);
    expect_load_failure(rt, &m, 1, remove_single, PFX_ERROR_IO, "model.safetensors", NULL);
    tf_model_free(&m);

    /* sharded: a missing shard, a truncated shard, an index that leaves the folder */
    tf_model_init(&m, &l, false, "llama", 6);
    expect_load_failure(rt, &m, 3, remove_shard2, PFX_ERROR_IO, "model-00002-of-00003.safetensors",
                        NULL);
    expect_load_failure(rt, &m, 3, truncate_shard3, PFX_ERROR_OUT_OF_RANGE,
                        "model-00003-of-00003.safetensors", NULL);
    expect_load_failure(rt, &m, 3, index_escapes, PFX_ERROR_FORMAT, "model.embed_tokens.weight",
                        "index");
    /* the untied head missing from an untied model */
    t = tf_find(&m, "lm_head.weight");
    snprintf(t->name, sizeof(t->name), "lm_head.bias");
    expect_load_failure(rt, &m, 2, NULL, PFX_ERROR_FORMAT, "lm_head.bias", "index");
    tf_model_free(&m);
}

/* A fresh runtime: its peak_bytes tells whether a call allocated anything. */
static pfx_runtime *fresh_runtime(void)
{
    pfx_runtime *rt = NULL;
    assert_int_equal(pfx_runtime_create(&rt, NULL), PFX_SUCCESS);
    return rt;
}

/* Writes `m` (whose rc may disagree with its tensors) and expects the load
 * to fail with `status` naming both needles before the first device
 * allocation, within a second. */
static void expect_refused_before_allocation(tf_model *m, unsigned shards, pfx_status status,
                                             const char *needle, const char *needle2)
{
    pfx_runtime *rt = fresh_runtime();
    char *dir = tf_tempdir("precheck");
    assert_int_equal(tf_write(m, dir, shards), 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pfx_model *model = NULL;
    assert_status_names(rt, pfx_model_load(rt, dir, NULL, &model), status, needle);
    double s = pfx_test_seconds_since(&t0);
    if (needle2 && !strstr(pfx_last_error(rt), needle2))
        fail_msg("message '%s' does not name '%s'", pfx_last_error(rt), needle2);
    assert_null(model);
    pfx_memory_stats ms;
    assert_int_equal(pfx_runtime_memory(rt, &ms), PFX_SUCCESS);
    if (ms.peak_bytes)
        fail_msg("%zu device bytes allocated before the checkpoint was refused", ms.peak_bytes);
    if (s > 1.0)
        fail_msg("refusing the checkpoint took %.2f s", s);
    pfx_runtime_destroy(&rt);
    tf_rmdir(dir);
    free(dir);
}

/* The checkpoint is checked against the config before anything is
 * allocated: a config of 4,000 or 1,000,000 layers beside a 2-layer file,
 * vocabulary, positions and inner sizes (2^28, 2^31) the file disagrees
 * with: the tensor and the config field named, no device byte taken. */
static void test_checked_before_allocation(void **state)
{
    (void)state;
    ref_model_config g = tiny_gpt2(), l = tiny_llama();
    tf_model m;
    tf_model_init(&m, &g, true, "gpt2", 11);
    m.rc.layers = 4000;
    expect_refused_before_allocation(&m, 1, PFX_ERROR_FORMAT, "transformer.h.2.ln_1.weight",
                                     "is missing");
    m.rc.layers = 1000000;
    expect_refused_before_allocation(&m, 1, PFX_ERROR_FORMAT, "transformer.h.2.ln_1.weight",
                                     "1000000 layers");
    m.rc.layers = g.layers;
    m.rc.vocab = (size_t)1 << 28;
    expect_refused_before_allocation(&m, 1, PFX_ERROR_INVALID_SHAPE, "transformer.wte.weight",
                                     "vocab_size 268435456");
    m.rc.vocab = g.vocab;
    m.rc.max_positions = (size_t)1 << 31;
    expect_refused_before_allocation(&m, 1, PFX_ERROR_INVALID_SHAPE, "transformer.wpe.weight",
                                     "n_positions");
    m.rc.max_positions = g.max_positions;
    m.rc.inner = (size_t)1 << 28;
    expect_refused_before_allocation(&m, 1, PFX_ERROR_INVALID_SHAPE,
                                     "transformer.h.0.mlp.c_fc.weight", "n_inner");
    tf_model_free(&m);

    tf_model_init(&m, &l, false, "llama", 12);
    m.rc.inner = (size_t)1 << 31;
    expect_refused_before_allocation(&m, 2, PFX_ERROR_INVALID_SHAPE,
                                     "model.layers.0.mlp.gate_proj.weight",
                                     "intermediate_size 2147483648");
    m.rc.inner = l.inner;
    m.rc.vocab = (size_t)1 << 28;
    expect_refused_before_allocation(&m, 2, PFX_ERROR_INVALID_SHAPE, "model.embed_tokens.weight",
                                     "vocab_size");
    m.rc.vocab = l.vocab;
    m.rc.layers = 4000;
    expect_refused_before_allocation(&m, 3, PFX_ERROR_FORMAT, "model.layers.2.", "is missing");
    tf_model_free(&m);
}

/* Rewrites the index with one entry changed: `name` dropped (shard NULL) or
 * moved to `shard`. */
static void rewrite_index(const char *dir, const char *name, const char *shard)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    static char text[1 << 16], out[1 << 16];
    size_t n = fread(text, 1, sizeof(text) - 1, fp);
    fclose(fp);
    text[n] = 0;
    char key[160];
    snprintf(key, sizeof(key), "\"%s\": \"", name);
    char *at = strstr(text, key);
    assert_non_null(at);
    char *end = strchr(at + strlen(key), '"') + 1; /* past the shard's closing quote */
    if (shard) {
        snprintf(out, sizeof(out), "%.*s%s%s\"%s", (int)(at - text), text, key, shard, end);
    } else {
        if (*end == ',')
            end += 2; /* ", " after it */
        else if (at - text >= 2 && at[-2] == ',')
            at -= 2; /* the last entry: ", " before it */
        snprintf(out, sizeof(out), "%.*s%s", (int)(at - text), text, end);
    }
    fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(out, fp);
    fclose(fp);
}

static void index_drops_norm(const char *dir)
{
    rewrite_index(dir, "model.layers.0.input_layernorm.weight", NULL);
}

static void index_moves_norm(const char *dir)
{
    rewrite_index(dir, "model.layers.0.input_layernorm.weight", "model-00003-of-00003.safetensors");
}

static void index_drops_lm_head(const char *dir)
{
    rewrite_index(dir, "lm_head.weight", NULL);
}

/* The index is the contract: a shard's tensor missing from it, or listed
 * under another shard, fails the load. */
static void test_index_disagrees_with_shards(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config l = tiny_llama();
    tf_model m;
    tf_model_init(&m, &l, true, "llama", 13);
    /* a tied model's lm_head.weight is skipped, but the index still lists it */
    tf_tensor *head = &m.t[m.count++];
    memset(head, 0, sizeof(*head));
    snprintf(head->name, sizeof(head->name), "lm_head.weight");
    snprintf(head->dtype, sizeof(head->dtype), "F32");
    head->ndim = 2;
    head->shape[0] = l.vocab;
    head->shape[1] = l.hidden;
    head->data = calloc(l.vocab * l.hidden, sizeof(float));
    assert_non_null(head->data);
    expect_load_failure(rt, &m, 3, index_drops_norm, PFX_ERROR_FORMAT,
                        "model.layers.0.input_layernorm.weight", "not listed");
    expect_load_failure(rt, &m, 3, index_moves_norm, PFX_ERROR_FORMAT,
                        "model.layers.0.input_layernorm.weight",
                        "model-00003-of-00003.safetensors");
    expect_load_failure(rt, &m, 3, index_drops_lm_head, PFX_ERROR_FORMAT, "lm_head.weight",
                        "not listed");
    /* the folder as written loads */
    char *dir = tf_tempdir("goodshards");
    assert_int_equal(tf_write(&m, dir, 3), 0);
    pfx_model *model = NULL;
    assert_int_equal(pfx_model_load(rt, dir, NULL, &model), PFX_SUCCESS);
    pfx_model_destroy(&model);
    tf_rmdir(dir);
    free(dir);
    tf_model_free(&m);
}

/* A shard that is a symbolic link to a file outside the folder (Hugging
 * Face's cache: snapshots/<rev>/ links to blobs/) is followed. */
static void test_symlinked_shard(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config l = tiny_llama();
    tf_model m;
    tf_model_init(&m, &l, false, "llama", 14);
    char *dir = tf_tempdir("snapshot"), *blobs = tf_tempdir("blobs");
    assert_int_equal(tf_write(&m, dir, 3), 0);
    char in[600], out[600];
    snprintf(in, sizeof(in), "%s/model-00002-of-00003.safetensors", dir);
    snprintf(out, sizeof(out), "%s/blob", blobs);
    assert_int_equal(rename(in, out), 0);
    assert_int_equal(symlink(out, in), 0);
    pfx_model *model = NULL;
    if (pfx_model_load(rt, dir, NULL, &model) != PFX_SUCCESS)
        fail_msg("%s", pfx_last_error(rt));
    pfx_model_destroy(&model);
    tf_rmdir(dir);
    tf_rmdir(blobs);
    free(dir);
    free(blobs);
    tf_model_free(&m);
}

/* Argument checks of the calls, on a loaded tiny model. */
static void test_call_arguments(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config g = tiny_gpt2();
    tf_model tm;
    tf_model_init(&tm, &g, true, "gpt2", 9);
    char *dir = tf_tempdir("args");
    assert_int_equal(tf_write(&tm, dir, 1), 0);
    pfx_context_params p = { .max_batch = 2, .max_tokens = 6, .max_prefix_len = 2 };
    pfx_model *m = NULL;
    pfx_context *ctx = NULL;
    assert_int_equal(pfx_model_load(rt, dir, NULL, &m), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(m, &p, &ctx), PFX_SUCCESS);
    pfx_model_shape s;
    assert_int_equal(pfx_model_get_shape(m, &s), PFX_SUCCESS);
    assert_int_equal(s.vocab, g.vocab);
    int32_t ids[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
    int32_t lens[2] = { 6, 3 };
    pfx_model_batch b = { 2, 6, ids, lens, NULL };
    size_t shape[3] = { 2, 6, g.vocab };
    pfx_tensor *logits = NULL, *small = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &logits), PFX_SUCCESS);
    shape[2] = g.vocab - 1;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &small), PFX_SUCCESS);
    assert_int_equal(pfx_model_forward(ctx, &b, NULL, logits), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_forward(ctx, &b, NULL, small), PFX_ERROR_INVALID_SHAPE,
                        "logits");
    assert_status_names(rt, pfx_model_forward(ctx, NULL, NULL, logits), PFX_ERROR_NULL_ARGUMENT,
                        "batch");
    ids[4] = (int32_t)g.vocab;
    assert_status_names(rt, pfx_model_forward(ctx, &b, NULL, logits), PFX_ERROR_OUT_OF_RANGE,
                        "ids[4]");
    ids[4] = 0;
    lens[1] = 0;
    assert_status_names(rt, pfx_model_forward(ctx, &b, NULL, logits), PFX_ERROR_OUT_OF_RANGE,
                        "lens[1]");
    lens[1] = 3;
    b.batch = 3;
    assert_status_names(rt, pfx_model_forward(ctx, &b, NULL, logits), PFX_ERROR_OUT_OF_RANGE,
                        "max_batch");
    b.batch = 2;
    pfx_model_prefix pre = { .prefix_len = 3 };
    assert_status_names(rt, pfx_model_forward(ctx, &b, &pre, logits), PFX_ERROR_OUT_OF_RANGE,
                        "max_prefix_len");
    pre.prefix_len = 2;
    assert_status_names(rt, pfx_model_forward(ctx, &b, &pre, logits), PFX_ERROR_NULL_ARGUMENT,
                        "prefix.keys");
    pfx_model_prefix gain = { .gain_mode = PFX_GAIN_TANH, .gain_ramp = 1.0f };
    assert_status_names(rt, pfx_model_forward(ctx, &b, &gain, logits), PFX_ERROR_NULL_ARGUMENT,
                        "gains");
    int32_t labels[12];
    for (int i = 0; i < 12; i++)
        labels[i] = -100;
    b.labels = labels;
    double loss;
    assert_status_names(rt, pfx_model_loss(ctx, &b, NULL, &loss), PFX_ERROR_INVALID_ARGUMENT,
                        "no label");
    labels[3] = 1000;
    assert_status_names(rt, pfx_model_loss(ctx, &b, NULL, &loss), PFX_ERROR_OUT_OF_RANGE,
                        "labels[3]");
    b.labels = NULL;
    assert_int_equal(pfx_model_loss(ctx, &b, NULL, &loss), PFX_SUCCESS);
    assert_true(loss > 0.0);
    assert_status_names(rt, pfx_model_loss(ctx, &b, NULL, NULL), PFX_ERROR_NULL_ARGUMENT, "loss");
    /* a gradient of the wrong shape */
    size_t hs[1] = { g.heads + 1 };
    pfx_tensor *dg = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hs, &dg), PFX_SUCCESS);
    pfx_tensor *dgs[2] = { dg, NULL };
    pfx_model_grads grads = { .gains = dgs };
    assert_status_names(rt, pfx_model_backward(ctx, &b, NULL, &grads, NULL),
                        PFX_ERROR_INVALID_SHAPE, "grads.gains[0]");
    /* one tensor given twice */
    size_t hs2[1] = { g.heads };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hs2, &dgs[1]), PFX_SUCCESS);
    pfx_tensor *twice[2] = { dgs[1], dgs[1] };
    grads.gains = twice;
    assert_status_names(rt, pfx_model_backward(ctx, &b, NULL, &grads, NULL), PFX_ERROR_ALIASING,
                        "grads.gains[1]");
    pfx_tensor_destroy(&dgs[1]);
    pfx_tensor_destroy(&dg);
    pfx_tensor_destroy(&logits);
    pfx_tensor_destroy(&small);
    pfx_context_destroy(&ctx);
    pfx_context_destroy(&ctx); /* NULL-safe */
    pfx_context_destroy(NULL);
    pfx_model_destroy(&m);
    pfx_model_destroy(&m); /* NULL-safe */
    pfx_model_destroy(NULL);
    tf_rmdir(dir);
    free(dir);
    tf_model_free(&tm);
}

/* The logits of ids on m, to the host. */
static float *logits_of(pfx_runtime *rt, pfx_model *m, size_t vocab)
{
    pfx_context_params cp = { .max_batch = 2, .max_tokens = 5 };
    pfx_context *ctx = NULL;
    assert_int_equal(pfx_context_create(m, &cp, &ctx), PFX_SUCCESS);
    int32_t ids[10] = { 1, 5, 2, 7, 3, 0, 4, 6, 2, 1 };
    pfx_model_batch b = { 2, 5, ids, NULL, NULL };
    size_t shape[3] = { 2, 5, vocab };
    pfx_tensor *t = NULL;
    float *host = malloc(2 * 5 * vocab * sizeof(float));
    assert_non_null(host);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &t), PFX_SUCCESS);
    assert_int_equal(pfx_model_forward(ctx, &b, NULL, t), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(t, 0, 2 * 5 * vocab, host), PFX_SUCCESS);
    pfx_tensor_destroy(&t);
    pfx_context_destroy(&ctx);
    return host;
}

/* pfx_model_save of a random model (GPT-2, Llama with its stacked
 * q, k, v, Qwen2 with their biases too; float32 and half storage) writes
 * what pfx_model_load reads back bit for bit: the same logits. */
static void test_save_weights_round_trip(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config cfgs[3] = { tiny_gpt2(), tiny_llama(), tiny_llama() };
    cfgs[2].qkv_bias = true;
    static const char *const types[3] = { "gpt2", "llama", "qwen2" };
    for (int k = 0; k < 3; k++)
        for (int half = 0; half < 2; half++) {
            tf_model tm;
            tf_model_init(&tm, &cfgs[k], k == 0, types[k], 4);
            char *dir = tf_tempdir("save");
            assert_int_equal(tf_write(&tm, dir, 1), 0); /* config.json (the weights are replaced) */
            pfx_model_params p = { .storage = half ? PFX_DTYPE_F16 : PFX_DTYPE_F32 };
            pfx_model *made = NULL, *loaded = NULL;
            assert_int_equal(pfx_model_create_random(rt, dir, &p, 77, &made), PFX_SUCCESS);
            char path[4200];
            snprintf(path, sizeof(path), "%s/model.safetensors", dir);
            assert_int_equal(pfx_model_save(made, dir, NULL), PFX_SUCCESS);
            pfx_safetensors *f = NULL;
            assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
            assert_string_equal(pfx_safetensors_metadata_get(f, "format"), "pt");
            pfx_safetensors_close(&f);
            assert_int_equal(pfx_model_load(rt, dir, &p, &loaded), PFX_SUCCESS);
            float *a = logits_of(rt, made, cfgs[k].vocab),
                  *b = logits_of(rt, loaded, cfgs[k].vocab);
            assert_memory_equal(a, b, 2 * 5 * cfgs[k].vocab * sizeof(float));
            free(a);
            free(b);
            assert_status_names(rt, pfx_model_save(made, NULL, NULL), PFX_ERROR_NULL_ARGUMENT,
                                "dir");
            pfx_model_destroy(&made);
            pfx_model_destroy(&loaded);
            tf_rmdir(dir);
            free(dir);
            tf_model_free(&tm);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_from_config),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_bad_checkpoints),
        cmocka_unit_test(test_checked_before_allocation),
        cmocka_unit_test(test_index_disagrees_with_shards),
        cmocka_unit_test(test_symlinked_shard),
        cmocka_unit_test(test_call_arguments),
        cmocka_unit_test(test_save_weights_round_trip),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
