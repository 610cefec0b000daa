/* The CPU path of the attention forward (VEC > 1); built after
 * cl/attention_fwd.cl (options, helpers, the math), see there.
 *
 * One work-item per work-group owns BLOCK_M rows and runs the tile products
 * as a CPU GEMM does: register blocks of RB rows x NVK vectors of VEC keys
 * (logits: q broadcast, K staged transposed so that keys are the lanes) and
 * RB rows x NVD vectors of VEC head dimensions (O += P V: p broadcast, V rows
 * as vectors), accumulated with fma(). VEC is the device's native float
 * vector width (8 on AVX2, 16 on AVX-512), so a register block is RB * NV
 * accumulators plus the NV vectors it reads and one broadcast: 11 of AVX2's
 * 16 registers (RB 4, NV 2), 19 of AVX-512's 32 (RB 8). PoCL's work-item
 * vectorizer is not involved (one work-item per group).
 *
 * Local memory is the CPU's cache here: the q tile, K^T and V tiles, the
 * logits/probabilities of the tile and the O accumulators of BLOCK_M rows
 * (pfx_attn_fwd_local_bytes). The softmax runs row by row over the tile with
 * keys as lanes, with the polynomial exp2 (POLY_EXP2; libm's exp2 does not
 * vectorize); the visible keys of a row are a prefix of the tile, so a mask
 * is one compare per vector. Masked keys are -inf before the max, which also
 * discards whatever unstaged lanes hold.
 */
#if VEC > 1
#if HEAD_DIM % VEC || BLOCK_N % VEC
#error "the CPU path needs HEAD_DIM and BLOCK_N multiples of VEC"
#endif
#define RB (VEC >= 16 ? 8 : 4) /* rows per register block */
#if BLOCK_M % RB
#error "the CPU path needs BLOCK_M a multiple of 4 (VEC 8) or 8 (VEC 16)"
#endif
#define NVK (BLOCK_N >= 2 * VEC ? 2 : 1)  /* key vectors per register block */
#define NVD (HEAD_DIM >= 2 * VEC ? 2 : 1) /* head-dimension vectors per block */
#if VEC == 4
#define LANE_IDS ((intv)(0, 1, 2, 3))
#elif VEC == 8
#define LANE_IDS ((intv)(0, 1, 2, 3, 4, 5, 6, 7))
#else
#define LANE_IDS ((intv)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#endif

inline float pfx_hmax(floatv x)
{
    float r = x.s0;
#if VEC >= 4
    r = fmax(fmax(r, x.s1), fmax(x.s2, x.s3));
#endif
#if VEC >= 8
    r = fmax(r, fmax(fmax(x.s4, x.s5), fmax(x.s6, x.s7)));
#endif
#if VEC == 16
    r = fmax(r, fmax(fmax(x.s8, x.s9), fmax(x.sa, x.sb)));
    r = fmax(r, fmax(fmax(x.sc, x.sd), fmax(x.se, x.sf)));
#endif
    return r;
}

/* Lane sum in a fixed order (results do not depend on scheduling). */
inline float pfx_hsum(floatv x)
{
#if VEC == 16
    float8 h = x.lo + x.hi;
    float4 g = h.lo + h.hi;
#elif VEC == 8
    float4 g = x.lo + x.hi;
#else
    float4 g = x;
#endif
    return (g.s0 + g.s2) + (g.s1 + g.s3);
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
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
                  const ulong pb, const ulong ph)
{
    __local float Qs[BLOCK_M * HEAD_DIM]; /* q (1 + G_hd), zero beyond D */
    __local float Kt[HEAD_DIM * BLOCK_N]; /* K^T: Kt[d * BLOCK_N + c] */
    __local float Vs[BLOCK_N * HEAD_DIM];
    __local float Ss[BLOCK_M * BLOCK_N];  /* logits, then probabilities */
    __local float Os[BLOCK_M * HEAD_DIM]; /* unnormalized O */
    __local float row_m[BLOCK_M], row_l[BLOCK_M], row_alpha[BLOCK_M], row_c[BLOCK_M];
    __local int row_keys[BLOCK_M]; /* keys j < row_keys[r] are visible to row r */

    const int N = dims.N, M = dims.M, D = dims.D, R = dims.R;
    const int gid = (int)get_group_id(0);
    const int tile = gid / splits, split = gid % splits;
    const int hk = (int)get_group_id(1), b = (int)get_group_id(2);
    const int q_len = items[b], kv_len = items[dims.B + b], entry = items[2 * dims.B + b];
    const int P = entry < 0 ? 0 : dims.P; /* bank entry -1: an item without prefix */
    const int r0 = tile * BLOCK_M;
    /* rows that exist in this tile, rounded up to a register block */
    const int rows = min(BLOCK_M, (min(R - r0, BLOCK_M) + RB - 1) / RB * RB);

    int i_min, i_max;
    pfx_row_range(r0, R, N, &i_min, &i_max);
    i_max = min(i_max, q_len - 1);
    int t_end = causal ? min(kv_len, i_max + M - N + 1) : kv_len;
    t_end = q_len > 0 ? max(t_end, 0) : 0;
    const int j_begin = split * keys_per_split;
    const int j_end = (q_len > 0) ? min(P + t_end, j_begin + keys_per_split) : 0;

    for (int x = 0; x < BLOCK_M; x++) {
        int rr = min(r0 + x, R - 1);
        int h = hk * dims.group + rr / N, i = rr % N;
        int t_max = causal ? min(kv_len, i + M - N + 1) : kv_len;
        row_keys[x] = min(j_end, P + max(t_max, 0));
        row_c[x] = head_params[h];
        row_m[x] = -INFINITY;
        row_l[x] = 0.0f;
        ulong qo = (ulong)b * qb + (ulong)h * qh + (ulong)i * qr;
        for (int d = 0; d < HEAD_DIM; d++) {
            float val = 0.0f;
            if (d < D) {
                val = pfx_load(q, qo + (ulong)d, flags & HALF_Q);
                if (has_dim_gain)
                    val *= head_params[dims.H + (ulong)h * D + d];
            }
            Qs[x * HEAD_DIM + d] = val;
            Os[x * HEAD_DIM + d] = 0.0f;
        }
    }

    const ulong kv_base = (ulong)b * kvb + (ulong)hk * kvh;
    const ulong p_base = (ulong)max(entry, 0) * pb + (ulong)hk * ph;
    const int d_vecs = (D + NVD * VEC - 1) / (NVD * VEC) * NVD; /* O vectors per row */

    for (int j0 = j_begin; j0 < j_end; j0 += BLOCK_N) {
        const int cols = min(BLOCK_N, j_end - j0);
        for (int c = 0; c < cols; c++) {
            const int j = j0 + c, pre = j < P;
            __global const void *ksrc = pre ? pk : k, *vsrc = pre ? pv : v;
            const int kh = flags & (pre ? HALF_PK : HALF_K), vh = flags & (pre ? HALF_PV : HALF_V);
            const ulong off = pre ? p_base + (ulong)j * D : kv_base + (ulong)(j - P) * kvr;
            if (!kh && !vh && D == HEAD_DIM) { /* float rows: vector loads */
                for (int d0 = 0; d0 < HEAD_DIM; d0 += VEC) {
                    floatv kx = vloadv(0, (__global const float *)ksrc + off + d0);
                    vstorev(vloadv(0, (__global const float *)vsrc + off + d0), 0,
                            Vs + c * HEAD_DIM + d0);
                    float lanes[VEC];
                    vstorev(kx, 0, lanes);
#pragma unroll
                    for (int x = 0; x < VEC; x++)
                        Kt[(d0 + x) * BLOCK_N + c] = lanes[x];
                }
                continue;
            }
            for (int d = 0; d < HEAD_DIM; d++) {
                float kx = d < D ? pfx_load(ksrc, off + (ulong)d, kh) : 0.0f;
                float vx = d < D ? pfx_load(vsrc, off + (ulong)d, vh) : 0.0f;
                Kt[d * BLOCK_N + c] = kx;
                Vs[c * HEAD_DIM + d] = vx;
            }
        }

        /* Logits: Ss = c_h (Q K^T) over the staged keys. */
        const int key_blocks = (cols + NVK * VEC - 1) / (NVK * VEC);
        for (int rb = 0; rb < rows; rb += RB)
            for (int kb = 0; kb < key_blocks; kb++) {
                const int c0 = kb * NVK * VEC;
                floatv s[RB][NVK];
#pragma unroll
                for (int x = 0; x < RB; x++)
#pragma unroll
                    for (int y = 0; y < NVK; y++)
                        s[x][y] = (floatv)0.0f;
                for (int d = 0; d < D; d++) {
                    floatv kv[NVK];
#pragma unroll
                    for (int y = 0; y < NVK; y++)
                        kv[y] = vloadv(0, Kt + d * BLOCK_N + c0 + y * VEC);
#pragma unroll
                    for (int x = 0; x < RB; x++) {
                        floatv qd = (floatv)Qs[(rb + x) * HEAD_DIM + d];
#pragma unroll
                        for (int y = 0; y < NVK; y++)
                            s[x][y] = fma(qd, kv[y], s[x][y]);
                    }
                }
#pragma unroll
                for (int x = 0; x < RB; x++)
#pragma unroll
                    for (int y = 0; y < NVK; y++)
                        vstorev(s[x][y] * row_c[rb + x], 0,
                                Ss + (rb + x) * BLOCK_N + c0 + y * VEC);
            }

        /* Online softmax per row: keys as lanes; Ss becomes p. */
        const int vecs = key_blocks * NVK;
        for (int x = 0; x < rows; x++) {
            __local float *srow = Ss + x * BLOCK_N;
            const intv visible = (intv)(row_keys[x] - j0);
            floatv mv = (floatv)(-INFINITY);
            for (int y = 0; y < vecs; y++) {
                floatv sv = vloadv(0, srow + y * VEC);
                sv = select((floatv)(-INFINITY), sv, LANE_IDS + (intv)(y * VEC) < visible);
                vstorev(sv, 0, srow + y * VEC);
                mv = fmax(mv, sv);
            }
            const float m_old = row_m[x];
            const float mt = fmax(m_old, pfx_hmax(mv));
            const float mu = mt == -INFINITY ? 0.0f : mt;
            const floatv muv = (floatv)mu;
            floatv lv = (floatv)0.0f;
            for (int y = 0; y < vecs; y++) {
                floatv p = pfx_exp2v((vloadv(0, srow + y * VEC) - muv) * LOG2E);
                vstorev(p, 0, srow + y * VEC);
                lv += p;
            }
            const float alpha = pfx_exp2((m_old - mu) * LOG2E);
            row_alpha[x] = alpha;
            row_l[x] = row_l[x] * alpha + pfx_hsum(lv);
            row_m[x] = mt;
        }

        /* O = alpha O + P V. */
        for (int rb = 0; rb < rows; rb += RB)
            for (int d0 = 0; d0 < d_vecs * VEC; d0 += NVD * VEC) {
                floatv a[RB][NVD];
#pragma unroll
                for (int x = 0; x < RB; x++)
#pragma unroll
                    for (int y = 0; y < NVD; y++)
                        a[x][y] = vloadv(0, Os + (rb + x) * HEAD_DIM + d0 + y * VEC) *
                                  row_alpha[rb + x];
                for (int c = 0; c < cols; c++) {
                    floatv vv[NVD];
#pragma unroll
                    for (int y = 0; y < NVD; y++)
                        vv[y] = vloadv(0, Vs + c * HEAD_DIM + d0 + y * VEC);
#pragma unroll
                    for (int x = 0; x < RB; x++) {
                        floatv p = (floatv)Ss[(rb + x) * BLOCK_N + c];
#pragma unroll
                        for (int y = 0; y < NVD; y++)
                            a[x][y] = fma(p, vv[y], a[x][y]);
                    }
                }
#pragma unroll
                for (int x = 0; x < RB; x++)
#pragma unroll
                    for (int y = 0; y < NVD; y++)
                        vstorev(a[x][y], 0, Os + (rb + x) * HEAD_DIM + d0 + y * VEC);
            }
    }

    for (int x = 0; x < BLOCK_M && r0 + x < R; x++) {
        int rr = r0 + x;
        int h = hk * dims.group + rr / N, i = rr % N;
        int valid = i < q_len;
        ulong rowid = ((ulong)b * dims.Hkv + hk) * (ulong)R + (ulong)rr;
        for (int d = 0; d < D; d++)
            pfx_store_row(o, lse, part_ml, part_acc, splits, split, b, h, i, valid, D, N,
                          dims.H, ob, oh, orow, flags, has_lse, rowid, row_m[x], row_l[x], d,
                          Os[x * HEAD_DIM + d]);
    }
}
#endif
