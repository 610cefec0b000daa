/*
 * Attention backward (docs/design.md "The math", backward part), flash-style.
 * The program is this file (options, Delta, the tile loaders, the
 * reductions) followed by attention_bwd.cpu.cl (the dK/dV and dQ kernels of
 * the CPU path, PFX_ATTN_VEC > 1) and attention_bwd.gpu.cl (the GPU path):
 * the runtime joins cl/<program>.cl and every cl/<program>.<part>.cl.
 *
 * p_ij is recomputed from the forward's LSE, nothing of size N x (P + M) is
 * stored. Deterministic: every sum runs in a fixed order, no atomics.
 *
 *   pfx_attn_bwd_delta          Delta_i = dO_i . O_i, one work-item per row.
 *   pfx_attn_bwd_dkv            one work-group per tile of BK keys of one
 *                               (item, kv head): loops over the query heads of
 *                               the group and the query tiles that can see the
 *                               tile, accumulates dK~, dV~ in registers. Input
 *                               keys go straight to dK/dV; prefix keys to a
 *                               per-item partial [B, Hkv, P, D].
 *   pfx_attn_bwd_dq             one work-group per tile of BQ queries of
 *                               one (item, head): loops over the visible key
 *                               tiles, accumulates dQ in registers; writes the
 *                               per-tile gain partial R = sum_i q_id dQraw_id.
 *   pfx_attn_bwd_dkvq           (CPU path) the single pass, when dK/dV and dQ
 *                               are both wanted: one work-item per (item, kv
 *                               head, chunk of key tiles) does dkv's work and
 *                               adds Z K~ to its own dQraw partial.
 *   pfx_attn_bwd_dq_finish      (CPU path) sums the chunks' partials (chunk
 *                               order) and writes dQ and the gain partials.
 *   pfx_attn_bwd_prefix_reduce  dKp, dVp: sum of the partials over the items
 *                               that use the prefix (entry), item order.
 *   pfx_attn_bwd_gain_reduce    dgain, ddim_gain from the gain partials.
 *
 * With dQraw_id = sum_j dz_ij k~_jd (dz without the factor c_h):
 *   dQ_id        = c_h (1 + G_hd) dQraw_id
 *   ddim_gain_hd = c_h sum_{b,i} q_id dQraw_id
 *   dgain_h      = (dc_h/dg_h) sum_d (1 + G_hd) sum_{b,i} q_id dQraw_id
 * (the last is dc/dg * sum dz_ij s_ij with the unscaled logit s_ij), exact
 * also where c_h = 0.
 *
 * Options (-D, see src/ops/attention_tuning.h): PFX_ATTN_BLOCK_M (query
 * rows per tile, BQ below), PFX_ATTN_BLOCK_N (keys per tile, BK),
 * PFX_ATTN_DSPLIT (work-items per row sharing its D dimensions, DT),
 * PFX_ATTN_HEAD_DIM (head size class, D <= DMAX, a multiple of DT),
 * PFX_ATTN_VEC (4, 8 or 16: the CPU path at that float vector width, one
 * work-item per group; 1: the GPU path). dkv runs BK * DT work-items, dq BQ * DT (GPU path).
 */

/* A logit c_h s beyond float32 while c_h and s are finite (a huge gain or
 * scale) saturates to +-FLT_MAX: a row of such logits softmaxes to its
 * largest ones (ties share) instead of Inf - Inf = NaN (the backward
 * recomputes the forward's logits alike). NaN and an
 * infinite s (an infinite input) propagate as before. Scalars and vectors. */
#define PFX_SAT_LOGIT(z, s) select((z), clamp((z), -FLT_MAX, FLT_MAX), isinf(z) && !isinf(s))
#ifndef PFX_ATTN_BLOCK_M
#define PFX_ATTN_BLOCK_M 32
#endif
#ifndef PFX_ATTN_BLOCK_N
#define PFX_ATTN_BLOCK_N 32
#endif
#ifndef PFX_ATTN_DSPLIT
#define PFX_ATTN_DSPLIT 1
#endif
#ifndef PFX_ATTN_HEAD_DIM
#define PFX_ATTN_HEAD_DIM 64
#endif
#ifndef PFX_ATTN_VEC
#define PFX_ATTN_VEC 1
#endif
/* The GPU path's dropout is compiled in only for a call that drops (the
 * runtime adds -DPFX_ATTN_DROPOUT=1): the mask generator's registers made
 * the tiles of other calls spill on AMD's gfx90a. */
#ifndef PFX_ATTN_DROPOUT
#define PFX_ATTN_DROPOUT 0
#endif
#define BQ PFX_ATTN_BLOCK_M
#define BK PFX_ATTN_BLOCK_N
#define DT PFX_ATTN_DSPLIT
#define DMAX PFX_ATTN_HEAD_DIM
#define CPU_VEC (PFX_ATTN_VEC > 1 ? PFX_ATTN_VEC : 0)

#define LD (DMAX + 1)            /* local row stride (padded: no bank conflicts) */

__kernel void pfx_attn_bwd_delta(int B, int H, int N, int D,
                                 __global const void *o, int o_half,
                                 __global const void *d_o, int do_half,
                                 ulong osb, ulong osh, ulong osr,
                                 __global float *delta)
{
    int row = get_global_id(0);
    if (row >= B * H * N)
        return;
    int i = row % N, bh = row / N;
    int h = bh % H, b = bh / H;
    ulong base = (ulong)b * osb + (ulong)h * osh + (ulong)i * osr;
    float acc = 0.0f;
    for (int d = 0; d < D; d++)
        acc += pfx_load(d_o, base + d, do_half) * pfx_load(o, base + d, o_half);
    delta[row] = acc;
}

/*
 * Local layouts. Each kernel keeps the operand whose index runs across
 * neighbouring work-items transposed, so that neighbours read neighbouring
 * words (GPU banks, CPU vector lanes) and the other operand is a broadcast:
 *   dkv: K~, V~ transposed [d][BK + 1], Q, dO rows [r][DMAX + 1], scores [r][BK]
 *   dq:  Q, dO transposed [d][BQ + 1], K~, V~ rows [j][DMAX + 1], scores [j][BQ]
 * The flag `kt` (1 in dkv, 0 in dq) is a literal at every call, so the
 * compiler folds the layout.
 */
#define QIDX(kt, r, d) ((kt) ? (r) * LD + (d) : (d) * (BQ + 1) + (r))
#define KIDX(kt, j, d) ((kt) ? (d) * (BK + 1) + (j) : (j) * LD + (d))
#define SIDX(kt, r, j) ((kt) ? (r) * BK + (j) : (j) * BQ + (r))
#define MAXI(a, b) ((a) > (b) ? (a) : (b))
#define KSZ MAXI(BK * LD, DMAX * (BK + 1))
#define QSZ MAXI(BQ * LD, DMAX * (BQ + 1))

/* for (e = lid; e < n; e += wg) with a trip count that is the same for every
 * work-item (ceil(n / wg)); the bound check folds away when wg divides n, as
 * it does for the tiles in use, so the loop needs no per-lane exec mask (on
 * wave64 each saved mask costs two SGPRs). */
#define FOR_LANES(e, n, lid, wg)                                                \
    _Pragma("unroll 1")                                                         \
    for (int e##_it = 0, e = (lid); e##_it < ((n) + (wg) - 1) / (wg); e##_it++, e += (wg)) \
        if ((n) % (wg) == 0 || e < (n))

/* Loads rows [i0, i0 + BQ) of Q (times 1 + G_hd) and dO of (b, h), their
 * LSE and Delta; rows past q_len (or N) get zeros and lse = -inf. */
void bwd_load_queries(int kt, __local float *Qs, __local float *dOs, __local float *rl,
                      __local float *rd, __global const void *q, int q_half, ulong qbase,
                      ulong qsr, __global const void *d_o, int do_half, ulong obase, ulong osr,
                      __global const float *lse_row, __global const float *delta_row,
                      __global const float *dimf, int i0, int q_end, int D, int lid, int wg)
{
    FOR_LANES(e, BQ * DMAX, lid, wg) {
        int r = e / DMAX, d = e - r * DMAX;
        int i = i0 + r;
        float qv = 0.0f, gv = 0.0f;
        if (i < q_end && d < D) {
            qv = pfx_load(q, qbase + (ulong)i * qsr + d, q_half);
            if (dimf)
                qv *= dimf[d];
            gv = pfx_load(d_o, obase + (ulong)i * osr + d, do_half);
        }
        Qs[QIDX(kt, r, d)] = qv;
        dOs[QIDX(kt, r, d)] = gv;
    }
    for (int r = lid; r < BQ; r += wg) {
        int i = i0 + r;
        rl[r] = i < q_end ? lse_row[i] : -INFINITY;
        rd[r] = i < q_end ? delta_row[i] : 0.0f;
    }
}

/* Loads key rows [j0, j0 + rows) of K~ and V~ (zeros past rows or D). */
void bwd_load_keys(int kt, __local float *Ks, __local float *Vs, __global const void *k,
                   int k_half, __global const void *v, int v_half, ulong base, ulong sr, int j0,
                   int rows, int D, int lid, int wg)
{
    FOR_LANES(e, BK * DMAX, lid, wg) {
        int r = e / DMAX, d = e - r * DMAX;
        float kv = 0.0f, vv = 0.0f;
        if (r < rows && d < D) {
            ulong at = base + (ulong)(j0 + r) * sr + d;
            kv = pfx_load(k, at, k_half);
            vv = pfx_load(v, at, v_half);
        }
        Ks[KIDX(kt, r, d)] = kv;
        Vs[KIDX(kt, r, d)] = vv;
    }
}

/* dKp / dVp [T, Hkv, P, D] (T = 1 shared) from part [B, Hkv, P, D]: the sum
 * over the items using each entry, in item order. bank: items[2B + b] is the
 * entry of item b; shared: every item. An unused entry gets 0, or is left as
 * it is with accumulate. */
__kernel void pfx_attn_bwd_prefix_reduce(int B, ulong per_entry, ulong total, int bank,
                                         __global const int *items,
                                         __global const float *part, __global float *out,
                                         int accumulate)
{
    ulong idx = get_global_id(0);
    if (idx >= total)
        return;
    int e = (int)(idx / per_entry);
    ulong rest = idx - (ulong)e * per_entry;
    float s = 0.0f;
    int used = 0;
    for (int b = 0; b < B; b++)
        if (!bank || items[2 * B + b] == e) {
            s += part[(ulong)b * per_entry + rest];
            used = 1;
        }
    if (!accumulate)
        out[idx] = s;
    else if (used)
        out[idx] += s;
}

/* One work-group (64 work-items) per head: R_hd = sum over (b, q tile) of
 * part [H, B * ntq, D]; ddim_gain_hd = c_h R_hd;
 * dgain_h = dscale_h * sum_d (1 + G_hd) R_hd. */
#define GAIN_WG 64
__kernel __attribute__((reqd_work_group_size(GAIN_WG, 1, 1)))
void pfx_attn_bwd_gain_reduce(int H, int D, int parts, __global const float *part,
                              __global const float *head, int structured,
                              __global const float *dscale, __global float *dgain,
                              __global float *ddim_gain, int accumulate)
{
    __local float red[GAIN_WG];
    int h = get_group_id(0), lid = get_local_id(0);
    float c = head[h];
    float mine = 0.0f;
    for (int d = lid; d < D; d += GAIN_WG) {
        float s = 0.0f;
        for (int p = 0; p < parts; p++)
            s += part[((ulong)h * parts + p) * D + d];
        float g = structured ? head[H + h * D + d] : 1.0f;
        mine = mad(g, s, mine);
        if (ddim_gain) {
            float v = c * s;
            ddim_gain[h * D + d] = accumulate ? ddim_gain[h * D + d] + v : v;
        }
    }
    const float s = pfx_group_sum_in_order(red, mine, GAIN_WG);
    if (lid == 0 && dgain) {
        float v = dscale[h] * s;
        dgain[h] = accumulate ? dgain[h] + v : v;
    }
}
