/* The CPU path of the attention backward's dK/dV and dQ kernels; built after
 * cl/attention_bwd.cl (options, loaders), see there. */
#if CPU_VEC
/*
 * CPU path (CPU_VEC = 16, set only in the CPU option set): PoCL
 * vectorizes across work-items poorly once loops over keys or dimensions sit
 * inside (8.8 GFLOP/s here), so, as in the forward's VEC path, a work-item
 * owns 16 query rows (dQ) or 16 keys (dK/dV) as the lanes of float16
 * vectors; the other side comes from local memory as broadcasts, CB rows at
 * a time (2 CB score vectors stay in registers). p is recomputed as
 * exp2((c s - lse) log2e) with the forward's polynomial exp2 (libm exp
 * does not vectorize). Sums run in a fixed order (lanes, then work-items).
 * Loops over D run to the runtime D, not unrolled (PoCL compile time).
 */
#if CPU_VEC != 16
#error "CPU_VEC must be 16"
#endif
#if BQ % (CPU_VEC * 1) || BK % CPU_VEC
#error "BQ and BK must be multiples of CPU_VEC"
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
__kernel __attribute__((reqd_work_group_size(BK / VEC, 1, 1)))
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
    __local float Qs[BQ * LD], dOs[BQ * LD], rl[BQ], rd[BQ];
    const int wg = BK / VEC;
    int lid = get_local_id(0);
    int tile = get_group_id(0) + tile_offset;
    int b = get_group_id(1) / Hkv, hk = get_group_id(1) % Hkv;
    int group = H / Hkv;
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;

    int is_prefix = tile < prefix_tiles;
    int j0 = (is_prefix ? tile : tile - prefix_tiles) * BK;
    int rows = min(BK, (is_prefix ? P : M) - j0);
    int jl = lid * VEC; /* first key of this work-item in the tile */

    /* This work-item's keys, straight from global memory (read once). */
    __global const void *ksrc = is_prefix ? pk : k, *vsrc = is_prefix ? pv : v;
    int kh = is_prefix ? pk_half : k_half, vh = is_prefix ? pv_half : v_half;
    ulong kbase = is_prefix ? (ulong)entry * psb + (ulong)hk * psh
                            : (ulong)b * ksb + (ulong)hk * ksh;
    ulong ksr_ = is_prefix ? psr : ksr;
    floatv kv[DMAX], vv[DMAX], dk_acc[DMAX], dv_acc[DMAX];
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
    i_begin = (i_begin / BQ) * BQ;

    ulong qhead = (ulong)b * qsb, ohead = (ulong)b * osb;
    for (int h = hk * group; h < (hk + 1) * group; h++) {
        float c = head[h];
        __global const float *dimf = structured ? head + H + h * D : 0;
        ulong stats = ((ulong)b * H + h) * N;
        for (int i0 = i_begin; i0 < i_end; i0 += BQ) {
            barrier(CLK_LOCAL_MEM_FENCE);
            bwd_load_queries(1, Qs, dOs, rl, rd, q, q_half, qhead + (ulong)h * qsh, qsr, d_o,
                             do_half, ohead + (ulong)h * osh, osr, lse + stats, delta + stats,
                             dimf, i0, q_len, D, lid, wg);
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int r0 = 0; r0 < BQ && i0 + r0 < q_len; r0 += CB) {
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
                    floatv p = select((floatv)0.0f, bwd_exp2v((s[u] * c - l) * LOG2E), vis);
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
__kernel __attribute__((reqd_work_group_size(BQ / VEC, 1, 1)))
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
    __local float Ks[BK * LD], Vs[BK * LD];
    __local float red[BQ / VEC * DMAX];
    const int wg = BQ / VEC;
    int lid = get_local_id(0);
    int qt = get_group_id(0), ntq = get_num_groups(0);
    int b = get_group_id(1) / H, h = get_group_id(1) % H;
    int hk = h / (H / Hkv);
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;
    int i0 = qt * BQ, il = i0 + lid * VEC; /* first row of this work-item */
    float c = head[h];
    __global const float *dimf = structured ? head + H + h * D : 0;
    ulong qbase = (ulong)b * qsb + (ulong)h * qsh, obase = (ulong)b * osb + (ulong)h * osh;
    __global const float *lse_row = lse + ((ulong)b * H + h) * N;
    __global const float *delta_row = delta + ((ulong)b * H + h) * N;

    /* Lanes: q (1 + G_hd), dO, LSE (-inf past q_len: p = 0), Delta. */
    floatv qv[DMAX], gv[DMAX], acc[DMAX];
    float t1[VEC], t2[VEC];
    for (int x = 0; x < VEC; x++) {
        int i = il + x, ok = i < q_len;
        t1[x] = ok ? lse_row[i] : -INFINITY;
        t2[x] = ok ? delta_row[i] : 0.0f;
    }
    const floatv lsev = vload16(0, t1), dlt = vload16(0, t2);
    const intv row_ok = lsev != (floatv)(-INFINITY);
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
        int i_last = min(i0 + BQ, q_len) - 1;
        t_end = min(t_end, max(0, i_last + shift + 1));
    }
    ulong pbase = (ulong)entry * psb + (ulong)hk * psh;
    ulong kbase = (ulong)b * ksb + (ulong)hk * ksh;
    int prefix_tiles = (p_end + BK - 1) / BK;
    int tiles = prefix_tiles + (t_end + BK - 1) / BK;
    for (int tile = 0; tile < tiles; tile++) {
        int is_prefix = tile < prefix_tiles;
        int j0 = (is_prefix ? tile : tile - prefix_tiles) * BK;
        int rows = min(BK, (is_prefix ? P : M) - j0);
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
                floatv p = select((floatv)0.0f, bwd_exp2v((s[u] * c - lsev) * LOG2E), vis);
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
        red[lid * DMAX + d] = r;
    }
    if (!gain_part)
        return;
    /* R_d = sum over the work-items' partials, in work-item order. */
    barrier(CLK_LOCAL_MEM_FENCE);
    __global float *out = gain_part + (((ulong)h * B + b) * ntq + qt) * D;
    for (int d = lid; d < D; d += wg) {
        float s = 0.0f;
        for (int w = 0; w < wg; w++)
            s += red[w * DMAX + d];
        out[d] = s;
    }
}
#endif /* CPU_VEC */
