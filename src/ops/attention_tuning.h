/*
 * Tile choices of the attention forward (cl/attention_fwd.cl) per vendor
 * family. Used by the op (src/ops/attention_forward.c) and by the registry,
 * so warm-up, `prefixcl kernel-configs` and the compile gate build exactly
 * the option sets the op may choose.
 */
#ifndef PFX_OPS_ATTENTION_TUNING_H
#define PFX_OPS_ATTENTION_TUNING_H

#include "registry.h"

/* Largest head size the forward handles (compile-time classes up to it). */
#define PFX_ATTN_FWD_MAX_D 256

typedef struct pfx_attn_fwd_tiles {
    unsigned head_dim;  /* compile-time class >= the runtime D */
    unsigned block_m;   /* rows per work-group */
    unsigned block_n;   /* keys per K/V tile */
    unsigned ksplit;    /* work-items per row (interleaved keys) */
    unsigned kv_pad;    /* local row padding */
    bool q_local;       /* scaled q tile in local memory */
    bool unroll;        /* fully unrolled tile loops */
    bool poly_exp2;     /* polynomial exp2 (vectorizable on CPUs) */
    unsigned vec;       /* rows per work-item as vector lanes (CPU), 1 otherwise */
    bool unroll_d;      /* VEC path: unroll the head-dimension loops too */
} pfx_attn_fwd_tiles;

/* Head-size class for D: 32, 64, 80, 96, 128, 256; 0 when D > 256. */
unsigned pfx_attn_fwd_dim_class(size_t D);

/* Local memory bytes and work-group size of a tile choice. */
size_t pfx_attn_fwd_local_bytes(const pfx_attn_fwd_tiles *t);
size_t pfx_attn_fwd_wg_size(const pfx_attn_fwd_tiles *t);

/* Tiles for a vendor, head-size class and shape kind (decode: few rows per
 * kv head), shrunk until they fit local_mem_bytes (work-groups stay <= 256
 * work-items). false when nothing fits. */
bool pfx_attn_fwd_tiles_for(pfx_vendor vendor, uint64_t local_mem_bytes, unsigned dim_class,
                            bool decode, pfx_attn_fwd_tiles *out);

/* Rows per kv head (group * N) at or below which the decode tiles are used. */
unsigned pfx_attn_fwd_decode_rows(pfx_vendor vendor);

/* Work-groups wanted in flight per compute unit before split-K stops. */
unsigned pfx_attn_fwd_groups_per_cu(pfx_vendor vendor);

/* Split-K plan: number of key ranges and keys per range (a multiple of
 * block_n) for rows_per_kv_head rows of every (item, kv head). */
size_t pfx_attn_fwd_splits(pfx_vendor vendor, unsigned compute_units, const pfx_attn_fwd_tiles *t,
                           size_t batch, size_t kv_heads, size_t rows_per_kv_head, size_t keys,
                           size_t *keys_per_split);

void pfx_attn_fwd_options(const pfx_attn_fwd_tiles *t, char *buf, size_t cap);

/* Appends every forward configuration of the vendor to out (registry). */
void pfx_attn_fwd_add_configs(pfx_vendor vendor, uint64_t local_mem_bytes,
                              pfx_program_config *out, size_t cap, size_t *n);

#endif
