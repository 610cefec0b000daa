/* The GPU path of the attention backward's dK/dV and dQ kernels (work-items
 * sharing a row's head dimensions); built after cl/attention_bwd.cl and
 * cl/attention_bwd.cpu.cl, see there. */
#if !CPU_VEC
#define DCH (DMAX / DT)      /* dimensions per work-item */
/* GPU tiles (DT > 1): the per-dimension loops over the DCH accumulators are
 * unrolled so that dk_acc / dv_acc / acc stay in registers (not rolled up in
 * a stack frame, as NVPTX did at DCH = 16). With DT = 1 (CPU) a work-item
 * owns a whole row, up to 256 accumulators, left to the compiler. */
#if DT > 1
#define UNROLL_D _Pragma("unroll")
#else
#define UNROLL_D
#endif

/* Scores of a (query tile, key tile) pair: P = p_ij and
 * Z = p_ij (dp_ij - Delta_i) (without c), 0 where hidden. Qs holds
 * q_i (1 + G_hd); rows beyond the tile's valid rows carry lse = -inf. */
void bwd_scores(int kt, __local const float *Qs, __local const float *dOs,
                __local const float *Ks, __local const float *Vs, __local const float *rl,
                __local const float *rd, __local float *Pl, __local float *Zl, float c, int D,
                int i0, int j0, int prefix_tile, int key_rows, int kv_len, int causal, int shift,
                int lid, int wg, uint4 drop_stream, uint drop_threshold, float drop_scale,
                int drop_on, uint drop_row0, uint drop_col0)
{
    FOR_LANES(e, BQ * BK, lid, wg) {
        /* neighbours: neighbouring keys (dkv) or queries (dq) */
        int r = kt ? e / BK : e % BQ;
        int jj = kt ? e % BK : e / BQ;
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
            p = exp(c * s - lse); /* not saturated here: the select spills registers on gfx90a (the gate) */
            if (drop_on) { /* the forward's mask: dV takes p f, dp the factor f */
                const float f = pfx_dropout_factor(drop_stream, drop_threshold, drop_scale,
                                                   drop_row0 + (uint)r, drop_col0 + (uint)jj);
                dz = p * (dp * f - rd[r]);
                p *= f;
            } else {
                dz = p * (dp - rd[r]);
            }
        }
        Pl[SIDX(kt, r, jj)] = p;
        Zl[SIDX(kt, r, jj)] = dz;
    }
}

#define BWD_LOCALS                                   \
    __local float Ks[KSZ], Vs[KSZ];                  \
    __local float Qs[QSZ], dOs[QSZ];                 \
    __local float Pl[BQ * BK], Zl[BQ * BK]; \
    __local float rl[BQ], rd[BQ]

/*
 * Grid: (tiles * BK * DT, B * Hkv); tile t = group(0) + tile_offset,
 * t < prefix_tiles: prefix keys [t * BK, ...), else input keys.
 * items = [q_len B | kv_len B | bank entry B]; head = [c_h H | 1 + G_hd H*D].
 */
__kernel __attribute__((reqd_work_group_size(BK * DT, 1, 1)))
void pfx_attn_bwd_dkv(int B, int H, int Hkv, int N, int M, int P, int D, int causal,
                      __global const void *q, int q_half, ulong qsb, ulong qsh, ulong qsr,
                      __global const void *k, int k_half, __global const void *v, int v_half,
                      ulong ksb, ulong ksh, ulong ksr,
                      __global const void *pk, int pk_half, __global const void *pv, int pv_half,
                      ulong psb, ulong psh, ulong psr,
                      __global const void *d_o, int do_half, ulong osb, ulong osh, ulong osr,
                      __global const float *lse, __global const float *delta,
                      __global const float *head, int structured, __global const int *items,
                      uint4 drop_stream, uint drop_threshold, float drop_scale, uint drop_item0,
                      int drop_on_arg,
                      __global float *dk, __global float *dv, int accumulate,
                      __global float *dpk_part, __global float *dpv_part,
                      int tile_offset, int prefix_tiles)
{
    BWD_LOCALS;
    const int drop_on = PFX_ATTN_DROPOUT && drop_on_arg;
    const int wg = BK * DT;
    int lid = get_local_id(0);
    int jj = lid % BK, ch = lid / BK;
    int tile = get_group_id(0) + tile_offset;
    int b = get_group_id(1) / Hkv, hk = get_group_id(1) % Hkv;
    int group = H / Hkv;
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;

    int is_prefix = tile < prefix_tiles;
    int j0 = (is_prefix ? tile : tile - prefix_tiles) * BK;
    int rows = min(BK, (is_prefix ? P : M) - j0);
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
    i_begin = (i_begin / BQ) * BQ;

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
        for (int i0 = i_begin; i0 < i_end; i0 += BQ) {
            barrier(CLK_LOCAL_MEM_FENCE);
            bwd_load_queries(1, Qs, dOs, rl, rd, q, q_half, qhead + (ulong)h * qsh, qsr, d_o,
                             do_half, ohead + (ulong)h * osh, osr, lse + stats, delta + stats,
                             dimf, i0, q_len, D, lid, wg);
            barrier(CLK_LOCAL_MEM_FENCE);
            bwd_scores(1, Qs, dOs, Ks, Vs, rl, rd, Pl, Zl, c, D, i0, j0, is_prefix, rows,
                       kv_len, causal, shift, lid, wg, drop_stream, drop_threshold, drop_scale,
                       drop_on, ((drop_item0 + (uint)b) * (uint)H + (uint)h) * (uint)N + (uint)i0,
                       (uint)(is_prefix ? j0 : P + j0));
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int r = 0; r < BQ; r++) {
                float w = Pl[r * BK + jj], z = c * Zl[r * BK + jj];
                __local const float *qr = Qs + r * LD + ch, *gr = dOs + r * LD + ch;
                UNROLL_D for (int u = 0; u < DCH; u++) {
                    dv_acc[u] = mad(w, gr[u * DT], dv_acc[u]);
                    dk_acc[u] = mad(z, qr[u * DT], dk_acc[u]);
                }
            }
        }
    }

    if (jj >= rows)
        return;
    ulong base = out_base + (ulong)jj * out_row;
    UNROLL_D for (int u = 0; u < DCH; u++) {
        int d = ch + u * DT;
        if (d < D) {
            if (out_k)
                out_k[base + d] = out_add ? out_k[base + d] + dk_acc[u] : dk_acc[u];
            if (out_v)
                out_v[base + d] = out_add ? out_v[base + d] + dv_acc[u] : dv_acc[u];
        }
    }
}

/*
 * Grid: (ceil(N / BQ) * BQ * DT, B * H). gain_part: [H, B, q tiles, D]
 * (written when not NULL).
 */
__kernel __attribute__((reqd_work_group_size(BQ * DT, 1, 1)))
void pfx_attn_bwd_dq(int B, int H, int Hkv, int N, int M, int P, int D, int causal,
                     __global const void *q, int q_half, ulong qsb, ulong qsh, ulong qsr,
                     __global const void *k, int k_half, __global const void *v, int v_half,
                     ulong ksb, ulong ksh, ulong ksr,
                     __global const void *pk, int pk_half, __global const void *pv, int pv_half,
                     ulong psb, ulong psh, ulong psr,
                     __global const void *d_o, int do_half, ulong osb, ulong osh, ulong osr,
                     __global const float *lse, __global const float *delta,
                     __global const float *head, int structured, __global const int *items,
                     uint4 drop_stream, uint drop_threshold, float drop_scale, uint drop_item0,
                     int drop_on_arg, __global float *dq, int accumulate, __global float *gain_part)
{
    BWD_LOCALS;
    const int drop_on = PFX_ATTN_DROPOUT && drop_on_arg;
    const int wg = BQ * DT;
    int lid = get_local_id(0);
    int r = lid % BQ, ch = lid / BQ;
    int qt = get_group_id(0), ntq = get_num_groups(0);
    int b = get_group_id(1) / H, h = get_group_id(1) % H;
    int hk = h / (H / Hkv);
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;
    int i0 = qt * BQ;
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
        int i_last = min(i0 + BQ, q_len) - 1;
        t_end = min(t_end, max(0, i_last + shift + 1));
    }

    float acc[DCH];
    UNROLL_D for (int u = 0; u < DCH; u++)
        acc[u] = 0.0f;

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
        bwd_scores(0, Qs, dOs, Ks, Vs, rl, rd, Pl, Zl, c, D, i0, j0, is_prefix, rows, kv_len,
                   causal, shift, lid, wg, drop_stream, drop_threshold, drop_scale, drop_on,
                   ((drop_item0 + (uint)b) * (uint)H + (uint)h) * (uint)N + (uint)i0,
                   (uint)(is_prefix ? j0 : P + j0));
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int jj = 0; jj < BK; jj++) {
            float z = Zl[jj * BQ + r];
            __local const float *kr = Ks + jj * LD + ch;
            UNROLL_D for (int u = 0; u < DCH; u++)
                acc[u] = mad(z, kr[u * DT], acc[u]);
        }
    }

    int i = i0 + r;
    if (dq && i < N) {
        ulong base = qbase + (ulong)i * qsr;
        UNROLL_D for (int u = 0; u < DCH; u++) {
            int d = ch + u * DT;
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
        int d = ch + u * DT;
        float qv = 0.0f;
        if (i < q_len && d < D)
            qv = pfx_load(q, qbase + (ulong)i * qsr + d, q_half);
        dOs[r * LD + d] = qv * acc[u];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    __global float *out = gain_part + (((ulong)h * B + b) * ntq + qt) * D;
    for (int d = lid; d < D; d += wg) {
        float s = 0.0f;
        for (int rr = 0; rr < BQ; rr++)
            s += dOs[rr * LD + d];
        out[d] = s;
    }
}
#endif /* !CPU_VEC */
