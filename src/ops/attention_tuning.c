/*
 * Tile tables of the attention forward per vendor family (see
 * attention_tuning.h and the design comment in cl/attention_fwd.cl).
 *
 * PoCL on CPU (measured, see bench/README.md): one work-item per row
 * (KSPLIT 1) so that every K/V read is a broadcast, the tile loops fully
 * unrolled (PoCL vectorizes the work-item loop only when it is innermost),
 * a polynomial exp2 (the libm call does not vectorize). Local memory is
 * plentiful (1 MiB) and only 2 to a few compute units exist.
 *
 * GPUs (not measured in this session, reasoned defaults):
 * NVIDIA: 48 KiB local, warps of 32, no sub-groups or fp16 needed. KSPLIT
 * work-items share a row and take interleaved keys (padding 1 keeps their
 * strided local reads conflict-free); the scaled q tile lives in local
 * memory for D >= 96 so that a work-item holds only acc[D] in registers.
 * Decode: 8 rows (the query heads of a kv head x N) x 32 work-items, and
 * split-K across work-groups fills the 132 SMs of an H200.
 * AMD: 64 KiB LDS, wave 64; work-groups of 128/256. Intel: 64 KiB SLM,
 * SIMD16/32; work-groups of 128.
 */
#include <stdio.h>
#include <string.h>

#include "attention_tuning.h"

/* Few classes (compile time on PoCL): the kernel's head-dimension loops
 * run to the runtime D where they are not unrolled. */
static const unsigned dim_classes[] = { 64, 128, 256 };
#define DIM_CLASS_COUNT (sizeof(dim_classes) / sizeof(dim_classes[0]))

unsigned pfx_attn_fwd_dim_class(size_t D)
{
    for (size_t c = 0; c < DIM_CLASS_COUNT; c++)
        if (D <= dim_classes[c])
            return dim_classes[c];
    return 0;
}

size_t pfx_attn_fwd_wg_size(const pfx_attn_fwd_tiles *t)
{
    return (size_t)t->block_m / t->vec * t->ksplit;
}

size_t pfx_attn_fwd_local_bytes(const pfx_attn_fwd_tiles *t)
{
    size_t stride = t->head_dim + t->kv_pad;
    size_t floats = 2 * (size_t)t->block_n * stride;
    if (t->vec == 1) /* q tile, logits and probabilities */
        floats += (size_t)t->block_m * stride + 2 * (size_t)t->block_m * (t->block_n + 1);
    return floats * sizeof(float);
}

unsigned pfx_attn_fwd_decode_rows(pfx_vendor vendor)
{
    (void)vendor;
    return 8;
}

unsigned pfx_attn_fwd_groups_per_cu(pfx_vendor vendor)
{
    switch (vendor) {
    case PFX_VENDOR_CPU: return 2;
    case PFX_VENDOR_NVIDIA:
    case PFX_VENDOR_AMD: return 4;
    default: return 2;
    }
}


static pfx_attn_fwd_tiles table(pfx_vendor vendor, unsigned dc, bool decode)
{
    pfx_attn_fwd_tiles t = { dc, 16, 16, 1, 0, false, true, false, 1, true };
    switch (vendor) {
    case PFX_VENDOR_CPU:
        /* BLOCK_M rows = vector lanes x 2 (AVX-512: 16 floats); BLOCK_N keys
         * = the register block of logits per row. See bench/README.md. */
        t.poly_exp2 = true;
        /* Unrolling D = 256 takes PoCL minutes to compile: loops instead.
         * Decode: unrolled only for D <= 64 (minutes of PoCL compile). */
        t.unroll = decode ? dc <= 64 : dc <= 128;
        /* Explicit SIMD: VEC rows per work-item as float16 lanes (the PoCL
         * work-item vectorizer gave up on this kernel: 2 GFLOP/s). Measured
         * on (a), B=1 H=8 N=M=1024 P=32 D=64, PoCL 2 cores, GFLOP/s
         * (BLOCK_M, BLOCK_N, VEC): (16,16,16) 15, (32,16,16) 14,
         * (32,32,16) 21, (64,16,16) 23, (64,32,16) 40, (64,64,16) 21,
         * (128,16,16) 25, (128,32,16) 24, (64,16,8) 12: 64 x 32 keeps the
         * 32 logit vectors and the 16-wide broadcast FMAs busiest. Large
         * head sizes take 16-key tiles (register pressure, compile time).
         * Decode: 8 rows (the heads of a kv head x N) in one float8. */
        t.block_m = decode ? 8 : 64;
        t.block_n = decode ? 32 : dc <= 64 ? 32 : 16;
        t.vec = decode ? 8 : 16;
        t.unroll_d = dc <= 64;
        break;
    case PFX_VENDOR_NVIDIA:
    case PFX_VENDOR_AMD:
    case PFX_VENDOR_INTEL_GPU:
        /* KSPLIT work-items per row, each owning HEAD_DIM / KSPLIT output
         * dims (<= 16 accumulators) and BLOCK_N / KSPLIT logits; q in local
         * memory. Gate (tests/kernel_gate.py): no spills on sm_80/90,
         * gfx90a/1030/1100, xe-lp/xe-hpg. Work-groups of 128 on Intel, 256
         * on NVIDIA/AMD. */
        t.kv_pad = 1;
        t.q_local = true;
        t.unroll = true;
        if (decode) {
            t.block_m = 8;
            t.ksplit = 16;
            t.block_n = 64;
        } else {
            t.ksplit = dc <= 128 ? 8 : 16;
            t.block_m = (vendor == PFX_VENDOR_INTEL_GPU ? 128 : 256) / t.ksplit;
            t.block_n = 32;
        }
        break;
    default:
        /* Unknown device: small, conservative, no unrolling. */
        t.unroll = false;
        t.block_m = decode ? 8 : 16;
        t.block_n = 16;
        t.q_local = true;
        break;
    }
    return t;
}

bool pfx_attn_fwd_tiles_for(pfx_vendor vendor, uint64_t local_mem_bytes, unsigned dim_class,
                            bool decode, pfx_attn_fwd_tiles *out)
{
    pfx_attn_fwd_tiles t = table(vendor, dim_class, decode);
    /* Shrink the key tile, then the row tile, until local memory holds it. */
    while (pfx_attn_fwd_local_bytes(&t) > local_mem_bytes) {
        if (t.block_n > t.ksplit && t.block_n > 8)
            t.block_n /= 2;
        else if (t.block_m > 1)
            t.block_m /= 2;
        else
            return false;
        if (t.ksplit > 1 && t.block_n < t.ksplit)
            t.ksplit = t.block_n;
    }
    *out = t;
    return true;
}

void pfx_attn_fwd_options(const pfx_attn_fwd_tiles *t, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "-DHEAD_DIM=%u -DBLOCK_M=%u -DBLOCK_N=%u -DKSPLIT=%u -DKV_PAD=%u -DQ_LOCAL=%d "
             "-DUNROLL=%d -DPOLY_EXP2=%d -DVEC=%u -DUNROLL_D=%d",
             t->head_dim, t->block_m, t->block_n, t->ksplit, t->kv_pad, t->q_local ? 1 : 0,
             t->unroll ? 1 : 0, t->poly_exp2 ? 1 : 0, t->vec, t->unroll_d ? 1 : 0);
}

void pfx_attn_fwd_add_configs(pfx_vendor vendor, uint64_t local_mem_bytes,
                              pfx_program_config *out, size_t cap, size_t *n)
{
    char seen[2 * DIM_CLASS_COUNT][PFX_OPTIONS_MAX];
    size_t seen_count = 0;
    for (size_t c = 0; c < DIM_CLASS_COUNT; c++)
        for (int decode = 0; decode < 2; decode++) {
            pfx_attn_fwd_tiles t;
            if (!pfx_attn_fwd_tiles_for(vendor, local_mem_bytes, dim_classes[c], decode, &t))
                continue;
            char options[PFX_OPTIONS_MAX];
            pfx_attn_fwd_options(&t, options, sizeof(options));
            bool dup = false;
            for (size_t s = 0; s < seen_count && !dup; s++)
                dup = !strcmp(seen[s], options);
            if (dup)
                continue;
            memcpy(seen[seen_count++], options, sizeof(options));
            if (*n < cap) {
                out[*n].program = "attention_fwd";
                snprintf(out[*n].options, sizeof(out[*n].options), "%s", options);
            }
            (*n)++;
        }
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

size_t pfx_attn_fwd_splits(pfx_vendor vendor, unsigned compute_units, const pfx_attn_fwd_tiles *t,
                           size_t batch, size_t kv_heads, size_t rows_per_kv_head, size_t keys,
                           size_t *keys_per_split)
{
    /* Cut the key range when the row tiles alone do not fill the device;
     * each split keeps at least two key tiles. */
    const size_t base_groups = ceil_div(rows_per_kv_head, t->block_m) * kv_heads * batch;
    const size_t key_tiles = ceil_div(keys, t->block_n);
    const size_t target = (size_t)(compute_units ? compute_units : 1) *
                          pfx_attn_fwd_groups_per_cu(vendor);
    size_t splits = 1;
    if (base_groups < target && key_tiles >= 4) {
        splits = ceil_div(target, base_groups);
        if (splits > key_tiles / 2)
            splits = key_tiles / 2;
        if (splits > 256)
            splits = 256;
    }
    *keys_per_split = ceil_div(key_tiles, splits) * t->block_n;
    return ceil_div(keys, *keys_per_split);
}
