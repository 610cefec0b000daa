/*
 * Device ceilings for `prefixcl bench`, measured as clpeak measures them:
 * float32 fused multiply-add throughput (fma(): mad() is not fused by every
 * compiler, PoCL's gave half the FMA ceiling; two dependent chains per work-item, the
 * same 4096 FLOPs per work-item at every vector width; the host keeps the best
 * width) and global-memory copy bandwidth (float4 loads and stores).
 * OpenCL C 1.2, no extension.
 */
#ifndef PEAK_ITERS
#define PEAK_ITERS 128
#endif

#define FMA_4(x, y) x = fma(y, x, y); y = fma(x, y, x); x = fma(y, x, y); y = fma(x, y, x);
#define FMA_16(x, y) FMA_4(x, y) FMA_4(x, y) FMA_4(x, y) FMA_4(x, y)

/* FLOPs per work-item: PEAK_ITERS * 16 fmas * 2 = 4096 at every width. */
#define PEAK_KERNEL(name, type, width, init_y)                                   \
__kernel void name(__global float *out, float a)                                \
{                                                                               \
    type x = (type)(a);                                                         \
    type y = init_y;                                                            \
    for (int i = 0; i < PEAK_ITERS / (width); i++) {                            \
        FMA_16(x, y)                                                            \
    }                                                                           \
    out[get_global_id(0)] = PEAK_SUM_##width(y);                                \
}

#define PEAK_SUM_1(v) (v)
#define PEAK_SUM_2(v) ((v).s0 + (v).s1)
#define PEAK_SUM_4(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3)
#define PEAK_SUM_8(v) (PEAK_SUM_4((v).lo) + PEAK_SUM_4((v).hi))
#define PEAK_SUM_16(v) (PEAK_SUM_8((v).lo) + PEAK_SUM_8((v).hi))

PEAK_KERNEL(peak_fma_f1, float, 1, (float)get_local_id(0))
PEAK_KERNEL(peak_fma_f2, float2, 2, (float2)((float)get_local_id(0), 0.5f))
PEAK_KERNEL(peak_fma_f4, float4, 4, (float4)((float)get_local_id(0), 0.5f, 0.25f, 0.125f))
PEAK_KERNEL(peak_fma_f8, float8, 8,
            (float8)((float)get_local_id(0), 0.5f, 0.25f, 0.125f, 1.5f, 2.5f, 3.5f, 4.5f))
PEAK_KERNEL(peak_fma_f16, float16, 16,
            (float16)((float)get_local_id(0), 0.5f, 0.25f, 0.125f, 1.5f, 2.5f, 3.5f, 4.5f,
                      5.5f, 6.5f, 7.5f, 8.5f, 9.5f, 10.5f, 11.5f, 12.5f))

#ifdef PEAK_ILP
/* CPUs only (-DPEAK_ILP, see src/ops/registry.c): the same with 8 independent
 * chain pairs per work-item (32768 FLOPs each), enough instruction-level
 * parallelism to fill the FMA pipes of a CPU, whose OpenCL compiler runs a
 * work-item's loop serially. On GPUs they would spill registers, and the plain
 * kernels above already reach the peak there. The host keeps the best of all. */
#define PEAK_ILP_KERNEL(name, type, width)                                       \
__kernel void name(__global float *out, float a)                                \
{                                                                               \
    type x0 = (type)(a), x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;        \
    type x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;        \
    type y0 = (type)((float)get_local_id(0)), y1 = y0 + 1.0f, y2 = y0 + 2.0f;   \
    type y3 = y0 + 3.0f, y4 = y0 + 4.0f, y5 = y0 + 5.0f, y6 = y0 + 6.0f;        \
    type y7 = y0 + 7.0f;                                                        \
    for (int i = 0; i < 128 / (width); i++) {                                   \
        for (int j = 0; j < 4; j++) {                                           \
            FMA_4(x0, y0) FMA_4(x1, y1) FMA_4(x2, y2) FMA_4(x3, y3)             \
            FMA_4(x4, y4) FMA_4(x5, y5) FMA_4(x6, y6) FMA_4(x7, y7)             \
        }                                                                       \
    }                                                                           \
    type s = ((y0 + y1) + (y2 + y3)) + ((y4 + y5) + (y6 + y7));                 \
    out[get_global_id(0)] = PEAK_SUM_##width(s);                                \
}

PEAK_ILP_KERNEL(peak_fma_ilp_f4, float4, 4)
PEAK_ILP_KERNEL(peak_fma_ilp_f8, float8, 8)
PEAK_ILP_KERNEL(peak_fma_ilp_f16, float16, 16)
#endif

/* Bytes moved per call: 2 * 16 * global size (read and write). */
__kernel void peak_copy(__global const float4 *restrict in, __global float4 *restrict out)
{
    size_t i = get_global_id(0);
    out[i] = in[i];
}
