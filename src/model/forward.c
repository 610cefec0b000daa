/* The whole-model passes: forward (logits, last logits, hidden states),
 * causal-LM loss, and backward to the prefixes, gains and weights, each
 * checked first (validate.c), over the blocks of block.c. The backward reads
 * each block's kept activations, or, with the context's recompute, runs the block's
 * forward again from its kept input first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"

/* Embeddings and blocks 0..upto-1: hidden[0..upto] hold the residual streams. */
static pfx_status run_blocks_upto(pfx_context *cx, const pfx_model_batch *batch,
                                  const pfx_model_call *c, size_t upto)
{
    const pfx_model *m = cx->model;
    const pfx_model_shape *s = &m->cfg.shape;
    pfx_status st = pfx_ids_write(cx->ids, 0, c->R, batch->ids);
    if (st != PFX_SUCCESS)
        return st;
    const pfx_tensor *wpe = m->global[PFX_W_POS];
    pfx_mat pos =
        wpe ? PFX_MAT(wpe, s->max_positions, s->hidden) : PFX_MAT(m->global[PFX_W_EMBED], 1, 1);
    st = pfx_op_embedding(m->rt, cx->ids, c->B, c->N,
                          PFX_MAT(m->global[PFX_W_EMBED], s->vocab, s->hidden), wpe ? &pos : NULL,
                          c->P, PFX_MAT(cx->hidden[0], c->R, s->hidden));
    if (st == PFX_SUCCESS) /* training: embd_pdrop on wte + wpe, in place */
        st = pfx_model_drop_rows(cx, 0, PFX_DROP_EMBED, c->R, cx->hidden[0], NULL, cx->hidden[0]);
    for (size_t l = 0; l < upto && st == PFX_SUCCESS; l++)
        st = pfx_model_block_forward(cx, l, c, true);
    return st;
}

pfx_status pfx_model_final_norm(pfx_context *cx, size_t R)
{
    const pfx_model *m = cx->model;
    return pfx_model_norm_fwd(cx, 0, PFX_W_NORM_F, PFX_W_NORM_F_B, R,
                              cx->hidden[m->cfg.shape.layers], WS_MEANF, WS_RSTDF);
}

pfx_status pfx_model_head(pfx_context *cx, const pfx_tensor *x, size_t rows, pfx_tensor *logits)
{
    const pfx_model *m = cx->model;
    pfx_model_lin head = pfx_model_head_lin(m);
    return pfx_model_lin_fwd(cx, "model: lm_head", &head, rows, x, 0, logits, 0, 0.0f, false);
}

/* Embeddings and every block: hidden[0..L] hold the residual streams. */
static pfx_status run_blocks(pfx_context *cx, const pfx_model_batch *batch, const pfx_model_call *c)
{
    const pfx_model *m = cx->model;
    return run_blocks_upto(cx, batch, c, m->cfg.shape.layers);
}

static pfx_status final_norm(pfx_context *cx, const pfx_model_call *c)
{
    const pfx_model *m = cx->model;
    return pfx_model_norm_fwd(cx, 0, PFX_W_NORM_F, PFX_W_NORM_F_B, c->R,
                              cx->hidden[m->cfg.shape.layers], WS_MEANF, WS_RSTDF);
}

pfx_status pfx_model_forward(pfx_context *ctx, const pfx_model_batch *batch,
                             const pfx_model_prefix *prefix, pfx_tensor *logits)
{
    const pfx_model *model = pfx_context_model(ctx);
    static const char fn[] = "model_forward";
    pfx_model_call c;
    pfx_status st = pfx_model_check_call(ctx, fn, batch, prefix, &c);
    if (st == PFX_SUCCESS)
        st =
            pfx_model_check_output(ctx, fn, "logits", logits, c.R, model->cfg.shape.vocab, "V", &c);
    if (st == PFX_SUCCESS)
        st = run_blocks(ctx, batch, &c);
    if (st == PFX_SUCCESS)
        st = final_norm(ctx, &c);
    if (st == PFX_SUCCESS) {
        pfx_model_lin head = pfx_model_head_lin(model);
        st = pfx_model_lin_fwd(ctx, "model: lm_head", &head, c.R, ctx->ws[WS_LN], 0, logits, 0,
                               0.0f, false);
    }
    return st;
}

pfx_status pfx_model_last_logits(pfx_context *ctx, const pfx_model_batch *batch,
                                 const pfx_model_prefix *prefix, pfx_tensor *logits)
{
    const pfx_model *model = pfx_context_model(ctx);
    static const char fn[] = "model_last_logits";
    pfx_model_call c;
    pfx_status st = pfx_model_check_call(ctx, fn, batch, prefix, &c);
    if (st == PFX_SUCCESS)
        st =
            pfx_model_check_output(ctx, fn, "logits", logits, c.B, model->cfg.shape.vocab, "V", &c);
    if (st != PFX_SUCCESS)
        return st;
    int32_t *lens = malloc(c.B * sizeof(int32_t));
    if (!lens)
        return pfx_error(model->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    for (size_t b = 0; b < c.B; b++)
        lens[b] = c.lens ? c.lens[b] : (int32_t)c.N;
    const size_t C = model->cfg.shape.hidden;
    if ((st = run_blocks(ctx, batch, &c)) == PFX_SUCCESS &&
        (st = final_norm(ctx, &c)) == PFX_SUCCESS)
        st = pfx_op_gather_last(model->rt, PFX_MAT(ctx->ws[WS_LN], c.R, C), c.B, c.N, lens,
                                PFX_MAT(ctx->ws[WS_DA], c.B, C));
    free(lens);
    if (st == PFX_SUCCESS) {
        pfx_model_lin head = pfx_model_head_lin(model);
        st = pfx_model_lin_fwd(ctx, "model: lm_head", &head, c.B, ctx->ws[WS_DA], 0, logits, 0,
                               0.0f, false);
    }
    return st;
}

pfx_status pfx_model_hidden_states(pfx_context *ctx, const pfx_model_batch *batch,
                                   const pfx_model_prefix *prefix, pfx_tensor *hidden)
{
    const pfx_model *model = pfx_context_model(ctx);
    static const char fn[] = "model_hidden_states";
    pfx_model_call c;
    pfx_status st = pfx_model_check_call(ctx, fn, batch, prefix, &c);
    const size_t C = st == PFX_SUCCESS ? model->cfg.shape.hidden : 0;
    if (st == PFX_SUCCESS)
        st = pfx_model_check_output(ctx, fn, "hidden", hidden, c.R, C, "C", &c);
    if (st == PFX_SUCCESS &&
        (hidden->ndim != 3 || hidden->shape[0] != c.B || hidden->shape[1] != c.N))
        st = pfx_error(model->rt, PFX_ERROR_INVALID_SHAPE,
                       "%s: hidden must be [B=%zu, N=%zu, C=%zu]", fn, c.B, c.N, C);
    if (st == PFX_SUCCESS)
        st = run_blocks(ctx, batch, &c);
    if (st == PFX_SUCCESS)
        st = final_norm(ctx, &c);
    if (st == PFX_SUCCESS)
        st = pfx_model_copy_rows(ctx, "model: hidden states", ctx->ws[WS_LN], hidden, c.R * C);
    return st;
}

/* The head and the per-row losses (WS_ROWLOSS) in chunks of rows; with
 * `grad` the gradient of the final norm's output goes to WS_DH1, and with
 * `dhead` the head's weight gradient there (written, or added with
 * `accumulate`). Enqueues only: read_loss waits for the value. */
static pfx_status head_loss(pfx_context *cx, const pfx_model_call *c, bool grad, pfx_tensor *dhead,
                            bool accumulate)
{
    const pfx_model *m = cx->model;
    const size_t V = m->cfg.shape.vocab;
    pfx_model_lin head = pfx_model_head_lin(m);
    pfx_status st = PFX_SUCCESS;
    /* chunks of equal rows (1024 rows at most 333 a chunk: 4 of 256, not 333,
     * 333, 333 and a product of 25 rows, slow in the BLAS) */
    const size_t chunks = pfx_ceil_div(c->R, cx->chunk_rows), step = pfx_ceil_div(c->R, chunks);
    for (size_t r0 = 0; r0 < c->R && st == PFX_SUCCESS; r0 += step) {
        size_t rows = c->R - r0 < step ? c->R - r0 : step;
        pfx_mat rl = PFX_VEC(cx->ws[WS_ROWLOSS], r0, rows);
        if ((st = pfx_model_lin_fwd(cx, "model: lm_head", &head, rows, cx->ws[WS_LN], r0,
                                    cx->ws[WS_LOGITS], 0, 0.0f, false)))
            break;
        double t0 = pfx_model_prof_begin(cx);
        st = pfx_model_prof_end(cx, PFX_MODEL_PART_LOSS, t0,
                                pfx_op_cross_entropy(m->rt, PFX_MAT(cx->ws[WS_LOGITS], rows, V),
                                                     cx->labels, r0, c->counted, grad, &rl));
        if (st != PFX_SUCCESS)
            break;
        if (grad)
            st = pfx_model_lin_bwd(cx, "model: d lm_head", &head, rows, cx->ws[WS_LOGITS], 0,
                                   cx->ws[WS_DH1], r0, 0.0f);
        if (st == PFX_SUCCESS && grad && dhead)
            st = pfx_model_lin_grads(cx, "model: dW lm_head", &head, rows, cx->ws[WS_LN], r0,
                                     cx->ws[WS_LOGITS], 0, dhead, NULL, accumulate || r0 > 0);
    }
    return st;
}

/* The mean of head_loss's per-row losses over the counted labels: the one
 * blocking read of a loss or a backward (at the end, after everything else
 * is enqueued). */
static pfx_status read_loss(pfx_context *cx, const pfx_model_call *c, double *loss)
{
    const pfx_model *m = cx->model;
    float *host = malloc(c->R * sizeof(float));
    if (!host)
        return pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    pfx_status st = pfx_tensor_read(cx->ws[WS_ROWLOSS], 0, c->R, host);
    double sum = 0.0;
    for (size_t i = 0; i < c->R; i++)
        sum += host[i];
    free(host);
    if (st == PFX_SUCCESS)
        *loss = sum / (double)c->counted;
    return st;
}

pfx_status pfx_model_loss(pfx_context *ctx, const pfx_model_batch *batch,
                          const pfx_model_prefix *prefix, double *loss)
{
    const pfx_model *model = pfx_context_model(ctx);
    static const char fn[] = "model_loss";
    pfx_model_call c;
    pfx_status st = pfx_model_check_call(ctx, fn, batch, prefix, &c);
    if (st == PFX_SUCCESS && !loss)
        st = pfx_error(model->rt, PFX_ERROR_NULL_ARGUMENT, "%s: loss is NULL", fn);
    if (st == PFX_SUCCESS)
        st = pfx_model_write_labels(ctx, fn, batch, &c);
    if (st == PFX_SUCCESS)
        st = run_blocks(ctx, batch, &c);
    if (st == PFX_SUCCESS)
        st = final_norm(ctx, &c);
    if (st == PFX_SUCCESS)
        st = head_loss(ctx, &c, false, NULL, false);
    if (st == PFX_SUCCESS)
        st = read_loss(ctx, &c, loss);
    return st;
}

static pfx_status backward_pass(pfx_context *ctx, const pfx_model_batch *batch,
                                const pfx_model_call *cp, const pfx_model_grads *grads);

pfx_status pfx_model_backward(pfx_context *ctx, const pfx_model_batch *batch,
                              const pfx_model_prefix *prefix, const pfx_model_grads *grads,
                              double *loss)
{
    static const char fn[] = "model_backward";
    pfx_model_call c;
    pfx_status st = pfx_model_check_call(ctx, fn, batch, prefix, &c);
    if (st == PFX_SUCCESS)
        st = pfx_model_check_grads(ctx, fn, &c, grads);
    if (st == PFX_SUCCESS)
        st = pfx_model_check_dropout(ctx, fn, grads ? grads->dropout : NULL);
    if (st == PFX_SUCCESS)
        st = pfx_model_write_labels(ctx, fn, batch, &c);
    if (st != PFX_SUCCESS)
        return st;
    /* this pass's masks (every block, a recomputed one too); cleared on the way out */
    ctx->drop = grads ? grads->dropout : NULL;
    ctx->drop_tokens = c.N;
    st = backward_pass(ctx, batch, &c, grads);
    ctx->drop = NULL;
    if (st == PFX_SUCCESS && loss)
        st = read_loss(ctx, &c, loss);
    return st;
}

/* The training pass of pfx_model_backward, its arguments checked. */
static pfx_status backward_pass(pfx_context *ctx, const pfx_model_batch *batch,
                                const pfx_model_call *cp, const pfx_model_grads *grads)
{
    const pfx_model *model = pfx_context_model(ctx);
    const pfx_model_call c = *cp;
    pfx_status st;
    const pfx_model_shape *s = &model->cfg.shape;
    const size_t L = s->layers, C = s->hidden;
    const bool acc = grads && grads->accumulate;
    pfx_tensor *g_wte = pfx_model_pgrad(model, grads, 0, PFX_W_EMBED),
               *g_wpe = pfx_model_pgrad(model, grads, 0, PFX_W_POS);
    pfx_tensor *g_head =
        s->tied_embeddings ? g_wte : pfx_model_pgrad(model, grads, 0, PFX_W_LM_HEAD);
    if ((st = run_blocks(ctx, batch, &c)) || (st = final_norm(ctx, &c)) ||
        (st = head_loss(ctx, &c, true, g_head, acc)) ||
        (st = pfx_model_norm_bwd(ctx, 0, PFX_W_NORM_F, c.R, ctx->hidden[L], WS_MEANF, WS_RSTDF,
                                 ctx->ws[WS_DH1], ctx->ws[WS_DH0], false)) ||
        (st = pfx_model_norm_grads(ctx, 0, c.R, ctx->hidden[L], WS_MEANF, WS_RSTDF, ctx->ws[WS_DH1],
                                   pfx_model_pgrad(model, grads, 0, PFX_W_NORM_F),
                                   pfx_model_pgrad(model, grads, 0, PFX_W_NORM_F_B), acc)))
        return st;
    /* the gradient of hidden[l + 1] sits in DH0 for l = L - 1, then
     * alternates; block 0 passes one on only to the embeddings */
    const bool want_embed = g_wte || g_wpe;
    const pfx_tensor *d_embed = ctx->ws[(L - 1) % 2 ? WS_DH0 : WS_DH1];
    for (size_t l = L; l-- > 0 && st == PFX_SUCCESS;) {
        const pfx_tensor *dy = ctx->ws[(L - 1 - l) % 2 ? WS_DH1 : WS_DH0];
        const pfx_tensor *dx = l || want_embed ? ctx->ws[(L - 1 - l) % 2 ? WS_DH0 : WS_DH1] : NULL;
        if (!ctx->p.recompute || (st = pfx_model_block_forward(ctx, l, &c, false)) == PFX_SUCCESS)
            st = pfx_model_block_backward(ctx, l, &c, dy, dx, grads);
    }
    if (st == PFX_SUCCESS && want_embed) {
        /* a tied head wrote the token embedding's gradient already */
        pfx_mat dout = PFX_MAT(d_embed, c.R, C);
        if (g_wte && !acc && !s->tied_embeddings)
            st = pfx_tensor_fill(g_wte, 0.0f);
        if (st == PFX_SUCCESS) /* through embd_pdrop's mask, in place */
            st = pfx_model_drop_rows(ctx, 0, PFX_DROP_EMBED, c.R, d_embed, NULL, d_embed);
        if (st == PFX_SUCCESS && g_wte)
            st = pfx_op_embedding_backward(model->rt, ctx->ids, c.B, c.N, dout,
                                           PFX_MAT(g_wte, s->vocab, C));
        if (st == PFX_SUCCESS && g_wpe && !acc)
            st = pfx_tensor_fill(g_wpe, 0.0f);
        if (st == PFX_SUCCESS && g_wpe)
            st = pfx_op_position_backward(model->rt, c.B, c.N, dout,
                                          PFX_MAT(g_wpe, s->max_positions, C), c.P);
    }
    return st;
}

/* ---- each layer's attention inputs (probs.c, head_stats.c) ---- */

pfx_status pfx_model_layer_attention(pfx_context *ctx, const char *fn, const pfx_model_batch *batch,
                                     const pfx_model_prefix *prefix, size_t layer,
                                     pfx_model_attention_visit visit, void *arg)
{
    const pfx_model *model = pfx_context_model(ctx);
    pfx_model_call c;
    pfx_status st = pfx_model_check_call(ctx, fn, batch, prefix, &c);
    if (st != PFX_SUCCESS)
        return st;
    const size_t L = model->cfg.shape.layers;
    if (layer != PFX_MODEL_EVERY_LAYER && layer >= L)
        return pfx_error(model->rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: layer %zu is not below the model's %zu layers", fn, layer, L);
    const size_t first = layer == PFX_MODEL_EVERY_LAYER ? 0 : layer;
    const size_t end = layer == PFX_MODEL_EVERY_LAYER ? L : layer + 1;
    /* blocks before `first` only; each visited block leaves its Q, K, V in the
     * workspace (the MLP after the attention reads none of them) and its
     * output for the next one */
    if ((st = run_blocks_upto(ctx, batch, &c, first)))
        return st;
    for (size_t l = first; l < end && st == PFX_SUCCESS; l++) {
        if ((st = pfx_model_block_forward(ctx, l, &c, l + 1 < end)))
            break;
        pfx_model_attn_views av = pfx_model_views(ctx, l, &c);
        pfx_attention_desc d = pfx_model_attn_desc(ctx, l, &c);
        pfx_attention_inputs in = { &av.q, &av.k, &av.v, c.P ? c.pre.keys[l] : NULL,
                                    c.P ? c.pre.values[l] : NULL };
        st = visit(model->rt, l, &d, &in, arg);
    }
    return st;
}
