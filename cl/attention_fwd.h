/* What the host (src/ops/attention_forward.c) and cl/attention_fwd.cl share:
 * the sizes handed to the kernel as one struct argument and the bits of its
 * half flags. Written in the subset of C both compile; the runtime joins it
 * after cl/common.cl and before cl/attention_fwd.cl (src/runtime/source.c). */
#ifndef PFX_CL_ATTENTION_FWD_H
#define PFX_CL_ATTENTION_FWD_H

#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)
typedef int pfx_cl_int;
#else
#define CL_TARGET_OPENCL_VERSION 120 /* as src/runtime/internal.h, which follows */
#include <CL/cl.h>
typedef cl_int pfx_cl_int;
#endif

/* Batch, heads, kv heads, queries, keys, prefix, head size, query heads per
 * kv head, rows per kv head (group * N). */
typedef struct pfx_attn_dims {
    pfx_cl_int B, H, Hkv, N, M, P, D, group, R;
} pfx_attn_dims;

/* Half flags: which tensors are stored as half. */
#define HALF_Q  1
#define HALF_K  2
#define HALF_V  4
#define HALF_PK 8
#define HALF_PV 16
#define HALF_O  32
/* A tensor stored as bfloat16 (the inputs only: a KV cache's storage) sets
 * its half bit shifted by BF16_SHIFT instead. */
#define BF16_SHIFT 6

#endif
