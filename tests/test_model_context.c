/* Contexts (model.h): several workspaces over one loaded model. Two contexts
 * of other capacities give the bits of one context alone, interleaved; a
 * training context's backward leaves an evaluation context's loss as it
 * was; a model destroyed before its contexts stays alive until the last of
 * them; every argument error of the context calls and every capacity limit
 * names its field, with nothing left allocated. */
#include "model_folder.h"
#include "pfx_test.h"
#include "prefixcl/generate.h"
#include "reference/random.h"

static ref_model_config tiny(bool llama)
{
    ref_model_config c = { 0 };
    c.family = llama ? REF_MODEL_LLAMA : REF_MODEL_GPT2;
    c.layers = 2;
    c.hidden = llama ? 16 : 18;
    c.heads = llama ? 4 : 3;
    c.kv_heads = llama ? 2 : 3;
    c.head_dim = llama ? 4 : 6;
    c.inner = llama ? 22 : 25;
    c.vocab = llama ? 31 : 29;
    c.max_positions = 24;
    c.eps = llama ? 1e-6 : 1e-5;
    if (llama) {
        c.act = REF_ACT_SILU;
        c.rope.theta = 10000.0;
    }
    return c;
}

/* A model folder of the family, loaded. */
typedef struct world {
    pfx_runtime *rt;
    tf_model tm;
    char *dir;
    pfx_model *model;
    pfx_model_shape s;
} world;

static void open_world(world *w, pfx_runtime *rt, bool llama, uint64_t seed)
{
    ref_model_config c = tiny(llama);
    w->rt = rt;
    tf_model_init(&w->tm, &c, false, llama ? "llama" : "gpt2", seed);
    w->dir = tf_tempdir("context");
    assert_int_equal(tf_write(&w->tm, w->dir, 1), 0);
    w->model = NULL;
    if (pfx_model_load(rt, w->dir, NULL, &w->model) != PFX_SUCCESS)
        fail_msg("load: %s", pfx_last_error(rt));
    assert_int_equal(pfx_model_get_shape(w->model, &w->s), PFX_SUCCESS);
}

static void close_world(world *w)
{
    pfx_model_destroy(&w->model);
    tf_rmdir(w->dir);
    free(w->dir);
    tf_model_free(&w->tm);
}

/* One call's inputs: random ids (never all alike), uneven lengths, a random
 * prefix of length P and random per-head gains. */
typedef struct call_in {
    size_t B, N, P;
    int32_t *ids, *lens;
    pfx_tensor **k, **v;
    float *gains;
    pfx_model_batch batch;
    pfx_model_prefix pre;
} call_in;

static void make_call(const world *w, call_in *c, size_t B, size_t N, size_t P, uint64_t seed)
{
    const pfx_model_shape *s = &w->s;
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    memset(c, 0, sizeof(*c));
    c->B = B;
    c->N = N;
    c->P = P;
    c->ids = malloc(B * N * sizeof(int32_t));
    c->lens = malloc(B * sizeof(int32_t));
    c->k = calloc(s->layers, sizeof(pfx_tensor *));
    c->v = calloc(s->layers, sizeof(pfx_tensor *));
    c->gains = malloc(s->layers * s->heads * sizeof(float));
    assert_true(c->ids && c->lens && c->k && c->v && c->gains);
    for (size_t i = 0; i < B * N; i++)
        c->ids[i] = (int32_t)ref_rng_index(&rng, s->vocab);
    for (size_t b = 0; b < B; b++)
        c->lens[b] = (int32_t)(N - b % N);
    ref_rng_fill(&rng, c->gains, s->layers * s->heads, -1.0f, 1.0f);
    const size_t shape[3] = { s->kv_heads, P, s->head_dim }, n = shape[0] * P * shape[2];
    float *host = malloc(n * sizeof(float));
    assert_non_null(host);
    for (size_t l = 0; l < s->layers; l++) {
        pfx_tensor **t[2] = { &c->k[l], &c->v[l] };
        for (int i = 0; i < 2; i++) {
            ref_rng_fill(&rng, host, n, -0.5f, 0.5f);
            assert_int_equal(pfx_tensor_create(w->rt, PFX_DTYPE_F32, 3, shape, t[i]), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_write(*t[i], 0, n, host), PFX_SUCCESS);
        }
    }
    free(host);
    c->batch = (pfx_model_batch){ B, N, c->ids, c->lens, NULL };
    c->pre = (pfx_model_prefix){ .prefix_len = P,
                                 .keys = c->k,
                                 .values = c->v,
                                 .gain_mode = PFX_GAIN_TANH,
                                 .gains = c->gains,
                                 .gain_ramp = 0.75f };
}

static void free_call(const world *w, call_in *c)
{
    for (size_t l = 0; l < w->s.layers; l++) {
        pfx_tensor_destroy(&c->k[l]);
        pfx_tensor_destroy(&c->v[l]);
    }
    free(c->k);
    free(c->v);
    free(c->ids);
    free(c->lens);
    free(c->gains);
}

/* The logits and the loss of c in ctx, to the host. */
typedef struct result {
    float *logits;
    double loss;
} result;

static result run(const world *w, pfx_context *ctx, const call_in *c)
{
    const size_t n = c->B * c->N * w->s.vocab;
    const size_t shape[3] = { c->B, c->N, w->s.vocab };
    pfx_tensor *t = NULL;
    result r = { malloc(n * sizeof(float)), 0.0 };
    assert_non_null(r.logits);
    assert_int_equal(pfx_tensor_create(w->rt, PFX_DTYPE_F32, 3, shape, &t), PFX_SUCCESS);
    if (pfx_model_forward(ctx, &c->batch, &c->pre, t) != PFX_SUCCESS)
        fail_msg("forward: %s", pfx_last_error(w->rt));
    assert_int_equal(pfx_tensor_read(t, 0, n, r.logits), PFX_SUCCESS);
    pfx_tensor_destroy(&t);
    assert_int_equal(pfx_model_loss(ctx, &c->batch, &c->pre, &r.loss), PFX_SUCCESS);
    return r;
}

static void assert_same(const result *a, const result *b, size_t n)
{
    assert_memory_equal(a->logits, b->logits, n * sizeof(float));
    assert_memory_equal(&a->loss, &b->loss, sizeof(double));
}

static pfx_context *context(pfx_model *m, const pfx_context_params *p)
{
    pfx_context *ctx = NULL;
    if (pfx_context_create(m, p, &ctx) != PFX_SUCCESS)
        fail_msg("context: %s", pfx_last_error(NULL));
    return ctx;
}

/* Contexts A and B (other batch, token and prefix capacities, other logits
 * chunks, B recomputing) over one model, called A, B, A: each gives the bits
 * it gives as the only context of the model. */
static void check_shared(pfx_runtime *rt, bool llama)
{
    world w;
    open_world(&w, rt, llama, llama ? 41 : 42);
    const pfx_context_params pa = { .max_batch = 2, .max_tokens = 7, .max_prefix_len = 3 };
    const pfx_context_params pb = { .max_batch = 3,
                                    .max_tokens = 11,
                                    .max_prefix_len = 5,
                                    .logits_chunk_rows = 4,
                                    .recompute = true };
    call_in ca, cb;
    make_call(&w, &ca, 2, 7, 3, 101);
    make_call(&w, &cb, 3, 11, 5, 202);
    const size_t na = ca.B * ca.N * w.s.vocab, nb = cb.B * cb.N * w.s.vocab;

    pfx_context *solo = context(w.model, &pa);
    result a_alone = run(&w, solo, &ca);
    pfx_context_destroy(&solo);
    solo = context(w.model, &pb);
    result b_alone = run(&w, solo, &cb);
    pfx_context_destroy(&solo);

    pfx_context *a = context(w.model, &pa), *b = context(w.model, &pb);
    assert_ptr_equal(pfx_context_model(a), w.model);
    assert_ptr_equal(pfx_context_model(b), w.model);
    result r1 = run(&w, a, &ca), r2 = run(&w, b, &cb), r3 = run(&w, a, &ca);
    assert_same(&r1, &a_alone, na);
    assert_same(&r2, &b_alone, nb);
    assert_same(&r3, &a_alone, na);
    assert_true(a_alone.loss > 0.0 && b_alone.loss > 0.0 && a_alone.loss != b_alone.loss);
    /* B's capacity takes A's call as well: the same logits (its loss runs the
     * head over chunks of 4 rows, another blocking of that product) */
    result r4 = run(&w, b, &ca);
    assert_memory_equal(r4.logits, a_alone.logits, na * sizeof(float));

    pfx_context_params got;
    assert_int_equal(pfx_context_get_params(b, &got), PFX_SUCCESS);
    assert_int_equal(got.max_batch, 3);
    assert_int_equal(got.max_tokens, 11);
    assert_int_equal(got.max_prefix_len, 5);
    assert_int_equal(got.logits_chunk_rows, 4);
    assert_true(got.recompute);

    result *all[6] = { &a_alone, &b_alone, &r1, &r2, &r3, &r4 };
    for (int i = 0; i < 6; i++)
        free(all[i]->logits);
    pfx_context_destroy(&a);
    pfx_context_destroy(&b);
    free_call(&w, &ca);
    free_call(&w, &cb);
    close_world(&w);
}

static void test_shared_gpt2(void **state)
{
    check_shared(*state, false);
}

static void test_shared_llama(void **state)
{
    check_shared(*state, true);
}

/* An evaluation context's loss, a training context's backward (prefix,
 * gain and weight gradients), the evaluation again: the same bits; the
 * training context's loss is that of the evaluation context. */
static void test_train_between_evals(void **state)
{
    pfx_runtime *rt = *state;
    world w;
    open_world(&w, rt, true, 43);
    call_in c;
    make_call(&w, &c, 2, 6, 2, 303);
    const pfx_context_params pe = {
        .max_batch = 2, .max_tokens = 6, .max_prefix_len = 2, .recompute = true
    };
    const pfx_context_params pt = { .max_batch = 3, .max_tokens = 8, .max_prefix_len = 4 };
    pfx_context *eval = context(w.model, &pe), *train = context(w.model, &pt);
    const size_t L = w.s.layers, W = pfx_model_weight_count(w.model);
    pfx_tensor **dk = calloc(L, sizeof(pfx_tensor *)), **dv = calloc(L, sizeof(pfx_tensor *)),
               **dg = calloc(L, sizeof(pfx_tensor *)), **dw = calloc(W, sizeof(pfx_tensor *));
    assert_true(dk && dv && dg && dw);
    const size_t pshape[3] = { w.s.kv_heads, 2, w.s.head_dim };
    for (size_t l = 0; l < L; l++) {
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &dk[l]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &dv[l]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &w.s.heads, &dg[l]), PFX_SUCCESS);
    }
    for (size_t i = 0; i < W; i += 2) { /* every other weight trained */
        pfx_model_weight_info info;
        assert_int_equal(pfx_model_get_weight(w.model, i, &info), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, info.ndim, info.shape, &dw[i]),
                         PFX_SUCCESS);
    }
    double before = 0, after = 0, trained = 0;
    assert_int_equal(pfx_model_loss(eval, &c.batch, &c.pre, &before), PFX_SUCCESS);
    pfx_model_grads g = { .keys = dk, .values = dv, .gains = dg, .weights = dw };
    assert_int_equal(pfx_model_backward(train, &c.batch, &c.pre, &g, &trained), PFX_SUCCESS);
    assert_int_equal(pfx_model_loss(eval, &c.batch, &c.pre, &after), PFX_SUCCESS);
    assert_memory_equal(&before, &after, sizeof(double));
    assert_memory_equal(&before, &trained, sizeof(double));
    float norm = 0.0f;
    assert_int_equal(pfx_tensor_read(dg[0], 0, 1, &norm), PFX_SUCCESS);
    assert_true(norm != 0.0f); /* the backward did run */
    for (size_t l = 0; l < L; l++) {
        pfx_tensor_destroy(&dk[l]);
        pfx_tensor_destroy(&dv[l]);
        pfx_tensor_destroy(&dg[l]);
    }
    for (size_t i = 0; i < W; i++)
        pfx_tensor_destroy(&dw[i]);
    free(dk);
    free(dv);
    free(dg);
    free(dw);
    pfx_context_destroy(&eval);
    pfx_context_destroy(&train);
    free_call(&w, &c);
    close_world(&w);
}

/* The model destroyed before its context: the pointer is cleared, the
 * context computes as before, no new context is made over the released
 * model, and the context's destroy releases everything. */
static void test_destroy_order(void **state)
{
    pfx_runtime *rt = *state;
    const size_t live0 = pfx_test_live_bytes(rt);
    world w;
    open_world(&w, rt, false, 44);
    call_in c;
    make_call(&w, &c, 1, 5, 1, 404);
    const pfx_context_params p = { .max_batch = 1, .max_tokens = 5, .max_prefix_len = 1 };
    pfx_context *ctx = context(w.model, &p);
    result first = run(&w, ctx, &c);
    pfx_model *kept = w.model;
    pfx_model_destroy(&w.model);
    assert_null(w.model);
    assert_ptr_equal(pfx_context_model(ctx), kept);
    result again = run(&w, ctx, &c);
    assert_same(&first, &again, 5 * w.s.vocab);
    pfx_context *more = NULL;
    assert_status_names(rt, pfx_context_create(pfx_context_model(ctx), &p, &more),
                        PFX_ERROR_INVALID_ARGUMENT, "destroyed");
    assert_null(more);
    free(first.logits);
    free(again.logits);
    free_call(&w, &c);
    pfx_context_destroy(&ctx);
    assert_null(ctx);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
    close_world(&w); /* the folder; the model is gone already */
}

/* Every argument error of the context calls, before anything is allocated. */
static void test_context_arguments(void **state)
{
    pfx_runtime *rt = *state;
    world w;
    open_world(&w, rt, false, 45);
    const size_t live0 = pfx_test_live_bytes(rt);
    pfx_context *ctx = NULL;
    pfx_context_params p = { 0 };
    assert_status_names(NULL, pfx_context_create(NULL, &p, &ctx), PFX_ERROR_NULL_ARGUMENT, "model");
    assert_status_names(rt, pfx_context_create(w.model, &p, NULL), PFX_ERROR_NULL_ARGUMENT, "out");
    p.max_batch = SIZE_MAX / 2;
    p.max_tokens = 4;
    assert_status_names(rt, pfx_context_create(w.model, &p, &ctx), PFX_ERROR_SIZE_OVERFLOW,
                        "max_batch");
    p.max_batch = 1;
    p.max_tokens = SIZE_MAX;
    p.max_prefix_len = 2;
    assert_status_names(rt, pfx_context_create(w.model, &p, &ctx), PFX_ERROR_SIZE_OVERFLOW,
                        "max_tokens");
    p.max_tokens = 20;
    p.max_prefix_len = 5; /* 25 positions, GPT-2 has 24 */
    assert_status_names(rt, pfx_context_create(w.model, &p, &ctx), PFX_ERROR_OUT_OF_RANGE,
                        "max_prefix_len");
    assert_null(ctx);
    assert_int_equal(pfx_test_live_bytes(rt), live0);

    /* defaults: one item of min(positions, 1024) tokens, no prefix */
    assert_int_equal(pfx_context_create(w.model, NULL, &ctx), PFX_SUCCESS);
    pfx_context_params got;
    assert_int_equal(pfx_context_get_params(ctx, &got), PFX_SUCCESS);
    assert_int_equal(got.max_batch, 1);
    assert_int_equal(got.max_tokens, 24);
    assert_int_equal(got.max_prefix_len, 0);
    assert_int_equal(got.logits_chunk_rows, 24);
    assert_false(got.recompute);
    assert_status_names(rt, pfx_context_get_params(ctx, NULL), PFX_ERROR_NULL_ARGUMENT, "params");
    assert_status_names(NULL, pfx_context_get_params(NULL, &got), PFX_ERROR_NULL_ARGUMENT, "ctx");
    assert_null(pfx_context_model(NULL));
    int32_t ids[2] = { 3, 4 };
    pfx_model_batch b = { 1, 2, ids, NULL, NULL };
    double loss;
    assert_status_names(NULL, pfx_model_loss(NULL, &b, NULL, &loss), PFX_ERROR_NULL_ARGUMENT,
                        "ctx");
    assert_status_names(NULL, pfx_model_profile_enable(NULL, true), PFX_ERROR_NULL_ARGUMENT, "ctx");
    pfx_context_destroy(&ctx);
    pfx_context_destroy(&ctx); /* NULL-safe */
    pfx_context_destroy(NULL);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
    close_world(&w);
}

/* Calls past the context's capacity: batch, tokens, prefix length, a
 * serving step's slots and a generation's requests and prompt, each named. */
static void test_capacity_limits(void **state)
{
    pfx_runtime *rt = *state;
    world w;
    open_world(&w, rt, true, 46);
    const pfx_context_params p = { .max_batch = 2, .max_tokens = 5, .max_prefix_len = 1 };
    pfx_context *ctx = context(w.model, &p);
    call_in c;
    make_call(&w, &c, 3, 6, 2, 505);
    double loss;
    pfx_model_batch b = c.batch;
    b.tokens = 5; /* rows of 6 ids read as 5 */
    assert_status_names(rt, pfx_model_loss(ctx, &b, NULL, &loss), PFX_ERROR_OUT_OF_RANGE,
                        "max_batch");
    b.batch = 2;
    b.tokens = 6;
    b.lens = NULL;
    assert_status_names(rt, pfx_model_loss(ctx, &b, NULL, &loss), PFX_ERROR_OUT_OF_RANGE,
                        "max_tokens");
    b.tokens = 5;
    assert_status_names(rt, pfx_model_loss(ctx, &b, &c.pre, &loss), PFX_ERROR_OUT_OF_RANGE,
                        "max_prefix_len");
    assert_int_equal(pfx_model_loss(ctx, &b, NULL, &loss), PFX_SUCCESS);

    /* a cache of more slots than the context's batch */
    pfx_kv_cache *cache = NULL;
    assert_int_equal(pfx_kv_cache_create(w.model, 3, 12, &cache), PFX_SUCCESS);
    pfx_tensor *logits = NULL;
    const size_t shape[2] = { 3, w.s.vocab };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &logits), PFX_SUCCESS);
    pfx_serve_step step = { 3, 1, c.ids, NULL, NULL };
    assert_status_names(rt, pfx_serve_step_run(ctx, cache, NULL, &step, logits),
                        PFX_ERROR_OUT_OF_RANGE, "max_batch");
    step = (pfx_serve_step){ 1, 6, c.ids, NULL, NULL };
    assert_status_names(rt, pfx_serve_step_run(ctx, cache, NULL, &step, logits),
                        PFX_ERROR_OUT_OF_RANGE, "max_tokens");
    int32_t out[3][2];
    pfx_request q[3];
    for (int i = 0; i < 3; i++)
        q[i] = (pfx_request){ .prompt = c.ids, .prompt_len = 3, .adapter = -1, .out = out[i] };
    const pfx_sampling greedy = { .max_new_tokens = 2 };
    assert_status_names(rt, pfx_generate(ctx, cache, NULL, q, 3, &greedy, NULL, NULL, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "max_batch");
    q[0].prompt_len = 6;
    assert_status_names(rt, pfx_generate(ctx, cache, NULL, q, 1, &greedy, NULL, NULL, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "max_tokens");
    q[0].prompt_len = 3;
    assert_int_equal(pfx_generate(ctx, cache, NULL, q, 2, &greedy, NULL, NULL, NULL), PFX_SUCCESS);
    assert_int_equal(q[0].out_len, 2);
    pfx_tensor_destroy(&logits);
    pfx_kv_cache_destroy(&cache);
    pfx_context_destroy(&ctx);
    free_call(&w, &c);
    close_world(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_gpt2),         cmocka_unit_test(test_shared_llama),
        cmocka_unit_test(test_train_between_evals), cmocka_unit_test(test_destroy_order),
        cmocka_unit_test(test_context_arguments),   cmocka_unit_test(test_capacity_limits),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
