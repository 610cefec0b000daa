/* The CPU path of the attention backward's dK/dV and dQ kernels; built after
 * cl/attention_bwd.cl (options, Delta, the reductions), see there.
 */
#if CPU_VEC
/*
 * CPU path (PFX_ATTN_VEC = the device's native float width: 4, 8 or 16).
 * As the forward's CPU path (cl/attention_fwd.cpu.cl): one work-item per
 * work-group, every tile product register-blocked as a CPU GEMM with fma()
 * (PFX_DEFINE_CPU_TILE_PRODUCTS, cl/common.cl):
 * RB rows x NVK vectors for the scores (dK/dV: S = Q K~^T, dP = dO V~^T with
 * K~, V~ transposed once per group so that keys are the lanes; dQ: S^T and
 * dP^T with Q~, dO transposed once per group so that rows are the lanes), RB
 * keys (dK, dV) or rows (dQ) x NVD vectors of head dimensions for the
 * products that accumulate. Local memory is the CPU's cache.
 *
 * dkv: BK keys of one (item, kv head); K~^T, V~^T staged once; for every
 * query head of the group and query tile of BQ rows that can see the keys:
 * S and dP, then P = exp2((c s - lse) log2e) and dS = c P (dP - Delta)
 * (0 where hidden), then dV += P^T dO and dK += dS^T Q~.
 * dq: BQ rows of one (item, head); for every visible key tile: S and dP, Z =
 * P (dP - Delta) (without c), dQraw += Z K~. Sums run in a fixed order.
 * dkvq, the single pass (both wanted): dkv's work for a chunk of key tiles,
 * and dQraw += Z K~ into the rows of a partial that only this work-item
 * writes: 5 tile products per tile pair where dkv + dq take 7, the price
 * being a dQraw partial per chunk (few chunks: a CPU has few cores).
 */
#define VEC CPU_VEC
#if VEC == 4
typedef float4 floatv;
typedef int4 intv;
#define vloadv vload4
#define vstorev vstore4
#define as_floatv as_float4
#define convert_intv convert_int4
#define LANES ((intv)(0, 1, 2, 3))
#elif VEC == 8
typedef float8 floatv;
typedef int8 intv;
#define vloadv vload8
#define vstorev vstore8
#define as_floatv as_float8
#define convert_intv convert_int8
#define LANES ((intv)(0, 1, 2, 3, 4, 5, 6, 7))
#elif VEC == 16
typedef float16 floatv;
typedef int16 intv;
#define vloadv vload16
#define vstorev vstore16
#define as_floatv as_float16
#define convert_intv convert_int16
#define LANES ((intv)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#else
#error "PFX_ATTN_VEC must be 1 (GPU path), 4, 8 or 16"
#endif
#define RB (VEC >= 16 ? 8 : 4) /* rows (or keys) per register block */
#if DMAX % VEC || BK % VEC || BQ % VEC || BQ % RB || BK % RB
#error "the CPU path needs HEAD_DIM, BLOCK_M and BLOCK_N multiples of VEC and of RB"
#endif
/* vectors per score block: keys (dK/dV) or rows (dQ) */
#define NVK (BK % (2 * VEC) || BQ % (2 * VEC) ? 1 : 2)
#define NVD (DMAX >= 2 * VEC ? 2 : 1) /* head-dimension vectors per block */
/* Local float arrays aligned as floatv and their vectors (cl/common.cl). */
#define LVEC(p, i)            PFX_LVEC(floatv, p, i)
#define LOCAL_FLOATS(name, n) PFX_LOCAL_FLOATS(floatv, VEC, name, n)

/* 2^x, x <= 0, vectorizable: the forward's polynomial (cl/common.cl). */
PFX_DEFINE_POLY_EXP2(bwd_exp2v, floatv, intv, convert_intv, as_floatv)

/* The tile products, RB rows (or keys) x NVK score vectors or NVD vectors of
 * head dimensions per register block (cl/common.cl). */
PFX_DEFINE_CPU_TILE_PRODUCTS(floatv, VEC, RB, NVK, NVD, DMAX)

/* Key rows [j0, j0 + rows) of K~ and V~ transposed into kt, vt [DMAX][BK];
 * zeros past rows or D. */
void bwd_stage_keys_cpu(__local float *kt, __local float *vt, __global const void *k, int k_half,
                        __global const void *v, int v_half, ulong base, ulong sr, int j0,
                        int rows, int D)
{
    for (int c = 0; c < BK; c++) {
        ulong row = base + (ulong)(j0 + c) * sr;
        if (c < rows && !k_half && !v_half && D == DMAX) { /* float rows: vector loads */
            for (int d0 = 0; d0 < DMAX; d0 += VEC) {
                float kl[VEC], vl[VEC];
                vstorev(vloadv(0, (__global const float *)k + row + d0), 0, kl);
                vstorev(vloadv(0, (__global const float *)v + row + d0), 0, vl);
#pragma unroll
                for (int x = 0; x < VEC; x++) {
                    kt[(d0 + x) * BK + c] = kl[x];
                    vt[(d0 + x) * BK + c] = vl[x];
                }
            }
            continue;
        }
        for (int d = 0; d < DMAX; d++) {
            int ok = c < rows && d < D;
            kt[d * BK + c] = ok ? pfx_load(k, row + d, k_half) : 0.0f;
            vt[d * BK + c] = ok ? pfx_load(v, row + d, v_half) : 0.0f;
        }
    }
}

/* The same rows of one of them as rows: xn [BK][DMAX]. */
void bwd_stage_rows_cpu(__local float *xn, __global const void *x, int x_half, ulong base,
                        ulong sr, int j0, int rows, int D)
{
    for (int c = 0; c < BK; c++) {
        ulong row = base + (ulong)(j0 + c) * sr;
        if (c < rows && !x_half && D == DMAX) { /* float rows: vector copies */
            for (int d0 = 0; d0 < DMAX; d0 += VEC)
                LVEC(xn, c * DMAX + d0) = vloadv(0, (__global const float *)x + row + d0);
            continue;
        }
        for (int d = 0; d < DMAX; d++)
            xn[c * DMAX + d] = c < rows && d < D ? pfx_load(x, row + d, x_half) : 0.0f;
    }
}

/* Rows [i0, i0 + BQ) of Q (times 1 + G_hd) and dO of one (item, head) as
 * rows [BQ][DMAX], their LSE and Delta; rows past q_end get zeros and
 * lse = -inf (no visible key). */
void bwd_load_queries_cpu(__local float *Qs, __local float *dOs, __local float *rl,
                          __local float *rd, __global const void *q, int q_half, ulong qbase,
                          ulong qsr, __global const void *d_o, int do_half, ulong obase,
                          ulong osr, __global const float *lse_row,
                          __global const float *delta_row, __global const float *dimf, int i0,
                          int q_end, int D)
{
    for (int r = 0; r < BQ; r++) {
        int i = i0 + r, live = i < q_end;
        ulong qrow = qbase + (ulong)i * qsr, orow = obase + (ulong)i * osr;
        if (live && !q_half && !do_half && D == DMAX) { /* float rows: vector loads */
            for (int d0 = 0; d0 < DMAX; d0 += VEC) {
                floatv qv = vloadv(0, (__global const float *)q + qrow + d0);
                if (dimf)
                    qv *= vloadv(0, dimf + d0);
                LVEC(Qs, r * DMAX + d0) = qv;
                LVEC(dOs, r * DMAX + d0) = vloadv(0, (__global const float *)d_o + orow + d0);
            }
        } else {
            for (int d = 0; d < DMAX; d++) {
                float qv = 0.0f, gv = 0.0f;
                if (live && d < D) {
                    qv = pfx_load(q, qrow + d, q_half);
                    if (dimf)
                        qv *= dimf[d];
                    gv = pfx_load(d_o, orow + d, do_half);
                }
                Qs[r * DMAX + d] = qv;
                dOs[r * DMAX + d] = gv;
            }
        }
        rl[r] = live ? lse_row[i] : -INFINITY;
        rd[r] = live ? delta_row[i] : 0.0f;
    }
}

/* The arguments every dK/dV and dQ kernel of this path takes first (the
 * host's SHARED_ARGS), as parameters and as the names passed on. */
#define BWD_SHARED_PARAMS                                                                    \
    int B, int H, int Hkv, int N, int M, int P, int D, int causal, __global const void *q,    \
        int q_half, ulong qsb, ulong qsh, ulong qsr, __global const void *k, int k_half,       \
        __global const void *v, int v_half, ulong ksb, ulong ksh, ulong ksr,                   \
        __global const void *pk, int pk_half, __global const void *pv, int pv_half, ulong psb, \
        ulong psh, ulong psr, __global const void *d_o, int do_half, ulong osb, ulong osh,     \
        ulong osr, __global const float *lse, __global const float *delta,                     \
        __global const float *head, int structured, __global const int *items,                \
        uint4 drop_stream, uint drop_threshold, float drop_scale, uint drop_item0, int drop_on
#define BWD_SHARED_NAMES                                                                     \
    B, H, Hkv, N, M, P, D, causal, q, q_half, qsb, qsh, qsr, k, k_half, v, v_half, ksb, ksh,  \
        ksr, pk, pk_half, pv, pv_half, psb, psh, psr, d_o, do_half, osb, osh, osr, lse, delta, \
        head, structured, items, drop_stream, drop_threshold, drop_scale, drop_item0, drop_on
/* The local tiles of one key tile's work (declared in the kernels: OpenCL
 * has __local variables at kernel scope only). Kn and Zs only with dQ. */
#define BWD_KEY_TILE_LOCALS                                                                  \
    LOCAL_FLOATS(Kt, DMAX * BK); /* K~^T */                                                   \
    LOCAL_FLOATS(Vt, DMAX * BK); /* V~^T */                                                   \
    LOCAL_FLOATS(Qs, BQ * DMAX);                                                              \
    LOCAL_FLOATS(dOs, BQ * DMAX);                                                             \
    LOCAL_FLOATS(Ps, BQ * BK);                                                                \
    LOCAL_FLOATS(dSs, BQ * BK);                                                               \
    LOCAL_FLOATS(dKa, BK * DMAX);                                                             \
    LOCAL_FLOATS(dVa, BK * DMAX);                                                             \
    __local float rl[BQ], rd[BQ]
#define BWD_KEY_TILE_LOCAL_NAMES Kt, Vt, Qs, dOs, Ps, dSs, dKa, dVa, rl, rd

/* Tile `tile` of BK keys of (item b, kv head hk) (prefix tiles first): for
 * every query head of the group and query tile of BQ rows that can see the
 * keys, S and dP, P and dS, then dV~ += P^T dO and dK~ += dS^T Q~, written to
 * dk/dv (input keys) or dpk_part/dpv_part (prefix keys) where not NULL.
 * With dqp (the single pass): also dQraw += Z K~ for those rows, added to
 * dqp's rows [N][DMAX] of each head (heads of item b at h * N * DMAX), with
 * Kn (K~ rows) and Zs (Z) as further locals. */
void bwd_key_tile_cpu(BWD_SHARED_PARAMS, int tile, int prefix_tiles, int b, int hk,
                      __global float *dk, __global float *dv, int accumulate,
                      __global float *dpk_part, __global float *dpv_part,
                      __global float *dqp, __local float *Kn, __local float *Zs,
                      __local float *Kt, __local float *Vt, __local float *Qs,
                      __local float *dOs, __local float *Ps, __local float *dSs,
                      __local float *dKa, __local float *dVa, __local float *rl,
                      __local float *rd)
{
    int group = H / Hkv;
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;

    int is_prefix = tile < prefix_tiles;
    int j0 = (is_prefix ? tile : tile - prefix_tiles) * BK;
    int rows = min(BK, (is_prefix ? P : M) - j0);
    /* keys [j0, j0 + keys) exist and are not past kv_len */
    int keys = is_prefix ? rows : max(0, min(rows, kv_len - j0));

    __global const void *ks = is_prefix ? pk : k, *vs = is_prefix ? pv : v;
    int ks_half = is_prefix ? pk_half : k_half, vs_half = is_prefix ? pv_half : v_half;
    ulong kbase = is_prefix ? (ulong)entry * psb + (ulong)hk * psh
                            : (ulong)b * ksb + (ulong)hk * ksh;
    ulong ksr_ = is_prefix ? psr : ksr;
    bwd_stage_keys_cpu(Kt, Vt, ks, ks_half, vs, vs_half, kbase, ksr_, j0, rows, D);
    if (dqp)
        bwd_stage_rows_cpu(Kn, ks, ks_half, kbase, ksr_, j0, rows, D);
    for (int e = 0; e < BK * DMAX; e++)
        dKa[e] = dVa[e] = 0.0f;
    const int kb_end = (keys + RB - 1) / RB * RB; /* key register blocks */

    int i_begin = 0, i_end = keys > 0 ? q_len : 0;
    if (!is_prefix && causal)
        i_begin = max(0, j0 - shift);
    i_begin = (i_begin / BQ) * BQ;

    for (int h = hk * group; h < (hk + 1) * group; h++) {
        float c = head[h];
        __global const float *dimf = structured ? head + H + h * D : 0;
        ulong stats = ((ulong)b * H + h) * N;
        for (int i0 = i_begin; i0 < i_end; i0 += BQ) {
            bwd_load_queries_cpu(Qs, dOs, rl, rd, q, q_half, (ulong)b * qsb + (ulong)h * qsh,
                                 qsr, d_o, do_half, (ulong)b * osb + (ulong)h * osh, osr,
                                 lse + stats, delta + stats, dimf, i0, q_len, D);
            const int live_rows = min(BQ, q_len - i0);
            const int qrows = (live_rows + RB - 1) / RB * RB;
            pfx_cpu_scores(Qs, Kt, Ps, BK, qrows, keys, D);
            pfx_cpu_scores(dOs, Vt, dSs, BK, qrows, keys, D);
            const int vecs = (keys + VEC - 1) / VEC;
            const uint drop_row0 = ((drop_item0 + (uint)b) * (uint)H + (uint)h) * (uint)N + (uint)i0;
            const uint drop_col0 = (uint)(is_prefix ? j0 : P + j0);
            for (int r = 0; r < qrows; r++) {
                const float l = rl[r], dl = rd[r];
                /* visible: key < keys, row live, causal: t <= i + shift */
                const int limit = l == -INFINITY ? 0
                                  : (causal && !is_prefix) ? min(keys, i0 + r + shift + 1 - j0)
                                                           : keys;
                for (int y = 0; y < vecs; y++) {
                    __local float *sp = Ps + r * BK + y * VEC, *dp = dSs + r * BK + y * VEC;
                    intv vis = LANES + (intv)(y * VEC) < (intv)limit;
                    floatv sv = LVEC(sp, 0);
                    floatv p = select((floatv)0.0f,
                                      bwd_exp2v((PFX_SAT_LOGIT(sv * c, sv) - l) * PFX_LOG2E), vis);
                    floatv dpv = LVEC(dp, 0);
                    if (drop_on) { /* the forward's mask: dV takes p f, dp the factor f */
                        float fl[VEC];
                        for (int x = 0; x < VEC; x++)
                            fl[x] = pfx_dropout_factor(drop_stream, drop_threshold, drop_scale,
                                                       drop_row0 + (uint)r,
                                                       drop_col0 + (uint)(y * VEC + x));
                        const floatv f = vloadv(0, fl);
                        dpv *= f;
                        LVEC(sp, 0) = p * f;
                    } else {
                        LVEC(sp, 0) = p;
                    }
                    floatv z = p * (dpv - dl);
                    LVEC(dp, 0) = c * z;
                    if (dqp)
                        LVEC(Zs + r * BK + y * VEC, 0) = z;
                }
            }
            /* dV += P^T dO, dK += dS^T Q~ over the tile's rows */
            pfx_cpu_accumulate(dVa, 0, Ps, BK, 1, dOs, kb_end, qrows, D);
            pfx_cpu_accumulate(dKa, 0, dSs, BK, 1, Qs, kb_end, qrows, D);
            if (dqp) { /* dQraw += Z K~, through Qs (Q~ is no longer needed) */
                __global float *rows_q = dqp + ((ulong)(b * H + h) * N + i0) * DMAX;
                for (int r = 0; r < qrows; r++)
                    for (int d0 = 0; d0 < DMAX; d0 += VEC)
                        LVEC(Qs, r * DMAX + d0) =
                            r < live_rows ? vloadv(0, rows_q + r * DMAX + d0) : (floatv)0.0f;
                pfx_cpu_accumulate(Qs, 0, Zs, 1, BK, Kn, qrows, keys, D);
                for (int r = 0; r < live_rows; r++)
                    for (int d0 = 0; d0 < DMAX; d0 += VEC)
                        vstorev(LVEC(Qs, r * DMAX + d0), 0, rows_q + r * DMAX + d0);
            }
        }
    }

    __global float *out_k = is_prefix ? dpk_part : dk;
    __global float *out_v = is_prefix ? dpv_part : dv;
    ulong out_base = is_prefix ? (((ulong)b * Hkv + hk) * P + j0) * D
                               : (ulong)b * ksb + (ulong)hk * ksh + (ulong)j0 * ksr;
    ulong out_row = is_prefix ? (ulong)D : ksr;
    int out_add = !is_prefix && accumulate;
    for (int x = 0; x < rows; x++)
        for (int d = 0; d < D; d++) {
            ulong at = out_base + (ulong)x * out_row + d;
            float gk = x < keys ? dKa[x * DMAX + d] : 0.0f;
            float gv = x < keys ? dVa[x * DMAX + d] : 0.0f;
            if (out_k)
                out_k[at] = out_add ? out_k[at] + gk : gk;
            if (out_v)
                out_v[at] = out_add ? out_v[at] + gv : gv;
        }
}

/* Grid: (tiles, B * Hkv); keys j0 + [0, BK) of tile get_group_id(0) + tile_offset. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void pfx_attn_bwd_dkv(BWD_SHARED_PARAMS, __global float *dk, __global float *dv, int accumulate,
                      __global float *dpk_part, __global float *dpv_part,
                      int tile_offset, int prefix_tiles)
{
    BWD_KEY_TILE_LOCALS;
    bwd_key_tile_cpu(BWD_SHARED_NAMES, get_group_id(0) + tile_offset, prefix_tiles,
                     get_group_id(1) / Hkv, get_group_id(1) % Hkv, dk, dv, accumulate,
                     dpk_part, dpv_part, 0, 0, 0, BWD_KEY_TILE_LOCAL_NAMES);
}

/* The single pass. Grid: (chunks, B * Hkv); the key tiles chunk, chunk +
 * chunks, ... (interleaved: causal tiles differ in cost) of one (item, kv
 * head), each as in dkv and also adding Z K~ to this chunk's dQraw partial
 * dq_part[chunk][B][H][N][DMAX], which this work-item alone writes: it
 * zeroes it first, then adds in tile order (a fixed order: deterministic).
 * pfx_attn_bwd_dq_finish sums the chunks' partials in chunk order. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void pfx_attn_bwd_dkvq(BWD_SHARED_PARAMS, __global float *dk, __global float *dv, int accumulate,
                       __global float *dpk_part, __global float *dpv_part, int prefix_tiles,
                       int tiles, __global float *dq_part)
{
    BWD_KEY_TILE_LOCALS;
    LOCAL_FLOATS(Kn, BK * DMAX); /* K~ rows */
    LOCAL_FLOATS(Zs, BQ * BK);
    int chunk = get_group_id(0), chunks = get_num_groups(0);
    int b = get_group_id(1) / Hkv, hk = get_group_id(1) % Hkv;
    int group = H / Hkv;
    __global float *dqp = dq_part + (ulong)chunk * B * H * N * DMAX;
    for (int h = hk * group; h < (hk + 1) * group; h++) {
        __global float *rows_q = dqp + (ulong)(b * H + h) * N * DMAX;
        for (ulong e = 0; e < (ulong)N * DMAX; e += VEC)
            vstorev((floatv)0.0f, 0, rows_q + e);
    }
    for (int tile = chunk; tile < tiles; tile += chunks)
        bwd_key_tile_cpu(BWD_SHARED_NAMES, tile, prefix_tiles, b, hk, dk, dv, accumulate,
                         dpk_part, dpv_part, dqp, Kn, Zs, BWD_KEY_TILE_LOCAL_NAMES);
}

/* dQ = c (1 + G_hd) dQraw of rows i0 + [0, BQ) from dQa [BQ][DMAX] (rows past
 * N not written), and the tile's gain partial R_d = sum_i q_id dQraw_id (row
 * order) into gain_out when not NULL; gain (DMAX floats) is scratch. Row by
 * row, so dq and q are read along their rows. */
void bwd_store_dq_cpu(__local const float *dQa, __local float *gain, int i0, int q_len, int N,
                      int D, float c, __global const float *dimf, __global const void *q,
                      int q_half, ulong qbase, ulong qsr, __global float *dq, int accumulate,
                      __global float *gain_out)
{
    for (int d = 0; d < D; d++)
        gain[d] = 0.0f;
    for (int x = 0; x < BQ; x++) {
        const int i = i0 + x;
        const ulong row = qbase + (ulong)i * qsr;
        for (int d = 0; d < D; d++) {
            const float raw = dQa[x * DMAX + d];
            if (dq && i < N) {
                /* rounded before the accumulate add (a product, not fused
                 * into it), as on the GPU path */
                volatile float gx = raw * (c * (dimf ? dimf[d] : 1.0f));
                dq[row + d] = accumulate ? dq[row + d] + gx : gx;
            }
            if (i < q_len)
                gain[d] += pfx_load(q, row + d, q_half) * raw;
        }
    }
    if (gain_out)
        for (int d = 0; d < D; d++)
            gain_out[d] = gain[d];
}

/* After pfx_attn_bwd_dkvq. Grid: (ceil(N / BQ), B * H); rows i0 + [0, BQ) of
 * one (item, head): dQraw = the sum of the chunks' partials (chunk order),
 * then dQ and the gain partial as the dQ kernel writes them. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void pfx_attn_bwd_dq_finish(int B, int H, int N, int D, __global const void *q, int q_half,
                            ulong qsb, ulong qsh, ulong qsr, __global const float *head,
                            int structured, __global const int *items,
                            __global const float *dq_part, int chunks, __global float *dq,
                            int accumulate, __global float *gain_part)
{
    LOCAL_FLOATS(dQa, BQ * DMAX);
    LOCAL_FLOATS(gain, DMAX);
    int qt = get_group_id(0), ntq = get_num_groups(0);
    int b = get_group_id(1) / H, h = get_group_id(1) % H;
    int i0 = qt * BQ;
    ulong part = (ulong)B * H * N * DMAX;
    __global const float *rows_q = dq_part + ((ulong)(b * H + h) * N + i0) * DMAX;
    for (int r = 0; r < BQ; r++)
        for (int d0 = 0; d0 < DMAX; d0 += VEC) {
            floatv sum = (floatv)0.0f;
            if (i0 + r < N)
                for (int ch = 0; ch < chunks; ch++)
                    sum += vloadv(0, rows_q + ch * part + r * DMAX + d0);
            LVEC(dQa, r * DMAX + d0) = sum;
        }
    __global float *out = gain_part ? gain_part + (((ulong)h * B + b) * ntq + qt) * D : 0;
    bwd_store_dq_cpu(dQa, gain, i0, items[b], N, D, head[h], structured ? head + H + h * D : 0,
                     q, q_half, (ulong)b * qsb + (ulong)h * qsh, qsr, dq, accumulate, out);
}

/* Grid: (ceil(N / BQ), B * H); rows i0 + [0, BQ), as lanes: Q~ and dO are
 * transposed once per work-group, every key tile is staged as rows (no
 * transposition per tile), S^T = K~ Q~^T and dP^T = V~ dO^T. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void pfx_attn_bwd_dq(BWD_SHARED_PARAMS, __global float *dq, int accumulate,
                     __global float *gain_part)
{
    LOCAL_FLOATS(Kn, BK * DMAX); /* K~ rows */
    LOCAL_FLOATS(Vn, BK * DMAX); /* V~ rows */
    LOCAL_FLOATS(Qt, DMAX * BQ); /* Q~^T */
    LOCAL_FLOATS(dOt, DMAX * BQ); /* dO^T */
    LOCAL_FLOATS(St, BK * BQ);   /* S^T, then P^T */
    LOCAL_FLOATS(Zt, BK * BQ);   /* dP^T, then Z^T */
    LOCAL_FLOATS(dQa, BQ * DMAX);
    LOCAL_FLOATS(rl, BQ);
    LOCAL_FLOATS(rd, BQ);
    int qt = get_group_id(0), ntq = get_num_groups(0);
    int b = get_group_id(1) / H, h = get_group_id(1) % H;
    int hk = h / (H / Hkv);
    int q_len = items[b], kv_len = items[B + b], entry = items[2 * B + b];
    int shift = M - N;
    int i0 = qt * BQ;
    float c = head[h];
    __global const float *dimf = structured ? head + H + h * D : 0;
    ulong qbase = (ulong)b * qsb + (ulong)h * qsh, obase = (ulong)b * osb + (ulong)h * osh;
    ulong stats = ((ulong)b * H + h) * N;

    for (int r = 0; r < BQ; r++) {
        int i = i0 + r, live = i < q_len;
        for (int d = 0; d < DMAX; d++) {
            float qv = 0.0f, gv = 0.0f;
            if (live && d < D) {
                qv = pfx_load(q, qbase + (ulong)i * qsr + d, q_half);
                if (dimf)
                    qv *= dimf[d];
                gv = pfx_load(d_o, obase + (ulong)i * osr + d, do_half);
            }
            Qt[d * BQ + r] = qv;
            dOt[d * BQ + r] = gv;
            dQa[r * DMAX + d] = 0.0f;
        }
        rl[r] = live ? lse[stats + i] : -INFINITY;
        rd[r] = live ? delta[stats + i] : 0.0f;
    }
    /* rows of the tile that exist, rounded up to score vectors */
    const int qrows = i0 < q_len ? (min(BQ, q_len - i0) + NVK * VEC - 1) / (NVK * VEC) * NVK * VEC
                                 : 0;

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
        if (is_prefix) {
            bwd_stage_rows_cpu(Kn, pk, pk_half, pbase, psr, j0, rows, D);
            bwd_stage_rows_cpu(Vn, pv, pv_half, pbase, psr, j0, rows, D);
        } else {
            bwd_stage_rows_cpu(Kn, k, k_half, kbase, ksr, j0, rows, D);
            bwd_stage_rows_cpu(Vn, v, v_half, kbase, ksr, j0, rows, D);
        }
        const int kend = is_prefix ? rows : min(rows, t_end - j0);
        const int kblocks = (kend + RB - 1) / RB * RB;
        const uint drop_row0 = ((drop_item0 + (uint)b) * (uint)H + (uint)h) * (uint)N + (uint)i0;
        const uint drop_col0 = (uint)(is_prefix ? j0 : P + j0);
        pfx_cpu_scores(Kn, Qt, St, BQ, kblocks, qrows, D);
        pfx_cpu_scores(Vn, dOt, Zt, BQ, kblocks, qrows, D);
        /* Z = p (dP - Delta) (without c), 0 where hidden: row r sees key
         * jj < kend (causal: t = j0 + jj <= i0 + r + shift) when it is live */
        for (int rv = 0; rv < qrows; rv += VEC) {
            const floatv l = LVEC(rl, rv), dl = LVEC(rd, rv);
            const intv live = l != (floatv)(-INFINITY);
            const intv limit = (causal && !is_prefix)
                                   ? min((intv)kend, LANES + (intv)(i0 + rv + shift + 1 - j0))
                                   : (intv)kend;
            for (int jj = 0; jj < kend; jj++) {
                intv vis = live & ((intv)jj < limit);
                floatv st = LVEC(St, jj * BQ + rv);
                floatv p = select((floatv)0.0f,
                                  bwd_exp2v((PFX_SAT_LOGIT(st * c, st) - l) * PFX_LOG2E), vis);
                floatv dpv = LVEC(Zt, jj * BQ + rv);
                if (drop_on) { /* dp through the forward's mask (rows as lanes) */
                    float fl[VEC];
                    for (int x = 0; x < VEC; x++)
                        fl[x] = pfx_dropout_factor(drop_stream, drop_threshold, drop_scale,
                                                   drop_row0 + (uint)(rv + x), drop_col0 + (uint)jj);
                    dpv *= vloadv(0, fl);
                }
                LVEC(Zt, jj * BQ + rv) = p * (dpv - dl);
            }
        }
        /* dQraw += Z K~ over the tile's keys */
        pfx_cpu_accumulate(dQa, 0, Zt, BQ, 1, Kn, qrows, kend, D);
    }

    __global float *out = gain_part ? gain_part + (((ulong)h * B + b) * ntq + qt) * D : 0;
    /* Kn is free now: the gain partial's scratch */
    bwd_store_dq_cpu(dQa, Kn, i0, q_len, N, D, c, dimf, q, q_half, qbase, qsr, dq, accumulate,
                     out);
}
#endif /* CPU_VEC */
