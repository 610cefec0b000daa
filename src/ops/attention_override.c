/*
 * The user override of the attention tuning database (attention_tuning.h):
 * parsing the text, reading it from $PREFIXCL_TUNING or the cache folder,
 * and finding the line that applies to a head size.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attention_tuning.h"
#include "io_internal.h"

static bool name_is(const char *s, size_t n, const char *name)
{
    return strlen(name) == n && !strncmp(s, name, n);
}

static pfx_status parse_line(pfx_runtime *rt, const char *line, size_t len, pfx_attn_override *out)
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
    const pfx_attn_field *fields = ol.bwd ? pfx_attn_bwd_fields : pfx_attn_fwd_fields;
    const size_t count = ol.bwd ? PFX_ATTN_BWD_FIELDS : PFX_ATTN_FWD_FIELDS;
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
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "kernel tuning: more than %d lines",
                         PFX_ATTN_OVERRIDE_LINES);
    if ((ol.mask & 1u) && !pfx_attn_is_class(ol.values[0]))
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
        const pfx_attn_field *fields = l->bwd ? pfx_attn_bwd_fields : pfx_attn_fwd_fields;
        size_t count = l->bwd ? PFX_ATTN_BWD_FIELDS : PFX_ATTN_FWD_FIELDS;
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

/* Reads <dir>/tuning.txt; *text NULL when it does not exist. Only a regular
 * file is read (pfx_read_file), so a FIFO there cannot hang the runtime. */
static pfx_status read_tuning_file(pfx_runtime *rt, const char *path, char **text)
{
    *text = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return PFX_SUCCESS;
    unsigned char *buf;
    size_t n;
    pfx_status st = pfx_read_file(rt, path, 8192, &buf, &n);
    if (st != PFX_SUCCESS) {
        char why[1200];
        snprintf(why, sizeof(why), "%s", pfx_last_error(rt));
        return pfx_error(rt, st, "kernel tuning: %s (at most 8192 bytes)", why);
    }
    *text = (char *)buf;
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
const pfx_attn_override_line *pfx_attn_override_for(const pfx_attn_override *o, bool bwd, size_t D)
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

void pfx_attn_override_apply(void *tiles, bool bwd, const pfx_attn_override_line *l)
{
    const pfx_attn_field *fields = bwd ? pfx_attn_bwd_fields : pfx_attn_fwd_fields;
    const size_t count = bwd ? PFX_ATTN_BWD_FIELDS : PFX_ATTN_FWD_FIELDS;
    for (size_t f = 0; f < count; f++)
        if (l->mask & (1u << f))
            *pfx_attn_field_at(tiles, &fields[f]) = l->values[f];
}
