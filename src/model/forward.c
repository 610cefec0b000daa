/* Whole-model forward, causal-LM loss and backward to the prefixes and
 * gains. One block forward serves both families (the weight table of
 * weights.c decides what each product reads). The backward reads each
 * block's kept activations, or, with params.recompute, runs the block's
 * forward again from its kept input first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_internal.h"

pfx_status pfx_model_profile_enable(pfx_model *model, bool on)
{
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_model_profile_enable: model is NULL");
    if (on)
        memset(model->prof.ms, 0, sizeof(model->prof.ms));
    model->prof.on = on;
    return PFX_SUCCESS;
}

pfx_status pfx_model_profile_read(const pfx_model *model, double *ms, size_t count)
{
    if (!model || !ms)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_model_profile_read: %s is NULL", !model ? "model" : "ms");
    if (count < PFX_MODEL_PART_COUNT)
        return pfx_error(model->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_model_profile_read: count %zu is below PFX_MODEL_PART_COUNT (%d)",
                         count, (int)PFX_MODEL_PART_COUNT);
    memcpy(ms, model->prof.ms, sizeof(model->prof.ms));
    return PFX_SUCCESS;
}

static double prof_begin(pfx_model *m)
{
    if (!m->prof.on)
        return 0.0;
    pfx_runtime_finish(m->rt);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static pfx_status prof_end(pfx_model *m, pfx_model_part cat, double t0, pfx_status st)
{
    if (m->prof.on) {
        pfx_runtime_finish(m->rt);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        m->prof.ms[cat] += ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6 - t0;
    }
    return st;
}

/* The tensor `slot` that block l reads and writes: its own when the model
 * keeps every block's activations, else the shared workspace's. */
static pfx_tensor *wsl(const pfx_model *m, size_t l, int slot)
{
    int k = pfx_model_kept_slot(m, slot);
    return k < 0 ? m->ws[slot] : m->kept[l * PFX_KEPT_COUNT + (size_t)k];
}

/* What one call computes with, after validation. */
typedef struct call {
    size_t B, N, R, P;
    const int32_t *lens;            /* NULL: every item has N tokens */
    pfx_model_prefix pre;           /* a zeroed one for NULL */
    size_t counted;                 /* labels the loss counts */
} call;

/* One dense product of a block: y[R, out] = x[R, in] op(W) (+ b). */
typedef struct lin {
    pfx_mat w;
    bool trans;                     /* W stored [out, in] (Linear) rather than [in, out] (Conv1D) */
    size_t in, out;
    bool has_b;
    pfx_mat b;
    bool head;                      /* the LM head (profiled apart) */
} lin;

enum { L_QKV, L_O, L_UP, L_GATE, L_DOWN };

static lin get_lin(const pfx_model *m, size_t l, int which)
{
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t C = s->hidden, I = s->intermediate;
    const size_t QD = s->heads * s->head_dim, KVD = s->kv_heads * s->head_dim;
    lin r;
    memset(&r, 0, sizeof(r));
    if (m->cfg.family == PFX_FAMILY_GPT2) {
        /* Conv1D [in, out]; c_attn holds q | k | v side by side */
        const pfx_tensor *qkv = pfx_model_w(m, l, PFX_W_QKV), *qkv_b = pfx_model_w(m, l, PFX_W_QKV_B);
        const size_t width = QD + 2 * KVD;
        switch (which) {
        case L_QKV:
            r.w = PFX_MAT(qkv, C, width);
            r.b = PFX_VEC(qkv_b, 0, width);
            r.in = C;
            r.out = width;
            break;
        case L_O:
            r.w = PFX_MAT(pfx_model_w(m, l, PFX_W_O), QD, C);
            r.b = PFX_VEC(pfx_model_w(m, l, PFX_W_O_B), 0, C);
            r.in = QD;
            r.out = C;
            break;
        case L_UP:
            r.w = PFX_MAT(pfx_model_w(m, l, PFX_W_UP), C, I);
            r.b = PFX_VEC(pfx_model_w(m, l, PFX_W_UP_B), 0, I);
            r.in = C;
            r.out = I;
            break;
        default: /* L_DOWN */
            r.w = PFX_MAT(pfx_model_w(m, l, PFX_W_DOWN), I, C);
            r.b = PFX_VEC(pfx_model_w(m, l, PFX_W_DOWN_B), 0, C);
            r.in = I;
            r.out = C;
            break;
        }
        r.has_b = true;
        return r;
    }
    /* Linear [out, in]; q, k, v stacked at load: [QD + 2 KVD, C] */
    static const pfx_weight_role roles[] = { PFX_W_QKV, PFX_W_O, PFX_W_UP, PFX_W_GATE, PFX_W_DOWN };
    static const pfx_weight_role biases[] = { PFX_W_QKV_B, PFX_W_O_B, PFX_W_ROLE_COUNT, PFX_W_ROLE_COUNT,
                                              PFX_W_ROLE_COUNT };
    const size_t outs[] = { QD + 2 * KVD, C, I, I, C }, ins[] = { C, QD, C, C, I };
    r.in = ins[which];
    r.out = outs[which];
    r.trans = true;
    r.w = PFX_MAT(pfx_model_w(m, l, roles[which]), r.out, r.in);
    const pfx_tensor *b = biases[which] < PFX_W_ROLE_COUNT ? pfx_model_w(m, l, biases[which]) : NULL;
    if (b) {
        r.has_b = true;
        r.b = PFX_VEC(b, 0, r.out);
    }
    return r;
}

static lin head_lin(const pfx_model *m)
{
    const pfx_model_shape *s = &m->cfg.shape;
    const pfx_tensor *w = s->tied_embeddings ? m->global[PFX_W_EMBED] : m->global[PFX_W_LM_HEAD];
    lin r;
    memset(&r, 0, sizeof(r));
    r.w = PFX_MAT(w, s->vocab, s->hidden);
    r.trans = true;
    r.in = s->hidden;
    r.out = s->vocab;
    r.head = true;
    return r;
}

/* y rows [y0, y0 + rows) = x rows [x0, ...) op(W) (+ b); beta 1 adds to y. */
static pfx_status lin_fwd(pfx_model *m, const char *what, const lin *f, size_t rows, const pfx_tensor *x,
                          size_t x0, const pfx_tensor *y, size_t y0, float beta, bool bias)
{
    double t0 = prof_begin(m);
    pfx_status st = pfx_gemm_weight(m->rt, what, rows, f->out, f->in, 1.0f,
                                    PFX_GEMM_OP(x->mem, x0 * f->in, f->in), f->w, f->trans, beta,
                                    PFX_GEMM_OP(y->mem, y0 * f->out, f->out), m->ws[WS_CONV]);
    st = prof_end(m, f->head ? PFX_MODEL_PART_HEAD : PFX_MODEL_PART_GEMM, t0, st);
    if (st == PFX_SUCCESS && bias && f->has_b)
        st = pfx_op_bias_add(m->rt, pfx_mat_of(y, y0 * f->out, rows, f->out, f->out), f->b);
    return st;
}

/* dx[rows, in] (+)= dy[rows, out] op(W)^T. */
static pfx_status lin_bwd(pfx_model *m, const char *what, const lin *f, size_t rows, const pfx_tensor *dy,
                          size_t dy0, const pfx_tensor *dx, size_t dx0, float beta)
{
    double t0 = prof_begin(m);
    pfx_status st = pfx_gemm_weight(m->rt, what, rows, f->in, f->out, 1.0f,
                                    PFX_GEMM_OP(dy->mem, dy0 * f->out, f->out), f->w, !f->trans, beta,
                                    PFX_GEMM_OP(dx->mem, dx0 * f->in, f->in), m->ws[WS_CONV]);
    return prof_end(m, f->head ? PFX_MODEL_PART_HEAD : PFX_MODEL_PART_GEMM, t0, st);
}

/* The gradient of parameter (layer l, role) that g asks for, or NULL. */
static pfx_tensor *pgrad(const pfx_model *m, const pfx_model_grads *g, size_t l, pfx_weight_role role)
{
    if (!g || !g->weights)
        return NULL;
    const size_t i = pfx_model_weight_index(m, l, role);
    return i == SIZE_MAX ? NULL : g->weights[i];
}

/* The weight and bias gradients of product f (either may be NULL) over
 * rows of its input x and output gradient dy: Conv1D [in, out]: dW = x^T dy;
 * Linear [out, in]: dW = dy^T x; db = the column sums of dy. */
static pfx_status lin_grads(pfx_model *m, const char *what, const lin *f, size_t rows, const pfx_tensor *x,
                            size_t x0, const pfx_tensor *dy, size_t dy0, pfx_tensor *dw, pfx_tensor *db,
                            bool accumulate)
{
    pfx_status st = PFX_SUCCESS;
    if (dw) {
        const pfx_gemm_operand xo = PFX_GEMM_OP(x->mem, x0 * f->in, f->in);
        const pfx_gemm_operand yo = PFX_GEMM_OP(dy->mem, dy0 * f->out, f->out);
        const float beta = accumulate ? 1.0f : 0.0f;
        double t0 = prof_begin(m);
        st = f->trans ? pfx_gemm(m->rt, what, true, false, f->out, f->in, rows, 1.0f, yo, xo, beta,
                                 PFX_GEMM_OP(dw->mem, 0, f->in))
                      : pfx_gemm(m->rt, what, true, false, f->in, f->out, rows, 1.0f, xo, yo, beta,
                                 PFX_GEMM_OP(dw->mem, 0, f->out));
        st = prof_end(m, f->head ? PFX_MODEL_PART_HEAD : PFX_MODEL_PART_GEMM, t0, st);
    }
    if (st == PFX_SUCCESS && db)
        st = pfx_op_bias_grad(m->rt, pfx_mat_of(dy, dy0 * f->out, rows, f->out, f->out), PFX_VEC(db, 0, f->out),
                              accumulate);
    return st;
}

static pfx_status copy_rows(pfx_model *m, const char *what, const pfx_tensor *src, const pfx_tensor *dst,
                            size_t count)
{
    cl_int err = clEnqueueCopyBuffer(m->rt->queue, src->mem, dst->mem, 0, 0, count * sizeof(float), 0, NULL,
                                     NULL);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(m->rt, err, what);
}

/* A shaped view of a workspace tensor (same storage, not owned). */
static pfx_tensor shaped(const pfx_tensor *t, unsigned ndim, size_t a, size_t b, size_t c, size_t d)
{
    pfx_tensor v = *t;
    const size_t s[4] = { a, b, c, d };
    v.ndim = ndim;
    v.numel = 1;
    for (unsigned i = 0; i < PFX_MAX_DIMS; i++) {
        v.shape[i] = i < ndim ? s[i] : 0;
        v.numel *= i < ndim ? s[i] : 1;
    }
    v.bytes = v.numel * pfx_dtype_size(v.dtype);
    return v;
}

pfx_tensor pfx_model_view(const pfx_tensor *t, unsigned ndim, size_t a, size_t b, size_t c, size_t d)
{
    return shaped(t, ndim, a, b, c, d);
}

static pfx_status norm_fwd(pfx_model *m, size_t l, pfx_weight_role w, pfx_weight_role b, size_t rows,
                           const pfx_tensor *x, int mean, int rstd)
{
    const size_t C = m->cfg.shape.hidden;
    pfx_mat wv = PFX_VEC(pfx_model_w(m, l, w), 0, C);
    pfx_mat xm = PFX_MAT(x, rows, C), y = PFX_MAT(m->ws[WS_LN], rows, C);
    pfx_mat rs = PFX_VEC(wsl(m, l, rstd), 0, rows);
    if (m->cfg.family == PFX_FAMILY_LLAMA)
        return pfx_op_rmsnorm_forward(m->rt, xm, wv, (float)m->cfg.norm_eps, y, &rs);
    pfx_mat bv = PFX_VEC(pfx_model_w(m, l, b), 0, C), mu = PFX_VEC(wsl(m, l, mean), 0, rows);
    return pfx_op_layernorm_forward(m->rt, xm, wv, &bv, (float)m->cfg.norm_eps, y, &mu, &rs);
}

/* dx (+)= norm backward of dy, x the norm's input. */
static pfx_status norm_bwd(pfx_model *m, size_t l, pfx_weight_role w, size_t rows, const pfx_tensor *x,
                           int mean, int rstd, const pfx_tensor *dy, const pfx_tensor *dx, bool accumulate)
{
    const size_t C = m->cfg.shape.hidden;
    pfx_mat wv = PFX_VEC(pfx_model_w(m, l, w), 0, C);
    pfx_mat xm = PFX_MAT(x, rows, C), dym = PFX_MAT(dy, rows, C), dxm = PFX_MAT(dx, rows, C);
    pfx_mat rs = PFX_VEC(wsl(m, l, rstd), 0, rows);
    if (m->cfg.family == PFX_FAMILY_LLAMA)
        return pfx_op_rmsnorm_backward(m->rt, xm, wv, rs, dym, dxm, accumulate);
    return pfx_op_layernorm_backward(m->rt, xm, wv, PFX_VEC(wsl(m, l, mean), 0, rows), rs, dym, dxm, accumulate);
}

/* The gradients of norm `w` (and its bias `b`) of block l, either may be
 * NULL: dy the gradient of the norm's output, x its input. */
static pfx_status norm_grads(pfx_model *m, size_t l, size_t rows, const pfx_tensor *x, int mean, int rstd,
                             const pfx_tensor *dy, pfx_tensor *dw, pfx_tensor *db, bool accumulate)
{
    if (!dw && !db)
        return PFX_SUCCESS;
    const size_t C = m->cfg.shape.hidden;
    pfx_mat mu = PFX_VEC(wsl(m, l, mean), 0, rows), bv = db ? PFX_VEC(db, 0, C) : PFX_VEC(dy, 0, C);
    pfx_status st = PFX_SUCCESS;
    if (dw)
        st = pfx_op_norm_param_grad(m->rt, PFX_MAT(x, rows, C), m->cfg.family == PFX_FAMILY_LLAMA ? NULL : &mu,
                                    PFX_VEC(wsl(m, l, rstd), 0, rows), PFX_MAT(dy, rows, C), PFX_VEC(dw, 0, C),
                                    db ? &bv : NULL, accumulate);
    else /* a LayerNorm bias alone: the column sums of dy */
        st = pfx_op_bias_grad(m->rt, PFX_MAT(dy, rows, C), bv, accumulate);
    return st;
}

static pfx_attention_desc attn_desc(const pfx_model *m, size_t l, const call *c)
{
    const pfx_model_shape *s = &m->cfg.shape;
    pfx_attention_desc d;
    pfx_attention_desc_init(&d);
    d.batch = c->B;
    d.heads = s->heads;
    d.kv_heads = s->kv_heads;
    d.queries = d.keys = c->N;
    d.prefix_len = c->P;
    d.head_dim = s->head_dim;
    d.q_layout = d.kv_layout = d.o_layout = PFX_LAYOUT_BNHD;
    d.causal = true;
    d.scale = m->cfg.attn_scale;
    d.gain_mode = c->pre.gain_mode;
    d.gain = c->pre.gain_mode != PFX_GAIN_OFF ? c->pre.gains + l * s->heads : NULL;
    d.gain_ramp = c->pre.gain_mode != PFX_GAIN_OFF ? c->pre.gain_ramp : 1.0f;
    if (c->pre.dim_gains) {
        /* the attention's factor is 1 + G: handed r G (the gradient then takes r, block_backward) */
        const size_t HD = s->heads * s->head_dim;
        for (size_t i = 0; i < HD; i++)
            m->dim_scaled[i] = c->pre.gain_ramp * c->pre.dim_gains[l * HD + i];
        d.dim_gain = m->dim_scaled;
    }
    d.q_lens = d.kv_lens = c->lens;
    if (c->P && c->pre.keys[l]->ndim == 4)
        d.bank_index = c->pre.bank_index;
    return d;
}

typedef struct attn_views {
    pfx_tensor q, k, v, o, lse, dq, dk, dv, d_o;
} attn_views;

static attn_views views(const pfx_model *m, size_t l, const call *c)
{
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t B = c->B, N = c->N, H = s->heads, Hkv = s->kv_heads, D = s->head_dim;
    attn_views v = {
        shaped(wsl(m, l, WS_Q), 4, B, N, H, D),    shaped(wsl(m, l, WS_K), 4, B, N, Hkv, D),
        shaped(wsl(m, l, WS_V), 4, B, N, Hkv, D),  shaped(wsl(m, l, WS_O), 4, B, N, H, D),
        shaped(wsl(m, l, WS_LSE), 3, B, H, N, 0),  shaped(m->ws[WS_DQ], 4, B, N, H, D),
        shaped(m->ws[WS_DK], 4, B, N, Hkv, D), shaped(m->ws[WS_DV], 4, B, N, Hkv, D),
        shaped(m->ws[WS_DO], 4, B, N, H, D),
    };
    return v;
}

pfx_tensor *pfx_model_ws(const pfx_model *m, size_t l, int slot)
{
    return wsl(m, l, slot);
}

/* The R rows of block l's slots q, k, v ([R, QD], [R, KVD], [R, KVD]):
 * the three column blocks of WS_QKV (Q, K, V; dQ, dK, dV). */
static void qkv_parts(const pfx_model *m, size_t l, size_t R, int q, int k, int v, pfx_mat part[3])
{
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t QD = s->heads * s->head_dim, KVD = s->kv_heads * s->head_dim;
    part[0] = PFX_MAT(wsl(m, l, q), R, QD);
    part[1] = PFX_MAT(wsl(m, l, k), R, KVD);
    part[2] = PFX_MAT(wsl(m, l, v), R, KVD);
}

pfx_status pfx_model_block_qkv(pfx_model *m, size_t l, size_t R)
{
    const lin qkv = get_lin(m, l, L_QKV);
    pfx_mat part[3];
    qkv_parts(m, l, R, WS_Q, WS_K, WS_V, part);
    pfx_status st;
    if ((st = norm_fwd(m, l, PFX_W_NORM1, PFX_W_NORM1_B, R, m->hidden[l], WS_MEAN1, WS_RSTD1)) ||
        (st = lin_fwd(m, "model: q, k, v", &qkv, R, m->ws[WS_LN], 0, m->ws[WS_QKV], 0, 0.0f, false)))
        return st;
    return pfx_op_split_columns(m->rt, PFX_MAT(m->ws[WS_QKV], R, qkv.out), qkv.has_b ? &qkv.b : NULL, 3, part);
}

pfx_status pfx_model_block_mlp(pfx_model *m, size_t l, size_t R, bool output)
{
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    const bool llama = m->cfg.family == PFX_FAMILY_LLAMA;
    const size_t C = s->hidden, I = s->intermediate;
    const lin o = get_lin(m, l, L_O);
    pfx_status st;
    if ((st = copy_rows(m, "model: residual", m->hidden[l], wsl(m, l, WS_A), R * C)) ||
        (st = lin_fwd(m, "model: attention output", &o, R, wsl(m, l, WS_O), 0, wsl(m, l, WS_A), 0, 1.0f, true)) ||
        (st = norm_fwd(m, l, PFX_W_NORM2, PFX_W_NORM2_B, R, wsl(m, l, WS_A), WS_MEAN2, WS_RSTD2)))
        return st;
    const lin up = get_lin(m, l, L_UP), down = get_lin(m, l, L_DOWN);
    int mlp_out;
    if (llama) {
        const lin gate = get_lin(m, l, L_GATE);
        if ((st = lin_fwd(m, "model: gate", &gate, R, m->ws[WS_LN], 0, wsl(m, l, WS_M0), 0, 0.0f, true)) ||
            (st = lin_fwd(m, "model: up", &up, R, m->ws[WS_LN], 0, wsl(m, l, WS_M1), 0, 0.0f, true)) ||
            (st = pfx_op_swiglu_forward(rt, PFX_MAT(wsl(m, l, WS_M0), R, I), PFX_MAT(wsl(m, l, WS_M1), R, I),
                                        PFX_MAT(m->ws[WS_M2], R, I))))
            return st;
        mlp_out = WS_M2;
    } else {
        if ((st = lin_fwd(m, "model: c_fc", &up, R, m->ws[WS_LN], 0, wsl(m, l, WS_M0), 0, 0.0f, true)) ||
            (st = pfx_op_activation_forward(rt, m->cfg.act, PFX_MAT(wsl(m, l, WS_M0), R, I),
                                            PFX_MAT(wsl(m, l, WS_M1), R, I))))
            return st;
        mlp_out = WS_M1;
    }
    if (!output)
        return PFX_SUCCESS;
    if ((st = copy_rows(m, "model: residual", wsl(m, l, WS_A), m->hidden[l + 1], R * C)))
        return st;
    return lin_fwd(m, "model: mlp output", &down, R, m->ws[mlp_out], 0, m->hidden[l + 1], 0, 1.0f, true);
}

/* Block l from hidden[l]: every intermediate the backward reads goes to the
 * workspace; with `output` the block's result goes to hidden[l + 1]. */
static pfx_status block_forward(pfx_model *m, size_t l, const call *c, bool output)
{
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t R = c->R;
    pfx_status st = pfx_model_block_qkv(m, l, R);
    if (st != PFX_SUCCESS)
        return st;
    if (m->cfg.family == PFX_FAMILY_LLAMA) {
        pfx_mat freq = PFX_VEC(m->inv_freq, 0, s->head_dim / 2);
        if ((st = pfx_op_rope_forward(rt, PFX_MAT(wsl(m, l, WS_Q), R, s->heads * s->head_dim), c->B, c->N,
                                      s->heads, s->head_dim, c->P, freq)) ||
            (st = pfx_op_rope_forward(rt, PFX_MAT(wsl(m, l, WS_K), R, s->kv_heads * s->head_dim), c->B, c->N,
                                      s->kv_heads, s->head_dim, c->P, freq)))
            return st;
    }
    attn_views av = views(m, l, c);
    pfx_attention_desc d = attn_desc(m, l, c);
    pfx_attention_inputs in = { &av.q, &av.k, &av.v, c->P ? c->pre.keys[l] : NULL,
                                c->P ? c->pre.values[l] : NULL };
    double t0 = prof_begin(m);
    st = prof_end(m, PFX_MODEL_PART_ATTN_FWD, t0,
                  pfx_attention_forward(rt, &d, &in, &av.o, &av.lse));
    if (st != PFX_SUCCESS)
        return st;
    return pfx_model_block_mlp(m, l, R, output);
}

/* From dy (gradient of hidden[l + 1]) to dx (of hidden[l], when not NULL),
 * the prefix, gain and weight gradients of layer l; block_forward(l) ran
 * just before (or every activation of block l is kept). A weight gradient
 * is computed from the product's input and output gradient before either
 * is overwritten; inputs that are not kept (the norm outputs, the MLP's
 * activation) are recomputed from what is. */
static pfx_status block_backward(pfx_model *m, size_t l, const call *c, const pfx_tensor *dy,
                                 const pfx_tensor *dx, const pfx_model_grads *g)
{
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    const bool llama = m->cfg.family == PFX_FAMILY_LLAMA;
    const bool acc = g && g->accumulate;
    const size_t R = c->R, C = s->hidden, I = s->intermediate;
    pfx_tensor *const *ws = m->ws;
    const lin up = get_lin(m, l, L_UP), down = get_lin(m, l, L_DOWN), o = get_lin(m, l, L_O);
    pfx_tensor *g_up = pgrad(m, g, l, PFX_W_UP), *g_up_b = pgrad(m, g, l, PFX_W_UP_B);
    pfx_tensor *g_gate = pgrad(m, g, l, PFX_W_GATE);
    pfx_tensor *g_down = pgrad(m, g, l, PFX_W_DOWN), *g_down_b = pgrad(m, g, l, PFX_W_DOWN_B);
    pfx_tensor *g_n2 = pgrad(m, g, l, PFX_W_NORM2), *g_n2_b = pgrad(m, g, l, PFX_W_NORM2_B);
    pfx_tensor *g_n1 = pgrad(m, g, l, PFX_W_NORM1), *g_n1_b = pgrad(m, g, l, PFX_W_NORM1_B);
    pfx_tensor *g_o = pgrad(m, g, l, PFX_W_O), *g_o_b = pgrad(m, g, l, PFX_W_O_B);
    pfx_tensor *g_qkv = pgrad(m, g, l, PFX_W_QKV), *g_qkv_b = pgrad(m, g, l, PFX_W_QKV_B);
    pfx_status st;
    /* MLP: the output product's input (the activation) again, into DM */
    if (g_down) {
        st = llama ? pfx_op_swiglu_forward(rt, PFX_MAT(wsl(m, l, WS_M0), R, I), PFX_MAT(wsl(m, l, WS_M1), R, I),
                                           PFX_MAT(ws[WS_DM], R, I))
                   : pfx_op_activation_forward(rt, m->cfg.act, PFX_MAT(wsl(m, l, WS_M0), R, I),
                                               PFX_MAT(ws[WS_DM], R, I));
        if (st != PFX_SUCCESS)
            return st;
    }
    if ((st = lin_grads(m, "model: dW mlp output", &down, R, ws[WS_DM], 0, dy, 0, g_down, g_down_b, acc)) ||
        (st = lin_bwd(m, "model: d mlp output", &down, R, dy, 0, ws[WS_DM], 0, 0.0f)))
        return st;
    /* the input products' input: norm 2's output, again, into LN */
    const bool want_in = g_up || g_up_b || g_gate;
    if (want_in && (st = norm_fwd(m, l, PFX_W_NORM2, PFX_W_NORM2_B, R, wsl(m, l, WS_A), WS_MEAN2, WS_RSTD2)))
        return st;
    if (llama) {
        const lin gate = get_lin(m, l, L_GATE);
        if ((st = pfx_op_swiglu_backward(rt, PFX_MAT(wsl(m, l, WS_M0), R, I), PFX_MAT(wsl(m, l, WS_M1), R, I),
                                         PFX_MAT(ws[WS_DM], R, I), PFX_MAT(wsl(m, l, WS_M0), R, I),
                                         PFX_MAT(wsl(m, l, WS_M1), R, I))) ||
            (st = lin_grads(m, "model: dW gate", &gate, R, ws[WS_LN], 0, wsl(m, l, WS_M0), 0, g_gate, NULL, acc)) ||
            (st = lin_grads(m, "model: dW up", &up, R, ws[WS_LN], 0, wsl(m, l, WS_M1), 0, g_up, NULL, acc)) ||
            (st = lin_bwd(m, "model: d gate", &gate, R, wsl(m, l, WS_M0), 0, ws[WS_DLN], 0, 0.0f)) ||
            (st = lin_bwd(m, "model: d up", &up, R, wsl(m, l, WS_M1), 0, ws[WS_DLN], 0, 1.0f)))
            return st;
    } else if ((st = pfx_op_activation_backward(rt, m->cfg.act, PFX_MAT(wsl(m, l, WS_M0), R, I),
                                                PFX_MAT(ws[WS_DM], R, I), PFX_MAT(ws[WS_DM], R, I))) ||
               (st = lin_grads(m, "model: dW c_fc", &up, R, ws[WS_LN], 0, ws[WS_DM], 0, g_up, g_up_b, acc)) ||
               (st = lin_bwd(m, "model: d c_fc", &up, R, ws[WS_DM], 0, ws[WS_DLN], 0, 0.0f))) {
        return st;
    }
    if ((st = norm_grads(m, l, R, wsl(m, l, WS_A), WS_MEAN2, WS_RSTD2, ws[WS_DLN], g_n2, g_n2_b, acc)) ||
        (st = copy_rows(m, "model: d residual", dy, ws[WS_DA], R * C)) ||
        (st = norm_bwd(m, l, PFX_W_NORM2, R, wsl(m, l, WS_A), WS_MEAN2, WS_RSTD2, ws[WS_DLN], ws[WS_DA], true)) ||
        (st = lin_grads(m, "model: dW attention output", &o, R, wsl(m, l, WS_O), 0, ws[WS_DA], 0, g_o, g_o_b, acc)) ||
        (st = lin_bwd(m, "model: d attention output", &o, R, ws[WS_DA], 0, ws[WS_DO], 0, 0.0f)))
        return st;

    /* attention: input gradients and this layer's prefix and gain gradients */
    const bool want_norm1 = g_n1 || g_n1_b;
    const bool want_qkv = dx || want_norm1 || g_qkv || g_qkv_b;
    attn_views av = views(m, l, c);
    pfx_attention_desc d = attn_desc(m, l, c);
    pfx_attention_inputs in = { &av.q, &av.k, &av.v, c->P ? c->pre.keys[l] : NULL,
                                c->P ? c->pre.values[l] : NULL };
    pfx_tensor *dgain = g && g->gains ? g->gains[l] : NULL, *ddim = g && g->dim_gains ? g->dim_gains[l] : NULL;
    const bool want_gain = dgain && c->pre.gain_mode != PFX_GAIN_OFF, want_dim = ddim && c->pre.dim_gains;
    if (want_dim && !m->dim_grad) {
        const size_t shape[2] = { s->heads, s->head_dim };
        if ((st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &m->dim_grad)))
            return st;
    }
    pfx_attention_grads ag = {
        .dq = want_qkv ? &av.dq : NULL, .dk = want_qkv ? &av.dk : NULL, .dv = want_qkv ? &av.dv : NULL,
        .dprefix_k = c->P && g && g->keys ? g->keys[l] : NULL,
        .dprefix_v = c->P && g && g->values ? g->values[l] : NULL,
        .dgain = want_gain ? dgain : NULL,
        .ddim_gain = want_dim ? m->dim_grad : NULL, /* d/d(r G), scaled by r below */
    };
    if (acc && (ag.dprefix_k || ag.dprefix_v || ag.dgain)) {
        /* one call accumulates everything: clear dQ, dK, dV (and the d(r G) scratch) first */
        ag.accumulate = true;
        if (want_qkv && ((st = pfx_tensor_fill(ws[WS_DQ], 0.0f)) || (st = pfx_tensor_fill(ws[WS_DK], 0.0f)) ||
                         (st = pfx_tensor_fill(ws[WS_DV], 0.0f))))
            return st;
        if (want_dim && (st = pfx_tensor_fill(m->dim_grad, 0.0f)))
            return st;
    }
    if (ag.dq || ag.dprefix_k || ag.dprefix_v || ag.dgain || ag.ddim_gain) {
        double t0 = prof_begin(m);
        st = prof_end(m, PFX_MODEL_PART_ATTN_BWD, t0,
                      pfx_attention_backward(rt, &d, &in, &av.o, &av.lse, &av.d_o, &ag));
        if (st != PFX_SUCCESS)
            return st;
    }
    if (dgain && !want_gain && !acc && (st = pfx_tensor_fill(dgain, 0.0f)))
        return st;
    /* dL/dG = r dL/d(r G) */
    if (want_dim && (st = pfx_axpby(ddim, c->pre.gain_ramp, m->dim_grad, acc ? 1.0f : 0.0f)))
        return st;
    if (ddim && !want_dim && !acc && (st = pfx_tensor_fill(ddim, 0.0f)))
        return st;
    if (!want_qkv)
        return PFX_SUCCESS;
    pfx_mat dparts[3];
    qkv_parts(m, l, R, WS_DQ, WS_DK, WS_DV, dparts);
    if (llama) {
        pfx_mat freq = PFX_VEC(m->inv_freq, 0, s->head_dim / 2);
        if ((st = pfx_op_rope_backward(rt, dparts[0], c->B, c->N, s->heads, s->head_dim, c->P, freq)) ||
            (st = pfx_op_rope_backward(rt, dparts[1], c->B, c->N, s->kv_heads, s->head_dim, c->P, freq)))
            return st;
    }
    /* dQ | dK | dV side by side, then one product back through the fused projection */
    const lin qkv = get_lin(m, l, L_QKV);
    if ((st = pfx_op_join_columns(rt, 3, dparts, PFX_MAT(ws[WS_QKV], R, qkv.out))))
        return st;
    if (g_qkv && (st = norm_fwd(m, l, PFX_W_NORM1, PFX_W_NORM1_B, R, m->hidden[l], WS_MEAN1, WS_RSTD1)))
        return st;
    if ((st = lin_grads(m, "model: dW q, k, v", &qkv, R, ws[WS_LN], 0, ws[WS_QKV], 0, g_qkv, g_qkv_b, acc)))
        return st;
    if (!dx && !want_norm1)
        return PFX_SUCCESS;
    if ((st = lin_bwd(m, "model: d q, k, v", &qkv, R, ws[WS_QKV], 0, ws[WS_DLN], 0, 0.0f)) ||
        (st = norm_grads(m, l, R, m->hidden[l], WS_MEAN1, WS_RSTD1, ws[WS_DLN], g_n1, g_n1_b, acc)))
        return st;
    if (!dx)
        return PFX_SUCCESS;
    if ((st = copy_rows(m, "model: d residual", ws[WS_DA], dx, R * C)))
        return st;
    return norm_bwd(m, l, PFX_W_NORM1, R, m->hidden[l], WS_MEAN1, WS_RSTD1, ws[WS_DLN], dx, true);
}

/* ---- validation ---- */

static pfx_status check_tensor(pfx_runtime *rt, const char *fn, const char *what, size_t l, const pfx_tensor *t,
                               bool f32_only)
{
    if (!t)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s[%zu] is NULL", fn, what, l);
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: %s[%zu] belongs to another runtime", fn, what, l);
    if (t->dtype != PFX_DTYPE_F32 && (f32_only || t->dtype != PFX_DTYPE_F16))
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s[%zu] must be float32%s", fn, what, l,
                         f32_only ? "" : " or half");
    return PFX_SUCCESS;
}

static pfx_status check_prefix(const pfx_model *m, const char *fn, const pfx_model_prefix *pre, size_t B)
{
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    if (pre->gain_mode != PFX_GAIN_OFF && pre->gain_mode != PFX_GAIN_LINEAR && pre->gain_mode != PFX_GAIN_TANH)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: prefix.gain_mode %d is unknown", fn,
                         (int)pre->gain_mode);
    if (pre->gain_mode != PFX_GAIN_OFF && !pre->gains)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: prefix.gains is NULL with a gain mode", fn);
    for (size_t i = 0; pre->gain_mode != PFX_GAIN_OFF && i < s->layers * s->heads; i++)
        if (!isfinite(pre->gains[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: prefix.gains[%zu] is %g", fn, i, (double)pre->gains[i]);
    for (size_t i = 0; pre->dim_gains && i < s->layers * s->heads * s->head_dim; i++)
        if (!isfinite(pre->dim_gains[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: prefix.dim_gains[%zu] is %g", fn, i,
                             (double)pre->dim_gains[i]);
    if (pre->gain_mode != PFX_GAIN_OFF || pre->dim_gains) {
        if (!isfinite(pre->gain_ramp) || pre->gain_ramp < 0.0f || pre->gain_ramp > 1.0f)
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: prefix.gain_ramp (%g) must be in [0, 1]", fn,
                             (double)pre->gain_ramp);
    }
    const size_t P = pre->prefix_len;
    if (P == 0) {
        if (pre->keys || pre->values)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: prefix.%s given with prefix_len 0", fn,
                             pre->keys ? "keys" : "values");
        return PFX_SUCCESS;
    }
    if (P > m->p.max_prefix_len)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: prefix.prefix_len %zu exceeds params.max_prefix_len %zu",
                         fn, P, m->p.max_prefix_len);
    if (!pre->keys || !pre->values)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: prefix.%s is NULL (prefix_len %zu)", fn,
                         !pre->keys ? "keys" : "values", P);
    unsigned ndim = 0;
    size_t T = 0;
    for (size_t l = 0; l < s->layers; l++) {
        const pfx_tensor *kv[2] = { pre->keys[l], pre->values[l] };
        for (int i = 0; i < 2; i++) {
            const char *what = i ? "prefix.values" : "prefix.keys";
            pfx_status st = check_tensor(rt, fn, what, l, kv[i], false);
            if (st != PFX_SUCCESS)
                return st;
            const pfx_tensor *t = kv[i];
            unsigned o = t->ndim == 4;
            if (!ndim) {
                ndim = t->ndim;
                T = o ? t->shape[0] : 1;
            }
            if ((t->ndim != 3 && t->ndim != 4) || t->ndim != ndim || (o && t->shape[0] != T) ||
                t->shape[o] != s->kv_heads || t->shape[o + 1] != P || t->shape[o + 2] != s->head_dim)
                return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                                 "%s: %s[%zu] must be [Hkv=%zu, P=%zu, D=%zu] (or a bank [T, Hkv, P, D] like "
                                 "every other layer's)",
                                 fn, what, l, s->kv_heads, P, s->head_dim);
        }
    }
    if (ndim == 4) {
        if (!pre->bank_index)
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: prefix.bank_index is NULL with a bank", fn);
        for (size_t b = 0; b < B; b++)
            if (pre->bank_index[b] < 0 || (size_t)pre->bank_index[b] >= T)
                return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: prefix.bank_index[%zu] = %d outside [0, %zu)",
                                 fn, b, (int)pre->bank_index[b], T);
    }
    return PFX_SUCCESS;
}

static pfx_status check_call(pfx_model *m, const char *fn, const pfx_model_batch *batch,
                             const pfx_model_prefix *prefix, call *c)
{
    if (!m)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: model is NULL", fn);
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    if (!batch)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: batch is NULL", fn);
    memset(c, 0, sizeof(*c));
    const size_t B = batch->batch, N = batch->tokens;
    if (B == 0 || B > m->p.max_batch)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: batch.batch %zu outside 1..max_batch %zu", fn, B,
                         m->p.max_batch);
    if (N == 0 || N > m->p.max_tokens)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: batch.tokens %zu outside 1..max_tokens %zu", fn, N,
                         m->p.max_tokens);
    if (!batch->ids)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: batch.ids is NULL", fn);
    for (size_t i = 0; i < B * N; i++)
        if (batch->ids[i] < 0 || (size_t)batch->ids[i] >= s->vocab)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: batch.ids[%zu] = %d outside the vocabulary [0, %zu)",
                             fn, i, (int)batch->ids[i], s->vocab);
    for (size_t b = 0; batch->lens && b < B; b++)
        if (batch->lens[b] < 1 || (size_t)batch->lens[b] > N)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: batch.lens[%zu] = %d outside 1..%zu", fn, b,
                             (int)batch->lens[b], N);
    for (size_t i = 0; batch->labels && i < B * N; i++)
        if (batch->labels[i] != PFX_LABEL_IGNORE && (batch->labels[i] < 0 || (size_t)batch->labels[i] >= s->vocab))
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: batch.labels[%zu] = %d is neither -100 nor in [0, %zu)",
                             fn, i, (int)batch->labels[i], s->vocab);
    if (prefix)
        c->pre = *prefix;
    pfx_status st = check_prefix(m, fn, &c->pre, B);
    if (st != PFX_SUCCESS)
        return st;
    c->B = B;
    c->N = N;
    c->R = B * N;
    c->P = c->pre.prefix_len;
    c->lens = batch->lens;
    return PFX_SUCCESS;
}

/* An output tensor `what` of the call: float32 on the model's runtime, `rows`
 * x `cols` elements (`cols_name` in the message), none of the prefixes. */
static pfx_status check_output(pfx_model *m, const char *fn, const char *what, const pfx_tensor *t, size_t rows,
                               size_t cols, const char *cols_name, const call *c)
{
    pfx_runtime *rt = m->rt;
    if (!t)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn, what);
    if (t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: %s belongs to another runtime", fn, what);
    if (t->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s must be float32", fn, what);
    if (t->numel != rows * cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s has %zu elements, %zu x %s=%zu expected", fn, what,
                         t->numel, rows, cols_name, cols);
    for (size_t l = 0; c->P && l < m->cfg.shape.layers; l++)
        if (t->mem == c->pre.keys[l]->mem || t->mem == c->pre.values[l]->mem)
            return pfx_error(rt, PFX_ERROR_ALIASING, "%s: %s is also prefix %zu", fn, what, l);
    return PFX_SUCCESS;
}

/* Shifted labels: row b*N + t is scored against label t + 1 of its item;
 * without labels, the ids with the padding (t >= lens[b]) not counted. */
static pfx_status write_labels(pfx_model *m, const char *fn, const pfx_model_batch *batch, call *c)
{
    int32_t *shifted = malloc(2 * c->R * sizeof(int32_t));
    if (!shifted)
        return pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    const int32_t *labels = batch->labels;
    if (!labels) {
        int32_t *plain = shifted + c->R;
        for (size_t b = 0; b < c->B; b++)
            for (size_t t = 0; t < c->N; t++)
                plain[b * c->N + t] = !c->lens || t < (size_t)c->lens[b] ? batch->ids[b * c->N + t] : PFX_LABEL_IGNORE;
        labels = plain;
    }
    c->counted = pfx_labels_shift(labels, c->B, c->N, shifted);
    pfx_status st = PFX_SUCCESS;
    if (c->counted == 0)
        st = pfx_error(m->rt, PFX_ERROR_INVALID_ARGUMENT, "%s: no label is counted (every one is -100 or padding)",
                       fn);
    else
        st = pfx_ids_write(m->labels, 0, c->R, shifted);
    free(shifted);
    return st;
}

/* The weight gradients of g: float32 storage, each entry float32 and shaped
 * like its parameter, none the same tensor as a parameter, a prefix, another
 * gradient or (checked by check_grads) a prefix or gain gradient. */
static pfx_status check_param_grads(pfx_model *m, const char *fn, const call *c, const pfx_model_grads *g)
{
    pfx_runtime *rt = m->rt;
    const size_t L = m->cfg.shape.layers, n = m->weight_count;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        const pfx_tensor *t = g->weights[i], *p = m->weights[i].t;
        if (!t)
            continue;
        any = true;
        pfx_status st = check_tensor(rt, fn, "grads.weights", i, t, true);
        if (st != PFX_SUCCESS)
            return st;
        if (t->ndim != p->ndim || memcmp(t->shape, p->shape, sizeof(t->shape)) != 0)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: grads.weights[%zu] must be shaped like parameter %s", fn,
                             i, m->weights[i].name);
        for (size_t j = 0; j < n; j++)
            if (t->mem == m->weights[j].t->mem || (j < i && g->weights[j] && g->weights[j]->mem == t->mem))
                return pfx_error(rt, PFX_ERROR_ALIASING, "%s: grads.weights[%zu] is also %s %zu (%s)", fn, i,
                                 j < i && g->weights[j] && g->weights[j]->mem == t->mem ? "grads.weights" : "parameter",
                                 j, m->weights[j].name);
        for (size_t l = 0; l < L; l++) {
            pfx_tensor *const others[6] = { c->P ? c->pre.keys[l] : NULL, c->P ? c->pre.values[l] : NULL,
                                            g->keys ? g->keys[l] : NULL, g->values ? g->values[l] : NULL,
                                            g->gains ? g->gains[l] : NULL, g->dim_gains ? g->dim_gains[l] : NULL };
            static const char *const names[6] = { "prefix.keys", "prefix.values", "grads.keys", "grads.values",
                                                  "grads.gains", "grads.dim_gains" };
            for (int k = 0; k < 6; k++)
                if (others[k] && others[k]->mem == t->mem)
                    return pfx_error(rt, PFX_ERROR_ALIASING, "%s: grads.weights[%zu] is also %s[%zu]", fn, i,
                                     names[k], l);
        }
    }
    if (any && m->p.storage != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: weight gradients need float32 weights (the model was loaded with half storage)", fn);
    return PFX_SUCCESS;
}

static pfx_status check_grads(pfx_model *m, const char *fn, const call *c, const pfx_model_grads *g)
{
    pfx_runtime *rt = m->rt;
    const size_t L = m->cfg.shape.layers;
    if (!g)
        return PFX_SUCCESS;
    if (g->weights) {
        pfx_status st = check_param_grads(m, fn, c, g);
        if (st != PFX_SUCCESS)
            return st;
    }
    const pfx_model_shape *s = &m->cfg.shape;
    pfx_tensor *const *const all[4] = { g->keys, g->values, g->gains, g->dim_gains };
    static const char *const names[4] = { "grads.keys", "grads.values", "grads.gains", "grads.dim_gains" };
    for (size_t l = 0; l < L; l++) {
        for (int i = 0; i < 4; i++) {
            const pfx_tensor *t = all[i] ? all[i][l] : NULL;
            if (!t)
                continue;
            pfx_status st = check_tensor(rt, fn, names[i], l, t, true);
            if (st != PFX_SUCCESS)
                return st;
            if (i < 2 && !c->P)
                return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: %s[%zu] given without a prefix", fn,
                                 names[i], l);
            const pfx_tensor *like = i == 0 ? c->pre.keys[l] : i == 1 ? c->pre.values[l] : NULL;
            bool same = like ? t->ndim == like->ndim && memcmp(t->shape, like->shape, sizeof(t->shape)) == 0
                      : i == 2 ? t->ndim == 1 && t->shape[0] == s->heads
                               : t->ndim == 2 && t->shape[0] == s->heads && t->shape[1] == s->head_dim;
            if (!same)
                return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s[%zu] must be shaped like %s", fn, names[i], l,
                                 i == 0 ? "prefix.keys[l]" : i == 1 ? "prefix.values[l]" : i == 2 ? "[H]" : "[H, D]");
            for (size_t j = 0; c->P && j < L; j++)
                if (t->mem == c->pre.keys[j]->mem || t->mem == c->pre.values[j]->mem)
                    return pfx_error(rt, PFX_ERROR_ALIASING, "%s: %s[%zu] is also a prefix", fn, names[i], l);
            /* distinct from every gradient before it */
            for (size_t j = 0; j <= l; j++)
                for (int k = 0; k < 4; k++) {
                    if ((j == l && k >= i) || !all[k] || !all[k][j])
                        continue;
                    if (all[k][j]->mem == t->mem)
                        return pfx_error(rt, PFX_ERROR_ALIASING, "%s: %s[%zu] and %s[%zu] are the same tensor", fn,
                                         names[k], j, names[i], l);
                }
        }
    }
    return PFX_SUCCESS;
}

/* ---- passes ---- */

/* Embeddings and blocks 0..upto-1: hidden[0..upto] hold the residual streams. */
static pfx_status run_blocks_upto(pfx_model *m, const pfx_model_batch *batch, const call *c, size_t upto)
{
    const pfx_model_shape *s = &m->cfg.shape;
    pfx_status st = pfx_ids_write(m->ids, 0, c->R, batch->ids);
    if (st != PFX_SUCCESS)
        return st;
    const pfx_tensor *wpe = m->global[PFX_W_POS];
    pfx_mat pos = wpe ? PFX_MAT(wpe, s->max_positions, s->hidden) : PFX_MAT(m->global[PFX_W_EMBED], 1, 1);
    st = pfx_op_embedding(m->rt, m->ids, c->B, c->N, PFX_MAT(m->global[PFX_W_EMBED], s->vocab, s->hidden),
                          wpe ? &pos : NULL, c->P, PFX_MAT(m->hidden[0], c->R, s->hidden));
    for (size_t l = 0; l < upto && st == PFX_SUCCESS; l++)
        st = block_forward(m, l, c, true);
    return st;
}

pfx_status pfx_model_final_norm(pfx_model *m, size_t R)
{
    return norm_fwd(m, 0, PFX_W_NORM_F, PFX_W_NORM_F_B, R, m->hidden[m->cfg.shape.layers], WS_MEANF, WS_RSTDF);
}

pfx_status pfx_model_head(pfx_model *m, const pfx_tensor *x, size_t rows, pfx_tensor *logits)
{
    lin head = head_lin(m);
    return lin_fwd(m, "model: lm_head", &head, rows, x, 0, logits, 0, 0.0f, false);
}

/* Embeddings and every block: hidden[0..L] hold the residual streams. */
static pfx_status run_blocks(pfx_model *m, const pfx_model_batch *batch, const call *c)
{
    return run_blocks_upto(m, batch, c, m->cfg.shape.layers);
}

static pfx_status final_norm(pfx_model *m, const call *c)
{
    return norm_fwd(m, 0, PFX_W_NORM_F, PFX_W_NORM_F_B, c->R, m->hidden[m->cfg.shape.layers], WS_MEANF,
                    WS_RSTDF);
}

pfx_status pfx_model_forward(pfx_model *model, const pfx_model_batch *batch, const pfx_model_prefix *prefix,
                             pfx_tensor *logits)
{
    static const char fn[] = "model_forward";
    call c;
    pfx_status st = check_call(model, fn, batch, prefix, &c);
    if (st == PFX_SUCCESS)
        st = check_output(model, fn, "logits", logits, c.R, model->cfg.shape.vocab, "V", &c);
    if (st == PFX_SUCCESS)
        st = run_blocks(model, batch, &c);
    if (st == PFX_SUCCESS)
        st = final_norm(model, &c);
    if (st == PFX_SUCCESS) {
        lin head = head_lin(model);
        st = lin_fwd(model, "model: lm_head", &head, c.R, model->ws[WS_LN], 0, logits, 0, 0.0f, false);
    }
    return st;
}

pfx_status pfx_model_last_logits(pfx_model *model, const pfx_model_batch *batch, const pfx_model_prefix *prefix,
                                 pfx_tensor *logits)
{
    static const char fn[] = "model_last_logits";
    call c;
    pfx_status st = check_call(model, fn, batch, prefix, &c);
    if (st == PFX_SUCCESS)
        st = check_output(model, fn, "logits", logits, c.B, model->cfg.shape.vocab, "V", &c);
    if (st != PFX_SUCCESS)
        return st;
    int32_t *lens = malloc(c.B * sizeof(int32_t));
    if (!lens)
        return pfx_error(model->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    for (size_t b = 0; b < c.B; b++)
        lens[b] = c.lens ? c.lens[b] : (int32_t)c.N;
    const size_t C = model->cfg.shape.hidden;
    if ((st = run_blocks(model, batch, &c)) == PFX_SUCCESS && (st = final_norm(model, &c)) == PFX_SUCCESS)
        st = pfx_op_gather_last(model->rt, PFX_MAT(model->ws[WS_LN], c.R, C), c.B, c.N, lens,
                                PFX_MAT(model->ws[WS_DA], c.B, C));
    free(lens);
    if (st == PFX_SUCCESS) {
        lin head = head_lin(model);
        st = lin_fwd(model, "model: lm_head", &head, c.B, model->ws[WS_DA], 0, logits, 0, 0.0f, false);
    }
    return st;
}

pfx_status pfx_model_hidden_states(pfx_model *model, const pfx_model_batch *batch, const pfx_model_prefix *prefix,
                                   pfx_tensor *hidden)
{
    static const char fn[] = "model_hidden_states";
    call c;
    pfx_status st = check_call(model, fn, batch, prefix, &c);
    const size_t C = st == PFX_SUCCESS ? model->cfg.shape.hidden : 0;
    if (st == PFX_SUCCESS)
        st = check_output(model, fn, "hidden", hidden, c.R, C, "C", &c);
    if (st == PFX_SUCCESS && (hidden->ndim != 3 || hidden->shape[0] != c.B || hidden->shape[1] != c.N))
        st = pfx_error(model->rt, PFX_ERROR_INVALID_SHAPE, "%s: hidden must be [B=%zu, N=%zu, C=%zu]", fn, c.B, c.N,
                       C);
    if (st == PFX_SUCCESS)
        st = run_blocks(model, batch, &c);
    if (st == PFX_SUCCESS)
        st = final_norm(model, &c);
    if (st == PFX_SUCCESS)
        st = copy_rows(model, "model: hidden states", model->ws[WS_LN], hidden, c.R * C);
    return st;
}

/* The head and the per-row losses (WS_ROWLOSS) in chunks of rows; with
 * `grad` the gradient of the final norm's output goes to WS_DH1, and with
 * `dhead` the head's weight gradient there (written, or added with
 * `accumulate`). Enqueues only: read_loss waits for the value. */
static pfx_status head_loss(pfx_model *m, const call *c, bool grad, pfx_tensor *dhead, bool accumulate)
{
    const size_t V = m->cfg.shape.vocab;
    lin head = head_lin(m);
    pfx_status st = PFX_SUCCESS;
    for (size_t r0 = 0; r0 < c->R && st == PFX_SUCCESS; r0 += m->chunk_rows) {
        size_t rows = c->R - r0 < m->chunk_rows ? c->R - r0 : m->chunk_rows;
        pfx_mat rl = PFX_VEC(m->ws[WS_ROWLOSS], r0, rows);
        if ((st = lin_fwd(m, "model: lm_head", &head, rows, m->ws[WS_LN], r0, m->ws[WS_LOGITS], 0, 0.0f, false)))
            break;
        double t0 = prof_begin(m);
        st = prof_end(m, PFX_MODEL_PART_LOSS, t0,
                      pfx_op_cross_entropy(m->rt, PFX_MAT(m->ws[WS_LOGITS], rows, V), m->labels, r0,
                                           c->counted, grad, &rl));
        if (st != PFX_SUCCESS)
            break;
        if (grad)
            st = lin_bwd(m, "model: d lm_head", &head, rows, m->ws[WS_LOGITS], 0, m->ws[WS_DH1], r0, 0.0f);
        if (st == PFX_SUCCESS && grad && dhead)
            st = lin_grads(m, "model: dW lm_head", &head, rows, m->ws[WS_LN], r0, m->ws[WS_LOGITS], 0, dhead, NULL,
                           accumulate || r0 > 0);
    }
    return st;
}

/* The mean of head_loss's per-row losses over the counted labels: the one
 * blocking read of a loss or a backward (at the end, after everything else
 * is enqueued). */
static pfx_status read_loss(pfx_model *m, const call *c, double *loss)
{
    float *host = malloc(c->R * sizeof(float));
    if (!host)
        return pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    pfx_status st = pfx_tensor_read(m->ws[WS_ROWLOSS], 0, c->R, host);
    double sum = 0.0;
    for (size_t i = 0; i < c->R; i++)
        sum += host[i];
    free(host);
    if (st == PFX_SUCCESS)
        *loss = sum / (double)c->counted;
    return st;
}

pfx_status pfx_model_loss(pfx_model *model, const pfx_model_batch *batch, const pfx_model_prefix *prefix,
                          double *loss)
{
    static const char fn[] = "model_loss";
    call c;
    pfx_status st = check_call(model, fn, batch, prefix, &c);
    if (st == PFX_SUCCESS && !loss)
        st = pfx_error(model->rt, PFX_ERROR_NULL_ARGUMENT, "%s: loss is NULL", fn);
    if (st == PFX_SUCCESS)
        st = write_labels(model, fn, batch, &c);
    if (st == PFX_SUCCESS)
        st = run_blocks(model, batch, &c);
    if (st == PFX_SUCCESS)
        st = final_norm(model, &c);
    if (st == PFX_SUCCESS)
        st = head_loss(model, &c, false, NULL, false);
    if (st == PFX_SUCCESS)
        st = read_loss(model, &c, loss);
    return st;
}

pfx_status pfx_model_backward(pfx_model *model, const pfx_model_batch *batch, const pfx_model_prefix *prefix,
                              const pfx_model_grads *grads, double *loss)
{
    static const char fn[] = "model_backward";
    call c;
    pfx_status st = check_call(model, fn, batch, prefix, &c);
    if (st == PFX_SUCCESS)
        st = check_grads(model, fn, &c, grads);
    if (st == PFX_SUCCESS)
        st = write_labels(model, fn, batch, &c);
    if (st != PFX_SUCCESS)
        return st;
    const pfx_model_shape *s = &model->cfg.shape;
    const size_t L = s->layers, C = s->hidden;
    const bool acc = grads && grads->accumulate;
    pfx_tensor *g_wte = pgrad(model, grads, 0, PFX_W_EMBED), *g_wpe = pgrad(model, grads, 0, PFX_W_POS);
    pfx_tensor *g_head = s->tied_embeddings ? g_wte : pgrad(model, grads, 0, PFX_W_LM_HEAD);
    if ((st = run_blocks(model, batch, &c)) || (st = final_norm(model, &c)) ||
        (st = head_loss(model, &c, true, g_head, acc)) ||
        (st = norm_bwd(model, 0, PFX_W_NORM_F, c.R, model->hidden[L], WS_MEANF, WS_RSTDF, model->ws[WS_DH1],
                       model->ws[WS_DH0], false)) ||
        (st = norm_grads(model, 0, c.R, model->hidden[L], WS_MEANF, WS_RSTDF, model->ws[WS_DH1],
                         pgrad(model, grads, 0, PFX_W_NORM_F), pgrad(model, grads, 0, PFX_W_NORM_F_B), acc)))
        return st;
    /* the gradient of hidden[l + 1] sits in DH0 for l = L - 1, then
     * alternates; block 0 passes one on only to the embeddings */
    const bool want_embed = g_wte || g_wpe;
    const pfx_tensor *d_embed = model->ws[(L - 1) % 2 ? WS_DH0 : WS_DH1];
    for (size_t l = L; l-- > 0 && st == PFX_SUCCESS;) {
        const pfx_tensor *dy = model->ws[(L - 1 - l) % 2 ? WS_DH1 : WS_DH0];
        const pfx_tensor *dx = l || want_embed ? model->ws[(L - 1 - l) % 2 ? WS_DH0 : WS_DH1] : NULL;
        if (!model->p.recompute || (st = block_forward(model, l, &c, false)) == PFX_SUCCESS)
            st = block_backward(model, l, &c, dy, dx, grads);
    }
    if (st == PFX_SUCCESS && want_embed) {
        /* a tied head wrote the token embedding's gradient already */
        pfx_mat dout = PFX_MAT(d_embed, c.R, C);
        if (g_wte && !acc && !s->tied_embeddings)
            st = pfx_tensor_fill(g_wte, 0.0f);
        if (st == PFX_SUCCESS && g_wte)
            st = pfx_op_embedding_backward(model->rt, model->ids, c.B, c.N, dout, PFX_MAT(g_wte, s->vocab, C));
        if (st == PFX_SUCCESS && g_wpe && !acc)
            st = pfx_tensor_fill(g_wpe, 0.0f);
        if (st == PFX_SUCCESS && g_wpe)
            st = pfx_op_position_backward(model->rt, c.B, c.N, dout, PFX_MAT(g_wpe, s->max_positions, C), c.P);
    }
    if (st == PFX_SUCCESS && loss)
        st = read_loss(model, &c, loss);
    return st;
}

/* ---- each layer's attention inputs (probs.c, head_stats.c) ---- */

pfx_status pfx_model_layer_attention(pfx_model *model, const char *fn, const pfx_model_batch *batch,
                                     const pfx_model_prefix *prefix, size_t layer, pfx_model_attention_visit visit,
                                     void *ctx)
{
    call c;
    pfx_status st = check_call(model, fn, batch, prefix, &c);
    if (st != PFX_SUCCESS)
        return st;
    const size_t L = model->cfg.shape.layers;
    if (layer != PFX_MODEL_EVERY_LAYER && layer >= L)
        return pfx_error(model->rt, PFX_ERROR_OUT_OF_RANGE, "%s: layer %zu is not below the model's %zu layers", fn,
                         layer, L);
    const size_t first = layer == PFX_MODEL_EVERY_LAYER ? 0 : layer;
    const size_t end = layer == PFX_MODEL_EVERY_LAYER ? L : layer + 1;
    /* blocks before `first` only; each visited block leaves its Q, K, V in the
     * workspace (the MLP after the attention reads none of them) and its
     * output for the next one */
    if ((st = run_blocks_upto(model, batch, &c, first)))
        return st;
    for (size_t l = first; l < end && st == PFX_SUCCESS; l++) {
        if ((st = block_forward(model, l, &c, l + 1 < end)))
            break;
        attn_views av = views(model, l, &c);
        pfx_attention_desc d = attn_desc(model, l, &c);
        pfx_attention_inputs in = { &av.q, &av.k, &av.v, c.P ? c.pre.keys[l] : NULL, c.P ? c.pre.values[l] : NULL };
        st = visit(model->rt, l, &d, &in, ctx);
    }
    return st;
}
