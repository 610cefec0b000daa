/* prefixcl bench: the library's operations, SGEMM through pfx_matmul, the
 * attention forward and backward at the shapes (a)-(d), the prefix encoder
 * and a layer's training step (their FLOP and byte counts: bench_suite.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"

/* ---------------------------------------------------------------- SGEMM */

typedef struct sgemm_ctx {
    size_t n;
    pfx_tensor *a, *b, *c;
} sgemm_ctx;

static pfx_status sgemm_enqueue(pfx_runtime *rt, void *ctx, pfx_event **ev)
{
    (void)ev; /* CLBlast may run helper kernels, the host backend none: timed as a span */
    sgemm_ctx *g = ctx;
    return pfx_matmul(rt, g->a, g->b, g->c);
}

void family_sgemm(suite *s, size_t n, double *hint_gflops)
{
    char id[32], label[64];
    snprintf(id, sizeof(id), "sgemm.%zu", n);
    snprintf(label, sizeof(label), "%zux%zux%zu", n, n, n);
    bench_result *r = suite_begin(
        s, id,
        pfx_runtime_gemm_backend(s->rt) == PFX_GEMM_HOST ? "SGEMM (host BLAS)" : "SGEMM (CLBlast)",
        label);
    if (!r)
        return;
    double bytes = (double)n * (double)n * 4.0;
    double flops = 2.0 * (double)n * (double)n * (double)n;
    if (!suite_fits(s, r, 3 * bytes, bytes) ||
        suite_quick_too_slow(s, r, flops, *hint_gflops, "a smaller size"))
        return;
    sgemm_ctx g = { .n = n };
    size_t shape[2] = { n, n };
    pfx_status st = suite_random_tensor(s->rt, 2, shape, 11, 1.0f, &g.a);
    if (st == PFX_SUCCESS)
        st = suite_random_tensor(s->rt, 2, shape, 12, 1.0f, &g.b);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(s->rt, PFX_DTYPE_F32, 2, shape, &g.c);
    if (st == PFX_SUCCESS)
        suite_measure(s, r, sgemm_enqueue, &g, flops, 0, BENCH_CEIL_FMA);
    else
        suite_skip_status(s, r, st);
    pfx_tensor_destroy(&g.a);
    pfx_tensor_destroy(&g.b);
    pfx_tensor_destroy(&g.c);
    if (r->ok)
        *hint_gflops = r->gflops;
}

/* ---------------------------------------------------------------- attention */

typedef struct attn_ctx {
    pfx_attention_desc desc;
    pfx_attention_inputs in;
    pfx_tensor *q, *k, *v, *pk, *pv, *o, *lse, *d_o;
    pfx_tensor *dq, *dk, *dv, *dpk, *dpv;
    pfx_attention_grads grads;
} attn_ctx;

static void attn_free(attn_ctx *a)
{
    pfx_tensor **all[] = { &a->q,   &a->k,  &a->v,  &a->pk, &a->pv,  &a->o,  &a->lse,
                           &a->d_o, &a->dq, &a->dk, &a->dv, &a->dpk, &a->dpv };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        pfx_tensor_destroy(all[i]);
}

/* Visible (query, key) pairs of the whole problem. */
static pfx_status attn_forward_enqueue(pfx_runtime *rt, void *ctx, pfx_event **ev)
{
    (void)ev;
    attn_ctx *a = ctx;
    return pfx_attention_forward(rt, &a->desc, &a->in, a->o, a->lse);
}

static pfx_status attn_backward_enqueue(pfx_runtime *rt, void *ctx, pfx_event **ev)
{
    (void)ev;
    attn_ctx *a = ctx;
    return pfx_attention_backward(rt, &a->desc, &a->in, a->o, a->lse, a->d_o, &a->grads);
}

static void attn_label(const attn_shape *sh, char *out, size_t cap)
{
    if (sh->H != sh->Hkv)
        snprintf(out, cap, "(%c) B%zu H%zu Hkv%zu N%zu M%zu P%zu D%zu%s", sh->tag, sh->B, sh->H,
                 sh->Hkv, sh->N, sh->M, sh->P, sh->D, sh->causal ? " causal" : "");
    else
        snprintf(out, cap, "(%c) B%zu H%zu N%zu M%zu P%zu D%zu%s", sh->tag, sh->B, sh->H, sh->N,
                 sh->M, sh->P, sh->D, sh->causal ? " causal" : "");
}

void family_attention(suite *s, const attn_shape *sh, bool backward)
{
    char id[32], label[64];
    snprintf(id, sizeof(id), "attn_%s.%c", backward ? "bwd" : "fwd", sh->tag);
    attn_label(sh, label, sizeof(label));
    bench_result *r =
        suite_begin(s, id, backward ? "Attention backward" : "Attention forward", label);
    if (!r)
        return;
    double qbytes = 4.0 * (double)(sh->B * sh->H * sh->N * sh->D);
    double kvbytes = 4.0 * (double)(sh->B * sh->Hkv * sh->M * sh->D);
    double pbytes = 4.0 * (double)(sh->Hkv * sh->P * sh->D);
    double lsebytes = 4.0 * (double)(sh->B * sh->H * sh->N);
    double total = 2 * qbytes + 2 * kvbytes + 2 * pbytes + lsebytes;
    if (backward)
        total *= 2;
    double flops = 4.0 * suite_attn_pairs(sh) * (double)sh->D * (backward ? 2.5 : 1.0);
    if (!suite_fits(s, r, total, kvbytes > qbytes ? kvbytes : qbytes))
        return;
    if (!sh->decode && sh->tag != 'a' &&
        suite_quick_too_slow(s, r, flops, s->attn_gflops[backward], "shape (a)"))
        return;

    attn_ctx a;
    memset(&a, 0, sizeof(a));
    pfx_attention_desc_init(&a.desc);
    a.desc.batch = sh->B;
    a.desc.heads = sh->H;
    a.desc.kv_heads = sh->Hkv;
    a.desc.queries = sh->N;
    a.desc.keys = sh->M;
    a.desc.prefix_len = sh->P;
    a.desc.head_dim = sh->D;
    a.desc.causal = sh->causal;
    size_t qs[4] = { sh->B, sh->H, sh->N, sh->D };
    size_t ks[4] = { sh->B, sh->Hkv, sh->M, sh->D };
    size_t ps[3] = { sh->Hkv, sh->P, sh->D };
    size_t ls[3] = { sh->B, sh->H, sh->N };
    pfx_runtime *rt = s->rt;
    pfx_status st = suite_random_tensor(rt, 4, qs, 1, 1.0f, &a.q);
    if (st == PFX_SUCCESS)
        st = suite_random_tensor(rt, 4, ks, 2, 1.0f, &a.k);
    if (st == PFX_SUCCESS)
        st = suite_random_tensor(rt, 4, ks, 3, 1.0f, &a.v);
    if (st == PFX_SUCCESS && sh->P)
        st = suite_random_tensor(rt, 3, ps, 4, 1.0f, &a.pk);
    if (st == PFX_SUCCESS && sh->P)
        st = suite_random_tensor(rt, 3, ps, 5, 1.0f, &a.pv);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &a.o);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ls, &a.lse);
    a.in = (pfx_attention_inputs){ a.q, a.k, a.v, a.pk, a.pv };
    double bytes = sh->decode ? 2 * kvbytes + 2 * pbytes : 0;
    if (backward) {
        if (st == PFX_SUCCESS)
            st = pfx_attention_forward(rt, &a.desc, &a.in, a.o, a.lse);
        if (st == PFX_SUCCESS)
            st = suite_random_tensor(rt, 4, qs, 6, 1.0f, &a.d_o);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &a.dq);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, ks, &a.dk);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, ks, &a.dv);
        if (st == PFX_SUCCESS && sh->P)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &a.dpk);
        if (st == PFX_SUCCESS && sh->P)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &a.dpv);
        a.grads = (pfx_attention_grads){
            .dq = a.dq, .dk = a.dk, .dv = a.dv, .dprefix_k = a.dpk, .dprefix_v = a.dpv
        };
        bytes *= 2; /* K/V read and dK/dV written */
    }
    if (st == PFX_SUCCESS)
        suite_measure(s, r, backward ? attn_backward_enqueue : attn_forward_enqueue, &a, flops,
                      bytes, sh->decode ? BENCH_CEIL_COPY : BENCH_CEIL_FMA);
    else
        suite_skip_status(s, r, st);
    attn_free(&a);
    if (r->ok && sh->tag == 'a')
        s->attn_gflops[backward] = r->gflops;
}

/* ---------------------------------------------------------------- encoder */

#define ENC_L   12
#define ENC_HKV 12
#define ENC_D   64
#define ENC_M   20
#define ENC_E   512
#define ENC_H   512

typedef struct enc_ctx {
    pfx_encoder *enc;
    pfx_tensor *kp[ENC_L], *vp[ENC_L], *dkp[ENC_L], *dvp[ENC_L];
    pfx_tensor *g[PFX_ENCODER_PARAM_COUNT];
    pfx_encoder_grads grads;
} enc_ctx;

static pfx_status enc_forward_enqueue(pfx_runtime *rt, void *ctx, pfx_event **ev)
{
    (void)rt;
    (void)ev;
    enc_ctx *e = ctx;
    return pfx_encoder_forward(e->enc, e->kp, e->vp);
}

static pfx_status enc_backward_enqueue(pfx_runtime *rt, void *ctx, pfx_event **ev)
{
    (void)rt;
    (void)ev;
    enc_ctx *e = ctx;
    return pfx_encoder_backward(e->enc, (const pfx_tensor *const *)e->dkp,
                                (const pfx_tensor *const *)e->dvp, &e->grads);
}

void family_encoder(suite *s, bool backward)
{
    char label[64];
    snprintf(label, sizeof(label), "GPT-2 small: L%d Hkv%d D%d m%d e%d h%d", ENC_L, ENC_HKV, ENC_D,
             ENC_M, ENC_E, ENC_H);
    bench_result *r =
        suite_begin(s, backward ? "encoder.bwd" : "encoder.fwd",
                    backward ? "Prefix encoder backward" : "Prefix encoder forward", label);
    if (!r)
        return;
    const double out_dim = 2.0 * ENC_L * ENC_HKV * ENC_D;
    const double params =
        (double)ENC_M * ENC_E + (double)ENC_H * ENC_E + ENC_H + out_dim * ENC_H + out_dim;
    const double prefix_values = (double)ENC_M * out_dim;
    /* forward: E W1^T (2 m e h) and T W2^T (2 m h O); backward: dW2, dT, dW1, dE */
    double flops = 2.0 * ENC_M * ENC_E * ENC_H + 2.0 * ENC_M * ENC_H * out_dim;
    double bytes = 4.0 * (params + prefix_values); /* parameters read, prefixes written */
    if (backward) {
        flops *= 2.0;
        bytes = 4.0 * (2.0 * params + prefix_values); /* params read, grads written, dY read */
    }
    if (!suite_fits(s, r, 4.0 * (3.0 * params + 2.0 * prefix_values), 4.0 * out_dim * ENC_H))
        return;
    enc_ctx e;
    memset(&e, 0, sizeof(e));
    pfx_encoder_params p = { .layers = ENC_L,
                             .kv_heads = ENC_HKV,
                             .head_dim = ENC_D,
                             .prefix_len = ENC_M,
                             .embed_dim = ENC_E,
                             .hidden_dim = ENC_H };
    pfx_runtime *rt = s->rt;
    pfx_status st = pfx_encoder_create(rt, &p, &e.enc);
    if (st == PFX_SUCCESS)
        st = pfx_encoder_init_random(e.enc, 1234, 1.0f);
    size_t ps[3] = { ENC_HKV, ENC_M, ENC_D };
    for (size_t l = 0; l < ENC_L && st == PFX_SUCCESS; l++) {
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &e.kp[l]);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &e.vp[l]);
        if (st == PFX_SUCCESS && backward)
            st = suite_random_tensor(rt, 3, ps, 100 + 2 * l, 0.1f, &e.dkp[l]);
        if (st == PFX_SUCCESS && backward)
            st = suite_random_tensor(rt, 3, ps, 101 + 2 * l, 0.1f, &e.dvp[l]);
    }
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT && st == PFX_SUCCESS && backward; i++) {
        const pfx_tensor *t = pfx_encoder_tensor(e.enc, (pfx_encoder_param)i);
        size_t shape[PFX_MAX_DIMS];
        unsigned nd = pfx_tensor_ndim(t);
        for (unsigned d = 0; d < nd; d++)
            shape[d] = pfx_tensor_dim(t, d);
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, nd, shape, &e.g[i]);
    }
    e.grads = (pfx_encoder_grads){ .de = e.g[PFX_ENCODER_E],
                                   .dw1 = e.g[PFX_ENCODER_W1],
                                   .db1 = e.g[PFX_ENCODER_B1],
                                   .dw2 = e.g[PFX_ENCODER_W2],
                                   .db2 = e.g[PFX_ENCODER_B2] };
    if (st == PFX_SUCCESS) {
        /* Judged against whichever ceiling binds on this device (roofline). */
        double t_compute = s->fma_gflops > 0 ? flops / (s->fma_gflops * 1e9) : 0;
        double t_memory = s->copy_gbs > 0 ? bytes / (s->copy_gbs * 1e9) : 0;
        suite_measure(s, r, backward ? enc_backward_enqueue : enc_forward_enqueue, &e, flops, bytes,
                      t_memory > t_compute ? BENCH_CEIL_COPY : BENCH_CEIL_FMA);
    } else {
        suite_skip_status(s, r, st);
    }
    for (size_t l = 0; l < ENC_L; l++) {
        pfx_tensor_destroy(&e.kp[l]);
        pfx_tensor_destroy(&e.vp[l]);
        pfx_tensor_destroy(&e.dkp[l]);
        pfx_tensor_destroy(&e.dvp[l]);
    }
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        pfx_tensor_destroy(&e.g[i]);
    pfx_encoder_destroy(&e.enc);
}

/* ---------------------------------------------------------------- layer step */

/* One training step of one GPT-2-small attention layer: forward, MSE loss
 * against a target (its gradient), backward to dX and the prefix and gain
 * gradients (frozen weights get none), AdamW on the prefix and the gains. */
#define STEP_B 2
#define STEP_N 512
#define STEP_C 768
#define STEP_H 12
#define STEP_D 64
#define STEP_P 20

typedef struct step_ctx {
    pfx_layer *layer;
    pfx_optimizer *opt;
    pfx_tensor *x, *y, *target, *dy, *dx, *kp, *vp, *dkp, *dvp, *gain, *dgain;
    pfx_layer_prefix prefix;
    pfx_layer_grads grads;
} step_ctx;

static pfx_status step_enqueue(pfx_runtime *rt, void *ctx, pfx_event **ev)
{
    (void)rt;
    (void)ev;
    step_ctx *c = ctx;
    pfx_status st = pfx_layer_forward(c->layer, c->x, &c->prefix, c->y);
    if (st == PFX_SUCCESS) /* the gradient only: nothing waits for the loss's value */
        st = pfx_mse_loss(c->y, c->target, c->dy, NULL);
    if (st == PFX_SUCCESS)
        st = pfx_layer_backward(c->layer, c->x, &c->prefix, c->dy, &c->grads);
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_step(c->opt, NULL);
    return st;
}

void family_layer_step(suite *s, double hint_gflops)
{
    char label[64];
    snprintf(label, sizeof(label), "B%d N%d C%d H%d D%d P%d causal, fwd+loss+bwd+AdamW", STEP_B,
             STEP_N, STEP_C, STEP_H, STEP_D, STEP_P);
    bench_result *r = suite_begin(s, "layer.step", "Training step of a layer", label);
    if (!r)
        return;
    const double T = (double)STEP_B * STEP_N, C = STEP_C, HD = (double)STEP_H * STEP_D;
    attn_shape sh = { 's', STEP_B, STEP_H, STEP_H, STEP_N, STEP_N, STEP_P, STEP_D, true, false };
    double attn = 4.0 * suite_attn_pairs(&sh) * STEP_D;
    /* forward: Q, K, V and output projections + attention; backward: the same
     * products for dX (no weight gradients) + attention backward (2.5x) */
    double proj = 2.0 * T * C * 3.0 * HD + 2.0 * T * HD * C;
    double flops = 2.0 * proj + 3.5 * attn;
    double act = 4.0 * T * C;
    if (!suite_fits(s, r, 4.0 * C * HD * 4 + 12 * act, 4.0 * C * HD) ||
        suite_quick_too_slow(s, r, flops, hint_gflops, "SGEMM"))
        return;
    step_ctx c;
    memset(&c, 0, sizeof(c));
    pfx_runtime *rt = s->rt;
    pfx_layer_params lp = { .model_dim = STEP_C,
                            .heads = STEP_H,
                            .kv_heads = STEP_H,
                            .head_dim = STEP_D,
                            .prefix_len = STEP_P,
                            .max_batch = STEP_B,
                            .max_tokens = STEP_N,
                            .bias = true,
                            .causal = true,
                            .residual = true,
                            .gain_mode = PFX_GAIN_TANH };
    size_t xs[3] = { STEP_B, STEP_N, STEP_C }, ps[3] = { STEP_H, STEP_P, STEP_D },
           gs[1] = { STEP_H };
    pfx_status st = pfx_layer_create(rt, &lp, &c.layer);
    if (st == PFX_SUCCESS)
        st = pfx_layer_init_random(c.layer, 7, 1.0f);
    if (st == PFX_SUCCESS)
        st = suite_random_tensor(rt, 3, xs, 21, 1.0f, &c.x);
    if (st == PFX_SUCCESS)
        st = suite_random_tensor(rt, 3, xs, 22, 1.0f, &c.target);
    if (st == PFX_SUCCESS)
        st = suite_random_tensor(rt, 3, ps, 23, 0.5f, &c.kp);
    if (st == PFX_SUCCESS)
        st = suite_random_tensor(rt, 3, ps, 24, 0.5f, &c.vp);
    if (st == PFX_SUCCESS)
        st = suite_random_tensor(rt, 1, gs, 25, 0.1f, &c.gain);
    pfx_tensor **outs[] = { &c.y, &c.dy, &c.dx };
    for (size_t i = 0; i < 3 && st == PFX_SUCCESS; i++)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, xs, outs[i]);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &c.dkp);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &c.dvp);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, gs, &c.dgain);
    /* The gains the optimizer updates, read on the device: nothing waits. */
    c.prefix = (pfx_layer_prefix){ .k = c.kp, .v = c.vp, .gain_tensor = c.gain, .gain_ramp = 1.0f };
    c.grads =
        (pfx_layer_grads){ .dx = c.dx, .dprefix_k = c.dkp, .dprefix_v = c.dvp, .dgain = c.dgain };
    pfx_optimizer_params op = { .max_grad_norm = 1.0f };
    unsigned group = 0;
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_create(rt, &op, &c.opt);
    if (st == PFX_SUCCESS) {
        pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
        st = pfx_optimizer_add_group(c.opt, &gp, &group);
    }
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_add_param(c.opt, group, c.kp, c.dkp, "prefix_k");
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_add_param(c.opt, group, c.vp, c.dvp, "prefix_v");
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_add_param(c.opt, group, c.gain, c.dgain, "gain");
    if (st == PFX_SUCCESS)
        suite_measure(s, r, step_enqueue, &c, flops, 0, BENCH_CEIL_FMA);
    else
        suite_skip_status(s, r, st);
    pfx_optimizer_destroy(&c.opt);
    pfx_tensor **all[] = { &c.x,  &c.y,   &c.target, &c.dy,   &c.dx,   &c.kp,
                           &c.vp, &c.dkp, &c.dvp,    &c.gain, &c.dgain };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        pfx_tensor_destroy(all[i]);
    pfx_layer_destroy(&c.layer);
}
