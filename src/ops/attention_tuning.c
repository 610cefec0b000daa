/*
 * The attention tuning database (see attention_tuning.h): lookup, fit to the
 * device, option text, and the user override. The entries themselves are in
 * attention_tuning_db.c; the sweeps behind them are in bench/README.md.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attention_tuning.h"

const unsigned pfx_attn_classes[PFX_ATTN_CLASS_COUNT] = { 16, 32, 64, 128, 256 };

static int class_index(unsigned dim_class)
{
    for (int c = 0; c < PFX_ATTN_CLASS_COUNT; c++)
        if (pfx_attn_classes[c] == dim_class)
            return c;
    return -1;
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

size_t pfx_attn_bwd_local_bytes(const pfx_attn_bwd_tiles *t)
{
    /* as BWD_LOCALS in cl/attention_bwd.cl: K~, V~ and Q, dO tiles (rows
     * padded to HEAD_DIM + 1, or transposed with BLOCK_N + 1 / BLOCK_M + 1),
     * two score tiles, LSE and Delta */
    size_t dm = t->head_dim, bq = t->block_m, bk = t->block_n;
    size_t ksz = bk * (dm + 1) > dm * (bk + 1) ? bk * (dm + 1) : dm * (bk + 1);
    size_t qsz = bq * (dm + 1) > dm * (bq + 1) ? bq * (dm + 1) : dm * (bq + 1);
    return sizeof(float) * (2 * ksz + 2 * qsz + 2 * bq * bk + 2 * bq);
}

size_t pfx_attn_bwd_wg_dkv(const pfx_attn_bwd_tiles *t)
{
    return t->vec > 1 ? t->block_n / t->vec : (size_t)t->block_n * t->dsplit;
}

size_t pfx_attn_bwd_wg_dq(const pfx_attn_bwd_tiles *t)
{
    return t->vec > 1 ? t->block_m / t->vec : (size_t)t->block_m * t->dsplit;
}

/* ---- database tiles, fitted ---- */

bool pfx_attn_fwd_tiles_for(const pfx_attn_tuning *db, uint64_t local_mem_bytes,
                            unsigned dim_class, bool decode, pfx_attn_fwd_tiles *out)
{
    int c = class_index(dim_class);
    if (c < 0)
        return false;
    pfx_attn_fwd_tiles t = decode ? db->decode[c] : db->fwd[c];
    /* Shrink the key tile, then the row tile, until local memory holds it. */
    while (pfx_attn_fwd_local_bytes(&t) > local_mem_bytes) {
        if (t.block_n > t.ksplit && t.block_n > 8)
            t.block_n /= 2;
        else if (t.block_m > t.vec)
            t.block_m /= 2;
        else
            return false;
        if (t.ksplit > 1 && t.block_n < t.ksplit)
            t.ksplit = t.block_n;
    }
    *out = t;
    return true;
}

bool pfx_attn_bwd_tiles_for(const pfx_attn_tuning *db, uint64_t local_mem_bytes,
                            unsigned dim_class, pfx_attn_bwd_tiles *out)
{
    int c = class_index(dim_class);
    if (c < 0)
        return false;
    pfx_attn_bwd_tiles t = db->bwd[c];
    /* Halve both tiles (keeping them multiples of VEC) until they fit; when
     * the CPU path's 16-wide tiles do not fit (rusticl's 32 KiB at D = 128),
     * take the GPU path, whose tiles go down to 8 x 8. */
    while (pfx_attn_bwd_local_bytes(&t) > local_mem_bytes) {
        if (t.vec > 1 && (t.block_m / 2 < t.vec || t.block_n / 2 < t.vec)) {
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

typedef struct field {
    const char *name; /* the -D option without PFX_ATTN_ */
    size_t offset;
} field;

#define FWD_FIELD(f, NAME) { NAME, offsetof(pfx_attn_fwd_tiles, f) }
static const field fwd_fields[] = {
    FWD_FIELD(head_dim, "HEAD_DIM"), FWD_FIELD(block_m, "BLOCK_M"),
    FWD_FIELD(block_n, "BLOCK_N"),   FWD_FIELD(ksplit, "KSPLIT"),
    FWD_FIELD(kv_pad, "KV_PAD"),     FWD_FIELD(q_local, "Q_LOCAL"),
    FWD_FIELD(unroll, "UNROLL"),     FWD_FIELD(poly_exp2, "POLY_EXP2"),
    FWD_FIELD(vec, "VEC"),           FWD_FIELD(unroll_d, "UNROLL_D"),
};
#define BWD_FIELD(f, NAME) { NAME, offsetof(pfx_attn_bwd_tiles, f) }
static const field bwd_fields[] = {
    BWD_FIELD(head_dim, "HEAD_DIM"), BWD_FIELD(block_m, "BLOCK_M"),
    BWD_FIELD(block_n, "BLOCK_N"),   BWD_FIELD(dsplit, "DSPLIT"),
    BWD_FIELD(vec, "VEC"),
};
#define FWD_FIELD_COUNT (sizeof(fwd_fields) / sizeof(fwd_fields[0]))
#define BWD_FIELD_COUNT (sizeof(bwd_fields) / sizeof(bwd_fields[0]))

static unsigned *field_at(void *tiles, const field *f)
{
    return (unsigned *)((char *)tiles + f->offset);
}

static void options_of(const void *tiles, const field *fields, size_t count, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count && at < cap; i++) {
        int n = snprintf(buf + at, cap - at, "%s-DPFX_ATTN_%s=%u", i ? " " : "", fields[i].name,
                         *field_at((void *)tiles, &fields[i]));
        if (n < 0)
            break;
        at += (size_t)n;
    }
}

void pfx_attn_fwd_options(const pfx_attn_fwd_tiles *t, char *buf, size_t cap)
{
    options_of(t, fwd_fields, FWD_FIELD_COUNT, buf, cap);
}

void pfx_attn_bwd_options(const pfx_attn_bwd_tiles *t, char *buf, size_t cap)
{
    options_of(t, bwd_fields, BWD_FIELD_COUNT, buf, cap);
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
    if (t->vec > 1 && (t->ksplit != 1 || t->q_local || t->block_m % t->vec))
        return "VEC > 1 needs KSPLIT 1, Q_LOCAL 0 and BLOCK_M a multiple of VEC";
    if (t->block_n % t->ksplit || t->head_dim % t->ksplit)
        return "BLOCK_N and HEAD_DIM must be multiples of KSPLIT";
    if (t->block_m > 4096 || t->block_n > 4096 || t->kv_pad > 64)
        return "BLOCK_M, BLOCK_N above 4096 or KV_PAD above 64";
    if (t->q_local > 1 || t->unroll > 1 || t->poly_exp2 > 1 || t->unroll_d > 1)
        return "Q_LOCAL, UNROLL, POLY_EXP2 and UNROLL_D are 0 or 1";
    return NULL;
}

static const char *bwd_invalid(const pfx_attn_bwd_tiles *t)
{
    if (class_index(t->head_dim) < 0)
        return "HEAD_DIM must be a head-size class (16, 32, 64, 128 or 256)";
    if (!t->block_m || !t->block_n || !t->dsplit || t->block_m > 4096 || t->block_n > 4096)
        return "BLOCK_M, BLOCK_N and DSPLIT must be in 1..4096";
    if (t->vec != 1 && t->vec != 16)
        return "VEC must be 1 (GPU path) or 16 (CPU path)";
    if (t->vec > 1 && (t->block_m % t->vec || t->block_n % t->vec || t->block_m % 8 ||
                       t->block_n % 8))
        return "VEC 16 needs BLOCK_M and BLOCK_N multiples of 16";
    if (t->head_dim % t->dsplit)
        return "HEAD_DIM must be a multiple of DSPLIT";
    return NULL;
}

/* ---- the override ---- */

static bool name_is(const char *s, size_t n, const char *name)
{
    return strlen(name) == n && !strncmp(s, name, n);
}

static pfx_status parse_line(pfx_runtime *rt, const char *line, size_t len,
                             pfx_attn_override *out)
{
    const char *end = line + len;
    while (line < end && isspace((unsigned char)*line))
        line++;
    while (end > line && isspace((unsigned char)end[-1]))
        end--;
    if (line == end)
        return PFX_SUCCESS;
    const char *p = line;
    while (p < end && !isspace((unsigned char)*p))
        p++;
    pfx_attn_override_line ol;
    memset(&ol, 0, sizeof(ol));
    if (name_is(line, (size_t)(p - line), "attention_fwd"))
        ol.bwd = false;
    else if (name_is(line, (size_t)(p - line), "attention_bwd"))
        ol.bwd = true;
    else
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "kernel tuning: '%.*s' is not a tuned program (attention_fwd or "
                         "attention_bwd)",
                         (int)(p - line), line);
    const field *fields = ol.bwd ? bwd_fields : fwd_fields;
    const size_t count = ol.bwd ? BWD_FIELD_COUNT : FWD_FIELD_COUNT;
    while (p < end) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (p == end)
            break;
        const char *tok = p;
        while (p < end && !isspace((unsigned char)*p))
            p++;
        const char *name = tok, *eq = memchr(tok, '=', (size_t)(p - tok));
        if (!strncmp(name, "-D", 2))
            name += 2;
        if (!strncmp(name, "PFX_ATTN_", 9))
            name += 9;
        size_t f = count;
        if (eq)
            for (f = 0; f < count && !name_is(name, (size_t)(eq - name), fields[f].name); f++)
                ;
        char *num_end = NULL;
        unsigned long v = 0;
        if (eq && eq + 1 < p && isdigit((unsigned char)eq[1]))
            v = strtoul(eq + 1, &num_end, 10);
        if (f == count || num_end != p || v > 65536)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "kernel tuning: '%.*s' is not NAME=VALUE with a field of %s "
                             "(see `prefixcl kernel-configs`) and a value up to 65536",
                             (int)(p - tok), tok, ol.bwd ? "attention_bwd" : "attention_fwd");
        ol.values[f] = (unsigned)v;
        ol.mask |= 1u << f;
    }
    if (out->count == PFX_ATTN_OVERRIDE_LINES)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "kernel tuning: more than %d lines", PFX_ATTN_OVERRIDE_LINES);
    if ((ol.mask & 1u) && class_index(ol.values[0]) < 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "kernel tuning: %s HEAD_DIM=%u is not a head-size class (16, 32, 64, "
                         "128 or 256)",
                         ol.bwd ? "attention_bwd" : "attention_fwd", ol.values[0]);
    out->lines[out->count++] = ol;
    return PFX_SUCCESS;
}

static void normalize(pfx_attn_override *o)
{
    size_t at = 0;
    o->text[0] = '\0';
    for (size_t i = 0; i < o->count; i++) {
        const pfx_attn_override_line *l = &o->lines[i];
        const field *fields = l->bwd ? bwd_fields : fwd_fields;
        size_t count = l->bwd ? BWD_FIELD_COUNT : FWD_FIELD_COUNT;
        at += (size_t)snprintf(o->text + at, sizeof(o->text) - at, "%s%s", i ? "\n" : "",
                               l->bwd ? "attention_bwd" : "attention_fwd");
        for (size_t f = 0; f < count && at < sizeof(o->text); f++)
            if (l->mask & (1u << f))
                at += (size_t)snprintf(o->text + at, sizeof(o->text) - at, " -DPFX_ATTN_%s=%u",
                                       fields[f].name, l->values[f]);
        if (at >= sizeof(o->text))
            break;
    }
}

pfx_status pfx_attn_override_parse(pfx_runtime *rt, const char *text, const char *source,
                                   pfx_attn_override *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->source, sizeof(out->source), "%s", source ? source : "");
    if (!text)
        return PFX_SUCCESS;
    if (strlen(text) > 8192)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "kernel tuning (%s): longer than 8192 characters", out->source);
    const char *p = text;
    while (*p) {
        size_t len = strcspn(p, "\n;#");
        pfx_status st = parse_line(rt, p, len, out);
        if (st != PFX_SUCCESS)
            return st;
        p += len;
        if (*p == '#')
            p += strcspn(p, "\n");
        if (*p)
            p++;
    }
    normalize(out);
    return PFX_SUCCESS;
}

/* Reads <dir>/tuning.txt; *text NULL when it does not exist. Non-blocking
 * open and a regular-file check, so a FIFO there cannot hang the runtime. */
static pfx_status read_tuning_file(pfx_runtime *rt, const char *path, char **text)
{
    *text = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? PFX_SUCCESS
                               : pfx_error(rt, PFX_ERROR_IO, "kernel tuning: cannot open %s", path);
    struct stat sb;
    char *buf = NULL;
    ssize_t got = -1;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= 8192 &&
        (buf = malloc((size_t)sb.st_size + 1)))
        got = read(fd, buf, (size_t)sb.st_size);
    close(fd);
    if (got != (ssize_t)sb.st_size || !buf) {
        free(buf);
        return pfx_error(rt, PFX_ERROR_IO,
                         "kernel tuning: %s is not a readable regular file of at most 8192 bytes",
                         path);
    }
    buf[got] = '\0';
    *text = buf;
    return PFX_SUCCESS;
}

pfx_status pfx_attn_override_load(pfx_runtime *rt, const char *params_text, const char *cache_dir,
                                  pfx_attn_override *out)
{
    if (params_text)
        return pfx_attn_override_parse(rt, params_text, "pfx_runtime_params.kernel_tuning", out);
    const char *env = getenv("PREFIXCL_TUNING");
    if (env && *env)
        return pfx_attn_override_parse(rt, env, "$PREFIXCL_TUNING", out);
    pfx_attn_override_parse(rt, NULL, "", out);
    if (!cache_dir || !*cache_dir)
        return PFX_SUCCESS;
    char path[1100], *text;
    snprintf(path, sizeof(path), "%s/tuning.txt", cache_dir);
    pfx_status st = read_tuning_file(rt, path, &text);
    if (st == PFX_SUCCESS && text)
        st = pfx_attn_override_parse(rt, text, path, out);
    free(text);
    return st;
}

pfx_status pfx_attn_override_set(pfx_runtime *rt, const char *text)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "rt is NULL");
    pfx_attn_override *o = calloc(1, sizeof(*o));
    if (!o)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "kernel tuning: host allocation failed");
    pfx_status st = pfx_attn_override_parse(rt, text, "pfx_attn_override_set", o);
    if (st != PFX_SUCCESS || !o->count) {
        free(o);
        o = NULL;
    }
    if (st == PFX_SUCCESS) {
        free(rt->attn_override);
        rt->attn_override = o;
    }
    return st;
}

/* The override line for a head size, or NULL: the smallest HEAD_DIM that
 * holds D, else a line without HEAD_DIM. */
static const pfx_attn_override_line *override_for(const pfx_attn_override *o, bool bwd, size_t D)
{
    const pfx_attn_override_line *best = NULL, *any = NULL;
    for (size_t i = 0; o && i < o->count; i++) {
        const pfx_attn_override_line *l = &o->lines[i];
        if (l->bwd != bwd)
            continue;
        if (!(l->mask & 1u)) {
            if (!any)
                any = l;
        } else if (D <= l->values[0] && (!best || l->values[0] < best->values[0])) {
            best = l;
        }
    }
    return best ? best : any;
}

static void apply(void *tiles, const field *fields, size_t count, const pfx_attn_override_line *l)
{
    for (size_t f = 0; f < count; f++)
        if (l->mask & (1u << f))
            *field_at(tiles, &fields[f]) = l->values[f];
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
                     "%s: desc.head_dim %zu: the tiles (%s) need %zu %s, the device has %zu", op,
                     D, options, need, what, have);
}

pfx_status pfx_attn_fwd_select(pfx_runtime *rt, const char *op, size_t D, size_t rows_per_kv_head,
                               pfx_attn_fwd_tiles *out)
{
    const pfx_attn_tuning *db = db_of(rt);
    unsigned dc = pfx_attn_dim_class(D);
    if (!dc)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.head_dim %zu is above the largest supported head size %d", op,
                         D, PFX_ATTN_MAX_D);
    const bool decode = rows_per_kv_head <= db->decode_rows;
    const pfx_attn_override_line *l = override_for(rt->attn_override, false, D);
    pfx_attn_fwd_tiles t;
    char options[PFX_OPTIONS_MAX];
    if (l) {
        t = decode ? db->decode[class_index(dc)] : db->fwd[class_index(dc)];
        apply(&t, fwd_fields, FWD_FIELD_COUNT, l);
        pfx_attn_fwd_options(&t, options, sizeof(options));
        const char *bad = fwd_invalid(&t);
        if (bad)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: kernel tuning (%s): %s (%s)",
                             op, rt->attn_override->source, bad, options);
        if (pfx_attn_fwd_local_bytes(&t) > rt->info.local_mem_bytes)
            return unsupported(rt, op, D, "bytes of local memory", pfx_attn_fwd_local_bytes(&t),
                               (size_t)rt->info.local_mem_bytes, options);
    } else if (!pfx_attn_fwd_tiles_for(db, rt->info.local_mem_bytes, dc, decode, &t)) {
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.head_dim %zu needs more local memory than the device has "
                         "(%llu bytes)",
                         op, D, (unsigned long long)rt->info.local_mem_bytes);
    }
    pfx_attn_fwd_options(&t, options, sizeof(options));
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
    const pfx_attn_override_line *l = override_for(rt->attn_override, true, D);
    if (!dc)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.head_dim %zu is above the largest supported head size %d", op,
                         D, PFX_ATTN_MAX_D);
    if (l) {
        t = db->bwd[class_index(dc)];
        apply(&t, bwd_fields, BWD_FIELD_COUNT, l);
        pfx_attn_bwd_options(&t, options, sizeof(options));
        const char *bad = bwd_invalid(&t);
        if (bad)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: kernel tuning (%s): %s (%s)",
                             op, rt->attn_override->source, bad, options);
        if (pfx_attn_bwd_local_bytes(&t) > rt->info.local_mem_bytes)
            return unsupported(rt, op, D, "bytes of local memory", pfx_attn_bwd_local_bytes(&t),
                               (size_t)rt->info.local_mem_bytes, options);
    } else if (!pfx_attn_bwd_tiles_for(db, rt->info.local_mem_bytes, dc, &t)) {
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: desc.head_dim %zu is beyond what the backward kernels hold in this "
                         "device's %llu bytes of local memory",
                         op, D, (unsigned long long)rt->info.local_mem_bytes);
    }
    pfx_attn_bwd_options(&t, options, sizeof(options));
    size_t wg = pfx_attn_bwd_wg_dkv(&t) > pfx_attn_bwd_wg_dq(&t) ? pfx_attn_bwd_wg_dkv(&t)
                                                                 : pfx_attn_bwd_wg_dq(&t);
    if (wg > rt->info.max_work_group_size)
        return unsupported(rt, op, D, "work-items per group", wg, rt->info.max_work_group_size,
                           options);
    *out = t;
    return PFX_SUCCESS;
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

size_t pfx_attn_fwd_splits(const pfx_attn_tuning *db, unsigned compute_units,
                           const pfx_attn_fwd_tiles *t, size_t batch, size_t kv_heads,
                           size_t rows_per_kv_head, size_t keys, size_t *keys_per_split)
{
    /* Cut the key range when the row tiles alone do not fill the device;
     * each split keeps at least two key tiles. */
    const size_t base_groups = ceil_div(rows_per_kv_head, t->block_m) * kv_heads * batch;
    const size_t key_tiles = ceil_div(keys, t->block_n);
    const size_t target = (size_t)(compute_units ? compute_units : 1) * db->groups_per_cu;
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
                          pfx_program_config *out, size_t cap, size_t *n)
{
    const size_t first = *n;
    char options[PFX_OPTIONS_MAX];
    for (int c = 0; c < PFX_ATTN_CLASS_COUNT; c++)
        for (int decode = 0; decode < 2; decode++) {
            pfx_attn_fwd_tiles t;
            if (!pfx_attn_fwd_tiles_for(db, local_mem_bytes, pfx_attn_classes[c], decode, &t))
                continue;
            pfx_attn_fwd_options(&t, options, sizeof(options));
            pfx_attn_add_unique(out, cap, n, first, "attention_fwd", options);
        }
    for (int c = 0; c < PFX_ATTN_CLASS_COUNT; c++) {
        pfx_attn_bwd_tiles t;
        if (!pfx_attn_bwd_tiles_for(db, local_mem_bytes, pfx_attn_classes[c], &t))
            continue;
        pfx_attn_bwd_options(&t, options, sizeof(options));
        pfx_attn_add_unique(out, cap, n, first, "attention_bwd", options);
    }
}
