/* The CPU path of the attention forward (VEC > 1); built after
 * cl/attention_fwd.cl (options, helpers, the math), see there.
 *
 * One work-item per work-group owns BLOCK_M rows and runs the tile products
 * as a CPU GEMM does, register-blocked, accumulated with fma() (the
 * backward's products: PFX_DEFINE_CPU_TILE_PRODUCTS, cl/common.cl). VEC is the
 * device's native float vector width (8 on AVX2, 16 on AVX-512); a register
 * block is RB x 2 accumulators plus the two vectors it reads and one
 * broadcast: 11 of AVX2's 16 registers (RB 4), 19 of AVX-512's 32 (RB 8;
 * 4 in tiles of at most 8 rows).
 * PoCL's work-item vectorizer is not involved (one work-item per group).
 *
 * Two layouts of the logits, by BLOCK_M:
 *  - rows as lanes (BLOCK_M >= 2 VEC, the wide shapes): S^T = K Q^T with k
 *    broadcast and q^T vectors (q transposed once per work-group, K staged
 *    as rows: no transposition per key tile), and the online softmax runs
 *    down the keys with every row's m, l and alpha as vector lanes (no
 *    horizontal reductions);
 *  - keys as lanes (BLOCK_M < 2 VEC: the decode tiles of 8 rows at VEC 8
 *    and 16, a kv head's few rows): S = Q K^T with q broadcast and K^T
 *    vectors (K transposed per tile), the softmax row by row along the keys.
 * Unlike the GPU path, key slots past the last visible key keep whatever the
 * previous tile left: they are masked (-inf) or never read.
 * Then O = alpha O + P V with p broadcast and V rows as vectors of head
 * dimensions. Local memory is the CPU's cache here (pfx_attn_fwd_local_bytes):
 * q, K and V tiles, the logits/probabilities of the tile and the O
 * accumulators of BLOCK_M rows. exp2 is the polynomial (POLY_EXP2; libm's does
 * not vectorize). The visible keys of a row are a prefix of the tile, so a
 * mask is one compare per vector; masked logits are -inf before the max.
 */
#if VEC > 1
/* broadcast rows or keys per register block: 4 on AVX2; 8 with AVX-512's 32
 * registers, except in tiles of at most 8 rows (decode: a GQA kv head's 4
 * rows would compute a block of 8) */
#define RB (VEC >= 16 && BLOCK_M > 8 ? 8 : 4)
#define ROW_LANES (BLOCK_M >= 2 * VEC)
#define NVR 2 /* row vectors per block (rows as lanes) */
#if HEAD_DIM % VEC || BLOCK_N % VEC || BLOCK_M % RB || (ROW_LANES && BLOCK_M % (NVR * VEC))
#error "the CPU path needs HEAD_DIM, BLOCK_N multiples of VEC, BLOCK_M of RB (of 2 VEC if >= 2 VEC)"
#endif
#define NVK (BLOCK_N % (2 * VEC) ? 1 : 2) /* key vectors per block (keys as lanes) */
#define NVD (HEAD_DIM >= 2 * VEC ? 2 : 1) /* head-dimension vectors per block */
#define NVS (ROW_LANES ? NVR : NVK)       /* score vectors per block */
#if VEC == 4
#define LANE_IDS ((intv)(0, 1, 2, 3))
#elif VEC == 8
#define LANE_IDS ((intv)(0, 1, 2, 3, 4, 5, 6, 7))
#else
#define LANE_IDS ((intv)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#endif

/* Local float arrays aligned as floatv and their vectors (cl/common.cl). */
#define LVEC(p, i)            PFX_LVEC(floatv, p, i)
#define LOCAL_FLOATS(name, n) PFX_LOCAL_FLOATS(floatv, VEC, name, n)

/* The lane max and sum of a floatv, in one fixed order (cl/common.cl). */
#if VEC == 4
#define pfx_hmax pfx_max4
#define pfx_hsum pfx_sum4
#elif VEC == 8
#define pfx_hmax pfx_max8
#define pfx_hsum pfx_sum8
#else
#define pfx_hmax pfx_max16
#define pfx_hsum pfx_sum16
#endif

/* VEC elements of a float, half or bfloat16 row (pfx_load's storage code)
 * from element off, widened in one vector load. */
inline floatv pfx_loadv(__global const void *p, ulong off, int code)
{
    if (code == PFX_BF16)
        return as_floatv(convert_uintv(vloadv(0, (__global const ushort *)p + off)) << 16);
    return code ? vload_halfv(0, (__global const half *)p + off)
                : vloadv(0, (__global const float *)p + off);
}

/* The tile products, RB keys or rows x NVS score vectors or NVD vectors of
 * head dimensions per register block (cl/common.cl). */
PFX_DEFINE_CPU_TILE_PRODUCTS(floatv, VEC, RB, NVS, NVD, HEAD_DIM)

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
                  const ulong pb, const ulong ph, const ulong gain_item,
                  const uint4 drop_stream, const uint drop_threshold, const float drop_scale,
                  const uint drop_item0, const int drop_on)
{
    /* q (1 + G_hd), zero beyond D: q^T [HEAD_DIM][BLOCK_M] (rows as lanes)
     * or rows [BLOCK_M][HEAD_DIM]; K: rows [BLOCK_N][HEAD_DIM] (rows as
     * lanes) or K^T [HEAD_DIM][BLOCK_N]; logits then probabilities:
     * [BLOCK_N][BLOCK_M] (rows as lanes) or [BLOCK_M][BLOCK_N]. */
    LOCAL_FLOATS(Qs, BLOCK_M * HEAD_DIM);
    LOCAL_FLOATS(Ks, HEAD_DIM * BLOCK_N);
    LOCAL_FLOATS(Vs, BLOCK_N * HEAD_DIM);
    LOCAL_FLOATS(Ss, BLOCK_M * BLOCK_N);
    LOCAL_FLOATS(Os, BLOCK_M * HEAD_DIM); /* unnormalized O, rows */
#if ROW_LANES
    LOCAL_FLOATS(row_m, BLOCK_M);
    LOCAL_FLOATS(row_l, BLOCK_M);
    LOCAL_FLOATS(row_alpha, BLOCK_M);
    LOCAL_FLOATS(row_c, BLOCK_M);
    __local intv row_keys_[BLOCK_M / VEC]; /* keys j < row_keys[r] are visible to row r */
    __local int *row_keys = (__local int *)row_keys_;
#else
    __local float row_m[BLOCK_M], row_l[BLOCK_M], row_alpha[BLOCK_M], row_c[BLOCK_M];
    __local int row_keys[BLOCK_M];
#endif

    const int N = dims.N, M = dims.M, D = dims.D, R = dims.R;
    const int gid = (int)get_group_id(0);
    const int tile = gid / splits, split = gid % splits;
    const int hk = (int)get_group_id(1), b = (int)get_group_id(2);
    /* this item's c_h (+ 1 + G_hd) block: per-item gains, or the call's (stride 0) */
    head_params += (ulong)b * gain_item;
    const int q_len = items[b], kv_len = items[dims.B + b], entry = items[2 * dims.B + b];
    const int P = entry < 0 ? 0 : dims.P; /* bank entry -1: an item without prefix */
    const int r0 = tile * BLOCK_M;
    /* rows that exist in this tile, rounded up to a register block (rows as
     * lanes: to a block of row vectors) */
    const int row_block = ROW_LANES ? NVR * VEC : RB;
    const int rows = min(BLOCK_M, (min(R - r0, BLOCK_M) + row_block - 1) / row_block * row_block);

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
                val = pfx_load(q, qo + (ulong)d, pfx_half_flag(flags, HALF_Q));
                if (has_dim_gain)
                    val *= head_params[dims.H + (ulong)h * D + d];
            }
            Qs[ROW_LANES ? d * BLOCK_M + x : x * HEAD_DIM + d] = val;
            Os[x * HEAD_DIM + d] = 0.0f;
        }
    }

    const ulong kv_base = (ulong)b * kvb + (ulong)hk * kvh;
    const ulong p_base = (ulong)max(entry, 0) * pb + (ulong)hk * ph;
    const int d_end = (D + NVD * VEC - 1) / (NVD * VEC) * (NVD * VEC); /* O lanes per row */

    for (int j0 = j_begin; j0 < j_end; j0 += BLOCK_N) {
        const int cols = min(BLOCK_N, j_end - j0);
        for (int c = 0; c < cols; c++) {
            const int j = j0 + c, pre = j < P;
            __global const void *ksrc = pre ? pk : k, *vsrc = pre ? pv : v;
            const int kh = pfx_half_flag(flags, pre ? HALF_PK : HALF_K),
                      vh = pfx_half_flag(flags, pre ? HALF_PV : HALF_V);
            const ulong off = pre ? p_base + (ulong)j * D : kv_base + (ulong)(j - P) * kvr;
            if (D == HEAD_DIM) { /* whole rows: vector loads (a half KV cache's too) */
                for (int d0 = 0; d0 < HEAD_DIM; d0 += VEC) {
                    floatv kx = pfx_loadv(ksrc, off + d0, kh);
                    LVEC(Vs, c * HEAD_DIM + d0) = pfx_loadv(vsrc, off + d0, vh);
#if ROW_LANES
                    LVEC(Ks, c * HEAD_DIM + d0) = kx;
#else
                    float lanes[VEC];
                    vstorev(kx, 0, lanes);
#pragma unroll
                    for (int x = 0; x < VEC; x++)
                        Ks[(d0 + x) * BLOCK_N + c] = lanes[x];
#endif
                }
                continue;
            }
            for (int d = 0; d < HEAD_DIM; d++) {
                float kx = d < D ? pfx_load(ksrc, off + (ulong)d, kh) : 0.0f;
                float vx = d < D ? pfx_load(vsrc, off + (ulong)d, vh) : 0.0f;
                Ks[ROW_LANES ? c * HEAD_DIM + d : d * BLOCK_N + c] = kx;
                Vs[c * HEAD_DIM + d] = vx;
            }
        }

#if ROW_LANES
        /* Unscaled logits: Ss[c][r] = k_c . q_r, RB keys x NVR row vectors per
         * block; keys past cols (up to a whole block) are never read. */
        pfx_cpu_scores(Ks, Qs, Ss, BLOCK_M, (cols + RB - 1) / RB * RB, rows, D);

        /* Online softmax down the keys, VEC rows at a time; logits scaled by
         * c_h as they are masked. */
        for (int rv = 0; rv < rows; rv += VEC) {
            const intv visible = *(__local intv *)(row_keys + rv) - (intv)j0;
            const floatv m_old = LVEC(row_m, rv), cv = LVEC(row_c, rv);
            floatv mt = m_old;
            for (int c = 0; c < cols; c++) {
                const floatv s = LVEC(Ss, c * BLOCK_M + rv);
                floatv sv = select((floatv)(-INFINITY), PFX_SAT_LOGIT(s * cv, s),
                                   (intv)c < visible);
                LVEC(Ss, c * BLOCK_M + rv) = sv;
                mt = fmax(mt, sv);
            }
            const floatv mu = select(mt, (floatv)0.0f, mt == (floatv)(-INFINITY));
            floatv lv = (floatv)0.0f;
            for (int c = 0; c < cols; c++) {
                floatv p = pfx_exp2v((LVEC(Ss, c * BLOCK_M + rv) - mu) * PFX_LOG2E);
                LVEC(Ss, c * BLOCK_M + rv) = p;
                lv += p;
            }
            const floatv alpha = pfx_exp2v((m_old - mu) * PFX_LOG2E);
            LVEC(row_alpha, rv) = alpha;
            LVEC(row_l, rv) = LVEC(row_l, rv) * alpha + lv;
            LVEC(row_m, rv) = mt;
        }
#define P_KEY_STEP BLOCK_M /* p of (r, c) at Ss[c BLOCK_M + r] */
#define P_ROW_STEP 1
#else
        /* Unscaled logits: Ss[r][c] = q_r . k_c, RB rows x NVK key vectors. */
        const int key_blocks = (cols + NVK * VEC - 1) / (NVK * VEC);
        pfx_cpu_scores(Qs, Ks, Ss, BLOCK_N, rows, cols, D);

        /* Online softmax row by row, keys as lanes; logits scaled by c_h as
         * they are masked. */
        const int vecs = key_blocks * NVK;
        for (int x = 0; x < rows; x++) {
            __local float *srow = Ss + x * BLOCK_N;
            const intv visible = (intv)(row_keys[x] - j0);
            const float cx = row_c[x];
            floatv mv = (floatv)(-INFINITY);
            for (int y = 0; y < vecs; y++) {
                const floatv s = LVEC(srow, y * VEC);
                floatv sv = select((floatv)(-INFINITY), PFX_SAT_LOGIT(s * cx, s),
                                   LANE_IDS + (intv)(y * VEC) < visible);
                LVEC(srow, y * VEC) = sv;
                mv = fmax(mv, sv);
            }
            const float m_old = row_m[x];
            const float mt = fmax(m_old, pfx_hmax(mv));
            const float mu = mt == -INFINITY ? 0.0f : mt;
            const floatv muv = (floatv)mu;
            floatv lv = (floatv)0.0f;
            for (int y = 0; y < vecs; y++) {
                floatv p = pfx_exp2v((LVEC(srow, y * VEC) - muv) * PFX_LOG2E);
                LVEC(srow, y * VEC) = p;
                lv += p;
            }
            const float alpha = pfx_exp2((m_old - mu) * PFX_LOG2E);
            row_alpha[x] = alpha;
            row_l[x] = row_l[x] * alpha + pfx_hsum(lv);
            row_m[x] = mt;
        }
#define P_KEY_STEP 1 /* p of (r, c) at Ss[r BLOCK_N + c] */
#define P_ROW_STEP BLOCK_N
#endif

        /* Dropout: p times 0 or 1/(1-p) (l summed the undropped p above). */
        for (int x = 0; drop_on && x < rows; x++) {
            const int rr = min(r0 + x, R - 1);
            const uint drop_row = (((uint)drop_item0 + (uint)b) * (uint)dims.H +
                                   (uint)(hk * dims.group + rr / N)) * (uint)N + (uint)(rr % N);
            for (int c = 0; c < cols; c++)
                Ss[x * P_ROW_STEP + c * P_KEY_STEP] *= pfx_dropout_factor(
                    drop_stream, drop_threshold, drop_scale, drop_row, (uint)(j0 + c));
        }

        /* O = alpha O + P V: RB rows x NVD vectors of head dimensions. */
        pfx_cpu_accumulate(Os, row_alpha, Ss, P_KEY_STEP, P_ROW_STEP, Vs, rows, cols, D);
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
