/*
 * The attention tuning database (see attention_tuning.h): sizes, fit to the
 * device, option text and kernel rules, the choice the ops make; the user
 * override is read in attention_override.c. The entries themselves are in
 * attention_tuning_db.c; the sweeps behind them are in bench/README.md.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "attention_tuning.h"
#include "device.h"

const unsigned pfx_attn_classes[PFX_ATTN_CLASS_COUNT] = { 16, 32, 64, 128, 256 };

static int class_index(unsigned dim_class)
{
    for (int c = 0; c < PFX_ATTN_CLASS_COUNT; c++)
        if (pfx_attn_classes[c] == dim_class)
            return c;
    return -1;
}

bool pfx_attn_is_class(unsigned dim_class)
{
    return class_index(dim_class) >= 0;
}

unsigned pfx_attn_dim_class(size_t D)
{
    for (int c = 0; c < PFX_ATTN_CLASS_COUNT; c++)
        if (D <= pfx_attn_classes[c])
            return pfx_attn_classes[c];
    return 0;
}

/* ---- sizes ---- */

size_t pfx_attn_fwd_wg_size(const pfx_attn_fwd_tiles *t)
{
    return t->vec > 1 ? 1 : (size_t)t->block_m * t->ksplit; /* the CPU path: one */
}

size_t pfx_attn_fwd_local_bytes(const pfx_attn_fwd_tiles *t)
{
    size_t bm = t->block_m, bn = t->block_n, dm = t->head_dim;
    if (t->vec > 1) /* as cl/attention_fwd.cpu.cl: q and O, K^T and V, logits, 5 per row */
        return sizeof(float) * (2 * bm * dm + 2 * bn * dm + bm * bn + 5 * bm);
    size_t stride = dm + t->kv_pad; /* K, V; q tile, logits and probabilities */
    return sizeof(float) * (2 * bn * stride + bm * stride + 2 * bm * (bn + 1));
}

size_t pfx_attn_bwd_local_bytes(const pfx_attn_bwd_tiles *t)
{
    /* as BWD_LOCALS in cl/attention_bwd.gpu.cl: K~, V~ and Q, dO tiles (rows
     * padded to HEAD_DIM + 1, or transposed with BLOCK_N + 1 / BLOCK_M + 1),
     * two score tiles, LSE and Delta */
    size_t dm = t->head_dim, bq = t->block_m, bk = t->block_n;
    if (t->vec > 1) { /* as cl/attention_bwd.cpu.cl: the largest, the single pass or dq */
        size_t dkvq = 5 * dm * bk + 2 * bq * dm + 3 * bq * bk + 2 * bq;
        size_t dq = 2 * dm * bk + 3 * bq * dm + 2 * bq * bk + 2 * bq;
        return sizeof(float) * (dkvq > dq ? dkvq : dq);
    }
    size_t ksz = bk * (dm + 1) > dm * (bk + 1) ? bk * (dm + 1) : dm * (bk + 1);
    size_t qsz = bq * (dm + 1) > dm * (bq + 1) ? bq * (dm + 1) : dm * (bq + 1);
    return sizeof(float) * (2 * ksz + 2 * qsz + 2 * bq * bk + 2 * bq);
}

size_t pfx_attn_bwd_wg_dkv(const pfx_attn_bwd_tiles *t)
{
    return t->vec > 1 ? 1 : (size_t)t->block_n * t->dsplit; /* the CPU path: one */
}

size_t pfx_attn_bwd_wg_dq(const pfx_attn_bwd_tiles *t)
{
    return t->vec > 1 ? 1 : (size_t)t->block_m * t->dsplit;
}

/* ---- database tiles, fitted ---- */

unsigned pfx_attn_cpu_vec(unsigned native_float_width)
{
    return native_float_width >= 16 ? 16 : native_float_width >= 8 ? 8 : 4;
}

/* A database VEC with PFX_ATTN_VEC_NATIVE resolved. */
static unsigned resolved_vec(unsigned vec, unsigned native_float_width)
{
    return vec == PFX_ATTN_VEC_NATIVE ? pfx_attn_cpu_vec(native_float_width) : vec;
}

/* The CPU path's smallest tile side: whole vectors and register blocks of 8. */
static unsigned cpu_min_tile(unsigned vec)
{
    return vec > 8 ? vec : 8;
}

/* The database entry of a class with its vector width resolved. */
static pfx_attn_fwd_tiles fwd_entry(const pfx_attn_tuning *db, int c, bool decode,
                                    unsigned native_float_width)
{
    pfx_attn_fwd_tiles t = decode ? db->decode[c] : db->fwd[c];
    t.vec = resolved_vec(t.vec, native_float_width);
    return t;
}

bool pfx_attn_fwd_tiles_for(const pfx_attn_tuning *db, uint64_t local_mem_bytes,
                            unsigned native_float_width, unsigned dim_class, bool decode,
                            pfx_attn_fwd_tiles *out)
{
    int c = class_index(dim_class);
    if (c < 0)
        return false;
    pfx_attn_fwd_tiles t = fwd_entry(db, c, decode, native_float_width);
    /* Shrink the key tile, then the row tile, until local memory holds it
     * (the CPU path keeps whole vectors of keys and register blocks of 8
     * rows). */
    const unsigned min_n = t.vec > 1 ? cpu_min_tile(t.vec) : 8, min_m = t.vec > 1 ? 8 : 1;
    while (pfx_attn_fwd_local_bytes(&t) > local_mem_bytes) {
        if (t.block_n > t.ksplit && t.block_n > min_n)
            t.block_n /= 2;
        else if (t.block_m > min_m)
            t.block_m /= 2;
        else
            return false;
        if (t.ksplit > 1 && t.block_n < t.ksplit)
            t.ksplit = t.block_n;
    }
    *out = t;
    return true;
}

static pfx_attn_bwd_tiles bwd_entry(const pfx_attn_tuning *db, int c, unsigned native_float_width)
{
    pfx_attn_bwd_tiles t = db->bwd[c];
    t.vec = resolved_vec(t.vec, native_float_width);
    return t;
}

bool pfx_attn_bwd_tiles_for(const pfx_attn_tuning *db, uint64_t local_mem_bytes,
                            unsigned native_float_width, unsigned dim_class,
                            pfx_attn_bwd_tiles *out)
{
    int c = class_index(dim_class);
    if (c < 0)
        return false;
    pfx_attn_bwd_tiles t = bwd_entry(db, c, native_float_width);
    /* Halve both tiles (the CPU path's keep whole vectors of rows and keys
     * and register blocks of 8) until they fit; when the CPU path's do not
     * (rusticl's 32 KiB at D = 128), take the GPU path, whose tiles go down
     * to 8 x 8. */
    while (pfx_attn_bwd_local_bytes(&t) > local_mem_bytes) {
        const unsigned min_cpu = cpu_min_tile(t.vec);
        if (t.vec > 1 && (t.block_m / 2 < min_cpu || t.block_n / 2 < min_cpu)) {
            t.vec = 1;
            t.dsplit = 1;
            continue;
        }
        if (t.block_m <= 4)
            return false;
        t.block_m /= 2;
        t.block_n /= 2;
    }
    *out = t;
    return true;
}

/* ---- the vocabulary: field names, option text ---- */

#define FWD_FIELD(f, NAME)                                                                         \
    {                                                                                              \
        NAME, offsetof(pfx_attn_fwd_tiles, f)                                                      \
    }
const pfx_attn_field pfx_attn_fwd_fields[PFX_ATTN_FWD_FIELDS] = {
    FWD_FIELD(head_dim, "HEAD_DIM"),   FWD_FIELD(block_m, "BLOCK_M"), FWD_FIELD(block_n, "BLOCK_N"),
    FWD_FIELD(ksplit, "KSPLIT"),       FWD_FIELD(kv_pad, "KV_PAD"),   FWD_FIELD(q_local, "Q_LOCAL"),
    FWD_FIELD(poly_exp2, "POLY_EXP2"), FWD_FIELD(vec, "VEC"),
};
#define BWD_FIELD(f, NAME)                                                                         \
    {                                                                                              \
        NAME, offsetof(pfx_attn_bwd_tiles, f)                                                      \
    }
const pfx_attn_field pfx_attn_bwd_fields[PFX_ATTN_BWD_FIELDS] = {
    BWD_FIELD(head_dim, "HEAD_DIM"), BWD_FIELD(block_m, "BLOCK_M"), BWD_FIELD(block_n, "BLOCK_N"),
    BWD_FIELD(dsplit, "DSPLIT"),     BWD_FIELD(vec, "VEC"),
};
unsigned *pfx_attn_field_at(void *tiles, const pfx_attn_field *f)
{
    return (unsigned *)((char *)tiles + f->offset);
}

static void options_of(const void *tiles, const pfx_attn_field *fields, size_t count, char *buf,
                       size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count && at < cap; i++) {
        int n = snprintf(buf + at, cap - at, "%s-DPFX_ATTN_%s=%u", i ? " " : "", fields[i].name,
                         *pfx_attn_field_at((void *)tiles, &fields[i]));
        if (n < 0)
            break;
        at += (size_t)n;
    }
}

void pfx_attn_fwd_options(const pfx_attn_fwd_tiles *t, char *buf, size_t cap)
{
    options_of(t, pfx_attn_fwd_fields, PFX_ATTN_FWD_FIELDS, buf, cap);
}

void pfx_attn_bwd_options(const pfx_attn_bwd_tiles *t, char *buf, size_t cap)
{
    options_of(t, pfx_attn_bwd_fields, PFX_ATTN_BWD_FIELDS, buf, cap);
}

/* ---- kernel constraints (the #error checks of the kernels) ---- */

static const char *fwd_invalid(const pfx_attn_fwd_tiles *t)
{
    if (class_index(t->head_dim) < 0)
        return "HEAD_DIM must be a head-size class (16, 32, 64, 128 or 256)";
    if (!t->block_m || !t->block_n || !t->ksplit)
        return "BLOCK_M, BLOCK_N and KSPLIT must be positive";
    if (t->vec != 1 && t->vec != 4 && t->vec != 8 && t->vec != 16)
        return "VEC must be 1, 4, 8 or 16";
    if (t->vec > 1 && (t->ksplit != 1 || t->q_local))
        return "VEC > 1 (the CPU path) needs KSPLIT 1 and Q_LOCAL 0";
    /* the register block of cl/attention_fwd.cpu.cl (RB) */
    const unsigned rb = t->vec >= 16 && t->block_m > 8 ? 8 : 4;
    if (t->vec > 1 && (t->head_dim % t->vec || t->block_n % t->vec || t->block_m % rb))
        return "VEC > 1 needs HEAD_DIM and BLOCK_N multiples of VEC and BLOCK_M of 4 "
               "(VEC 4, 8; VEC 16 up to 8 rows) or 8 (VEC 16)";
    if (t->vec > 1 && t->block_m >= 2 * t->vec && t->block_m % (2 * t->vec))
        return "VEC > 1 needs BLOCK_M below 2 VEC or a multiple of 2 VEC";
    if (t->block_n % t->ksplit || t->head_dim % t->ksplit)
        return "BLOCK_N and HEAD_DIM must be multiples of KSPLIT";
    if (t->block_m > 4096 || t->block_n > 4096 || t->kv_pad > 64)
        return "BLOCK_M, BLOCK_N above 4096 or KV_PAD above 64";
    if (t->q_local > 1 || t->poly_exp2 > 1)
        return "Q_LOCAL and POLY_EXP2 are 0 or 1";
    return NULL;
}

static const char *bwd_invalid(const pfx_attn_bwd_tiles *t)
{
    if (class_index(t->head_dim) < 0)
        return "HEAD_DIM must be a head-size class (16, 32, 64, 128 or 256)";
    if (!t->block_m || !t->block_n || !t->dsplit || t->block_m > 4096 || t->block_n > 4096)
        return "BLOCK_M, BLOCK_N and DSPLIT must be in 1..4096";
    if (t->vec != 1 && t->vec != 4 && t->vec != 8 && t->vec != 16)
        return "VEC must be 1 (GPU path), 4, 8 or 16 (CPU path)";
    const unsigned rb = t->vec >= 16 ? 8 : 4; /* the CPU path's register block */
    if (t->vec > 1 && (t->head_dim % t->vec || t->block_m % t->vec || t->block_n % t->vec ||
                       t->block_m % rb || t->block_n % rb))
        return "VEC > 1 needs HEAD_DIM, BLOCK_M and BLOCK_N multiples of VEC and of 4 (VEC 4, "
               "8) or 8 (VEC 16)";
    if (t->head_dim % t->dsplit)
        return "HEAD_DIM must be a multiple of DSPLIT";
    return NULL;
}

/* ---- what the ops use ---- */

static const pfx_attn_tuning *db_of(const pfx_runtime *rt)
{
    return pfx_attn_tuning_lookup(rt->vendor, &rt->info, NULL);
}

static pfx_status unsupported(pfx_runtime *rt, const char *op, size_t D, const char *what,
                              size_t need, size_t have, const char *options)
{
    return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                     "%s: desc.head_dim %zu: the tiles (%s) need %zu %s, the device has %zu", op, D,
                     options, need, what, have);
}

/* The CPU paths (VEC > 1) are refused on Mesa's rusticl: Mesa 22.3's
 * llvmpipe computes their vector fma() wrong (the forward with mad() passes
 * there; PoCL computes them right), so its database entry takes the
 * work-item path. NULL when allowed, else the reason. */
static const char *cpu_path_refused(const pfx_runtime *rt, unsigned vec)
{
    if (vec > 1 && pfx_contains_nocase(rt->info.platform_name, "rusticl"))
        return "the CPU path (VEC > 1) is not used on Mesa's rusticl, whose vector fma() gives "
               "wrong results";
    return NULL;
}

pfx_status pfx_attn_fwd_select(pfx_runtime *rt, const char *op, size_t D, size_t rows_per_kv_head,
                               pfx_attn_fwd_tiles *out)
{
    const pfx_attn_tuning *db = db_of(rt);
    unsigned dc = pfx_attn_dim_class(D);
    if (!dc)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.head_dim %zu is above the largest supported head size %d", op, D,
                         PFX_ATTN_MAX_D);
    const bool decode = rows_per_kv_head <= db->decode_rows;
    const pfx_attn_override_line *l = pfx_attn_override_for(rt->attn_override, false, D);
    pfx_attn_fwd_tiles t;
    char options[PFX_OPTIONS_MAX];
    if (l) {
        t = fwd_entry(db, class_index(dc), decode, rt->info.native_float_width);
        pfx_attn_override_apply(&t, false, l);
        pfx_attn_fwd_options(&t, options, sizeof(options));
        const char *bad = fwd_invalid(&t);
        if (bad)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: kernel tuning (%s): %s (%s)", op,
                             rt->attn_override->source, bad, options);
        if (pfx_attn_fwd_local_bytes(&t) > rt->info.local_mem_bytes)
            return unsupported(rt, op, D, "bytes of local memory", pfx_attn_fwd_local_bytes(&t),
                               (size_t)rt->info.local_mem_bytes, options);
    } else if (!pfx_attn_fwd_tiles_for(db, rt->info.local_mem_bytes, rt->info.native_float_width,
                                       dc, decode, &t)) {
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.head_dim %zu needs more local memory than the device has "
                         "(%llu bytes)",
                         op, D, (unsigned long long)rt->info.local_mem_bytes);
    }
    pfx_attn_fwd_options(&t, options, sizeof(options));
    const char *refused = cpu_path_refused(rt, t.vec);
    if (refused)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "%s: desc.head_dim %zu: the tiles (%s): %s", op,
                         D, options, refused);
    if (pfx_attn_fwd_wg_size(&t) > rt->info.max_work_group_size)
        return unsupported(rt, op, D, "work-items per group", pfx_attn_fwd_wg_size(&t),
                           rt->info.max_work_group_size, options);
    *out = t;
    return PFX_SUCCESS;
}

pfx_status pfx_attn_bwd_select(pfx_runtime *rt, const char *op, size_t D, pfx_attn_bwd_tiles *out)
{
    const pfx_attn_tuning *db = db_of(rt);
    unsigned dc = pfx_attn_dim_class(D);
    pfx_attn_bwd_tiles t;
    char options[PFX_OPTIONS_MAX];
    const pfx_attn_override_line *l = pfx_attn_override_for(rt->attn_override, true, D);
    if (!dc)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.head_dim %zu is above the largest supported head size %d", op, D,
                         PFX_ATTN_MAX_D);
    if (l) {
        t = bwd_entry(db, class_index(dc), rt->info.native_float_width);
        pfx_attn_override_apply(&t, true, l);
        pfx_attn_bwd_options(&t, options, sizeof(options));
        const char *bad = bwd_invalid(&t);
        if (bad)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: kernel tuning (%s): %s (%s)", op,
                             rt->attn_override->source, bad, options);
        if (pfx_attn_bwd_local_bytes(&t) > rt->info.local_mem_bytes)
            return unsupported(rt, op, D, "bytes of local memory", pfx_attn_bwd_local_bytes(&t),
                               (size_t)rt->info.local_mem_bytes, options);
    } else if (!pfx_attn_bwd_tiles_for(db, rt->info.local_mem_bytes, rt->info.native_float_width,
                                       dc, &t)) {
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.head_dim %zu is beyond what the backward kernels hold in this "
                         "device's %llu bytes of local memory",
                         op, D, (unsigned long long)rt->info.local_mem_bytes);
    }
    pfx_attn_bwd_options(&t, options, sizeof(options));
    const char *refused = cpu_path_refused(rt, t.vec);
    if (refused)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "%s: desc.head_dim %zu: the tiles (%s): %s", op,
                         D, options, refused);
    size_t wg = pfx_attn_bwd_wg_dkv(&t) > pfx_attn_bwd_wg_dq(&t) ? pfx_attn_bwd_wg_dkv(&t)
                                                                 : pfx_attn_bwd_wg_dq(&t);
    if (wg > rt->info.max_work_group_size)
        return unsupported(rt, op, D, "work-items per group", wg, rt->info.max_work_group_size,
                           options);
    *out = t;
    return PFX_SUCCESS;
}

size_t pfx_attn_fwd_splits(const pfx_attn_tuning *db, unsigned compute_units,
                           const pfx_attn_fwd_tiles *t, size_t batch, size_t kv_heads,
                           size_t rows_per_kv_head, size_t keys, size_t *keys_per_split)
{
    /* Cut the key range when the row tiles alone do not fill the device;
     * each split keeps at least two key tiles. */
    const size_t base_groups = pfx_ceil_div(rows_per_kv_head, t->block_m) * kv_heads * batch;
    const size_t key_tiles = pfx_ceil_div(keys, t->block_n);
    const size_t target = (size_t)(compute_units ? compute_units : 1) * db->groups_per_cu;
    size_t splits = 1;
    if (base_groups < target && key_tiles >= 4) {
        splits = pfx_ceil_div(target, base_groups);
        if (splits > key_tiles / 2)
            splits = key_tiles / 2;
        if (splits > 256)
            splits = 256;
    }
    *keys_per_split = pfx_ceil_div(key_tiles, splits) * t->block_n;
    return pfx_ceil_div(keys, *keys_per_split);
}

/* ---- the registry's view ---- */

void pfx_attn_add_unique(pfx_program_config *out, size_t cap, size_t *n, size_t first,
                         const char *program, const char *options)
{
    for (size_t s = first; s < *n && s < cap; s++)
        if (!strcmp(out[s].program, program) && !strcmp(out[s].options, options))
            return;
    if (*n < cap) {
        out[*n].program = program;
        snprintf(out[*n].options, sizeof(out[*n].options), "%s", options);
    }
    (*n)++;
}

void pfx_attn_add_configs(const pfx_attn_tuning *db, uint64_t local_mem_bytes,
                          unsigned native_float_width, pfx_program_config *out, size_t cap,
                          size_t *n)
{
    const size_t first = *n;
    char options[PFX_OPTIONS_MAX];
    const unsigned widths[2] = { native_float_width ? native_float_width : 8,
                                 native_float_width ? native_float_width : 16 };
    for (int c = 0; c < PFX_ATTN_CLASS_COUNT; c++)
        for (int decode = 0; decode < 2; decode++)
            for (int w = 0; w < 2; w++) {
                pfx_attn_fwd_tiles t;
                if (!pfx_attn_fwd_tiles_for(db, local_mem_bytes, widths[w], pfx_attn_classes[c],
                                            decode, &t))
                    continue;
                pfx_attn_fwd_options(&t, options, sizeof(options));
                pfx_attn_add_unique(out, cap, n, first, "attention_fwd", options);
            }
    for (int c = 0; c < PFX_ATTN_CLASS_COUNT; c++)
        for (int w = 0; w < 2; w++) {
            pfx_attn_bwd_tiles t;
            if (!pfx_attn_bwd_tiles_for(db, local_mem_bytes, widths[w], pfx_attn_classes[c], &t))
                continue;
            pfx_attn_bwd_options(&t, options, sizeof(options));
            pfx_attn_add_unique(out, cap, n, first, "attention_bwd", options);
        }
}
