/* pfx_attention_forward against the double-precision reference, and its
 * argument checks (suite 'attention_forward'). */
#include <math.h>

#include "pfx_test.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

#include "attention_tuning.h"
#include "internal.h"

typedef struct fwd_case {
    pfx_attention_desc d;
    size_t bank;          /* T > 0: a bank [T, Hkv, P, D] */
    bool half_q, half_kv, half_prefix, half_o;
    float data_range;     /* inputs uniform in [-range, range] (default 1) */
    uint64_t seed;
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

/* Uploads random data and reads back what the device stores (half rounding),
 * so that the reference sees exactly the device's inputs. */
static float *upload(pfx_tensor *t, ref_rng *rng, float range)
{
    size_t n = pfx_tensor_numel(t);
    float *h = malloc(n * sizeof(float));
    ref_rng_fill(rng, h, n, -range, range);
    assert_int_equal(pfx_tensor_write(t, 0, n, h), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(t, 0, n, h), PFX_SUCCESS);
    return h;
}

static void shape_of(const pfx_attention_desc *d, int role, size_t *s)
{
    bool bnhd = (role == 0 ? d->q_layout : role == 1 ? d->kv_layout : d->o_layout) ==
                PFX_LAYOUT_BNHD;
    size_t heads = role == 1 ? d->kv_heads : d->heads, rows = role == 1 ? d->keys : d->queries;
    s[0] = d->batch;
    s[1] = bnhd ? rows : heads;
    s[2] = bnhd ? heads : rows;
    s[3] = d->head_dim;
}

static void tensors_create(pfx_runtime *rt, const fwd_case *c, fwd_tensors *t)
{
    const pfx_attention_desc *d = &c->d;
    memset(t, 0, sizeof(*t));
    ref_rng rng;
    ref_rng_seed(&rng, c->seed);
    float range = c->data_range > 0 ? c->data_range : 1.0f;
    size_t s[4];
    shape_of(d, 0, s);
    t->q = make(rt, c->half_q, 4, s);
    shape_of(d, 1, s);
    t->k = make(rt, c->half_kv, 4, s);
    t->v = make(rt, c->half_kv, 4, s);
    shape_of(d, 2, s);
    t->o = make(rt, c->half_o, 4, s);
    t->hq = upload(t->q, &rng, range);
    t->hk = upload(t->k, &rng, range);
    t->hv = upload(t->v, &rng, 1.0f);
    if (d->prefix_len) {
        size_t ps[4] = { c->bank, d->kv_heads, d->prefix_len, d->head_dim };
        unsigned nd = c->bank ? 4 : 3;
        t->pk = make(rt, c->half_prefix, nd, c->bank ? ps : ps + 1);
        t->pv = make(rt, c->half_prefix, nd, c->bank ? ps : ps + 1);
        t->hpk = upload(t->pk, &rng, range);
        t->hpv = upload(t->pv, &rng, 1.0f);
    }
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
    const size_t dims[] = { 32, 64, 80, 96, 128, 40, 72, 200 };
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
    assert_true(pfx_attn_fwd_tiles_for(rt->vendor, rt->info.local_mem_bytes, 64, true, &t));
    size_t kps;
    size_t splits = pfx_attn_fwd_splits(rt->vendor, rt->info.compute_units, &t, 1, 1, 4, 305, &kps);
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

static void test_nonfinite_data(void **state)
{
    pfx_runtime *rt = *state;
    fwd_case c = base_case(1, 2, 1, 9, 12, 3, 32, 110);
    c.with_lse = true;
    fwd_tensors t;
    tensors_create(rt, &c, &t);
    float bad[3] = { NAN, INFINITY, -INFINITY };
    assert_int_equal(pfx_tensor_write(t.q, 5, 1, bad), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(t.k, 40, 2, bad + 1), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(t.v, 7, 3, bad), PFX_SUCCESS);
    pfx_attention_inputs in = inputs_of(&t);
    assert_int_equal(pfx_attention_forward(rt, &c.d, &in, t.o, t.lse), PFX_SUCCESS);
    assert_int_equal(pfx_runtime_finish(rt), PFX_SUCCESS);
    c.d.queries = 1; /* decode tiles too */
    pfx_tensor_destroy(&t.o);
    pfx_tensor_destroy(&t.lse);
    size_t s[4] = { 1, 2, 1, 32 }, ls[3] = { 1, 2, 1 };
    pfx_tensor *q1 = make(rt, false, 4, s), *o1 = make(rt, false, 4, s), *l1 = make(rt, false, 3, ls);
    assert_int_equal(pfx_tensor_fill(q1, NAN), PFX_SUCCESS);
    in.q = q1;
    assert_int_equal(pfx_attention_forward(rt, &c.d, &in, o1, l1), PFX_SUCCESS);
    assert_int_equal(pfx_runtime_finish(rt), PFX_SUCCESS);
    pfx_tensor_destroy(&q1);
    pfx_tensor_destroy(&o1);
    pfx_tensor_destroy(&l1);
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
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.k, t.lse),
                        PFX_ERROR_INVALID_SHAPE, "o");
    d.kv_heads = 3;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse),
                        PFX_ERROR_INVALID_SHAPE, "kv_heads");
    d = c.d;
    d.q_layout = PFX_LAYOUT_BNHD;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse),
                        PFX_ERROR_INVALID_SHAPE, "in.q");
    /* Lengths and bank. */
    d = c.d;
    int32_t ql[2] = { 8, 9 }, kl[2] = { 11, 0 }, bi[2] = { 0, 1 };
    d.q_lens = ql;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse),
                        PFX_ERROR_OUT_OF_RANGE, "q_lens[1]");
    d = c.d;
    d.kv_lens = kl;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse),
                        PFX_ERROR_OUT_OF_RANGE, "kv_lens[0]");
    size_t bs[4] = { 1, 2, 3, 32 };
    pfx_tensor *bk = make(rt, false, 4, bs), *bv = make(rt, false, 4, bs);
    bad = in;
    bad.prefix_k = bk;
    bad.prefix_v = bv;
    d = c.d;
    d.bank_index = bi;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &bad, t.o, t.lse),
                        PFX_ERROR_OUT_OF_RANGE, "bank_index[1]");
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
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse),
                        PFX_ERROR_NOT_FINITE, "gain[1]");
    d.gain = NULL;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse),
                        PFX_ERROR_NULL_ARGUMENT, "gain");
    d = c.d;
    d.scale = NAN;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse),
                        PFX_ERROR_NOT_FINITE, "scale");
    d.scale = INFINITY;
    assert_status_names(rt, pfx_attention_forward(rt, &d, &in, t.o, t.lse),
                        PFX_ERROR_NOT_FINITE, "scale");
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
    assert_false(pfx_attn_fwd_tiles_for(PFX_VENDOR_NVIDIA, 1024, 256, false, &t));
    assert_true(pfx_attn_fwd_tiles_for(PFX_VENDOR_NVIDIA, 48 * 1024, 256, false, &t));
    assert_true(pfx_attn_fwd_local_bytes(&t) <= 48 * 1024);
    /* and the op says so, naming head_dim */
    uint64_t saved = rt->info.local_mem_bytes;
    rt->info.local_mem_bytes = 1024;
    fwd_case c = base_case(1, 1, 1, 2, 2, 0, 128, 130);
    fwd_tensors tt;
    tensors_create(rt, &c, &tt);
    pfx_attention_inputs in = inputs_of(&tt);
    assert_status_names(rt, pfx_attention_forward(rt, &c.d, &in, tt.o, NULL),
                        PFX_ERROR_UNSUPPORTED, "head_dim");
    rt->info.local_mem_bytes = saved;
    tensors_destroy(&tt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_head_dims),
        cmocka_unit_test(test_decode_split_k),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_lengths_and_hidden_rows),
        cmocka_unit_test(test_gains_and_scale),
        cmocka_unit_test(test_large_logits),
        cmocka_unit_test(test_bank),
        cmocka_unit_test(test_half),
        cmocka_unit_test(test_random_sizes),
        cmocka_unit_test(test_nonfinite_data),
        cmocka_unit_test(test_workspace_reused),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_local_memory_limit),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
