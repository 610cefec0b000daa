/*
 * The tuning database of the attention kernels (cl/attention_fwd.cl,
 * cl/attention_bwd.cl): tile choices of the forward and the backward in one
 * vocabulary, looked up by vendor, then architecture, then device name (a
 * default at every level, as in CLBlast's database), and a user override
 * (pfx_runtime_params.kernel_tuning, $PREFIXCL_TUNING or <cache>/tuning.txt).
 *
 * Every field is a -D option of the kernel with the prefix PFX_ATTN_
 * (PFX_ATTN_BLOCK_M, ...), so the override text, the option sets that
 * `prefixcl kernel-configs` prints and the kernels use the same names.
 * Used by the ops and by the registry (warm-up, kernel-configs, the compile
 * gate), so that they build exactly the option sets the ops may choose.
 */
#ifndef PFX_OPS_ATTENTION_TUNING_H
#define PFX_OPS_ATTENTION_TUNING_H

#include "registry.h"

/* Head-size classes (compile-time HEAD_DIM), shared by forward and backward;
 * the runtime D runs up to its class. */
#define PFX_ATTN_MAX_D       256
#define PFX_ATTN_CLASS_COUNT 5
extern const unsigned pfx_attn_classes[PFX_ATTN_CLASS_COUNT]; /* 16, 32, 64, 128, 256 */

/* Smallest class >= D; 0 when D > PFX_ATTN_MAX_D. */
unsigned pfx_attn_dim_class(size_t D);

typedef struct pfx_attn_fwd_tiles {
    unsigned head_dim;  /* HEAD_DIM: compile-time class >= the runtime D */
    unsigned block_m;   /* BLOCK_M: rows per work-group */
    unsigned block_n;   /* BLOCK_N: keys per K/V tile */
    unsigned ksplit;    /* KSPLIT: work-items per row (interleaved keys) */
    unsigned kv_pad;    /* KV_PAD: local row padding */
    unsigned q_local;   /* Q_LOCAL: scaled q tile in local memory */
    unsigned poly_exp2; /* POLY_EXP2: polynomial exp2 (vectorizable on CPUs) */
    unsigned vec;       /* VEC: 1, the GPU path; 4, 8 or 16, the CPU path with that float
                         * vector width (PFX_ATTN_VEC_NATIVE in the database) */
} pfx_attn_fwd_tiles;

/* Database value of pfx_attn_fwd_tiles.vec: the CPU path at the device's
 * native float vector width (pfx_attn_cpu_vec). */
#define PFX_ATTN_VEC_NATIVE 0
/* The CPU path's vector width for a device's native float width (16, 8, else 4). */
unsigned pfx_attn_cpu_vec(unsigned native_float_width);

typedef struct pfx_attn_bwd_tiles {
    unsigned head_dim; /* HEAD_DIM: compile-time class >= the runtime D */
    unsigned block_m;  /* BLOCK_M: query rows per tile */
    unsigned block_n;  /* BLOCK_N: keys per tile */
    unsigned dsplit;   /* DSPLIT: work-items sharing a row's head dimensions (GPU path) */
    unsigned vec;      /* VEC: 1, the GPU path; 4, 8 or 16, the CPU path with that float
                         * vector width (PFX_ATTN_VEC_NATIVE in the database) */
} pfx_attn_bwd_tiles;

/* The parameters of one database entry. */
typedef struct pfx_attn_tuning {
    pfx_attn_fwd_tiles fwd[PFX_ATTN_CLASS_COUNT];    /* forward, per class */
    pfx_attn_fwd_tiles decode[PFX_ATTN_CLASS_COUNT]; /* forward, <= decode_rows rows per kv head */
    pfx_attn_bwd_tiles bwd[PFX_ATTN_CLASS_COUNT];    /* backward, per class */
    unsigned decode_rows;   /* rows per kv head (group * N) that take the decode tiles */
    unsigned groups_per_cu; /* forward work-groups wanted per compute unit before split-K stops */
} pfx_attn_tuning;

/* The database entry of a device (vendor family, then architecture, then
 * device name); *path (may be NULL) names the entry, "nvidia/default/default". */
const pfx_attn_tuning *pfx_attn_tuning_lookup(pfx_vendor vendor, const pfx_device_info *info,
                                              const char **path);

/* Local memory bytes and work-group sizes of a tile choice. */
size_t pfx_attn_fwd_local_bytes(const pfx_attn_fwd_tiles *t);
size_t pfx_attn_fwd_wg_size(const pfx_attn_fwd_tiles *t);
size_t pfx_attn_bwd_local_bytes(const pfx_attn_bwd_tiles *t);
size_t pfx_attn_bwd_wg_dkv(const pfx_attn_bwd_tiles *t);
size_t pfx_attn_bwd_wg_dq(const pfx_attn_bwd_tiles *t);

/* Database tiles for a head-size class, shrunk until they fit
 * local_mem_bytes; false when nothing fits. native_float_width resolves
 * PFX_ATTN_VEC_NATIVE (the device's CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT). */
bool pfx_attn_fwd_tiles_for(const pfx_attn_tuning *db, uint64_t local_mem_bytes,
                            unsigned native_float_width, unsigned dim_class, bool decode,
                            pfx_attn_fwd_tiles *out);
bool pfx_attn_bwd_tiles_for(const pfx_attn_tuning *db, uint64_t local_mem_bytes,
                            unsigned native_float_width, unsigned dim_class,
                            pfx_attn_bwd_tiles *out);

/* The -D options of a tile choice. */
void pfx_attn_fwd_options(const pfx_attn_fwd_tiles *t, char *buf, size_t cap);
void pfx_attn_bwd_options(const pfx_attn_bwd_tiles *t, char *buf, size_t cap);

/* ---- the user override ----
 * Text: lines (or ';'-separated parts) "<program> NAME=VALUE ...", program
 * attention_fwd or attention_bwd, NAME a field above with or without the
 * "-DPFX_ATTN_" prefix (so a line of `prefixcl kernel-configs` output, program
 * and options, is a valid line); '#' starts a comment. A line that gives
 * HEAD_DIM applies to head sizes D <= HEAD_DIM (the smallest such line wins)
 * and compiles that class; a line without applies to the other head sizes.
 * Fields not given keep the database's value. The tiles are then used as
 * they are (no shrinking): an op refuses, naming the reason, tiles that the
 * device cannot hold. */
#define PFX_ATTN_OVERRIDE_LINES 8

typedef struct pfx_attn_override_line {
    bool bwd;      /* attention_bwd, else attention_fwd */
    unsigned mask; /* bit f: field f given */
    unsigned values[16];
} pfx_attn_override_line;

typedef struct pfx_attn_override {
    size_t count;
    pfx_attn_override_line lines[PFX_ATTN_OVERRIDE_LINES];
    char source[1100]; /* where it came from: "params", "$PREFIXCL_TUNING", a file path */
    char text[1024];   /* the text, normalized: one line per override, options spelled out */
} pfx_attn_override;

/* The vocabulary: each field's option name (without PFX_ATTN_) and place. */
typedef struct pfx_attn_field {
    const char *name;
    size_t offset;
} pfx_attn_field;
#define PFX_ATTN_FWD_FIELDS 8
#define PFX_ATTN_BWD_FIELDS 5
extern const pfx_attn_field pfx_attn_fwd_fields[PFX_ATTN_FWD_FIELDS];
extern const pfx_attn_field pfx_attn_bwd_fields[PFX_ATTN_BWD_FIELDS];
unsigned *pfx_attn_field_at(void *tiles, const pfx_attn_field *f);

/* dim_class is one of pfx_attn_classes. */
bool pfx_attn_is_class(unsigned dim_class);

/* The line of o (may be NULL) for head size D: the smallest HEAD_DIM that
 * holds D, else a line without HEAD_DIM; NULL when none applies. */
const pfx_attn_override_line *pfx_attn_override_for(const pfx_attn_override *o, bool bwd, size_t D);
/* Sets the fields the line gives in tiles (pfx_attn_bwd_tiles when bwd). */
void pfx_attn_override_apply(void *tiles, bool bwd, const pfx_attn_override_line *l);

/* Parses text; on error returns PFX_ERROR_INVALID_ARGUMENT with a message
 * (for rt, or the thread when rt is NULL) naming the part at fault. */
pfx_status pfx_attn_override_parse(pfx_runtime *rt, const char *text, const char *source,
                                   pfx_attn_override *out);

/* The override a runtime with these settings uses: params_text if not NULL,
 * else $PREFIXCL_TUNING if set, else <cache_dir>/tuning.txt if it exists
 * (cache_dir may be "" or NULL). out->count is 0 when there is none. */
pfx_status pfx_attn_override_load(pfx_runtime *rt, const char *params_text, const char *cache_dir,
                                  pfx_attn_override *out);

/* Test-only (and documented as such): replaces the override of rt, the way
 * pfx_runtime_params.kernel_tuning sets it at creation; NULL or "" removes
 * it. The test suites force every configuration of the registry with it. */
pfx_status pfx_attn_override_set(pfx_runtime *rt, const char *text);

/* ---- what the ops use ----
 * Tiles for head size D on rt's device: database, then override; on failure
 * returns PFX_ERROR_UNSUPPORTED with a message (prefixed by op) that says
 * why (local memory, work-group size). */
pfx_status pfx_attn_fwd_select(pfx_runtime *rt, const char *op, size_t D, size_t rows_per_kv_head,
                               pfx_attn_fwd_tiles *out);
pfx_status pfx_attn_bwd_select(pfx_runtime *rt, const char *op, size_t D, pfx_attn_bwd_tiles *out);

/* Split-K plan: number of key ranges and keys per range (a multiple of
 * block_n) for rows_per_kv_head rows of every (item, kv head). */
size_t pfx_attn_fwd_splits(const pfx_attn_tuning *db, unsigned compute_units,
                           const pfx_attn_fwd_tiles *t, size_t batch, size_t kv_heads,
                           size_t rows_per_kv_head, size_t keys, size_t *keys_per_split);

/* Appends every forward and backward configuration of the database entry to
 * out (registry). */
/* Appends (program, options) to out unless out[first..*n) has it. */
void pfx_attn_add_unique(pfx_program_config *out, size_t cap, size_t *n, size_t first,
                         const char *program, const char *options);

/* native_float_width 0: every width the CPU path may take (8 and 16). */
void pfx_attn_add_configs(const pfx_attn_tuning *db, uint64_t local_mem_bytes,
                          unsigned native_float_width, pfx_program_config *out, size_t cap,
                          size_t *n);

#endif
