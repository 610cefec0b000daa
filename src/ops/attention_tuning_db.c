/*
 * The entries of the attention tuning database (attention_tuning.h): vendor
 * family, then architecture, then device name, with a default at every
 * level (CLBlast's database is the model). Why each choice: bench/README.md
 * "Attention tiles" (the measured sweeps) and the comments below.
 *
 * Architecture is matched (a case-insensitive substring) against the OpenCL
 * platform name for CPU devices (the implementation: "Portable Computing
 * Language", "rusticl") and against the device name for GPUs (ROCm names
 * AMD devices "gfx90a"); the device level against the device name.
 */
#include <stdio.h>
#include <string.h>

#include "attention_tuning.h"
#include "device.h"

/* GPUs: KSPLIT work-items per row, each owning HEAD_DIM / KSPLIT output dims
 * (<= 16 accumulators) and BLOCK_N / KSPLIT logits; q in local memory.
 * Gate (tests/kernel_gate.py): no spills on sm_80/90, gfx90a/1030/1100,
 * xe-lp/xe-hpg. WG: work-items per group. */
#define FWD_GPU(dc, ks, wg)                                                                        \
    {                                                                                              \
        .head_dim = (dc), .block_m = (wg) / (ks), .block_n = 32, .ksplit = (ks), .kv_pad = 1,      \
        .q_local = 1, .poly_exp2 = 0, .vec = 1                                                     \
    }
/* Decode: 8 rows (the query heads of a kv head x N) x 16 work-items; split-K
 * across work-groups fills the device. */
#define FWD_GPU_DECODE(dc)                                                                         \
    {                                                                                              \
        .head_dim = (dc), .block_m = 8, .block_n = 64, .ksplit = 16, .kv_pad = 1, .q_local = 1,    \
        .poly_exp2 = 0, .vec = 1                                                                   \
    }
/* The backward keeps (query tile, key tile) of Q, dO, K, V in local memory
 * plus the BQ x BK scores, and DMAX / DSPLIT accumulators per work-item for
 * dK and dV (2x) or dQ (1x) in registers. */
#define BWD_GPU(dc, b, ds)                                                                         \
    {                                                                                              \
        .head_dim = (dc), .block_m = (b), .block_n = (b), .dsplit = (ds), .vec = 1                 \
    }

/* NVIDIA: 48 KiB local, warps of 32, no sub-groups or fp16 needed; padding 1
 * keeps the KSPLIT work-items' strided local reads conflict-free; work-groups
 * of 256. Backward: 32x32 tiles up to D = 64 (41 KiB), 16x16 at 128, 8x8 at
 * 256; DSPLIT 4 keeps 2 * DMAX / 4 <= 64 accumulator registers (no spill).
 * AMD: 64 KiB LDS, wave 64: the same tiles (32x32 at 128 would need 66 KiB). */
static const pfx_attn_tuning nvidia_amd_default = {
    .fwd = { FWD_GPU(16, 8, 256), FWD_GPU(32, 8, 256), FWD_GPU(64, 8, 256), FWD_GPU(128, 8, 256),
             FWD_GPU(256, 16, 256) },
    .decode = { FWD_GPU_DECODE(16), FWD_GPU_DECODE(32), FWD_GPU_DECODE(64), FWD_GPU_DECODE(128),
                FWD_GPU_DECODE(256) },
    .bwd = { BWD_GPU(16, 32, 4), BWD_GPU(32, 32, 4), BWD_GPU(64, 32, 4), BWD_GPU(128, 16, 4),
             BWD_GPU(256, 8, 8) },
    .decode_rows = 8,
    .groups_per_cu = 4,
};

/* Intel: 64 KiB SLM, SIMD8-32: work-groups of 128; backward DSPLIT 2 up to
 * D = 64. */
static const pfx_attn_tuning intel_default = {
    .fwd = { FWD_GPU(16, 8, 128), FWD_GPU(32, 8, 128), FWD_GPU(64, 8, 128), FWD_GPU(128, 8, 128),
             FWD_GPU(256, 16, 128) },
    .decode = { FWD_GPU_DECODE(16), FWD_GPU_DECODE(32), FWD_GPU_DECODE(64), FWD_GPU_DECODE(128),
                FWD_GPU_DECODE(256) },
    .bwd = { BWD_GPU(16, 32, 2), BWD_GPU(32, 32, 2), BWD_GPU(64, 32, 2), BWD_GPU(128, 16, 4),
             BWD_GPU(256, 8, 8) },
    .decode_rows = 8,
    .groups_per_cu = 2,
};

/* CPUs (PoCL, measured: bench/README.md "Attention tiles"): the forward's
 * CPU path (cl/attention_fwd.cpu.cl) at the device's native float width, one
 * work-item per group owning BLOCK_M rows, tile products register-blocked as
 * a CPU GEMM; 128 x 64 tiles up to D = 64 (64 x 64 measured 10-15% slower),
 * 64 rows above (local memory is cache: 130-210 KiB per group). Decode: the
 * 8 rows of a kv head, 32 keys a tile at D = 128 (decode (d): 32 keys about
 * 10% faster than 64, 128 twice as slow). A polynomial exp2 (libm's does not
 * vectorize).
 * Backward: the same register-blocked CPU path (cl/attention_bwd.cpu.cl), one
 * work-item per group owning 64 keys (dK/dV, and the single pass) or 64 query
 * rows (dQ); the single pass measured 64 x 64 about 7% faster than 128 x 64
 * (its dQraw rows are read and written once per tile pair). */
#define FWD_CPU(dc, bm, bn)                                                                        \
    {                                                                                              \
        .head_dim = (dc), .block_m = (bm), .block_n = (bn), .ksplit = 1, .kv_pad = 0,              \
        .q_local = 0, .poly_exp2 = 1, .vec = PFX_ATTN_VEC_NATIVE                                   \
    }
#define BWD_CPU(dc, bm)                                                                            \
    {                                                                                              \
        .head_dim = (dc), .block_m = (bm), .block_n = 64, .dsplit = 1, .vec = PFX_ATTN_VEC_NATIVE  \
    }
static const pfx_attn_tuning cpu_default = {
    .fwd = { FWD_CPU(16, 128, 64), FWD_CPU(32, 128, 64), FWD_CPU(64, 128, 64), FWD_CPU(128, 64, 64),
             FWD_CPU(256, 64, 32) },
    .decode = { FWD_CPU(16, 8, 64), FWD_CPU(32, 8, 64), FWD_CPU(64, 8, 64), FWD_CPU(128, 8, 32),
                FWD_CPU(256, 8, 32) },
    .bwd = { BWD_CPU(16, 64), BWD_CPU(32, 64), BWD_CPU(64, 64), BWD_CPU(128, 64),
             BWD_CPU(256, 64) },
    .decode_rows = 8,
    .groups_per_cu = 2,
};

/* Unknown devices: small, conservative. */
#define FWD_OTHER(dc, bm)                                                                          \
    {                                                                                              \
        .head_dim = (dc), .block_m = (bm), .block_n = 16, .ksplit = 1, .kv_pad = 0, .q_local = 1,  \
        .poly_exp2 = 0, .vec = 1                                                                   \
    }
static const pfx_attn_tuning other_default = {
    .fwd = { FWD_OTHER(16, 16), FWD_OTHER(32, 16), FWD_OTHER(64, 16), FWD_OTHER(128, 16),
             FWD_OTHER(256, 16) },
    .decode = { FWD_OTHER(16, 8), FWD_OTHER(32, 8), FWD_OTHER(64, 8), FWD_OTHER(128, 8),
                FWD_OTHER(256, 8) },
    .bwd = { BWD_GPU(16, 16, 2), BWD_GPU(32, 16, 2), BWD_GPU(64, 16, 2), BWD_GPU(128, 16, 4),
             BWD_GPU(256, 8, 4) },
    .decode_rows = 8,
    .groups_per_cu = 2,
};

/* ---- the levels ---- */

typedef struct db_device {
    const char *name; /* substring of the device name; NULL: the default */
    const pfx_attn_tuning *params;
} db_device;

typedef struct db_arch {
    const char *name; /* see the top of the file; NULL: the default */
    const db_device *devices;
} db_arch;

typedef struct db_vendor {
    pfx_vendor vendor;
    const char *name;
    const db_arch *archs;
} db_vendor;

#define DEFAULT_ONLY(entry) ((const db_device[]){ { .name = NULL, .params = &(entry) } })

static const db_arch nvidia_archs[] = {
    { .name = NULL, .devices = DEFAULT_ONLY(nvidia_amd_default) },
};
static const db_arch amd_archs[] = {
    { .name = NULL, .devices = DEFAULT_ONLY(nvidia_amd_default) },
};
static const db_arch intel_archs[] = {
    { .name = NULL, .devices = DEFAULT_ONLY(intel_default) },
};
/* Mesa's rusticl on llvmpipe: the CPU paths give wrong results there (its
 * vector fma(); see cpu_path_refused in attention_tuning.c), so its CPU
 * device takes the work-item tiles of unknown devices, which fit its 32 KiB
 * of local memory. */
static const db_arch cpu_archs[] = {
    { .name = "rusticl", .devices = DEFAULT_ONLY(other_default) },
    { .name = NULL, .devices = DEFAULT_ONLY(cpu_default) },
};
static const db_arch other_archs[] = {
    { .name = NULL, .devices = DEFAULT_ONLY(other_default) },
};

static const db_vendor vendors[] = {
    { .vendor = PFX_VENDOR_NVIDIA, .name = "nvidia", .archs = nvidia_archs },
    { .vendor = PFX_VENDOR_AMD, .name = "amd", .archs = amd_archs },
    { .vendor = PFX_VENDOR_INTEL_GPU, .name = "intel", .archs = intel_archs },
    { .vendor = PFX_VENDOR_CPU, .name = "cpu", .archs = cpu_archs },
    { .vendor = PFX_VENDOR_OTHER, .name = "other", .archs = other_archs }, /* the default */
};
#define VENDOR_COUNT (sizeof(vendors) / sizeof(vendors[0]))

const pfx_attn_tuning *pfx_attn_tuning_lookup(pfx_vendor vendor, const pfx_device_info *info,
                                              const char **path)
{
    static __thread char where[160];
    const db_vendor *v = &vendors[VENDOR_COUNT - 1];
    for (size_t i = 0; i < VENDOR_COUNT; i++)
        if (vendors[i].vendor == vendor)
            v = &vendors[i];
    const char *arch_text = "";
    if (info)
        arch_text = info->type == PFX_DEVICE_CPU ? info->platform_name : info->device_name;
    /* the entry whose name matches, else the level's default (name NULL, last) */
    const db_arch *a = v->archs;
    while (a->name && !(info && pfx_contains_nocase(arch_text, a->name)))
        a++;
    const db_device *d = a->devices;
    while (d->name && !(info && pfx_contains_nocase(info->device_name, d->name)))
        d++;
    if (path) {
        snprintf(where, sizeof(where), "%s/%s/%s", v->name, a->name ? a->name : "default",
                 d->name ? d->name : "default");
        *path = where;
    }
    return d->params;
}
