/*
 * Attention backward (docs/design.md "The math", backward part), flash-style:
 * p_ij is recomputed from the forward's LSE, nothing of size N x (P + M) is
 * stored. Deterministic: every sum runs in a fixed order, no atomics.
 *
 *   pfx_attn_bwd_delta          Delta_i = dO_i . O_i, one work-item per row.
 *   pfx_attn_bwd_dkv            one work-group per tile of PFX_BK keys of one
 *                               (item, kv head): loops over the query heads of
 *                               the group and the query tiles that can see the
 *                               tile, accumulates dK~, dV~ in registers. Input
 *                               keys go straight to dK/dV; prefix keys to a
 *                               per-item partial [B, Hkv, P, D].
 *   pfx_attn_bwd_dq             one work-group per tile of PFX_BQ queries of
 *                               one (item, head): loops over the visible key
 *                               tiles, accumulates dQ in registers; writes the
 *                               per-tile gain partial R = sum_i q_id dQraw_id.
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
 * Options: PFX_BQ (query rows per tile), PFX_BK (keys per tile), PFX_DT
 * (work-items per row sharing its D dimensions), PFX_DMAX (head size bucket,
 * D <= PFX_DMAX, a multiple of PFX_DT).
 * dkv runs PFX_BK * PFX_DT work-items, dq PFX_BQ * PFX_DT.
 */
#ifndef PFX_BQ
#define PFX_BQ 32
#endif
#ifndef PFX_BK
#define PFX_BK 32
#endif
#ifndef PFX_DT
#define PFX_DT 1
#endif
#ifndef PFX_DMAX
#define PFX_DMAX 64
#endif

#define LD (PFX_DMAX + 1)            /* local row stride (padded: no bank conflicts) */
#define DCH (PFX_DMAX / PFX_DT)      /* dimensions per work-item */
/* GPU tiles (DT > 1): the per-dimension loops over the DCH accumulators are
 * unrolled so that dk_acc / dv_acc / acc stay in registers (not rolled up in
 * a stack frame, as NVPTX did at DCH = 16). With DT = 1 (CPU) a work-item
 * owns a whole row, up to 256 accumulators, left to the compiler. */
#if PFX_DT > 1
#define UNROLL_D _Pragma("unroll")
#else
#define UNROLL_D
#endif

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
#define QIDX(kt, r, d) ((kt) ? (r) * LD + (d) : (d) * (PFX_BQ + 1) + (r))
#define KIDX(kt, j, d) ((kt) ? (d) * (PFX_BK + 1) + (j) : (j) * LD + (d))
#define SIDX(kt, r, j) ((kt) ? (r) * PFX_BK + (j) : (j) * PFX_BQ + (r))
#define MAXI(a, b) ((a) > (b) ? (a) : (b))
#define KSZ MAXI(PFX_BK * LD, PFX_DMAX * (PFX_BK + 1))
#define QSZ MAXI(PFX_BQ * LD, PFX_DMAX * (PFX_BQ + 1))

/* for (e = lid; e < n; e += wg) with a trip count that is the same for every
 * work-item (ceil(n / wg)); the bound check folds away when wg divides n, as
 * it does for the tiles in use, so the loop needs no per-lane exec mask (on
 * wave64 each saved mask costs two SGPRs). */
#define FOR_LANES(e, n, lid, wg)                                                \
    _Pragma("unroll 1")                                                         \
    for (int e##_it = 0, e = (lid); e##_it < ((n) + (wg) - 1) / (wg); e##_it++, e += (wg)) \
        if ((n) % (wg) == 0 || e < (n))

/* Scores of a (query tile, key tile) pair: P = p_ij and
 * Z = p_ij (dp_ij - Delta_i) (without c), 0 where hidden. Qs holds
 * q_i (1 + G_hd); rows beyond the tile's valid rows carry lse = -inf. */
void bwd_scores(int kt, __local const float *Qs, __local const float *dOs,
                __local const float *Ks, __local const float *Vs, __local const float *rl,
                __local const float *rd, __local float *Pl, __local float *Zl, float c, int D,
                int i0, int j0, int prefix_tile, int key_rows, int kv_len, int causal, int shift,
                int lid, int wg)
{
    FOR_LANES(e, PFX_BQ * PFX_BK, lid, wg) {
        /* neighbours: neighbouring keys (dkv) or queries (dq) */
        int r = kt ? e / PFX_BK : e % PFX_BQ;
        int jj = kt ? e % PFX_BK : e / PFX_BQ;
        float lse = rl[r];
        int vis = lse != -INFINITY && jj < key_rows;
        if (!prefix_tile) {
            int t = j0 + jj;
            vis = vis && t < kv_len && (!causal || t <= i0 + r + shift);
        }
        float p = 0.0f, dz = 0.0f;
        if (vis) {
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < D; d++) {
                s = mad(Qs[QIDX(kt, r, d)], Ks[KIDX(kt, jj, d)], s);
                dp = mad(dOs[QIDX(kt, r, d)], Vs[KIDX(kt, jj, d)], dp);
            }
            p = exp(c * s - lse);
            dz = p * (dp - rd[r]);
        }
        Pl[SIDX(kt, r, jj)] = p;
        Zl[SIDX(kt, r, jj)] = dz;
    }
}

/* Loads rows [i0, i0 + PFX_BQ) of Q (times 1 + G_hd) and dO of (b, h), their
 * LSE and Delta; rows past q_len (or N) get zeros and lse = -inf. */
void bwd_load_queries(int kt, __local float *Qs, __local float *dOs, __local float *rl,
                      __local float *rd, __global const void *q, int q_half, ulong qbase,
                      ulong qsr, __global const void *d_o, int do_half, ulong obase, ulong osr,
                      __global const float *lse_row, __global const float *delta_row,
                      __global const float *dimf, int i0, int q_end, int D, int lid, int wg)
{
    FOR_LANES(e, PFX_BQ * PFX_DMAX, lid, wg) {
        int r = e / PFX_DMAX, d = e - r * PFX_DMAX;
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
    for (int r = lid; r < PFX_BQ; r += wg) {
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
    FOR_LANES(e, PFX_BK * PFX_DMAX, lid, wg) {
        int r = e / PFX_DMAX, d = e - r * PFX_DMAX;
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

#define BWD_LOCALS                                   \
    __local float Ks[KSZ], Vs[KSZ];                  \
    __local float Qs[QSZ], dOs[QSZ];                 \
    __local float Pl[PFX_BQ * PFX_BK], Zl[PFX_BQ * PFX_BK]; \
    __local float rl[PFX_BQ], rd[PFX_BQ]

#if PFX_CPU_VEC
/*
 * CPU path (PFX_CPU_VEC = 16, set only in the CPU option set): PoCL
 * vectorizes across work-items poorly once loops over keys or dimensions sit
 * inside (8.8 GFLOP/s here), so, as in the forward's VEC path, a work-item
 * owns 16 query rows (dQ) or 16 keys (dK/dV) as the lanes of float16
 * vectors; the other side comes from local memory as broadcasts, CB rows at
 * a time (2 CB score vectors stay in registers). p is recomputed as
 * exp2(c log2e s - log2e lse) with the forward's polynomial exp2 (libm exp
 * does not vectorize). Sums run in a fixed order (lanes, then work-items).
 * Loops over D run to the runtime D, not unrolled (PoCL compile time).
 */
#if PFX_CPU_VEC != 16
#error "PFX_CPU_VEC must be 16"
#endif
#if PFX_BQ % (PFX_CPU_VEC * 1) || PFX_BK % PFX_CPU_VEC
#error "PFX_BQ and PFX_BK must be multiples of PFX_CPU_VEC"
#endif
#define VEC 16
#define CB 8 /* broadcast rows per register block; divides BQ and BK */
typedef float16 floatv;
typedef int16 intv;
#define LOG2E 1.4426950408889634f
#define LANES ((intv)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))

/* 2^x, x <= 0, vectorizable: the forward's polynomial (cl/common.cl). */
PFX_DEFINE_POLY_EXP2(bwd_exp2v, floatv, intv, convert_int16, as_float16)

/* Grid: (tiles * BK / VEC, B * Hkv); keys j0 + lid * VEC + lane. */
__kernel __attribute__((reqd_work_group_size(PFX_BK / VEC, 1, 1)))
void pfx_attn_bwd_dkv(int B, int H, int Hkv, int N, int M, int P, int D, int causal,
                      __global const void *q, int q_half, ulong qsb, ulong qsh, ulong qsr,
                      __global const void *k, int k_half, __global const void *v, int v_half,
                      ulong ksb, ulong ksh, ulong ksr,
                      __global const void *pk, int pk_half, __global const void *pv, int pv_half,
                      ulong psb, ulong psh, ulong psr,
                      __global const void *d_o, int do_half, ulong osb, ulong osh, ulong osr,
                      __global const float *lse, __global const float *delta,
                      __global const float *head, int structured, __global const int *items,
                      __global float *dk, __global float *dv, int accumulate,
                      __global float *dpk_part, __global float *dpv_part,
                      int tile_offset, int prefix_tiles)
{
    __local float Qs[PFX_BQ * LD], dOs[PFX_BQ * LD], rl[PFX_BQ], rd[PFX_BQ];
    const int wg = PFX_BK / VEC;
    int lid = get_local_id(0);
    int tile = get_group_id(0) + tile_offset;
    int b = get_group_id(1) / Hkv, hk = get_group_id(1) % Hkv;
    int group = H / Hkv;
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;

    int is_prefix = tile < prefix_tiles;
    int j0 = (is_prefix ? tile : tile - prefix_tiles) * PFX_BK;
    int rows = min(PFX_BK, (is_prefix ? P : M) - j0);
    int jl = lid * VEC; /* first key of this work-item in the tile */

    /* This work-item's keys, straight from global memory (read once). */
    __global const void *ksrc = is_prefix ? pk : k, *vsrc = is_prefix ? pv : v;
    int kh = is_prefix ? pk_half : k_half, vh = is_prefix ? pv_half : v_half;
    ulong kbase = is_prefix ? (ulong)entry * psb + (ulong)hk * psh
                            : (ulong)b * ksb + (ulong)hk * ksh;
    ulong ksr_ = is_prefix ? psr : ksr;
    floatv kv[PFX_DMAX], vv[PFX_DMAX], dk_acc[PFX_DMAX], dv_acc[PFX_DMAX];
    float tk[VEC], tv[VEC];
    for (int d = 0; d < D; d++) {
        for (int x = 0; x < VEC; x++) {
            int ok = jl + x < rows;
            ulong at = kbase + (ulong)(j0 + jl + x) * ksr_ + d;
            tk[x] = ok ? pfx_load(ksrc, at, kh) : 0.0f;
            tv[x] = ok ? pfx_load(vsrc, at, vh) : 0.0f;
        }
        kv[d] = vload16(0, tk);
        vv[d] = vload16(0, tv);
        dk_acc[d] = dv_acc[d] = (floatv)0.0f;
    }
    /* Key index per lane; keys past the tile or kv_len are never visible. */
    const intv tix = (intv)(j0 + jl) + LANES;
    const intv key_ok = (tix - j0 < rows) & (is_prefix ? (intv)(-1) : tix < kv_len);
    const int causal_keys = causal && !is_prefix;

    int i_begin = 0, i_end = q_len;
    if (!is_prefix) {
        if (j0 >= kv_len)
            i_end = 0;
        else if (causal)
            i_begin = max(0, j0 - shift);
    }
    i_begin = (i_begin / PFX_BQ) * PFX_BQ;

    ulong qhead = (ulong)b * qsb, ohead = (ulong)b * osb;
    for (int h = hk * group; h < (hk + 1) * group; h++) {
        float c = head[h], cl = c * LOG2E;
        __global const float *dimf = structured ? head + H + h * D : 0;
        ulong stats = ((ulong)b * H + h) * N;
        for (int i0 = i_begin; i0 < i_end; i0 += PFX_BQ) {
            barrier(CLK_LOCAL_MEM_FENCE);
            bwd_load_queries(1, Qs, dOs, rl, rd, q, q_half, qhead + (ulong)h * qsh, qsr, d_o,
                             do_half, ohead + (ulong)h * osh, osr, lse + stats, delta + stats,
                             dimf, i0, q_len, D, lid, wg);
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int r0 = 0; r0 < PFX_BQ && i0 + r0 < q_len; r0 += CB) {
                floatv s[CB], dp[CB];
                _Pragma("unroll") for (int u = 0; u < CB; u++)
                    s[u] = dp[u] = (floatv)0.0f;
                for (int d = 0; d < D; d++) {
                    floatv kd = kv[d], vd = vv[d];
                    _Pragma("unroll") for (int u = 0; u < CB; u++) {
                        s[u] = mad((floatv)Qs[(r0 + u) * LD + d], kd, s[u]);
                        dp[u] = mad((floatv)dOs[(r0 + u) * LD + d], vd, dp[u]);
                    }
                }
                /* s[u] becomes p, dp[u] becomes c p (dp - Delta); 0 where hidden */
                _Pragma("unroll") for (int u = 0; u < CB; u++) {
                    float l = rl[r0 + u];
                    intv vis = key_ok & (intv)(l != -INFINITY ? -1 : 0);
                    if (causal_keys)
                        vis &= tix <= (intv)(i0 + r0 + u + shift);
                    floatv p = select((floatv)0.0f, bwd_exp2v(s[u] * cl - l * LOG2E), vis);
                    s[u] = p;
                    dp[u] = c * p * (dp[u] - rd[r0 + u]);
                }
                for (int d = 0; d < D; d++) {
                    floatv a = dv_acc[d], g = dk_acc[d];
                    _Pragma("unroll") for (int u = 0; u < CB; u++) {
                        a = mad(s[u], (floatv)dOs[(r0 + u) * LD + d], a);
                        g = mad(dp[u], (floatv)Qs[(r0 + u) * LD + d], g);
                    }
                    dv_acc[d] = a;
                    dk_acc[d] = g;
                }
            }
        }
    }

    __global float *out_k = is_prefix ? dpk_part : dk;
    __global float *out_v = is_prefix ? dpv_part : dv;
    ulong out_base = is_prefix ? (((ulong)b * Hkv + hk) * P + j0) * D
                               : (ulong)b * ksb + (ulong)hk * ksh + (ulong)j0 * ksr;
    ulong out_row = is_prefix ? (ulong)D : ksr;
    int out_add = !is_prefix && accumulate;
    for (int d = 0; d < D; d++) {
        vstore16(dk_acc[d], 0, tk);
        vstore16(dv_acc[d], 0, tv);
        for (int x = 0; x < VEC && jl + x < rows; x++) {
            ulong at = out_base + (ulong)(jl + x) * out_row + d;
            if (out_k)
                out_k[at] = out_add ? out_k[at] + tk[x] : tk[x];
            if (out_v)
                out_v[at] = out_add ? out_v[at] + tv[x] : tv[x];
        }
    }
}

/* Grid: (ceil(N / BQ) * BQ / VEC, B * H); rows i0 + lid * VEC + lane. */
__kernel __attribute__((reqd_work_group_size(PFX_BQ / VEC, 1, 1)))
void pfx_attn_bwd_dq(int B, int H, int Hkv, int N, int M, int P, int D, int causal,
                     __global const void *q, int q_half, ulong qsb, ulong qsh, ulong qsr,
                     __global const void *k, int k_half, __global const void *v, int v_half,
                     ulong ksb, ulong ksh, ulong ksr,
                     __global const void *pk, int pk_half, __global const void *pv, int pv_half,
                     ulong psb, ulong psh, ulong psr,
                     __global const void *d_o, int do_half, ulong osb, ulong osh, ulong osr,
                     __global const float *lse, __global const float *delta,
                     __global const float *head, int structured, __global const int *items,
                     __global float *dq, int accumulate, __global float *gain_part)
{
    __local float Ks[PFX_BK * LD], Vs[PFX_BK * LD];
    __local float red[PFX_BQ / VEC * PFX_DMAX];
    const int wg = PFX_BQ / VEC;
    int lid = get_local_id(0);
    int qt = get_group_id(0), ntq = get_num_groups(0);
    int b = get_group_id(1) / H, h = get_group_id(1) % H;
    int hk = h / (H / Hkv);
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;
    int i0 = qt * PFX_BQ, il = i0 + lid * VEC; /* first row of this work-item */
    float c = head[h], cl = c * LOG2E;
    __global const float *dimf = structured ? head + H + h * D : 0;
    ulong qbase = (ulong)b * qsb + (ulong)h * qsh, obase = (ulong)b * osb + (ulong)h * osh;
    __global const float *lse_row = lse + ((ulong)b * H + h) * N;
    __global const float *delta_row = delta + ((ulong)b * H + h) * N;

    /* Lanes: q (1 + G_hd), dO, log2e LSE (-inf past q_len: p = 0), Delta. */
    floatv qv[PFX_DMAX], gv[PFX_DMAX], acc[PFX_DMAX];
    float t1[VEC], t2[VEC];
    for (int x = 0; x < VEC; x++) {
        int i = il + x, ok = i < q_len;
        t1[x] = ok ? lse_row[i] * LOG2E : -INFINITY;
        t2[x] = ok ? delta_row[i] : 0.0f;
    }
    const floatv lse2 = vload16(0, t1), dlt = vload16(0, t2);
    const intv row_ok = lse2 != (floatv)(-INFINITY);
    const intv iv = (intv)il + LANES;
    for (int d = 0; d < D; d++) {
        for (int x = 0; x < VEC; x++) {
            int i = il + x, ok = i < q_len;
            t1[x] = ok ? pfx_load(q, qbase + (ulong)i * qsr + d, q_half) * (dimf ? dimf[d] : 1.0f)
                       : 0.0f;
            t2[x] = ok ? pfx_load(d_o, obase + (ulong)i * osr + d, do_half) : 0.0f;
        }
        qv[d] = vload16(0, t1);
        gv[d] = vload16(0, t2);
        acc[d] = (floatv)0.0f;
    }

    int p_end = P, t_end = kv_len;
    if (i0 >= q_len) {
        p_end = t_end = 0;
    } else if (causal) {
        int i_last = min(i0 + PFX_BQ, q_len) - 1;
        t_end = min(t_end, max(0, i_last + shift + 1));
    }
    ulong pbase = (ulong)entry * psb + (ulong)hk * psh;
    ulong kbase = (ulong)b * ksb + (ulong)hk * ksh;
    int prefix_tiles = (p_end + PFX_BK - 1) / PFX_BK;
    int tiles = prefix_tiles + (t_end + PFX_BK - 1) / PFX_BK;
    for (int tile = 0; tile < tiles; tile++) {
        int is_prefix = tile < prefix_tiles;
        int j0 = (is_prefix ? tile : tile - prefix_tiles) * PFX_BK;
        int rows = min(PFX_BK, (is_prefix ? P : M) - j0);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (is_prefix)
            bwd_load_keys(0, Ks, Vs, pk, pk_half, pv, pv_half, pbase, psr, j0, rows, D, lid, wg);
        else
            bwd_load_keys(0, Ks, Vs, k, k_half, v, v_half, kbase, ksr, j0, rows, D, lid, wg);
        barrier(CLK_LOCAL_MEM_FENCE);
        int kend = is_prefix ? rows : min(rows, t_end - j0);
        for (int c0 = 0; c0 < kend; c0 += CB) {
            floatv s[CB], dp[CB];
            _Pragma("unroll") for (int u = 0; u < CB; u++)
                s[u] = dp[u] = (floatv)0.0f;
            for (int d = 0; d < D; d++) {
                floatv qd = qv[d], gd = gv[d];
                _Pragma("unroll") for (int u = 0; u < CB; u++) {
                    s[u] = mad(qd, (floatv)Ks[(c0 + u) * LD + d], s[u]);
                    dp[u] = mad(gd, (floatv)Vs[(c0 + u) * LD + d], dp[u]);
                }
            }
            /* dp[u] becomes dz = p (dp - Delta) (without c); 0 where hidden */
            _Pragma("unroll") for (int u = 0; u < CB; u++) {
                int jj = c0 + u, t = j0 + jj;
                intv vis = row_ok & (intv)(jj < rows && (is_prefix || t < kv_len) ? -1 : 0);
                if (causal && !is_prefix)
                    vis &= (intv)t <= iv + shift;
                floatv p = select((floatv)0.0f, bwd_exp2v(s[u] * cl - lse2), vis);
                dp[u] = p * (dp[u] - dlt);
            }
            for (int d = 0; d < D; d++) {
                floatv a = acc[d];
                _Pragma("unroll") for (int u = 0; u < CB; u++)
                    a = mad(dp[u], (floatv)Ks[(c0 + u) * LD + d], a);
                acc[d] = a;
            }
        }
    }

    for (int d = 0; d < D; d++) {
        /* dQ = c (1 + G_hd) dQraw, rounded before the accumulate add (a
         * vector product: not fused into it), as on the GPU path */
        vstore16(acc[d] * (c * (dimf ? dimf[d] : 1.0f)), 0, t2);
        vstore16(acc[d], 0, t1);
        float r = 0.0f; /* R_d partial over this work-item's rows, lane order */
        for (int x = 0; x < VEC; x++) {
            int i = il + x;
            if (dq && i < N) {
                ulong at = qbase + (ulong)i * qsr + d;
                volatile float gx = t2[x]; /* PoCL would fuse the product into the add */
                dq[at] = accumulate ? dq[at] + gx : gx;
            }
            if (i < q_len)
                r += pfx_load(q, qbase + (ulong)i * qsr + d, q_half) * t1[x];
        }
        red[lid * PFX_DMAX + d] = r;
    }
    if (!gain_part)
        return;
    /* R_d = sum over the work-items' partials, in work-item order. */
    barrier(CLK_LOCAL_MEM_FENCE);
    __global float *out = gain_part + (((ulong)h * B + b) * ntq + qt) * D;
    for (int d = lid; d < D; d += wg) {
        float s = 0.0f;
        for (int w = 0; w < wg; w++)
            s += red[w * PFX_DMAX + d];
        out[d] = s;
    }
}

#else /* GPU path */
/*
 * Grid: (tiles * PFX_BK * PFX_DT, B * Hkv); tile t = group(0) + tile_offset,
 * t < prefix_tiles: prefix keys [t * BK, ...), else input keys.
 * items = [q_len B | kv_len B | bank entry B]; head = [c_h H | 1 + G_hd H*D].
 */
__kernel __attribute__((reqd_work_group_size(PFX_BK * PFX_DT, 1, 1)))
void pfx_attn_bwd_dkv(int B, int H, int Hkv, int N, int M, int P, int D, int causal,
                      __global const void *q, int q_half, ulong qsb, ulong qsh, ulong qsr,
                      __global const void *k, int k_half, __global const void *v, int v_half,
                      ulong ksb, ulong ksh, ulong ksr,
                      __global const void *pk, int pk_half, __global const void *pv, int pv_half,
                      ulong psb, ulong psh, ulong psr,
                      __global const void *d_o, int do_half, ulong osb, ulong osh, ulong osr,
                      __global const float *lse, __global const float *delta,
                      __global const float *head, int structured, __global const int *items,
                      __global float *dk, __global float *dv, int accumulate,
                      __global float *dpk_part, __global float *dpv_part,
                      int tile_offset, int prefix_tiles)
{
    BWD_LOCALS;
    const int wg = PFX_BK * PFX_DT;
    int lid = get_local_id(0);
    int jj = lid % PFX_BK, ch = lid / PFX_BK;
    int tile = get_group_id(0) + tile_offset;
    int b = get_group_id(1) / Hkv, hk = get_group_id(1) % Hkv;
    int group = H / Hkv;
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;

    int is_prefix = tile < prefix_tiles;
    int j0 = (is_prefix ? tile : tile - prefix_tiles) * PFX_BK;
    int rows = min(PFX_BK, (is_prefix ? P : M) - j0);
    if (is_prefix)
        bwd_load_keys(1, Ks, Vs, pk, pk_half, pv, pv_half,
                      (ulong)entry * psb + (ulong)hk * psh, psr, j0, rows, D, lid, wg);
    else
        bwd_load_keys(1, Ks, Vs, k, k_half, v, v_half, (ulong)b * ksb + (ulong)hk * ksh, ksr, j0,
                      rows, D, lid, wg);

    /* Query rows that can see a key of this tile: [i_begin, q_len). */
    int i_begin = 0, i_end = q_len;
    if (!is_prefix) {
        if (j0 >= kv_len)
            i_end = 0;
        else if (causal)
            i_begin = max(0, j0 - shift);
    }
    i_begin = (i_begin / PFX_BQ) * PFX_BQ;

    /* Where the results go, fixed before the loops so that only two pointers,
     * a base and a row stride stay live across them (wave64 keeps 64-bit exec
     * masks in SGPRs too; with every argument live, gfx90a spilled SGPRs):
     * prefix keys to the partial [B, Hkv, P, D] (overwritten), input keys to
     * dK / dV (accumulated on request). */
    __global float *out_k = is_prefix ? dpk_part : dk;
    __global float *out_v = is_prefix ? dpv_part : dv;
    ulong out_base = is_prefix ? (((ulong)b * Hkv + hk) * P + j0) * D
                               : (ulong)b * ksb + (ulong)hk * ksh + (ulong)j0 * ksr;
    ulong out_row = is_prefix ? (ulong)D : ksr;
    int out_add = !is_prefix && accumulate;

    float dk_acc[DCH], dv_acc[DCH];
    UNROLL_D for (int u = 0; u < DCH; u++)
        dk_acc[u] = dv_acc[u] = 0.0f;

    /* q and dO of head h start at qhead + h * qsh (ohead + h * osh); LSE and
     * Delta rows at (b * H + h) * N */
    ulong qhead = (ulong)b * qsb, ohead = (ulong)b * osb;
    for (int h = hk * group; h < (hk + 1) * group; h++) {
        float c = head[h];
        __global const float *dimf = structured ? head + H + h * D : 0;
        ulong stats = ((ulong)b * H + h) * N;
        for (int i0 = i_begin; i0 < i_end; i0 += PFX_BQ) {
            barrier(CLK_LOCAL_MEM_FENCE);
            bwd_load_queries(1, Qs, dOs, rl, rd, q, q_half, qhead + (ulong)h * qsh, qsr, d_o,
                             do_half, ohead + (ulong)h * osh, osr, lse + stats, delta + stats,
                             dimf, i0, q_len, D, lid, wg);
            barrier(CLK_LOCAL_MEM_FENCE);
            bwd_scores(1, Qs, dOs, Ks, Vs, rl, rd, Pl, Zl, c, D, i0, j0, is_prefix, rows,
                       kv_len, causal, shift, lid, wg);
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int r = 0; r < PFX_BQ; r++) {
                float w = Pl[r * PFX_BK + jj], z = c * Zl[r * PFX_BK + jj];
                __local const float *qr = Qs + r * LD + ch, *gr = dOs + r * LD + ch;
                UNROLL_D for (int u = 0; u < DCH; u++) {
                    dv_acc[u] = mad(w, gr[u * PFX_DT], dv_acc[u]);
                    dk_acc[u] = mad(z, qr[u * PFX_DT], dk_acc[u]);
                }
            }
        }
    }

    if (jj >= rows)
        return;
    ulong base = out_base + (ulong)jj * out_row;
    UNROLL_D for (int u = 0; u < DCH; u++) {
        int d = ch + u * PFX_DT;
        if (d < D) {
            if (out_k)
                out_k[base + d] = out_add ? out_k[base + d] + dk_acc[u] : dk_acc[u];
            if (out_v)
                out_v[base + d] = out_add ? out_v[base + d] + dv_acc[u] : dv_acc[u];
        }
    }
}

/*
 * Grid: (ceil(N / BQ) * PFX_BQ * PFX_DT, B * H). gain_part: [H, B, q tiles, D]
 * (written when not NULL).
 */
__kernel __attribute__((reqd_work_group_size(PFX_BQ * PFX_DT, 1, 1)))
void pfx_attn_bwd_dq(int B, int H, int Hkv, int N, int M, int P, int D, int causal,
                     __global const void *q, int q_half, ulong qsb, ulong qsh, ulong qsr,
                     __global const void *k, int k_half, __global const void *v, int v_half,
                     ulong ksb, ulong ksh, ulong ksr,
                     __global const void *pk, int pk_half, __global const void *pv, int pv_half,
                     ulong psb, ulong psh, ulong psr,
                     __global const void *d_o, int do_half, ulong osb, ulong osh, ulong osr,
                     __global const float *lse, __global const float *delta,
                     __global const float *head, int structured, __global const int *items,
                     __global float *dq, int accumulate, __global float *gain_part)
{
    BWD_LOCALS;
    const int wg = PFX_BQ * PFX_DT;
    int lid = get_local_id(0);
    int r = lid % PFX_BQ, ch = lid / PFX_BQ;
    int qt = get_group_id(0), ntq = get_num_groups(0);
    int b = get_group_id(1) / H, h = get_group_id(1) % H;
    int hk = h / (H / Hkv);
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;
    int i0 = qt * PFX_BQ;
    float c = head[h];
    __global const float *dimf = structured ? head + H + h * D : 0;
    ulong qbase = (ulong)b * qsb + (ulong)h * qsh, obase = (ulong)b * osb + (ulong)h * osh;

    bwd_load_queries(0, Qs, dOs, rl, rd, q, q_half, qbase, qsr, d_o, do_half, obase, osr,
                     lse + ((ulong)b * H + h) * N, delta + ((ulong)b * H + h) * N, dimf, i0,
                     q_len, D, lid, wg);

    /* Visible keys: every prefix key, input keys [0, t_end). */
    int p_end = P, t_end = kv_len;
    if (i0 >= q_len) {
        p_end = t_end = 0;
    } else if (causal) {
        int i_last = min(i0 + PFX_BQ, q_len) - 1;
        t_end = min(t_end, max(0, i_last + shift + 1));
    }

    float acc[DCH];
    UNROLL_D for (int u = 0; u < DCH; u++)
        acc[u] = 0.0f;

    ulong pbase = (ulong)entry * psb + (ulong)hk * psh;
    ulong kbase = (ulong)b * ksb + (ulong)hk * ksh;
    int prefix_tiles = (p_end + PFX_BK - 1) / PFX_BK;
    int tiles = prefix_tiles + (t_end + PFX_BK - 1) / PFX_BK;
    for (int tile = 0; tile < tiles; tile++) {
        int is_prefix = tile < prefix_tiles;
        int j0 = (is_prefix ? tile : tile - prefix_tiles) * PFX_BK;
        int rows = min(PFX_BK, (is_prefix ? P : M) - j0);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (is_prefix)
            bwd_load_keys(0, Ks, Vs, pk, pk_half, pv, pv_half, pbase, psr, j0, rows, D, lid, wg);
        else
            bwd_load_keys(0, Ks, Vs, k, k_half, v, v_half, kbase, ksr, j0, rows, D, lid, wg);
        barrier(CLK_LOCAL_MEM_FENCE);
        bwd_scores(0, Qs, dOs, Ks, Vs, rl, rd, Pl, Zl, c, D, i0, j0, is_prefix, rows, kv_len,
                   causal, shift, lid, wg);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int jj = 0; jj < PFX_BK; jj++) {
            float z = Zl[jj * PFX_BQ + r];
            __local const float *kr = Ks + jj * LD + ch;
            UNROLL_D for (int u = 0; u < DCH; u++)
                acc[u] = mad(z, kr[u * PFX_DT], acc[u]);
        }
    }

    int i = i0 + r;
    if (dq && i < N) {
        ulong base = qbase + (ulong)i * qsr;
        UNROLL_D for (int u = 0; u < DCH; u++) {
            int d = ch + u * PFX_DT;
            if (d < D) {
                float g = c * (dimf ? dimf[d] : 1.0f) * acc[u];
                dq[base + d] = accumulate ? dq[base + d] + g : g;
            }
        }
    }
    if (!gain_part)
        return;
    /* R_d = sum_r q_id dQraw_id over the tile's rows, in row order. */
    barrier(CLK_LOCAL_MEM_FENCE);
    UNROLL_D for (int u = 0; u < DCH; u++) {
        int d = ch + u * PFX_DT;
        float qv = 0.0f;
        if (i < q_len && d < D)
            qv = pfx_load(q, qbase + (ulong)i * qsr + d, q_half);
        dOs[r * LD + d] = qv * acc[u];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    __global float *out = gain_part + (((ulong)h * B + b) * ntq + qt) * D;
    for (int d = lid; d < D; d += wg) {
        float s = 0.0f;
        for (int rr = 0; rr < PFX_BQ; rr++)
            s += dOs[rr * LD + d];
        out[d] = s;
    }
}

#endif /* PFX_CPU_VEC */

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
    red[lid] = mine;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0 && dgain) {
        float s = 0.0f;
        for (int t = 0; t < GAIN_WG; t++)
            s += red[t];
        float v = dscale[h] * s;
        dgain[h] = accumulate ? dgain[h] + v : v;
    }
}
