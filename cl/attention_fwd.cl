/*
 * Fused prefix attention forward (flash-style), OpenCL C 1.2, no extension.
 * The math is docs/design.md "The math (the contract)".
 *
 * Rows. The rows of one work-group all read the same kv head hk: row r of
 * the R = group * N rows of hk is query i = r % N of head h = hk * group +
 * r / N (group = H / Hkv). With N large a tile of rows is a tile of queries
 * of one head; for a decode step (N small) the query heads that share a kv
 * head share one K/V stream, so GQA costs one read of K/V per kv head.
 *
 * Keys. Key j < P is prefix row j (always visible), key j >= P is input row
 * t = j - P, visible iff t < kv_len[b] and (causal) t <= i + M - N. Tiles of
 * BLOCK_N keys are staged through local memory (K and V, zero beyond the
 * last key any row of the tile can see, so tiles hidden by the causal mask
 * for the whole row tile are never loaded or computed; the CPU path leaves
 * those slots as they are and masks them).
 *
 * Work-items (VEC 1, GPUs). BLOCK_M rows x KSPLIT work-items. Per K/V
 * tile, work-item ks of a row computes the logits of keys c KSPLIT + ks
 * (q from local memory) into local Ss; after a barrier every work-item of
 * the row takes the row max, exponentiates its own keys into local Ps;
 * after a second barrier it accumulates its slice of the head dimension
 * (d = ks + KSPLIT x, DPL = HEAD_DIM / KSPLIT accumulators) over all keys
 * of the tile. m and l are identical across the row's work-items, so no
 * merge is needed, and no private array is larger than DPL or KPL (all
 * indexed only in fully unrolled loops: registers, never scratch).
 * VEC > 1 (CPUs): cl/attention_fwd.cpu.cl, register-blocked tile products
 * with keys or head dimensions as the lanes of float VEC vectors.
 *
 * Split-K. The key range [0, P + M) may also be cut into `splits` ranges of
 * keys_per_split keys handled by different work-groups (decode: one sequence
 * must fill a GPU); each writes its partial (m, l, acc) and
 * pfx_attn_fwd_merge combines them.
 *
 * Softmax runs in float32: q is scaled once by (1 + G_hd), a logit is
 * z = c_h (q~ . k), exponentiated as exp2((z - m) log2 e) after the running
 * max m is subtracted, and LSE = m + log l. So every logit that float32
 * represents gives the right answer, up to |z| near FLT_MAX (log2 e is never
 * applied before the max is subtracted). A running max of -inf (nothing
 * visible yet) is replaced by 0 before exponentiating, so hidden keys give
 * exp2(-inf) = 0 and never NaN; a row with l == 0 (no visible key) gives
 * O = 0 and LSE = -inf. NaN propagates as IEEE arithmetic does: fmax skips a
 * NaN logit but its exp2 makes l NaN, and a NaN l is live (l != 0), so O
 * and LSE of that row are NaN; a +Inf logit gives exp2(Inf - Inf) = NaN.
 *
 * Options (-D PFX_ATTN_<NAME>, see src/ops/attention_tuning.h; defaults
 * below, the short names inside): HEAD_DIM (compile-time head size class;
 * the runtime D <= HEAD_DIM, dims beyond D are zero), BLOCK_M, BLOCK_N,
 * KSPLIT, KV_PAD (local row padding, avoids bank conflicts when KSPLIT > 1),
 * Q_LOCAL (must be 0 on the CPU path), POLY_EXP2 (exp2 by a polynomial,
 * vectorizable on CPUs), VEC (1: the GPU path; 4, 8 or 16: the CPU path at
 * that float vector width, explicit SIMD that does not depend on the
 * work-item vectorizer; needs KSPLIT 1 and Q_LOCAL 0).
 */
#ifndef PFX_ATTN_HEAD_DIM
#define PFX_ATTN_HEAD_DIM 64
#endif
#ifndef PFX_ATTN_BLOCK_M
#define PFX_ATTN_BLOCK_M 32
#endif
#ifndef PFX_ATTN_BLOCK_N
#define PFX_ATTN_BLOCK_N 32
#endif
#ifndef PFX_ATTN_KSPLIT
#define PFX_ATTN_KSPLIT 1
#endif
#ifndef PFX_ATTN_KV_PAD
#define PFX_ATTN_KV_PAD 0
#endif
#ifndef PFX_ATTN_Q_LOCAL
#define PFX_ATTN_Q_LOCAL 0
#endif
#ifndef PFX_ATTN_POLY_EXP2
#define PFX_ATTN_POLY_EXP2 0
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
#define HEAD_DIM PFX_ATTN_HEAD_DIM
#define BLOCK_M PFX_ATTN_BLOCK_M
#define BLOCK_N PFX_ATTN_BLOCK_N
#define KSPLIT PFX_ATTN_KSPLIT
#define KV_PAD PFX_ATTN_KV_PAD
#define Q_LOCAL PFX_ATTN_Q_LOCAL
#define POLY_EXP2 PFX_ATTN_POLY_EXP2
#define VEC PFX_ATTN_VEC

#define WG_SIZE (BLOCK_M * KSPLIT) /* the VEC 1 kernel; the CPU path runs one */
#define KPL (BLOCK_N / KSPLIT)        /* keys per work-item per tile */
#define KV_STRIDE (HEAD_DIM + KV_PAD)
#define Q_STRIDE (HEAD_DIM + KV_PAD)

#if VEC > 1 && (KSPLIT != 1 || Q_LOCAL)
#error "VEC > 1 (the CPU path) needs KSPLIT 1 and Q_LOCAL 0"
#endif
#if VEC == 4
typedef float4 floatv;
typedef int4 intv;
#define vloadv vload4
#define vstorev vstore4
#define vload_halfv vload_half4
#define as_floatv as_float4
#define convert_intv convert_int4
#define convert_uintv convert_uint4
#elif VEC == 8
typedef float8 floatv;
typedef int8 intv;
#define vloadv vload8
#define vstorev vstore8
#define vload_halfv vload_half8
#define as_floatv as_float8
#define convert_intv convert_int8
#define convert_uintv convert_uint8
#elif VEC == 16
typedef float16 floatv;
typedef int16 intv;
#define vloadv vload16
#define vstorev vstore16
#define vload_halfv vload_half16
#define as_floatv as_float16
#define convert_intv convert_int16
#define convert_uintv convert_uint16
#elif VEC != 1
#error "VEC must be 1, 4, 8 or 16"
#endif
#if BLOCK_N % KSPLIT
#error "BLOCK_N must be a multiple of KSPLIT"
#endif
#if HEAD_DIM % KSPLIT
#error "HEAD_DIM must be a multiple of KSPLIT"
#endif
#define DPL (HEAD_DIM / KSPLIT)       /* head dims (accumulators) per work-item */
#define S_STRIDE (BLOCK_N + 1)


/* A logit c_h s beyond float32 while c_h and s are finite (a huge gain or
 * scale) saturates to +-FLT_MAX: a row of such logits softmaxes to its
 * largest ones (ties share) instead of Inf - Inf = NaN. NaN and an
 * infinite s (an infinite input) propagate as before. Scalars and vectors. */
#define PFX_SAT_LOGIT(z, s) select((z), clamp((z), -FLT_MAX, FLT_MAX), isinf(z) && !isinf(s))

/* 2^x for x <= 0 (and NaN): the polynomial of cl/common.cl on CPUs
 * (POLY_EXP2), the built-in elsewhere. */
PFX_DEFINE_POLY_EXP2(pfx_exp2_poly, float, int, convert_int, as_float)
inline float pfx_exp2(float x)
{
#if POLY_EXP2
    return pfx_exp2_poly(x);
#else
    return exp2(x);
#endif
}

#if VEC > 1
PFX_DEFINE_POLY_EXP2(pfx_exp2v_poly, floatv, intv, convert_intv, as_floatv)
inline floatv pfx_exp2v(floatv x)
{
#if POLY_EXP2
    return pfx_exp2v_poly(x);
#else
    return exp2(x);
#endif
}
#endif

/* pfx_attn_dims and the HALF_ flags: cl/attention_fwd.h, joined before this file. */

/* One tensor's flags as pfx_load's storage code (0 float, 1 half, 2
 * bfloat16): its half bit, or that bit shifted by BF16_SHIFT. */
#define pfx_half_flag(flags, bit) \
    ((int)(((flags) & (bit)) ? 1 : ((flags) & ((bit) << BF16_SHIFT)) ? PFX_BF16 : 0))

/* Rows [r0, r0 + BLOCK_M) of kv head hk: smallest and largest query index
 * among the rows that exist, for the causal bounds of the tile. */
inline void pfx_row_range(int r0, int R, int N, int *i_min, int *i_max)
{
    int r_last = min(r0 + BLOCK_M, R) - 1;
    if (r0 / N != r_last / N) {
        *i_min = 0;
        *i_max = N - 1;
    } else {
        *i_min = r0 % N;
        *i_max = r_last % N;
    }
}

/* Writes the final row (splits == 1) or the partial of this split. */
inline void pfx_store_row(__global void *o, __global float *lse, __global float *part_ml,
                          __global float *part_acc, int splits, int split, int b, int h, int i,
                          int valid, int D, int N, int H, ulong ob, ulong oh, ulong orow,
                          int flags, int has_lse, ulong rowid, float m, float l, int d, float a)
{
    if (splits > 1) {
        ulong pr = rowid * (ulong)splits + (ulong)split;
        if (d == 0) {
            part_ml[2 * pr] = (valid && l != 0.0f) ? m : -INFINITY;
            part_ml[2 * pr + 1] = valid ? l : 0.0f;
        }
        if (d < D)
            part_acc[pr * (ulong)D + (ulong)d] = valid ? a : 0.0f;
        return;
    }
    int live = valid && l != 0.0f; /* NaN l: live, NaN out */
    if (d < D) {
        float val = live ? a / l : 0.0f;
        pfx_store(o, (ulong)b * ob + (ulong)h * oh + (ulong)i * orow + (ulong)d, val,
                  pfx_half_flag(flags, HALF_O));
    }
    if (d == 0 && has_lse)
        lse[((ulong)b * H + h) * N + i] = live ? m + log(l) : -INFINITY;
}

#if VEC == 1
__kernel __attribute__((reqd_work_group_size(WG_SIZE, 1, 1)))
void pfx_attn_fwd(__global const void *q, __global const void *k, __global const void *v,
                  __global const void *pk, __global const void *pv,
                  __global void *o, __global float *lse,
                  __global const float *head_params, __global const int *items,
                  __global float *part_ml, __global float *part_acc,
                  const pfx_attn_dims dims, const int causal, const int has_dim_gain,
                  const int has_lse, const int flags, const int splits,
                  const int keys_per_split,
                  const ulong qb, const ulong qh, const ulong qr,
                  const ulong kvb, const ulong kvh, const ulong kvr,
                  const ulong ob, const ulong oh, const ulong orow,
                  const ulong pb, const ulong ph, const ulong gain_item,
                  const uint4 drop_stream, const uint drop_threshold, const float drop_scale,
                  const uint drop_item0, const int drop_on_arg)
{
    __local float Kt[BLOCK_N * KV_STRIDE];
    __local float Vt[BLOCK_N * KV_STRIDE];
    __local float Qs[BLOCK_M * Q_STRIDE];
    __local float Ss[BLOCK_M * S_STRIDE]; /* logits of the tile */
    __local float Ps[BLOCK_M * S_STRIDE]; /* probabilities of the tile */
    const int drop_on = PFX_ATTN_DROPOUT && drop_on_arg;

    const int N = dims.N, M = dims.M, D = dims.D, R = dims.R;
    const int lid = (int)get_local_id(0);
    const int row = lid / KSPLIT, ks = lid % KSPLIT;
    const int gid = (int)get_group_id(0);
    const int tile = gid / splits, split = gid % splits;
    const int hk = (int)get_group_id(1), b = (int)get_group_id(2);
    /* this item's c_h (+ 1 + G_hd) block: per-item gains, or the call's (stride 0) */
    head_params += (ulong)b * gain_item;

    const int q_len = items[b], kv_len = items[dims.B + b], entry = items[2 * dims.B + b];
    const int P = entry < 0 ? 0 : dims.P; /* bank entry -1: an item without prefix */
    const int r0 = tile * BLOCK_M;
    const int r = r0 + row;
    const int rr = min(r, R - 1);
    const int h = hk * dims.group + rr / N, i = rr % N;
    const int valid = r < R && i < q_len;
    const ulong rowid = ((ulong)b * dims.Hkv + hk) * (ulong)R + (ulong)rr;
    /* the row of this query in the dropout stream */
    const uint drop_row = (((uint)drop_item0 + (uint)b) * (uint)dims.H + (uint)h) * (uint)N + (uint)i;

    /* Keys this row tile may see: [0, P + t_end); fully visible below
     * P + t_full. */
    int i_min, i_max;
    pfx_row_range(r0, R, N, &i_min, &i_max);
    i_max = min(i_max, q_len - 1);
    int t_end = causal ? min(kv_len, i_max + M - N + 1) : kv_len;
    int t_full = causal ? min(kv_len, i_min + M - N + 1) : kv_len;
    t_end = q_len > 0 ? max(t_end, 0) : 0;
    t_full = max(t_full, 0);
    const int j_begin = split * keys_per_split;
    const int j_end = (q_len > 0) ? min(P + t_end, j_begin + keys_per_split) : 0;
    const int row_t_max = causal ? min(kv_len, i + M - N + 1) : kv_len; /* t < this */

    /* Query tile in local memory: q_d (1 + G_hd) (c_h is applied to the
     * logit, so that c_h q never overflows where c_h (q . k) does not). A
     * work-item holds only its DPL accumulators (d = ks + KSPLIT x) and KPL
     * logits in registers, whatever HEAD_DIM is (no spills on GPUs). */
    for (int idx = lid; idx < BLOCK_M * HEAD_DIM; idx += WG_SIZE) {
        int qrow = idx / HEAD_DIM, d = idx % HEAD_DIM;
        int rq = min(r0 + qrow, R - 1);
        int hq = hk * dims.group + rq / N, iq = rq % N;
        float val = 0.0f;
        if (d < D) {
            val = pfx_load(q, (ulong)b * qb + (ulong)hq * qh + (ulong)iq * qr + (ulong)d,
                           pfx_half_flag(flags, HALF_Q));
            if (has_dim_gain)
                val *= head_params[dims.H + (ulong)hq * D + d];
        }
        Qs[qrow * Q_STRIDE + d] = val;
    }
    __local const float *q_row = Qs + row * Q_STRIDE;
    __local float *s_row = Ss + row * S_STRIDE;
    __local float *p_row = Ps + row * S_STRIDE;
    __local const float *k_mine = Kt + ks * KV_STRIDE;
    __local const float *v_mine = Vt + ks;

    const float ch = head_params[h];
    float acc[DPL];
#pragma unroll
    for (int x = 0; x < DPL; x++)
        acc[x] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    const ulong kv_base = (ulong)b * kvb + (ulong)hk * kvh;
    const ulong p_base = (ulong)max(entry, 0) * pb + (ulong)hk * ph;

    for (int j0 = j_begin; j0 < j_end; j0 += BLOCK_N) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int idx = lid; idx < BLOCK_N * HEAD_DIM; idx += WG_SIZE) {
            int jj = idx / HEAD_DIM, d = idx % HEAD_DIM;
            int j = j0 + jj;
            float kx = 0.0f, vx = 0.0f;
            if (d < D && j < j_end) {
                if (j < P) {
                    ulong off = p_base + (ulong)j * D + d;
                    kx = pfx_load(pk, off, pfx_half_flag(flags, HALF_PK));
                    vx = pfx_load(pv, off, pfx_half_flag(flags, HALF_PV));
                } else {
                    ulong off = kv_base + (ulong)(j - P) * kvr + d;
                    kx = pfx_load(k, off, pfx_half_flag(flags, HALF_K));
                    vx = pfx_load(v, off, pfx_half_flag(flags, HALF_V));
                }
            }
            Kt[jj * KV_STRIDE + d] = kx;
            Vt[jj * KV_STRIDE + d] = vx;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* Logits of this work-item's keys c KSPLIT + ks (full dot products). */
        float s[KPL];
#pragma unroll
        for (int c = 0; c < KPL; c++)
            s[c] = 0.0f;
        for (int d = 0; d < D; d++) {
            float qd = q_row[d];
#pragma unroll
            for (int c = 0; c < KPL; c++)
                s[c] = mad(qd, k_mine[c * KSPLIT * KV_STRIDE + d], s[c]);
        }
        const int full = j0 + BLOCK_N <= min(j_end, P + t_full);
#pragma unroll
        for (int c = 0; c < KPL; c++) {
            s[c] = PFX_SAT_LOGIT(s[c] * ch, s[c]);
            if (!full) {
                int j = j0 + c * KSPLIT + ks;
                int t = j - P;
                int vis = j < j_end && (j < P || t < row_t_max);
                s[c] = vis ? s[c] : -INFINITY;
            }
            s_row[c * KSPLIT + ks] = s[c];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* Row max over the whole tile (every work-item of the row alike). */
        float mt = m;
        for (int c = 0; c < BLOCK_N; c++)
            mt = fmax(mt, s_row[c]);
        const float mu = mt == -INFINITY ? 0.0f : mt;
        const float alpha = pfx_exp2((m - mu) * PFX_LOG2E);
#pragma unroll
        for (int c = 0; c < KPL; c++) {
            float pc = pfx_exp2((s[c] - mu) * PFX_LOG2E);
            /* dropout: a dropped key's p is stored negated (l still sums |p|) */
            if (drop_on && pfx_dropout_factor(drop_stream, drop_threshold, drop_scale, drop_row,
                                              (uint)(j0 + c * KSPLIT + ks)) == 0.0f)
                pc = -pc;
            p_row[c * KSPLIT + ks] = pc;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* O slice: acc[x] (d = ks + KSPLIT x) over every key of the tile. */
        l *= alpha;
#pragma unroll
        for (int x = 0; x < DPL; x++)
            acc[x] *= alpha;
        for (int c = 0; c < BLOCK_N; c++) {
            const float pc = p_row[c];
            __local const float *vr = v_mine + c * KV_STRIDE;
            /* dropout: kept p scaled by 1/(1-p), dropped (negated) ones 0 */
            const float pv = drop_on ? (pc > 0.0f ? pc * drop_scale : 0.0f) : pc;
            l += drop_on ? fabs(pc) : pc;
#pragma unroll
            for (int x = 0; x < DPL; x++)
                acc[x] = mad(pv, vr[x * KSPLIT], acc[x]);
        }
        m = mt;
    }

    if (r < R) {
#pragma unroll
        for (int x = 0; x < DPL; x++)
            pfx_store_row(o, lse, part_ml, part_acc, splits, split, b, h, i, valid, D, N,
                          dims.H, ob, oh, orow, flags, has_lse, rowid, m, l, ks + KSPLIT * x,
                          acc[x]);
    }
}
#endif /* VEC == 1; the CPU path (VEC > 1): cl/attention_fwd.cpu.cl */

/* Combines the `splits` partials of every row: global (D, rows) where rows
 * enumerates (b, hk, r) like rowid above. */
__kernel void pfx_attn_fwd_merge(__global const float *part_ml, __global const float *part_acc,
                                 __global void *o, __global float *lse,
                                 __global const int *items, const pfx_attn_dims dims,
                                 const int has_lse, const int flags, const int splits,
                                 const ulong ob, const ulong oh, const ulong orow)
{
    const int d = (int)get_global_id(0);
    const ulong rowid = get_global_id(1);
    const int R = dims.R, N = dims.N, D = dims.D;
    if (d >= D || rowid >= (ulong)dims.B * dims.Hkv * R)
        return;
    const int r = (int)(rowid % (ulong)R);
    const int hk = (int)((rowid / (ulong)R) % (ulong)dims.Hkv);
    const int b = (int)(rowid / ((ulong)R * dims.Hkv));
    const int h = hk * dims.group + r / N, i = r % N;
    const int valid = i < items[b];

    float mx = -INFINITY;
    for (int s = 0; s < splits; s++)
        mx = fmax(mx, part_ml[2 * (rowid * splits + s)]);
    const float mu = mx == -INFINITY ? 0.0f : mx;
    float l = 0.0f, a = 0.0f;
    for (int s = 0; s < splits; s++) {
        ulong pr = rowid * splits + s;
        float w = pfx_exp2((part_ml[2 * pr] - mu) * PFX_LOG2E);
        l += part_ml[2 * pr + 1] * w;
        a += part_acc[pr * D + d] * w;
    }
    int live = valid && l != 0.0f; /* NaN l: live, NaN out */
    pfx_store(o, (ulong)b * ob + (ulong)h * oh + (ulong)i * orow + (ulong)d,
              live ? a / l : 0.0f, pfx_half_flag(flags, HALF_O));
    if (d == 0 && has_lse)
        lse[((ulong)b * dims.H + h) * N + i] = live ? mx + log(l) : -INFINITY;
}
