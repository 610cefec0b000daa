/*
 * Attention backward (cl/attention_bwd.cl): tile sizes per vendor family and
 * head-size bucket. One function, so the op and the registry (warm-up,
 * `prefixcl kernel-configs`, the compile gate) agree on the option sets.
 */
#ifndef PFX_OPS_ATTENTION_BACKWARD_H
#define PFX_OPS_ATTENTION_BACKWARD_H

#include "internal.h"

typedef struct pfx_attn_bwd_tiles {
    unsigned bq;    /* query rows per tile (PFX_BQ) */
    unsigned bk;    /* keys per tile (PFX_BK) */
    unsigned dt;    /* work-items sharing a row's D dimensions (PFX_DT) */
    unsigned dmax;  /* head size bucket (PFX_DMAX), D <= dmax */
    size_t local_bytes;
    unsigned vec;   /* CPU path (PFX_CPU_VEC): rows or keys per work-item as
                     * float vector lanes; 0 on GPUs (option unset) */
} pfx_attn_bwd_tiles;

/* Work-items per group of the dK/dV and dQ kernels. */
size_t pfx_attn_bwd_wg_dkv(const pfx_attn_bwd_tiles *t);
size_t pfx_attn_bwd_wg_dq(const pfx_attn_bwd_tiles *t);

/* Head-size buckets the kernels are built for (D is a run-time argument up to
 * the bucket): 32, 64, 128, 256. */
#define PFX_ATTN_BWD_BUCKETS 4
extern const unsigned pfx_attn_bwd_buckets[PFX_ATTN_BWD_BUCKETS];

/* Tiles for head size D on a device of this family with this much local
 * memory; false when even the smallest tiles do not fit (or D > 256). */
bool pfx_attn_bwd_tiles_for(pfx_vendor vendor, uint64_t local_mem_bytes, size_t D,
                            pfx_attn_bwd_tiles *out);

/* The -D options of a tile choice. */
void pfx_attn_bwd_options(const pfx_attn_bwd_tiles *t, char *buf, size_t cap);

/* Tests only: run the op with these tiles instead of the device's (NULL:
 * back to the defaults), so every vendor's option set can be checked for
 * correctness on PoCL. Not thread-safe; not part of the public API. */
void pfx_attn_bwd_override_tiles(const pfx_attn_bwd_tiles *tiles);

#endif
