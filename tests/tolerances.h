/*
 * Every tolerance the tests use, in one place. Errors are relative L2 norms,
 * ||ref - got|| / ||ref|| over a whole tensor (see rel_l2 in
 * reference/reference.h), against the double-precision reference.
 */
#ifndef PFX_TEST_TOLERANCES_H
#define PFX_TEST_TOLERANCES_H

/* Forward O and LSE, float32 storage and compute. */
#define TOL_FWD_F32 2e-5
/* Forward O with half storage for inputs and/or O (10-bit mantissa). */
#define TOL_FWD_F16 3e-3
/* Backward gradients (dQ, dK, dV, dKp, dVp, dgain, ddim_gain), float32. */
#define TOL_BWD_F32 1e-4
/* Backward with half storage of the inputs, O and dO (gradients float32):
 * Delta_i = dO_i . O_i is formed from a half-rounded O (2^-11 relative per
 * element) and dz_ij = p_ij (dp_ij - Delta_i) is a difference of similar
 * sized terms, so the rounding of O reaches the gradients amplified; the
 * reference sees the same half-rounded Q, K, V, dO but recomputes O exactly.
 * Measured up to 1.4e-4 (dgain, a sum over every row) on the suite's
 * problems; 2e-3 leaves headroom for other data while a real mistake (a wrong
 * term or factor) is O(1). */
#define TOL_BWD_F16 2e-3
/* Stats (entropy, top-k mass, prefix mass) and the probability map, float32. */
#define TOL_STATS_F32 1e-4
#define TOL_PROBS_F32 2e-5

/*
 * Prefix encoder and the CLBlast GEMM wrapper, float32: sums of up to a few
 * hundred products of values in [-1, 1] (sqrt(k) * 2^-24 ~ 2e-6 relative)
 * plus the device tanh (a few ulp). TOL_ENC_F32: one GEMM or the forward
 * (two GEMMs through tanh). TOL_ENC_BWD_F32: the backward, up to three
 * chained products (dE = ((dY W2) * tanh') W1). TOL_ENC_F16: prefixes stored
 * as half (10-bit mantissa, 2^-11 relative rounding).
 */
#define TOL_ENC_F32     2e-5
#define TOL_ENC_BWD_F32 5e-5
#define TOL_ENC_F16     2e-3
/* AdamW (parameters, m, v, gradient norm and clipping scale) after a few
 * steps, float32 on the device vs the double reference: each step adds a few
 * float roundings per element (relative 6e-8 each) and sqrt / division of up
 * to 3 ulp on OpenCL devices; the gradient norm is a float sum of ~25k squares
 * (relative error ~1e-6 with the tree reduction). A missing bias correction,
 * decay term or clipping factor is off by 1e-3 or more. */
#define TOL_ADAMW 1e-5

/*
 * Reference self-checks (double precision throughout).
 * TOL_REF_EXACT: two reference evaluations of the same math in a different
 * order (layouts, prefix as keys, bank vs shared).
 * Finite differences: central differences with step TOL_FD_STEP on float
 * inputs in [-1, 1] (a power of two, so x +- step stays nearly exact in
 * float; the test divides by the step actually taken). The truncation error is
 * O(step^2) ~ 1e-7 relative, rounding ~1e-13 / step; TOL_FD_REL sits between
 * them and far below any real derivative mistake (a missing factor or term is
 * O(1)).
 */
#define TOL_REF_EXACT 1e-12
#define TOL_FD_STEP   0x1p-10
#define TOL_FD_REL    1e-6

/*
 * Attention layer and stack (suite 'layer'), float32 on the device vs the
 * double reference: a projection GEMM (sums of C products, ~sqrt(C) 2^-24),
 * the attention (TOL_FWD_F32 / TOL_BWD_F32) and the output projection, so
 * errors compound over at most three products per layer and a few layers.
 * TOL_LAYER_FWD: Y (and the MSE loss); TOL_LAYER_BWD: dX, dKp, dVp, dgain,
 * weight gradients (measured below 6e-7 on the suite's problems; a missing
 * term or factor is O(1)).
 * The layer reference checks itself with central differences in double on
 * double inputs: step 1e-5 gives truncation ~1e-10 and rounding ~1e-11
 * relative; 1e-7 is far below any real derivative mistake.
 */
#define TOL_LAYER_FWD     2e-5
#define TOL_LAYER_BWD     1e-4
#define TOL_LAYER_FD_STEP 1e-5
#define TOL_LAYER_FD      1e-7

/*
 * Whole-model pieces (src/ops/model_ops.h), float32 compute against the
 * double reference fed the very values the device holds (half weights
 * half-rounded first, so half storage keeps the float32 bound).
 * TOL_OPS_F32: row reductions of up to a few thousand terms (norm statistics,
 * softmax sums: sqrt(n) * 2^-24 ~ 1e-6), device exp/log/tanh/erf/cos/sin of a
 * few ulp; a wrong term or factor is O(1e-2) or more.
 * TOL_OPS_GEMM: one SGEMM of a widened half weight (as TOL_ENC_F32).
 */
#define TOL_OPS_F32  1e-5
#define TOL_OPS_GEMM 2e-5
/* Whole models against transformers + PEFT (fixtures computed in float64 from
 * the stored weights): relative L2 over the valid positions' logits, and the
 * relative loss error. The double reference differs from HF only in the
 * float32 inv_freq (1 ulp); a float32 forward adds ~1e-6. */
#define TOL_HF_FIXTURE 1e-5

/*
 * Whole models (suite 'model'), float32 compute vs the double reference of
 * tests/reference/model_ref.h: per block a few GEMMs of up to ~60 products
 * (sqrt(k) 2^-24 each), two norms, the attention (TOL_FWD_F32 /
 * TOL_BWD_F32) and the MLP, over 2 or 3 blocks and the LM head; the
 * gradients add the backward of each block in reverse. TOL_MODEL_FWD: logits
 * and loss; TOL_MODEL_BWD: prefix and gain gradients. TOL_MODEL_F16: half
 * storage of weights read from F16/BF16 files (the reference sees the stored
 * values, so only the device's float32 compute differs; same bound, kept
 * apart in case a device converts half differently). Measured below 9e-7
 * on PoCL for every quantity of the suite; a wrong position, a rotated
 * prefix or a missing term is O(1e-1) or more.
 */
#define TOL_MODEL_FWD 1e-5
#define TOL_MODEL_BWD 2e-5
#define TOL_MODEL_F16 1e-5
/* Weight gradients, each tensor on its own: a sum over every row of the
 * batch of products already within TOL_MODEL_BWD (the bias and norm sums
 * of R terms add sqrt(R) 2^-24). */
#define TOL_MODEL_WGRAD 2e-5
/* Against transformers + PEFT (tests/fixtures/models): float32 on the device
 * vs float64 from the stored weights; the bound the model support is held to
 * (measured below 4e-7 on PoCL). */
#define TOL_MODEL_HF 1e-5
/* Folded gains (tests/fixtures/fold): the largest |logit| difference from
 * transformers' gain model (float64), with the gains, folded into the query
 * projection (one more float32 rounding of each scaled weight), and folded,
 * saved and loaded again. */
#define TOL_FOLD_HF 1e-5
/* Serving (generate.h): a serve step's next-token logits (prefill, or a
 * decode step against the KV cache through the split-K path) against
 * pfx_model_last_logits on the whole sequence, both float32 on the device:
 * the same products, the attention's sums in another order and split (a few
 * ulp each); a dropped gain or a wrong position is O(1e-2) or more. */
#define TOL_SERVE_F32 1e-5
/* The decode step with Q8_0 weights against the forward on the same
 * weights: the step quantizes each product's input rows to int8 blocks of
 * 32, as llama.cpp does (half a step of max / 127 a value, about 0.2 % of a
 * product's output), through every block and the head. */
#define TOL_SERVE_Q8_0 5e-2
/* Serving with the KV cache stored as half (TOL_SERVE_KV_F16) or bfloat16
 * (TOL_SERVE_KV_BF16) against the same steps on a float32 cache: every
 * cached key and value rounded to nearest even (2^-11, bfloat16 2^-8
 * relative), through the attention of every layer after it and the head.
 * Measured up to 1.4e-3 and 1.4e-2 on the tiny fixture models (both paths);
 * a row read in the wrong storage or at the wrong place is O(1). */
#define TOL_SERVE_KV_F16  3e-3
#define TOL_SERVE_KV_BF16 3e-2
/* Full training against PyTorch (tests/fixtures/train): the loss, each
 * weight's gradient as a tensor and the gains' against float64 torch from
 * the same float32 weights; TOL_TRAIN_STEPS: the weights after ten AdamW
 * steps, where a float32 gradient's rounding moves an update by up to
 * lr * (its relative error) and the moments carry it forward. */
#define TOL_TRAIN_HF    1e-5
#define TOL_TRAIN_STEPS 1e-5
/* Dropout (tests/test_model_dropout.c): a float32 gradient under a fixed
 * mask against central differences of the float32 loss (step 1e-2: the
 * truncation term and the loss's rounding over 2h, about 1e-4 relative
 * where the gradient is O(0.1)); the mean of a batch's items run alone
 * against the batch's loss (the same masks, the loss's sums in another
 * order). */
#define TOL_DROPOUT_FD     2e-2
#define TOL_DROPOUT_FD_ABS 2e-4
#define TOL_DROPOUT_SPLIT  1e-6

#endif
