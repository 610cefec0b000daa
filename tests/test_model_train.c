/* Full training's gradients (model.h, pfx_model_grads.weights) against the
 * double reference of tests/reference/model_ref.h: every weight of tiny
 * GPT-2 and Llama-family folders written here (tied and untied heads, GQA,
 * q/k/v biases, the stacked q | k | v, GPT-2's positions after a prefix),
 * with padding and ignored labels, chunked logits, recomputed blocks,
 * prefixes and gains trained alongside; accumulation, a frozen subset, the
 * weights left unwritten, the weight list, and bad gradient arguments;
 * initialization from a config alone; saving as a Hugging Face folder. */
#include <math.h>
#include <unistd.h>

#include "pfx_test.h"
#include "model_folder.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

#define MAX_ROWS    (4 * 16)
#define MAX_WEIGHTS 64

typedef struct problem {
    size_t B, N, P;
    int32_t ids[MAX_ROWS], lens[4], labels[MAX_ROWS];
    float *kp, *vp; /* [L, Hkv, P, D] */
    float gain[TF_MAX_LAYERS * 8];
} problem;

/* Random ids; labels -100 at padding and every fifth position. */
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
        p->lens[b] = lens[b];
        for (size_t t = 0; t < N; t++) {
            const size_t r = b * N + t;
            p->ids[r] = (int32_t)ref_rng_index(&rng, c->vocab);
            p->labels[r] = t < (size_t)lens[b] && t % 5 != 4 ? p->ids[r] : -100;
        }
    }
    const size_t n = c->layers * c->kv_heads * (P ? P : 1) * c->head_dim;
    p->kp = malloc(n * sizeof(float));
    p->vp = malloc(n * sizeof(float));
    assert_true(p->kp && p->vp);
    ref_rng_fill(&rng, p->kp, n, -1.0f, 1.0f);
    ref_rng_fill(&rng, p->vp, n, -1.0f, 1.0f);
    ref_rng_fill(&rng, p->gain, c->layers * c->heads, -0.6f, 0.6f);
}

/* The reference gradient of the library's weight `name` (n elements) into
 * out; the stacked q | k | v from the three projections' gradients. */
static void ref_grad(tf_model *m, const ref_model_config *c, const ref_model_grads *g,
                     const char *name, size_t n, double *out)
{
    size_t l;
    char kind[8];
    if (sscanf(name, "model.layers.%zu.self_attn.qkv_proj.%7s", &l, kind) == 2) {
        static const char *const parts[3] = { "q_proj", "k_proj", "v_proj" };
        size_t at = 0;
        for (int i = 0; i < 3; i++) {
            char part[96];
            snprintf(part, sizeof(part), "model.layers.%zu.self_attn.%s.%s", l, parts[i], kind);
            tf_tensor *t = tf_find(m, part);
            assert_non_null(t);
            const size_t k = t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
            const double *gp = ref_model_grad_of(c, &m->w, g, t->data);
            assert_non_null(gp);
            assert_true(at + k <= n);
            memcpy(out + at, gp, k * sizeof(double));
            at += k;
        }
        assert_int_equal(at, n);
        return;
    }
    tf_tensor *t = tf_find(m, name);
    if (!t)
        fail_msg("weight %s is not in the folder", name);
    const double *gp = ref_model_grad_of(c, &m->w, g, t->data);
    if (!gp)
        fail_msg("no reference gradient for %s", name);
    memcpy(out, gp, n * sizeof(double));
}

typedef struct train_opts {
    pfx_gain_mode gain_mode;
    float ramp;
    size_t chunk;
    bool recompute;
    bool dim; /* a structured gain too */
} train_opts;

/* Loads the folder of m, computes every weight's gradient (and the
 * prefixes' and gains' when P > 0 or a gain is on) and compares them with
 * the reference; then accumulation, a frozen half, unwritten weights. */
static void check_weights(pfx_runtime *rt, tf_model *m, const problem *p, const train_opts *o)
{
    char *dir = tf_tempdir("train");
    assert_int_equal(tf_write(m, dir, 1), 0);
    const size_t live0 = pfx_test_live_bytes(rt);
    pfx_context_params params = { .max_batch = p->B + 1,
                                  .max_tokens = p->N + 2,
                                  .max_prefix_len = p->P + 1,
                                  .logits_chunk_rows = o->chunk,
                                  .recompute = o->recompute };
    pfx_model *model = NULL;
    pfx_context *ctx = NULL;
    if (pfx_model_load(rt, dir, NULL, &model) != PFX_SUCCESS ||
        pfx_context_create(model, &params, &ctx) != PFX_SUCCESS)
        fail_msg("load: %s", pfx_last_error(rt));
    ref_model_config cfg = m->rc;
    cfg.gain_mode = o->gain_mode;
    cfg.gain_ramp = o->ramp;
    const size_t L = cfg.layers, H = cfg.heads, per = cfg.kv_heads * p->P * cfg.head_dim;

    /* the weight list: every name known to the folder, shapes, a tensor each */
    const size_t count = pfx_model_weight_count(model);
    assert_true(count > 0 && count <= MAX_WEIGHTS);
    pfx_tensor *grad[MAX_WEIGHTS] = { 0 };
    pfx_model_weight_info info[MAX_WEIGHTS];
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(pfx_model_get_weight(model, i, &info[i]), PFX_SUCCESS);
        assert_int_equal(
            pfx_tensor_create(rt, PFX_DTYPE_F32, info[i].ndim, info[i].shape, &grad[i]),
            PFX_SUCCESS);
        total += info[i].numel;
    }
    pfx_model_shape shape;
    assert_int_equal(pfx_model_get_shape(model, &shape), PFX_SUCCESS);
    assert_int_equal(total, shape.parameters);

    /* prefixes and gains ride along */
    pfx_tensor *k[TF_MAX_LAYERS] = { 0 }, *v[TF_MAX_LAYERS] = { 0 }, *dk[TF_MAX_LAYERS] = { 0 };
    pfx_tensor *dv[TF_MAX_LAYERS] = { 0 }, *dg[TF_MAX_LAYERS] = { 0 };
    const size_t pshape[3] = { cfg.kv_heads, p->P, cfg.head_dim }, hshape[1] = { H };
    for (size_t l = 0; l < L; l++) {
        if (p->P) {
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &k[l]), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &v[l]), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &dk[l]), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &dv[l]), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_write(k[l], 0, per, p->kp + l * per), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_write(v[l], 0, per, p->vp + l * per), PFX_SUCCESS);
        }
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hshape, &dg[l]), PFX_SUCCESS);
    }
    /* a structured gain [L, H, D] and its gradients [H, D] */
    const size_t HD = H * cfg.head_dim, dshape[2] = { H, cfg.head_dim };
    float *G = malloc(L * HD * sizeof(float));
    pfx_tensor *ddim[TF_MAX_LAYERS] = { 0 };
    ref_rng grng;
    ref_rng_seed(&grng, 77);
    ref_rng_fill(&grng, G, L * HD, -0.5f, 0.5f);
    for (size_t l = 0; o->dim && l < L; l++)
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, dshape, &ddim[l]), PFX_SUCCESS);
    pfx_model_prefix pre = { .prefix_len = p->P,
                             .keys = p->P ? k : NULL,
                             .values = p->P ? v : NULL,
                             .gain_mode = o->gain_mode,
                             .gains = o->gain_mode ? p->gain : NULL,
                             .dim_gains = o->dim ? G : NULL,
                             .gain_ramp = o->ramp };
    pfx_model_grads grads = { .keys = p->P ? dk : NULL,
                              .values = p->P ? dv : NULL,
                              .gains = dg,
                              .dim_gains = o->dim ? ddim : NULL,
                              .weights = grad };
    pfx_model_batch batch = { p->B, p->N, p->ids, p->lens, p->labels };

    /* the reference */
    ref_model_grads rg;
    ref_model_grads_alloc(&cfg, !m->tied && cfg.family == REF_MODEL_LLAMA, &rg);
    double *rdk = calloc(L * per + 1, sizeof(double)), *rdv = calloc(L * per + 1, sizeof(double));
    double *rdg = calloc(L * H, sizeof(double)), rloss = 0.0;
    ref_model_prefix rp = { p->P, p->P ? p->kp : NULL, p->P ? p->vp : NULL,
                            o->gain_mode ? p->gain : NULL, o->dim ? G : NULL };
    ref_model_batch rb = { p->B, p->N, p->ids, p->lens, p->labels };
    rg.dim_gain = o->dim ? calloc(L * HD, sizeof(double)) : NULL;
    ref_model_backward_weights(&cfg, &m->w, &rp, &rb, &rloss, rdk, rdv, rdg, &rg);

    /* one weight read before, to see it unwritten after */
    float *w_before = malloc(info[0].numel * sizeof(float)),
          *w_after = malloc(info[0].numel * sizeof(float));
    pfx_tensor *w0 = NULL;
    assert_int_equal(pfx_model_weight_tensor(model, 0, &w0), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(w0, 0, info[0].numel, w_before), PFX_SUCCESS);

    double loss = 0.0;
    if (pfx_model_backward(ctx, &batch, &pre, &grads, &loss) != PFX_SUCCESS)
        fail_msg("backward: %s", pfx_last_error(rt));
    assert_true(fabs(loss - rloss) <= TOL_MODEL_FWD * rloss);
    assert_int_equal(pfx_tensor_read(w0, 0, info[0].numel, w_after), PFX_SUCCESS);
    assert_memory_equal(w_before, w_after, info[0].numel * sizeof(float));

    float *got[MAX_WEIGHTS];
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        const size_t n = info[i].numel;
        double *want = malloc(n * sizeof(double));
        got[i] = malloc(n * sizeof(float));
        assert_true(want && got[i]);
        ref_grad(m, &cfg, &rg, info[i].name, n, want);
        assert_int_equal(pfx_tensor_read(grad[i], 0, n, got[i]), PFX_SUCCESS);
        const double e = rel_l2(want, got[i], n);
        worst = e > worst ? e : worst;
        if (!(e < TOL_MODEL_WGRAD))
            fail_msg("%s: gradient rel error %.3g (> %.3g)", info[i].name, e, TOL_MODEL_WGRAD);
        free(want);
    }
    print_message("  %zu weights, worst rel %.3g\n", count, worst);
    if (p->P) {
        float *gk = malloc(L * per * sizeof(float));
        for (size_t l = 0; l < L; l++)
            assert_int_equal(pfx_tensor_read(dk[l], 0, per, gk + l * per), PFX_SUCCESS);
        assert_true(rel_l2(rdk, gk, L * per) < TOL_MODEL_BWD);
        free(gk);
    }
    if (o->gain_mode) {
        float gg[TF_MAX_LAYERS * 8];
        for (size_t l = 0; l < L; l++)
            assert_int_equal(pfx_tensor_read(dg[l], 0, H, gg + l * H), PFX_SUCCESS);
        assert_true(rel_l2(rdg, gg, L * H) < TOL_MODEL_BWD);
    }

    if (o->dim) {
        float *gd = malloc(L * HD * sizeof(float));
        for (size_t l = 0; l < L; l++)
            assert_int_equal(pfx_tensor_read(ddim[l], 0, HD, gd + l * HD), PFX_SUCCESS);
        const double e = rel_l2(rg.dim_gain, gd, L * HD);
        print_message("  structured gain rel %.3g\n", e);
        assert_true(e < TOL_MODEL_BWD);
        free(gd);
    }

    /* accumulation adds a second backward's gradients */
    pfx_model_grads acc = grads;
    acc.accumulate = true;
    assert_int_equal(pfx_model_backward(ctx, &batch, &pre, &acc, NULL), PFX_SUCCESS);
    for (size_t i = 0; i < count; i++) {
        const size_t n = info[i].numel;
        float *again = malloc(n * sizeof(float));
        assert_int_equal(pfx_tensor_read(grad[i], 0, n, again), PFX_SUCCESS);
        for (size_t j = 0; j < n; j++)
            if (!(fabsf(again[j] - 2.0f * got[i][j]) <= 1e-5f * (fabsf(got[i][j]) + 1e-3f)))
                fail_msg("%s[%zu]: accumulated %g, once %g", info[i].name, j, again[j], got[i][j]);
        free(again);
    }

    /* a frozen half: every other weight asked, the rest left untouched */
    pfx_tensor *half[MAX_WEIGHTS] = { 0 };
    for (size_t i = 0; i < count; i++) {
        half[i] = i % 2 ? grad[i] : NULL;
        assert_int_equal(pfx_tensor_fill(grad[i], 7.0f), PFX_SUCCESS);
    }
    pfx_model_grads some = { .weights = half };
    assert_int_equal(pfx_model_backward(ctx, &batch, &pre, &some, NULL), PFX_SUCCESS);
    for (size_t i = 0; i < count; i++) {
        const size_t n = info[i].numel;
        float *now = malloc(n * sizeof(float));
        assert_int_equal(pfx_tensor_read(grad[i], 0, n, now), PFX_SUCCESS);
        for (size_t j = 0; j < n; j++) {
            const float want = i % 2 ? got[i][j] : 7.0f;
            if (!(fabsf(now[j] - want) <= 1e-5f * (fabsf(want) + 1e-3f)))
                fail_msg("frozen half: %s[%zu] is %g, expected %g", info[i].name, j, now[j], want);
        }
        free(now);
    }

    for (size_t i = 0; i < count; i++) {
        free(got[i]);
        pfx_tensor_destroy(&grad[i]);
    }
    for (size_t l = 0; l < L; l++) {
        pfx_tensor_destroy(&k[l]);
        pfx_tensor_destroy(&v[l]);
        pfx_tensor_destroy(&dk[l]);
        pfx_tensor_destroy(&dv[l]);
        pfx_tensor_destroy(&dg[l]);
    }
    for (size_t l = 0; l < L; l++)
        pfx_tensor_destroy(&ddim[l]);
    free(G);
    free(rg.dim_gain);
    free(w_before);
    free(w_after);
    free(rdk);
    free(rdv);
    free(rdg);
    ref_model_grads_free(&rg);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&model);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
    tf_rmdir(dir);
    free(dir);
}

static ref_model_config gpt2_config(void)
{
    ref_model_config c = { 0 };
    c.family = REF_MODEL_GPT2;
    c.layers = 2;
    c.hidden = 30;
    c.heads = 3;
    c.kv_heads = 3;
    c.head_dim = 10;
    c.inner = 46;
    c.vocab = 37;
    c.max_positions = 24;
    c.eps = 1e-5;
    c.act = REF_ACT_GELU_TANH;
    return c;
}

static ref_model_config llama_config(void)
{
    ref_model_config c = { 0 };
    c.family = REF_MODEL_LLAMA;
    c.layers = 2;
    c.hidden = 28;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 6;
    c.inner = 38;
    c.vocab = 41;
    c.max_positions = 64;
    c.eps = 1e-6;
    c.act = REF_ACT_SILU;
    c.rope.theta = 10000.0;
    return c;
}

static void test_gpt2_weights(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = gpt2_config();
    tf_model m;
    tf_model_init(&m, &c, true, "gpt2", 201);
    problem p;
    const int32_t lens[3] = { 9, 6, 3 };
    make_problem(&m, &p, 3, 9, 0, lens, 21);
    train_opts o = { .chunk = 5 }; /* several chunks of logits, the last one short */
    check_weights(rt, &m, &p, &o);
    free(p.kp);
    free(p.vp);
    /* positions after a prefix, a gain, recomputed blocks */
    make_problem(&m, &p, 2, 7, 3, lens + 1, 22);
    o = (train_opts){ .gain_mode = PFX_GAIN_TANH, .ramp = 0.5f, .recompute = true, .dim = true };
    check_weights(rt, &m, &p, &o);
    free(p.kp);
    free(p.vp);
    tf_model_free(&m);
}

static void test_llama_weights(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    c.qkv_bias = true;
    tf_model m;
    tf_model_init(&m, &c, false, "qwen2", 202);
    problem p;
    const int32_t lens[2] = { 11, 7 };
    make_problem(&m, &p, 2, 11, 2, lens, 23);
    train_opts o = { .gain_mode = PFX_GAIN_LINEAR, .ramp = 1.0f, .chunk = 4 };
    check_weights(rt, &m, &p, &o);
    free(p.kp);
    free(p.vp);
    tf_model_free(&m);
    /* tied, MQA, no biases, recomputed */
    c.qkv_bias = false;
    c.kv_heads = 1;
    tf_model_init(&m, &c, true, "llama", 203);
    const int32_t lens2[2] = { 8, 5 };
    make_problem(&m, &p, 2, 8, 0, lens2, 24);
    o = (train_opts){ .ramp = 0.8f, .recompute = true, .dim = true }; /* structured gain alone */
    check_weights(rt, &m, &p, &o);
    free(p.kp);
    free(p.vp);
    tf_model_free(&m);
}

/* The index of the weight named `name`, or SIZE_MAX. */
static size_t find_weight(const pfx_model *model, const char *name)
{
    pfx_model_weight_info info;
    for (size_t i = 0; i < pfx_model_weight_count(model); i++)
        if (pfx_model_get_weight(model, i, &info) == PFX_SUCCESS && strcmp(info.name, name) == 0)
            return i;
    return SIZE_MAX;
}

/* Bad weight gradients: each a specific status, nothing written. */
static void test_bad_weight_grads(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    tf_model m;
    tf_model_init(&m, &c, false, "llama", 204);
    char *dir = tf_tempdir("train-bad");
    assert_int_equal(tf_write(&m, dir, 1), 0);
    pfx_model_params params = { .storage = PFX_DTYPE_F32 };
    const pfx_context_params cp = { .max_batch = 1, .max_tokens = 6 };
    pfx_model *model = NULL;
    pfx_context *ctx = NULL;
    assert_int_equal(pfx_model_load(rt, dir, &params, &model), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(model, &cp, &ctx), PFX_SUCCESS);
    const size_t count = pfx_model_weight_count(model);
    pfx_model_weight_info info;
    assert_status_names(rt, pfx_model_get_weight(model, count, &info), PFX_ERROR_OUT_OF_RANGE,
                        "index");
    assert_status_names(rt, pfx_model_get_weight(model, 0, NULL), PFX_ERROR_NULL_ARGUMENT, "info");
    assert_int_equal(pfx_model_weight_count(NULL), 0);
    pfx_tensor *t = NULL;
    assert_status_names(rt, pfx_model_weight_tensor(model, count, &t), PFX_ERROR_OUT_OF_RANGE,
                        "index");
    /* names: the stacked projection stands for q, k and v (no q_proj, k_proj, v_proj) */
    const size_t qkv = find_weight(model, "model.layers.0.self_attn.qkv_proj.weight");
    const size_t n1 = find_weight(model, "model.layers.0.input_layernorm.weight");
    const size_t n2 = find_weight(model, "model.layers.0.post_attention_layernorm.weight");
    assert_int_equal(find_weight(model, "model.layers.0.self_attn.k_proj.weight"), SIZE_MAX);
    assert_int_equal(pfx_model_get_weight(model, qkv, &info), PFX_SUCCESS);
    assert_int_equal(info.kind, PFX_WEIGHT_MATRIX);
    assert_int_equal(info.shape[0], (c.heads + 2 * c.kv_heads) * c.head_dim);
    assert_int_equal(pfx_model_get_weight(model, n1, &info), PFX_SUCCESS);
    assert_int_equal(info.kind, PFX_WEIGHT_NORM);
    assert_int_equal(info.layer, 0);
    assert_true(n1 < MAX_WEIGHTS && n2 < MAX_WEIGHTS);

    pfx_tensor *grad[MAX_WEIGHTS] = { 0 };
    int32_t ids[6] = { 1, 2, 3, 4, 5, 6 };
    pfx_model_batch batch = { 1, 6, ids, NULL, NULL };
    pfx_model_grads g = { .weights = grad };
    assert_int_equal(pfx_model_get_weight(model, n1, &info), PFX_SUCCESS); /* a norm [C] */
    const size_t wrong[1] = { info.shape[0] + 1 };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, wrong, &grad[n1]), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_backward(ctx, &batch, NULL, &g, NULL),
                        PFX_ERROR_INVALID_SHAPE, "grads.weights");
    pfx_tensor_destroy(&grad[n1]);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 1, info.shape, &grad[n1]), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_backward(ctx, &batch, NULL, &g, NULL),
                        PFX_ERROR_DTYPE_MISMATCH, "grads.weights");
    pfx_tensor_destroy(&grad[n1]);
    /* a weight as its own gradient; one gradient for two weights */
    assert_int_equal(pfx_model_weight_tensor(model, n1, &grad[n1]), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_backward(ctx, &batch, NULL, &g, NULL), PFX_ERROR_ALIASING,
                        "parameter");
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, info.shape, &grad[n1]), PFX_SUCCESS);
    assert_int_equal(pfx_model_get_weight(model, n2, &info), PFX_SUCCESS);
    assert_int_equal(info.kind, PFX_WEIGHT_NORM); /* [C] too */
    grad[n2] = grad[n1];
    assert_status_names(rt, pfx_model_backward(ctx, &batch, NULL, &g, NULL), PFX_ERROR_ALIASING,
                        "grads.weights");
    grad[n2] = NULL;
    /* the rejected calls wrote nothing */
    float before[64], after[64];
    const size_t n = info.shape[0];
    assert_int_equal(pfx_tensor_fill(grad[n1], 3.0f), PFX_SUCCESS);
    grad[n2] = grad[n1];
    assert_int_equal(pfx_model_backward(ctx, &batch, NULL, &g, NULL), PFX_ERROR_ALIASING);
    grad[n2] = NULL;
    assert_int_equal(pfx_tensor_read(grad[n1], 0, n, after), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++)
        before[i] = 3.0f;
    assert_memory_equal(before, after, n * sizeof(float));
    pfx_tensor_destroy(&grad[n1]);

    /* a structured gain: finite values, gradients [H, D] */
    {
        const size_t LHD = c.layers * c.heads * c.head_dim;
        float *G = calloc(LHD, sizeof(float));
        pfx_tensor *dd[TF_MAX_LAYERS] = { 0 };
        const size_t wrong_dim[2] = { c.heads, c.head_dim + 1 },
                     right_dim[2] = { c.heads, c.head_dim };
        for (size_t l = 0; l < c.layers; l++)
            assert_int_equal(
                pfx_tensor_create(rt, PFX_DTYPE_F32, 2, l ? right_dim : wrong_dim, &dd[l]),
                PFX_SUCCESS);
        pfx_model_prefix pre = { .dim_gains = G, .gain_ramp = 1.0f };
        pfx_model_grads gd = { .dim_gains = dd };
        assert_status_names(rt, pfx_model_backward(ctx, &batch, &pre, &gd, NULL),
                            PFX_ERROR_INVALID_SHAPE, "grads.dim_gains[0]");
        G[5] = NAN;
        assert_status_names(rt, pfx_model_backward(ctx, &batch, &pre, NULL, NULL),
                            PFX_ERROR_NOT_FINITE, "prefix.dim_gains[5]");
        G[5] = 0.0f;
        pre.gain_ramp = 1.5f;
        assert_status_names(rt, pfx_model_backward(ctx, &batch, &pre, NULL, NULL),
                            PFX_ERROR_NOT_FINITE, "gain_ramp");
        for (size_t l = 0; l < c.layers; l++)
            pfx_tensor_destroy(&dd[l]);
        free(G);
    }
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&model);

    /* half storage: weight gradients need float32 weights */
    params.storage = PFX_DTYPE_F16;
    assert_int_equal(pfx_model_load(rt, dir, &params, &model), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(model, &cp, &ctx), PFX_SUCCESS);
    assert_int_equal(pfx_model_get_weight(model, n1, &info), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, info.shape, &grad[n1]), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_backward(ctx, &batch, NULL, &g, NULL), PFX_ERROR_UNSUPPORTED,
                        "float32");
    pfx_tensor_destroy(&grad[n1]);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&model);
    tf_rmdir(dir);
    free(dir);
    tf_model_free(&m);
}

/* Mean and standard deviation of a weight's values. */
static void weight_stats(pfx_model *model, size_t i, size_t n, double *mean, double *sd,
                         float *first)
{
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_model_weight_tensor(model, i, &t), PFX_SUCCESS);
    float *x = malloc(n * sizeof(float));
    assert_int_equal(pfx_tensor_read(t, 0, n, x), PFX_SUCCESS);
    double s = 0.0, q = 0.0;
    for (size_t j = 0; j < n; j++)
        s += x[j];
    *mean = s / (double)n;
    for (size_t j = 0; j < n; j++)
        q += (x[j] - *mean) * (x[j] - *mean);
    *sd = sqrt(q / (double)n);
    if (first)
        memcpy(first, x, (n < 16 ? n : 16) * sizeof(float));
    free(x);
}

/* Initialization from config.json alone, as transformers draws it: each
 * matrix and embedding normal with the config's initializer_range (GPT-2's
 * c_proj weights scaled by 1/sqrt(2 n_layer)), biases 0, norms 1, the
 * Llama family's padding row 0; seeded. */
static void test_init(void **state)
{
    pfx_runtime *rt = *state;
    char *dir = tf_tempdir("init");
    assert_int_equal(
        tf_write_config_text(dir, "{\"model_type\": \"gpt2\", \"n_embd\": 96, \"n_layer\": 3, "
                                  "\"n_head\": 4, \"vocab_size\": 301, \"n_positions\": 70, "
                                  "\"initializer_range\": 0.05}"),
        0);
    pfx_model *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(pfx_model_init(rt, dir, NULL, 7, &a), PFX_SUCCESS);
    assert_int_equal(pfx_model_init(rt, dir, NULL, 7, &b), PFX_SUCCESS);
    assert_int_equal(pfx_model_init(rt, dir, NULL, 8, &c), PFX_SUCCESS);
    const double proj = 0.05 / sqrt(6.0);
    size_t checked = 0;
    for (size_t i = 0; i < pfx_model_weight_count(a); i++) {
        pfx_model_weight_info info;
        assert_int_equal(pfx_model_get_weight(a, i, &info), PFX_SUCCESS);
        double mean, sd, mb, sb, mc, sc;
        float fa[16], fb[16], fc[16];
        weight_stats(a, i, info.numel, &mean, &sd, fa);
        weight_stats(b, i, info.numel, &mb, &sb, fb);
        weight_stats(c, i, info.numel, &mc, &sc, fc);
        assert_memory_equal(fa, fb, sizeof(fa)); /* the same seed, the same values */
        if (info.kind == PFX_WEIGHT_BIAS) {
            assert_true(mean == 0.0 && sd == 0.0);
            continue;
        }
        if (info.kind == PFX_WEIGHT_NORM) {
            assert_true(mean == 1.0 && sd == 0.0);
            continue;
        }
        assert_true(memcmp(fa, fc, sizeof(fa)) != 0); /* another seed, others */
        const bool is_proj = strstr(info.name, "c_proj.weight") != NULL;
        const double want = is_proj ? proj : 0.05, n = (double)info.numel;
        /* 5 standard errors of the sample mean and deviation */
        if (!(fabs(mean) < 5.0 * want / sqrt(n)) || !(fabs(sd / want - 1.0) < 5.0 / sqrt(2.0 * n)))
            fail_msg("%s: mean %.3g sd %.4g, expected 0 and %.4g", info.name, mean, sd, want);
        checked++;
    }
    assert_int_equal(checked, 2 + 4 * 3); /* wte, wpe; c_attn, c_proj, c_fc, mlp c_proj per layer */
    pfx_model_destroy(&a);
    pfx_model_destroy(&b);
    pfx_model_destroy(&c);

    /* the Llama family: the padding row of the embedding is 0 */
    assert_int_equal(tf_write_config_text(dir,
                                          "{\"model_type\": \"llama\", \"hidden_size\": 40, "
                                          "\"intermediate_size\": 56, \"num_hidden_layers\": 2, "
                                          "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                                          "\"vocab_size\": 77, \"max_position_embeddings\": 64, "
                                          "\"pad_token_id\": 5}"),
                     0);
    assert_int_equal(pfx_model_init(rt, dir, NULL, 9, &a), PFX_SUCCESS);
    pfx_tensor *wte = NULL;
    assert_int_equal(pfx_model_weight_tensor(a, find_weight(a, "model.embed_tokens.weight"), &wte),
                     PFX_SUCCESS);
    float rows[7 * 40];
    assert_int_equal(pfx_tensor_read(wte, 0, 7 * 40, rows), PFX_SUCCESS);
    for (size_t e = 0; e < 40; e++) {
        assert_true(rows[5 * 40 + e] == 0.0f);
        assert_true(rows[4 * 40 + e] != 0.0f && rows[6 * 40 + e] != 0.0f);
    }
    pfx_model_destroy(&a);
    assert_int_equal(tf_write_config_text(dir,
                                          "{\"model_type\": \"llama\", \"hidden_size\": 40, "
                                          "\"intermediate_size\": 56, \"num_hidden_layers\": 2, "
                                          "\"num_attention_heads\": 4, \"vocab_size\": 77, "
                                          "\"max_position_embeddings\": 64, \"pad_token_id\": 77}"),
                     0);
    const size_t live = pfx_test_live_bytes(rt);
    assert_status_names(rt, pfx_model_init(rt, dir, NULL, 9, &a), PFX_ERROR_INVALID_SHAPE,
                        "pad_token_id");
    assert_null(a);
    assert_int_equal(pfx_test_live_bytes(rt), live);
    tf_rmdir(dir);
    free(dir);
}

/* Logits of model on a fixed batch, into out [B * N * V]. */
static void logits_of(pfx_runtime *rt, pfx_model *model, size_t V, float *out)
{
    const pfx_context_params cp = { .max_batch = 2, .max_tokens = 6 };
    pfx_context *ctx = NULL;
    assert_int_equal(pfx_context_create(model, &cp, &ctx), PFX_SUCCESS);
    int32_t ids[2 * 6] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8 };
    const int32_t lens[2] = { 6, 4 };
    pfx_model_batch batch = { 2, 6, ids, lens, NULL };
    const size_t shape[3] = { 2, 6, V };
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &t), PFX_SUCCESS);
    if (pfx_model_forward(ctx, &batch, NULL, t) != PFX_SUCCESS)
        fail_msg("forward: %s", pfx_last_error(rt));
    assert_int_equal(pfx_tensor_read(t, 0, 2 * 6 * V, out), PFX_SUCCESS);
    pfx_tensor_destroy(&t);
    pfx_context_destroy(&ctx);
}

/* A saved folder loads back with the same logits: a changed weight, the
 * split q | k | v with biases, shards and the switch back to one file, a
 * model initialized from a config. */
static void check_save(pfx_runtime *rt, pfx_model *model, size_t V, const char *out)
{
    float *want = malloc(12 * V * sizeof(float)), *got = malloc(12 * V * sizeof(float));
    logits_of(rt, model, V, want);
    const pfx_model_params params = { .storage = PFX_DTYPE_F32 };
    for (int sharded = 1; sharded >= 0; sharded--) {
        pfx_model_save_params sp = { .max_shard_bytes = sharded ? 3000 : 0 };
        if (pfx_model_save(model, out, &sp) != PFX_SUCCESS)
            fail_msg("save: %s", pfx_last_error(rt));
        char path[4096];
        snprintf(path, sizeof(path), "%s/model.safetensors.index.json", out);
        assert_int_equal(access(path, F_OK) == 0, sharded);
        snprintf(path, sizeof(path), "%s/model.safetensors", out);
        assert_int_equal(access(path, F_OK) == 0, !sharded);
        pfx_model *back = NULL;
        if (pfx_model_load(rt, out, &params, &back) != PFX_SUCCESS)
            fail_msg("load the saved folder: %s", pfx_last_error(rt));
        logits_of(rt, back, V, got);
        assert_memory_equal(want, got, 12 * V * sizeof(float));
        pfx_model_destroy(&back);
    }
    free(want);
    free(got);
}

static void test_save(void **state)
{
    pfx_runtime *rt = *state;
    ref_model_config c = llama_config();
    c.qkv_bias = true;
    tf_model m;
    tf_model_init(&m, &c, false, "qwen2", 205);
    char *dir = tf_tempdir("save-in"), *out = tf_tempdir("save-out");
    assert_int_equal(tf_write(&m, dir, 1), 0);
    const pfx_model_params params = { .storage = PFX_DTYPE_F32 };
    pfx_model *model = NULL;
    assert_int_equal(pfx_model_load(rt, dir, &params, &model), PFX_SUCCESS);
    /* a trained weight: the stacked k | v rows and biases changed */
    pfx_tensor *qkv = NULL, *qkv_b = NULL;
    assert_int_equal(
        pfx_model_weight_tensor(
            model, find_weight(model, "model.layers.1.self_attn.qkv_proj.weight"), &qkv),
        PFX_SUCCESS);
    assert_int_equal(
        pfx_model_weight_tensor(model, find_weight(model, "model.layers.0.self_attn.qkv_proj.bias"),
                                &qkv_b),
        PFX_SUCCESS);
    float vals[40];
    for (size_t i = 0; i < 40; i++)
        vals[i] = 0.01f * (float)i - 0.2f;
    const size_t QD = c.heads * c.head_dim;
    assert_int_equal(pfx_tensor_write(qkv, (QD + 1) * c.hidden, 40, vals), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(qkv_b, QD - 3, 9, vals), PFX_SUCCESS);
    check_save(rt, model, c.vocab, out);
    pfx_model_destroy(&model);

    /* bad destinations */
    char file[4096];
    snprintf(file, sizeof(file), "%s/config.json", out);
    assert_int_equal(pfx_model_load(rt, dir, &params, &model), PFX_SUCCESS);
    assert_status_names(rt, pfx_model_save(model, file, NULL), PFX_ERROR_IO, "not a folder");
    assert_status_names(rt, pfx_model_save(model, NULL, NULL), PFX_ERROR_NULL_ARGUMENT, "dir");
    assert_status_names(rt, pfx_model_save(model, "", NULL), PFX_ERROR_INVALID_ARGUMENT, "dir");
    assert_int_equal(pfx_model_save(NULL, out, NULL), PFX_ERROR_NULL_ARGUMENT);
    pfx_model_destroy(&model);
    tf_rmdir(out);
    free(out);

    /* GPT-2 from a config alone */
    out = tf_tempdir("save-gpt2");
    assert_int_equal(
        tf_write_config_text(dir, "{\"model_type\": \"gpt2\", \"n_embd\": 24, \"n_layer\": 2, "
                                  "\"n_head\": 3, \"vocab_size\": 50, \"n_positions\": 16}"),
        0);
    assert_int_equal(pfx_model_init(rt, dir, &params, 11, &model), PFX_SUCCESS);
    check_save(rt, model, 50, out);
    pfx_model_destroy(&model);
    tf_rmdir(out);
    free(out);
    tf_rmdir(dir);
    free(dir);
    tf_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_weights),
        cmocka_unit_test(test_llama_weights),
        cmocka_unit_test(test_bad_weight_grads),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_save),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
