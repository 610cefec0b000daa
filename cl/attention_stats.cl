/*
 * Attention analysis without the forward's tiles: per-row statistics of the
 * softmax (entropy, top-k mass, prefix mass) in one streaming pass, a fixed-
 * order per-head reduction, and the explicit probability map of one (b, h).
 *
 * Row (b, h, i) of a problem (docs/design.md, "The math"):
 *   z_j = c_h * sum_d q_d (1 + G_hd) k~_jd over the visible j: every prefix
 *   column j < P, and input column t = j - P when t < kv_len[b] and, causal,
 *   t <= i + M - N. Rows i >= q_len[b] or with no visible key are invalid.
 *
 * Strides are element strides (the D stride is 1); `head` holds c_h [H] then,
 * when has_dim, (1 + G_hd) [H * D]; `items` is [q_len[B], kv_len[B], bank[B]].
 * OpenCL C 1.2, no extension; half storage through vload_half (common.cl).
 */

#define PFX_TOPK_MAX 32

/* The first visible-input bound: input columns t < limit are visible. */
inline long pfx_kv_limit(long i, long N, long M, int kv_len, int causal)
{
    long limit = kv_len;
    if (causal) {
        long c = i + M - N + 1;
        limit = c < limit ? c : limit;
    }
    return limit < 0 ? 0 : limit;
}

/* Unscaled logit sum_d q_d f_d k_d (f_d = 1 when dimf is NULL). */
inline float pfx_dot(__global const void *q, ulong q_off, int q_half,
                     __global const void *k, ulong k_off, int k_half,
                     __global const float *dimf, uint D)
{
    float acc = 0.0f;
    if (dimf) {
        for (uint d = 0; d < D; d++)
            acc = fma(pfx_load(q, q_off + d, q_half) * dimf[d], pfx_load(k, k_off + d, k_half), acc);
    } else {
        for (uint d = 0; d < D; d++)
            acc = fma(pfx_load(q, q_off + d, q_half), pfx_load(k, k_off + d, k_half), acc);
    }
    return acc;
}

/* c_h s, saturated to +-FLT_MAX where float32 cannot hold it although c_h
 * and s are finite (as the forward does): rows of huge logits stay finite. */
inline float pfx_logit(float c, float s)
{
    float z = c * s;
    return isinf(z) && !isinf(s) ? copysign(FLT_MAX, z) : z;
}

/*
 * Online update with logit z of (m, s, u, sp): m the running max,
 * s = sum exp(z - m), u = sum exp(z - m) (z - m) (relative to m so that the
 * entropy log s - u / s does not cancel against large logits), sp the prefix
 * part of s.
 */
#define PFX_ONLINE(z, is_prefix)                                              \
    do {                                                                      \
        float z_ = (z);                                                       \
        if (z_ > m) {                                                         \
            float a_ = (m == -INFINITY) ? 0.0f : exp(m - z_);                 \
            float dm_ = (m == -INFINITY) ? 0.0f : (m - z_);                   \
            u = a_ == 0.0f ? 0.0f : a_ * (u + dm_ * s); /* 0, not 0 x -Inf */ \
            s = a_ * s;                                                       \
            sp = a_ * sp;                                                     \
            m = z_;                                                           \
        }                                                                     \
        float e_ = exp(z_ - m);                                               \
        s += e_;                                                              \
        u = e_ == 0.0f ? u : fma(e_, z_ - m, u);                              \
        if (is_prefix)                                                        \
            sp += e_;                                                         \
    } while (0)

/* Keeps the top_k largest logits seen so far in descending order. */
#define PFX_TOPK_PUSH(z)                                                      \
    do {                                                                      \
        float z_ = (z);                                                       \
        if (count < top_k || z_ > top[top_k - 1]) {                           \
            int pos_ = count < top_k ? count : top_k - 1;                     \
            while (pos_ > 0 && top[pos_ - 1] < z_) {                          \
                top[pos_] = top[pos_ - 1];                                    \
                pos_--;                                                       \
            }                                                                 \
            top[pos_] = z_;                                                   \
            if (count < top_k)                                                \
                count++;                                                      \
        }                                                                     \
    } while (0)

/*
 * One work-item per query row. Global: (ceil(N / local) * local, B * H).
 * rows: [H][B][N][4] float: entropy, top-k mass, prefix mass, valid (0 / 1).
 */
__kernel void pfx_attn_stats_rows(
    uint B, uint H, uint group, uint N, uint M, uint P, uint D, int causal,
    __global const void *q, int q_half, ulong q_sb, ulong q_sh, ulong q_sr,
    __global const void *k, int k_half, ulong kv_sb, ulong kv_sh, ulong kv_sr,
    __global const void *pk, int pk_half, ulong p_sb, ulong p_sh, ulong p_sr,
    __global const float *head, int has_dim, __global const int *items,
    int top_k, __global float *rows)
{
    uint i = get_global_id(0);
    uint bh = get_global_id(1);
    if (i >= N)
        return;
    uint b = bh / H, h = bh % H, hk = h / group;
    __global float *out = rows + ((ulong)(h * B + b) * N + i) * 4;

    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    long limit = pfx_kv_limit(i, N, M, kv_len, causal);
    if ((int)i >= q_len || (P == 0 && limit == 0)) {
        out[0] = out[1] = out[2] = out[3] = 0.0f;
        return;
    }
    float c = head[h];
    __global const float *dimf = has_dim ? head + H + (ulong)h * D : 0;
    ulong q_off = b * q_sb + h * q_sh + i * q_sr;

    float m = -INFINITY, s = 0.0f, u = 0.0f, sp = 0.0f;
    float top[PFX_TOPK_MAX];
    int count = 0;
    for (uint j = 0; j < P; j++) {
        ulong k_off = entry * p_sb + hk * p_sh + j * p_sr;
        float z = pfx_logit(c, pfx_dot(q, q_off, q_half, pk, k_off, pk_half, dimf, D));
        PFX_ONLINE(z, 1);
        PFX_TOPK_PUSH(z);
    }
    for (long t = 0; t < limit; t++) {
        ulong k_off = b * kv_sb + hk * kv_sh + (ulong)t * kv_sr;
        float z = pfx_logit(c, pfx_dot(q, q_off, q_half, k, k_off, k_half, dimf, D));
        PFX_ONLINE(z, 0);
        PFX_TOPK_PUSH(z);
    }
    float log_s = log(s);
    float mass = 0.0f;
    for (int r = 0; r < count; r++)
        mass += exp((top[r] - m) - log_s); /* m + log s may round to m for huge m */
    out[0] = log_s - u / s;
    out[1] = mass;
    out[2] = sp / s;
    out[3] = 1.0f;
}

/*
 * Per head, the mean over valid rows of the B * N rows of rows[h]; a fixed
 * order (strided partial sums, then a tree), so the result is deterministic.
 * One work-group of PFX_REDUCE_WG work-items per head. A head with no valid
 * row gets 0. Outputs with want_* == 0 are not written.
 */
#ifndef PFX_REDUCE_WG
#define PFX_REDUCE_WG 64
#endif
__kernel __attribute__((reqd_work_group_size(PFX_REDUCE_WG, 1, 1)))
void pfx_attn_stats_reduce(uint rows_per_head, __global const float *rows,
                           __global float *entropy, int want_entropy,
                           __global float *topk, int want_topk,
                           __global float *prefix, int want_prefix)
{
    __local float4 red[PFX_REDUCE_WG];
    uint h = get_group_id(0), lid = get_local_id(0);
    __global const float *r = rows + (ulong)h * rows_per_head * 4;
    float4 acc = (float4)(0.0f); /* entropy, top-k mass, prefix mass, valid rows */
    for (uint x = lid; x < rows_per_head; x += PFX_REDUCE_WG)
        acc += vload4(x, r);
    acc = pfx_group_sum4(red, acc, PFX_REDUCE_WG);
    if (lid == 0) {
        float inv = acc.s3 > 0.0f ? 1.0f / acc.s3 : 0.0f;
        if (want_entropy)
            entropy[h] = acc.s0 * inv;
        if (want_topk)
            topk[h] = acc.s1 * inv;
        if (want_prefix)
            prefix[h] = acc.s2 * inv;
    }
}

/*
 * LSE of every row of one (b, h) as (row max m, log sum exp(z - m)) pairs:
 * the map subtracts them one at a time, since m + log s rounds to m when m
 * is huge. m = -INFINITY for invalid rows.
 * Global: ceil(N / local) * local.
 */
__kernel void pfx_attn_probs_lse(
    uint b, uint h, uint B, uint H, uint group, uint N, uint M, uint P, uint D, int causal,
    __global const void *q, int q_half, ulong q_sb, ulong q_sh, ulong q_sr,
    __global const void *k, int k_half, ulong kv_sb, ulong kv_sh, ulong kv_sr,
    __global const void *pk, int pk_half, ulong p_sb, ulong p_sh, ulong p_sr,
    __global const float *head, int has_dim, __global const int *items,
    __global float *lse)
{
    uint i = get_global_id(0);
    if (i >= N)
        return;
    uint hk = h / group;
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    long limit = pfx_kv_limit(i, N, M, kv_len, causal);
    if ((int)i >= q_len || (P == 0 && limit == 0)) {
        lse[2 * i] = -INFINITY;
        return;
    }
    float c = head[h];
    __global const float *dimf = has_dim ? head + H + (ulong)h * D : 0;
    ulong q_off = b * q_sb + h * q_sh + i * q_sr;
    float m = -INFINITY, s = 0.0f;
    for (uint j = 0; j < P + (uint)limit; j++) {
        float z = pfx_logit(c, j < P ? pfx_dot(q, q_off, q_half, pk, entry * p_sb + hk * p_sh +
                                                   j * p_sr, pk_half, dimf, D)
                                     : pfx_dot(q, q_off, q_half, k, b * kv_sb + hk * kv_sh +
                                                   (ulong)(j - P) * kv_sr, k_half, dimf, D));
        if (z > m) {
            s = (m == -INFINITY) ? 0.0f : s * exp(m - z);
            m = z;
        }
        s += exp(z - m);
    }
    lse[2 * i] = m;
    lse[2 * i + 1] = log(s);
}

/*
 * probs[i][j] = exp((z_ij - m_i) - log s_i) for visible j, else 0 ([N, P + M] float).
 * Global: (ceil((P + M) / l0) * l0, ceil(N / l1) * l1).
 */
__kernel void pfx_attn_probs_map(
    uint b, uint h, uint B, uint H, uint group, uint N, uint M, uint P, uint D, int causal,
    __global const void *q, int q_half, ulong q_sb, ulong q_sh, ulong q_sr,
    __global const void *k, int k_half, ulong kv_sb, ulong kv_sh, ulong kv_sr,
    __global const void *pk, int pk_half, ulong p_sb, ulong p_sh, ulong p_sr,
    __global const float *head, int has_dim, __global const int *items,
    __global const float *lse, __global float *probs)
{
    uint j = get_global_id(0), i = get_global_id(1);
    if (j >= P + M || i >= N)
        return;
    __global float *out = probs + (ulong)i * (P + M) + j;
    float l = lse[2 * i];
    int kv_len = items[B + b], entry = items[2 * B + b];
    long limit = pfx_kv_limit(i, N, M, kv_len, causal);
    if (l == -INFINITY || (j >= P && (long)(j - P) >= limit)) {
        *out = 0.0f;
        return;
    }
    uint hk = h / group;
    float c = head[h];
    __global const float *dimf = has_dim ? head + H + (ulong)h * D : 0;
    ulong q_off = b * q_sb + h * q_sh + i * q_sr;
    float z = pfx_logit(c, j < P ? pfx_dot(q, q_off, q_half, pk, entry * p_sb + hk * p_sh +
                                               j * p_sr, pk_half, dimf, D)
                                 : pfx_dot(q, q_off, q_half, k, b * kv_sb + hk * kv_sh +
                                               (ulong)(j - P) * kv_sr, k_half, dimf, D));
    *out = exp((z - l) - lse[2 * i + 1]);
}
