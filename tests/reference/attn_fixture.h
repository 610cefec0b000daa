/*
 * A random attention problem on the device, shared by the attention tests and
 * `prefixcl check`: the descriptor (sizes, layouts, per-head gain, structured
 * gain, lengths, bank index) drawn from a seeded ref_rng, and Q, K, V, prefix
 * K/V as host arrays holding exactly what the device holds (written, then read
 * back: half-rounded for f16), so the double-precision reference sees the
 * kernel's inputs.
 *
 * Unlike the rest of the reference library this part uses OpenCL (through
 * prefixcl); a program that links reference_dep without prefixcl does not
 * pull it in as long as it calls nothing declared here.
 */
#ifndef PFX_TEST_ATTN_FIXTURE_H
#define PFX_TEST_ATTN_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/prefixcl.h"
#include "reference/random.h"

/* What a problem is drawn from (the fields a table of problems gives first). */
typedef struct attn_fixture_spec {
    size_t B, H, Hkv, N, M, P, D, bank; /* bank: T entries, 0 for a shared prefix */
    pfx_layout q_layout, kv_layout, o_layout;
    bool causal, lens, dim_gain, half;
    pfx_gain_mode gain;
    float amplitude; /* Q, K, prefix K uniform in [-a, a]; V, prefix V in [-1, 1] */
    uint64_t seed;
    float ramp;          /* gain_ramp, with a gain */
    size_t hidden_item;  /* with lens and B > 1: the item with kv_len 0 */
    bool bank_alternate; /* bank_index[b] = b % 2 ? T - 1 : 0 (else drawn at random) */
    bool zero_gamma;     /* with a linear gain: head 0 gets gamma(r g_0) = 0 (g_0 = -1 / r) */
    float scale;         /* desc.scale when > 0 */
    float dropout;       /* desc.dropout, the stream keyed by the seed (first item 3) */
} attn_fixture_spec;

#define ATTN_FIXTURE_MAX_HEADS 64
#define ATTN_FIXTURE_MAX_BATCH 16

/* One problem: host data (as the device holds it) and its tensors. */
typedef struct attn_fixture {
    pfx_attention_desc d;
    size_t bank;
    float gain[ATTN_FIXTURE_MAX_HEADS], *dim_gain;
    int32_t q_lens[ATTN_FIXTURE_MAX_BATCH], kv_lens[ATTN_FIXTURE_MAX_BATCH];
    int32_t bank_index[ATTN_FIXTURE_MAX_BATCH];
    float *q, *k, *v, *pk, *pv;
    pfx_tensor *tq, *tk, *tv, *tpk, *tpv;
    pfx_attention_inputs in;
} attn_fixture;

/* Sets the sizes of d (the rest as pfx_attention_desc_init leaves it). */
void attn_desc_sizes(pfx_attention_desc *d, size_t B, size_t H, size_t Hkv, size_t N, size_t M,
                     size_t P, size_t D);

/* The tensors of a problem by role: Q (and dQ), K and V (and dK, dV), O (and
 * dO), each in its layout of d. */
typedef enum attn_role { ATTN_Q, ATTN_KV, ATTN_O } attn_role;

/* The shape [4] of a tensor of role r. */
void attn_shape(const pfx_attention_desc *d, attn_role r, size_t *shape);

/* The shape of prefix K or V: [T, Hkv, P, D] for a bank of T entries, else
 * [Hkv, P, D] (shared); returns the number of dimensions. shape holds 4. */
unsigned attn_prefix_shape(const pfx_attention_desc *d, size_t bank, size_t *shape);

/* A tensor of dtype dt and the given shape, filled with floats uniform in
 * [-amp, amp] from rng; *host (malloc'ed) gets what the device holds. */
pfx_status attn_upload(pfx_runtime *rt, ref_rng *rng, pfx_dtype dt, unsigned ndim,
                       const size_t *shape, float amp, float **host, pfx_tensor **t);

/* The whole tensor read back into a malloc'ed *out (float). */
pfx_status attn_read_all(const pfx_tensor *t, float **out);

/* Seeds rng with s->seed and draws the problem into f (zeroed first). rng is
 * left where the problem ends, for the caller's further data. On failure f
 * holds what was made so far: attn_fixture_free it either way. */
pfx_status attn_fixture_make(pfx_runtime *rt, const attn_fixture_spec *s, ref_rng *rng,
                             attn_fixture *f);

void attn_fixture_free(attn_fixture *f);

#endif
