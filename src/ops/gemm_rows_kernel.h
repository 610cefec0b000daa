/*
 * The kernels of gemm_rows.c for one instruction set, included once per set
 * with ROWS_ATTR (the target attribute), ROWS_NAME(x) (x with the set's
 * suffix), ROWS_FMA(acc, x, v) (acc + x v, x a float), ROWS_FMAV(acc, x, v)
 * (the same, x a v16), ROWS_HALF(p) and ROWS_BF16(p) (16 half or bfloat16
 * values at p as a v16), ROWS_Q8(p) (16 int8 values at p as a v16) and
 * ROWS_SCALE(h) (half bits h as a float) defined; every function here is compiled for that
 * set. The storage type of B reaches the loops as a constant (one copy of
 * each loop per type and row count). Not a header of its own: no include
 * guard.
 */

/* 16 elements of B at element e: float, or 16-bit widened in registers, or
 * Q8_0 scaled (e a multiple of 16: half a block). */
static inline __attribute__((always_inline)) ROWS_ATTR v16 ROWS_NAME(load_b)(const void *b,
                                                                             const int type,
                                                                             size_t e)
{
    if (type == PFX_ROWS_Q8_0) {
        const pfx_q8_0_block *q = (const pfx_q8_0_block *)b + e / PFX_Q8_0_BLOCK;
        return ROWS_Q8(q->q + e % PFX_Q8_0_BLOCK) * ROWS_SCALE(q->d);
    }
    if (type == PFX_ROWS_F16)
        return ROWS_HALF((const uint16_t *)b + e);
    if (type == PFX_ROWS_BF16)
        return ROWS_BF16((const uint16_t *)b + e);
    return *(const v16u *)((const float *)b + e);
}

/* Prefetches the line ROWS_PF bytes past element e of B (float32 or 16-bit:
 * Q8_0 goes to cols_q8 and rows_q8, which prefetch blocks themselves). */
static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(prefetch_b)(const void *b, const int type, size_t e)
{
    if (!ROWS_PF)
        return;
    __builtin_prefetch((const char *)b + e * (type == PFX_ROWS_F32 ? 4 : 2) + ROWS_PF);
}

/* C row i, columns [j, j + w) (w <= 16) = alpha acc + beta C. */
static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(store)(const pfx_gemm_rows_args *g, size_t i, size_t j, size_t w, v16 acc)
{
    float *c = g->c + i * g->ldc + j;
    for (size_t l = 0; l < w; l++)
        c[l] = g->alpha * acc[l] + (g->beta != 0.0f ? g->beta * c[l] : 0.0f);
}

/* B [k, n]: columns [j, j + 32) of MR rows over B's rows [p0, p1). The sums
 * start from 0 (p0 == 0) or from part (MR x 32, row stride ldp) and end in
 * part or, at p1 == k, in C. */
static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(cols32)(const pfx_gemm_rows_args *g, size_t j, size_t p0, size_t p1, float *part,
                  size_t ldp, const int MR, const int BT)
{
    v16 acc0[PFX_GEMM_ROWS_MAX], acc1[PFX_GEMM_ROWS_MAX];
    const float *a = g->a;
    const size_t lda = g->lda, ldb = g->ldb;
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        acc0[i] = acc1[i] = (v16){ 0 };
        if (p0) {
            acc0[i] = *(const v16u *)(part + (size_t)i * ldp);
            acc1[i] = *(const v16u *)(part + (size_t)i * ldp + 16);
        }
    }
    for (size_t p = p0; p < p1; p++) {
        const size_t e = p * ldb + j;
        ROWS_NAME(prefetch_b)(g->b, BT, e);
        if (BT == PFX_ROWS_F32)
            ROWS_NAME(prefetch_b)(g->b, BT, e + 16);
        const v16 b0 = ROWS_NAME(load_b)(g->b, BT, e);
        const v16 b1 = ROWS_NAME(load_b)(g->b, BT, e + 16);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            const float x = a[(size_t)i * lda + p];
            acc0[i] = ROWS_FMA(acc0[i], x, b0);
            acc1[i] = ROWS_FMA(acc1[i], x, b1);
        }
    }
    if (p1 < g->k) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            *(v16u *)(part + (size_t)i * ldp) = acc0[i];
            *(v16u *)(part + (size_t)i * ldp + 16) = acc1[i];
        }
        return;
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        ROWS_NAME(store)(g, (size_t)i, j, 16, acc0[i]);
        ROWS_NAME(store)(g, (size_t)i, j + 16, 16, acc1[i]);
    }
}

/* B [k, n] as Q8_0: columns [j, j + 32 CB), CB blocks of each row (j and
 * ldb whole blocks), of MR rows over B's rows [p0, p1); x times a block's
 * scale multiplies its values. The sums as cols32's (part: MR x 32 CB).
 * Several blocks a row at a time: one block a visit read a row's 34 bytes
 * and left it, which the prefetchers served at a third of float32's rate. */
static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(cols_q8)(const pfx_gemm_rows_args *g, size_t j, size_t p0, size_t p1, float *part,
                   size_t ldp, const int MR, const int CB)
{
    v16 acc[PFX_GEMM_ROWS_MAX][8];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
        for (int h = 0; h < 2 * CB; h++)
            acc[i][h] =
                p0 ? (v16) * (const v16u *)(part + (size_t)i * ldp + 16 * (size_t)h) : (v16){ 0 };
    const size_t stride = g->ldb / PFX_Q8_0_BLOCK;
    const pfx_q8_0_block *q = (const pfx_q8_0_block *)g->b + p0 * stride + j / PFX_Q8_0_BLOCK;
    for (size_t p = p0; p < p1; p++, q += stride) {
        __builtin_prefetch(q + ROWS_Q8_COLS_AHEAD * CB);
#pragma GCC unroll 4
        for (int c = 0; c < CB; c++) {
            const float d = ROWS_SCALE(q[c].d);
            const v16 b0 = ROWS_Q8(q[c].q), b1 = ROWS_Q8(q[c].q + 16);
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++) {
                const float x = g->a[(size_t)i * g->lda + p] * d;
                acc[i][2 * c] = ROWS_FMA(acc[i][2 * c], x, b0);
                acc[i][2 * c + 1] = ROWS_FMA(acc[i][2 * c + 1], x, b1);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
        for (int h = 0; h < 2 * CB; h++) {
            if (p1 < g->k)
                *(v16u *)(part + (size_t)i * ldp + 16 * (size_t)h) = acc[i][h];
            else
                ROWS_NAME(store)(g, (size_t)i, j + 16 * (size_t)h, 16, acc[i][h]);
        }
}

/* B [n, k] as Q8_0 (blocks along B's rows, ldb whole blocks): outputs
 * [j, j + NJ) of MR rows; per block, the two halves' products summed, then
 * scaled once. */
static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(rows_q8)(const pfx_gemm_rows_args *g, size_t j, const int NJ, const int MR)
{
    v16 acc[PFX_GEMM_ROWS_MAX][4];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int t = 0; t < NJ; t++)
            acc[i][t] = (v16){ 0 };
    const size_t stride = g->ldb / PFX_Q8_0_BLOCK, kb = g->k / PFX_Q8_0_BLOCK;
    const pfx_q8_0_block *q = (const pfx_q8_0_block *)g->b + j * stride;
    for (size_t b = 0; b < kb; b++) {
        v16 lo[4], hi[4];
        float d[4];
#pragma GCC unroll 4
        for (int t = 0; t < NJ; t++) {
            const pfx_q8_0_block *qt = q + (size_t)t * stride + b;
            __builtin_prefetch(qt + ROWS_Q8_ROWS_AHEAD);
            d[t] = ROWS_SCALE(qt->d);
            lo[t] = ROWS_Q8(qt->q);
            hi[t] = ROWS_Q8(qt->q + 16);
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            const float *x = g->a + (size_t)i * g->lda + b * PFX_Q8_0_BLOCK;
            const v16 x0 = *(const v16u *)x, x1 = *(const v16u *)(x + 16);
#pragma GCC unroll 4
            for (int t = 0; t < NJ; t++)
                acc[i][t] = ROWS_FMA(acc[i][t], d[t], ROWS_FMAV(x0 * lo[t], x1, hi[t]));
        }
    }
    for (int i = 0; i < MR; i++)
        for (int t = 0; t < NJ; t++) {
            float s = 0.0f;
            for (int l = 0; l < 16; l++)
                s += acc[i][t][l];
            for (size_t p = kb * PFX_Q8_0_BLOCK; p < g->k; p++)
                s += g->a[i * g->lda + p] * b_at(g, (j + (size_t)t) * g->ldb + p);
            v16 one = { s };
            ROWS_NAME(store)(g, (size_t)i, j + (size_t)t, 1, one);
        }
}

/* B [n, k]: outputs j, j + 1 of MR rows, dot products along B's rows. */
static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(rows2)(const pfx_gemm_rows_args *g, size_t j, const int NJ, const int MR, const int BT)
{
    v16 acc[PFX_GEMM_ROWS_MAX][2];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
        acc[i][0] = acc[i][1] = (v16){ 0 };
    const size_t k16 = g->k / 16 * 16;
    for (size_t p = 0; p < k16; p += 16) {
        v16 b[2];
#pragma GCC unroll 2
        for (int t = 0; t < NJ; t++) {
            const size_t e = (j + (size_t)t) * g->ldb + p;
            ROWS_NAME(prefetch_b)(g->b, BT, e);
            b[t] = ROWS_NAME(load_b)(g->b, BT, e);
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            const v16 x = *(const v16u *)(g->a + i * g->lda + p);
#pragma GCC unroll 2
            for (int t = 0; t < NJ; t++)
                acc[i][t] = ROWS_FMAV(acc[i][t], x, b[t]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int t = 0; t < NJ; t++) {
            float s = 0.0f;
            for (int l = 0; l < 16; l++)
                s += acc[i][t][l];
            for (size_t p = k16; p < g->k; p++)
                s += g->a[i * g->lda + p] * b_at(g, (j + (size_t)t) * g->ldb + p);
            v16 one = { s };
            ROWS_NAME(store)(g, (size_t)i, j + (size_t)t, 1, one);
        }
}

/* Outputs [j0, j1) of MR rows; j0 on a block boundary. */
static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(range_mr)(const pfx_gemm_rows_args *g, size_t j0, size_t j1, const int MR, const int BT)
{
    size_t j = j0;
    if (g->trans_b && BT == PFX_ROWS_Q8_0) {
        /* 4 rows of B a pass where the registers hold their sums */
        const int nj = MR <= 4 ? 4 : 2;
        for (; j + (size_t)nj <= j1; j += (size_t)nj)
            ROWS_NAME(rows_q8)(g, j, nj, MR);
        for (; j < j1; j++)
            ROWS_NAME(rows_q8)(g, j, 1, MR);
        return;
    }
    if (g->trans_b) {
        for (; j + 2 <= j1; j += 2)
            ROWS_NAME(rows2)(g, j, 2, MR, BT);
        if (j < j1)
            ROWS_NAME(rows2)(g, j, 1, MR, BT);
        return;
    }
    /* ROWS_KB rows of B at a time across the range: as many streams along
     * B's rows for the prefetchers, the sums kept in part between blocks */
    const size_t whole = (j1 - j0) / 32 * 32;
    /* (Q8_0 keeps the 32 rows its prefetches were measured with) */
    const size_t rows_kb = BT == PFX_ROWS_Q8_0 ? 32 : ROWS_KB;
    float *part = g->k > rows_kb ? malloc((size_t)MR * whole * sizeof(float)) : NULL;
    const size_t kb = part ? rows_kb : g->k;
    /* Q8_0: as many blocks a row as the registers hold sums of */
    const int cb = MR <= 2 ? 4 : MR <= 4 ? 2 : 1;
    for (size_t p0 = 0; p0 < g->k; p0 += kb) {
        const size_t p1 = g->k - p0 < kb ? g->k : p0 + kb;
        j = j0;
        if (BT == PFX_ROWS_Q8_0) {
            for (; cb > 1 && j + 32 * (size_t)cb <= j0 + whole; j += 32 * (size_t)cb)
                ROWS_NAME(cols_q8)(g, j, p0, p1, part + (j - j0), whole, MR, cb);
            for (; j < j0 + whole; j += 32)
                ROWS_NAME(cols_q8)(g, j, p0, p1, part + (j - j0), whole, MR, 1);
            continue;
        }
        for (; j < j0 + whole; j += 32)
            ROWS_NAME(cols32)(g, j, p0, p1, part + (j - j0), whole, MR, BT);
    }
    free(part);
    rows_columns_plain(g, j0 + whole, j1); /* the last < 32 columns */
}

static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(range_type)(const pfx_gemm_rows_args *g, size_t j0, size_t j1, const int BT)
{
    switch (g->m) {
    case 1: ROWS_NAME(range_mr)(g, j0, j1, 1, BT); break;
    case 2: ROWS_NAME(range_mr)(g, j0, j1, 2, BT); break;
    case 3: ROWS_NAME(range_mr)(g, j0, j1, 3, BT); break;
    case 4: ROWS_NAME(range_mr)(g, j0, j1, 4, BT); break;
    case 5: ROWS_NAME(range_mr)(g, j0, j1, 5, BT); break;
    case 6: ROWS_NAME(range_mr)(g, j0, j1, 6, BT); break;
    case 7: ROWS_NAME(range_mr)(g, j0, j1, 7, BT); break;
    default: ROWS_NAME(range_mr)(g, j0, j1, 8, BT); break;
    }
}

static ROWS_ATTR void ROWS_NAME(range)(const pfx_gemm_rows_args *g, size_t j0, size_t j1)
{
    switch (g->b_type) {
    case PFX_ROWS_F16: ROWS_NAME(range_type)(g, j0, j1, PFX_ROWS_F16); break;
    case PFX_ROWS_BF16: ROWS_NAME(range_type)(g, j0, j1, PFX_ROWS_BF16); break;
    case PFX_ROWS_Q8_0: ROWS_NAME(range_type)(g, j0, j1, PFX_ROWS_Q8_0); break;
    default: ROWS_NAME(range_type)(g, j0, j1, PFX_ROWS_F32); break;
    }
}

/* dst rows [r0, r1) = src's as float32 (gemm_rows.h pfx_gemm_rows_widen). */
static inline __attribute__((always_inline)) ROWS_ATTR void
ROWS_NAME(widen_type)(const pfx_gemm_rows_widen_args *w, size_t r0, size_t r1, const int BT)
{
    for (size_t r = r0; r < r1; r++) {
        float *d = w->dst + r * w->ld_dst;
        const size_t s = w->src_offset + r * w->ld_src;
        size_t c = 0;
        if (BT == PFX_ROWS_Q8_0) /* vectors from a half block on */
            for (; c < w->cols && (s + c) % 16; c++)
                d[c] = pfx_q8_0_at(w->src, s + c);
        for (; c + 16 <= w->cols; c += 16)
            *(v16u *)(d + c) = ROWS_NAME(load_b)(w->src, BT, s + c);
        for (; c < w->cols; c++)
            d[c] = BT == PFX_ROWS_Q8_0
                       ? pfx_q8_0_at(w->src, s + c)
                       : pfx_16bit_to_float(((const uint16_t *)w->src)[s + c], BT == PFX_ROWS_BF16);
    }
}

static ROWS_ATTR void ROWS_NAME(widen)(const pfx_gemm_rows_widen_args *w, size_t r0, size_t r1)
{
    if (w->type == PFX_ROWS_Q8_0)
        ROWS_NAME(widen_type)(w, r0, r1, PFX_ROWS_Q8_0);
    else if (w->type == PFX_ROWS_BF16)
        ROWS_NAME(widen_type)(w, r0, r1, PFX_ROWS_BF16);
    else
        ROWS_NAME(widen_type)(w, r0, r1, PFX_ROWS_F16);
}
