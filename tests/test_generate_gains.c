/* Serving the gains of pretraining (generate.h: a gains file in the adapter
 * bank, no prefix): the serve step's logits, prefill and split-K decode
 * against the KV cache, equal pfx_model_last_logits with the bank's prefix
 * struct on the whole sequence (no cache), and greedy pfx_generate gives the
 * tokens of that loop, for linear, tanh, structured and linear + structured
 * gains on tiny random GPT-2 and Llama models; requests whose adapters'
 * gains differ share one batch and each gets what it gets alone; the bank's
 * rules (one prefix length); bad gains files; the legacy per-layer form
 * of tune's gains. argv[1]: the fixture folder
 * of test_generate (its GPT-2 model and PEFT adapter). */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "model_folder.h"
#include "prefixcl/generate.h"
#include "prefixcl/io.h"
#include "tolerances.h"

#include "attention_tuning.h"
#include "internal.h"

static const char *g_fixtures;

#define NEW     6
#define MAX_LEN 300 /* cache rows: the decode's keys, several key tiles (split-K) */

/* A gains file as pretraining writes it (pretrain.c, write_gains), with
 * every field settable to a wrong value. */
typedef struct gains_spec {
    const char *gain_mode;  /* metadata; NULL: absent */
    const char *structured; /* metadata; NULL: absent */
    const float *gains;     /* NULL: no tensor */
    size_t gains_shape[2];
    const float *dim_gains; /* NULL: no tensor */
    size_t dim_shape[3];
    bool extra; /* one more tensor */
} gains_spec;

static void write_gains(const char *path, const gains_spec *g)
{
    pfx_named_tensor t[3];
    size_t n = 0;
    static const float one = 1.0f;
    if (g->gains)
        t[n++] = (pfx_named_tensor){ .name = "gains",
                                     .host = g->gains,
                                     .ndim = 2,
                                     .shape = { g->gains_shape[0], g->gains_shape[1] },
                                     .dtype = PFX_DTYPE_F32 };
    if (g->dim_gains)
        t[n++] = (pfx_named_tensor){ .name = "dim_gains",
                                     .host = g->dim_gains,
                                     .ndim = 3,
                                     .shape = { g->dim_shape[0], g->dim_shape[1], g->dim_shape[2] },
                                     .dtype = PFX_DTYPE_F32 };
    if (g->extra)
        t[n++] = (pfx_named_tensor){
            .name = "step", .host = &one, .ndim = 1, .shape = { 1 }, .dtype = PFX_DTYPE_F32
        };
    pfx_st_metadata meta[3] = { { "format", "prefixcl-gains-1" } };
    size_t m = 1;
    if (g->gain_mode)
        meta[m++] = (pfx_st_metadata){ "gain_mode", g->gain_mode };
    if (g->structured)
        meta[m++] = (pfx_st_metadata){ "structured", g->structured };
    assert_int_equal(pfx_safetensors_save(NULL, path, t, n, meta, m), PFX_SUCCESS);
}

/* Values in [lo, hi) from a seed. */
static void fill(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = lo + (hi - lo) * (float)((double)(seed >> 40) / (double)(1ull << 24));
    }
}

/* The well-formed spec of `mode` ("linear", "tanh", "dim", "linear+dim")
 * for shape s, its values in g and dg. */
static gains_spec spec_of(const char *mode, const pfx_model_shape *s, float *g, float *dg)
{
    const size_t L = s->layers, H = s->heads, D = s->head_dim;
    const bool dim = strstr(mode, "dim") != NULL, head = strcmp(mode, "dim") != 0;
    fill(g, L * H, 11, -0.6f, 0.9f);
    fill(dg, L * H * D, 12, -0.5f, 0.8f);
    gains_spec sp = { .gain_mode = !head                       ? "off"
                                   : !strncmp(mode, "tanh", 4) ? "tanh"
                                                               : "linear",
                      .structured = dim ? "true" : "false",
                      .gains = head ? g : NULL,
                      .gains_shape = { L, H },
                      .dim_gains = dim ? dg : NULL,
                      .dim_shape = { L, H, D } };
    return sp;
}

/* The lowest id among equal maxima (pfx_sample_token's greedy rule). */
static int32_t argmax(const float *x, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int32_t)best;
}

/* Q8_0 (blocks): the matrices' rows whole blocks of 32, so that they are
 * held as Q8_0 (model.c keeps other rows float32). */
static ref_model_config tiny_config(bool llama, bool blocks)
{
    ref_model_config c = { 0 };
    c.family = llama ? REF_MODEL_LLAMA : REF_MODEL_GPT2;
    c.layers = 2;
    c.hidden = blocks ? 64 : llama ? 40 : 36;
    c.heads = llama ? 4 : blocks ? 4 : 3;
    c.kv_heads = llama ? 2 : blocks ? 4 : 3;
    c.head_dim = blocks ? 16 : llama ? 10 : 12;
    c.inner = blocks ? 96 : llama ? 54 : 62;
    c.vocab = 61;
    c.max_positions = MAX_LEN + 20;
    c.eps = 1e-5;
    c.act = llama ? REF_ACT_SILU : REF_ACT_GELU_TANH;
    c.rope.theta = 10000.0;
    return c;
}

/* A tiny random model of `family` in a temporary folder, loaded, with
 * host room for one adapter's gains (g [L * H], dg [L * H * D]); the bank
 * and cache a check creates, and the device's compute unit count it
 * changes, are released and restored by tiny_close. */
typedef struct tiny_world {
    tf_model tm;
    char *dir;
    pfx_runtime *rt;
    unsigned compute_units;
    pfx_model *m;
    pfx_context *ctx;
    pfx_model_shape s;
    float *g, *dg;
    pfx_adapter_bank *bank;
    pfx_kv_cache *cache;
} tiny_world;

static void tiny_open(tiny_world *w, pfx_runtime *rt, const char *family, uint64_t seed,
                      size_t max_batch, pfx_dtype storage)
{
    const bool llama = !strcmp(family, "llama");
    ref_model_config rc = tiny_config(llama, storage == PFX_DTYPE_Q8_0);
    tf_model_init(&w->tm, &rc, false, family, seed);
    w->rt = rt;
    w->compute_units = rt->info.compute_units;
    w->bank = NULL;
    w->cache = NULL;
    w->dir = tf_tempdir("gains");
    assert_int_equal(tf_write(&w->tm, w->dir, 1), 0);
    w->m = NULL;
    pfx_context_params cp = { .max_batch = max_batch, .max_tokens = 16 };
    pfx_model_params mp = { .storage = storage };
    assert_int_equal(pfx_model_load(rt, w->dir, &mp, &w->m), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(w->m, &cp, &w->ctx), PFX_SUCCESS);
    assert_int_equal(pfx_model_get_shape(w->m, &w->s), PFX_SUCCESS);
    const size_t LH = w->s.layers * w->s.heads;
    w->g = malloc(LH * sizeof(float));
    w->dg = malloc(LH * w->s.head_dim * sizeof(float));
    assert_true(w->g && w->dg);
}

static void tiny_close(tiny_world *w)
{
    w->rt->info.compute_units = w->compute_units;
    pfx_kv_cache_destroy(&w->cache);
    pfx_adapter_bank_destroy(&w->bank);
    free(w->g);
    free(w->dg);
    pfx_context_destroy(&w->ctx);
    pfx_model_destroy(&w->m);
    tf_rmdir(w->dir);
    free(w->dir);
    tf_model_free(&w->tm);
}

/* Prefill of two prompts, then NEW - 1 decode steps of greedy tokens, each
 * step's logits against pfx_model_last_logits of the whole sequence with
 * the bank's prefix struct (the weights in `storage` on both sides); then
 * pfx_generate gives the same tokens. */
static void check_mode(pfx_runtime *rt, const char *family, const char *mode, pfx_dtype storage)
{
    tiny_world w;
    tiny_open(&w, rt, family, strcmp(family, "llama") ? 22 : 21, 2, storage);
    /* Q8_0: the decode step quantizes the activations to int8 (the forward does not) */
    const double tol = storage == PFX_DTYPE_Q8_0 ? TOL_SERVE_Q8_0 : TOL_SERVE_F32;
    pfx_model *m = w.m;
    pfx_context *ctx = w.ctx;
    const pfx_model_shape s = w.s;
    const char *dir = w.dir;
    const size_t V = s.vocab, LH = s.layers * s.heads;
    float *g = w.g, *dg = w.dg;
    gains_spec sp = spec_of(mode, &s, g, dg);
    char path[1200];
    snprintf(path, sizeof(path), "%s/gains.safetensors", dir);
    write_gains(path, &sp);

    pfx_adapter_bank *bank = NULL;
    pfx_kv_cache *cache = NULL;
    int32_t e = -1;
    assert_int_equal(pfx_adapter_bank_create(m, 1, &bank), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_add(bank, path, &e), PFX_SUCCESS);
    assert_int_equal(e, 0);
    assert_int_equal(pfx_adapter_bank_prefix_len(bank), 0);
    assert_int_equal(pfx_adapter_bank_bytes(bank), 0);
    assert_int_equal(pfx_kv_cache_create(m, 2, MAX_LEN, &cache), PFX_SUCCESS);
    w.bank = bank; /* released by tiny_close */
    w.cache = cache;
    int32_t entry[2] = { 0, 0 };
    pfx_model_prefix pre;
    assert_int_equal(pfx_adapter_bank_prefix(bank, entry, 1, &pre), PFX_SUCCESS);
    assert_int_equal(pre.prefix_len, 0);
    assert_null(pre.keys);
    assert_int_equal(pre.gain_mode, sp.gains
                                        ? (strstr(mode, "tanh") ? PFX_GAIN_TANH : PFX_GAIN_LINEAR)
                                        : PFX_GAIN_OFF);
    assert_true(sp.dim_gains ? pre.dim_gains != NULL : pre.dim_gains == NULL);
    if (sp.dim_gains)
        assert_memory_equal(pre.dim_gains, dg, LH * s.head_dim * sizeof(float));

    /* the decode's attention takes the split-K path: more compute units than
     * this device may have (only the split count reads them) */
    rt->info.compute_units = 256;
    pfx_attn_fwd_tiles t;
    size_t kps;
    assert_int_equal(pfx_attn_fwd_select(rt, "test", s.head_dim, s.heads / s.kv_heads, &t),
                     PFX_SUCCESS);
    assert_true(pfx_attn_fwd_splits(pfx_attn_tuning_lookup(rt->vendor, &rt->info, NULL),
                                    rt->info.compute_units, &t, 2, s.kv_heads, s.heads / s.kv_heads,
                                    MAX_LEN, &kps) > 1);

    int32_t seq[2][16], lens[2] = { 5, 3 }, ids[2 * 5] = { 0 };
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < lens[r]; i++)
            seq[r][i] = ids[r * 5 + i] = (int32_t)((r * 17 + i * 7 + 3) % (int)V);
    pfx_tensor *la = NULL, *lb = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 2, V }, &la), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 1, V }, &lb), PFX_SUCCESS);
    float *a = malloc(2 * V * sizeof(float)), *b = malloc(V * sizeof(float));
    int32_t expect[2][NEW], step_lens[2] = { 5, 3 };
    pfx_serve_step step = { 2, 5, ids, step_lens, entry };
    for (size_t k = 0; k < NEW; k++) {
        if (pfx_serve_step_run(ctx, cache, bank, &step, la) != PFX_SUCCESS)
            fail_msg("%s %s: step %zu: %s", family, mode, k, pfx_last_error(rt));
        assert_int_equal(pfx_tensor_read(la, 0, 2 * V, a), PFX_SUCCESS);
        for (int r = 0; r < 2; r++) {
            pfx_model_batch mb = { 1, (size_t)lens[r], seq[r], NULL, NULL };
            assert_int_equal(pfx_model_last_logits(ctx, &mb, &pre, lb), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_read(lb, 0, V, b), PFX_SUCCESS);
            const double err = pfx_test_rel_err(a + r * V, b, V);
            if (!(err < tol))
                fail_msg("%s %s: step %zu, request %d: logits off by %g", family, mode, k, r, err);
            /* greedy from the step's own logits (Q8_0's differ from the forward's a little) */
            expect[r][k] = argmax(a + r * V, V);
            seq[r][lens[r]++] = ids[r] = expect[r][k];
            step_lens[r] = 1;
        }
        step.tokens = 1;
    }
    /* the gains change the logits (they are applied, not dropped) */
    pfx_model_prefix plain = { 0 };
    pfx_model_batch mb = { 1, (size_t)lens[0], seq[0], NULL, NULL };
    assert_int_equal(pfx_model_last_logits(ctx, &mb, &pre, lb), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(lb, 0, V, a), PFX_SUCCESS);
    assert_int_equal(pfx_model_last_logits(ctx, &mb, &plain, lb), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(lb, 0, V, b), PFX_SUCCESS);
    assert_true(pfx_test_rel_err(a, b, V) > 1e-3);

    /* greedy generate: the loop's tokens */
    int32_t out[2][NEW];
    pfx_request q[2] = { { seq[0], 5, 0, 1, out[0], 0, false },
                         { seq[1], 3, 0, 2, out[1], 0, false } };
    const pfx_sampling greedy = { .max_new_tokens = NEW };
    if (pfx_generate(ctx, cache, bank, q, 2, &greedy, NULL, NULL, NULL) != PFX_SUCCESS)
        fail_msg("%s %s: generate: %s", family, mode, pfx_last_error(rt));
    for (int r = 0; r < 2; r++) {
        assert_int_equal(q[r].out_len, NEW);
        for (size_t k = 0; k < NEW; k++)
            if (out[r][k] != expect[r][k])
                fail_msg("%s %s: request %d token %zu: generate %d, the loop %d", family, mode, r,
                         k, (int)out[r][k], (int)expect[r][k]);
    }
    free(a);
    free(b);
    pfx_tensor_destroy(&la);
    pfx_tensor_destroy(&lb);
    tiny_close(&w);
}

static const char *const modes[] = { "linear", "tanh", "dim", "linear+dim" };

static void test_decode_matches_forward_gpt2(void **state)
{
    for (size_t i = 0; i < 4; i++)
        check_mode(*state, "gpt2", modes[i], PFX_DTYPE_F32);
}

static void test_decode_matches_forward_llama(void **state)
{
    for (size_t i = 0; i < 4; i++)
        check_mode(*state, "llama", modes[i], PFX_DTYPE_F32);
}

/* The decode step in every weight storage (the host step on a CPU device
 * reads each as the queue's products do): half, bfloat16 and Q8_0 weights,
 * both families, tanh + structured gains. */
static void test_decode_matches_forward_storages(void **state)
{
    static const pfx_dtype storages[] = { PFX_DTYPE_F16, PFX_DTYPE_BF16, PFX_DTYPE_Q8_0 };
    for (size_t i = 0; i < 3; i++) {
        check_mode(*state, "gpt2", "tanh+dim", storages[i]);
        check_mode(*state, "llama", "tanh+dim", storages[i]);
    }
}

/* Adapters whose gains differ (linear per head; tanh per head + structured;
 * structured only) and a request without adapter, the same prompt each, in
 * one batch: every step's logits of each slot equal pfx_model_last_logits
 * with that slot's adapter alone (and differ between slots), prefill and
 * split-K decode; greedy pfx_generate of the batch gives each request the
 * tokens of that loop and of its own generate alone. */
static void check_mixed(pfx_runtime *rt, const char *family)
{
    enum { SLOTS = 4, PROMPT = 5 };
    tiny_world w;
    tiny_open(&w, rt, family, strcmp(family, "llama") ? 32 : 31, SLOTS, PFX_DTYPE_F32);
    pfx_model *m = w.m;
    pfx_context *ctx = w.ctx;
    const pfx_model_shape s = w.s;
    const size_t V = s.vocab, LH = s.layers * s.heads;
    float *g = w.g, *dg = w.dg;
    pfx_adapter_bank *bank = NULL;
    assert_int_equal(pfx_adapter_bank_create(m, 3, &bank), PFX_SUCCESS);
    const char *kinds[3] = { "linear", "tanh+dim", "dim" };
    for (int a = 0; a < 3; a++) {
        gains_spec sp = spec_of(kinds[a], &s, g, dg);
        fill(g, LH, 40 + a, -0.8f, 1.2f); /* each adapter its own values */
        fill(dg, LH * s.head_dim, 50 + a, -0.6f, 0.9f);
        char path[1200];
        snprintf(path, sizeof(path), "%s/gains%d.safetensors", w.dir, a);
        write_gains(path, &sp);
        int32_t e = -1;
        assert_int_equal(pfx_adapter_bank_add(bank, path, &e), PFX_SUCCESS);
        assert_int_equal(e, a);
    }
    pfx_kv_cache *cache = NULL;
    assert_int_equal(pfx_kv_cache_create(m, SLOTS, MAX_LEN, &cache), PFX_SUCCESS);
    w.bank = bank; /* released by tiny_close */
    w.cache = cache;
    /* the decode's attention takes the split-K path (see check_mode) */
    rt->info.compute_units = 256;

    int32_t entry[SLOTS] = { 0, 1, 2, -1 }, seq[SLOTS][16], lens[SLOTS], ids[SLOTS * PROMPT];
    int32_t step_lens[SLOTS];
    pfx_model_prefix pre[SLOTS];
    for (int r = 0; r < SLOTS; r++) {
        lens[r] = step_lens[r] = PROMPT;
        for (int i = 0; i < PROMPT; i++)
            seq[r][i] = ids[r * PROMPT + i] = (int32_t)((i * 7 + 3) % (int)V);
        memset(&pre[r], 0, sizeof(pre[r]));
        if (entry[r] >= 0)
            assert_int_equal(pfx_adapter_bank_prefix(bank, &entry[r], 1, &pre[r]), PFX_SUCCESS);
    }
    pfx_tensor *la = NULL, *lb = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ SLOTS, V }, &la),
                     PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 1, V }, &lb), PFX_SUCCESS);
    float *a = malloc(SLOTS * V * sizeof(float)), *b = malloc(V * sizeof(float));
    int32_t expect[SLOTS][NEW];
    pfx_serve_step step = { SLOTS, PROMPT, ids, step_lens, entry };
    for (size_t k = 0; k < NEW; k++) {
        if (pfx_serve_step_run(ctx, cache, bank, &step, la) != PFX_SUCCESS)
            fail_msg("%s: step %zu: %s", family, k, pfx_last_error(rt));
        assert_int_equal(pfx_tensor_read(la, 0, SLOTS * V, a), PFX_SUCCESS);
        for (int r = 0; r < SLOTS; r++) {
            pfx_model_batch mb = { 1, (size_t)lens[r], seq[r], NULL, NULL };
            assert_int_equal(pfx_model_last_logits(ctx, &mb, &pre[r], lb), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_read(lb, 0, V, b), PFX_SUCCESS);
            const double err = pfx_test_rel_err(a + r * V, b, V);
            if (!(err < TOL_SERVE_F32))
                fail_msg("%s: step %zu, slot %d (adapter %d): logits off by %g", family, k, r,
                         (int)entry[r], err);
            /* the slots' gains are applied, each its own: same prompt, other logits */
            if (k == 0 && r > 0 && !(pfx_test_rel_err(a + r * V, a, V) > 1e-3))
                fail_msg("%s: slot %d's logits are slot 0's: its gains were not applied", family,
                         r);
            expect[r][k] = argmax(b, V);
            seq[r][lens[r]++] = ids[r] = expect[r][k];
            step_lens[r] = 1;
        }
        step.tokens = 1;
    }
    /* greedy generate: the loop's tokens in one batch, and each request alone */
    int32_t out[SLOTS][NEW], alone[NEW];
    pfx_request q[SLOTS];
    for (int r = 0; r < SLOTS; r++)
        q[r] = (pfx_request){ seq[r], PROMPT, entry[r], (uint64_t)r, out[r], 0, false };
    const pfx_sampling greedy = { .max_new_tokens = NEW };
    if (pfx_generate(ctx, cache, bank, q, SLOTS, &greedy, NULL, NULL, NULL) != PFX_SUCCESS)
        fail_msg("%s: generate: %s", family, pfx_last_error(rt));
    for (int r = 0; r < SLOTS; r++) {
        assert_int_equal(q[r].out_len, NEW);
        pfx_request one = q[r];
        one.out = alone;
        assert_int_equal(pfx_generate(ctx, cache, bank, &one, 1, &greedy, NULL, NULL, NULL),
                         PFX_SUCCESS);
        for (size_t k = 0; k < NEW; k++)
            if (out[r][k] != expect[r][k] || alone[k] != expect[r][k])
                fail_msg("%s: request %d token %zu: batch %d, alone %d, the loop %d", family, r, k,
                         (int)out[r][k], (int)alone[k], (int)expect[r][k]);
    }
    free(a);
    free(b);
    pfx_tensor_destroy(&la);
    pfx_tensor_destroy(&lb);
    tiny_close(&w);
}

static void test_mixed_gains_one_batch(void **state)
{
    check_mixed(*state, "gpt2");
    check_mixed(*state, "llama");
}

/* A long cache in half and bfloat16 against float32, on the tiny Llama
 * (GQA, RoPE): two slots prefilled, extended three times by 16 tokens (the
 * extend step reads the stored rows) and decoded on the host step past the
 * rows it widens at a time (64); each step's logits within TOL_SERVE_KV_F16
 * / _BF16 of the float32 cache's, every cache fed float32's tokens. */
static void test_half_kv_long_cache(void **state)
{
    pfx_runtime *rt = *state;
    tiny_world w;
    tiny_open(&w, rt, "llama", 23, 2, PFX_DTYPE_F32);
    const size_t V = w.s.vocab, N = 16, STEPS = 12;
    static const pfx_dtype kvs[3] = { PFX_DTYPE_F32, PFX_DTYPE_F16, PFX_DTYPE_BF16 };
    static const double tols[3] = { 0.0, TOL_SERVE_KV_F16, TOL_SERVE_KV_BF16 };
    pfx_kv_cache *c[3] = { NULL, NULL, NULL };
    for (int k = 0; k < 3; k++)
        assert_int_equal(pfx_kv_cache_create_dtype(w.m, 2, MAX_LEN, kvs[k], &c[k]), PFX_SUCCESS);
    pfx_tensor *lg = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 2, V }, &lg), PFX_SUCCESS);
    float *x[3];
    for (int k = 0; k < 3; k++)
        assert_non_null(x[k] = malloc(2 * V * sizeof(float)));
    int32_t ids[2 * 16], lens[2];
    double worst[3] = { 0 };
    for (size_t t = 0; t < STEPS; t++) {
        const bool decode = t >= 4; /* a prefill, three extends, then decode steps */
        pfx_serve_step step = { 2, decode ? 1 : N, ids, lens, NULL };
        for (size_t i = 0; !decode && i < 2 * N; i++)
            ids[i] = (int32_t)((i * 13 + t * 7 + 5) % V);
        if (!decode) {
            lens[0] = (int32_t)N;
            lens[1] = t ? (int32_t)N : 9;
        }
        for (int k = 0; k < 3; k++) {
            if (pfx_serve_step_run(w.ctx, c[k], NULL, &step, lg) != PFX_SUCCESS)
                fail_msg("%s step %zu: %s", pfx_dtype_name(kvs[k]), t, pfx_last_error(rt));
            assert_int_equal(pfx_tensor_read(lg, 0, 2 * V, x[k]), PFX_SUCCESS);
            for (size_t r = 0; k && r < 2; r++) {
                const double err = pfx_test_rel_err(x[k] + r * V, x[0] + r * V, V);
                worst[k] = err > worst[k] ? err : worst[k];
                if (!(err < tols[k]))
                    fail_msg("%s cache, step %zu, slot %zu: logits off by %g",
                             pfx_dtype_name(kvs[k]), t, r, err);
            }
        }
        for (size_t r = 0; r < 2; r++) {
            ids[r] = argmax(x[0] + r * V, V);
            lens[r] = 1;
        }
    }
    assert_int_equal(pfx_kv_cache_len(c[1], 0), 4 * N + STEPS - 4);
    assert_int_equal(pfx_kv_cache_len(c[2], 1), 9 + 3 * N + STEPS - 4);
    for (int k = 1; k < 3; k++) {
        print_message("%s cache, %zu rows: logits within %.3g of float32's\n",
                      pfx_dtype_name(kvs[k]), pfx_kv_cache_len(c[k], 0), worst[k]);
        pfx_kv_cache_destroy(&c[k]);
        free(x[k]);
    }
    w.cache = c[0]; /* released by tiny_close */
    free(x[0]);
    pfx_tensor_destroy(&lg);
    tiny_close(&w);
}

/* One prefix length a bank: gains files and prefix adapters refused in
 * either order, naming both; an output folder stands for its gains file;
 * entries whose structured gains differ (or one without adapter) share a
 * step and a generate batch, each request's tokens those it gets alone. */
static void test_bank_rules(void **state)
{
    pfx_runtime *rt = *state;
    char model_dir[1100], peft[1200];
    snprintf(model_dir, sizeof(model_dir), "%s/gpt2", g_fixtures);
    snprintf(peft, sizeof(peft), "%s/adapter0", model_dir);
    pfx_model *m = NULL;
    pfx_context *ctx = NULL;
    pfx_context_params cp = { .max_batch = 2, .max_tokens = 12, .max_prefix_len = 8 };
    assert_int_equal(pfx_model_load(rt, model_dir, NULL, &m), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(m, &cp, &ctx), PFX_SUCCESS);
    pfx_model_shape s;
    assert_int_equal(pfx_model_get_shape(m, &s), PFX_SUCCESS);
    const size_t LH = s.layers * s.heads;
    float *g = malloc(LH * sizeof(float)), *dg = malloc(LH * s.head_dim * sizeof(float));
    char *dir = tf_tempdir("gains-bank"), path[1200], path2[1200];
    snprintf(path, sizeof(path), "%s/gains.safetensors", dir);
    snprintf(path2, sizeof(path2), "%s/other.safetensors", dir);
    gains_spec sp = spec_of("dim", &s, g, dg);
    write_gains(path, &sp);
    dg[5] += 0.25f; /* same per-head gains (none), another structured gain */
    write_gains(path2, &sp);
    size_t P = 99;
    assert_int_equal(pfx_adapter_prefix_len(dir, &P), PFX_SUCCESS);
    assert_int_equal(P, 0);

    pfx_adapter_bank *bank = NULL;
    int32_t e = -1;
    assert_int_equal(pfx_adapter_bank_create(m, 3, &bank), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_add(bank, dir, &e), PFX_SUCCESS); /* the folder */
    assert_status_names(rt, pfx_adapter_bank_add(bank, peft, &e), PFX_ERROR_INVALID_SHAPE, dir);
    assert_status_names(rt, pfx_adapter_bank_add(bank, peft, &e), PFX_ERROR_INVALID_SHAPE, peft);
    assert_int_equal(pfx_adapter_bank_count(bank), 1);
    assert_int_equal(pfx_adapter_bank_add(bank, path2, &e), PFX_SUCCESS);
    assert_int_equal(e, 1);
    pfx_adapter_bank *pb = NULL;
    assert_int_equal(pfx_adapter_bank_create(m, 2, &pb), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_add(pb, peft, &e), PFX_SUCCESS);
    assert_status_names(rt, pfx_adapter_bank_add(pb, path, &e), PFX_ERROR_INVALID_SHAPE,
                        "gains file");
    assert_status_names(rt, pfx_adapter_bank_add(pb, path, &e), PFX_ERROR_INVALID_SHAPE, peft);
    assert_int_equal(pfx_adapter_bank_count(pb), 1);
    pfx_adapter_bank_destroy(&pb);

    /* entries 0 and 1 (and no adapter) attend with other structured gains */
    pfx_kv_cache *cache = NULL;
    assert_int_equal(pfx_kv_cache_create(m, 2, 16, &cache), PFX_SUCCESS);
    pfx_tensor *logits = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, (size_t[]){ 2, s.vocab }, &logits),
                     PFX_SUCCESS);
    int32_t ids[6] = { 1, 2, 3, 4, 5, 6 }, ad[2] = { 0, 1 };
    pfx_serve_step st = { 2, 3, ids, NULL, ad };
    assert_int_equal(pfx_serve_step_run(ctx, cache, bank, &st, logits), PFX_SUCCESS);
    ad[1] = -1;
    assert_int_equal(pfx_kv_cache_reset(cache, 0), PFX_SUCCESS);
    assert_int_equal(pfx_kv_cache_reset(cache, 1), PFX_SUCCESS);
    assert_int_equal(pfx_serve_step_run(ctx, cache, bank, &st, logits), PFX_SUCCESS);
    int32_t out[3][NEW], alone[NEW];
    pfx_request q[3] = { { ids, 3, 0, 1, out[0], 0, false },
                         { ids, 3, 1, 1, out[1], 0, false },
                         { ids, 3, -1, 1, out[2], 0, false } };
    const pfx_sampling greedy = { .max_new_tokens = NEW };
    q[1].adapter = 1;
    assert_int_equal(pfx_generate(ctx, cache, bank, q, 2, &greedy, NULL, NULL, NULL), PFX_SUCCESS);
    for (int r = 0; r < 2; r++) {
        pfx_request one = q[r];
        one.out = alone;
        assert_int_equal(pfx_generate(ctx, cache, bank, &one, 1, &greedy, NULL, NULL, NULL),
                         PFX_SUCCESS);
        assert_memory_equal(alone, out[r], sizeof(alone));
    }
    pfx_tensor_destroy(&logits);
    pfx_kv_cache_destroy(&cache);
    pfx_adapter_bank_destroy(&bank);
    tf_rmdir(dir);
    free(dir);
    free(g);
    free(dg);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&m);
}

/* The fixture's GPT-2 model with default parameters, its shape in s. */
static pfx_model *fixture_gpt2(pfx_runtime *rt, pfx_model_shape *s)
{
    char model_dir[1100];
    snprintf(model_dir, sizeof(model_dir), "%s/gpt2", g_fixtures);
    pfx_model *m = NULL;
    assert_int_equal(pfx_model_load(rt, model_dir, NULL, &m), PFX_SUCCESS);
    assert_int_equal(pfx_model_get_shape(m, s), PFX_SUCCESS);
    return m;
}

/* Gains files that do not fit the model or are malformed: each refused
 * with its status and a message naming the file and the tensor or field;
 * the bank stays empty. */
static void test_bad_files(void **state)
{
    pfx_runtime *rt = *state;
    pfx_model_shape s;
    pfx_model *m = fixture_gpt2(rt, &s);
    /* room for one more layer, head and dimension than the model has */
    const size_t room = (s.layers + 1) * (s.heads + 1) * (s.head_dim + 1);
    float *g = malloc(room * sizeof(float)), *dg = malloc(room * sizeof(float));
    char *dir = tf_tempdir("gains-bad"), path[1200];
    snprintf(path, sizeof(path), "%s/gains.safetensors", dir);
    pfx_adapter_bank *bank = NULL;
    int32_t e = -1;
    assert_int_equal(pfx_adapter_bank_create(m, 1, &bank), PFX_SUCCESS);
    typedef struct bad {
        const char *what;
        pfx_status status;
        const char *needle;
    } bad;
    const bad cases[] = {
        { "heads", PFX_ERROR_INVALID_SHAPE, "tensor gains is [2, 4], the model needs [L=2, H=3]" },
        { "layers", PFX_ERROR_INVALID_SHAPE, "tensor gains is [3, 3]" },
        { "dim", PFX_ERROR_INVALID_SHAPE, "tensor dim_gains is [2, 3, 13]" },
        { "mode", PFX_ERROR_FORMAT, "gain_mode \"sigmoid\"" },
        { "no mode", PFX_ERROR_FORMAT, "gain_mode missing" },
        { "structured", PFX_ERROR_FORMAT, "structured \"yes\"" },
        { "nan", PFX_ERROR_NOT_FINITE, "tensor gains[4] is nan" },
        { "inf dim", PFX_ERROR_NOT_FINITE, "tensor dim_gains[7] is inf" },
        { "missing", PFX_ERROR_FORMAT, "tensor gains is missing" },
        { "unexpected", PFX_ERROR_FORMAT, "tensor dim_gains is present" },
        { "extra", PFX_ERROR_FORMAT, "tensor step" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *w = cases[i].what;
        gains_spec sp = spec_of("linear+dim", &s, g, dg);
        if (!strcmp(w, "heads"))
            sp.gains_shape[1]++;
        else if (!strcmp(w, "layers"))
            sp.gains_shape[0]++;
        else if (!strcmp(w, "dim"))
            sp.dim_shape[2]++;
        else if (!strcmp(w, "mode"))
            sp.gain_mode = "sigmoid";
        else if (!strcmp(w, "no mode"))
            sp.gain_mode = NULL;
        else if (!strcmp(w, "structured"))
            sp.structured = "yes";
        else if (!strcmp(w, "nan"))
            g[4] = NAN;
        else if (!strcmp(w, "inf dim"))
            dg[7] = INFINITY;
        else if (!strcmp(w, "missing"))
            sp.gains = NULL;
        else if (!strcmp(w, "unexpected"))
            sp.structured = "false";
        else
            sp.extra = true;
        write_gains(path, &sp);
        pfx_status st = pfx_adapter_bank_add(bank, path, &e);
        if (st != cases[i].status || !strstr(pfx_last_error(rt), cases[i].needle) ||
            !strstr(pfx_last_error(rt), path))
            fail_msg("%s: %s (status %d, want %d naming '%s' and the file)", w, pfx_last_error(rt),
                     (int)st, (int)cases[i].status, cases[i].needle);
        assert_int_equal(pfx_adapter_bank_count(bank), 0);
    }
    gains_spec sp = spec_of("tanh", &s, g, dg);
    write_gains(path, &sp);
    assert_int_equal(pfx_adapter_bank_add(bank, path, &e), PFX_SUCCESS);
    pfx_adapter_bank_destroy(&bank);
    tf_rmdir(dir);
    free(dir);
    free(g);
    free(dg);
    pfx_model_destroy(&m);
}

/* The per-layer form prefixcl tune wrote before the one layout (io.h:
 * layers.L.gain [H], no "structured"), with tensor `skip` left out (-1:
 * none), heads per tensor, one extra tensor when `extra`. */
static void write_per_layer(const char *path, const pfx_model_shape *s, const float *g,
                            const char *mode, long skip, size_t heads, bool extra)
{
    pfx_named_tensor t[16];
    char names[16][48];
    size_t n = 0;
    for (size_t l = 0; l < s->layers + extra; l++) {
        if ((long)l == skip)
            continue;
        snprintf(names[n], sizeof(names[n]), "layers.%zu.gain", l);
        t[n] = (pfx_named_tensor){ .name = names[n],
                                   .host = g + (l % s->layers) * s->heads,
                                   .ndim = 1,
                                   .shape = { heads },
                                   .dtype = PFX_DTYPE_F32 };
        n++;
    }
    const pfx_st_metadata meta[] = { { "format", "prefixcl-gains-1" },
                                     { "gain_mode", mode },
                                     { "gain_ramp", "0.25" },
                                     { "num_layers", "2" } };
    assert_int_equal(pfx_safetensors_save(NULL, path, t, n, meta, 4), PFX_SUCCESS);
}

/* A gains file in the legacy per-layer form reads as the same gains in the
 * one layout (pfx_gains_file_read and the bank); a wrong one is refused
 * naming the tensor; the reader's arguments are checked. */
static void test_legacy_per_layer(void **state)
{
    pfx_runtime *rt = *state;
    pfx_model_shape s;
    pfx_model *m = fixture_gpt2(rt, &s);
    const size_t LH = s.layers * s.heads, D = s.head_dim;
    /* g holds one value more: the case of H + 1 heads a layer reads past the last layer */
    float *g = malloc((LH + 1) * sizeof(float)), *dg = malloc(LH * D * sizeof(float)),
          *got = malloc(LH * sizeof(float)), *dgot = malloc(LH * D * sizeof(float));
    char *dir = tf_tempdir("gains-legacy"), path[1200];
    snprintf(path, sizeof(path), "%s/gains.safetensors", dir);
    fill(g, LH, 21, -0.7f, 1.1f);
    g[LH] = 0.5f;
    write_per_layer(path, &s, g, "tanh", -1, s.heads, false);
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    pfx_gains_values v = { .gains = got, .dim_gains = dgot };
    assert_int_equal(pfx_gains_file_read(f, path, s.layers, s.heads, D, &v), PFX_SUCCESS);
    assert_int_equal(v.gain_mode, PFX_GAIN_TANH);
    assert_false(v.structured);
    assert_true(v.gain_ramp == 0.25f);
    assert_memory_equal(got, g, LH * sizeof(float));
    /* every argument checked */
    assert_int_equal(pfx_gains_file_read(NULL, path, s.layers, s.heads, D, &v),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_gains_file_read(f, NULL, s.layers, s.heads, D, &v),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_gains_file_read(f, path, s.layers, s.heads, D, NULL),
                     PFX_ERROR_NULL_ARGUMENT);
    pfx_gains_values no_dim = { .gains = got };
    assert_int_equal(pfx_gains_file_read(f, path, s.layers, s.heads, D, &no_dim),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_non_null(strstr(pfx_last_error(NULL), "out->dim_gains"));
    assert_int_equal(pfx_gains_file_read(f, path, s.layers, 0, D, &v), PFX_ERROR_INVALID_ARGUMENT);
    pfx_safetensors_close(&f);
    /* the bank reads it as an entry of gains at full strength */
    pfx_adapter_bank *bank = NULL;
    int32_t e = -1;
    assert_int_equal(pfx_adapter_bank_create(m, 1, &bank), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_add(bank, dir, &e), PFX_SUCCESS);
    pfx_adapter_bank_destroy(&bank);
    /* the same in the one layout reads the same */
    gains_spec sp = spec_of("tanh", &s, got, dg);
    memcpy(got, g, LH * sizeof(float));
    write_gains(path, &sp);
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    memset(got, 0, LH * sizeof(float));
    assert_int_equal(pfx_gains_file_read(f, path, s.layers, s.heads, D, &v), PFX_SUCCESS);
    assert_memory_equal(got, g, LH * sizeof(float));
    assert_true(v.gain_ramp == 1.0f); /* no gain_ramp: 1 */
    pfx_safetensors_close(&f);
    const struct {
        long skip;
        size_t heads;
        bool extra;
        const char *mode, *needle;
        pfx_status status;
    } cases[] = {
        { 1, s.heads, false, "tanh", "tensor layers.1.gain is missing", PFX_ERROR_FORMAT },
        { -1, s.heads + 1, false, "linear", "tensor layers.0.gain is [4], the model needs [H=3]",
          PFX_ERROR_INVALID_SHAPE },
        { -1, s.heads, true, "linear", "tensor layers.2.gain is not one of", PFX_ERROR_FORMAT },
        { -1, s.heads, false, "off", "with gain_mode off", PFX_ERROR_FORMAT },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_per_layer(path, &s, g, cases[i].mode, cases[i].skip, cases[i].heads, cases[i].extra);
        assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
        const pfx_status st = pfx_gains_file_read(f, path, s.layers, s.heads, D, &v);
        if (st != cases[i].status || !strstr(pfx_last_error(NULL), cases[i].needle))
            fail_msg("case %zu: %s (want '%s')", i, pfx_last_error(NULL), cases[i].needle);
        pfx_safetensors_close(&f);
    }
    tf_rmdir(dir);
    free(dir);
    free(g);
    free(dg);
    free(got);
    free(dgot);
    pfx_model_destroy(&m);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_generate_gains FIXTURE_DIR\n");
        return 2;
    }
    g_fixtures = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_legacy_per_layer),
        cmocka_unit_test(test_bank_rules),
        cmocka_unit_test(test_decode_matches_forward_gpt2),
        cmocka_unit_test(test_decode_matches_forward_llama),
        cmocka_unit_test(test_decode_matches_forward_storages),
        cmocka_unit_test(test_mixed_gains_one_batch),
        cmocka_unit_test(test_half_kv_long_cache),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
