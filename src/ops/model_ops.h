/*
 * The numerical pieces of whole decoder-only models (GPT-2, Llama family)
 * around the attention and the dense products: token ids, embeddings,
 * LayerNorm / RMSNorm, activations, SwiGLU, bias, RoPE, half- and
 * bfloat16-storage weights, the fused causal-LM cross-entropy and the last-row gather.
 * Internal, not installed; the math is docs/design.md, "Whole models".
 *
 * Operands. Activations (hidden states, norm outputs, MLP values, logits,
 * gradients) are float32. Frozen weights (embedding tables, norm weights and
 * biases, linear biases, inv_freq excepted) may be stored float32, half or
 * bfloat16; half is read with vload_half (core OpenCL 1.2, no cl_khr_fp16),
 * bfloat16 widened by a 16-bit shift, compute is
 * float32. A matrix operand is a pfx_mat: a view of rows x cols elements of a
 * tensor (any shape; only its storage, dtype, runtime and element count are
 * used), row r starting at element offset + r * ld. A vector (per-row
 * statistics, per-row losses, a bias) is a pfx_mat of one column (PFX_VEC).
 *
 * Every op validates all of its arguments before it enqueues anything: a NULL
 * runtime or tensor (PFX_ERROR_NULL_ARGUMENT), a zero or inconsistent size,
 * ld < cols (PFX_ERROR_INVALID_SHAPE), a view past the end of its tensor or an
 * id / label / position beyond its table (PFX_ERROR_OUT_OF_RANGE), an
 * activation stored as half or a weight of an unknown dtype
 * (PFX_ERROR_DTYPE_MISMATCH), a tensor of another runtime
 * (PFX_ERROR_RUNTIME_MISMATCH), an output that overlaps an input where the op
 * is not documented as in-place (PFX_ERROR_ALIASING), a non-finite eps
 * (PFX_ERROR_NOT_FINITE); pfx_last_error(rt) names the op and the argument
 * ("layernorm: x ..."). Work is enqueued on the runtime's in-order queue; the
 * calls return without waiting. Reductions (norm statistics, softmax) use a
 * fixed-order tree per row: results are bit-identical run after run, and no
 * op uses atomics.
 */
#ifndef PFX_OPS_MODEL_OPS_H
#define PFX_OPS_MODEL_OPS_H

#include "internal.h"
#include "gemm.h"

/* ---- views ---- */

typedef struct pfx_mat {
    const pfx_tensor *t; /* storage; never owned (outputs are written through it) */
    size_t offset;       /* element offset of row 0 */
    size_t rows, cols;
    size_t ld; /* elements between two rows, >= cols */
} pfx_mat;

/* rows x cols at offset, row stride ld. */
static inline pfx_mat pfx_mat_of(const pfx_tensor *t, size_t offset, size_t rows, size_t cols,
                                 size_t ld)
{
    pfx_mat m = { t, offset, rows, cols, ld };
    return m;
}
/* Contiguous rows x cols from element 0. */
#define PFX_MAT(t, rows, cols) pfx_mat_of((t), 0, (rows), (cols), (cols))
/* n contiguous elements at offset, as an n x 1 column. */
#define PFX_VEC(t, offset, n) pfx_mat_of((t), (offset), (n), 1, 1)

/* ---- token ids and labels: int32 on the device, mirrored on the host ---- */

/* Ids live in a device buffer of int32 plus a host copy, so that every op
 * checks the range of the ids it reads before it enqueues (the values come
 * from the host in the first place: prompts, labels). */
typedef struct pfx_ids {
    pfx_runtime *rt;
    cl_mem mem;    /* int32 [count] */
    int32_t *host; /* the same values */
    size_t count;
    cl_event pending; /* the last upload from host, or NULL */
} pfx_ids;

/* An id buffer of count (>= 1) entries, all 0. */
pfx_status pfx_ids_create(pfx_runtime *rt, size_t count, pfx_ids **out);
/* Writes src[0..n) at [offset, offset + n) (host copy now; the device copy
 * is uploaded from it without blocking: the next write waits for the last
 * upload before it changes the host copy). */
pfx_status pfx_ids_write(pfx_ids *ids, size_t offset, size_t n, const int32_t *src);
/* NULL-safe; sets *ids to NULL. */
void pfx_ids_destroy(pfx_ids **ids);

/* Label value that the cross-entropy does not count (HF's ignore_index). */
#define PFX_LABEL_IGNORE (-100)

/* ---- embeddings ---- */

/* out row r = b * tokens + t (r < batch * tokens) receives
 *   wte[ids[r]] + (wpe ? wpe[pos0 + t] : 0),
 * ids read from entries [0, batch * tokens) of `ids`. wte: [V, C] (rows V,
 * cols C; F32, F16, BF16 or Q8_0), wpe: [Pmax, C] or NULL (GPT-2's learned positions;
 * pos0 + tokens <= Pmax, else PFX_ERROR_OUT_OF_RANGE), out: F32
 * [batch * tokens, C]. An id outside [0, V): PFX_ERROR_OUT_OF_RANGE naming
 * the entry. */
pfx_status pfx_op_embedding(pfx_runtime *rt, const pfx_ids *ids, size_t batch, size_t tokens,
                            pfx_mat wte, const pfx_mat *wpe, size_t pos0, pfx_mat out);

/* The token table's gradient from dout (F32 [batch * tokens, C], the
 * gradient of the embedding output), ADDED into dwte (F32 [V, C]): row
 * ids[r] receives dout row r. Each element is one work-item's sum over its
 * rows in ascending order (no atomics): deterministic. The ids are read from
 * their host copy (a gather plan is uploaded per call). dwte does not
 * overlap dout. */
pfx_status pfx_op_embedding_backward(pfx_runtime *rt, const pfx_ids *ids, size_t batch,
                                     size_t tokens, pfx_mat dout, pfx_mat dwte);

/* GPT-2's learned positions' gradient, ADDED into dwpe (F32 [Pmax, C]): row
 * pos0 + t receives the sum of dout's rows of position t, items in order. */
pfx_status pfx_op_position_backward(pfx_runtime *rt, size_t batch, size_t tokens, pfx_mat dout,
                                    pfx_mat dwpe, size_t pos0);

/* ---- normalization ---- */

/* LayerNorm over each row of x ([R, C] F32):
 *   mean = sum(x)/C, var = sum((x - mean)^2)/C, rstd = 1/sqrt(var + eps),
 *   y = (x - mean) * rstd * w + b,
 * w, b: [C] vectors (PFX_VEC; F32, F16 or BF16; b may be NULL). mean and rstd: F32
 * [R] vectors kept for the backward, or both NULL. y may be x (in place). */
pfx_status pfx_op_layernorm_forward(pfx_runtime *rt, pfx_mat x, pfx_mat w, const pfx_mat *b,
                                    float eps, pfx_mat y, const pfx_mat *mean, const pfx_mat *rstd);

/* dX of LayerNorm (weights frozen): with xhat = (x - mean) * rstd, g = dy * w,
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
 * written (accumulate false) or added to dx (accumulate true: the residual
 * stream's gradient). x, dy, dx: F32 [R, C]; mean, rstd from the forward.
 * dx must not overlap x or dy. */
pfx_status pfx_op_layernorm_backward(pfx_runtime *rt, pfx_mat x, pfx_mat w, pfx_mat mean,
                                     pfx_mat rstd, pfx_mat dy, pfx_mat dx, bool accumulate);

/* RMSNorm (Llama): rstd = 1/sqrt(sum(x^2)/C + eps), y = x * rstd * w.
 * rstd: F32 [R] or NULL. y may be x. */
pfx_status pfx_op_rmsnorm_forward(pfx_runtime *rt, pfx_mat x, pfx_mat w, float eps, pfx_mat y,
                                  const pfx_mat *rstd);

/* dX of RMSNorm: xhat = x * rstd, g = dy * w,
 *   dx = rstd * (g - xhat * mean(g * xhat)),  written or accumulated.
 * dx must not overlap x or dy. */
pfx_status pfx_op_rmsnorm_backward(pfx_runtime *rt, pfx_mat x, pfx_mat w, pfx_mat rstd, pfx_mat dy,
                                   pfx_mat dx, bool accumulate);

/* The norm's weight and bias gradients, xhat = (x - mean) * rstd (x * rstd
 * for RMSNorm: mean NULL):
 *   dw[c] = sum_r dy[r, c] xhat[r, c],  db[c] = sum_r dy[r, c] (db may be NULL),
 * written (accumulate false) or added. x, dy: F32 [R, C]; mean, rstd: F32
 * [R] from the forward; dw, db: F32 [C], overlapping no input nor each
 * other. One work-item a column, the rows in order (deterministic). */
pfx_status pfx_op_norm_param_grad(pfx_runtime *rt, pfx_mat x, const pfx_mat *mean, pfx_mat rstd,
                                  pfx_mat dy, pfx_mat dw, const pfx_mat *db, bool accumulate);

/* ---- activations ---- */

typedef enum pfx_activation {
    PFX_ACT_GELU_TANH =
        0, /* "gelu_new", "gelu_pytorch_tanh": 0.5 u (1 + tanh(sqrt(2/pi)(u + 0.044715 u^3))) */
    PFX_ACT_GELU = 1, /* "gelu": 0.5 u (1 + erf(u / sqrt(2))) */
    PFX_ACT_RELU = 2, /* "relu": max(u, 0) (derivative 0 at u = 0) */
    PFX_ACT_SILU = 3, /* "silu", "swish": u / (1 + exp(-u)) */
} pfx_activation;

/* Maps a config's activation name (activation_function, hidden_act) to an
 * activation; any other name (or NULL) is PFX_ERROR_UNSUPPORTED naming it.
 * rt may be NULL (the message goes to pfx_last_error(NULL)). */
pfx_status pfx_activation_parse(pfx_runtime *rt, const char *name, pfx_activation *out);
/* The canonical name of an activation ("gelu_new", "gelu", "relu", "silu"). */
const char *pfx_activation_name(pfx_activation act);

/* y = act(x) elementwise over [R, C] F32 views; y may be x. */
pfx_status pfx_op_activation_forward(pfx_runtime *rt, pfx_activation act, pfx_mat x, pfx_mat y);

/* dx = act'(x) * dy, x the forward's input; dx may be dy (not x). */
pfx_status pfx_op_activation_backward(pfx_runtime *rt, pfx_activation act, pfx_mat x, pfx_mat dy,
                                      pfx_mat dx);

/* SwiGLU: out = silu(gate) * up over [R, C] F32 views (gate and up may be two
 * halves of one fused GEMM output through ld). out may be gate or up. */
pfx_status pfx_op_swiglu_forward(pfx_runtime *rt, pfx_mat gate, pfx_mat up, pfx_mat out);

/* Backward of SwiGLU: dgate = dout * up * silu'(gate), dup = dout * silu(gate),
 * silu'(u) = s (1 + u (1 - s)), s = sigmoid(u). dgate may be gate and dup
 * may be up (each element is read before it is written); dout must not
 * overlap dgate or dup. */
pfx_status pfx_op_swiglu_backward(pfx_runtime *rt, pfx_mat gate, pfx_mat up, pfx_mat dout,
                                  pfx_mat dgate, pfx_mat dup);

/* ---- bias ---- */

/* y[r, c] += bias[c] over an [R, C] F32 view; bias: a [C] vector (F32, F16 or BF16,
 * e.g. PFX_VEC(c_attn_bias, C, C) for the key slice of GPT-2's fused bias).
 * The gradient of y passes to the input unchanged. */
pfx_status pfx_op_bias_add(pfx_runtime *rt, pfx_mat y, pfx_mat bias);

/* The bias's gradient: db[c] = sum_r dy[r, c] (accumulate: added), dy F32
 * [R, C], db an F32 [C] vector not overlapping dy. One work-item a column,
 * the rows in order (deterministic). */
pfx_status pfx_op_bias_grad(pfx_runtime *rt, pfx_mat dy, pfx_mat db, bool accumulate);

/* ---- column blocks (the fused Q/K/V projection) ---- */

#define PFX_COLUMN_PARTS_MAX 3

/* y[i] = columns [c_i, c_i + y[i].cols) of x (c_i: the widths before it),
 * plus that slice of bias when bias is not NULL ([x.cols], F32, F16 or BF16):
 * one product's output split into Q, K and V with their biases. The parts'
 * widths add up to x.cols, every view has x's rows, the parts overlap
 * neither x, the bias nor each other. 1 <= parts <= PFX_COLUMN_PARTS_MAX. */
pfx_status pfx_op_split_columns(pfx_runtime *rt, pfx_mat x, const pfx_mat *bias, size_t parts,
                                const pfx_mat *y);

/* The reverse without a bias: x = y[0] | y[1] | ... side by side (the Q,
 * K, V gradients as one for the projection's backward product); x overlaps
 * no part. */
pfx_status pfx_op_join_columns(pfx_runtime *rt, size_t parts, const pfx_mat *y, pfx_mat x);

/* ---- RoPE (HF rotate-half) ---- */

typedef enum pfx_rope_type {
    PFX_ROPE_DEFAULT = 0, /* inv_freq_i = theta^(-2i/D) */
    PFX_ROPE_LLAMA3 = 1,  /* rope_scaling {"rope_type": "llama3", ...} */
} pfx_rope_type;

typedef struct pfx_rope_params {
    double theta;    /* rope_theta (> 0) */
    size_t head_dim; /* D (even, >= 2) */
    pfx_rope_type type;
    /* llama3 only: */
    double factor;                           /* > 0 */
    double low_freq_factor;                  /* > 0 */
    double high_freq_factor;                 /* > low_freq_factor */
    double original_max_position_embeddings; /* > 0 */
} pfx_rope_params;

/* Host helper: inv_freq[i], i < D/2, as transformers computes it
 * (_compute_default_rope_parameters, _compute_llama3_parameters): default
 * theta^(-2i/D); llama3 with wavelen = 2 pi / inv_freq,
 * lo = orig / low_freq_factor, hi = orig / high_freq_factor: wavelen > lo:
 * inv_freq / factor; hi <= wavelen <= lo: (1 - s) inv_freq / factor +
 * s inv_freq with s = (orig / wavelen - low_freq_factor) /
 * (high_freq_factor - low_freq_factor); wavelen < hi: inv_freq. Computed in
 * double, rounded to float. Bad parameters: PFX_ERROR_INVALID_ARGUMENT (rt
 * may be NULL). */
pfx_status pfx_rope_inv_freq(pfx_runtime *rt, const pfx_rope_params *p, float *inv_freq);

/* In place on x ([B * N, H * D] F32 rows in BNHD order: row b * N + t holds
 * the H heads of token t of item b, head h at columns h*D .. h*D+D-1):
 * angle a_d = (float)(pos0 + t) * inv_freq[d] (float32 product, as HF), and
 * for d < D/2, with (x1, x2) = (x_d, x_{d+D/2}):
 *   forward:  x_d = x1 cos a - x2 sin a,  x_{d+D/2} = x2 cos a + x1 sin a;
 *   backward: the rotation by -a (the transpose), applied to a gradient.
 * inv_freq: F32 [D/2] vector on the device (from pfx_rope_inv_freq). */
pfx_status pfx_op_rope_forward(pfx_runtime *rt, pfx_mat x, size_t batch, size_t tokens,
                               size_t heads, size_t head_dim, size_t pos0, pfx_mat inv_freq);
pfx_status pfx_op_rope_backward(pfx_runtime *rt, pfx_mat x, size_t batch, size_t tokens,
                                size_t heads, size_t head_dim, size_t pos0, pfx_mat inv_freq);

/* ---- weights stored as half, bfloat16 or Q8_0 ---- */

/* dst (F32 [R, C] view) = src (F32, F16, BF16 or Q8_0 [R, C] view) converted to float. */
pfx_status pfx_op_to_float(pfx_runtime *rt, pfx_mat src, pfx_mat dst);

/* dst (F32, F16 or BF16 [R, C] view) = src (F32 [R, C] view) stored in dst's
 * dtype, rounded to nearest even (a half KV cache's new rows). */
pfx_status pfx_op_from_float(pfx_runtime *rt, pfx_mat src, pfx_mat dst);

/*
 * C[m x n] = alpha * A op(W) + beta * C with a frozen weight W of either
 * storage; A, C float32 operands as in pfx_gemm (A m x k, never transposed).
 *   trans_w false: W is k x n (rows k, ld >= n; GPT-2 Conv1D [in, out]),
 *   trans_w true:  W is n x k (rows n, ld >= k; Llama Linear [out, in], the
 *                  tied LM head [V, C]).
 * F32 W: one SGEMM. F16, BF16 or Q8_0 W (Q8_0: the view starts on a block
 * and, over several rows, its row stride is whole blocks): on the host
 * backend a few rows (m <= PFX_GEMM_ROWS_MAX) read W as stored
 * (gemm_rows.h); else blocks of output columns n0..n0+nb are converted
 * into `workspace` (F32, at least k elements; nb = its element count / k)
 * and multiplied by SGEMM, block after block, so a 16-bit weight never needs
 * a float32 copy of its whole size. workspace may be NULL for an F32 W.
 */
pfx_status pfx_gemm_weight(pfx_runtime *rt, const char *what, size_t m, size_t n, size_t k,
                           float alpha, pfx_gemm_operand a, pfx_mat w, bool trans_w, float beta,
                           pfx_gemm_operand c, const pfx_tensor *workspace);

/* ---- causal-LM loss, fused and chunked ---- */

/*
 * For the R rows of one chunk of logits (F32 [R, V] view) with their labels
 * at entries [label0, label0 + R) of `labels` (already shifted: the label of
 * row t is the token at t + 1; PFX_LABEL_IGNORE or any value in [0, V)):
 *   row_loss[r] = logsumexp(logits[r]) - logits[r, label]  (0 for ignored
 *                 rows), F32 [R] vector, or NULL;
 *   with grad:    logits[r] <- (softmax(logits[r]) - onehot(label)) / count
 *                 in place (0 for ignored rows), else logits are unchanged.
 * count is the number of counted labels in the whole batch (>= the counted
 * labels of this chunk, >= 1); the loss is sum(row_loss) / count, summed by
 * the caller in a fixed order. Max-subtracted, fixed-order reductions, one
 * work-group per row: deterministic. A label outside [0, V) that is not
 * PFX_LABEL_IGNORE: PFX_ERROR_OUT_OF_RANGE.
 */
pfx_status pfx_op_cross_entropy(pfx_runtime *rt, pfx_mat logits, const pfx_ids *labels,
                                size_t label0, size_t count, bool grad, const pfx_mat *row_loss);

/* Host helper: HF's shift of causal-LM labels. shifted[b * tokens + t] =
 * labels[b * tokens + t + 1] for t < tokens - 1, PFX_LABEL_IGNORE for the
 * last position of each item; returns the number of counted (not ignored)
 * entries, the `count` of pfx_op_cross_entropy. shifted may not be labels. */
size_t pfx_labels_shift(const int32_t *labels, size_t batch, size_t tokens, int32_t *shifted);

/* ---- generation ---- */

/* out row b ([batch, C] F32 view) = hidden row b * tokens + lengths[b] - 1
 * (hidden: F32 [batch * tokens, C]); lengths: host [batch], 1..tokens. */
pfx_status pfx_op_gather_last(pfx_runtime *rt, pfx_mat hidden, size_t batch, size_t tokens,
                              const int32_t *lengths, pfx_mat out);

#endif
