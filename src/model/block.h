/* What the model's passes (forward.c), its blocks (block.c), its argument
 * checks (validate.c) and its profiling (profile.c) share. Internal. */
#ifndef PFX_MODEL_BLOCK_H
#define PFX_MODEL_BLOCK_H

#include "dropout.h"
#include "model_internal.h"

/* What one call computes with, after validation. */
typedef struct pfx_model_call {
    size_t B, N, R, P;
    const int32_t *lens;  /* NULL: every item has N tokens */
    pfx_model_prefix pre; /* a zeroed one for NULL */
    size_t counted;       /* labels the loss counts */
} pfx_model_call;

/* One dense product of a block: y[R, out] = x[R, in] op(W) (+ b). */
typedef struct pfx_model_lin {
    pfx_mat w;
    bool trans; /* W stored [out, in] (Linear) rather than [in, out] (Conv1D) */
    size_t in, out;
    bool has_b;
    pfx_mat b;
    bool head; /* the LM head (profiled apart) */
} pfx_model_lin;

/* Block l's attention tensors shaped for the attention calls. */
typedef struct pfx_model_attn_views {
    pfx_tensor q, k, v, o, lse, dq, dk, dv, d_o;
} pfx_model_attn_views;

/* ---- profiling (profile.c): a part's wall time while profiling is on ---- */
double pfx_model_prof_begin(pfx_context *cx);
/* Adds the time since t0 to `cat`; returns st. */
pfx_status pfx_model_prof_end(pfx_context *cx, pfx_model_part cat, double t0, pfx_status st);

/* ---- products, norms, attention (block.c) ---- */
/* A block's products: q | k | v, attention output, MLP input (GPT-2's c_fc,
 * Llama's up), Llama's gate, MLP output. */
typedef enum pfx_model_lin_which { L_QKV, L_O, L_UP, L_GATE, L_DOWN } pfx_model_lin_which;
/* Product `which` of block l: its weight view, orientation and bias. */
pfx_model_lin pfx_model_get_lin(const pfx_model *m, size_t l, pfx_model_lin_which which);
pfx_model_lin pfx_model_head_lin(const pfx_model *m);
/* y rows [y0, y0 + rows) = x rows [x0, ...) op(W) (+ b); beta 1 adds to y. */
pfx_status pfx_model_lin_fwd(pfx_context *cx, const char *what, const pfx_model_lin *f, size_t rows,
                             const pfx_tensor *x, size_t x0, const pfx_tensor *y, size_t y0,
                             float beta, bool bias);
pfx_status pfx_model_lin_bwd(pfx_context *cx, const char *what, const pfx_model_lin *f, size_t rows,
                             const pfx_tensor *dy, size_t dy0, const pfx_tensor *dx, size_t dx0,
                             float beta);
/* The gradient tensor of weight `role` of layer l, or NULL (frozen, or no gradients asked). */
pfx_tensor *pfx_model_pgrad(const pfx_model *m, const pfx_model_grads *g, size_t l,
                            pfx_weight_role role);
pfx_status pfx_model_lin_grads(pfx_context *cx, const char *what, const pfx_model_lin *f,
                               size_t rows, const pfx_tensor *x, size_t x0, const pfx_tensor *dy,
                               size_t dy0, pfx_tensor *dw, pfx_tensor *db, bool accumulate);
pfx_status pfx_model_copy_rows(pfx_context *cx, const char *what, const pfx_tensor *src,
                               const pfx_tensor *dst, size_t count);
pfx_status pfx_model_norm_fwd(pfx_context *cx, size_t l, pfx_weight_role w, pfx_weight_role b,
                              size_t rows, const pfx_tensor *x, int mean, int rstd);
pfx_status pfx_model_norm_bwd(pfx_context *cx, size_t l, pfx_weight_role w, size_t rows,
                              const pfx_tensor *x, int mean, int rstd, const pfx_tensor *dy,
                              const pfx_tensor *dx, bool accumulate);
pfx_status pfx_model_norm_grads(pfx_context *cx, size_t l, size_t rows, const pfx_tensor *x,
                                int mean, int rstd, const pfx_tensor *dy, pfx_tensor *dw,
                                pfx_tensor *db, bool accumulate);
/* Layer l's attention call: the gains of the call's prefix for l (the
 * structured gain scaled by r into m->dim_scaled). */
pfx_attention_desc pfx_model_attn_desc(const pfx_context *cx, size_t l, const pfx_model_call *c);
pfx_model_attn_views pfx_model_views(const pfx_context *cx, size_t l, const pfx_model_call *c);

/* ---- dropout (dropout.c): only inside a training pass ---- */
/* The probability of `site` of layer l in this pass (0: none) and, when
 * not 0, its mask's stream in *s. */
float pfx_model_drop(const pfx_context *cx, size_t l, pfx_dropout_site site, pfx_dropout_stream *s);
/* out = base + dropout(x) (base NULL: 0) at `site` of layer l over rows
 * [0, R) of C columns (items of the pass's tokens); nothing when the site's
 * p is 0 (out is then not written: the caller adds the undropped way). */
pfx_status pfx_model_drop_rows(pfx_context *cx, size_t l, pfx_dropout_site site, size_t R,
                               const pfx_tensor *x, const pfx_tensor *base, const pfx_tensor *out);
/* The dropout a training pass asks for is valid (probabilities, micro-batch, layers). */
pfx_status pfx_model_check_dropout(pfx_context *cx, const char *fn, const pfx_model_dropout *d);

/* ---- one block (block.c) ---- */
/* Block l from m->hidden[l]: every intermediate the backward reads goes to
 * the workspace; with `output` the block's result goes to hidden[l + 1]. */
pfx_status pfx_model_block_forward(pfx_context *cx, size_t l, const pfx_model_call *c, bool output);
/* From dy (the gradient of block l's output) to dx (of its input; NULL:
 * not needed), the prefixes' and gains' gradients and the weights' in g. */
pfx_status pfx_model_block_backward(pfx_context *cx, size_t l, const pfx_model_call *c,
                                    const pfx_tensor *dy, const pfx_tensor *dx,
                                    const pfx_model_grads *g);

/* ---- argument checks (validate.c), before anything is enqueued ---- */
/* The batch and prefix of a call into *c; fn names the entry point. */
pfx_status pfx_model_check_call(pfx_context *cx, const char *fn, const pfx_model_batch *batch,
                                const pfx_model_prefix *prefix, pfx_model_call *c);
/* An output tensor `what`: float32 on the model's runtime, rows x cols
 * elements (cols_name in the message), none of the prefixes. */
pfx_status pfx_model_check_output(pfx_context *cx, const char *fn, const char *what,
                                  const pfx_tensor *t, size_t rows, size_t cols,
                                  const char *cols_name, const pfx_model_call *c);
/* The shifted labels onto the device; c->counted set (none counted: an error). */
pfx_status pfx_model_write_labels(pfx_context *cx, const char *fn, const pfx_model_batch *batch,
                                  pfx_model_call *c);
pfx_status pfx_model_check_grads(pfx_context *cx, const char *fn, const pfx_model_call *c,
                                 const pfx_model_grads *g);

#endif
