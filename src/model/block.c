/* One transformer block, forward and backward (to its input, the prefixes,
 * the gains and, when asked, every weight), for both families (the weight
 * table of weights.c decides what each product reads), and the dense
 * products, norms and attention views it and the model's passes share. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"

/* The tensor `slot` that block l reads and writes: its own when the context
 * keeps every block's activations, else the shared workspace's. */
static pfx_tensor *wsl(const pfx_context *cx, size_t l, int slot)
{
    int k = pfx_model_kept_slot(cx, slot);
    return k < 0 ? cx->ws[slot] : cx->kept[l * PFX_KEPT_COUNT + (size_t)k];
}

pfx_model_lin pfx_model_get_lin(const pfx_model *m, size_t l, pfx_model_lin_which which)
{
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t C = s->hidden, I = s->intermediate;
    const size_t QD = s->heads * s->head_dim, KVD = s->kv_heads * s->head_dim;
    pfx_model_lin r;
    memset(&r, 0, sizeof(r));
    if (m->cfg.family == PFX_FAMILY_GPT2) {
        /* Conv1D [in, out]; c_attn holds q | k | v side by side */
        const pfx_tensor *qkv = pfx_model_w(m, l, PFX_W_QKV),
                         *qkv_b = pfx_model_w(m, l, PFX_W_QKV_B);
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
        if (pfx_model_held_transposed(m, PFX_W_QKV)) { /* held [out, in] (Q8_0) */
            r.w = pfx_mat_of(r.w.t, 0, r.out, r.in, r.in);
            r.trans = true;
        }
        return r;
    }
    /* Linear [out, in]; q, k, v stacked at load: [QD + 2 KVD, C] */
    static const pfx_weight_role roles[] = { PFX_W_QKV, PFX_W_O, PFX_W_UP, PFX_W_GATE, PFX_W_DOWN };
    static const pfx_weight_role biases[] = { PFX_W_QKV_B, PFX_W_O_B, PFX_W_ROLE_COUNT,
                                              PFX_W_ROLE_COUNT, PFX_W_ROLE_COUNT };
    const size_t outs[] = { QD + 2 * KVD, C, I, I, C }, ins[] = { C, QD, C, C, I };
    r.in = ins[which];
    r.out = outs[which];
    r.trans = true;
    r.w = PFX_MAT(pfx_model_w(m, l, roles[which]), r.out, r.in);
    const pfx_tensor *b =
        biases[which] < PFX_W_ROLE_COUNT ? pfx_model_w(m, l, biases[which]) : NULL;
    if (b) {
        r.has_b = true;
        r.b = PFX_VEC(b, 0, r.out);
    }
    return r;
}

pfx_model_lin pfx_model_head_lin(const pfx_model *m)
{
    const pfx_model_shape *s = &m->cfg.shape;
    const pfx_tensor *w = s->tied_embeddings ? m->global[PFX_W_EMBED] : m->global[PFX_W_LM_HEAD];
    pfx_model_lin r;
    memset(&r, 0, sizeof(r));
    r.w = PFX_MAT(w, s->vocab, s->hidden);
    r.trans = true;
    r.in = s->hidden;
    r.out = s->vocab;
    r.head = true;
    return r;
}

/* y rows [y0, y0 + rows) = x rows [x0, ...) op(W) (+ b); beta 1 adds to y. */
pfx_status pfx_model_lin_fwd(pfx_context *cx, const char *what, const pfx_model_lin *f, size_t rows,
                             const pfx_tensor *x, size_t x0, const pfx_tensor *y, size_t y0,
                             float beta, bool bias)
{
    const pfx_model *m = cx->model;
    double t0 = pfx_model_prof_begin(cx);
    pfx_status st = pfx_gemm_weight(m->rt, what, rows, f->out, f->in, 1.0f,
                                    PFX_GEMM_OP(x->mem, x0 * f->in, f->in), f->w, f->trans, beta,
                                    PFX_GEMM_OP(y->mem, y0 * f->out, f->out), cx->ws[WS_CONV]);
    st = pfx_model_prof_end(cx, f->head ? PFX_MODEL_PART_HEAD : PFX_MODEL_PART_GEMM, t0, st);
    if (st == PFX_SUCCESS && bias && f->has_b)
        st = pfx_op_bias_add(m->rt, pfx_mat_of(y, y0 * f->out, rows, f->out, f->out), f->b);
    return st;
}

/* dx[rows, in] (+)= dy[rows, out] op(W)^T. */
pfx_status pfx_model_lin_bwd(pfx_context *cx, const char *what, const pfx_model_lin *f, size_t rows,
                             const pfx_tensor *dy, size_t dy0, const pfx_tensor *dx, size_t dx0,
                             float beta)
{
    const pfx_model *m = cx->model;
    double t0 = pfx_model_prof_begin(cx);
    pfx_status st = pfx_gemm_weight(
        m->rt, what, rows, f->in, f->out, 1.0f, PFX_GEMM_OP(dy->mem, dy0 * f->out, f->out), f->w,
        !f->trans, beta, PFX_GEMM_OP(dx->mem, dx0 * f->in, f->in), cx->ws[WS_CONV]);
    return pfx_model_prof_end(cx, f->head ? PFX_MODEL_PART_HEAD : PFX_MODEL_PART_GEMM, t0, st);
}

/* The gradient of parameter (layer l, role) that g asks for, or NULL. */
pfx_tensor *pfx_model_pgrad(const pfx_model *m, const pfx_model_grads *g, size_t l,
                            pfx_weight_role role)
{
    if (!g || !g->weights)
        return NULL;
    const size_t i = pfx_model_weight_index(m, l, role);
    return i == SIZE_MAX ? NULL : g->weights[i];
}

/* The weight and bias gradients of product f (either may be NULL) over
 * rows of its input x and output gradient dy: Conv1D [in, out]: dW = x^T dy;
 * Linear [out, in]: dW = dy^T x; db = the column sums of dy. */
pfx_status pfx_model_lin_grads(pfx_context *cx, const char *what, const pfx_model_lin *f,
                               size_t rows, const pfx_tensor *x, size_t x0, const pfx_tensor *dy,
                               size_t dy0, pfx_tensor *dw, pfx_tensor *db, bool accumulate)
{
    const pfx_model *m = cx->model;
    pfx_status st = PFX_SUCCESS;
    if (dw) {
        const pfx_gemm_operand xo = PFX_GEMM_OP(x->mem, x0 * f->in, f->in);
        const pfx_gemm_operand yo = PFX_GEMM_OP(dy->mem, dy0 * f->out, f->out);
        const float beta = accumulate ? 1.0f : 0.0f;
        double t0 = pfx_model_prof_begin(cx);
        st = f->trans ? pfx_gemm(m->rt, what, true, false, f->out, f->in, rows, 1.0f, yo, xo, beta,
                                 PFX_GEMM_OP(dw->mem, 0, f->in))
                      : pfx_gemm(m->rt, what, true, false, f->in, f->out, rows, 1.0f, xo, yo, beta,
                                 PFX_GEMM_OP(dw->mem, 0, f->out));
        st = pfx_model_prof_end(cx, f->head ? PFX_MODEL_PART_HEAD : PFX_MODEL_PART_GEMM, t0, st);
    }
    if (st == PFX_SUCCESS && db)
        st = pfx_op_bias_grad(m->rt, pfx_mat_of(dy, dy0 * f->out, rows, f->out, f->out),
                              PFX_VEC(db, 0, f->out), accumulate);
    return st;
}

pfx_status pfx_model_copy_rows(pfx_context *cx, const char *what, const pfx_tensor *src,
                               const pfx_tensor *dst, size_t count)
{
    const pfx_model *m = cx->model;
    cl_int err = clEnqueueCopyBuffer(m->rt->queue, src->mem, dst->mem, 0, 0, count * sizeof(float),
                                     0, NULL, NULL);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(m->rt, err, what);
}

pfx_status pfx_model_norm_fwd(pfx_context *cx, size_t l, pfx_weight_role w, pfx_weight_role b,
                              size_t rows, const pfx_tensor *x, int mean, int rstd)
{
    const pfx_model *m = cx->model;
    const size_t C = m->cfg.shape.hidden;
    pfx_mat wv = PFX_VEC(pfx_model_w(m, l, w), 0, C);
    pfx_mat xm = PFX_MAT(x, rows, C), y = PFX_MAT(cx->ws[WS_LN], rows, C);
    pfx_mat rs = PFX_VEC(wsl(cx, l, rstd), 0, rows);
    if (m->cfg.family == PFX_FAMILY_LLAMA)
        return pfx_op_rmsnorm_forward(m->rt, xm, wv, (float)m->cfg.norm_eps, y, &rs);
    pfx_mat bv = PFX_VEC(pfx_model_w(m, l, b), 0, C), mu = PFX_VEC(wsl(cx, l, mean), 0, rows);
    return pfx_op_layernorm_forward(m->rt, xm, wv, &bv, (float)m->cfg.norm_eps, y, &mu, &rs);
}

/* dx (+)= norm backward of dy, x the norm's input. */
pfx_status pfx_model_norm_bwd(pfx_context *cx, size_t l, pfx_weight_role w, size_t rows,
                              const pfx_tensor *x, int mean, int rstd, const pfx_tensor *dy,
                              const pfx_tensor *dx, bool accumulate)
{
    const pfx_model *m = cx->model;
    const size_t C = m->cfg.shape.hidden;
    pfx_mat wv = PFX_VEC(pfx_model_w(m, l, w), 0, C);
    pfx_mat xm = PFX_MAT(x, rows, C), dym = PFX_MAT(dy, rows, C), dxm = PFX_MAT(dx, rows, C);
    pfx_mat rs = PFX_VEC(wsl(cx, l, rstd), 0, rows);
    if (m->cfg.family == PFX_FAMILY_LLAMA)
        return pfx_op_rmsnorm_backward(m->rt, xm, wv, rs, dym, dxm, accumulate);
    return pfx_op_layernorm_backward(m->rt, xm, wv, PFX_VEC(wsl(cx, l, mean), 0, rows), rs, dym,
                                     dxm, accumulate);
}

/* The gradients of norm `w` (and its bias `b`) of block l, either may be
 * NULL: dy the gradient of the norm's output, x its input. */
pfx_status pfx_model_norm_grads(pfx_context *cx, size_t l, size_t rows, const pfx_tensor *x,
                                int mean, int rstd, const pfx_tensor *dy, pfx_tensor *dw,
                                pfx_tensor *db, bool accumulate)
{
    const pfx_model *m = cx->model;
    if (!dw && !db)
        return PFX_SUCCESS;
    const size_t C = m->cfg.shape.hidden;
    pfx_mat mu = PFX_VEC(wsl(cx, l, mean), 0, rows),
            bv = db ? PFX_VEC(db, 0, C) : PFX_VEC(dy, 0, C);
    pfx_status st = PFX_SUCCESS;
    if (dw)
        st = pfx_op_norm_param_grad(m->rt, PFX_MAT(x, rows, C),
                                    m->cfg.family == PFX_FAMILY_LLAMA ? NULL : &mu,
                                    PFX_VEC(wsl(cx, l, rstd), 0, rows), PFX_MAT(dy, rows, C),
                                    PFX_VEC(dw, 0, C), db ? &bv : NULL, accumulate);
    else /* a LayerNorm bias alone: the column sums of dy */
        st = pfx_op_bias_grad(m->rt, PFX_MAT(dy, rows, C), bv, accumulate);
    return st;
}

pfx_attention_desc pfx_model_attn_desc(const pfx_context *cx, size_t l, const pfx_model_call *c)
{
    const pfx_model *m = cx->model;
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
            cx->dim_scaled[i] = c->pre.gain_ramp * c->pre.dim_gains[l * HD + i];
        d.dim_gain = cx->dim_scaled;
    }
    d.q_lens = d.kv_lens = c->lens;
    if (c->P && c->pre.keys[l]->ndim == 4)
        d.bank_index = c->pre.bank_index;
    d.dropout = pfx_model_drop(cx, l, PFX_DROP_ATTN, &d.dropout_stream);
    return d;
}

pfx_model_attn_views pfx_model_views(const pfx_context *cx, size_t l, const pfx_model_call *c)
{
    const pfx_model *m = cx->model;
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t B = c->B, N = c->N, H = s->heads, Hkv = s->kv_heads, D = s->head_dim;
    pfx_model_attn_views v = {
        pfx_tensor_view(wsl(cx, l, WS_Q), 4, B, N, H, D),
        pfx_tensor_view(wsl(cx, l, WS_K), 4, B, N, Hkv, D),
        pfx_tensor_view(wsl(cx, l, WS_V), 4, B, N, Hkv, D),
        pfx_tensor_view(wsl(cx, l, WS_O), 4, B, N, H, D),
        pfx_tensor_view(wsl(cx, l, WS_LSE), 3, B, H, N, 0),
        pfx_tensor_view(cx->ws[WS_DQ], 4, B, N, H, D),
        pfx_tensor_view(cx->ws[WS_DK], 4, B, N, Hkv, D),
        pfx_tensor_view(cx->ws[WS_DV], 4, B, N, Hkv, D),
        pfx_tensor_view(cx->ws[WS_DO], 4, B, N, H, D),
    };
    return v;
}

pfx_tensor *pfx_model_ws(const pfx_context *cx, size_t l, int slot)
{
    return wsl(cx, l, slot);
}

/* The R rows of block l's slots q, k, v ([R, QD], [R, KVD], [R, KVD]):
 * the three column blocks of WS_QKV (Q, K, V; dQ, dK, dV). */
static void qkv_parts(const pfx_context *cx, size_t l, size_t R, int q, int k, int v,
                      pfx_mat part[3])
{
    const pfx_model *m = cx->model;
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t QD = s->heads * s->head_dim, KVD = s->kv_heads * s->head_dim;
    part[0] = PFX_MAT(wsl(cx, l, q), R, QD);
    part[1] = PFX_MAT(wsl(cx, l, k), R, KVD);
    part[2] = PFX_MAT(wsl(cx, l, v), R, KVD);
}

pfx_status pfx_model_block_qkv(pfx_context *cx, size_t l, size_t R)
{
    const pfx_model *m = cx->model;
    const pfx_model_lin qkv = pfx_model_get_lin(m, l, L_QKV);
    pfx_mat part[3];
    qkv_parts(cx, l, R, WS_Q, WS_K, WS_V, part);
    pfx_status st;
    if ((st = pfx_model_norm_fwd(cx, l, PFX_W_NORM1, PFX_W_NORM1_B, R, cx->hidden[l], WS_MEAN1,
                                 WS_RSTD1)) ||
        (st = pfx_model_lin_fwd(cx, "model: q, k, v", &qkv, R, cx->ws[WS_LN], 0, cx->ws[WS_QKV], 0,
                                0.0f, false)))
        return st;
    return pfx_op_split_columns(m->rt, PFX_MAT(cx->ws[WS_QKV], R, qkv.out),
                                qkv.has_b ? &qkv.b : NULL, 3, part);
}

pfx_status pfx_model_block_mlp(pfx_context *cx, size_t l, size_t R, bool output)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    const bool llama = m->cfg.family == PFX_FAMILY_LLAMA;
    const size_t C = s->hidden, I = s->intermediate;
    const pfx_model_lin o = pfx_model_get_lin(m, l, L_O);
    pfx_dropout_stream unused;
    const bool drop = pfx_model_drop(cx, l, PFX_DROP_ATTN_OUT, &unused) > 0.0f;
    pfx_status st;
    if (drop) /* the branch into LN (free until norm 2), then A = x + dropout(branch) */
        st = pfx_model_lin_fwd(cx, "model: attention output", &o, R, wsl(cx, l, WS_O), 0,
                               cx->ws[WS_LN], 0, 0.0f, true);
    else if ((st = pfx_model_copy_rows(cx, "model: residual", cx->hidden[l], wsl(cx, l, WS_A),
                                       R * C)) == PFX_SUCCESS)
        st = pfx_model_lin_fwd(cx, "model: attention output", &o, R, wsl(cx, l, WS_O), 0,
                               wsl(cx, l, WS_A), 0, 1.0f, true);
    if (st == PFX_SUCCESS && drop)
        st = pfx_model_drop_rows(cx, l, PFX_DROP_ATTN_OUT, R, cx->ws[WS_LN], cx->hidden[l],
                                 wsl(cx, l, WS_A));
    if (st != PFX_SUCCESS || (st = pfx_model_norm_fwd(cx, l, PFX_W_NORM2, PFX_W_NORM2_B, R,
                                                      wsl(cx, l, WS_A), WS_MEAN2, WS_RSTD2)))
        return st;
    const pfx_model_lin up = pfx_model_get_lin(m, l, L_UP), down = pfx_model_get_lin(m, l, L_DOWN);
    int mlp_out;
    if (llama) {
        const pfx_model_lin gate = pfx_model_get_lin(m, l, L_GATE);
        if ((st = pfx_model_lin_fwd(cx, "model: gate", &gate, R, cx->ws[WS_LN], 0,
                                    wsl(cx, l, WS_M0), 0, 0.0f, true)) ||
            (st = pfx_model_lin_fwd(cx, "model: up", &up, R, cx->ws[WS_LN], 0, wsl(cx, l, WS_M1), 0,
                                    0.0f, true)) ||
            (st = pfx_op_swiglu_forward(rt, PFX_MAT(wsl(cx, l, WS_M0), R, I),
                                        PFX_MAT(wsl(cx, l, WS_M1), R, I),
                                        PFX_MAT(cx->ws[WS_M2], R, I))))
            return st;
        mlp_out = WS_M2;
    } else {
        if ((st = pfx_model_lin_fwd(cx, "model: c_fc", &up, R, cx->ws[WS_LN], 0, wsl(cx, l, WS_M0),
                                    0, 0.0f, true)) ||
            (st = pfx_op_activation_forward(rt, m->cfg.act, PFX_MAT(wsl(cx, l, WS_M0), R, I),
                                            PFX_MAT(wsl(cx, l, WS_M1), R, I))))
            return st;
        mlp_out = WS_M1;
    }
    if (!output)
        return PFX_SUCCESS;
    if (pfx_model_drop(cx, l, PFX_DROP_MLP_OUT, &unused) > 0.0f) {
        /* the branch into LN (read by the input products only), then dropped onto the residual */
        if ((st = pfx_model_lin_fwd(cx, "model: mlp output", &down, R, cx->ws[mlp_out], 0,
                                    cx->ws[WS_LN], 0, 0.0f, true)))
            return st;
        return pfx_model_drop_rows(cx, l, PFX_DROP_MLP_OUT, R, cx->ws[WS_LN], wsl(cx, l, WS_A),
                                   cx->hidden[l + 1]);
    }
    if ((st = pfx_model_copy_rows(cx, "model: residual", wsl(cx, l, WS_A), cx->hidden[l + 1],
                                  R * C)))
        return st;
    return pfx_model_lin_fwd(cx, "model: mlp output", &down, R, cx->ws[mlp_out], 0,
                             cx->hidden[l + 1], 0, 1.0f, true);
}

/* Block l from hidden[l]: every intermediate the backward reads goes to the
 * workspace; with `output` the block's result goes to hidden[l + 1]. */
pfx_status pfx_model_block_forward(pfx_context *cx, size_t l, const pfx_model_call *c, bool output)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    const size_t R = c->R;
    pfx_status st = pfx_model_block_qkv(cx, l, R);
    if (st != PFX_SUCCESS)
        return st;
    if (m->cfg.family == PFX_FAMILY_LLAMA) {
        pfx_mat freq = PFX_VEC(m->inv_freq, 0, s->head_dim / 2);
        if ((st = pfx_op_rope_forward(rt, PFX_MAT(wsl(cx, l, WS_Q), R, s->heads * s->head_dim),
                                      c->B, c->N, s->heads, s->head_dim, c->P, freq)) ||
            (st = pfx_op_rope_forward(rt, PFX_MAT(wsl(cx, l, WS_K), R, s->kv_heads * s->head_dim),
                                      c->B, c->N, s->kv_heads, s->head_dim, c->P, freq)))
            return st;
    }
    pfx_model_attn_views av = pfx_model_views(cx, l, c);
    pfx_attention_desc d = pfx_model_attn_desc(cx, l, c);
    pfx_attention_inputs in = { &av.q, &av.k, &av.v, c->P ? c->pre.keys[l] : NULL,
                                c->P ? c->pre.values[l] : NULL };
    double t0 = pfx_model_prof_begin(cx);
    st = pfx_model_prof_end(cx, PFX_MODEL_PART_ATTN_FWD, t0,
                            pfx_attention_forward(rt, &d, &in, &av.o, &av.lse));
    if (st != PFX_SUCCESS)
        return st;
    return pfx_model_block_mlp(cx, l, R, output);
}

/* From dy (gradient of hidden[l + 1]) to dx (of hidden[l], when not NULL),
 * the prefix, gain and weight gradients of layer l; pfx_model_block_forward(l) ran
 * just before (or every activation of block l is kept). A weight gradient
 * is computed from the product's input and output gradient before either
 * is overwritten; inputs that are not kept (the norm outputs, the MLP's
 * activation) are recomputed from what is. */
pfx_status pfx_model_block_backward(pfx_context *cx, size_t l, const pfx_model_call *c,
                                    const pfx_tensor *dy, const pfx_tensor *dx,
                                    const pfx_model_grads *g)
{
    const pfx_model *m = cx->model;
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    const bool llama = m->cfg.family == PFX_FAMILY_LLAMA;
    const bool acc = g && g->accumulate;
    const size_t R = c->R, C = s->hidden, I = s->intermediate;
    pfx_tensor *const *ws = cx->ws;
    const pfx_model_lin up = pfx_model_get_lin(m, l, L_UP), down = pfx_model_get_lin(m, l, L_DOWN),
                        o = pfx_model_get_lin(m, l, L_O);
    pfx_tensor *g_up = pfx_model_pgrad(m, g, l, PFX_W_UP),
               *g_up_b = pfx_model_pgrad(m, g, l, PFX_W_UP_B);
    pfx_tensor *g_gate = pfx_model_pgrad(m, g, l, PFX_W_GATE);
    pfx_tensor *g_down = pfx_model_pgrad(m, g, l, PFX_W_DOWN),
               *g_down_b = pfx_model_pgrad(m, g, l, PFX_W_DOWN_B);
    pfx_tensor *g_n2 = pfx_model_pgrad(m, g, l, PFX_W_NORM2),
               *g_n2_b = pfx_model_pgrad(m, g, l, PFX_W_NORM2_B);
    pfx_tensor *g_n1 = pfx_model_pgrad(m, g, l, PFX_W_NORM1),
               *g_n1_b = pfx_model_pgrad(m, g, l, PFX_W_NORM1_B);
    pfx_tensor *g_o = pfx_model_pgrad(m, g, l, PFX_W_O),
               *g_o_b = pfx_model_pgrad(m, g, l, PFX_W_O_B);
    pfx_tensor *g_qkv = pfx_model_pgrad(m, g, l, PFX_W_QKV),
               *g_qkv_b = pfx_model_pgrad(m, g, l, PFX_W_QKV_B);
    pfx_status st;
    /* MLP: the output product's input (the activation) again, into DM */
    if (g_down) {
        st = llama
                 ? pfx_op_swiglu_forward(rt, PFX_MAT(wsl(cx, l, WS_M0), R, I),
                                         PFX_MAT(wsl(cx, l, WS_M1), R, I), PFX_MAT(ws[WS_DM], R, I))
                 : pfx_op_activation_forward(rt, m->cfg.act, PFX_MAT(wsl(cx, l, WS_M0), R, I),
                                             PFX_MAT(ws[WS_DM], R, I));
        if (st != PFX_SUCCESS)
            return st;
    }
    /* the MLP branch's gradient: dy through the residual dropout's mask (into DLN, free here) */
    pfx_dropout_stream unused;
    const pfx_tensor *dy_mlp = dy, *d_attn_out = ws[WS_DA];
    if (pfx_model_drop(cx, l, PFX_DROP_MLP_OUT, &unused) > 0.0f) {
        if ((st = pfx_model_drop_rows(cx, l, PFX_DROP_MLP_OUT, R, dy, NULL, ws[WS_DLN])))
            return st;
        dy_mlp = ws[WS_DLN];
    }
    if ((st = pfx_model_lin_grads(cx, "model: dW mlp output", &down, R, ws[WS_DM], 0, dy_mlp, 0,
                                  g_down, g_down_b, acc)) ||
        (st =
             pfx_model_lin_bwd(cx, "model: d mlp output", &down, R, dy_mlp, 0, ws[WS_DM], 0, 0.0f)))
        return st;
    /* the input products' input: norm 2's output, again, into LN */
    const bool want_in = g_up || g_up_b || g_gate;
    if (want_in && (st = pfx_model_norm_fwd(cx, l, PFX_W_NORM2, PFX_W_NORM2_B, R, wsl(cx, l, WS_A),
                                            WS_MEAN2, WS_RSTD2)))
        return st;
    if (llama) {
        const pfx_model_lin gate = pfx_model_get_lin(m, l, L_GATE);
        if ((st = pfx_op_swiglu_backward(rt, PFX_MAT(wsl(cx, l, WS_M0), R, I),
                                         PFX_MAT(wsl(cx, l, WS_M1), R, I), PFX_MAT(ws[WS_DM], R, I),
                                         PFX_MAT(wsl(cx, l, WS_M0), R, I),
                                         PFX_MAT(wsl(cx, l, WS_M1), R, I))) ||
            (st = pfx_model_lin_grads(cx, "model: dW gate", &gate, R, ws[WS_LN], 0,
                                      wsl(cx, l, WS_M0), 0, g_gate, NULL, acc)) ||
            (st = pfx_model_lin_grads(cx, "model: dW up", &up, R, ws[WS_LN], 0, wsl(cx, l, WS_M1),
                                      0, g_up, NULL, acc)) ||
            (st = pfx_model_lin_bwd(cx, "model: d gate", &gate, R, wsl(cx, l, WS_M0), 0, ws[WS_DLN],
                                    0, 0.0f)) ||
            (st = pfx_model_lin_bwd(cx, "model: d up", &up, R, wsl(cx, l, WS_M1), 0, ws[WS_DLN], 0,
                                    1.0f)))
            return st;
    } else if ((st = pfx_op_activation_backward(rt, m->cfg.act, PFX_MAT(wsl(cx, l, WS_M0), R, I),
                                                PFX_MAT(ws[WS_DM], R, I),
                                                PFX_MAT(ws[WS_DM], R, I))) ||
               (st = pfx_model_lin_grads(cx, "model: dW c_fc", &up, R, ws[WS_LN], 0, ws[WS_DM], 0,
                                         g_up, g_up_b, acc)) ||
               (st = pfx_model_lin_bwd(cx, "model: d c_fc", &up, R, ws[WS_DM], 0, ws[WS_DLN], 0,
                                       0.0f))) {
        return st;
    }
    if ((st = pfx_model_norm_grads(cx, l, R, wsl(cx, l, WS_A), WS_MEAN2, WS_RSTD2, ws[WS_DLN], g_n2,
                                   g_n2_b, acc)) ||
        (st = pfx_model_copy_rows(cx, "model: d residual", dy, ws[WS_DA], R * C)) ||
        (st = pfx_model_norm_bwd(cx, l, PFX_W_NORM2, R, wsl(cx, l, WS_A), WS_MEAN2, WS_RSTD2,
                                 ws[WS_DLN], ws[WS_DA], true)))
        return st;
    /* the attention branch's gradient: dA through its mask (into DLN, read above) */
    if (pfx_model_drop(cx, l, PFX_DROP_ATTN_OUT, &unused) > 0.0f) {
        if ((st = pfx_model_drop_rows(cx, l, PFX_DROP_ATTN_OUT, R, ws[WS_DA], NULL, ws[WS_DLN])))
            return st;
        d_attn_out = ws[WS_DLN];
    }
    if ((st = pfx_model_lin_grads(cx, "model: dW attention output", &o, R, wsl(cx, l, WS_O), 0,
                                  d_attn_out, 0, g_o, g_o_b, acc)) ||
        (st = pfx_model_lin_bwd(cx, "model: d attention output", &o, R, d_attn_out, 0, ws[WS_DO], 0,
                                0.0f)))
        return st;

    /* attention: input gradients and this layer's prefix and gain gradients */
    const bool want_norm1 = g_n1 || g_n1_b;
    const bool want_qkv = dx || want_norm1 || g_qkv || g_qkv_b;
    pfx_model_attn_views av = pfx_model_views(cx, l, c);
    pfx_attention_desc d = pfx_model_attn_desc(cx, l, c);
    pfx_attention_inputs in = { &av.q, &av.k, &av.v, c->P ? c->pre.keys[l] : NULL,
                                c->P ? c->pre.values[l] : NULL };
    pfx_tensor *dgain = g && g->gains ? g->gains[l] : NULL,
               *ddim = g && g->dim_gains ? g->dim_gains[l] : NULL;
    const bool want_gain = dgain && c->pre.gain_mode != PFX_GAIN_OFF,
               want_dim = ddim && c->pre.dim_gains;
    if (want_dim && !cx->dim_grad) {
        const size_t shape[2] = { s->heads, s->head_dim };
        if ((st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &cx->dim_grad)))
            return st;
    }
    pfx_attention_grads ag = {
        .dq = want_qkv ? &av.dq : NULL,
        .dk = want_qkv ? &av.dk : NULL,
        .dv = want_qkv ? &av.dv : NULL,
        .dprefix_k = c->P && g && g->keys ? g->keys[l] : NULL,
        .dprefix_v = c->P && g && g->values ? g->values[l] : NULL,
        .dgain = want_gain ? dgain : NULL,
        .ddim_gain = want_dim ? cx->dim_grad : NULL, /* d/d(r G), scaled by r below */
    };
    if (acc && (ag.dprefix_k || ag.dprefix_v || ag.dgain)) {
        /* one call accumulates everything: clear dQ, dK, dV (and the d(r G) scratch) first */
        ag.accumulate = true;
        if (want_qkv &&
            ((st = pfx_tensor_fill(ws[WS_DQ], 0.0f)) || (st = pfx_tensor_fill(ws[WS_DK], 0.0f)) ||
             (st = pfx_tensor_fill(ws[WS_DV], 0.0f))))
            return st;
        if (want_dim && (st = pfx_tensor_fill(cx->dim_grad, 0.0f)))
            return st;
    }
    if (ag.dq || ag.dprefix_k || ag.dprefix_v || ag.dgain || ag.ddim_gain) {
        double t0 = pfx_model_prof_begin(cx);
        st = pfx_model_prof_end(cx, PFX_MODEL_PART_ATTN_BWD, t0,
                                pfx_attention_backward(rt, &d, &in, &av.o, &av.lse, &av.d_o, &ag));
        if (st != PFX_SUCCESS)
            return st;
    }
    if (dgain && !want_gain && !acc && (st = pfx_tensor_fill(dgain, 0.0f)))
        return st;
    /* dL/dG = r dL/d(r G) */
    if (want_dim && (st = pfx_axpby(ddim, c->pre.gain_ramp, cx->dim_grad, acc ? 1.0f : 0.0f)))
        return st;
    if (ddim && !want_dim && !acc && (st = pfx_tensor_fill(ddim, 0.0f)))
        return st;
    if (!want_qkv)
        return PFX_SUCCESS;
    pfx_mat dparts[3];
    qkv_parts(cx, l, R, WS_DQ, WS_DK, WS_DV, dparts);
    if (llama) {
        pfx_mat freq = PFX_VEC(m->inv_freq, 0, s->head_dim / 2);
        if ((st = pfx_op_rope_backward(rt, dparts[0], c->B, c->N, s->heads, s->head_dim, c->P,
                                       freq)) ||
            (st = pfx_op_rope_backward(rt, dparts[1], c->B, c->N, s->kv_heads, s->head_dim, c->P,
                                       freq)))
            return st;
    }
    /* dQ | dK | dV side by side, then one product back through the fused projection */
    const pfx_model_lin qkv = pfx_model_get_lin(m, l, L_QKV);
    if ((st = pfx_op_join_columns(rt, 3, dparts, PFX_MAT(ws[WS_QKV], R, qkv.out))))
        return st;
    if (g_qkv && (st = pfx_model_norm_fwd(cx, l, PFX_W_NORM1, PFX_W_NORM1_B, R, cx->hidden[l],
                                          WS_MEAN1, WS_RSTD1)))
        return st;
    if ((st = pfx_model_lin_grads(cx, "model: dW q, k, v", &qkv, R, ws[WS_LN], 0, ws[WS_QKV], 0,
                                  g_qkv, g_qkv_b, acc)))
        return st;
    if (!dx && !want_norm1)
        return PFX_SUCCESS;
    if ((st = pfx_model_lin_bwd(cx, "model: d q, k, v", &qkv, R, ws[WS_QKV], 0, ws[WS_DLN], 0,
                                0.0f)) ||
        (st = pfx_model_norm_grads(cx, l, R, cx->hidden[l], WS_MEAN1, WS_RSTD1, ws[WS_DLN], g_n1,
                                   g_n1_b, acc)))
        return st;
    if (!dx)
        return PFX_SUCCESS;
    if ((st = pfx_model_copy_rows(cx, "model: d residual", ws[WS_DA], dx, R * C)))
        return st;
    return pfx_model_norm_bwd(cx, l, PFX_W_NORM1, R, cx->hidden[l], WS_MEAN1, WS_RSTD1, ws[WS_DLN],
                              dx, true);
}
