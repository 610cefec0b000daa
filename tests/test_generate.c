/* Serving prefix adapters (generate.h) on the tiny GPT-2 and Llama models of
 * tests/fixtures/generate (made by make_generate_fixture.py): greedy tokens
 * equal to transformers + PEFT generate, a batch of four adapters equal to
 * each request alone, the cache's growth and memory, sampling, bad
 * adapters and steps. argv[1]: the fixture folder. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "prefixcl/generate.h"
#include "half.h"
#include "prefixcl/io.h"
#include "tolerances.h"

static const char *g_fixtures;

#define MAX_CASES 32
#define MAX_IDS   16
#define NEW       7

typedef struct gcase {
    int32_t adapter;
    int32_t prompt[MAX_IDS];
    size_t prompt_len;
    int32_t expect[MAX_IDS];
    size_t expect_len;
} gcase;

typedef struct world {
    pfx_runtime *rt;
    pfx_model *model;
    pfx_context *ctx;
    pfx_adapter_bank *bank;
    pfx_kv_cache *cache;
    gcase cases[MAX_CASES];
    size_t count;
    char dir[1024];
} world;

static size_t parse_ids(char *s, int32_t *out)
{
    size_t n = 0;
    for (char *tok = strtok(s, " "); tok && n < MAX_IDS; tok = strtok(NULL, " "))
        out[n++] = (int32_t)strtol(tok, NULL, 10);
    return n;
}

static void read_cases(world *w)
{
    char path[1200], line[512];
    snprintf(path, sizeof(path), "%s/expected.txt", w->dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) && w->count < MAX_CASES) {
        gcase *c = &w->cases[w->count++];
        char *a = strtok(line, "\t"), *p = strtok(NULL, "\t"), *g = strtok(NULL, "\t\n");
        assert_non_null(g);
        c->adapter = a[0] == '-' ? -1 : (int32_t)strtol(a + strlen("adapter"), NULL, 10);
        char pb[256], gb[256];
        snprintf(pb, sizeof(pb), "%s", p);
        snprintf(gb, sizeof(gb), "%s", g);
        c->prompt_len = parse_ids(pb, c->prompt);
        c->expect_len = parse_ids(gb, c->expect);
        assert_int_equal(c->expect_len, NEW);
    }
    fclose(f);
    assert_true(w->count >= 8);
}

static void open_world(world *w, pfx_runtime *rt, const char *family)
{
    memset(w, 0, sizeof(*w));
    w->rt = rt;
    snprintf(w->dir, sizeof(w->dir), "%s/%s", g_fixtures, family);
    pfx_context_params cp = { .max_batch = 4, .max_tokens = 12, .max_prefix_len = 8 };
    assert_int_equal(pfx_model_load(rt, w->dir, NULL, &w->model), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(w->model, &cp, &w->ctx), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_create(w->model, 4, &w->bank), PFX_SUCCESS);
    for (int a = 0; a < 4; a++) {
        char path[1200];
        int32_t entry = -1;
        snprintf(path, sizeof(path), "%s/adapter%d", w->dir, a);
        pfx_status st = pfx_adapter_bank_add(w->bank, path, &entry);
        if (st != PFX_SUCCESS)
            fail_msg("%s: %s", path, pfx_last_error(rt));
        assert_int_equal(entry, a);
    }
    assert_int_equal(pfx_kv_cache_create(w->model, 4, 24, &w->cache), PFX_SUCCESS);
    read_cases(w);
}

static void close_world(world *w)
{
    pfx_kv_cache_destroy(&w->cache);
    pfx_adapter_bank_destroy(&w->bank);
    pfx_context_destroy(&w->ctx);
    pfx_model_destroy(&w->model);
}

static const pfx_sampling greedy = { .max_new_tokens = NEW };

static void expect_tokens(const gcase *c, const pfx_request *q, const char *what)
{
    assert_int_equal(q->out_len, NEW);
    for (size_t i = 0; i < NEW; i++)
        if (q->out[i] != c->expect[i])
            fail_msg("%s: adapter %d, token %zu: %d, HF + PEFT %d", what, (int)c->adapter, i,
                     (int)q->out[i], (int)c->expect[i]);
}

static pfx_request request_of(const gcase *c, int32_t *out)
{
    pfx_request q = { c->prompt, c->prompt_len, c->adapter, 1, out, 0, false };
    return q;
}

/* Every case alone: greedy tokens equal HF + PEFT generate. */
static void hf_greedy(void **state, const char *family)
{
    world w;
    open_world(&w, *state, family);
    for (size_t i = 0; i < w.count; i++) {
        int32_t out[NEW];
        pfx_request q = request_of(&w.cases[i], out);
        pfx_status st = pfx_generate(w.ctx, w.cache, w.bank, &q, 1, &greedy, NULL, NULL, NULL);
        if (st != PFX_SUCCESS)
            fail_msg("generate: %s", pfx_last_error(w.rt));
        expect_tokens(&w.cases[i], &q, family);
    }
    close_world(&w);
}

static void test_hf_greedy_gpt2(void **state)
{
    hf_greedy(state, "gpt2");
}

static void test_hf_greedy_llama(void **state)
{
    hf_greedy(state, "llama");
}

/* Four requests, four adapters (and then three adapters and a bare request)
 * in one batch: each gets the tokens it gets alone (= HF + PEFT). */
static void batch_of_four(void **state, const char *family)
{
    world w;
    open_world(&w, *state, family);
    for (int round = 0; round < 2; round++) {
        const gcase *pick[4] = { NULL, NULL, NULL, NULL };
        const int32_t want[4] = { 0, round ? -1 : 1, 2, 3 };
        for (size_t i = w.count; i-- > 0;)
            for (int r = 0; r < 4; r++)
                if (w.cases[i].adapter == want[r])
                    pick[r] = &w.cases[i];
        int32_t out[4][NEW];
        pfx_request q[4];
        for (int r = 0; r < 4; r++) {
            assert_non_null(pick[r]);
            q[r] = request_of(pick[r], out[r]);
        }
        assert_true(q[0].prompt_len != q[1].prompt_len || q[1].prompt_len != q[2].prompt_len);
        pfx_generate_stats stats;
        pfx_status st = pfx_generate(w.ctx, w.cache, w.bank, q, 4, &greedy, NULL, NULL, &stats);
        if (st != PFX_SUCCESS)
            fail_msg("generate: %s", pfx_last_error(w.rt));
        for (int r = 0; r < 4; r++)
            expect_tokens(pick[r], &q[r], "batch of four");
        size_t prompt_tokens = 0;
        for (int r = 0; r < 4; r++)
            prompt_tokens += q[r].prompt_len;
        assert_int_equal(stats.prefill_tokens, prompt_tokens);
        assert_int_equal(stats.decode_tokens, 4 * (NEW - 1));
    }
    close_world(&w);
}

static void test_batch_gpt2(void **state)
{
    batch_of_four(state, "gpt2");
}

static void test_batch_llama(void **state)
{
    batch_of_four(state, "llama");
}

/* The cache grows in place: each token's row is written once per layer,
 * earlier rows stay bit for bit, and its size and the bank's do not depend
 * on the requests (the prefixes are stored once, not per request). */
static void test_cache_growth(void **state)
{
    world w;
    open_world(&w, *state, "llama");
    const pfx_model_shape *s = &(pfx_model_shape){ 0 };
    pfx_model_shape shape;
    assert_int_equal(pfx_model_get_shape(w.model, &shape), PFX_SUCCESS);
    s = &shape;
    const size_t L = s->layers, KVD = s->kv_heads * s->head_dim,
                 P = pfx_adapter_bank_prefix_len(w.bank);
    assert_int_equal(P, 5);
    assert_int_equal(pfx_adapter_bank_bytes(w.bank),
                     2 * L * 4 * s->kv_heads * P * s->head_dim * sizeof(float));
    assert_int_equal(pfx_kv_cache_bytes(w.cache), 2 * L * 4 * 24 * KVD * sizeof(float));
    const size_t live0 = pfx_test_live_bytes(w.rt);

    const gcase *c = &w.cases[w.count - 1];
    int32_t ids[MAX_IDS];
    memcpy(ids, c->prompt, c->prompt_len * sizeof(int32_t));
    const size_t V = s->vocab, n = c->prompt_len;
    pfx_tensor *logits = NULL;
    assert_int_equal(pfx_tensor_create(w.rt, PFX_DTYPE_F32, 2, (size_t[]){ 1, V }, &logits),
                     PFX_SUCCESS);
    int32_t lens = (int32_t)n, adapter = c->adapter;
    pfx_serve_step step = { 1, n, ids, &lens, &adapter };
    assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &step, logits), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_len(w.cache, 0), n);
    assert_int_equal(pfx_kv_cache_rows_written(w.cache), L * n);
    const pfx_tensor *k0, *v0;
    assert_int_equal(pfx_kv_cache_layer(w.cache, L - 1, &k0, &v0), PFX_SUCCESS);
    float *before = malloc(n * KVD * sizeof(float)), *after = malloc(n * KVD * sizeof(float));
    assert_int_equal(pfx_tensor_read(k0, 0, n * KVD, before), PFX_SUCCESS);
    for (int i = 0; i < 3; i++) {
        step.tokens = 1;
        lens = 1;
        ids[0] = (int32_t)(7 * i + 3);
        assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &step, logits), PFX_SUCCESS);
        assert_int_equal(pfx_kv_cache_len(w.cache, 0), n + (size_t)i + 1);
        assert_int_equal(pfx_kv_cache_rows_written(w.cache), L * (n + (size_t)i + 1));
    }
    assert_int_equal(pfx_tensor_read(k0, 0, n * KVD, after), PFX_SUCCESS);
    assert_memory_equal(before, after, n * KVD * sizeof(float));
    for (size_t i = 0; i < n * KVD; i++)
        assert_true(before[i] != 0.0f || after[i] == 0.0f);
    /* nothing new was allocated by the steps beyond the logits */
    assert_int_equal(pfx_test_live_bytes(w.rt), live0 + V * sizeof(float));
    /* a slot holds only up to max_len tokens */
    assert_int_equal(pfx_kv_cache_reset(w.cache, 0), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_len(w.cache, 0), 0);
    free(before);
    free(after);
    pfx_tensor_destroy(&logits);
    close_world(&w);
}

/* Sampling: deterministic for a seed; top-k 1 and a tiny top-p are greedy;
 * temperature draws follow the softmax. */
static void test_sampling(void **state)
{
    (void)state;
    float z[6] = { 0.5f, 2.0f, -1.0f, 1.9f, 0.0f, -3.0f };
    pfx_sampling s = { .temperature = 1.0f, .max_new_tokens = 1 };
    uint64_t a = 42, b = 42;
    int32_t ta[64], tb[64];
    for (int i = 0; i < 64; i++) {
        assert_int_equal(pfx_sample_token(z, 6, &s, &a, &ta[i]), PFX_SUCCESS);
        assert_int_equal(pfx_sample_token(z, 6, &s, &b, &tb[i]), PFX_SUCCESS);
    }
    assert_memory_equal(ta, tb, sizeof(ta));
    int32_t t;
    pfx_sampling k1 = { .temperature = 2.0f, .top_k = 1, .max_new_tokens = 1 };
    pfx_sampling p0 = { .temperature = 2.0f, .top_p = 0.01f, .max_new_tokens = 1 };
    for (int i = 0; i < 16; i++) {
        assert_int_equal(pfx_sample_token(z, 6, &k1, &a, &t), PFX_SUCCESS);
        assert_int_equal(t, 1);
        assert_int_equal(pfx_sample_token(z, 6, &p0, &a, &t), PFX_SUCCESS);
        assert_int_equal(t, 1);
    }
    /* frequencies of 20000 draws against the softmax (5 sigma) and top-k 2 */
    size_t hist[6] = { 0 }, hist2[6] = { 0 };
    pfx_sampling k2 = { .temperature = 1.0f, .top_k = 2, .max_new_tokens = 1 };
    const int draws = 20000;
    for (int i = 0; i < draws; i++) {
        assert_int_equal(pfx_sample_token(z, 6, &s, &a, &t), PFX_SUCCESS);
        hist[t]++;
        assert_int_equal(pfx_sample_token(z, 6, &k2, &a, &t), PFX_SUCCESS);
        hist2[t]++;
    }
    double sum = 0;
    for (int i = 0; i < 6; i++)
        sum += exp(z[i]);
    for (int i = 0; i < 6; i++) {
        double p = exp(z[i]) / sum, sd = sqrt(p * (1 - p) / draws);
        assert_true(fabs((double)hist[i] / draws - p) < 5 * sd + 1e-9);
    }
    assert_int_equal(hist2[0] + hist2[2] + hist2[4] + hist2[5], 0);
    double p1 = exp(2.0) / (exp(2.0) + exp(1.9));
    assert_true(fabs((double)hist2[1] / draws - p1) < 5 * sqrt(p1 * (1 - p1) / draws));
    /* greedy: the lowest id among equal maxima */
    float tie[3] = { 1.0f, 3.0f, 3.0f };
    pfx_sampling g = { .max_new_tokens = 1 };
    assert_int_equal(pfx_sample_token(tie, 3, &g, &a, &t), PFX_SUCCESS);
    assert_int_equal(t, 1);
    /* bad arguments */
    pfx_sampling bad = { .temperature = -1.0f, .max_new_tokens = 1 };
    assert_int_equal(pfx_sample_token(z, 6, &bad, &a, &t), PFX_ERROR_INVALID_ARGUMENT);
    bad = (pfx_sampling){ .top_p = 1.5f, .max_new_tokens = 1 };
    assert_int_equal(pfx_sample_token(z, 6, &bad, &a, &t), PFX_ERROR_INVALID_ARGUMENT);
    bad = (pfx_sampling){ .max_new_tokens = 0 };
    assert_int_equal(pfx_sample_token(z, 6, &bad, &a, &t), PFX_ERROR_INVALID_ARGUMENT);
    float nan_z[2] = { 0.0f, NAN };
    assert_int_equal(pfx_sample_token(nan_z, 2, &s, &a, &t), PFX_ERROR_NOT_FINITE);
}

/* Stop tokens end a request early (the stop token kept); a seeded sampled
 * run repeats itself and does not depend on the batch. */
static void test_stop_and_seed(void **state)
{
    world w;
    open_world(&w, *state, "gpt2");
    const gcase *c = &w.cases[3];
    int32_t out[NEW], out2[4][NEW];
    pfx_sampling s = greedy;
    s.stop = &c->expect[2];
    s.stop_count = 1;
    pfx_request q = request_of(c, out);
    assert_int_equal(pfx_generate(w.ctx, w.cache, w.bank, &q, 1, &s, NULL, NULL, NULL),
                     PFX_SUCCESS);
    size_t first = 0;
    while (c->expect[first] != c->expect[2])
        first++;
    assert_int_equal(q.out_len, first + 1);
    assert_memory_equal(out, c->expect, q.out_len * sizeof(int32_t));

    pfx_sampling t = { .temperature = 0.9f, .top_k = 20, .top_p = 0.95f, .max_new_tokens = NEW };
    q = request_of(c, out);
    q.seed = 1234;
    assert_int_equal(pfx_generate(w.ctx, w.cache, w.bank, &q, 1, &t, NULL, NULL, NULL),
                     PFX_SUCCESS);
    pfx_request qs[4];
    for (int r = 0; r < 4; r++) {
        qs[r] = request_of(&w.cases[r * 3], out2[r]);
        qs[r].seed = 99 + (uint64_t)r;
    }
    qs[2] = request_of(c, out2[2]);
    qs[2].seed = 1234;
    assert_int_equal(pfx_generate(w.ctx, w.cache, w.bank, qs, 4, &t, NULL, NULL, NULL),
                     PFX_SUCCESS);
    assert_int_equal(qs[2].out_len, NEW);
    assert_memory_equal(out2[2], out, NEW * sizeof(int32_t));
    close_world(&w);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), a)) > 0)
        assert_int_equal(fwrite(buf, 1, n, b), n);
    fclose(a);
    fclose(b);
}

/* Adapters that do not fit the model, encoder-decoder adapters, a full
 * bank, bad steps: each with its status and a message naming the cause. */
static void test_bad_adapters_and_steps(void **state)
{
    pfx_runtime *rt = *state;
    world w;
    open_world(&w, rt, "gpt2");
    int32_t e = -1;
    char path[1200], tmp[] = "/tmp/pfx-gen-XXXXXX";
    snprintf(path, sizeof(path), "%s/adapter0", w.dir);
    assert_status_names(rt, pfx_adapter_bank_add(w.bank, path, &e), PFX_ERROR_OUT_OF_RANGE, "full");
    /* an entry loaded again in place: entry 0 then generates as adapter 2 */
    snprintf(path, sizeof(path), "%s/adapter2", w.dir);
    assert_status_names(rt, pfx_adapter_bank_replace(w.bank, 4, path), PFX_ERROR_INVALID_ARGUMENT,
                        "entry 4");
    assert_status_names(rt, pfx_adapter_bank_replace(w.bank, 0, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "path");
    snprintf(path, sizeof(path), "%s/../llama/adapter0", w.dir);
    assert_status_names(rt, pfx_adapter_bank_replace(w.bank, 0, path), PFX_ERROR_INVALID_SHAPE,
                        "token_dim");
    snprintf(path, sizeof(path), "%s/adapter2", w.dir);
    assert_int_equal(pfx_adapter_bank_replace(w.bank, 0, path), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_count(w.bank), 4);
    for (size_t i = 0; i < w.count; i++) {
        if (w.cases[i].adapter != 2)
            continue;
        int32_t out[NEW];
        pfx_request q = request_of(&w.cases[i], out);
        q.adapter = 0;
        if (pfx_generate(w.ctx, w.cache, w.bank, &q, 1, &greedy, NULL, NULL, NULL) != PFX_SUCCESS)
            fail_msg("generate: %s", pfx_last_error(rt));
        expect_tokens(&w.cases[i], &q, "entry 0 replaced by adapter 2");
    }
    pfx_adapter_bank *b2 = NULL;
    assert_int_equal(pfx_adapter_bank_create(w.model, 2, &b2), PFX_SUCCESS);
    assert_status_names(rt, pfx_adapter_bank_add(b2, w.dir, &e), PFX_ERROR_IO, "neither");
    snprintf(path, sizeof(path), "%s/../llama/adapter0", w.dir);
    assert_status_names(rt, pfx_adapter_bank_add(b2, path, &e), PFX_ERROR_INVALID_SHAPE,
                        "token_dim");
    assert_int_equal(pfx_adapter_bank_count(b2), 0);
    /* an encoder-decoder adapter */
    assert_non_null(mkdtemp(tmp));
    char cfg[1400], from[1400];
    snprintf(from, sizeof(from), "%s/adapter0/adapter_model.safetensors", w.dir);
    snprintf(cfg, sizeof(cfg), "%s/adapter_model.safetensors", tmp);
    copy_file(from, cfg);
    snprintf(cfg, sizeof(cfg), "%s/adapter_config.json", tmp);
    write_text(cfg, "{\"peft_type\": \"PREFIX_TUNING\", \"task_type\": \"SEQ_2_SEQ_LM\", "
                    "\"num_virtual_tokens\": 3,"
                    " \"num_layers\": 2, \"token_dim\": 36, \"num_attention_heads\": 3,"
                    " \"num_transformer_submodules\": 2, \"prefix_projection\": false}");
    assert_status_names(rt, pfx_adapter_bank_add(b2, tmp, &e), PFX_ERROR_UNSUPPORTED,
                        "num_transformer_submodules");
    remove(cfg);
    snprintf(cfg, sizeof(cfg), "%s/adapter_model.safetensors", tmp);
    remove(cfg);
    rmdir(tmp);
    pfx_adapter_bank_destroy(&b2);
    assert_int_equal(pfx_adapter_bank_create(w.model, 0, &b2), PFX_ERROR_INVALID_ARGUMENT);
    assert_null(b2);
    pfx_kv_cache_destroy(&w.cache); /* the world's cache: a failed create clears the pointer */
    assert_int_equal(pfx_kv_cache_create(w.model, 0, 8, &w.cache), PFX_ERROR_OUT_OF_RANGE);
    assert_null(w.cache);
    assert_int_equal(pfx_kv_cache_create(w.model, 2, 1000, &w.cache), PFX_ERROR_OUT_OF_RANGE);
    /* a KV cache stores float32, half or bfloat16: nothing else, nothing allocated */
    const size_t live = pfx_test_live_bytes(rt);
    assert_status_names(rt, pfx_kv_cache_create_dtype(w.model, 2, 6, PFX_DTYPE_Q8_0, &w.cache),
                        PFX_ERROR_INVALID_ARGUMENT, "dtype");
    assert_null(w.cache);
    assert_status_names(rt, pfx_kv_cache_create_dtype(w.model, 2, 6, (pfx_dtype)7, &w.cache),
                        PFX_ERROR_INVALID_ARGUMENT, "dtype");
    assert_int_equal(pfx_test_live_bytes(rt), live);
    assert_int_equal(pfx_kv_cache_dtype(NULL), PFX_DTYPE_F32);
    assert_int_equal(pfx_kv_cache_create(w.model, 2, 6, &w.cache), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_dtype(w.cache), PFX_DTYPE_F32);

    pfx_model_shape shape;
    assert_int_equal(pfx_model_get_shape(w.model, &shape), PFX_SUCCESS);
    pfx_tensor *logits = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 2, shape.vocab }, &logits),
                     PFX_SUCCESS);
    int32_t ids[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, lens[2] = { 4, 3 }, ad[2] = { 0, -1 };
    pfx_serve_step st = { 2, 4, ids, lens, ad };
    ids[5] = (int32_t)shape.vocab;
    assert_status_names(rt, pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits),
                        PFX_ERROR_OUT_OF_RANGE, "step.ids[5]");
    ids[5] = 6;
    ad[1] = 4;
    assert_status_names(rt, pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits),
                        PFX_ERROR_OUT_OF_RANGE, "step.adapter[1]");
    ad[1] = -1;
    lens[0] = 5;
    assert_status_names(rt, pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits),
                        PFX_ERROR_OUT_OF_RANGE, "step.lens[0]");
    lens[0] = 4;
    assert_status_names(rt, pfx_serve_step_run(w.ctx, w.cache, NULL, &st, logits),
                        PFX_ERROR_OUT_OF_RANGE, "step.adapter[0]");
    assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_len(w.cache, 0), 4);
    assert_int_equal(pfx_kv_cache_len(w.cache, 1), 3);
    /* another adapter for a slot */
    st.tokens = 1;
    lens[0] = lens[1] = 1;
    ad[1] = 1;
    assert_status_names(rt, pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits),
                        PFX_ERROR_INVALID_ARGUMENT, "prefilled");
    ad[1] = -1;
    assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits), PFX_SUCCESS);
    assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits), PFX_SUCCESS);
    /* slot 0 holds 6 = max_len now */
    assert_status_names(rt, pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits),
                        PFX_ERROR_OUT_OF_RANGE, "slot 0");
    lens[0] = lens[1] = 0;
    assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &st, logits),
                     PFX_ERROR_INVALID_ARGUMENT);
    pfx_tensor_destroy(&logits);
    close_world(&w);
}

/* The largest logit of x[n], and the gap to the second. */
static int32_t top_of(const float *x, size_t n, float *gap)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    float second = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (i != best && x[i] > second)
            second = x[i];
    *gap = x[best] - second;
    return (int32_t)best;
}

/* The same steps on a float32 cache and on one of `kv` (half or bfloat16):
 * three slots (two adapters and a bare request) prefilled, then decode
 * steps fed the float32 run's greedy tokens. Each step's logits within tol
 * of the float32 cache's, the same greedy token wherever the float32 gap
 * between the first two exceeds twice the largest logit difference; every
 * row of layer 0 (which depends on the tokens alone) is the float32 row
 * rounded to nearest even. Returns the largest relative logit error. */
static double half_kv_steps(world *w, pfx_dtype kv, double tol)
{
    pfx_runtime *rt = w->rt;
    pfx_model_shape s;
    assert_int_equal(pfx_model_get_shape(w->model, &s), PFX_SUCCESS);
    const size_t V = s.vocab, KVD = s.kv_heads * s.head_dim, B = 3, N = 5, LEN = 24;
    pfx_kv_cache *half = NULL;
    assert_int_equal(pfx_kv_cache_create_dtype(w->model, B, LEN, kv, &half), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_dtype(half), kv);
    assert_int_equal(pfx_kv_cache_bytes(half), 2 * s.layers * B * LEN * KVD * 2);
    for (size_t b = 0; b < B; b++)
        assert_int_equal(pfx_kv_cache_reset(w->cache, b), PFX_SUCCESS);
    pfx_tensor *la = NULL, *lb = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ B, V }, &la), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ B, V }, &lb), PFX_SUCCESS);
    float *a = malloc(B * V * sizeof(float)), *h = malloc(B * V * sizeof(float));
    assert_true(a && h);
    int32_t ids[3 * 5], lens[3] = { 5, 3, 4 }, adapter[3] = { 0, -1, 2 };
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < N; i++)
            ids[b * N + i] = (int32_t)((b * 17 + i * 7 + 3) % V);
    pfx_serve_step step = { B, N, ids, lens, adapter };
    double worst = 0.0;
    for (int k = 0; k < 8; k++) {
        if (pfx_serve_step_run(w->ctx, w->cache, w->bank, &step, la) != PFX_SUCCESS ||
            pfx_serve_step_run(w->ctx, half, w->bank, &step, lb) != PFX_SUCCESS)
            fail_msg("%s step %d: %s", pfx_dtype_name(kv), k, pfx_last_error(rt));
        assert_int_equal(pfx_tensor_read(la, 0, B * V, a), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(lb, 0, B * V, h), PFX_SUCCESS);
        for (size_t b = 0; b < B; b++) {
            const float *x = a + b * V, *y = h + b * V;
            const double err = pfx_test_rel_err(y, x, V);
            worst = err > worst ? err : worst;
            if (!(err < tol))
                fail_msg("%s cache, step %d, slot %zu: logits off by %g (tolerance %g)",
                         pfx_dtype_name(kv), k, b, err, tol);
            float gap, gap_h, diff = 0.0f;
            for (size_t i = 0; i < V; i++)
                diff = fmaxf(diff, fabsf(x[i] - y[i]));
            const int32_t t = top_of(x, V, &gap), t_h = top_of(y, V, &gap_h);
            if (t != t_h && gap > 2.0f * diff)
                fail_msg("%s cache, step %d, slot %zu: greedy %d, float32's %d (gap %g)",
                         pfx_dtype_name(kv), k, b, (int)t_h, (int)t, (double)gap);
            ids[b] = t; /* the next step's one token a slot */
            lens[b] = 1;
        }
        step.tokens = 1;
    }
    const pfx_tensor *kf, *vf, *kh, *vh;
    assert_int_equal(pfx_kv_cache_layer(w->cache, 0, &kf, &vf), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_layer(half, 0, &kh, &vh), PFX_SUCCESS);
    float *rf = malloc(LEN * KVD * sizeof(float)), *rh = malloc(LEN * KVD * sizeof(float));
    assert_true(rf && rh);
    for (size_t b = 0; b < B; b++) {
        const size_t n = pfx_kv_cache_len(half, b) * KVD, at = b * LEN * KVD;
        assert_int_equal(pfx_kv_cache_len(w->cache, b), pfx_kv_cache_len(half, b));
        for (int kvv = 0; kvv < 2; kvv++) {
            assert_int_equal(pfx_tensor_read(kvv ? vf : kf, at, n, rf), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_read(kvv ? vh : kh, at, n, rh), PFX_SUCCESS);
            for (size_t i = 0; i < n; i++) {
                const uint16_t r = pfx_float_to_16bit(rf[i], kv == PFX_DTYPE_BF16);
                if (rh[i] != pfx_16bit_to_float(r, kv == PFX_DTYPE_BF16))
                    fail_msg("%s cache, slot %zu, %s row %zu [%zu]: %.9g, float32 %.9g rounded "
                             "%.9g",
                             pfx_dtype_name(kv), b, kvv ? "value" : "key", i / KVD, i % KVD,
                             (double)rh[i], (double)rf[i],
                             (double)pfx_16bit_to_float(r, kv == PFX_DTYPE_BF16));
            }
        }
    }
    free(rf);
    free(rh);
    free(a);
    free(h);
    pfx_tensor_destroy(&la);
    pfx_tensor_destroy(&lb);
    pfx_kv_cache_destroy(&half);
    return worst;
}

/* Greedy through a cache of `kv` against HF + PEFT's tokens, four cases a
 * batch: each step fed HF's tokens on the float32 cache and on kv's gives
 * kv's greedy token equal to HF's (so greedy generation gives HF's tokens)
 * unless float32's first two logits are closer than twice the caches'
 * largest logit difference (a near-tie the rounding may flip). Returns the
 * cases that had one. */
static size_t hf_greedy_kv(world *w, pfx_dtype kv)
{
    pfx_model_shape s;
    assert_int_equal(pfx_model_get_shape(w->model, &s), PFX_SUCCESS);
    const size_t V = s.vocab, B = 4;
    pfx_kv_cache *half = NULL;
    pfx_tensor *lg = NULL;
    assert_int_equal(pfx_kv_cache_create_dtype(w->model, B, 24, kv, &half), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(w->rt, PFX_DTYPE_F32, 2, (size_t[]){ B, V }, &lg),
                     PFX_SUCCESS);
    float *x = malloc(B * V * sizeof(float)), *y = malloc(B * V * sizeof(float));
    assert_true(x && y);
    size_t flipped = 0;
    for (size_t i0 = 0; i0 < w->count; i0 += B) {
        const size_t n = w->count - i0 < B ? w->count - i0 : B;
        const gcase *c = w->cases + i0;
        int32_t ids[4 * MAX_IDS] = { 0 }, lens[4] = { 0 }, adapter[4] = { -1, -1, -1, -1 };
        size_t N = 1;
        for (size_t r = 0; r < n; r++) {
            memcpy(ids + r * MAX_IDS, c[r].prompt, c[r].prompt_len * sizeof(int32_t));
            lens[r] = (int32_t)c[r].prompt_len;
            adapter[r] = c[r].adapter;
            N = c[r].prompt_len > N ? c[r].prompt_len : N;
        }
        /* right-padded rows of N */
        for (size_t r = 1; r < n; r++)
            memmove(ids + r * N, ids + r * MAX_IDS, N * sizeof(int32_t));
        pfx_serve_step step = { B, N, ids, lens, adapter }; /* slots past n idle */
        for (size_t r = 0; r < B; r++) {
            assert_int_equal(pfx_kv_cache_reset(w->cache, r), PFX_SUCCESS);
            assert_int_equal(pfx_kv_cache_reset(half, r), PFX_SUCCESS);
        }
        bool flip[4] = { false, false, false, false };
        for (size_t k = 0; k < NEW; k++) {
            if (pfx_serve_step_run(w->ctx, w->cache, w->bank, &step, lg) != PFX_SUCCESS ||
                pfx_tensor_read(lg, 0, B * V, x) != PFX_SUCCESS ||
                pfx_serve_step_run(w->ctx, half, w->bank, &step, lg) != PFX_SUCCESS ||
                pfx_tensor_read(lg, 0, B * V, y) != PFX_SUCCESS)
                fail_msg("cases %zu.., step %zu: %s", i0, k, pfx_last_error(w->rt));
            for (size_t r = 0; r < n; r++) {
                const float *xr = x + r * V, *yr = y + r * V;
                float gap, gap_h, diff = 0.0f;
                for (size_t t = 0; t < V; t++)
                    diff = fmaxf(diff, fabsf(xr[t] - yr[t]));
                assert_int_equal(top_of(xr, V, &gap), c[r].expect[k]);
                const int32_t t_h = top_of(yr, V, &gap_h);
                if (t_h != c[r].expect[k]) {
                    if (!(gap < 2.0f * diff))
                        fail_msg("%s cache, adapter %d, token %zu: greedy %d, HF + PEFT %d, "
                                 "float32's gap %g",
                                 pfx_dtype_name(kv), (int)c[r].adapter, k, (int)t_h,
                                 (int)c[r].expect[k], (double)gap);
                    flip[r] = true;
                }
                ids[r] = c[r].expect[k];
                lens[r] = 1;
            }
            step.tokens = 1;
        }
        for (size_t r = 0; r < n; r++)
            flipped += flip[r];
    }
    free(x);
    free(y);
    pfx_tensor_destroy(&lg);
    pfx_kv_cache_destroy(&half);
    return flipped;
}

/* A half and a bfloat16 KV cache against float32 (half_kv_steps) on both
 * families, on the host decode step and on the queue
 * (PREFIXCL_HOST_STEP=off), and against HF + PEFT's greedy tokens
 * (hf_greedy_kv). */
static void test_half_kv(void **state)
{
    static const char *const families[2] = { "gpt2", "llama" };
    static const pfx_dtype kvs[2] = { PFX_DTYPE_F16, PFX_DTYPE_BF16 };
    static const double tols[2] = { TOL_SERVE_KV_F16, TOL_SERVE_KV_BF16 };
    for (int f = 0; f < 2; f++) {
        world w;
        open_world(&w, *state, families[f]);
        for (int path = 0; path < 2; path++) {
            if (path)
                setenv("PREFIXCL_HOST_STEP", "off", 1);
            for (int k = 0; k < 2; k++) {
                const double worst = half_kv_steps(&w, kvs[k], tols[k]);
                print_message("%s, %s cache, %s: logits within %.3g of float32's\n", families[f],
                              pfx_dtype_name(kvs[k]), path ? "queue" : "host step", worst);
                if (path) /* the fixtures' cases once, on the library's path here */
                    continue;
                const size_t flipped = hf_greedy_kv(&w, kvs[k]);
                print_message("%s, %s cache: %zu of %zu cases flip a near-tie\n", families[f],
                              pfx_dtype_name(kvs[k]), flipped, w.count);
            }
            unsetenv("PREFIXCL_HOST_STEP");
        }
        close_world(&w);
    }
}

static void count_token(void *user, size_t r, int32_t token)
{
    (void)token;
    ((size_t *)user)[r]++;
}

/* Writes a prefixcl prefixes file for `w`'s model: random prefixes of
 * length P, random gains (gain_mode), kv heads `hkv` (the model's to fit). */
static void write_layers(const world *w, const char *path, size_t L, size_t P, size_t hkv,
                         const char *gain_mode, uint64_t seed)
{
    pfx_model_shape s;
    assert_int_equal(pfx_model_get_shape(w->model, &s), PFX_SUCCESS);
    const size_t n = hkv * P * s.head_dim;
    pfx_named_tensor items[3 * 4];
    char names[3 * 4][48];
    float *data = malloc((2 * n + s.heads) * L * sizeof(float));
    assert_non_null(data);
    uint64_t x = seed;
    for (size_t i = 0; i < (2 * n + s.heads) * L; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        data[i] = (float)((double)(x >> 40) / (double)(1ull << 24) * 3.0 - 1.5);
    }
    assert_true(L <= 4);
    for (size_t l = 0; l < L; l++) {
        snprintf(names[3 * l], 48, "layers.%zu.prefix_k", l);
        snprintf(names[3 * l + 1], 48, "layers.%zu.prefix_v", l);
        snprintf(names[3 * l + 2], 48, "layers.%zu.gain", l);
        float *base = data + l * (2 * n + s.heads);
        items[3 * l] = (pfx_named_tensor){ .name = names[3 * l],
                                           .host = base,
                                           .ndim = 3,
                                           .shape = { hkv, P, s.head_dim },
                                           .dtype = PFX_DTYPE_F32 };
        items[3 * l + 1] = (pfx_named_tensor){ .name = names[3 * l + 1],
                                               .host = base + n,
                                               .ndim = 3,
                                               .shape = { hkv, P, s.head_dim },
                                               .dtype = PFX_DTYPE_F32 };
        items[3 * l + 2] = (pfx_named_tensor){ .name = names[3 * l + 2],
                                               .host = base + 2 * n,
                                               .ndim = 1,
                                               .shape = { s.heads },
                                               .dtype = PFX_DTYPE_F32 };
    }
    pfx_st_metadata meta[] = { { "format", "prefixcl-prefixes-1" }, { "gain_mode", gain_mode } };
    assert_int_equal(pfx_safetensors_save(NULL, path, items, 3 * L, meta, 2), PFX_SUCCESS);
    free(data);
}

static void write_prefixes(const world *w, const char *path, size_t P, size_t hkv,
                           const char *gain_mode, uint64_t seed)
{
    pfx_model_shape s;
    assert_int_equal(pfx_model_get_shape(w->model, &s), PFX_SUCCESS);
    write_layers(w, path, s.layers, P, hkv, gain_mode, seed);
}

/* The step's logits equal pfx_model_last_logits with the same bank (two
 * adapters, prompts of different lengths; then a prefixcl file with tanh
 * gains); adapters with different gains share a step, each slot as alone; prefixcl
 * files that do not fit are refused. */
static void test_step_matches_model_and_gains(void **state)
{
    pfx_runtime *rt = *state;
    world w;
    open_world(&w, rt, "llama");
    pfx_model_shape s;
    assert_int_equal(pfx_model_get_shape(w.model, &s), PFX_SUCCESS);
    const size_t V = s.vocab;
    int32_t ids[2 * 9] = { 0 }, lens[2] = { 9, 4 }, entry[2] = { 3, 1 };
    for (int i = 0; i < 18; i++)
        ids[i] = (int32_t)((i * 37 + 11) % (int)V);
    pfx_tensor *la = NULL, *lb = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 2, V }, &la), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 2, V }, &lb), PFX_SUCCESS);
    float *a = malloc(2 * V * sizeof(float)), *b = malloc(2 * V * sizeof(float));
    pfx_serve_step step = { 2, 9, ids, lens, entry };
    pfx_model_prefix pre;
    assert_int_equal(pfx_adapter_bank_prefix(w.bank, entry, 2, &pre), PFX_SUCCESS);
    pfx_model_batch mb = { 2, 9, ids, lens, NULL };
    assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &step, la), PFX_SUCCESS);
    assert_int_equal(pfx_model_last_logits(w.ctx, &mb, &pre, lb), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(la, 0, 2 * V, a), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(lb, 0, 2 * V, b), PFX_SUCCESS);
    assert_true(pfx_test_rel_err(a, b, 2 * V) < TOL_SERVE_F32);
    /* the same prompts in two steps, the second into slots that hold the
     * first's rows (a prompt after reused rows), give the same logits */
    int32_t first[2 * 5] = { 0 }, rest[2 * 4] = { 0 }, lens1[2] = { 5, 2 }, lens2[2] = { 4, 2 };
    for (int t = 0; t < 5; t++)
        first[t] = ids[t];
    for (int t = 0; t < 2; t++) {
        first[5 + t] = ids[9 + t];
        rest[4 + t] = ids[11 + t];
    }
    for (int t = 0; t < 4; t++)
        rest[t] = ids[5 + t];
    assert_int_equal(pfx_kv_cache_reset(w.cache, 0), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_reset(w.cache, 1), PFX_SUCCESS);
    pfx_serve_step s1 = { 2, 5, first, lens1, entry }, s2 = { 2, 4, rest, lens2, entry };
    assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &s1, lb), PFX_SUCCESS);
    assert_int_equal(pfx_serve_step_run(w.ctx, w.cache, w.bank, &s2, lb), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_len(w.cache, 0), 9);
    assert_int_equal(pfx_kv_cache_len(w.cache, 1), 4);
    assert_int_equal(pfx_tensor_read(lb, 0, 2 * V, b), PFX_SUCCESS);
    assert_true(pfx_test_rel_err(a, b, 2 * V) < TOL_SERVE_F32);
    assert_int_equal(pfx_kv_cache_reset(w.cache, 0), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_reset(w.cache, 1), PFX_SUCCESS);

    /* a prefixcl file with gains beside a PEFT adapter of the same P */
    char dir[] = "/tmp/pfx-gen-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/prefixes.safetensors", dir);
    write_prefixes(&w, path, 5, s.kv_heads, "tanh", 7);
    pfx_adapter_bank *bank = NULL;
    pfx_kv_cache *cache = NULL;
    int32_t e = -1;
    assert_int_equal(pfx_adapter_bank_create(w.model, 2, &bank), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_create(w.model, 2, 16, &cache), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_add(bank, dir, &e), PFX_SUCCESS);
    assert_int_equal(e, 0);
    char peft[1200];
    snprintf(peft, sizeof(peft), "%s/adapter2", w.dir);
    assert_int_equal(pfx_adapter_bank_add(bank, peft, &e), PFX_SUCCESS);
    assert_int_equal(e, 1);
    int32_t one[2] = { 0, 0 };
    step.adapter = one;
    assert_int_equal(pfx_adapter_bank_prefix(bank, one, 2, &pre), PFX_SUCCESS);
    assert_int_equal(pre.gain_mode, PFX_GAIN_TANH);
    assert_int_equal(pfx_serve_step_run(w.ctx, cache, bank, &step, la), PFX_SUCCESS);
    assert_int_equal(pfx_model_last_logits(w.ctx, &mb, &pre, lb), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(la, 0, 2 * V, a), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(lb, 0, 2 * V, b), PFX_SUCCESS);
    assert_true(pfx_test_rel_err(a, b, 2 * V) < TOL_SERVE_F32);
    /* the gains matter: the same prefixes without them differ */
    pre.gain_mode = PFX_GAIN_OFF;
    assert_int_equal(pfx_model_last_logits(w.ctx, &mb, &pre, lb), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(lb, 0, 2 * V, b), PFX_SUCCESS);
    assert_true(pfx_test_rel_err(a, b, 2 * V) > 1e-3);
    /* gains and no gains in one step */
    int32_t mixed[2] = { 0, 1 };
    step.adapter = mixed;
    assert_int_equal(pfx_kv_cache_reset(cache, 0), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_reset(cache, 1), PFX_SUCCESS);
    assert_int_equal(pfx_serve_step_run(w.ctx, cache, bank, &step, la), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(la, 0, 2 * V, a), PFX_SUCCESS);
    pfx_tensor *l1 = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 1, V }, &l1), PFX_SUCCESS);
    for (int r = 0; r < 2; r++) {
        pfx_model_prefix own;
        assert_int_equal(pfx_adapter_bank_prefix(bank, &mixed[r], 1, &own), PFX_SUCCESS);
        pfx_model_batch m1 = { 1, (size_t)lens[r], ids + r * 9, NULL, NULL };
        assert_int_equal(pfx_model_last_logits(w.ctx, &m1, &own, l1), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(l1, 0, V, b), PFX_SUCCESS);
        assert_true(pfx_test_rel_err(a + r * V, b, V) < TOL_SERVE_F32);
    }
    pfx_tensor_destroy(&l1);
    /* ... and pfx_generate runs them as one batch: each equals its run alone */
    int32_t out[3][NEW], alone[NEW];
    pfx_request q[3] = { { ids, 9, 0, 5, out[0], 0, false },
                         { ids + 9, 4, 1, 6, out[1], 0, false },
                         { ids + 9, 4, 0, 7, out[2], 0, false } };
    size_t seen[3] = { 0, 0, 0 };
    pfx_kv_cache *small = NULL; /* 9 + 7 - 1 tokens do not fit 14 */
    assert_int_equal(pfx_kv_cache_create(w.model, 2, 14, &small), PFX_SUCCESS);
    assert_status_names(rt, pfx_generate(w.ctx, small, bank, q, 2, &greedy, NULL, NULL, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "requests[0]");
    pfx_kv_cache_destroy(&small);
    assert_int_equal(pfx_generate(w.ctx, cache, bank, q, 2, &greedy, count_token, seen, NULL),
                     PFX_SUCCESS);
    assert_int_equal(seen[0], NEW);
    assert_int_equal(seen[1], NEW);
    for (int r = 0; r < 3; r++) {
        pfx_request one = q[r];
        one.out = alone;
        assert_int_equal(pfx_generate(w.ctx, cache, bank, &one, 1, &greedy, NULL, NULL, NULL),
                         PFX_SUCCESS);
        if (r < 2)
            assert_memory_equal(alone, out[r], NEW * sizeof(int32_t));
        else
            memcpy(out[2], alone, sizeof(alone));
    }
    /* gains x2 requests in one call: entry 0 twice beside entry 1 */
    pfx_request q3[2] = { q[2], q[1] };
    int32_t o3[2][NEW];
    q3[0].out = o3[0];
    q3[1].out = o3[1];
    assert_int_equal(pfx_generate(w.ctx, cache, bank, q3, 2, &greedy, NULL, NULL, NULL),
                     PFX_SUCCESS);
    assert_memory_equal(o3[0], out[2], sizeof(alone));
    assert_memory_equal(o3[1], out[1], sizeof(alone));
    q3[0].adapter = 2;
    assert_status_names(rt, pfx_generate(w.ctx, cache, bank, q3, 2, &greedy, NULL, NULL, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "requests[0].adapter");
    /* files that do not fit */
    pfx_adapter_bank *b3 = NULL;
    assert_int_equal(pfx_adapter_bank_create(w.model, 2, &b3), PFX_SUCCESS);
    write_prefixes(&w, path, 5, s.kv_heads + 1, "off", 8);
    assert_status_names(rt, pfx_adapter_bank_add(b3, path, &e), PFX_ERROR_INVALID_SHAPE,
                        "kv heads");
    write_prefixes(&w, path, 4, s.kv_heads, "off", 9);
    assert_status_names(rt, pfx_adapter_bank_add(bank, path, &e), PFX_ERROR_OUT_OF_RANGE, "full");
    assert_int_equal(pfx_adapter_bank_add(b3, path, &e), PFX_SUCCESS);
    assert_status_names(rt, pfx_adapter_bank_add(b3, peft, &e), PFX_ERROR_INVALID_SHAPE,
                        "prefix length");
    write_layers(&w, path, s.layers - 1, 4, s.kv_heads, "off", 9);
    assert_status_names(rt, pfx_adapter_bank_add(b3, path, &e), PFX_ERROR_INVALID_SHAPE, "layers");
    write_layers(&w, path, s.layers + 1, 4, s.kv_heads, "off", 9);
    assert_status_names(rt, pfx_adapter_bank_add(b3, path, &e), PFX_ERROR_INVALID_SHAPE, "layers");
    write_prefixes(&w, path, 4, s.kv_heads, "sigmoid", 9);
    assert_status_names(rt, pfx_adapter_bank_add(b3, path, &e), PFX_ERROR_FORMAT, "gain_mode");
    assert_int_equal(pfx_adapter_bank_count(b3), 1);
    remove(path);
    rmdir(dir);
    pfx_adapter_bank_destroy(&b3);
    pfx_adapter_bank_destroy(&bank);
    pfx_kv_cache_destroy(&cache);
    pfx_tensor_destroy(&la);
    pfx_tensor_destroy(&lb);
    free(a);
    free(b);
    close_world(&w);
}

/* The processed logits of pfx_sampling, plainly in double: logit_bias, the
 * repetition penalty over prompt and generated ids, then presence and
 * frequency over the generated ones. */
static void reference_process(const float *logits, size_t V, const pfx_sampling *s,
                              const int32_t *prompt, size_t np, const int32_t *gen, size_t ng,
                              double *z)
{
    for (size_t j = 0; j < V; j++) {
        double v = logits[j];
        for (size_t i = 0; i < s->logit_bias_count; i++)
            if ((size_t)s->logit_bias[i].token == j)
                v += s->logit_bias[i].bias;
        bool seen = false;
        size_t count = 0;
        for (size_t i = 0; i < np; i++)
            seen |= (size_t)prompt[i] == j;
        for (size_t i = 0; i < ng; i++)
            count += (size_t)gen[i] == j;
        if ((seen || count) && s->repetition_penalty != 0.0f)
            v = v > 0 ? v / s->repetition_penalty : v * s->repetition_penalty;
        v -= s->frequency_penalty * (double)count + s->presence_penalty * (count > 0);
        z[j] = v;
    }
}

/* Logit bias, penalties and min-p against the plain reference: the greedy
 * token, the log-probabilities and the tokens a draw may take; bad values
 * are refused by name. */
static void test_sampling_processing(void **state)
{
    (void)state;
    enum { V = 37, NP = 9, NG = 11 };
    float logits[V];
    int32_t prompt[NP], gen[NG];
    srand(7);
    for (size_t j = 0; j < V; j++)
        logits[j] = (float)rand() / (float)RAND_MAX * 8.0f - 4.0f;
    logits[5] = -INFINITY;
    for (size_t i = 0; i < NP; i++)
        prompt[i] = rand() % V;
    for (size_t i = 0; i < NG; i++)
        gen[i] = rand() % 6; /* repeats */
    const pfx_logit_bias bias[3] = { { 3, 2.5f }, { 30, -100.0f }, { 17, 0.75f } };
    const pfx_sampling cases[4] = {
        { .max_new_tokens = 1, .repetition_penalty = 1.3f },
        { .max_new_tokens = 1, .presence_penalty = 0.6f, .frequency_penalty = 0.9f },
        { .max_new_tokens = 1,
          .presence_penalty = -1.5f,
          .frequency_penalty = -0.4f,
          .repetition_penalty = 0.8f,
          .logit_bias = bias,
          .logit_bias_count = 3 },
        { .max_new_tokens = 1, .logit_bias = bias, .logit_bias_count = 3 },
    };
    double z[V];
    for (size_t c = 0; c < 4; c++) {
        reference_process(logits, V, &cases[c], prompt, NP, gen, NG, z);
        double m = -INFINITY, sum = 0;
        size_t best = 0;
        for (size_t j = 0; j < V; j++) {
            best = z[j] > z[best] ? j : best;
            m = z[j] > m ? z[j] : m;
        }
        for (size_t j = 0; j < V; j++)
            sum += exp(z[j] - m);
        int32_t t;
        uint64_t rng = 1;
        pfx_token_logprobs lp = { .top_count = 5 };
        assert_int_equal(pfx_sample_next(logits, V, &cases[c], prompt, NP, gen, NG, &rng, &t, &lp),
                         PFX_SUCCESS);
        assert_int_equal(t, (int32_t)best);
        assert_true(fabs(lp.logprob - (z[best] - m - log(sum))) < 1e-5);
        assert_int_equal(lp.top_count, 5);
        assert_int_equal(lp.top_ids[0], (int32_t)best);
        for (size_t k = 0; k < 5; k++) {
            const int32_t id = lp.top_ids[k];
            assert_true(fabs(lp.top_logprobs[k] - (z[id] - m - log(sum))) < 1e-5);
            if (k)
                assert_true(z[id] <= z[lp.top_ids[k - 1]]);
            size_t above = 0; /* exactly k ids rank higher */
            for (size_t j = 0; j < V; j++)
                above += z[j] > z[id] || (z[j] == z[id] && (int32_t)j < id);
            assert_int_equal(above, k);
        }
    }
    /* min-p at temperature 0.7: only tokens with p >= min_p * p_max are drawn */
    const pfx_sampling mp = { .temperature = 0.7f, .min_p = 0.2f, .max_new_tokens = 1 };
    double pmax = -INFINITY;
    for (size_t j = 0; j < V; j++)
        pmax = logits[j] > pmax ? logits[j] : pmax;
    bool drawn[V] = { false };
    uint64_t rng = 3;
    for (int i = 0; i < 2000; i++) {
        int32_t t;
        assert_int_equal(pfx_sample_next(logits, V, &mp, NULL, 0, NULL, 0, &rng, &t, NULL),
                         PFX_SUCCESS);
        assert_true(exp((logits[t] - pmax) / 0.7) >= 0.2 * (1 - 1e-6));
        drawn[t] = true;
    }
    for (size_t j = 0; j < V; j++)
        if (exp((logits[j] - pmax) / 0.7) >= 0.21)
            assert_true(drawn[j]);
    /* bias +100 always wins a draw, -100 never */
    const pfx_logit_bias up = { 30, 100.0f };
    const pfx_sampling b1 = {
        .temperature = 1.0f, .max_new_tokens = 1, .logit_bias = &up, .logit_bias_count = 1
    };
    for (int i = 0; i < 50; i++) {
        int32_t t;
        assert_int_equal(pfx_sample_token(logits, V, &b1, &rng, &t), PFX_SUCCESS);
        assert_int_equal(t, 30);
    }
    /* refused, by name */
    int32_t t;
    const pfx_logit_bias far = { V, 1.0f }, big = { 1, 101.0f };
    const pfx_sampling bad[5] = {
        { .max_new_tokens = 1, .min_p = 1.5f },
        { .max_new_tokens = 1, .presence_penalty = 2.5f },
        { .max_new_tokens = 1, .repetition_penalty = -1.0f },
        { .max_new_tokens = 1, .logit_bias = &far, .logit_bias_count = 1 },
        { .max_new_tokens = 1, .logit_bias = &big, .logit_bias_count = 1 },
    };
    const char *names[5] = { "min_p", "presence_penalty", "repetition_penalty",
                             "logit_bias[0].token", "logit_bias[0].bias" };
    for (size_t i = 0; i < 5; i++) {
        assert_int_not_equal(pfx_sample_token(logits, V, &bad[i], &rng, &t), PFX_SUCCESS);
        assert_non_null(strstr(pfx_last_error(NULL), names[i]));
    }
    assert_int_equal(pfx_sample_next(logits, V, &cases[0], NULL, 2, NULL, 0, &rng, &t, NULL),
                     PFX_ERROR_NULL_ARGUMENT);
    gen[0] = V;
    assert_int_equal(pfx_sample_next(logits, V, &cases[1], prompt, NP, gen, NG, &rng, &t, NULL),
                     PFX_ERROR_OUT_OF_RANGE);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_generate FIXTURE_DIR [TEST_FILTER]\n");
        return 2;
    }
    g_fixtures = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_sampling_processing),
        cmocka_unit_test(test_hf_greedy_gpt2),
        cmocka_unit_test(test_hf_greedy_llama),
        cmocka_unit_test(test_batch_gpt2),
        cmocka_unit_test(test_batch_llama),
        cmocka_unit_test(test_cache_growth),
        cmocka_unit_test(test_stop_and_seed),
        cmocka_unit_test(test_bad_adapters_and_steps),
        cmocka_unit_test(test_half_kv),
        cmocka_unit_test(test_step_matches_model_and_gains),
    };
    if (argc > 2) /* a second argument runs only the tests it matches */
        cmocka_set_test_filter(argv[2]);
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
