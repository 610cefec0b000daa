/*
 * Double-precision plain-C reference for prefix attention with per-head gain,
 * forward, backward, stats and the probability map. Every kernel is judged
 * against it; it is the "math (the contract)" of docs/design.md written out as
 * straightforward loops, O(B * H * N * (P + M) * D), clarity over speed.
 *
 * The problem is described by the public pfx_attention_desc (dims, layouts,
 * causal, scale (0: 1 / sqrt(D)), gain_mode / gain / gain_ramp, dim_gain,
 * q_lens, kv_lens, bank_index, dropout with dropout_stream: the probabilities
 * times the mask factors of reference/dropout_ref.h before the product with V,
 * LSE undropped). Host arrays are float, in the device layouts:
 *   q, d_o, dq, o   : [B, H, N, D] (BHND) or [B, N, H, D] (BNHD) per
 *                     q_layout (q, dq) and o_layout (o, d_o)
 *   k, v, dk, dv    : [B, Hkv, M, D] or [B, M, Hkv, D] per kv_layout
 *   pk, pv, dpk, dpv: [Hkv, P, D] shared (bank_index == NULL) or
 *                     [T, Hkv, P, D] a bank, entry bank_index[b] for item b
 *   lse             : [B, H, N]
 * pk / pv may be NULL when P == 0. Outputs are double, overwritten (never
 * accumulated); rows that are hidden (i >= q_len[b] or no visible key) give
 * O = 0, LSE = -INFINITY and contribute no gradient.
 *
 * An invalid desc (H % Hkv != 0, a length outside its range, a bank index
 * outside [0, T), a missing gain) is a bug in the test: the reference prints
 * it and aborts.
 */
#ifndef PFX_TEST_REFERENCE_H
#define PFX_TEST_REFERENCE_H

#include <stddef.h>

#include "prefixcl/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A desc with the library's defaults (BHND, no gain, ramp 1, default scale,
 * no masks, shared prefix) and the given sizes; usable without the library. */
void ref_desc_init(pfx_attention_desc *d, size_t batch, size_t heads, size_t kv_heads,
                   size_t queries, size_t keys, size_t prefix_len, size_t head_dim);

/* Element counts of each tensor (bank_entries is ignored for a shared prefix). */
size_t ref_q_count(const pfx_attention_desc *d);  /* Q, O, dO, dQ: B*H*N*D */
size_t ref_kv_count(const pfx_attention_desc *d); /* K, V, dK, dV: B*Hkv*M*D */
size_t ref_prefix_count(const pfx_attention_desc *d, size_t bank_entries); /* [T,]Hkv*P*D */
size_t ref_lse_count(const pfx_attention_desc *d);                         /* B*H*N */

/* Offset of element (b, h, i, 0) of Q/dQ (q_layout) or O/dO (o_layout), of
 * (b, hk, t, 0) of K/V, of (entry, hk, p, 0) of the prefix. */
size_t ref_q_offset(const pfx_attention_desc *d, size_t b, size_t h, size_t i);
size_t ref_o_offset(const pfx_attention_desc *d, size_t b, size_t h, size_t i);
size_t ref_kv_offset(const pfx_attention_desc *d, size_t b, size_t hk, size_t t);
size_t ref_prefix_offset(const pfx_attention_desc *d, size_t entry, size_t hk, size_t p);

/* The logit factor c_h = scale * gamma(r * g_h) and the effective scale. */
double ref_scale(const pfx_attention_desc *d);
double ref_gain_factor(const pfx_attention_desc *d, size_t h);
/* c_h of item b with per-item gains (desc.item_gain_mode / item_gain), each
 * falling back to the per-call field; the forward honours them (and
 * item_dim_gain), the backward and the statistics refuse them. */
double ref_item_gain_factor(const pfx_attention_desc *d, size_t b, size_t h);

/* O (o_layout, double) and LSE ([B, H, N]); either may be NULL. */
void ref_attention_forward(const pfx_attention_desc *d, const float *q, const float *k,
                           const float *v, const float *pk, const float *pv, double *o,
                           double *lse);

/*
 * Exact gradients of L = sum(dO * O); O and LSE are recomputed in double.
 * Every output may be NULL (not computed). Shapes: dq like Q, dk/dv like K,
 * dpk/dpv like the prefix ([T, Hkv, P, D] with a bank, T = bank_entries; a
 * bank entry no item uses gets 0), dgain [H] (0 when gain_mode is OFF),
 * ddim_gain [H * D] (0 when d->dim_gain is NULL).
 * Prefix gradients are summed over the query heads of a kv head and over the
 * items that share the prefix (or the bank entry).
 */
void ref_attention_backward(const pfx_attention_desc *d, size_t bank_entries, const float *q,
                            const float *k, const float *v, const float *pk, const float *pv,
                            const float *d_o, double *dq, double *dk, double *dv, double *dpk,
                            double *dpv, double *dgain, double *ddim_gain);

/*
 * Per head ([H] each, any may be NULL), averaged over the valid rows
 * (i < q_len[b] with at least one visible key) of every item: entropy
 * LSE_i - sum_j p_ij z_ij, the mass of the top_k largest p_ij (all of it when
 * fewer than top_k keys are visible), the prefix mass sum_{j<P} p_ij.
 * A head without any valid row gets 0.
 */
void ref_attention_stats(const pfx_attention_desc *d, const float *q, const float *k,
                         const float *pk, unsigned top_k, double *entropy, double *topk_mass,
                         double *prefix_mass);

/* p_ij of one (item, head) as [N, P + M]; hidden entries and hidden rows 0. */
void ref_softmax_probs(const pfx_attention_desc *d, const float *q, const float *k, const float *pk,
                       size_t item, size_t head, double *probs);

/*
 * ||ref - got||_2 / ||ref||_2 (||got - ref||_2 itself when ref is all zero).
 * Entries where ref is -INFINITY (hidden LSE rows) must be -INFINITY in got
 * and are left out of both norms, and so are entries NaN in both (NaN data
 * that propagated as IEEE arithmetic does); any other non-finite value in
 * got, or a mismatch at a non-finite entry, gives INFINITY. Never NaN.
 */
double rel_l2(const double *ref, const float *got, size_t n);
double rel_l2_d(const double *ref, const double *got, size_t n);

#ifdef __cplusplus
}
#endif

#endif
