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

/* The sum and the max of a float8's lanes, in one fixed order (halves). */
float pfx_sum8(float8 v)
{
    const float4 a = v.lo + v.hi;
    const float2 b = a.lo + a.hi;
    return b.lo + b.hi;
}

float pfx_max8(float8 v)
{
    const float4 a = fmax(v.lo, v.hi);
    const float2 b = fmax(a.lo, a.hi);
    return fmax(b.lo, b.hi);
}

/* The sum and the max of v over a work-group of n items (n a power of two,
 * the group's size) through s[n]: a tree in one fixed order, so the result
 * is deterministic for a given n. Every item of the group calls it and gets
 * the result; s is free again on return. */
float pfx_group_sum(__local float *s, float v, uint n)
{
    const uint lid = get_local_id(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = n / 2; w > 0; w >>= 1) {
        if (lid < w)
            s[lid] += s[lid + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

float pfx_group_max(__local float *s, float v, uint n)
{
    const uint lid = get_local_id(0);
    s[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint w = n / 2; w > 0; w >>= 1) {
        if (lid < w)
            s[lid] = fmax(s[lid], s[lid + w]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = s[0];
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
