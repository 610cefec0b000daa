/*
 * Shared by every kernel program: the runtime puts this file in front of each
 * cl/<program>.cl before building. OpenCL C 1.2, no extension required.
 *
 * Tensors may be stored as float or half (weights also as bfloat16). Kernels
 * take such tensors as __global void pointers plus a compile-time or uniform
 * flag; vload_half and vstore_half are core OpenCL 1.2 and need no
 * cl_khr_fp16.
 */

/* The CPU paths pass float8/float16 values between functions. Clang-based
 * compilers (PoCL on an AVX2 host) warn once per such call that the vector
 * ABI differs without AVX-512 ("25 warnings generated." on the user's
 * terminal). PoCL inlines every function into its kernel, so no call
 * crosses that ABI. PoCL refuses -Wno-psabi as a build option: the pragma
 * silences this one warning and no other (tests/check_kernel_warnings.py). */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpsabi"
#endif
/* Storage codes of the is_half flags: 0 float, 1 half, 2 bfloat16 (a
 * weight storage: float32's upper 16 bits, widened by a shift). */
#define PFX_BF16 2

#define pfx_load_bf16(ptr, i) as_float((uint)((__global const ushort *)(ptr))[(i)] << 16)

#define pfx_load(ptr, i, is_half)                                     \
    ((is_half) == PFX_BF16 ? pfx_load_bf16((ptr), (i))                \
     : (is_half) ? vload_half((i), (__global const half *)(ptr))      \
               : ((__global const float *)(ptr))[(i)])

/* Q8_0 (storage code 3): blocks of 32 int8 values after a half scale, 34
 * bytes a block (src/runtime/q8_0.h). Element i, and 8 elements from i
 * (i a multiple of 8: one block). */
#define PFX_Q8_0 3
float pfx_load_q8_0(__global const void *p, ulong i)
{
    __global const uchar *b = (__global const uchar *)p + i / 32 * 34;
    return vload_half(0, (__global const half *)b) * (float)((__global const char *)b)[2 + i % 32];
}
float8 pfx_load8_q8_0(__global const void *p, ulong i)
{
    __global const uchar *b = (__global const uchar *)p + i / 32 * 34;
    return vload_half(0, (__global const half *)b) *
           convert_float8(vload8(0, (__global const char *)b + 2 + i % 32));
}

/* A weight's element of any storage, Q8_0 included (the token embedding and
 * the widening of weights; the other kernels take pfx_load's three). */
#define pfx_load_weight(ptr, i, code) \
    ((code) == PFX_Q8_0 ? pfx_load_q8_0((ptr), (i)) : pfx_load((ptr), (i), (code)))

/* float to bfloat16 bits, rounded to nearest even (NaN kept quiet). */
ushort pfx_bf16_bits(float v)
{
    const uint x = as_uint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (ushort)((x >> 16) | 0x40u);
    return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#define pfx_store(ptr, i, value, is_half)                             \
    do {                                                              \
        if ((is_half) == PFX_BF16)                                    \
            ((__global ushort *)(ptr))[(i)] = pfx_bf16_bits(value);   \
        else if (is_half)                                             \
            vstore_half((value), (i), (__global half *)(ptr));        \
        else                                                          \
            ((__global float *)(ptr))[(i)] = (value);                 \
    } while (0)

/* Elements 8 j .. 8 j + 7 of a float, half or bfloat16 tensor whose element
 * c is at off + c * step: one vector load when step is 1. */
float8 pfx_load8(__global const void *p, ulong off, ulong step, int is_half, ulong j)
{
    if (step == 1) {
        if (is_half == PFX_BF16)
            return as_float8(convert_uint8(vload8(0, (__global const ushort *)p + off + 8 * j))
                             << 16);
        return is_half ? vload_half8(0, (__global const half *)p + off + 8 * j)
                       : vload8(0, (__global const float *)p + off + 8 * j);
    }
    float t[8];
    for (int k = 0; k < 8; k++)
        t[k] = pfx_load(p, off + (8 * j + k) * step, is_half);
    return vload8(0, t);
}

/* The sum and the max of a vector's lanes, in one fixed order (halves), for
 * float4, float8 and float16. */
float pfx_sum4(float4 v)
{
    const float2 b = v.lo + v.hi;
    return b.lo + b.hi;
}

float pfx_sum8(float8 v)
{
    return pfx_sum4(v.lo + v.hi);
}

float pfx_sum16(float16 v)
{
    return pfx_sum8(v.lo + v.hi);
}

float pfx_max4(float4 v)
{
    const float2 b = fmax(v.lo, v.hi);
    return fmax(b.lo, b.hi);
}

float pfx_max8(float8 v)
{
    return pfx_max4(fmax(v.lo, v.hi));
}

float pfx_max16(float16 v)
{
    return pfx_max8(fmax(v.lo, v.hi));
}

#define PFX_ADD(a, b) ((a) + (b))

/* The reduction of v by OP over a work-group of n items (n a power of two,
 * the group's size) through s[n]: a tree in one fixed order, so the result
 * is deterministic for a given n. Every item of the group calls it and gets
 * the result; s is free again on return. Instantiated per element type and
 * operation: pfx_group_sum, pfx_group_max (float), pfx_group_sum4 (float4:
 * four sums in one tree, each as pfx_group_sum computes it). */
#define PFX_DEFINE_GROUP_REDUCE(name, T, OP)                                  \
    T name(__local T *s, T v, uint n)                                         \
    {                                                                         \
        const uint lid = get_local_id(0);                                     \
        s[lid] = v;                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                         \
        for (uint w = n / 2; w > 0; w >>= 1) {                                \
            if (lid < w)                                                      \
                s[lid] = OP(s[lid], s[lid + w]);                              \
            barrier(CLK_LOCAL_MEM_FENCE);                                     \
        }                                                                     \
        const T r = s[0];                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                         \
        return r;                                                             \
    }
PFX_DEFINE_GROUP_REDUCE(pfx_group_sum, float, PFX_ADD)
PFX_DEFINE_GROUP_REDUCE(pfx_group_max, float, fmax)
PFX_DEFINE_GROUP_REDUCE(pfx_group_sum4, float4, PFX_ADD)

/* The sum of v over a work-group of n items in item order, 0 + v_0 + v_1 +
 * ... (a serial sum: for results that must match a loop's), through s[n];
 * every item gets it, s is free again on return. */
float pfx_group_sum_in_order(__local float *s, float v, uint n)
{
    const uint lid = get_local_id(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = 0.0f;
    for (uint t = 0; t < n; t++)
        r += s[t];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

#define PFX_LOG2E 1.4426950408889634f

/*
 * 2^x for x <= 0 (and NaN): 0 below -126, else 2^round(x) times a degree-7
 * polynomial of the fraction. exp2() is a libm call on CPUs that blocks
 * vectorization; this is plain arithmetic: fma() (one instruction where the
 * device has FMA, exact rounding everywhere) and the nearest integer as
 * floor(x + 0.5) (one instruction on CPUs; PoCL lowers rint() to a dozen, and
 * adding and subtracting 1.5 * 2^23 is folded away by Mesa's compiler).
 * Instantiated per float type:
 * PFX_DEFINE_POLY_EXP2(name, float16, int16, convert_int16, as_float16);
 * PFX_DEFINE_POLY_EXP2_WITH(..., mad) takes mad() for the steps instead
 * (for code that must also run where a driver's vector fma() is wrong).
 */
#define PFX_DEFINE_POLY_EXP2(name, T, I, CONVERT_I, AS_T)                     \
    PFX_DEFINE_POLY_EXP2_WITH(name, T, I, CONVERT_I, AS_T, fma)
#define PFX_DEFINE_POLY_EXP2_WITH(name, T, I, CONVERT_I, AS_T, MULADD)        \
    inline T name(T x)                                                        \
    {                                                                         \
        T n = floor(x + (T)0.5f);                                             \
        T f = x - n; /* [-0.5, 0.5] */                                        \
        T p = (T)1.5252733804059840e-05f;                                     \
        p = MULADD(p, f, (T)1.5403530393381606e-04f);                         \
        p = MULADD(p, f, (T)1.3333558146428443e-03f);                         \
        p = MULADD(p, f, (T)9.6181291076284772e-03f);                         \
        p = MULADD(p, f, (T)5.5504108664821580e-02f);                         \
        p = MULADD(p, f, (T)2.4022650695910071e-01f);                         \
        p = MULADD(p, f, (T)6.9314718055994531e-01f);                         \
        p = MULADD(p, f, (T)1.0f);                                            \
        I e = CONVERT_I(fmax(n, (T)-127.0f)) + 127;                           \
        T r = AS_T(max(e, (I)0) << 23) * p;                                   \
        return select(r, (T)0.0f, x < (T)-126.0f);                            \
    }

/*
 * The tile products of the attention kernels' CPU paths (forward and
 * backward; one work-item per work-group, local memory is the CPU's cache),
 * register-blocked as a CPU GEMM does and accumulated with fma() in a fixed
 * order. Instantiated once per program for its float vector type:
 * PFX_DEFINE_CPU_TILE_PRODUCTS(floatv, VEC, RB, NVS, NVD, LDA) with VEC the
 * lanes of floatv, RB the broadcast rows per register block, NVS and NVD the
 * vectors per block of pfx_cpu_scores and pfx_cpu_accumulate, LDA the row
 * stride of their row operands (the head-size class). Every vector operand
 * is a local array of PFX_LOCAL_FLOATS, read at multiples of VEC.
 *
 * pfx_cpu_scores: out[r][c] = sum_{d < D} a[r][d] bt[d][c] for r in [0, rows)
 * (a multiple of RB) and c in [0, cols) rounded up to NVS vectors: a rows of
 * stride LDA (broadcast), bt rows of stride ld (vectors), out rows of stride
 * ld. Lanes past cols hold whatever bt holds there.
 *
 * pfx_cpu_accumulate: acc[o][d] = scale[o] acc[o][d] + sum_{u < inner}
 * w[u w_u + o w_o] b[u][d] for outputs [0, outs) (a multiple of RB), head
 * dimensions up to D rounded up to NVD vectors: w broadcast, b and acc rows
 * of stride LDA (vectors); scale may be NULL (1).
 */
/* The vector of type T at p + i of a local float array declared as T (i a
 * multiple of its lanes): an aligned access (PoCL splits a vstore16 of
 * unknown alignment into four 16-byte stores), usable on both sides of '='. */
#define PFX_LVEC(T, p, i) (*(__local T *)((p) + (i)))
/* A local float array of n floats (n a multiple of VEC), aligned as T, the
 * float vector of VEC lanes. */
#define PFX_LOCAL_FLOATS(T, VEC, name, n)                                     \
    __local T name##_[(n) / (VEC)];                                           \
    __local float *name = (__local float *)name##_
#define PFX_DEFINE_CPU_TILE_PRODUCTS(T, VEC, RB, NVS, NVD, LDA)                              \
    void pfx_cpu_scores(__local const float *a, __local const float *bt, __local float *out, \
                        int ld, int rows, int cols, int D)                                   \
    {                                                                                        \
        const int blocks = (cols + (NVS) * (VEC)-1) / ((NVS) * (VEC));                       \
        for (int rb = 0; rb < rows; rb += (RB))                                              \
            for (int kb = 0; kb < blocks; kb++) {                                            \
                const int c0 = kb * (NVS) * (VEC);                                           \
                T s[RB][NVS];                                                                \
                _Pragma("unroll") for (int x = 0; x < (RB); x++)                             \
                    _Pragma("unroll") for (int y = 0; y < (NVS); y++) s[x][y] = (T)0.0f;     \
                /* pointers stepped per d: constant offsets inside the block */              \
                __local const float *ap = a + rb * (LDA), *bp = bt + c0;                     \
                for (int d = 0; d < D; d++, ap++, bp += ld) {                                \
                    T bv[NVS];                                                               \
                    _Pragma("unroll") for (int y = 0; y < (NVS); y++) bv[y] =                \
                        PFX_LVEC(T, bp, y * (VEC));                                          \
                    _Pragma("unroll") for (int x = 0; x < (RB); x++)                         \
                    {                                                                        \
                        T av = (T)ap[x * (LDA)];                                             \
                        _Pragma("unroll") for (int y = 0; y < (NVS); y++) s[x][y] =          \
                            fma(av, bv[y], s[x][y]);                                         \
                    }                                                                        \
                }                                                                            \
                _Pragma("unroll") for (int x = 0; x < (RB); x++)                             \
                    _Pragma("unroll") for (int y = 0; y < (NVS); y++)                        \
                        PFX_LVEC(T, out, (rb + x) * ld + c0 + y * (VEC)) = s[x][y];          \
            }                                                                                \
    }                                                                                        \
    void pfx_cpu_accumulate(__local float *acc, __local const float *scale,                 \
                            __local const float *w, int w_u, int w_o, __local const float *b, \
                            int outs, int inner, int D)                                      \
    {                                                                                        \
        const int d_end = (D + (NVD) * (VEC)-1) / ((NVD) * (VEC)) * ((NVD) * (VEC));          \
        for (int ob = 0; ob < outs; ob += (RB))                                              \
            for (int d0 = 0; d0 < d_end; d0 += (NVD) * (VEC)) {                              \
                T a[RB][NVD];                                                                \
                _Pragma("unroll") for (int x = 0; x < (RB); x++)                             \
                    _Pragma("unroll") for (int y = 0; y < (NVD); y++)                        \
                {                                                                            \
                    a[x][y] = PFX_LVEC(T, acc, (ob + x) * (LDA) + d0 + y * (VEC));            \
                    if (scale)                                                               \
                        a[x][y] *= scale[ob + x];                                            \
                }                                                                            \
                __local const float *wp = w + ob * w_o, *bp = b + d0;                        \
                for (int u = 0; u < inner; u++, wp += w_u, bp += (LDA)) {                    \
                    T bv[NVD];                                                               \
                    _Pragma("unroll") for (int y = 0; y < (NVD); y++) bv[y] =                \
                        PFX_LVEC(T, bp, y * (VEC));                                          \
                    _Pragma("unroll") for (int x = 0; x < (RB); x++)                         \
                    {                                                                        \
                        T wv = (T)wp[x * w_o];                                               \
                        _Pragma("unroll") for (int y = 0; y < (NVD); y++) a[x][y] =          \
                            fma(wv, bv[y], a[x][y]);                                         \
                    }                                                                        \
                }                                                                            \
                _Pragma("unroll") for (int x = 0; x < (RB); x++)                             \
                    _Pragma("unroll") for (int y = 0; y < (NVD); y++)                        \
                        PFX_LVEC(T, acc, (ob + x) * (LDA) + d0 + y * (VEC)) = a[x][y];       \
            }                                                                                \
    }

/* Dropout masks (docs/design.md "Dropout"): Philox4x32-10 (Salmon et al.,
 * SC'11; the generator of cuRAND and JAX), a counter-based generator, so a
 * kernel draws the mask of any element from its coordinates alone and the
 * backward regenerates the forward's mask instead of storing it. Element
 * (row, col) of a stream (key = the seed, tag = step and site) is kept iff
 * word col % 4 of Philox(counter (col / 4, row, step, tag), key) is at least
 * `threshold` (floor(p 2^32)); src/ops/dropout.h gives the host side. */
inline uint4 pfx_philox(uint4 ctr, uint2 key)
{
    for (int round = 0; round < 10; round++) {
        const uint lo0 = 0xD2511F53u * ctr.x, hi0 = mul_hi(0xD2511F53u, ctr.x);
        const uint lo1 = 0xCD9E8D57u * ctr.z, hi1 = mul_hi(0xCD9E8D57u, ctr.z);
        ctr = (uint4)(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
        key += (uint2)(0x9E3779B9u, 0xBB67AE85u);
    }
    return ctr;
}

/* The factor of element (row, col): scale when kept, 0 when dropped.
 * stream = (seed low, seed high, step, tag). */
inline float pfx_dropout_factor(uint4 stream, uint threshold, float scale, uint row, uint col)
{
    const uint4 w = pfx_philox((uint4)(col >> 2, row, stream.z, stream.w), stream.xy);
    /* word col % 4 by two selects on its bits: under Oclgrind 21.10 a
     * chain of compares on col & 3 drew another word than the one named
     * (the Philox words themselves right) */
    const uint odd = col & 1u, high = col & 2u;
    const uint word = high ? (odd ? w.w : w.z) : (odd ? w.y : w.x);
    return word >= threshold ? scale : 0.0f;
}
