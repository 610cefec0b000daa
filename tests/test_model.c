/* Whole models (include/prefixcl/model.h) against the double reference of
 * tests/reference/model_ref.h: tiny GPT-2 and Llama-family folders written
 * here with random weights, logits, loss, prefix and gain gradients; padding,
 * P = 0, GQA, RoPE (default and llama3), q/k/v biases, tied and untied heads,
 * half storage, sharded checkpoints, a prefix bank, the last-position logits. */
#include <math.h>

#include "pfx_test.h"
#include "model_folder.h"
#include "reference/encoder_ref.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "reference/storage_ref.h"
#include "tolerances.h"

typedef struct problem {
    size_t B, N, P;
    int32_t ids[4 * 32];
    int32_t lens[4];
    int32_t labels[4 * 32]; /* unshifted, -100 for padding */
    float *kp, *vp;         /* [L, Hkv, P, D] */
    float gain[TF_MAX_LAYERS * 8];
} problem;

static void make_problem(const tf_model *m, problem *p, size_t B, size_t N, size_t P,
                         const int32_t *lens, uint64_t seed)
{
    const ref_model_config *c = &m->rc;
    memset(p, 0, sizeof(*p));
    p->B = B;
    p->N = N;
    p->P = P;
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    for (size_t b = 0; b < B; b++) {
        p->lens[b] = lens ? lens[b] : (int32_t)N;
        for (size_t t = 0; t < N; t++) {
            p->ids[b * N + t] = (int32_t)ref_rng_index(&rng, c->vocab);
            p->labels[b * N + t] = t < (size_t)p->lens[b] ? p->ids[b * N + t] : -100;
        }
    }
    size_t n = c->layers * c->kv_heads * (P ? P : 1) * c->head_dim;
    p->kp = malloc(n * sizeof(float));
    p->vp = malloc(n * sizeof(float));
    assert_non_null(p->kp);
    assert_non_null(p->vp);
    ref_rng_fill(&rng, p->kp, n, -1.0f, 1.0f);
    ref_rng_fill(&rng, p->vp, n, -1.0f, 1.0f);
    ref_rng_fill(&rng, p->gain, c->layers * c->heads, -0.6f, 0.6f);
}

static void free_problem(problem *p)
{
    free(p->kp);
    free(p->vp);
}

/* Library prefixes [Hkv, P, D] per layer from the problem's [L, Hkv, P, D]. */
typedef struct lib_prefix {
    pfx_tensor *k[TF_MAX_LAYERS], *v[TF_MAX_LAYERS];
    pfx_tensor *dk[TF_MAX_LAYERS], *dv[TF_MAX_LAYERS], *dg[TF_MAX_LAYERS];
    pfx_model_prefix pre;
    pfx_model_grads grads;
} lib_prefix;

static void make_lib_prefix(pfx_runtime *rt, const tf_model *m, const problem *p,
                            pfx_gain_mode mode, float ramp, lib_prefix *lp)
{
    const ref_model_config *c = &m->rc;
    memset(lp, 0, sizeof(*lp));
    size_t shape[3] = { c->kv_heads, p->P, c->head_dim }, per = c->kv_heads * p->P * c->head_dim;
    size_t hshape[1] = { c->heads };
    for (size_t l = 0; l < c->layers; l++) {
        if (p->P) {
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &lp->k[l]),
                             PFX_SUCCESS);
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &lp->v[l]),
                             PFX_SUCCESS);
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &lp->dk[l]),
                             PFX_SUCCESS);
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &lp->dv[l]),
                             PFX_SUCCESS);
            assert_int_equal(pfx_tensor_write(lp->k[l], 0, per, p->kp + l * per), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_write(lp->v[l], 0, per, p->vp + l * per), PFX_SUCCESS);
        }
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hshape, &lp->dg[l]), PFX_SUCCESS);
    }
    lp->pre.prefix_len = p->P;
    lp->pre.keys = p->P ? lp->k : NULL;
    lp->pre.values = p->P ? lp->v : NULL;
    lp->pre.gain_mode = mode;
    lp->pre.gains = mode != PFX_GAIN_OFF ? p->gain : NULL;
    lp->pre.gain_ramp = ramp;
    lp->grads.keys = p->P ? lp->dk : NULL;
    lp->grads.values = p->P ? lp->dv : NULL;
    lp->grads.gains = lp->dg;
}

static void free_lib_prefix(lib_prefix *lp)
{
    for (size_t l = 0; l < TF_MAX_LAYERS; l++) {
        pfx_tensor_destroy(&lp->k[l]);
        pfx_tensor_destroy(&lp->v[l]);
        pfx_tensor_destroy(&lp->dk[l]);
        pfx_tensor_destroy(&lp->dv[l]);
        pfx_tensor_destroy(&lp->dg[l]);
    }
}

static ref_model_prefix ref_prefix(const tf_model *m, const problem *p, pfx_gain_mode mode)
{
    (void)m;
    ref_model_prefix r = { p->P, p->P ? p->kp : NULL, p->P ? p->vp : NULL,
                           mode != PFX_GAIN_OFF ? p->gain : NULL, NULL };
    return r;
}

/* The model of dir and a context over it; the context keeps the model alive
 * (pfx_context_destroy releases both). */
static pfx_context *load(pfx_runtime *rt, const char *dir, pfx_dtype storage, size_t B, size_t N,
                         size_t P, size_t chunk, bool recompute)
{
    pfx_model_params params = { .storage = storage };
    pfx_context_params cp = { .max_batch = B,
                              .max_tokens = N,
                              .max_prefix_len = P,
                              .logits_chunk_rows = chunk,
                              .recompute = recompute };
    pfx_model *model = NULL;
    pfx_context *ctx = NULL;
    pfx_status st = pfx_model_load(rt, dir, &params, &model);
    if (st == PFX_SUCCESS)
        st = pfx_context_create(model, &cp, &ctx);
    pfx_model_destroy(&model); /* released with the context */
    if (st != PFX_SUCCESS)
        fail_msg("load %s: %s", dir, pfx_last_error(rt));
    return ctx;
}

/* Reads [L] device tensors of `per` floats into one host array. */
static void read_layers(pfx_tensor *const *t, size_t L, size_t per, float *out)
{
    for (size_t l = 0; l < L; l++)
        assert_int_equal(pfx_tensor_read(t[l], 0, per, out + l * per), PFX_SUCCESS);
}

typedef struct check_opts {
    pfx_dtype storage;
    unsigned shards;
    pfx_gain_mode gain_mode;
    float ramp;
    bool explicit_labels;
    size_t chunk;   /* logits rows per chunk (0: default) */
    bool recompute; /* the backward recomputes each block */
    double tol_fwd, tol_bwd;
    bool ref_bf16; /* the reference runs on the weights rounded to bfloat16 (files
                    * as written: the load rounds them) */
    bool ref_q8_0; /* the reference runs on the matrices of whole blocks (not
                    * the positions) as Q8_0 holds them */
} check_opts;

/* A weight as Q8_0 storage holds it: blocks of 32 along its rows; GPT-2's
 * Conv1D [in, out] (".attn.c_", ".mlp.c_") held [out, in], so blocks along
 * its columns; positions and vectors as they are. */
static void ref_q8_0_weight(tf_tensor *t)
{
    if (t->ndim != 2 || strstr(t->name, "wpe"))
        return;
    const size_t rows = t->shape[0], cols = t->shape[1];
    const bool conv1d = strstr(t->name, ".attn.c_") || strstr(t->name, ".mlp.c_");
    if ((conv1d ? rows : cols) % 32)
        return;
    if (!conv1d) {
        ref_q8_0(t->data, rows * cols, t->data);
        return;
    }
    float *tr = malloc(rows * cols * sizeof(float));
    assert_non_null(tr);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            tr[c * rows + r] = t->data[r * cols + c];
    ref_q8_0(tr, rows * cols, tr);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            t->data[r * cols + c] = tr[c * rows + r];
    free(tr);
}

/* Writes the folder, loads it, compares logits, loss and gradients. */
static void check_model(pfx_runtime *rt, tf_model *m, const problem *p, const check_opts *o)
{
    char *dir = tf_tempdir("model");
    assert_int_equal(tf_write(m, dir, o->shards), 0);
    for (size_t i = 0; o->ref_bf16 && i < m->count; i++)
        for (size_t e = 0; e < m->t[i].shape[0] * (m->t[i].ndim == 2 ? m->t[i].shape[1] : 1); e++)
            m->t[i].data[e] = ref_round_bf16(m->t[i].data[e]);
    for (size_t i = 0; o->ref_q8_0 && i < m->count; i++)
        ref_q8_0_weight(&m->t[i]);
    size_t live0 = pfx_test_live_bytes(rt);
    pfx_context *ctx =
        load(rt, dir, o->storage, p->B + 1, p->N + 2, p->P + 1, o->chunk, o->recompute);
    pfx_model_shape shape;
    assert_int_equal(pfx_model_get_shape(pfx_context_model(ctx), &shape), PFX_SUCCESS);
    const ref_model_config *rc = &m->rc;
    assert_int_equal(shape.layers, rc->layers);
    assert_int_equal(shape.kv_heads, rc->kv_heads);
    assert_int_equal(shape.head_dim, rc->head_dim);

    ref_model_config cfg = *rc;
    cfg.gain_mode = o->gain_mode;
    cfg.gain_ramp = o->ramp;
    lib_prefix lp;
    make_lib_prefix(rt, m, p, o->gain_mode, o->ramp, &lp);
    ref_model_prefix rp = ref_prefix(m, p, o->gain_mode);
    ref_model_batch rb = { p->B, p->N, p->ids, p->lens, p->labels };
    pfx_model_batch batch = { p->B, p->N, p->ids, p->lens, o->explicit_labels ? p->labels : NULL };

    /* logits */
    const size_t V = rc->vocab, R = p->B * p->N;
    double *ref_logits = malloc(R * V * sizeof(double)), ref_loss = 0;
    float *got = malloc(R * V * sizeof(float));
    assert_non_null(ref_logits);
    assert_non_null(got);
    ref_model_forward(&cfg, &m->w, &rp, &rb, ref_logits, &ref_loss);
    size_t lshape[3] = { p->B, p->N, V };
    pfx_tensor *logits = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, lshape, &logits), PFX_SUCCESS);
    pfx_status st = pfx_model_forward(ctx, &batch, &lp.pre, logits);
    if (st != PFX_SUCCESS)
        fail_msg("forward: %s", pfx_last_error(rt));
    assert_int_equal(pfx_tensor_read(logits, 0, R * V, got), PFX_SUCCESS);
    double e = rel_l2(ref_logits, got, R * V);
    print_message("  logits rel %.3g\n", e);
    assert_true(e < o->tol_fwd);

    /* last-position logits: the rows lens[b] - 1 of the full logits */
    size_t last_shape[2] = { p->B, V };
    pfx_tensor *last = NULL;
    float *last_host = malloc(p->B * V * sizeof(float));
    assert_non_null(last_host);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, last_shape, &last), PFX_SUCCESS);
    assert_int_equal(pfx_model_last_logits(ctx, &batch, &lp.pre, last), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(last, 0, p->B * V, last_host), PFX_SUCCESS);
    for (size_t b = 0; b < p->B; b++) {
        const double *row = ref_logits + (b * p->N + (size_t)p->lens[b] - 1) * V;
        double el = rel_l2(row, last_host + b * V, V);
        assert_true(el < o->tol_fwd);
    }

    /* loss, profiled: every part of a forward takes time, the backward none */
    double loss = 0, ms[PFX_MODEL_PART_COUNT];
    assert_int_equal(pfx_model_profile_enable(ctx, true), PFX_SUCCESS);
    st = pfx_model_loss(ctx, &batch, &lp.pre, &loss);
    if (st != PFX_SUCCESS)
        fail_msg("loss: %s", pfx_last_error(rt));
    assert_int_equal(pfx_model_profile_enable(ctx, false), PFX_SUCCESS);
    assert_int_equal(pfx_model_profile_read(ctx, ms, PFX_MODEL_PART_COUNT), PFX_SUCCESS);
    assert_true(ms[PFX_MODEL_PART_GEMM] > 0 && ms[PFX_MODEL_PART_HEAD] > 0);
    assert_true(ms[PFX_MODEL_PART_ATTN_FWD] > 0 && ms[PFX_MODEL_PART_LOSS] > 0);
    assert_true(ms[PFX_MODEL_PART_ATTN_BWD] == 0);
    assert_int_equal(pfx_model_profile_read(ctx, ms, PFX_MODEL_PART_COUNT - 1),
                     PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_model_profile_read(ctx, NULL, PFX_MODEL_PART_COUNT),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_model_profile_read(NULL, ms, PFX_MODEL_PART_COUNT),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_model_profile_enable(NULL, true), PFX_ERROR_NULL_ARGUMENT);
    print_message("  loss %.8f ref %.8f\n", loss, ref_loss);
    assert_true(fabs(loss - ref_loss) <= o->tol_fwd * fabs(ref_loss));

    /* gradients */
    const size_t L = rc->layers, per = rc->kv_heads * p->P * rc->head_dim, H = rc->heads;
    size_t np = L * (per ? per : 1);
    double *rdk = calloc(np, sizeof(double)), *rdv = calloc(np, sizeof(double));
    double *rdg = calloc(L * H, sizeof(double)), rloss = 0;
    float *gdk = calloc(np, sizeof(float)), *gdv = calloc(np, sizeof(float)),
          *gdg = calloc(L * H, sizeof(float));
    assert_true(rdk && rdv && rdg && gdk && gdv && gdg);
    ref_model_backward(&cfg, &m->w, &rp, &rb, &rloss, p->P ? rdk : NULL, p->P ? rdv : NULL, rdg);
    double bloss = 0;
    st = pfx_model_backward(ctx, &batch, &lp.pre, &lp.grads, &bloss);
    if (st != PFX_SUCCESS)
        fail_msg("backward: %s", pfx_last_error(rt));
    assert_true(fabs(bloss - rloss) <= o->tol_fwd * fabs(rloss));
    if (p->P) {
        read_layers(lp.dk, L, per, gdk);
        read_layers(lp.dv, L, per, gdv);
        double ek = rel_l2(rdk, gdk, L * per), ev = rel_l2(rdv, gdv, L * per);
        print_message("  dKp rel %.3g dVp rel %.3g\n", ek, ev);
        assert_true(ek < o->tol_bwd);
        assert_true(ev < o->tol_bwd);
    }
    read_layers(lp.dg, L, H, gdg);
    if (o->gain_mode != PFX_GAIN_OFF) {
        double eg = rel_l2(rdg, gdg, L * H);
        print_message("  dgain rel %.3g\n", eg);
        assert_true(eg < o->tol_bwd);
    } else {
        for (size_t i = 0; i < L * H; i++)
            assert_true(gdg[i] == 0.0f);
    }

    /* accumulate: a second backward adds the same gradients */
    if (p->P) {
        pfx_model_grads acc = lp.grads;
        acc.accumulate = true;
        float *again = malloc(np * sizeof(float));
        assert_non_null(again);
        assert_int_equal(pfx_model_backward(ctx, &batch, &lp.pre, &acc, NULL), PFX_SUCCESS);
        read_layers(lp.dk, L, per, again);
        for (size_t i = 0; i < L * per; i++)
            assert_true(fabsf(again[i] - 2.0f * gdk[i]) <= 1e-5f * (fabsf(gdk[i]) + 1e-3f));
        free(again);
    }

    free(rdk);
    free(rdv);
    free(rdg);
    free(gdk);
    free(gdv);
    free(gdg);
    free(last_host);
    free(ref_logits);
    free(got);
    pfx_tensor_destroy(&last);
    pfx_tensor_destroy(&logits);
    free_lib_prefix(&lp);
    pfx_context_destroy(&ctx);
    assert_null(ctx);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
    tf_rmdir(dir);
    free(dir);
}

static ref_model_config gpt2_config(void)
{
    ref_model_config c = { 0 };
    c.family = REF_MODEL_GPT2;
    c.layers = 2;
    c.hidden = 42;
    c.heads = 3;
    c.kv_heads = 3;
    c.head_dim = 14;
    c.inner = 62;
    c.vocab = 53;
    c.max_positions = 40;
    c.eps = 1e-5;
    c.act = REF_ACT_GELU_TANH;
    return c;
}

static ref_model_config llama_config(void)
{
    ref_model_config c = { 0 };
    c.family = REF_MODEL_LLAMA;
    c.layers = 2;
    c.hidden = 40;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 10;
    c.inner = 54;
    c.vocab = 61;
    c.max_positions = 64;
    c.eps = 1e-6;
    c.act = REF_ACT_SILU;
    c.rope.theta = 10000.0;
    return c;
}

static const check_opts default_opts = { PFX_DTYPE_F32, 1,     PFX_GAIN_OFF, 1.0f,
                                         false,         0,     false,        TOL_MODEL_FWD,
                                         TOL_MODEL_BWD, false, false };

static void test_gpt2(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = gpt2_config();
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 101);
    problem p;
    const int32_t lens[3] = { 11, 7, 4 };
    make_problem(&m, &p, 3, 11, 5, lens, 7);
    check_opts o = default_opts;
    o.chunk = 5; /* several chunks of logits, the last one short */
    check_model(rt, &m, &p, &o);
    /* per-head gains and explicit labels with a prompt masked out */
    for (size_t t = 0; t < 3; t++)
        p.labels[t] = -100;
    o.gain_mode = PFX_GAIN_TANH;
    o.ramp = 0.7f;
    o.explicit_labels = true;
    check_model(rt, &m, &p, &o);
    o.recompute = true; /* the same with each block recomputed in the backward */
    check_model(rt, &m, &p, &o);
    free_problem(&p);
    tf_model_free(&m);
}

static void test_gpt2_no_prefix(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = gpt2_config();
    c.act = REF_ACT_GELU;
    c.layers = 3;
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 102);
    problem p;
    const int32_t lens[2] = { 6, 9 };
    make_problem(&m, &p, 2, 9, 0, lens, 8);
    check_opts o = default_opts;
    o.gain_mode = PFX_GAIN_LINEAR;
    o.ramp = 1.0f;
    check_model(rt, &m, &p, &o);
    free_problem(&p);
    tf_model_free(&m);
}

static void test_llama_gqa(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    tf_model m;
    tf_model_init(&m, &c, false, "llama", 103);
    problem p;
    const int32_t lens[3] = { 13, 5, 10 };
    make_problem(&m, &p, 3, 13, 6, lens, 9);
    check_opts o = default_opts;
    o.gain_mode = PFX_GAIN_LINEAR;
    o.ramp = 0.5f;
    check_model(rt, &m, &p, &o);
    free_problem(&p);
    tf_model_free(&m);
}

static void test_llama3_rope_tied(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    c.rope.theta = 500000.0;
    c.rope.llama3 = true;
    c.rope.factor = 8.0;
    c.rope.low_freq_factor = 1.0;
    c.rope.high_freq_factor = 4.0;
    c.rope.original_max_position_embeddings = 16.0;
    c.kv_heads = 1;
    tf_model m;
    tf_model_init(&m, &c, true, "mistral", 104);
    problem p;
    make_problem(&m, &p, 2, 9, 3, NULL, 10);
    check_model(rt, &m, &p, &default_opts);
    free_problem(&p);
    tf_model_free(&m);
}

static void test_qwen2_bias(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    c.qkv_bias = true;
    c.heads = 6;
    c.kv_heads = 3;
    c.head_dim = 8;
    c.layers = 3;
    tf_model m;
    tf_model_init(&m, &c, false, "qwen2", 105);
    problem p;
    const int32_t lens[2] = { 4, 12 };
    make_problem(&m, &p, 2, 12, 4, lens, 11);
    check_opts o = default_opts;
    o.shards = 3;
    o.recompute = true;
    o.gain_mode = PFX_GAIN_TANH;
    o.ramp = 1.0f;
    check_model(rt, &m, &p, &o);
    free_problem(&p);
    tf_model_free(&m);
}

/* Weights read from BF16 and F16 files into half storage. */
static void test_half_storage(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    tf_model m;
    tf_model_init(&m, &c, false, "llama", 106);
    for (size_t i = 0; i < m.count; i++)
        snprintf(m.t[i].dtype, sizeof(m.t[i].dtype), "%s", i % 2 ? "BF16" : "F16");
    problem p;
    const int32_t lens[2] = { 10, 7 };
    make_problem(&m, &p, 2, 10, 5, lens, 12);
    check_opts o = default_opts;
    o.storage = PFX_DTYPE_F16;
    o.tol_fwd = TOL_MODEL_F16;
    check_model(rt, &m, &p, &o);
    /* GPT-2 with half storage, files F32 */
    ref_model_config g = gpt2_config();
    tf_model m2;
    tf_model_init(&m2, &g, true, "gpt2", 107);
    for (size_t i = 0; i < m2.count; i++) /* F16 files: the reference sees the stored values */
        snprintf(m2.t[i].dtype, sizeof(m2.t[i].dtype), "F16");
    problem p2;
    make_problem(&m2, &p2, 2, 8, 3, NULL, 13);
    check_model(rt, &m2, &p2, &o);
    free_problem(&p2);
    tf_model_free(&m2);
    free_problem(&p);
    tf_model_free(&m);
}

/* bfloat16 storage: a BF16 checkpoint kept exactly (Llama, the reference on
 * the file's values), F32 files rounded at load (GPT-2, the reference on the
 * weights rounded by the double reference); compute stays float32, so the
 * float32 tolerances hold. */
static void test_bf16_storage(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    tf_model m;
    tf_model_init(&m, &c, false, "llama", 116);
    for (size_t i = 0; i < m.count; i++)
        snprintf(m.t[i].dtype, sizeof(m.t[i].dtype), "BF16");
    problem p;
    const int32_t lens[2] = { 9, 6 };
    make_problem(&m, &p, 2, 9, 4, lens, 16);
    check_opts o = default_opts;
    o.storage = PFX_DTYPE_BF16;
    check_model(rt, &m, &p, &o);
    ref_model_config g = gpt2_config();
    tf_model m2;
    tf_model_init(&m2, &g, true, "gpt2", 117);
    problem p2;
    make_problem(&m2, &p2, 2, 8, 3, NULL, 17);
    o.ref_bf16 = true;
    check_model(rt, &m2, &p2, &o);
    free_problem(&p2);
    tf_model_free(&m2);
    free_problem(&p);
    tf_model_free(&m);
}

/* Q8_0 storage: the matrices whose rows are whole blocks quantized at load
 * (GPT-2 tied: every matrix, its Conv1D weights held [out, in]; Llama with
 * an intermediate size of 80: its down projection, [C, 80], stays float32
 * beside the quantized ones); the reference on the blocks' values; compute
 * stays float32, so the float32 tolerances hold. A model drawn at random is
 * the float32 one quantized. A Q8_0 model is not saved. */
static void test_q8_0_storage(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config g = gpt2_config();
    g.hidden = 64, g.heads = 4, g.kv_heads = 4, g.head_dim = 16, g.inner = 96;
    tf_model m;
    tf_model_init(&m, &g, true, "gpt2", 126);
    problem p;
    make_problem(&m, &p, 2, 8, 3, NULL, 26);
    check_opts o = default_opts;
    o.storage = PFX_DTYPE_Q8_0;
    o.ref_q8_0 = true;
    check_model(rt, &m, &p, &o);
    ref_model_config c = llama_config();
    c.hidden = 64, c.heads = 4, c.kv_heads = 2, c.head_dim = 16, c.inner = 80;
    tf_model m2;
    tf_model_init(&m2, &c, false, "llama", 127);
    problem p2;
    const int32_t lens[2] = { 9, 6 };
    make_problem(&m2, &p2, 2, 9, 4, lens, 27);
    check_model(rt, &m2, &p2, &o);

    /* drawn: each weight the float32 draw's as Q8_0 holds it */
    char *gdir = tf_tempdir("q8draw");
    assert_int_equal(tf_write(&m, gdir, 1), 0);
    pfx_model *drawn[2] = { NULL, NULL };
    const pfx_model_params draw_p[2] = { { .storage = PFX_DTYPE_F32 },
                                         { .storage = PFX_DTYPE_Q8_0 } };
    for (int i = 0; i < 2; i++)
        assert_int_equal(pfx_model_create_random(rt, gdir, &draw_p[i], 77, &drawn[i]), PFX_SUCCESS);
    size_t quantized = 0;
    for (size_t w = 0; w < pfx_model_weight_count(drawn[0]); w++) {
        pfx_model_weight_info info[2];
        pfx_tensor *t[2];
        tf_tensor ref = { .ndim = 0 };
        for (int i = 0; i < 2; i++) {
            assert_int_equal(pfx_model_get_weight(drawn[i], w, &info[i]), PFX_SUCCESS);
            assert_int_equal(pfx_model_weight_tensor(drawn[i], w, &t[i]), PFX_SUCCESS);
        }
        const size_t n = info[0].numel;
        snprintf(ref.name, sizeof(ref.name), "%s", info[0].name);
        ref.ndim = info[0].ndim;
        ref.shape[0] = info[0].shape[0];
        ref.shape[1] = info[0].ndim == 2 ? info[0].shape[1] : 1;
        ref.data = malloc(n * sizeof(float));
        float *got = malloc(n * sizeof(float));
        assert_true(ref.data && got);
        assert_int_equal(pfx_tensor_read(t[0], 0, n, ref.data), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(t[1], 0, n, got), PFX_SUCCESS);
        ref_q8_0_weight(&ref);
        /* GPT-2's Conv1D weights held [out, in] */
        const bool held_t = info[1].ndim == 2 &&
                            (strstr(info[1].name, ".attn.c_") || strstr(info[1].name, ".mlp.c_"));
        assert_int_equal(info[1].shape[0], held_t ? info[0].shape[1] : info[0].shape[0]);
        quantized += pfx_tensor_dtype(t[1]) == PFX_DTYPE_Q8_0;
        for (size_t e = 0; e < n; e++) {
            const size_t r = e / ref.shape[1], c = e % ref.shape[1];
            const float want = ref.data[e], have = held_t ? got[c * ref.shape[0] + r] : got[e];
            if (memcmp(&want, &have, sizeof(float)))
                fail_msg("drawn %s [%zu]: %a, not %a", info[0].name, e, (double)have, (double)want);
        }
        free(ref.data);
        free(got);
    }
    assert_int_equal(quantized, 1 + 4 * g.layers); /* wte and the Conv1D weights */
    pfx_model_destroy(&drawn[0]);
    pfx_model_destroy(&drawn[1]);
    tf_rmdir(gdir);
    free(gdir);

    char *dir = tf_tempdir("q8save");
    assert_int_equal(tf_write(&m2, dir, 1), 0);
    pfx_model *model = NULL;
    const pfx_model_params mp = { .storage = PFX_DTYPE_Q8_0 };
    assert_int_equal(pfx_model_load(rt, dir, &mp, &model), PFX_SUCCESS);
    char *out = tf_tempdir("q8saved");
    assert_status_names(rt, pfx_model_save(model, out, NULL), PFX_ERROR_UNSUPPORTED, "Q8_0");
    pfx_model_destroy(&model);
    tf_rmdir(dir);
    tf_rmdir(out);
    free(dir);
    free(out);
    free_problem(&p2);
    tf_model_free(&m2);
    free_problem(&p);
    tf_model_free(&m);
}

/* A bank: item b attends with entry bank_index[b]; its logits are those of
 * the item alone with that entry as a shared prefix. */
static void test_bank(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    tf_model m;
    tf_model_init(&m, &c, false, "llama", 108);
    char *dir = tf_tempdir("bank");
    assert_int_equal(tf_write(&m, dir, 1), 0);
    const size_t B = 3, N = 7, P = 4, T = 2, L = c.layers, V = c.vocab;
    const size_t per = c.kv_heads * P * c.head_dim;
    problem e[2];
    make_problem(&m, &e[0], B, N, P, NULL, 21);
    make_problem(&m, &e[1], B, N, P, NULL, 22);
    const int32_t bank_index[3] = { 1, 0, 1 };
    pfx_context *ctx = load(rt, dir, PFX_DTYPE_F32, B, N, P, 0, false);
    pfx_tensor *k[TF_MAX_LAYERS], *v[TF_MAX_LAYERS];
    size_t shape[4] = { T, c.kv_heads, P, c.head_dim };
    for (size_t l = 0; l < L; l++) {
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 4, shape, &k[l]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 4, shape, &v[l]), PFX_SUCCESS);
        for (size_t t = 0; t < T; t++) {
            assert_int_equal(pfx_tensor_write(k[l], t * per, per, e[t].kp + l * per), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_write(v[l], t * per, per, e[t].vp + l * per), PFX_SUCCESS);
        }
    }
    pfx_model_prefix pre = { .prefix_len = P, .keys = k, .values = v, .bank_index = bank_index };
    pfx_model_batch batch = { B, N, e[0].ids, NULL, NULL };
    size_t lshape[3] = { B, N, V };
    pfx_tensor *logits = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, lshape, &logits), PFX_SUCCESS);
    assert_int_equal(pfx_model_forward(ctx, &batch, &pre, logits), PFX_SUCCESS);
    float *got = malloc(B * N * V * sizeof(float));
    double *ref = malloc(N * V * sizeof(double));
    assert_non_null(got);
    assert_non_null(ref);
    assert_int_equal(pfx_tensor_read(logits, 0, B * N * V, got), PFX_SUCCESS);
    for (size_t b = 0; b < B; b++) {
        const problem *pe = &e[bank_index[b]];
        ref_model_prefix rp = { P, pe->kp, pe->vp, NULL, NULL };
        ref_model_batch rb = { 1, N, e[0].ids + b * N, NULL, NULL };
        ref_model_forward(&m.rc, &m.w, &rp, &rb, ref, NULL);
        assert_true(rel_l2(ref, got + b * N * V, N * V) < TOL_MODEL_FWD);
    }
    /* a bank index outside the bank */
    const int32_t bad[3] = { 0, 2, 1 };
    pre.bank_index = bad;
    assert_status_names(rt, pfx_model_forward(ctx, &batch, &pre, logits), PFX_ERROR_OUT_OF_RANGE,
                        "bank_index[1]");
    free(got);
    free(ref);
    pfx_tensor_destroy(&logits);
    for (size_t l = 0; l < L; l++) {
        pfx_tensor_destroy(&k[l]);
        pfx_tensor_destroy(&v[l]);
    }
    pfx_context_destroy(&ctx);
    free_problem(&e[0]);
    free_problem(&e[1]);
    tf_model_free(&m);
    tf_rmdir(dir);
    free(dir);
}

/* Through the prefix encoder: its forward gives the prefixes, the model's
 * backward their gradients, pfx_encoder_backward those of E, W1, b1, W2, b2;
 * the reference chains ref_model_backward into ref_encoder_backward. */
static void test_encoder_chain(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = gpt2_config();
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 109);
    char *dir = tf_tempdir("chain");
    assert_int_equal(tf_write(&m, dir, 1), 0);
    const size_t B = 2, N = 9, P = 4, L = c.layers;
    const ref_encoder_dims ed = { L, c.kv_heads, c.head_dim, P, 9, 11 };
    pfx_encoder_params ep = { .layers = L,
                              .kv_heads = c.kv_heads,
                              .head_dim = c.head_dim,
                              .prefix_len = P,
                              .embed_dim = 9,
                              .hidden_dim = 11 };
    pfx_encoder *enc = NULL;
    assert_int_equal(pfx_encoder_create(rt, &ep, &enc), PFX_SUCCESS);
    assert_int_equal(pfx_encoder_init_random(enc, 77, 1.0f), PFX_SUCCESS);
    float *host[PFX_ENCODER_PARAM_COUNT];
    pfx_tensor *grad[PFX_ENCODER_PARAM_COUNT];
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++) {
        pfx_tensor *t = pfx_encoder_tensor(enc, (pfx_encoder_param)i);
        size_t n = pfx_tensor_numel(t), shp[PFX_MAX_DIMS];
        for (unsigned k = 0; k < pfx_tensor_ndim(t); k++)
            shp[k] = pfx_tensor_dim(t, k);
        host[i] = malloc(n * sizeof(float));
        assert_non_null(host[i]);
        assert_int_equal(pfx_tensor_read(t, 0, n, host[i]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, pfx_tensor_ndim(t), shp, &grad[i]),
                         PFX_SUCCESS);
    }
    problem p;
    const int32_t lens[2] = { 9, 6 };
    make_problem(&m, &p, B, N, P, lens, 31);
    lib_prefix lp;
    make_lib_prefix(rt, &m, &p, PFX_GAIN_OFF, 1.0f, &lp);
    assert_int_equal(pfx_encoder_forward(enc, lp.k, lp.v), PFX_SUCCESS);
    const size_t per = c.kv_heads * P * c.head_dim;
    read_layers(lp.k, L, per, p.kp); /* the reference attends with the encoder's prefixes */
    read_layers(lp.v, L, per, p.vp);
    pfx_context *ctx = load(rt, dir, PFX_DTYPE_F32, B, N, P, 0, false);
    assert_int_equal(pfx_model_backward(ctx, &(pfx_model_batch){ B, N, p.ids, p.lens, NULL },
                                        &lp.pre, &lp.grads, NULL),
                     PFX_SUCCESS);
    pfx_encoder_grads eg = { grad[0], grad[1], grad[2], grad[3], grad[4], false };
    assert_int_equal(pfx_encoder_backward(enc, (const pfx_tensor *const *)lp.dk,
                                          (const pfx_tensor *const *)lp.dv, &eg),
                     PFX_SUCCESS);

    double *rdk = malloc(L * per * sizeof(double)), *rdv = malloc(L * per * sizeof(double));
    float *fdk = malloc(L * per * sizeof(float)), *fdv = malloc(L * per * sizeof(float));
    assert_true(rdk && rdv && fdk && fdv);
    ref_model_prefix rp = { P, p.kp, p.vp, NULL, NULL };
    ref_model_batch rb = { B, N, p.ids, p.lens, p.labels };
    ref_model_backward(&m.rc, &m.w, &rp, &rb, NULL, rdk, rdv, NULL);
    for (size_t i = 0; i < L * per; i++) {
        fdk[i] = (float)rdk[i];
        fdv[i] = (float)rdv[i];
    }
    ref_encoder_params rpar = { host[0], host[1], host[2], host[3], host[4] };
    double *rg[PFX_ENCODER_PARAM_COUNT];
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++) {
        rg[i] = malloc(ref_encoder_param_count(&ed, i) * sizeof(double));
        assert_non_null(rg[i]);
    }
    ref_encoder_backward(&ed, &rpar, fdk, fdv, rg[0], rg[1], rg[2], rg[3], rg[4]);
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++) {
        size_t n = ref_encoder_param_count(&ed, i);
        float *got = malloc(n * sizeof(float));
        assert_non_null(got);
        assert_int_equal(pfx_tensor_read(grad[i], 0, n, got), PFX_SUCCESS);
        double e = rel_l2(rg[i], got, n);
        print_message("  d%s rel %.3g\n", pfx_encoder_param_name((pfx_encoder_param)i), e);
        assert_true(e < TOL_MODEL_BWD);
        free(got);
        free(rg[i]);
        free(host[i]);
        pfx_tensor_destroy(&grad[i]);
    }
    free(rdk);
    free(rdv);
    free(fdk);
    free(fdv);
    pfx_context_destroy(&ctx);
    free_lib_prefix(&lp);
    free_problem(&p);
    pfx_encoder_destroy(&enc);
    tf_model_free(&m);
    tf_rmdir(dir);
    free(dir);
}

/* A problem's model loaded from a folder of its own, with its prefix and
 * gains (ramp r) on both sides: what the analysis checks below start from. */
typedef struct analysis_case {
    char *dir;
    pfx_context *ctx; /* keeps its model */
    ref_model_config cfg;
    lib_prefix lp;
    ref_model_prefix rp;
    ref_model_batch rb;
    pfx_model_batch batch;
} analysis_case;

static void open_case(pfx_runtime *rt, tf_model *m, const problem *p, pfx_gain_mode mode,
                      float ramp, size_t extra, analysis_case *a)
{
    a->dir = tf_tempdir("analysis");
    assert_int_equal(tf_write(m, a->dir, 1), 0);
    a->ctx = load(rt, a->dir, PFX_DTYPE_F32, p->B + extra, p->N + extra, p->P, 0, false);
    a->cfg = m->rc;
    a->cfg.gain_mode = mode;
    a->cfg.gain_ramp = ramp;
    make_lib_prefix(rt, m, p, mode, ramp, &a->lp);
    a->rp = ref_prefix(m, p, mode);
    a->rb = (ref_model_batch){ p->B, p->N, p->ids, p->lens, NULL };
    a->batch = (pfx_model_batch){ p->B, p->N, p->ids, p->lens, NULL };
}

static void close_case(analysis_case *a)
{
    free_lib_prefix(&a->lp);
    pfx_context_destroy(&a->ctx);
    tf_rmdir(a->dir);
    free(a->dir);
}

/* Every head's map of every layer and item (pfx_model_attention_probs)
 * against the reference's; each valid row sums to 1, a padding row to 0, and
 * the mean mass on the prefix over the valid rows of the batch is that of
 * pfx_model_attention_stats. Then the arguments it refuses. */
static void check_probs(pfx_runtime *rt, tf_model *m, const problem *p, pfx_gain_mode mode)
{
    analysis_case a;
    open_case(rt, m, p, mode, 0.8f, 0, &a);
    pfx_context *ctx = a.ctx;
    const ref_model_config cfg = a.cfg;
    lib_prefix *lp = &a.lp;
    const pfx_model_batch batch = a.batch;
    const size_t L = cfg.layers, H = cfg.heads, N = p->N, P = p->P, cols = P + N;
    float lib_mass[TF_MAX_LAYERS * 8];
    double mass[TF_MAX_LAYERS * 8] = { 0 };
    size_t rows = 0;
    assert_int_equal(pfx_model_attention_stats(ctx, &batch, &lp->pre, lib_mass, NULL), PFX_SUCCESS);
    size_t pshape[2] = { N, cols };
    pfx_tensor *probs = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, pshape, &probs), PFX_SUCCESS);
    double *ref = malloc(N * cols * sizeof(double));
    float *got = malloc(N * cols * sizeof(float));
    assert_non_null(ref);
    assert_non_null(got);
    for (size_t b = 0; b < p->B; b++) {
        rows += (size_t)p->lens[b];
        for (size_t l = 0; l < L; l++)
            for (size_t h = 0; h < H; h++) {
                pfx_status st = pfx_model_attention_probs(ctx, &batch, &lp->pre, b, l, h, probs);
                if (st != PFX_SUCCESS)
                    fail_msg("probs: %s", pfx_last_error(rt));
                assert_int_equal(pfx_tensor_read(probs, 0, N * cols, got), PFX_SUCCESS);
                ref_model_attention_probs(&cfg, &m->w, &a.rp, &a.rb, b, l, h, ref);
                assert_true(rel_l2(ref, got, N * cols) < TOL_PROBS_F32);
                for (size_t i = 0; i < N; i++) {
                    double sum = 0, pre = 0;
                    for (size_t j = 0; j < cols; j++) {
                        sum += got[i * cols + j];
                        pre += j < P ? got[i * cols + j] : 0.0;
                    }
                    assert_true(fabs(sum - (i < (size_t)p->lens[b] ? 1.0 : 0.0)) <
                                TOL_PROBS_F32 * (double)cols);
                    mass[l * H + h] += pre;
                }
            }
    }
    for (size_t i = 0; i < L * H; i++)
        assert_true(fabs(mass[i] / (double)rows - (double)lib_mass[i]) < TOL_STATS_F32);

    /* refused before anything runs: item, layer, head, shape, dtype, NULL */
    assert_int_equal(pfx_model_attention_probs(ctx, &batch, &lp->pre, p->B, 0, 0, probs),
                     PFX_ERROR_OUT_OF_RANGE);
    assert_non_null(strstr(pfx_last_error(rt), "item"));
    assert_int_equal(pfx_model_attention_probs(ctx, &batch, &lp->pre, 0, L, 0, probs),
                     PFX_ERROR_OUT_OF_RANGE);
    assert_non_null(strstr(pfx_last_error(rt), "layer"));
    assert_int_equal(pfx_model_attention_probs(ctx, &batch, &lp->pre, 0, 0, H, probs),
                     PFX_ERROR_OUT_OF_RANGE);
    assert_non_null(strstr(pfx_last_error(rt), "head"));
    assert_int_equal(pfx_model_attention_probs(ctx, &batch, &lp->pre, 0, 0, 0, NULL),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_model_attention_probs(NULL, &batch, &lp->pre, 0, 0, 0, probs),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_model_attention_probs(ctx, NULL, &lp->pre, 0, 0, 0, probs),
                     PFX_ERROR_NULL_ARGUMENT);
    pfx_tensor *wrong = NULL;
    size_t wshape[2] = { N, cols + 1 };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, wshape, &wrong), PFX_SUCCESS);
    assert_int_equal(pfx_model_attention_probs(ctx, &batch, &lp->pre, 0, 0, 0, wrong),
                     PFX_ERROR_INVALID_SHAPE);
    pfx_tensor_destroy(&wrong);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 2, pshape, &wrong), PFX_SUCCESS);
    assert_int_equal(pfx_model_attention_probs(ctx, &batch, &lp->pre, 0, 0, 0, wrong),
                     PFX_ERROR_DTYPE_MISMATCH);
    pfx_tensor_destroy(&wrong);
    int32_t bad_ids[4 * 32];
    memcpy(bad_ids, p->ids, sizeof(bad_ids));
    bad_ids[0] = (int32_t)cfg.vocab;
    pfx_model_batch bad = batch;
    bad.ids = bad_ids;
    assert_int_equal(pfx_model_attention_probs(ctx, &bad, &lp->pre, 0, 0, 0, probs),
                     PFX_ERROR_OUT_OF_RANGE);

    free(ref);
    free(got);
    pfx_tensor_destroy(&probs);
    close_case(&a);
}

static void test_attention_probs(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = gpt2_config();
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 111);
    problem p;
    const int32_t lens[2] = { 9, 5 };
    make_problem(&m, &p, 2, 9, 4, lens, 12);
    check_probs(rt, &m, &p, PFX_GAIN_TANH);
    free_problem(&p);
    make_problem(&m, &p, 1, 7, 0, NULL, 13); /* no prefix: the frozen model */
    check_probs(rt, &m, &p, PFX_GAIN_OFF);
    free_problem(&p);
    tf_model_free(&m);

    c = llama_config(); /* GQA, RoPE */
    tf_model_init(&m, &c, false, "llama", 112);
    const int32_t llens[2] = { 6, 11 };
    make_problem(&m, &p, 2, 11, 3, llens, 14);
    check_probs(rt, &m, &p, PFX_GAIN_LINEAR);
    free_problem(&p);
    make_problem(&m, &p, 1, 10, 0, NULL, 15);
    check_probs(rt, &m, &p, PFX_GAIN_OFF);
    free_problem(&p);
    tf_model_free(&m);
}

/* pfx_model_head_stats against ref_model_head_stats for top_k 1, 3 and 32
 * (32 beyond the visible keys of every row: all the mass), with the gain
 * `mode` and, with `dim`, a structured gain; pfx_model_attention_stats gives
 * the same bits. */
static void check_head_stats(pfx_runtime *rt, tf_model *m, problem *p, pfx_gain_mode mode, bool dim)
{
    analysis_case a;
    open_case(rt, m, p, mode, 0.75f, 1, &a);
    pfx_context *ctx = a.ctx;
    const ref_model_config cfg = a.cfg;
    const size_t L = cfg.layers, H = cfg.heads, LH = L * H, LHD = LH * cfg.head_dim;
    float *dg = dim ? malloc(LHD * sizeof(float)) : NULL;
    if (dim) {
        ref_rng rng;
        ref_rng_seed(&rng, 77);
        ref_rng_fill(&rng, dg, LHD, -0.8f, 0.8f);
    }
    a.lp.pre.dim_gains = dg;
    a.rp.dim_gain = dg;
    const pfx_model_prefix *pre = &a.lp.pre;
    const pfx_model_batch batch = a.batch;
    float mass[TF_MAX_LAYERS * 8], ent[TF_MAX_LAYERS * 8], top[TF_MAX_LAYERS * 8];
    float mass1[TF_MAX_LAYERS * 8], ent1[TF_MAX_LAYERS * 8];
    double rmass[TF_MAX_LAYERS * 8], rent[TF_MAX_LAYERS * 8], rtop[TF_MAX_LAYERS * 8];
    const unsigned ks[3] = { 1, 3, 32 };
    for (int k = 0; k < 3; k++) {
        pfx_status st = pfx_model_head_stats(ctx, &batch, pre, ks[k], mass, ent, top);
        if (st != PFX_SUCCESS)
            fail_msg("head stats: %s", pfx_last_error(rt));
        ref_model_head_stats(&cfg, &m->w, &a.rp, &a.rb, ks[k], rmass, rent, rtop);
        double worst = 0.0;
        for (size_t i = 0; i < LH; i++) {
            worst = fmax(worst, fabs(rmass[i] - mass[i]));
            worst = fmax(worst, fabs(rent[i] - ent[i]));
            worst = fmax(worst, fabs(rtop[i] - top[i]));
            if (ks[k] == 32) /* more than P + N: the whole row */
                assert_true(fabs(rtop[i] - 1.0) < 1e-12);
            if (!p->P)
                assert_true(mass[i] == 0.0f);
        }
        print_message("  top_k %u: worst |lib - ref| %.3g\n", ks[k], worst);
        assert_true(worst < TOL_STATS_F32);
        /* one output alone: the same values */
        float only[TF_MAX_LAYERS * 8];
        assert_int_equal(pfx_model_head_stats(ctx, &batch, pre, ks[k], NULL, NULL, only),
                         PFX_SUCCESS);
        assert_memory_equal(only, top, LH * sizeof(float));
    }
    assert_int_equal(pfx_model_attention_stats(ctx, &batch, pre, mass1, ent1), PFX_SUCCESS);
    assert_memory_equal(mass1, mass, LH * sizeof(float));
    assert_memory_equal(ent1, ent, LH * sizeof(float));
    free(dg);
    close_case(&a);
}

static void test_head_stats(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = gpt2_config();
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 121);
    problem p;
    const int32_t lens[3] = { 13, 4, 9 };
    make_problem(&m, &p, 3, 13, 5, lens, 22);
    check_head_stats(rt, &m, &p, PFX_GAIN_TANH, false);
    check_head_stats(rt, &m, &p, PFX_GAIN_OFF, true);
    free_problem(&p);
    make_problem(&m, &p, 1, 7, 0, NULL, 23); /* no prefix, no gain: the frozen model */
    check_head_stats(rt, &m, &p, PFX_GAIN_OFF, false);
    free_problem(&p);
    tf_model_free(&m);

    c = llama_config(); /* GQA, RoPE */
    c.layers = 3;
    tf_model_init(&m, &c, false, "llama", 124);
    const int32_t llens[2] = { 11, 6 };
    make_problem(&m, &p, 2, 11, 3, llens, 25);
    check_head_stats(rt, &m, &p, PFX_GAIN_LINEAR, true);
    free_problem(&p);
    tf_model_free(&m);
}

/* pfx_model_hidden_states against ref_model_hidden on the valid rows. */
static void check_hidden(pfx_runtime *rt, tf_model *m, problem *p, pfx_gain_mode mode)
{
    analysis_case a;
    open_case(rt, m, p, mode, 0.6f, 2, &a);
    const size_t B = p->B, N = p->N, C = a.cfg.hidden;
    size_t shape[3] = { B, N, C };
    pfx_tensor *hidden = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &hidden), PFX_SUCCESS);
    pfx_status st = pfx_model_hidden_states(a.ctx, &a.batch, &a.lp.pre, hidden);
    if (st != PFX_SUCCESS)
        fail_msg("hidden states: %s", pfx_last_error(rt));
    double *ref = malloc(B * N * C * sizeof(double));
    float *got = malloc(B * N * C * sizeof(float));
    assert_non_null(ref);
    assert_non_null(got);
    ref_model_hidden(&a.cfg, &m->w, &a.rp, &a.rb, ref);
    assert_int_equal(pfx_tensor_read(hidden, 0, B * N * C, got), PFX_SUCCESS);
    for (size_t b = 0; b < B; b++) {
        const size_t at = b * N * C, n = (size_t)p->lens[b] * C;
        double e = rel_l2(ref + at, got + at, n);
        print_message("  item %zu: hidden rel %.3g\n", b, e);
        assert_true(e < TOL_MODEL_FWD);
    }
    free(ref);
    free(got);
    pfx_tensor_destroy(&hidden);
    close_case(&a);
}

static void test_hidden_states(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = gpt2_config();
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 131);
    problem p;
    const int32_t lens[3] = { 10, 3, 7 };
    make_problem(&m, &p, 3, 10, 4, lens, 32);
    check_hidden(rt, &m, &p, PFX_GAIN_TANH);
    free_problem(&p);
    tf_model_free(&m);
    c = llama_config();
    tf_model_init(&m, &c, false, "llama", 132);
    const int32_t llens[2] = { 5, 12 };
    make_problem(&m, &p, 2, 12, 3, llens, 33);
    check_hidden(rt, &m, &p, PFX_GAIN_LINEAR);
    free_problem(&p);
    make_problem(&m, &p, 1, 9, 0, NULL, 34);
    check_hidden(rt, &m, &p, PFX_GAIN_OFF);
    free_problem(&p);
    tf_model_free(&m);
}

/* What pfx_model_head_stats and pfx_model_hidden_states refuse, each with its
 * status and a message naming the argument. */
static void test_analysis_refusals(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = gpt2_config();
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 141);
    char *dir = tf_tempdir("refusals");
    assert_int_equal(tf_write(&m, dir, 1), 0);
    problem p;
    make_problem(&m, &p, 2, 6, 2, NULL, 42);
    pfx_context *ctx = load(rt, dir, PFX_DTYPE_F32, 2, 6, 2, 0, false);
    lib_prefix lp;
    make_lib_prefix(rt, &m, &p, PFX_GAIN_LINEAR, 1.0f, &lp);
    pfx_model_batch batch = { 2, 6, p.ids, NULL, NULL };
    float out[TF_MAX_LAYERS * 8];
    assert_status_names(rt, pfx_model_head_stats(ctx, &batch, &lp.pre, 0, out, NULL, NULL),
                        PFX_ERROR_INVALID_ARGUMENT, "top_k");
    assert_status_names(rt, pfx_model_head_stats(ctx, &batch, &lp.pre, 33, NULL, NULL, out),
                        PFX_ERROR_INVALID_ARGUMENT, "top_k");
    assert_status_names(rt, pfx_model_head_stats(ctx, &batch, &lp.pre, 3, NULL, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "top_k_mass");
    assert_status_names(rt, pfx_model_head_stats(ctx, NULL, &lp.pre, 3, out, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "batch");
    assert_int_equal(pfx_model_head_stats(NULL, &batch, &lp.pre, 3, out, NULL, NULL),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_status_names(rt, pfx_model_attention_stats(ctx, &batch, &lp.pre, NULL, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "entropy");
    pfx_model_batch wide = batch;
    wide.batch = 3;
    assert_status_names(rt, pfx_model_head_stats(ctx, &wide, &lp.pre, 3, out, NULL, NULL),
                        PFX_ERROR_OUT_OF_RANGE, "batch.batch");

    const size_t C = c.hidden;
    pfx_tensor *h = NULL;
    size_t good[3] = { 2, 6, C }, flat[2] = { 12, C }, wider[3] = { 2, 6, C + 1 };
    assert_status_names(rt, pfx_model_hidden_states(ctx, &batch, &lp.pre, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "hidden");
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 3, good, &h), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_hidden_states(ctx, &batch, &lp.pre, h),
                        PFX_ERROR_DTYPE_MISMATCH, "hidden");
    pfx_tensor_destroy(&h);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, flat, &h), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_hidden_states(ctx, &batch, &lp.pre, h),
                        PFX_ERROR_INVALID_SHAPE, "hidden");
    pfx_tensor_destroy(&h);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, wider, &h), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_hidden_states(ctx, &batch, &lp.pre, h),
                        PFX_ERROR_INVALID_SHAPE, "hidden");
    pfx_tensor_destroy(&h);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, good, &h), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_hidden_states(ctx, &wide, &lp.pre, h), PFX_ERROR_OUT_OF_RANGE,
                        "batch.batch");
    assert_status_names(rt, pfx_model_hidden_states(NULL, &batch, &lp.pre, h),
                        PFX_ERROR_NULL_ARGUMENT, "model");
    pfx_tensor_destroy(&h);

    free_lib_prefix(&lp);
    free_problem(&p);
    pfx_context_destroy(&ctx);
    tf_model_free(&m);
    tf_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_gpt2_no_prefix),
        cmocka_unit_test(test_llama_gqa),
        cmocka_unit_test(test_llama3_rope_tied),
        cmocka_unit_test(test_qwen2_bias),
        cmocka_unit_test(test_half_storage),
        cmocka_unit_test(test_bf16_storage),
        cmocka_unit_test(test_q8_0_storage),
        cmocka_unit_test(test_bank),
        cmocka_unit_test(test_encoder_chain),
        cmocka_unit_test(test_attention_probs),
        cmocka_unit_test(test_head_stats),
        cmocka_unit_test(test_hidden_states),
        cmocka_unit_test(test_analysis_refusals),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
