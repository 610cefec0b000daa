/*
 * Double-precision reference of whole GPT-2 / Llama-family models with
 * prefixes and gains (model_ref.h): a forward that keeps every activation of
 * every block, and the reverse pass from the loss down to the first block's
 * input, collecting the prefix and gain gradients of each layer on the way.
 * The attention is layer_ref's double BNHD attention (GQA, causal, prefix,
 * gain, per-item lengths); norms, activations and RoPE are model_ops_ref's.
 */
#include "model_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_ref.h"

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "model_ref: out of memory\n");
        abort();
    }
    return p;
}

static double *dalloc(size_t n)
{
    return xcalloc(n, sizeof(double));
}

static void fail(const char *what)
{
    fprintf(stderr, "model_ref: %s\n", what);
    abort();
}

/* ---- dense products with float weights in either HF layout ---- */

/* Weight element (i, o) (input i, output o) of a weight [in, out] (Conv1D,
 * io = true) or [out, in] (Linear). */
static double wat(const float *w, bool io, size_t in_dim, size_t out_dim, size_t i, size_t o)
{
    return io ? w[i * out_dim + o] : w[o * in_dim + i];
}

/* y[r][o] = sum_i x[r][i] w(i, o) + b[o] */
static void linear(size_t rows, size_t in_dim, size_t out_dim, const double *x, const float *w,
                   bool io, const float *b, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out_dim; o++) {
            double s = b ? b[o] : 0.0;
            for (size_t i = 0; i < in_dim; i++)
                s += x[r * in_dim + i] * wat(w, io, in_dim, out_dim, i, o);
            y[r * out_dim + o] = s;
        }
}

/* dx[r][i] += sum_o dy[r][o] w(i, o) */
static void linear_dx(size_t rows, size_t in_dim, size_t out_dim, const double *dy, const float *w,
                      bool io, double *dx)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < in_dim; i++) {
            double s = 0.0;
            for (size_t o = 0; o < out_dim; o++)
                s += dy[r * out_dim + o] * wat(w, io, in_dim, out_dim, i, o);
            dx[r * in_dim + i] += s;
        }
}

/* dw(i, o) += sum_r x[r][i] dy[r][o], stored like the weight; db[o] +=
 * sum_r dy[r][o] (either may be NULL). */
static void linear_dw(size_t rows, size_t in_dim, size_t out_dim, const double *x, const double *dy,
                      bool io, double *dw, double *db)
{
    for (size_t i = 0; dw && i < in_dim; i++)
        for (size_t o = 0; o < out_dim; o++) {
            double s = 0.0;
            for (size_t r = 0; r < rows; r++)
                s += x[r * in_dim + i] * dy[r * out_dim + o];
            dw[io ? i * out_dim + o : o * in_dim + i] += s;
        }
    for (size_t o = 0; db && o < out_dim; o++)
        for (size_t r = 0; r < rows; r++)
            db[o] += dy[r * out_dim + o];
}

static double *f2d(const float *x, size_t n)
{
    double *y = dalloc(n);
    for (size_t i = 0; x && i < n; i++)
        y[i] = x[i];
    return y;
}

/* ---- the model's pieces ---- */

typedef struct dims {
    size_t B, N, L, C, H, Hkv, D, I, V, P, rows, qd, kvd;
    bool gpt2;
} dims;

static dims dims_of(const ref_model_config *c, const ref_model_prefix *p, const ref_model_batch *x)
{
    dims d = { x->batch,    x->tokens,
               c->layers,   c->hidden,
               c->heads,    c->kv_heads,
               c->head_dim, c->inner,
               c->vocab,    p ? p->len : 0,
               0,           0,
               0,           c->family == REF_MODEL_GPT2 };
    d.rows = d.B * d.N;
    d.qd = d.H * d.D;
    d.kvd = d.Hkv * d.D;
    if (!d.B || !d.N || !d.L || !d.C || !d.H || !d.Hkv || !d.D || !d.I || !d.V || d.H % d.Hkv)
        fail("a zero size or heads % kv_heads != 0");
    if (d.gpt2 && (d.qd != d.C || d.Hkv != d.H))
        fail("GPT-2 needs heads * head_dim == hidden and kv_heads == heads");
    if (d.gpt2 && d.P + d.N > c->max_positions)
        fail("P + N exceeds GPT-2's max_positions");
    if (!d.gpt2 && d.D % 2)
        fail("RoPE needs an even head_dim");
    if (d.P && (!p->kp || !p->vp))
        fail("P > 0 without kp / vp");
    if (c->gain_mode != PFX_GAIN_OFF && (!p || !p->gain))
        fail("a gain mode without gains");
    for (size_t i = 0; i < d.rows; i++)
        if (x->ids[i] < 0 || (size_t)x->ids[i] >= d.V)
            fail("an id outside [0, V)");
    for (size_t b = 0; x->lengths && b < d.B; b++)
        if (x->lengths[b] < 1 || (size_t)x->lengths[b] > d.N)
            fail("a length outside 1..N");
    return d;
}

static ref_layer_dims attn_dims(const dims *d, const ref_model_config *c, const ref_model_batch *x)
{
    ref_layer_dims a = { .batch = d->B,
                         .tokens = d->N,
                         .model_dim = d->C,
                         .heads = d->H,
                         .kv_heads = d->Hkv,
                         .head_dim = d->D,
                         .prefix_len = d->P,
                         .causal = true,
                         .residual = false,
                         .gain_mode = c->gain_mode,
                         .scale = 0.0,
                         .lens = x->lengths };
    return a;
}

/* Everything a block's backward needs. */
typedef struct block_acts {
    double *x;         /* block input [rows, C] */
    double *n1;        /* first norm's output */
    double *q, *k, *v; /* after bias and RoPE */
    double *o;         /* attention output [rows, qd] */
    double *a;         /* after the attention residual */
    double *n2;        /* second norm's output */
    double *h;         /* GPT-2: c_fc output [rows, I]; Llama: gate */
    double *up;        /* Llama: up */
    double *m;         /* act(h) (GPT-2) or silu(gate) * up (Llama) [rows, I] */
} block_acts;

static void acts_free(block_acts *s)
{
    free(s->x);
    free(s->n1);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->o);
    free(s->a);
    free(s->n2);
    free(s->h);
    free(s->up);
    free(s->m);
}

typedef struct model_run {
    dims d;
    ref_layer_dims ad;
    float inv_freq[512];
    double *pk, *pv;    /* [L, Hkv, P, D] as double */
    block_acts *blocks; /* [L] */
    double *xf;         /* last block's output [rows, C] */
    double *hf;         /* final norm output */
    double *logits;     /* [rows, V] */
} model_run;

static ref_layer_prefix layer_prefix(const model_run *r, const ref_model_config *c,
                                     const ref_model_prefix *p, size_t l, double *gain)
{
    const size_t span = r->d.Hkv * r->d.P * r->d.D;
    if (c->gain_mode != PFX_GAIN_OFF)
        for (size_t h = 0; h < r->d.H; h++)
            gain[h] = p->gain[l * r->d.H + h];
    ref_layer_prefix lp = { r->d.P ? r->pk + l * span : NULL, r->d.P ? r->pv + l * span : NULL,
                            c->gain_mode != PFX_GAIN_OFF ? gain : NULL, c->gain_ramp };
    return lp;
}

static void norm_fwd(const dims *d, bool layer_norm, const float *w, const float *b, double eps,
                     const double *x, double *y)
{
    double *wd = f2d(w, d->C), *bd = b ? f2d(b, d->C) : NULL;
    if (layer_norm)
        ref_layernorm(d->rows, d->C, x, wd, bd, eps, y, NULL, NULL);
    else
        ref_rmsnorm(d->rows, d->C, x, wd, eps, y, NULL);
    free(wd);
    free(bd);
}

/* dx += norm backward of dy */
static void norm_bwd(const dims *d, bool layer_norm, const float *w, double eps, const double *x,
                     const double *dy, double *dx)
{
    double *wd = f2d(w, d->C), *g = dalloc(d->rows * d->C);
    if (layer_norm)
        ref_layernorm_backward(d->rows, d->C, x, wd, eps, dy, g);
    else
        ref_rmsnorm_backward(d->rows, d->C, x, wd, eps, dy, g);
    for (size_t i = 0; i < d->rows * d->C; i++)
        dx[i] += g[i];
    free(wd);
    free(g);
}

/* dw[c] += sum_r dy * xhat, db[c] += sum_r dy (db may be NULL; x the
 * norm's input, statistics recomputed). */
static void norm_dw(const dims *d, bool layer_norm, double eps, const double *x, const double *dy,
                    double *dw, double *db)
{
    double *mean = dalloc(d->rows), *rstd = dalloc(d->rows), *one = dalloc(d->C);
    for (size_t c = 0; c < d->C; c++)
        one[c] = 1.0;
    if (layer_norm)
        ref_layernorm(d->rows, d->C, x, one, NULL, eps, NULL, mean, rstd);
    else
        ref_rmsnorm(d->rows, d->C, x, one, eps, NULL, rstd);
    for (size_t r = 0; r < d->rows; r++)
        for (size_t c = 0; c < d->C; c++) {
            const double g = dy[r * d->C + c];
            dw[c] += g * (x[r * d->C + c] - mean[r]) * rstd[r];
            if (db)
                db[c] += g;
        }
    free(mean);
    free(rstd);
    free(one);
}

/* The queries the attention of layer l reads: q scaled by 1 + r G_l[h, d]
 * with a structured gain (else a copy). */
static void scaled_queries(const dims *d, const ref_model_config *c, const ref_model_prefix *p,
                           size_t l, const double *q, double *out)
{
    for (size_t i = 0; i < d->rows * d->qd; i++) {
        const size_t hd = i % d->qd;
        out[i] = q[i] * (p && p->dim_gain ? 1.0 + c->gain_ramp * (double)p->dim_gain[l * d->qd + hd]
                                          : 1.0);
    }
}

static void block_forward(model_run *r, const ref_model_config *c, const ref_model_layer *w,
                          const ref_model_prefix *p, size_t l, const double *x, double *y)
{
    const dims *d = &r->d;
    block_acts *s = &r->blocks[l];
    const size_t rows = d->rows, C = d->C, I = d->I;
    s->x = dalloc(rows * C);
    memcpy(s->x, x, rows * C * sizeof(double));
    s->n1 = dalloc(rows * C);
    s->q = dalloc(rows * d->qd);
    s->k = dalloc(rows * d->kvd);
    s->v = dalloc(rows * d->kvd);
    s->o = dalloc(rows * d->qd);
    s->a = dalloc(rows * C);
    s->n2 = dalloc(rows * C);
    s->h = dalloc(rows * I);
    s->m = dalloc(rows * I);
    double *t = dalloc(rows * 3 * C); /* GPT-2's fused q | k | v */
    if (d->gpt2) {
        norm_fwd(d, true, w->ln_1_w, w->ln_1_b, c->eps, x, s->n1);
        linear(rows, C, 3 * C, s->n1, w->c_attn_w, true, w->c_attn_b, t);
        for (size_t i = 0; i < rows; i++)
            for (size_t e = 0; e < C; e++) {
                s->q[i * C + e] = t[i * 3 * C + e];
                s->k[i * C + e] = t[i * 3 * C + C + e];
                s->v[i * C + e] = t[i * 3 * C + 2 * C + e];
            }
    } else {
        norm_fwd(d, false, w->input_norm_w, NULL, c->eps, x, s->n1);
        linear(rows, C, d->qd, s->n1, w->q_w, false, c->qkv_bias ? w->q_b : NULL, s->q);
        linear(rows, C, d->kvd, s->n1, w->k_w, false, c->qkv_bias ? w->k_b : NULL, s->k);
        linear(rows, C, d->kvd, s->n1, w->v_w, false, c->qkv_bias ? w->v_b : NULL, s->v);
        ref_rope_apply(d->B, d->N, d->H, d->D, d->P, r->inv_freq, 1.0, s->q);
        ref_rope_apply(d->B, d->N, d->Hkv, d->D, d->P, r->inv_freq, 1.0, s->k);
    }
    double gain[256];
    ref_layer_prefix lp = layer_prefix(r, c, p, l, gain);
    double *qs = dalloc(rows * d->qd);
    scaled_queries(d, c, p, l, s->q, qs);
    ref_layer_attention(&r->ad, &lp, qs, s->k, s->v, s->o);
    free(qs);
    if (d->gpt2)
        linear(rows, C, C, s->o, w->attn_proj_w, true, w->attn_proj_b, s->a);
    else
        linear(rows, d->qd, C, s->o, w->o_w, false, NULL, s->a);
    for (size_t i = 0; i < rows * C; i++)
        s->a[i] += x[i];
    if (d->gpt2) {
        norm_fwd(d, true, w->ln_2_w, w->ln_2_b, c->eps, s->a, s->n2);
        linear(rows, C, I, s->n2, w->c_fc_w, true, w->c_fc_b, s->h);
        for (size_t i = 0; i < rows * I; i++)
            s->m[i] = ref_act(c->act, s->h[i]);
        linear(rows, I, C, s->m, w->mlp_proj_w, true, w->mlp_proj_b, y);
    } else {
        norm_fwd(d, false, w->post_norm_w, NULL, c->eps, s->a, s->n2);
        s->up = dalloc(rows * I);
        linear(rows, C, I, s->n2, w->gate_w, false, NULL, s->h);
        linear(rows, C, I, s->n2, w->up_w, false, NULL, s->up);
        for (size_t i = 0; i < rows * I; i++)
            s->m[i] = ref_act(REF_ACT_SILU, s->h[i]) * s->up[i];
        linear(rows, I, C, s->m, w->down_w, false, NULL, y);
    }
    for (size_t i = 0; i < rows * C; i++)
        y[i] += s->a[i];
    free(t);
}

/* dy: gradient of the block output; dx receives the input's gradient
 * (overwritten); gw (may be NULL) receives the weights' gradients (added). */
static void block_backward(model_run *r, const ref_model_config *c, const ref_model_layer *w,
                           const ref_model_prefix *p, size_t l, const double *dy, double *dx,
                           double *dkp, double *dvp, double *dgain, ref_model_layer_grads *gw,
                           double *ddim)
{
    ref_model_layer_grads none;
    memset(&none, 0, sizeof(none));
    if (!gw)
        gw = &none;
    const dims *d = &r->d;
    block_acts *s = &r->blocks[l];
    const size_t rows = d->rows, C = d->C, I = d->I;
    /* MLP */
    double *dm = dalloc(rows * I), *dn2 = dalloc(rows * C), *da = dalloc(rows * C);
    memcpy(da, dy, rows * C * sizeof(double));
    if (d->gpt2) {
        linear_dw(rows, I, C, s->m, dy, true, gw->mlp_proj_w, gw->mlp_proj_b);
        linear_dx(rows, I, C, dy, w->mlp_proj_w, true, dm);
        for (size_t i = 0; i < rows * I; i++)
            dm[i] *= ref_act_grad(c->act, s->h[i]);
        linear_dw(rows, C, I, s->n2, dm, true, gw->c_fc_w, gw->c_fc_b);
        linear_dx(rows, C, I, dm, w->c_fc_w, true, dn2);
        if (gw->ln_2_w)
            norm_dw(d, true, c->eps, s->a, dn2, gw->ln_2_w, gw->ln_2_b);
        norm_bwd(d, true, w->ln_2_w, c->eps, s->a, dn2, da);
    } else {
        double *dg = dalloc(rows * I), *du = dalloc(rows * I);
        linear_dw(rows, I, C, s->m, dy, false, gw->down_w, NULL);
        linear_dx(rows, I, C, dy, w->down_w, false, dm);
        for (size_t i = 0; i < rows * I; i++) {
            dg[i] = dm[i] * s->up[i] * ref_act_grad(REF_ACT_SILU, s->h[i]);
            du[i] = dm[i] * ref_act(REF_ACT_SILU, s->h[i]);
        }
        linear_dw(rows, C, I, s->n2, dg, false, gw->gate_w, NULL);
        linear_dw(rows, C, I, s->n2, du, false, gw->up_w, NULL);
        linear_dx(rows, C, I, dg, w->gate_w, false, dn2);
        linear_dx(rows, C, I, du, w->up_w, false, dn2);
        if (gw->post_norm_w)
            norm_dw(d, false, c->eps, s->a, dn2, gw->post_norm_w, NULL);
        norm_bwd(d, false, w->post_norm_w, c->eps, s->a, dn2, da);
        free(dg);
        free(du);
    }
    /* attention */
    double *d_o = dalloc(rows * d->qd), *dq = dalloc(rows * d->qd);
    double *dk = dalloc(rows * d->kvd), *dv = dalloc(rows * d->kvd), *dn1 = dalloc(rows * C);
    if (d->gpt2) {
        linear_dw(rows, C, C, s->o, da, true, gw->attn_proj_w, gw->attn_proj_b);
        linear_dx(rows, C, C, da, w->attn_proj_w, true, d_o);
    } else {
        linear_dw(rows, d->qd, C, s->o, da, false, gw->o_w, NULL);
        linear_dx(rows, d->qd, C, da, w->o_w, false, d_o);
    }
    double gain[256], lg[256];
    ref_layer_prefix lp = layer_prefix(r, c, p, l, gain);
    const size_t span = d->Hkv * d->P * d->D;
    double *qs = dalloc(rows * d->qd);
    scaled_queries(d, c, p, l, s->q, qs);
    ref_layer_attention_backward(&r->ad, &lp, qs, s->k, s->v, d_o, dq, dk, dv,
                                 dkp && d->P ? dkp + l * span : NULL,
                                 dvp && d->P ? dvp + l * span : NULL, lg);
    /* through the scaling: dG = r sum_rows q dq', dq = (1 + r G) dq' */
    for (size_t i = 0; p && p->dim_gain && i < rows * d->qd; i++) {
        const size_t hd = i % d->qd;
        if (ddim)
            ddim[l * d->qd + hd] += c->gain_ramp * s->q[i] * dq[i];
        dq[i] *= 1.0 + c->gain_ramp * (double)p->dim_gain[l * d->qd + hd];
    }
    free(qs);
    for (size_t h = 0; dgain && h < d->H; h++)
        dgain[l * d->H + h] = c->gain_mode == PFX_GAIN_OFF ? 0.0 : lg[h];
    if (d->gpt2) {
        double *dqkv = dalloc(rows * 3 * C);
        for (size_t i = 0; i < rows; i++)
            for (size_t e = 0; e < C; e++) {
                dqkv[i * 3 * C + e] = dq[i * C + e];
                dqkv[i * 3 * C + C + e] = dk[i * C + e];
                dqkv[i * 3 * C + 2 * C + e] = dv[i * C + e];
            }
        linear_dw(rows, C, 3 * C, s->n1, dqkv, true, gw->c_attn_w, gw->c_attn_b);
        linear_dx(rows, C, 3 * C, dqkv, w->c_attn_w, true, dn1);
        free(dqkv);
    } else {
        ref_rope_apply(d->B, d->N, d->H, d->D, d->P, r->inv_freq, -1.0, dq);
        ref_rope_apply(d->B, d->N, d->Hkv, d->D, d->P, r->inv_freq, -1.0, dk);
        const bool b = c->qkv_bias;
        linear_dw(rows, C, d->qd, s->n1, dq, false, gw->q_w, b ? gw->q_b : NULL);
        linear_dw(rows, C, d->kvd, s->n1, dk, false, gw->k_w, b ? gw->k_b : NULL);
        linear_dw(rows, C, d->kvd, s->n1, dv, false, gw->v_w, b ? gw->v_b : NULL);
        linear_dx(rows, C, d->qd, dq, w->q_w, false, dn1);
        linear_dx(rows, C, d->kvd, dk, w->k_w, false, dn1);
        linear_dx(rows, C, d->kvd, dv, w->v_w, false, dn1);
    }
    double *n1w = d->gpt2 ? gw->ln_1_w : gw->input_norm_w;
    if (n1w)
        norm_dw(d, d->gpt2, c->eps, s->x, dn1, n1w, d->gpt2 ? gw->ln_1_b : NULL);
    memcpy(dx, da, rows * C * sizeof(double));
    norm_bwd(d, d->gpt2, d->gpt2 ? w->ln_1_w : w->input_norm_w, c->eps, s->x, dn1, dx);
    free(dm);
    free(dn2);
    free(da);
    free(d_o);
    free(dq);
    free(dk);
    free(dv);
    free(dn1);
}

static void run_forward(model_run *r, const ref_model_config *c, const ref_model_weights *w,
                        const ref_model_prefix *p, const ref_model_batch *x)
{
    memset(r, 0, sizeof(*r));
    r->d = dims_of(c, p, x);
    r->ad = attn_dims(&r->d, c, x);
    const dims *d = &r->d;
    if (d->H > 256 || d->D > 1024)
        fail("more than 256 heads or a head_dim above 1024");
    if (!d->gpt2) {
        double f[512];
        ref_rope_inv_freq(&c->rope, d->D, f);
        for (size_t i = 0; i < d->D / 2; i++)
            r->inv_freq[i] = (float)f[i]; /* transformers holds inv_freq in float32 */
    }
    const size_t span = d->L * d->Hkv * d->P * d->D;
    r->pk = f2d(d->P ? p->kp : NULL, span);
    r->pv = f2d(d->P ? p->vp : NULL, span);
    r->blocks = xcalloc(d->L, sizeof(block_acts));
    double *h = dalloc(d->rows * d->C), *next = dalloc(d->rows * d->C);
    for (size_t b = 0; b < d->B; b++)
        for (size_t t = 0; t < d->N; t++) {
            const size_t row = b * d->N + t, id = (size_t)x->ids[row];
            for (size_t e = 0; e < d->C; e++)
                h[row * d->C + e] = (double)w->wte[id * d->C + e] +
                                    (d->gpt2 ? (double)w->wpe[(d->P + t) * d->C + e] : 0.0);
        }
    for (size_t l = 0; l < d->L; l++) {
        block_forward(r, c, &w->layer[l], p, l, h, next);
        double *tmp = h;
        h = next;
        next = tmp;
    }
    free(next);
    r->xf = h;
    r->hf = dalloc(d->rows * d->C);
    norm_fwd(d, d->gpt2, w->final_w, d->gpt2 ? w->final_b : NULL, c->eps, h, r->hf);
    r->logits = dalloc(d->rows * d->V);
    linear(d->rows, d->C, d->V, r->hf, w->lm_head ? w->lm_head : w->wte, false, NULL, r->logits);
}

static void run_free(model_run *r)
{
    for (size_t l = 0; r->blocks && l < r->d.L; l++)
        acts_free(&r->blocks[l]);
    free(r->blocks);
    free(r->pk);
    free(r->pv);
    free(r->xf);
    free(r->hf);
    free(r->logits);
}

size_t ref_model_label_count(const ref_model_batch *x)
{
    size_t n = 0;
    for (size_t b = 0; x->labels && b < x->batch; b++)
        for (size_t t = 1; t < x->tokens; t++)
            n += x->labels[b * x->tokens + t] != -100;
    return n;
}

/* HF's loss; dlogits (may be NULL) = d loss / d logits. */
static double loss_of(const model_run *r, const ref_model_batch *x, double *dlogits)
{
    const dims *d = &r->d;
    const size_t count = ref_model_label_count(x);
    double sum = 0.0;
    for (size_t b = 0; b < d->B; b++)
        for (size_t t = 0; t + 1 < d->N; t++) {
            const int32_t label = x->labels[b * d->N + t + 1];
            if (label == -100)
                continue;
            if (label < 0 || (size_t)label >= d->V)
                fail("a label outside [0, V) that is not -100");
            const size_t row = b * d->N + t;
            sum += ref_cross_entropy_row(d->V, r->logits + row * d->V, label, 1.0 / (double)count,
                                         dlogits ? dlogits + row * d->V : NULL);
        }
    return count ? sum / (double)count : NAN;
}

void ref_model_forward(const ref_model_config *c, const ref_model_weights *w,
                       const ref_model_prefix *p, const ref_model_batch *x, double *logits,
                       double *loss)
{
    model_run r;
    run_forward(&r, c, w, p, x);
    if (logits)
        memcpy(logits, r.logits, r.d.rows * r.d.V * sizeof(double));
    if (loss) {
        if (!x->labels)
            fail("a loss without labels");
        *loss = loss_of(&r, x, NULL);
    }
    run_free(&r);
}

void ref_model_hidden(const ref_model_config *c, const ref_model_weights *w,
                      const ref_model_prefix *p, const ref_model_batch *x, double *hidden)
{
    model_run r;
    run_forward(&r, c, w, p, x);
    memcpy(hidden, r.hf, r.d.rows * r.d.C * sizeof(double));
    run_free(&r);
}

/* The map of one (layer, head) of `item` from a forward's kept Q and K. */
static void head_map(const model_run *r, const ref_model_config *c, const ref_model_prefix *p,
                     const ref_model_batch *x, size_t item, size_t layer, size_t head,
                     double *probs)
{
    const dims *d = &r->d;
    if (item >= d->B || layer >= d->L || head >= d->H)
        fail("item, layer or head out of range");
    const size_t P = d->P, N = d->N, D = d->D, cols = P + N, hk = head / (d->H / d->Hkv);
    const size_t len = x->lengths ? (size_t)x->lengths[item] : N;
    double g = 1.0;
    if (c->gain_mode != PFX_GAIN_OFF) {
        double a = c->gain_ramp * (double)p->gain[layer * d->H + head];
        g = c->gain_mode == PFX_GAIN_LINEAR ? 1.0 + a : 1.0 + tanh(a);
    }
    const double scale = g / sqrt((double)D);
    const block_acts *s = &r->blocks[layer];
    const double *kp = r->pk + (layer * d->Hkv + hk) * P * D;
    double *z = dalloc(cols);
    for (size_t i = 0; i < N; i++) {
        double *row = probs + i * cols, mx = -INFINITY, sum = 0.0;
        const double *q = s->q + ((item * N + i) * d->H + head) * D;
        const size_t vis = i < len ? P + i + 1 : 0; /* causal: prefix, then keys t <= i */
        for (size_t j = 0; j < cols; j++) {
            row[j] = 0.0;
            if (j >= vis)
                continue;
            const double *k = j < P ? kp + j * D : s->k + ((item * N + j - P) * d->Hkv + hk) * D;
            double dot = 0.0;
            for (size_t e = 0; e < D; e++)
                dot += q[e] * k[e] *
                       (p->dim_gain ? 1.0 + c->gain_ramp *
                                                (double)p->dim_gain[(layer * d->H + head) * D + e]
                                    : 1.0);
            z[j] = scale * dot;
            mx = fmax(mx, z[j]);
        }
        for (size_t j = 0; j < vis; j++)
            sum += (row[j] = exp(z[j] - mx));
        for (size_t j = 0; j < vis; j++)
            row[j] /= sum;
    }
    free(z);
}

void ref_model_attention_probs(const ref_model_config *c, const ref_model_weights *w,
                               const ref_model_prefix *p, const ref_model_batch *x, size_t item,
                               size_t layer, size_t head, double *probs)
{
    model_run r;
    run_forward(&r, c, w, p, x);
    head_map(&r, c, p, x, item, layer, head, probs);
    run_free(&r);
}

/* The sum of the k largest of row[0 .. n) (all of them when n <= k). */
static double top_sum(const double *row, size_t n, unsigned k, bool *taken)
{
    memset(taken, 0, n * sizeof(bool));
    double sum = 0.0;
    for (unsigned t = 0; t < k; t++) {
        size_t best = n;
        for (size_t j = 0; j < n; j++)
            if (!taken[j] && (best == n || row[j] > row[best]))
                best = j;
        if (best == n)
            break;
        taken[best] = true;
        sum += row[best];
    }
    return sum;
}

void ref_model_head_stats(const ref_model_config *c, const ref_model_weights *w,
                          const ref_model_prefix *p, const ref_model_batch *x, unsigned top_k,
                          double *prefix_mass, double *entropy, double *top_k_mass)
{
    model_run r;
    run_forward(&r, c, w, p, x);
    const dims *d = &r.d;
    const size_t cols = d->P + d->N;
    double *map = dalloc(d->N * cols);
    bool *taken = xcalloc(cols, sizeof(bool));
    for (size_t l = 0; l < d->L; l++)
        for (size_t h = 0; h < d->H; h++) {
            double pre = 0.0, ent = 0.0, top = 0.0;
            size_t rows = 0;
            for (size_t b = 0; b < d->B; b++) {
                head_map(&r, c, p, x, b, l, h, map);
                const size_t len = x->lengths ? (size_t)x->lengths[b] : d->N;
                for (size_t i = 0; i < len; i++, rows++) {
                    const double *row = map + i * cols;
                    for (size_t j = 0; j < cols; j++) {
                        pre += j < d->P ? row[j] : 0.0;
                        ent -= row[j] > 0.0 ? row[j] * log(row[j]) : 0.0;
                    }
                    top += top_sum(row, cols, top_k, taken);
                }
            }
            const size_t at = l * d->H + h;
            if (prefix_mass)
                prefix_mass[at] = pre / (double)rows;
            if (entropy)
                entropy[at] = ent / (double)rows;
            if (top_k_mass)
                top_k_mass[at] = top / (double)rows;
        }
    free(taken);
    free(map);
    run_free(&r);
}

void ref_model_backward(const ref_model_config *c, const ref_model_weights *w,
                        const ref_model_prefix *p, const ref_model_batch *x, double *loss,
                        double *dkp, double *dvp, double *dgain)
{
    ref_model_backward_weights(c, w, p, x, loss, dkp, dvp, dgain, NULL);
}

void ref_model_backward_weights(const ref_model_config *c, const ref_model_weights *w,
                                const ref_model_prefix *p, const ref_model_batch *x, double *loss,
                                double *dkp, double *dvp, double *dgain, ref_model_grads *g)
{
    if (!x->labels || ref_model_label_count(x) == 0)
        fail("the backward needs labels with at least one counted entry");
    model_run r;
    run_forward(&r, c, w, p, x);
    const dims *d = &r.d;
    double *dz = dalloc(d->rows * d->V);
    const double l = loss_of(&r, x, dz);
    if (loss)
        *loss = l;
    /* LM head and final norm */
    double *dh = dalloc(d->rows * d->C), *dxl = dalloc(d->rows * d->C);
    const float *head = w->lm_head ? w->lm_head : w->wte;
    if (g)
        linear_dw(d->rows, d->C, d->V, r.hf, dz, false, w->lm_head ? g->lm_head : g->wte, NULL);
    linear_dx(d->rows, d->C, d->V, dz, head, false, dh);
    if (g)
        norm_dw(d, d->gpt2, c->eps, r.xf, dh, g->final_w, d->gpt2 ? g->final_b : NULL);
    norm_bwd(d, d->gpt2, w->final_w, c->eps, r.xf, dh, dxl);
    const size_t span = d->L * d->Hkv * d->P * d->D;
    if (dkp)
        memset(dkp, 0, span * sizeof(double));
    if (dvp)
        memset(dvp, 0, span * sizeof(double));
    double *dprev = dalloc(d->rows * d->C);
    for (size_t li = d->L; li-- > 0;) {
        block_backward(&r, c, &w->layer[li], p, li, dxl, dprev, dkp, dvp, dgain,
                       g ? &g->layer[li] : NULL, g ? g->dim_gain : NULL);
        double *tmp = dxl;
        dxl = dprev;
        dprev = tmp;
    }
    /* embeddings: dxl is the gradient of the first block's input */
    for (size_t b = 0; g && b < d->B; b++)
        for (size_t t = 0; t < d->N; t++) {
            const size_t row = b * d->N + t, id = (size_t)x->ids[row];
            for (size_t e = 0; e < d->C; e++) {
                g->wte[id * d->C + e] += dxl[row * d->C + e];
                if (d->gpt2)
                    g->wpe[(d->P + t) * d->C + e] += dxl[row * d->C + e];
            }
        }
    free(dz);
    free(dh);
    free(dxl);
    free(dprev);
    run_free(&r);
}

/* ---- weight gradients' storage ---- */

const double *ref_model_grad_of(const ref_model_config *c, const ref_model_weights *w,
                                const ref_model_grads *g, const float *weight)
{
    if (!weight)
        return NULL;
    const float *globals[] = { w->wte, w->wpe, w->final_w, w->final_b, w->lm_head };
    const double *gglobals[] = { g->wte, g->wpe, g->final_w, g->final_b, g->lm_head };
    for (size_t i = 0; i < 5; i++)
        if (globals[i] == weight)
            return gglobals[i];
    for (size_t l = 0; l < c->layers; l++) {
        const ref_model_layer *y = &w->layer[l];
        const ref_model_layer_grads *d = &g->layer[l];
#define FIELD(f)                                                                                   \
    if (y->f == weight)                                                                            \
    return d->f
        FIELD(ln_1_w);
        FIELD(ln_1_b);
        FIELD(c_attn_w);
        FIELD(c_attn_b);
        FIELD(attn_proj_w);
        FIELD(attn_proj_b);
        FIELD(ln_2_w);
        FIELD(ln_2_b);
        FIELD(c_fc_w);
        FIELD(c_fc_b);
        FIELD(mlp_proj_w);
        FIELD(mlp_proj_b);
        FIELD(input_norm_w);
        FIELD(q_w);
        FIELD(k_w);
        FIELD(v_w);
        FIELD(q_b);
        FIELD(k_b);
        FIELD(v_b);
        FIELD(o_w);
        FIELD(post_norm_w);
        FIELD(gate_w);
        FIELD(up_w);
        FIELD(down_w);
#undef FIELD
    }
    return NULL;
}

void ref_model_grads_alloc(const ref_model_config *c, bool untied, ref_model_grads *g)
{
    const size_t L = c->layers, C = c->hidden, I = c->inner, V = c->vocab;
    const size_t qd = c->heads * c->head_dim, kvd = c->kv_heads * c->head_dim;
    memset(g, 0, sizeof(*g));
    g->layer = xcalloc(L, sizeof(ref_model_layer_grads));
    g->wte = dalloc(V * C);
    g->final_w = dalloc(C);
    g->lm_head = untied ? dalloc(V * C) : NULL;
    if (c->family == REF_MODEL_GPT2) {
        g->wpe = dalloc(c->max_positions * C);
        g->final_b = dalloc(C);
    }
    for (size_t l = 0; l < L; l++) {
        ref_model_layer_grads *y = &g->layer[l];
        if (c->family == REF_MODEL_GPT2) {
            y->ln_1_w = dalloc(C);
            y->ln_1_b = dalloc(C);
            y->c_attn_w = dalloc(C * 3 * C);
            y->c_attn_b = dalloc(3 * C);
            y->attn_proj_w = dalloc(C * C);
            y->attn_proj_b = dalloc(C);
            y->ln_2_w = dalloc(C);
            y->ln_2_b = dalloc(C);
            y->c_fc_w = dalloc(C * I);
            y->c_fc_b = dalloc(I);
            y->mlp_proj_w = dalloc(I * C);
            y->mlp_proj_b = dalloc(C);
        } else {
            y->input_norm_w = dalloc(C);
            y->q_w = dalloc(qd * C);
            y->k_w = dalloc(kvd * C);
            y->v_w = dalloc(kvd * C);
            if (c->qkv_bias) {
                y->q_b = dalloc(qd);
                y->k_b = dalloc(kvd);
                y->v_b = dalloc(kvd);
            }
            y->o_w = dalloc(C * qd);
            y->post_norm_w = dalloc(C);
            y->gate_w = dalloc(I * C);
            y->up_w = dalloc(I * C);
            y->down_w = dalloc(C * I);
        }
    }
    g->layers = L;
}

void ref_model_grads_free(ref_model_grads *g)
{
    for (size_t l = 0; g->layer && l < g->layers; l++) {
        ref_model_layer_grads *y = &g->layer[l];
        double *all[] = { y->ln_1_w,       y->ln_1_b,      y->c_attn_w,   y->c_attn_b,
                          y->attn_proj_w,  y->attn_proj_b, y->ln_2_w,     y->ln_2_b,
                          y->c_fc_w,       y->c_fc_b,      y->mlp_proj_w, y->mlp_proj_b,
                          y->input_norm_w, y->q_w,         y->k_w,        y->v_w,
                          y->q_b,          y->k_b,         y->v_b,        y->o_w,
                          y->post_norm_w,  y->gate_w,      y->up_w,       y->down_w };
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
            free(all[i]);
    }
    free(g->layer);
    free(g->wte);
    free(g->wpe);
    free(g->final_w);
    free(g->final_b);
    free(g->lm_head);
    memset(g, 0, sizeof(*g));
}

/* ---- random models ---- */

static float *take(ref_model_storage *s, size_t n)
{
    if (s->used + n > s->count)
        fail("random model storage too small");
    float *p = s->data + s->used;
    s->used += n;
    return p;
}

static const float *fill(ref_model_storage *s, ref_rng *rng, size_t n, double center, double amp)
{
    float *p = take(s, n);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(center + ref_rng_uniform(rng, -amp, amp));
    return p;
}

void ref_model_random(const ref_model_config *c, ref_rng *rng, ref_model_weights *w,
                      ref_model_storage *s)
{
    const size_t L = c->layers, C = c->hidden, I = c->inner, V = c->vocab;
    const size_t qd = c->heads * c->head_dim, kvd = c->kv_heads * c->head_dim;
    const size_t per_layer = 4 * C + 3 * C * C + 3 * C + C * C + C + 2 * C * I + I + C + qd * C +
                             2 * kvd * C + qd + 2 * kvd + C * qd + 3 * I * C;
    memset(s, 0, sizeof(*s));
    s->count = V * C * 2 + c->max_positions * C + 2 * C + L * per_layer;
    s->data = xcalloc(s->count, sizeof(float));
    s->layers = xcalloc(L, sizeof(ref_model_layer));
    memset(w, 0, sizeof(*w));
    const double sc = 1.0 / sqrt((double)C), si = 1.0 / sqrt((double)I);
    const double sq = 1.0 / sqrt((double)qd);
    w->wte = fill(s, rng, V * C, 0.0, 1.0);
    if (c->family == REF_MODEL_GPT2)
        w->wpe = fill(s, rng, c->max_positions * C, 0.0, 0.5);
    for (size_t l = 0; l < L; l++) {
        ref_model_layer *y = &s->layers[l];
        if (c->family == REF_MODEL_GPT2) {
            y->ln_1_w = fill(s, rng, C, 1.0, 0.2);
            y->ln_1_b = fill(s, rng, C, 0.0, 0.1);
            y->c_attn_w = fill(s, rng, C * 3 * C, 0.0, sc);
            y->c_attn_b = fill(s, rng, 3 * C, 0.0, 0.1);
            y->attn_proj_w = fill(s, rng, C * C, 0.0, sc);
            y->attn_proj_b = fill(s, rng, C, 0.0, 0.1);
            y->ln_2_w = fill(s, rng, C, 1.0, 0.2);
            y->ln_2_b = fill(s, rng, C, 0.0, 0.1);
            y->c_fc_w = fill(s, rng, C * I, 0.0, sc);
            y->c_fc_b = fill(s, rng, I, 0.0, 0.1);
            y->mlp_proj_w = fill(s, rng, I * C, 0.0, si);
            y->mlp_proj_b = fill(s, rng, C, 0.0, 0.1);
        } else {
            y->input_norm_w = fill(s, rng, C, 1.0, 0.2);
            y->q_w = fill(s, rng, qd * C, 0.0, sc);
            y->k_w = fill(s, rng, kvd * C, 0.0, sc);
            y->v_w = fill(s, rng, kvd * C, 0.0, sc);
            if (c->qkv_bias) {
                y->q_b = fill(s, rng, qd, 0.0, 0.1);
                y->k_b = fill(s, rng, kvd, 0.0, 0.1);
                y->v_b = fill(s, rng, kvd, 0.0, 0.1);
            }
            y->o_w = fill(s, rng, C * qd, 0.0, sq);
            y->post_norm_w = fill(s, rng, C, 1.0, 0.2);
            y->gate_w = fill(s, rng, I * C, 0.0, sc);
            y->up_w = fill(s, rng, I * C, 0.0, sc);
            y->down_w = fill(s, rng, C * I, 0.0, si);
        }
    }
    w->layer = s->layers;
    w->final_w = fill(s, rng, C, 1.0, 0.2);
    if (c->family == REF_MODEL_GPT2)
        w->final_b = fill(s, rng, C, 0.0, 0.1);
    w->lm_head = NULL;
}

void ref_model_storage_free(ref_model_storage *s)
{
    free(s->data);
    free(s->layers);
    memset(s, 0, sizeof(*s));
}
