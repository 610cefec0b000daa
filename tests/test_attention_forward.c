/* pfx_attention_forward against the double-precision reference, and its
 * argument checks (suite 'attention_forward'). */
#include <math.h>
#include <unistd.h>

#include "pfx_test.h"
#include "reference/attn_fixture.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

#include "attn_configs.h"
#include "attention_tuning.h"
#include "internal.h"

struct fwd_tensors;

typedef struct fwd_case {
    pfx_attention_desc d;
    size_t bank; /* T > 0: a bank [T, Hkv, P, D] */
    bool half_q, half_kv, half_prefix, half_o;
    bool bf16_kv;     /* K and V as bfloat16 (a KV cache's storage) */
    float data_range; /* inputs uniform in [-range, range] (default 1) */
    uint64_t seed;
    void (*poke)(struct fwd_tensors *t); /* changes inputs (host and device) before the run */
    bool with_lse;
} fwd_case;

typedef struct fwd_tensors {
    pfx_tensor *q, *k, *v, *pk, *pv, *o, *lse;
    float *hq, *hk, *hv, *hpk, *hpv;
} fwd_tensors;

static pfx_tensor *make(pfx_runtime *rt, bool half, unsigned ndim, const size_t *shape)
{
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, half ? PFX_DTYPE_F16 : PFX_DTYPE_F32, ndim, shape, &t),
                     PFX_SUCCESS);
    return t;
}

/* Random inputs as the shared fixture draws them (reference/attn_fixture.h):
 * q, k, v, then prefix k, v, each read back as the device stores it (half
 * rounding), so that the reference sees exactly the device's inputs. */
static void tensors_create(pfx_runtime *rt, const fwd_case *c, fwd_tensors *t)
{
    const pfx_attention_desc *d = &c->d;
    memset(t, 0, sizeof(*t));
    ref_rng rng;
    ref_rng_seed(&rng, c->seed);
    float range = c->data_range > 0 ? c->data_range : 1.0f;
    const pfx_dtype q_dt = c->half_q ? PFX_DTYPE_F16 : PFX_DTYPE_F32;
    const pfx_dtype kv_dt = c->bf16_kv   ? PFX_DTYPE_BF16
                            : c->half_kv ? PFX_DTYPE_F16
                                         : PFX_DTYPE_F32;
    const pfx_dtype p_dt = c->half_prefix ? PFX_DTYPE_F16 : PFX_DTYPE_F32;
    size_t qs[4], ks[4], os[4], ps[4];
    attn_shape(d, ATTN_Q, qs);
    attn_shape(d, ATTN_KV, ks);
    attn_shape(d, ATTN_O, os);
    assert_int_equal(attn_upload(rt, &rng, q_dt, 4, qs, range, &t->hq, &t->q), PFX_SUCCESS);
    assert_int_equal(attn_upload(rt, &rng, kv_dt, 4, ks, range, &t->hk, &t->k), PFX_SUCCESS);
    assert_int_equal(attn_upload(rt, &rng, kv_dt, 4, ks, 1.0f, &t->hv, &t->v), PFX_SUCCESS);
    if (d->prefix_len) {
        unsigned nd = attn_prefix_shape(d, c->bank, ps);
        assert_int_equal(attn_upload(rt, &rng, p_dt, nd, ps, range, &t->hpk, &t->pk), PFX_SUCCESS);
        assert_int_equal(attn_upload(rt, &rng, p_dt, nd, ps, 1.0f, &t->hpv, &t->pv), PFX_SUCCESS);
    }
    t->o = make(rt, c->half_o, 4, os);
    size_t ls[3] = { d->batch, d->heads, d->queries };
    if (c->with_lse)
        t->lse = make(rt, false, 3, ls);
    /* Poison the outputs: every element must be written. */
    assert_int_equal(pfx_tensor_fill(t->o, NAN), PFX_SUCCESS);
    if (t->lse)
        assert_int_equal(pfx_tensor_fill(t->lse, NAN), PFX_SUCCESS);
}

static void tensors_destroy(fwd_tensors *t)
{
    pfx_tensor_destroy(&t->q);
    pfx_tensor_destroy(&t->k);
    pfx_tensor_destroy(&t->v);
    pfx_tensor_destroy(&t->pk);
    pfx_tensor_destroy(&t->pv);
    pfx_tensor_destroy(&t->o);
    pfx_tensor_destroy(&t->lse);
    free(t->hq);
    free(t->hk);
    free(t->hv);
    free(t->hpk);
    free(t->hpv);
}

static pfx_attention_inputs inputs_of(const fwd_tensors *t)
{
    pfx_attention_inputs in = { t->q, t->k, t->v, t->pk, t->pv };
    return in;
}

/* Runs the case and checks O (and LSE) against the reference. */
static void run_case(pfx_runtime *rt, fwd_case *c)
{
    size_t live0 = pfx_test_live_bytes(rt);
    c->with_lse = true;
    fwd_tensors t;
    tensors_create(rt, c, &t);
    if (c->poke)
        c->poke(&t);
    pfx_attention_inputs in = inputs_of(&t);
    pfx_status st = pfx_attention_forward(rt, &c->d, &in, t.o, t.lse);
    if (st != PFX_SUCCESS)
        fail_msg("forward: %s: %s", pfx_status_string(st), pfx_last_error(rt));
    assert_int_equal(pfx_runtime_finish(rt), PFX_SUCCESS);

    size_t nq = ref_q_count(&c->d), nl = ref_lse_count(&c->d);
    float *o = malloc(nq * sizeof(float)), *lse = malloc(nl * sizeof(float));
    double *ro = malloc(nq * sizeof(double)), *rl = malloc(nl * sizeof(double));
    assert_int_equal(pfx_tensor_read(t.o, 0, nq, o), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(t.lse, 0, nl, lse), PFX_SUCCESS);
    ref_attention_forward(&c->d, t.hq, t.hk, t.hv, t.hpk, t.hpv, ro, rl);
    double e_o = rel_l2(ro, o, nq), e_l = rel_l2(rl, lse, nl);
    bool half = c->half_q || c->half_kv || c->half_prefix || c->half_o;
    double tol = half ? TOL_FWD_F16 : TOL_FWD_F32;
    if (!(e_o <= tol) || !(e_l <= TOL_FWD_F32))
        fail_msg("B%zu H%zu Hkv%zu N%zu M%zu P%zu D%zu causal %d: O error %.3g, LSE error %.3g "
                 "(tolerance %.3g)",
                 c->d.batch, c->d.heads, c->d.kv_heads, c->d.queries, c->d.keys, c->d.prefix_len,
                 c->d.head_dim, c->d.causal, e_o, e_l, tol);
    /* Hidden rows: exactly 0 and -inf. */
    for (size_t i = 0; i < nl; i++)
        if (isinf(rl[i]))
            assert_true(isinf(lse[i]) && lse[i] < 0);
    for (size_t i = 0; i < nq; i++)
        if (ro[i] == 0.0)
            assert_true(o[i] == 0.0f);
    free(o);
    free(lse);
    free(ro);
    free(rl);
    tensors_destroy(&t);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
}

static fwd_case base_case(size_t B, size_t H, size_t Hkv, size_t N, size_t M, size_t P, size_t D,
                          uint64_t seed)
{
    fwd_case c;
    memset(&c, 0, sizeof(c));
    ref_desc_init(&c.d, B, H, Hkv, N, M, P, D);
    c.seed = seed;
    return c;
}

static void test_basic(void **state)
{
    pfx_runtime *rt = *state;
    fwd_case c = base_case(2, 4, 2, 37, 53, 7, 64, 1);
    run_case(rt, &c);
    c = base_case(1, 2, 2, 70, 70, 0, 32, 2); /* P = 0 */
    c.d.causal = true;
    run_case(rt, &c);
    c = base_case(2, 3, 1, 45, 61, 19, 64, 3); /* MQA, causal */
    c.d.causal = true;
    run_case(rt, &c);
}

static void test_head_dims(void **state)
{
    pfx_runtime *rt = *state;
    const size_t dims[] = { 16, 20, 32, 64, 80, 96, 128, 40, 72, 200 };
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
        fwd_case c = base_case(1, 2, 1, 21, 29, 5, dims[i], 10 + i);
        c.d.causal = i % 2;
        run_case(rt, &c);
        /* and the decode tiles of the same class */
        c = base_case(1, 2, 1, 1, 40, 3, dims[i], 20 + i);
        run_case(rt, &c);
    }
}

static void test_decode_split_k(void **state)
{
    pfx_runtime *rt = *state;
    /* One sequence, one kv head: the split-K path must be taken. */
    fwd_case c = base_case(1, 4, 1, 1, 300, 5, 64, 30);
    pfx_attn_fwd_tiles t;
    assert_int_equal(pfx_attn_fwd_select(rt, "test", 64, 4, &t), PFX_SUCCESS);
    size_t kps;
    size_t splits = pfx_attn_fwd_splits(pfx_attn_tuning_lookup(rt->vendor, &rt->info, NULL),
                                        rt->info.compute_units, &t, 1, 1, 4, 305, &kps);
    assert_true(splits > 1);
    run_case(rt, &c);
    /* N = 4 causal decode, GQA, with lengths. */
    c = base_case(2, 8, 2, 1, 517, 9, 128, 31);
    run_case(rt, &c);
    int32_t ql[2] = { 4, 2 }, kl[2] = { 517, 300 };
    c = base_case(2, 4, 2, 4, 517, 0, 64, 32);
    c.d.causal = true;
    c.d.q_lens = ql;
    c.d.kv_lens = kl;
    run_case(rt, &c);
    /* long cache */
    c = base_case(1, 2, 1, 1, 4000, 16, 64, 33);
    run_case(rt, &c);
    /* per-head and structured gains through the split-K path and its merge
     * (served gains decode there) */
    float gain[4] = { -0.4f, 0.9f, 0.0f, 1.7f }, dim_gain[4 * 64];
    ref_rng rng;
    ref_rng_seed(&rng, 34);
    ref_rng_fill(&rng, dim_gain, 4 * 64, -0.9f, 2.0f);
    const pfx_gain_mode modes[2] = { PFX_GAIN_LINEAR, PFX_GAIN_TANH };
    for (int i = 0; i < 2; i++) {
        c = base_case(1, 4, 1, 1, 300, 5, 64, 34 + i);
        c.d.gain_mode = modes[i];
        c.d.gain = gain;
        c.d.dim_gain = dim_gain;
        run_case(rt, &c);
    }
}

static void test_layouts(void **state)
{
    pfx_runtime *rt = *state;
    for (unsigned mask = 1; mask < 8; mask++) {
        fwd_case c = base_case(2, 4, 2, 19, 23, 6, 32, 40 + mask);
        c.d.q_layout = (mask & 1) ? PFX_LAYOUT_BNHD : PFX_LAYOUT_BHND;
        c.d.kv_layout = (mask & 2) ? PFX_LAYOUT_BNHD : PFX_LAYOUT_BHND;
        c.d.o_layout = (mask & 4) ? PFX_LAYOUT_BNHD : PFX_LAYOUT_BHND;
        c.d.causal = mask & 1;
        run_case(rt, &c);
    }
    fwd_case c = base_case(2, 8, 2, 2, 100, 4, 64, 49); /* decode, mixed layouts */
    c.d.q_layout = PFX_LAYOUT_BNHD;
    c.d.kv_layout = PFX_LAYOUT_BNHD;
    run_case(rt, &c);
}

static void test_lengths_and_hidden_rows(void **state)
{
    pfx_runtime *rt = *state;
    int32_t ql[3] = { 33, 5, 0 }, kl[3] = { 0, 40, 3 };
    fwd_case c = base_case(3, 2, 1, 33, 40, 4, 64, 50);
    c.d.causal = true;
    c.d.q_lens = ql;
    c.d.kv_lens = kl;
    run_case(rt, &c);
    /* No prefix, no keys: every row hidden. */
    c.d.prefix_len = 0;
    c.seed = 51;
    run_case(rt, &c);
    /* Causal with M < N: the first N - M rows see nothing. */
    c = base_case(1, 2, 2, 40, 17, 0, 32, 52);
    c.d.causal = true;
    run_case(rt, &c);
}

static void test_gains_and_scale(void **state)
{
    pfx_runtime *rt = *state;
    float gain[6] = { -0.9f, 3.0f, 0.0f, 1.5f, -0.5f, 2.2f };
    const pfx_gain_mode modes[] = { PFX_GAIN_OFF, PFX_GAIN_LINEAR, PFX_GAIN_TANH };
    for (size_t m = 0; m < 3; m++) {
        fwd_case c = base_case(2, 6, 3, 25, 31, 5, 64, 60 + m);
        c.d.gain_mode = modes[m];
        c.d.gain = gain;
        c.d.gain_ramp = m == 2 ? 0.5f : 1.0f;
        c.d.causal = m == 1;
        run_case(rt, &c);
    }
    ref_rng rng;
    ref_rng_seed(&rng, 64);
    float dg[6 * 80];
    ref_rng_fill(&rng, dg, 6 * 80, -0.9f, 3.0f);
    fwd_case c = base_case(1, 6, 2, 17, 30, 8, 80, 65);
    c.d.gain_mode = PFX_GAIN_TANH;
    c.d.gain = gain;
    c.d.gain_ramp = 0.7f;
    c.d.dim_gain = dg;
    c.d.scale = 0.3f;
    run_case(rt, &c);
    c = base_case(1, 6, 2, 2, 70, 8, 80, 66); /* decode + dim gain */
    c.d.dim_gain = dg;
    run_case(rt, &c);
}

/* Per-item gains of B items: modes cycle tanh, linear, off; random g and
 * G in [-0.9, 2] (structured when dim_gain is given). */
typedef struct item_gains {
    pfx_gain_mode mode[4];
    float gain[4 * 8];
    float dim_gain[4 * 8 * 256];
} item_gains;

static void item_gains_fill(item_gains *g, size_t B, size_t H, size_t D, uint64_t seed,
                            bool structured, fwd_case *c)
{
    assert_true(B <= 4 && H <= 8 && D <= 256);
    const pfx_gain_mode modes[3] = { PFX_GAIN_TANH, PFX_GAIN_LINEAR, PFX_GAIN_OFF };
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    for (size_t b = 0; b < B; b++)
        g->mode[b] = modes[b % 3];
    ref_rng_fill(&rng, g->gain, B * H, -0.9f, 2.0f);
    ref_rng_fill(&rng, g->dim_gain, B * H * D, -0.9f, 2.0f);
    c->d.item_gain_mode = g->mode;
    c->d.item_gain = g->gain;
    c->d.item_dim_gain = structured ? g->dim_gain : NULL;
}

/* Per-item gains on awkward sizes: B 3, H 4, Hkv 2, N 13, M 20, P 9 causal,
 * a bank whose item 1 has no prefix, lengths; head size D. */
static fwd_case item_gains_prefill(item_gains *g, size_t D, uint64_t seed, bool structured,
                                   float ramp)
{
    static const int32_t idx[3] = { 1, -1, 0 }, ql[3] = { 13, 6, 1 }, kl[3] = { 20, 11, 19 };
    fwd_case c = base_case(3, 4, 2, 13, 20, 9, D, seed);
    item_gains_fill(g, 3, 4, D, seed + 1000, structured, &c);
    c.d.gain_ramp = ramp;
    c.d.causal = true;
    c.bank = 2;
    c.d.bank_index = idx;
    c.d.q_lens = ql;
    c.d.kv_lens = kl;
    return c;
}

/* The same items decoding: one query against 300 keys (split-K), MQA. */
static fwd_case item_gains_decode(item_gains *g, size_t D, uint64_t seed, bool structured,
                                  float ramp)
{
    static const int32_t idx[3] = { 1, -1, 0 };
    fwd_case c = base_case(3, 4, 1, 1, 300, 5, D, seed);
    item_gains_fill(g, 3, 4, D, seed + 1000, structured, &c);
    c.d.gain_ramp = ramp;
    c.bank = 2;
    c.d.bank_index = idx;
    return c;
}

/* O of a run with per-item gains equals, item by item, O of that item run
 * alone with its gains as the per-call ones (BHND layouts, float32). */
static void check_items_alone(pfx_runtime *rt, const fwd_case *c)
{
    const pfx_attention_desc *d = &c->d;
    fwd_tensors t;
    tensors_create(rt, c, &t);
    pfx_attention_inputs in = inputs_of(&t);
    if (pfx_attention_forward(rt, d, &in, t.o, NULL) != PFX_SUCCESS)
        fail_msg("forward: %s", pfx_last_error(rt));
    size_t nq = ref_q_count(d), per_q = nq / d->batch, per_kv = ref_kv_count(d) / d->batch;
    float *o = malloc(nq * sizeof(float)), *alone = malloc(per_q * sizeof(float));
    assert_int_equal(pfx_tensor_read(t.o, 0, nq, o), PFX_SUCCESS);
    for (size_t b = 0; b < d->batch; b++) {
        pfx_attention_desc one = *d;
        one.batch = 1;
        one.item_gain_mode = NULL;
        one.item_gain = NULL;
        one.item_dim_gain = NULL;
        one.gain_mode = d->item_gain_mode[b];
        one.gain = d->item_gain + b * d->heads;
        one.dim_gain = d->item_dim_gain ? d->item_dim_gain + b * d->heads * d->head_dim : NULL;
        one.q_lens = d->q_lens ? d->q_lens + b : NULL;
        one.kv_lens = d->kv_lens ? d->kv_lens + b : NULL;
        one.bank_index = d->bank_index ? d->bank_index + b : NULL;
        size_t qs[4] = { 1, d->heads, d->queries, d->head_dim };
        size_t ks[4] = { 1, d->kv_heads, d->keys, d->head_dim };
        pfx_tensor *q = make(rt, false, 4, qs), *k = make(rt, false, 4, ks),
                   *v = make(rt, false, 4, ks), *ob = make(rt, false, 4, qs);
        assert_int_equal(pfx_tensor_write(q, 0, per_q, t.hq + b * per_q), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_write(k, 0, per_kv, t.hk + b * per_kv), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_write(v, 0, per_kv, t.hv + b * per_kv), PFX_SUCCESS);
        pfx_attention_inputs in1 = { q, k, v, t.pk, t.pv };
        if (pfx_attention_forward(rt, &one, &in1, ob, NULL) != PFX_SUCCESS)
            fail_msg("forward of item %zu alone: %s", b, pfx_last_error(rt));
        assert_int_equal(pfx_tensor_read(ob, 0, per_q, alone), PFX_SUCCESS);
        double ref_norm = 0, diff = 0;
        for (size_t i = 0; i < per_q; i++) {
            ref_norm += (double)alone[i] * alone[i];
            diff += ((double)alone[i] - o[b * per_q + i]) * ((double)alone[i] - o[b * per_q + i]);
        }
        if (!(sqrt(diff) <= TOL_FWD_F32 * sqrt(ref_norm)))
            fail_msg("item %zu of B%zu N%zu M%zu D%zu: batch vs alone error %.3g", b, d->batch,
                     d->queries, d->keys, d->head_dim, sqrt(diff / ref_norm));
        pfx_tensor_destroy(&q);
        pfx_tensor_destroy(&k);
        pfx_tensor_destroy(&v);
        pfx_tensor_destroy(&ob);
    }
    free(o);
    free(alone);
    tensors_destroy(&t);
}

/* A batch whose items use different gains (per-item modes, per head and
 * structured, ramp != 1) against the reference and against each item run
 * alone: prefill with a bank, and decode through split-K. */
static void test_item_gains(void **state)
{
    pfx_runtime *rt = *state;
    item_gains g;
    for (int structured = 0; structured < 2; structured++) {
        fwd_case c = item_gains_prefill(&g, 40, 500 + structured, structured, 0.7f);
        run_case(rt, &c);
        check_items_alone(rt, &c);
        /* decode: one query against a long cache, split-K and its merge */
        c = item_gains_decode(&g, 64, 520 + structured, structured, 0.6f);
        run_case(rt, &c);
        check_items_alone(rt, &c);
    }
    /* Per-item modes with the per-call g and G: every item's gains as given */
    float gain[4] = { 0.3f, -0.5f, 1.1f, 0.0f };
    fwd_case c = base_case(2, 4, 2, 9, 15, 0, 24, 540);
    pfx_gain_mode modes[2] = { PFX_GAIN_LINEAR, PFX_GAIN_TANH };
    c.d.gain = gain;
    c.d.item_gain_mode = modes;
    run_case(rt, &c);
}

static void test_large_logits(void **state)
{
    pfx_runtime *rt = *state;
    /* |z| up to ~80. */
    fwd_case c = base_case(1, 2, 1, 30, 41, 6, 32, 70);
    c.d.scale = 1.0f;
    c.data_range = 2.2f;
    run_case(rt, &c);
    c.d.causal = true;
    c.d.queries = 1;
    c.seed = 71;
    run_case(rt, &c);
}

static void test_bank(void **state)
{
    pfx_runtime *rt = *state;
    int32_t idx[3] = { 2, 0, 2 };
    fwd_case c = base_case(3, 4, 2, 13, 20, 9, 64, 80);
    c.bank = 3;
    c.d.bank_index = idx;
    c.d.causal = true;
    run_case(rt, &c);
    c = base_case(3, 4, 2, 1, 60, 9, 64, 81); /* decode with a bank */
    c.bank = 4;
    c.d.bank_index = idx;
    run_case(rt, &c);
    c = base_case(3, 4, 2, 13, 20, 9, 64, 82); /* shared */
    run_case(rt, &c);
    /* entry -1: an item without prefix beside items with one (serving),
     * prefill and decode (split-K) */
    int32_t none[4] = { 1, -1, 0, -1 };
    c = base_case(4, 4, 2, 11, 11, 7, 40, 83);
    c.bank = 2;
    c.d.bank_index = none;
    c.d.causal = true;
    run_case(rt, &c);
    c = base_case(4, 6, 3, 1, 77, 5, 24, 84);
    c.bank = 2;
    c.d.bank_index = none;
    run_case(rt, &c);
}

static void test_half(void **state)
{
    pfx_runtime *rt = *state;
    fwd_case c = base_case(2, 4, 2, 27, 33, 5, 64, 90);
    c.half_q = c.half_kv = c.half_prefix = c.half_o = true;
    run_case(rt, &c);
    c.half_q = c.half_o = false;
    c.d.causal = true;
    c.seed = 91;
    run_case(rt, &c);
    c.half_kv = false;
    c.half_o = true;
    c.d.queries = 1;
    c.seed = 92;
    run_case(rt, &c);
}

/* K and V stored as bfloat16 (the reference sees the stored values), the
 * prefix float32 beside them, one decode row a head (whole rows of a head
 * size bucket: the CPU path's vector loads); then a causal block of an
 * awkward head size with the prefix and O in half. */
static void test_bf16_kv(void **state)
{
    pfx_runtime *rt = *state;
    fwd_case c = base_case(3, 6, 2, 1, 45, 7, 64, 93);
    c.bf16_kv = true;
    run_case(rt, &c);
    c.half_prefix = c.half_o = true;
    c.d.queries = 19;
    c.d.head_dim = 40;
    c.d.causal = true;
    c.seed = 94;
    run_case(rt, &c);
}

static void test_random_sizes(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 100);
    const size_t groups[] = { 1, 2, 4 };
    for (int it = 0; it < 6; it++) {
        size_t Hkv = 1 + ref_rng_index(&rng, 2), g = groups[ref_rng_index(&rng, 3)];
        size_t N = 1 + ref_rng_index(&rng, 50), M = N + ref_rng_index(&rng, 60);
        fwd_case c = base_case(1 + ref_rng_index(&rng, 2), Hkv * g, Hkv, N, M,
                               ref_rng_index(&rng, 20), 64, 200 + it);
        c.d.causal = ref_rng_index(&rng, 2);
        run_case(rt, &c);
    }
}

/* Sets element `at` of a device tensor and of its host copy. */
static void poke_one(pfx_tensor *t, float *host, size_t at, float value)
{
    host[at] = value;
    assert_int_equal(pfx_tensor_write(t, at, 1, &value), PFX_SUCCESS);
}

/* B1 H2/1 N9 M12 P3 D32, causal, q_lens 7: NaN in one Q element of row
 * (h0, i2); NaN in input key t = 4 (causally hidden from rows i < 1) and +Inf
 * in prefix key 1 of the kv head: every row that sees them is NaN (O and
 * LSE), the rows that do not see them stay finite, the hidden rows i >= 7
 * stay O = 0 and LSE = -inf. The reference decides each row (IEEE in
 * double); run_case compares NaN against NaN. */
static void poke_nonfinite(fwd_tensors *t)
{
    poke_one(t->q, t->hq, 2 * 32 + 5, NAN); /* (h0, i2), d5 */
    poke_one(t->k, t->hk, 4 * 32 + 7, NAN); /* t4, d7 */
    if (t->pk)
        poke_one(t->pk, t->hpk, 1 * 32 + 3, INFINITY); /* prefix row 1, d3 */
}

static void poke_nan_q(fwd_tensors *t)
{
    poke_one(t->q, t->hq, 9, NAN); /* decode row of head 0 */
}

static void test_nonfinite_data(void **state)
{
    pfx_runtime *rt = *state;
    int32_t ql[1] = { 7 };
    fwd_case c = base_case(1, 2, 1, 9, 12, 3, 32, 110);
    c.d.causal = true;
    c.d.q_lens = ql;
    c.poke = poke_nonfinite;
    run_case(rt, &c);
    /* only the NaN key: rows before it stay finite */
    c.seed = 111;
    c.d.prefix_len = 0;
    run_case(rt, &c);
    /* decode tiles, and split-K with the merge */
    c = base_case(1, 2, 1, 1, 300, 4, 32, 112);
    c.poke = poke_nan_q;
    run_case(rt, &c);
}

/* Logits near the top of float32 (c_h (q . k) up to ~1.9e38, differences of
 * ~1e37 between keys): the online softmax subtracts the row max before any
 * factor is applied, so O (one-hot) and LSE (~ the max logit) are right; a
 * factor c_h that float32 cannot hold is refused by every entry point. */
static void test_huge_logits(void **state)
{
    pfx_runtime *rt = *state;
    fwd_case c = base_case(1, 2, 1, 11, 37, 5, 32, 120);
    c.d.scale = 3.0e38f; /* |q . k| <= 32 x 0.0225 = 0.72 */
    c.data_range = 0.15f;
    run_case(rt, &c);
    c = base_case(1, 2, 1, 1, 300, 5, 32, 121); /* decode, split-K merge */
    c.d.scale = 3.0e38f;
    c.data_range = 0.15f;
    run_case(rt, &c);
    float gain[2] = { 2.9e38f, 1.0f };
    c = base_case(2, 2, 2, 13, 40, 3, 64, 122);
    c.d.gain_mode = PFX_GAIN_LINEAR;
    c.d.gain = gain;
    c.d.scale = 0.9f;
    c.data_range = 0.1f; /* |q . k| <= 64 x 0.01 = 0.64: |z| <= 1.7e38 */
    run_case(rt, &c);

    /* scale 3e38 with gamma = 1 + 2.9e38: not representable, refused alike */
    c.d.scale = 3.0e38f;
    fwd_tensors t;
    tensors_create(rt, &c, &t);
    pfx_attention_inputs in = inputs_of(&t);
    assert_status_names(rt, pfx_attention_forward(rt, &c.d, &in, t.o, t.lse), PFX_ERROR_NOT_FINITE,
                        "beyond float32");
    size_t hs[1] = { 2 }, ps[2] = { 13, 43 }, qs[4] = { 2, 2, 13, 64 };
    pfx_tensor *ent = make(rt, false, 1, hs), *probs = make(rt, false, 2, ps);
    pfx_tensor *dq = make(rt, false, 4, qs), *d_o = make(rt, false, 4, qs);
    assert_status_names(rt, pfx_attention_stats(rt, &c.d, &in, 1, ent, NULL, NULL),
                        PFX_ERROR_NOT_FINITE, "beyond float32");
    assert_status_names(rt, pfx_gain_softmax_probs(rt, &c.d, &in, 1, 0, probs),
                        PFX_ERROR_NOT_FINITE, "beyond float32");
    pfx_attention_grads g = { .dq = dq };
    assert_status_names(rt, pfx_attention_backward(rt, &c.d, &in, t.o, t.lse, d_o, &g),
                        PFX_ERROR_NOT_FINITE, "beyond float32");
    pfx_tensor_destroy(&ent);
    pfx_tensor_destroy(&probs);
    pfx_tensor_destroy(&dq);
    pfx_tensor_destroy(&d_o);
    tensors_destroy(&t);
}

/* Calls reuse the runtime's workspace: after the first call no device
 * buffer is created or released, and the workspace stays for the next. */
static void test_workspace_reused(void **state)
{
    pfx_runtime *rt = *state;
    fwd_case c = base_case(2, 4, 2, 8, 10, 3, 32, 121);
    c.with_lse = true;
    fwd_tensors t;
    tensors_create(rt, &c, &t);
    pfx_attention_inputs in = inputs_of(&t);
    assert_int_equal(pfx_attention_forward(rt, &c.d, &in, t.o, t.lse), PFX_SUCCESS);
    pfx_memory_stats first, second;
    assert_int_equal(pfx_runtime_memory(rt, &first), PFX_SUCCESS);
    assert_true(first.workspace_bytes > 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pfx_attention_forward(rt, &c.d, &in, t.o, t.lse), PFX_SUCCESS);
    assert_int_equal(pfx_runtime_finish(rt), PFX_SUCCESS);
    assert_int_equal(pfx_runtime_memory(rt, &second), PFX_SUCCESS);
    assert_int_equal(second.live_buffers, first.live_buffers);
    assert_int_equal(second.workspace_bytes, first.workspace_bytes);
    assert_int_equal(second.peak_bytes, first.peak_bytes);
    tensors_destroy(&t);
}

static void test_bad_input(void **state)
{
    pfx_runtime *rt = *state;
    size_t live0 = pfx_test_live_bytes(rt);
    fwd_case c = base_case(2, 4, 2, 8, 10, 3, 32, 120);
    c.with_lse = true;
    fwd_tensors t;
    tensors_create(rt, &c, &t);
    pfx_attention_inputs in = inputs_of(&t);
    pfx_attention_desc d = c.d;
    size_t live1 = pfx_test_live_bytes(rt);

    assert_status_names(NULL, pfx_attention_forward(NULL, &d, &in, t.o, t.lse),
                        PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(rt, pfx_attention_forward(rt, NULL, &in, t.o, t.lse),
                        PFX_ERROR_NULL_ARGUMENT, "desc");
    assert_status_names(rt, pfx_attention_forward(rt, &d, NULL, t.o, t.lse),
                        PFX_ERROR_NULL_ARGUMENT, "in");
    {
        /* dropout: a probability in [0, 1); the statistics describe the undropped softmax */
        pfx_attention_desc dd = d;
        dd.dropout = 1.0f;
        assert_status_names(rt, pfx_attention_forward(rt, &dd, &in, t.o, t.lse),
                            PFX_ERROR_INVALID_ARGUMENT, "desc.dropout");
        dd.dropout = NAN;
        assert_status_names(rt, pfx_attention_forward(rt, &dd, &in, t.o, t.lse),
                            PFX_ERROR_INVALID_ARGUMENT, "desc.dropout");
        dd.dropout = 0.1f;
        pfx_tensor *ent = NULL;
        const size_t hs = 4;
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &hs, &ent), PFX_SUCCESS);
        assert_status_names(rt, pfx_attention_stats(rt, &dd, &in, 1, ent, NULL, NULL),
                            PFX_ERROR_UNSUPPORTED, "desc.dropout");
        pfx_tensor_destroy(&ent);
    }
    {
        /* device gains: float32 [H] of this runtime */
        pfx_tensor *bad_gain = NULL;
        const size_t gs = 3;
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &gs, &bad_gain), PFX_SUCCESS);
        pfx_attention_desc dg = d;
        dg.gain_mode = PFX_GAIN_TANH;
        dg.gain = NULL;
        dg.gain_tensor = bad_gain;
        assert_status_names(rt, pfx_attention_forward(rt, &dg, &in, t.o, t.lse),
                            PFX_ERROR_INVALID_SHAPE, "desc.gain_tensor");
        dg.gain_tensor = NULL;
        assert_status_names(rt, pfx_attention_forward(rt, &dg, &in, t.o, t.lse),
                            PFX_ERROR_NULL_ARGUMENT, "desc.gain_tensor");
        /* per-item gains: modes known, values finite, a gain for every
         * item whose mode needs one, no device gains beside them */
        float ig[2 * 4] = { 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f };
        float idg[2 * 4 * 32] = { 0 };
        pfx_gain_mode im[2] = { PFX_GAIN_LINEAR, (pfx_gain_mode)7 };
        pfx_attention_desc di = d;
        di.item_gain_mode = im;
        di.item_gain = ig;
        assert_status_names(rt, pfx_attention_forward(rt, &di, &in, t.o, t.lse),
                            PFX_ERROR_INVALID_ARGUMENT, "desc.item_gain_mode[1]");
        im[1] = PFX_GAIN_TANH;
        ig[5] = NAN;
        assert_status_names(rt, pfx_attention_forward(rt, &di, &in, t.o, t.lse),
                            PFX_ERROR_NOT_FINITE, "desc.item_gain[5]");
        ig[5] = 0.6f;
        di.item_gain = NULL;
        assert_status_names(rt, pfx_attention_forward(rt, &di, &in, t.o, t.lse),
                            PFX_ERROR_NULL_ARGUMENT, "desc.item_gain");
        di.item_gain = ig;
        di.item_dim_gain = idg;
        idg[2 * 4 * 32 - 1] = INFINITY;
        assert_status_names(rt, pfx_attention_forward(rt, &di, &in, t.o, t.lse),
                            PFX_ERROR_NOT_FINITE, "desc.item_dim_gain[255]");
        idg[2 * 4 * 32 - 1] = 0.0f;
        di.gain_tensor = bad_gain;
        assert_status_names(rt, pfx_attention_forward(rt, &di, &in, t.o, t.lse),
                            PFX_ERROR_INVALID_ARGUMENT, "desc.gain_tensor");
        di.gain_tensor = NULL;
        di.scale = 1e38f;
        ig[6] = 5.0f; /* item 1's head 2: 1e38 x (1 + 5) */
        im[1] = PFX_GAIN_LINEAR;
        assert_status_names(rt, pfx_attention_forward(rt, &di, &in, t.o, t.lse),
                            PFX_ERROR_NOT_FINITE, "item 1's head 2");
        pfx_tensor_destroy(&bad_gain);
    }
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, NULL, t.lse),
                        PFX_ERROR_NULL_ARGUMENT, "o");
    pfx_attention_inputs bad = in;
    bad.q = NULL;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &bad, t.o, t.lse),
                        PFX_ERROR_NULL_ARGUMENT, "in.q");
    bad = in;
    bad.prefix_v = NULL;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &bad, t.o, t.lse),
                        PFX_ERROR_NULL_ARGUMENT, "in.prefix_v");
    /* Shapes. */
    bad = in;
    bad.k = t.q;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &bad, t.o, t.lse),
                        PFX_ERROR_INVALID_SHAPE, "in.k");
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.k, t.lse), PFX_ERROR_INVALID_SHAPE,
                        "o");
    d.kv_heads = 3;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse), PFX_ERROR_INVALID_SHAPE,
                        "kv_heads");
    d = c.d;
    d.q_layout = PFX_LAYOUT_BNHD;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse), PFX_ERROR_INVALID_SHAPE,
                        "in.q");
    /* Lengths and bank. */
    d = c.d;
    int32_t ql[2] = { 8, 9 }, kl[2] = { 11, 0 }, bi[2] = { 0, 1 };
    d.q_lens = ql;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse), PFX_ERROR_OUT_OF_RANGE,
                        "q_lens[1]");
    d = c.d;
    d.kv_lens = kl;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse), PFX_ERROR_OUT_OF_RANGE,
                        "kv_lens[0]");
    size_t bs[4] = { 1, 2, 3, 32 };
    pfx_tensor *bk = make(rt, false, 4, bs), *bv = make(rt, false, 4, bs);
    bad = in;
    bad.prefix_k = bk;
    bad.prefix_v = bv;
    d = c.d;
    d.bank_index = bi;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &bad, t.o, t.lse), PFX_ERROR_OUT_OF_RANGE,
                        "bank_index[1]");
    d.bank_index = NULL;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &bad, t.o, t.lse),
                        PFX_ERROR_NULL_ARGUMENT, "bank_index");
    pfx_tensor_destroy(&bk);
    pfx_tensor_destroy(&bv);
    /* Gain and scale. */
    d = c.d;
    float gain[4] = { 0, NAN, 0, 0 };
    d.gain_mode = PFX_GAIN_LINEAR;
    d.gain = gain;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse), PFX_ERROR_NOT_FINITE,
                        "gain[1]");
    d.gain = NULL;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse), PFX_ERROR_NULL_ARGUMENT,
                        "gain");
    d = c.d;
    d.scale = NAN;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse), PFX_ERROR_NOT_FINITE,
                        "scale");
    d.scale = INFINITY;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse), PFX_ERROR_NOT_FINITE,
                        "scale");
    /* LSE dtype and shape, aliasing. */
    d = c.d;
    size_t ls[3] = { 2, 4, 8 };
    pfx_tensor *lh = make(rt, true, 3, ls);
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, lh), PFX_ERROR_DTYPE_MISMATCH,
                        "lse");
    pfx_tensor_destroy(&lh);
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.o), PFX_ERROR_INVALID_SHAPE,
                        "lse");
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.q, t.lse), PFX_ERROR_ALIASING,
                        "in.q");
    /* A tensor of another runtime. */
    pfx_runtime *rt2 = NULL;
    assert_int_equal(pfx_runtime_create(&rt2, NULL), PFX_SUCCESS);
    size_t qs[4] = { 2, 4, 8, 32 };
    pfx_tensor *q2 = make(rt2, false, 4, qs);
    bad = in;
    bad.q = q2;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &bad, t.o, t.lse),
                        PFX_ERROR_RUNTIME_MISMATCH, "in.q");
    pfx_tensor_destroy(&q2);
    pfx_runtime_destroy(&rt2);
    /* D beyond what the kernel handles. */
    fwd_case big = base_case(1, 1, 1, 2, 2, 0, 300, 121);
    fwd_tensors tb;
    tensors_create(rt, &big, &tb);
    pfx_attention_inputs ib = inputs_of(&tb);
    assert_status_names(rt, pfx_attention_forward(rt, &big.d, &ib, tb.o, NULL),
                        PFX_ERROR_UNSUPPORTED, "head_dim");
    tensors_destroy(&tb);
    /* Nothing was allocated by the failed calls; the tensors go away cleanly. */
    assert_int_equal(pfx_test_live_bytes(rt), live1);
    tensors_destroy(&t);
    assert_int_equal(pfx_test_live_bytes(rt), live0);
}

static void test_local_memory_limit(void **state)
{
    pfx_runtime *rt = *state;
    /* A device with too little local memory for a head size: no tiles. */
    pfx_attn_fwd_tiles t;
    const pfx_attn_tuning *nv = pfx_attn_tuning_lookup(PFX_VENDOR_NVIDIA, NULL, NULL);
    assert_false(pfx_attn_fwd_tiles_for(nv, 1024, 0, 256, false, &t));
    assert_true(pfx_attn_fwd_tiles_for(nv, 48 * 1024, 0, 256, false, &t));
    assert_true(pfx_attn_fwd_local_bytes(&t) <= 48 * 1024);
    /* and the op says so, naming head_dim */
    uint64_t saved = rt->info.local_mem_bytes;
    rt->info.local_mem_bytes = 1024;
    fwd_case c = base_case(1, 1, 1, 2, 2, 0, 128, 130);
    fwd_tensors tt;
    tensors_create(rt, &c, &tt);
    pfx_attention_inputs in = inputs_of(&tt);
    assert_status_names(rt, pfx_attention_forward(rt, &c.d, &in, tt.o, NULL), PFX_ERROR_UNSUPPORTED,
                        "head_dim");
    rt->info.local_mem_bytes = saved;
    tensors_destroy(&tt);
}

/* Every configuration the registry may pick, for any vendor family or this
 * device (the GPU paths with KSPLIT work-items per row, the CPU vector path,
 * the decode tiles), against the reference: a wide causal GQA shape at the
 * class's full head size, a decode shape with split-K and an awkward head
 * size below the class, and half storage with a bank, lengths and gains. */
static void config_cases(pfx_runtime *rt, unsigned head_dim, void *arg)
{
    unsigned *seed = arg;
    fwd_case c = base_case(2, 4, 2, 37, 45, 6, head_dim, 300 + (*seed)++);
    c.d.causal = true;
    run_case(rt, &c);
    c = base_case(1, 4, 1, 1, 300, 5, head_dim > 16 ? head_dim / 2 + 3 : 13, 300 + (*seed)++);
    run_case(rt, &c);
    /* half storage, a bank with an item without prefix, lengths, token-major
     * layouts, tanh gains with dim gains: no tile edge lines up (N 13, M 20,
     * P 9) */
    int32_t idx[3] = { 2, -1, 0 }, ql[3] = { 13, 6, 1 }, kl[3] = { 20, 11, 19 };
    float gain[4] = { -0.7f, 1.3f, 0.0f, 2.1f }, dim_gain[4 * 256];
    ref_rng rng;
    ref_rng_seed(&rng, 300 + *seed);
    ref_rng_fill(&rng, dim_gain, 4 * head_dim, -0.9f, 2.0f);
    c = base_case(3, 4, 2, 13, 20, 9, head_dim, 300 + (*seed)++);
    c.d.gain_mode = PFX_GAIN_TANH;
    c.d.gain = gain;
    c.d.gain_ramp = 0.8f;
    c.d.dim_gain = dim_gain;
    c.bank = 3;
    c.d.bank_index = idx;
    c.d.q_lens = ql;
    c.d.kv_lens = kl;
    c.d.q_layout = c.d.kv_layout = c.d.o_layout = PFX_LAYOUT_BNHD;
    c.half_kv = c.half_prefix = c.half_o = true;
    run_case(rt, &c);
    /* per-item gains (modes tanh, linear, off; per head and structured):
     * the same batch, then a split-K decode */
    item_gains g;
    c = item_gains_prefill(&g, head_dim, 300 + (*seed)++, true, 0.8f);
    run_case(rt, &c);
    c = item_gains_decode(&g, head_dim, 300 + (*seed)++, true, 1.0f);
    run_case(rt, &c);
    /* dropout 0.3 on the probabilities, prefix columns included: a causal
     * GQA shape of awkward sizes and a split-K decode, against the
     * reference applying the same mask */
    for (int k = 0; k < 2; k++) {
        c = k ? base_case(1, 4, 1, 1, 300, 5, head_dim > 16 ? head_dim / 2 + 3 : 13,
                          300 + (*seed)++)
              : base_case(2, 4, 2, 19, 23, 3, head_dim, 300 + (*seed)++);
        c.d.causal = k == 0;
        c.d.dropout = 0.3f;
        c.d.dropout_stream = (pfx_dropout_stream){
            .seed = 0x1234567890abcdefull + *seed, .step = 11, .tag = 6, .first_item = 5
        };
        run_case(rt, &c);
    }
}

/* Logits beyond float32 (scale 3e38, |q . k| up to the head size) in every
 * configuration: O and LSE finite, each O row inside the values' range
 * (the overflowing logits share the row). They were NaN rows. */
static void overflow_cases(pfx_runtime *rt, unsigned head_dim, void *arg)
{
    unsigned *seed = arg;
    const size_t dims[2] = { head_dim, head_dim > 16 ? head_dim / 2 + 3 : 13 };
    for (int k = 0; k < 2; k++) {
        fwd_case c = k ? base_case(1, 4, 1, 1, 300, 5, dims[1], 400 + (*seed)++)
                       : base_case(2, 4, 2, 37, 45, 6, dims[0], 400 + (*seed)++);
        c.d.causal = k == 0;
        c.d.scale = 3.0e38f;
        c.with_lse = true;
        fwd_tensors t;
        tensors_create(rt, &c, &t);
        pfx_attention_inputs in = inputs_of(&t);
        if (pfx_attention_forward(rt, &c.d, &in, t.o, t.lse) != PFX_SUCCESS)
            fail_msg("forward: %s", pfx_last_error(rt));
        size_t nq = ref_q_count(&c.d), nl = ref_lse_count(&c.d);
        float *o = malloc(nq * sizeof(float)), *lse = malloc(nl * sizeof(float));
        assert_int_equal(pfx_tensor_read(t.o, 0, nq, o), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(t.lse, 0, nl, lse), PFX_SUCCESS);
        for (size_t i = 0; i < nq; i++)
            if (!(fabsf(o[i]) <= 1.0f)) /* a weighted mean of values in [-1, 1] */
                fail_msg("head size %u, case %d: O[%zu] = %g", head_dim, k, i, (double)o[i]);
        for (size_t i = 0; i < nl; i++)
            if (isnan(lse[i]) || lse[i] == INFINITY)
                fail_msg("head size %u, case %d: LSE[%zu] = %g", head_dim, k, i, (double)lse[i]);
        free(o);
        free(lse);
        tensors_destroy(&t);
    }
}

static void test_overflowing_logits(void **state)
{
    unsigned seed = 0;
    assert_true(attn_for_each_config(*state, "attention_fwd", overflow_cases, &seed) > 0);
}

static void test_every_config(void **state)
{
    unsigned seed = 0;
    assert_true(attn_for_each_config(*state, "attention_fwd", config_cases, &seed) > 0);
}

/* The override a runtime takes at creation: pfx_runtime_params, else
 * $PREFIXCL_TUNING, else tuning.txt in the cache folder; a malformed text
 * fails the creation, naming the part at fault. */
static void test_override_sources(void **state)
{
    (void)state;
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    pfx_runtime *rt = NULL;
    params.kernel_tuning = "attention_bwd DSPLIT=x";
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_ERROR_INVALID_ARGUMENT);
    assert_null(rt);
    assert_non_null(strstr(pfx_last_error(NULL), "DSPLIT=x"));
    params.kernel_tuning = "attention_bwd BLOCK_M=16 BLOCK_N=16";
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
    assert_non_null(rt->attn_override);
    assert_string_equal(rt->attn_override->text,
                        "attention_bwd -DPFX_ATTN_BLOCK_M=16 -DPFX_ATTN_BLOCK_N=16");
    pfx_runtime_destroy(&rt);

    char dir[] = "/tmp/pfx-tuning-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/tuning.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# from the cache folder\nattention_fwd BLOCK_N=8\n", f);
    fclose(f);
    params.kernel_tuning = NULL;
    params.cache_dir = dir;
    const char *env = getenv("PREFIXCL_TUNING");
    assert_null(env); /* the suite runs without one */
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
    assert_non_null(rt->attn_override);
    assert_non_null(strstr(rt->attn_override->source, "tuning.txt"));
    assert_string_equal(rt->attn_override->text, "attention_fwd -DPFX_ATTN_BLOCK_N=8");
    pfx_runtime_destroy(&rt);
    setenv("PREFIXCL_TUNING", "attention_fwd BLOCK_M=4", 1);
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
    assert_string_equal(rt->attn_override->source, "$PREFIXCL_TUNING");
    pfx_runtime_destroy(&rt);
    unsetenv("PREFIXCL_TUNING");
    remove(path);
    rmdir(dir);
}

/* Small heads run their own classes (16, 32), not the D = 64 variant, in the
 * forward and the backward alike. */
static void test_head_classes(void **state)
{
    pfx_runtime *rt = *state;
    const size_t D[] = { 1, 16, 17, 32, 33, 64, 65, 128, 129, 256 };
    const unsigned cls[] = { 16, 16, 32, 32, 64, 64, 128, 128, 256, 256 };
    for (size_t i = 0; i < sizeof(D) / sizeof(D[0]); i++) {
        pfx_attn_fwd_tiles f;
        pfx_attn_bwd_tiles b;
        assert_int_equal(pfx_attn_dim_class(D[i]), cls[i]);
        assert_int_equal(pfx_attn_fwd_select(rt, "test", D[i], 100, &f), PFX_SUCCESS);
        assert_int_equal(f.head_dim, cls[i]);
        assert_int_equal(pfx_attn_bwd_select(rt, "test", D[i], &b), PFX_SUCCESS);
        assert_int_equal(b.head_dim, cls[i]);
    }
    assert_int_equal(pfx_attn_dim_class(257), 0);
}

/* The override's text is checked when it is set, naming the part at fault,
 * and tiles that break a kernel rule are refused by the op. */
static void test_override_text(void **state)
{
    pfx_runtime *rt = *state;
    assert_status_names(rt, pfx_attn_override_set(rt, "attention_fwd BLOCK_Q=4"),
                        PFX_ERROR_INVALID_ARGUMENT, "BLOCK_Q=4");
    assert_status_names(rt, pfx_attn_override_set(rt, "attention_xyz BLOCK_M=4"),
                        PFX_ERROR_INVALID_ARGUMENT, "attention_xyz");
    assert_status_names(rt, pfx_attn_override_set(rt, "attention_bwd HEAD_DIM=48"),
                        PFX_ERROR_INVALID_ARGUMENT, "HEAD_DIM=48");
    assert_status_names(rt, pfx_attn_override_set(rt, "attention_fwd BLOCK_M=-3"),
                        PFX_ERROR_INVALID_ARGUMENT, "BLOCK_M=-3");
    /* a valid text: comments, ';', the -D spelling, a line per class */
    /* (tiles that fit 32 KiB of local memory: rusticl's) */
    assert_int_equal(pfx_attn_override_set(rt, "# mine\nattention_fwd -DPFX_ATTN_BLOCK_M=8 "
                                               "BLOCK_N=8 KSPLIT=1 VEC=1 Q_LOCAL=1; attention_fwd "
                                               "HEAD_DIM=128 BLOCK_N=16 VEC=1 KSPLIT=1 BLOCK_M=8"),
                     PFX_SUCCESS);
    pfx_attn_fwd_tiles t;
    assert_int_equal(pfx_attn_fwd_select(rt, "test", 100, 50, &t), PFX_SUCCESS);
    assert_int_equal(t.head_dim, 128);
    assert_int_equal(t.block_n, 16);
    assert_int_equal(pfx_attn_fwd_select(rt, "test", 200, 50, &t), PFX_SUCCESS);
    assert_int_equal(t.head_dim, 256);
    assert_int_equal(t.block_n, 8);
    fwd_case c = base_case(1, 2, 1, 9, 14, 3, 100, 140);
    run_case(rt, &c);
    /* VEC 16 with KSPLIT 2 breaks the kernel's rule: refused, named */
    assert_int_equal(pfx_attn_override_set(rt, "attention_fwd VEC=16 KSPLIT=2"), PFX_SUCCESS);
    fwd_tensors tt;
    tensors_create(rt, &c, &tt);
    pfx_attention_inputs in = inputs_of(&tt);
    assert_status_names(rt, pfx_attention_forward(rt, &c.d, &in, tt.o, NULL),
                        PFX_ERROR_INVALID_ARGUMENT, "KSPLIT");
    /* tiles larger than the device's local memory: refused, with the figure */
    assert_int_equal(pfx_attn_override_set(rt, "attention_fwd VEC=1 KSPLIT=1 BLOCK_M=4096 "
                                               "BLOCK_N=4096"),
                     PFX_SUCCESS);
    assert_status_names(rt, pfx_attention_forward(rt, &c.d, &in, tt.o, NULL), PFX_ERROR_UNSUPPORTED,
                        "local memory");
    tensors_destroy(&tt);
    assert_int_equal(pfx_attn_override_set(rt, NULL), PFX_SUCCESS);
}

/* An argument runs only the tests it matches (cmocka_set_test_filter: the
 * exhaustive sweep runs test_every_config alone). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_head_dims),
        cmocka_unit_test(test_decode_split_k),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_lengths_and_hidden_rows),
        cmocka_unit_test(test_gains_and_scale),
        cmocka_unit_test(test_item_gains),
        cmocka_unit_test(test_large_logits),
        cmocka_unit_test(test_bank),
        cmocka_unit_test(test_half),
        cmocka_unit_test(test_bf16_kv),
        cmocka_unit_test(test_random_sizes),
        cmocka_unit_test(test_nonfinite_data),
        cmocka_unit_test(test_huge_logits),
        cmocka_unit_test(test_workspace_reused),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_local_memory_limit),
        cmocka_unit_test(test_head_classes),
        cmocka_unit_test(test_override_sources),
        cmocka_unit_test(test_override_text),
        cmocka_unit_test(test_every_config),
        cmocka_unit_test(test_overflowing_logits),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
