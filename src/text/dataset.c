/* Data sets: a text or JSONL file tokenized once into one id array, labels
 * beside it; batches in a per-epoch order from the seed (Fisher-Yates over
 * splitmix64), right-padded to the batch's longest example. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "prefixcl/data.h"
#include "text_internal.h"

/* Largest data file accepted (bytes). */
#define MAX_DATA_FILE ((size_t)4 << 30)

typedef struct example {
    size_t off;
    uint32_t len;
    bool truncated;
} example;

struct pfx_dataset {
    int32_t *ids, *labels;
    size_t ntok, tok_cap;
    example *ex;
    size_t count, ex_cap;
    pfx_dataset_options opt;
    pfx_dataset_info info;
    size_t *perm; /* the order of epoch perm_epoch */
    uint64_t perm_epoch;
    bool perm_valid;
};

PFX_API void pfx_dataset_default_options(pfx_dataset_options *o)
{
    if (!o)
        return;
    *o = (pfx_dataset_options){ .format = PFX_DATA_AUTO,
                                .max_length = 512,
                                .add_special = true,
                                .append_eos = false,
                                .shuffle = true,
                                .seed = 0 };
}

PFX_API void pfx_dataset_free(pfx_dataset **pds)
{
    if (!pds || !*pds)
        return;
    pfx_dataset *ds = *pds;
    free(ds->ids);
    free(ds->labels);
    free(ds->ex);
    free(ds->perm);
    free(ds);
    *pds = NULL;
}

static pfx_status oom(const char *label)
{
    return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
}

static bool reserve_tokens(pfx_dataset *ds, size_t extra)
{
    if (ds->tok_cap - ds->ntok >= extra)
        return true;
    size_t cap = ds->tok_cap ? ds->tok_cap : 4096;
    while (cap - ds->ntok < extra)
        cap *= 2;
    int32_t *a = realloc(ds->ids, cap * sizeof(*a));
    if (a)
        ds->ids = a;
    int32_t *b = a ? realloc(ds->labels, cap * sizeof(*b)) : NULL;
    if (!b)
        return false;
    ds->labels = b;
    ds->tok_cap = cap;
    return true;
}

static bool push_ids(pfx_dataset *ds, const int32_t *ids, size_t n, bool counted)
{
    if (!reserve_tokens(ds, n))
        return false;
    for (size_t i = 0; i < n; i++) {
        ds->ids[ds->ntok + i] = ids[i];
        ds->labels[ds->ntok + i] = counted ? ids[i] : PFX_LABEL_IGNORE;
    }
    ds->ntok += n;
    return true;
}

typedef struct load_ctx {
    pfx_dataset *ds;
    const pfx_tokenizer *tok;
    const char *label;
    int32_t eos;
} load_ctx;

/* Appends the ids of [s, s+n), at most `want` of them: only what the cut
 * to max_length keeps is tokenized (a line of 100 MB costs what it keeps). */
static pfx_status encode_part(load_ctx *c, const char *s, size_t n, bool counted, size_t line,
                              size_t want)
{
    if (!want)
        return PFX_SUCCESS;
    int32_t *ids;
    size_t count;
    pfx_status st = pfx_tokenizer_encode_head(c->tok, s, n, want, &ids, &count);
    if (count > want)
        count = want;
    if (st != PFX_SUCCESS) {
        char why[512];
        snprintf(why, sizeof(why), "%s", pfx_last_error(NULL));
        return pfx_error(NULL, st, "%s:%zu: the tokenizer failed: %s", c->label, line, why);
    }
    bool ok = push_ids(c->ds, ids, count, counted);
    free(ids);
    return ok ? PFX_SUCCESS : oom(c->label);
}

/* One example: [prefix] prompt text [suffix] [eos], cut to max_length. */
static pfx_status add_example(load_ctx *c, const char *prompt, size_t plen, const char *text,
                              size_t tlen, size_t line)
{
    pfx_dataset *ds = c->ds;
    const pfx_tokenizer *tok = c->tok;
    size_t start = ds->ntok;
    pfx_status st = PFX_SUCCESS;
    if (ds->opt.add_special && !push_ids(ds, tok->prefix_ids, tok->prefix_count, false))
        return oom(c->label);
    /* max_length + 1 tokens tell a cut example from one that fits */
    const size_t keep = ds->opt.max_length + 1;
    if (prompt)
        st = encode_part(c, prompt, plen, false, line,
                         keep - (ds->ntok - start < keep ? ds->ntok - start : keep));
    if (!st)
        st = encode_part(c, text, tlen, true, line,
                         keep - (ds->ntok - start < keep ? ds->ntok - start : keep));
    if (!st && ds->opt.add_special && !push_ids(ds, tok->suffix_ids, tok->suffix_count, true))
        st = oom(c->label);
    if (!st && ds->opt.append_eos && !push_ids(ds, &c->eos, 1, true))
        st = oom(c->label);
    if (st)
        return st;
    size_t len = ds->ntok - start;
    bool truncated = len > ds->opt.max_length;
    if (truncated)
        len = ds->opt.max_length;
    size_t counted = 0;
    for (size_t t = 1; t < len; t++)
        counted += ds->labels[start + t] != PFX_LABEL_IGNORE;
    if (counted == 0) { /* nothing to learn: drop its tokens */
        ds->ntok = start;
        ds->info.skipped++;
        return PFX_SUCCESS;
    }
    ds->ntok = start + len;
    if (ds->count == ds->ex_cap) {
        size_t cap = ds->ex_cap ? ds->ex_cap * 2 : 256;
        void *p = realloc(ds->ex, cap * sizeof(*ds->ex));
        if (!p)
            return oom(c->label);
        ds->ex = p;
        ds->ex_cap = cap;
    }
    ds->ex[ds->count++] = (example){ start, (uint32_t)len, truncated };
    return PFX_SUCCESS;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

/* One JSONL line: {"text": s} or {"prompt": s, "completion": s}, read by
 * the rule of every JSON reader (pfx_json_parse_object: no \u0000, no key
 * twice). */
static pfx_status jsonl_line(load_ctx *c, const char *s, size_t n, size_t line)
{
    if (!pfx_utf8_valid((const unsigned char *)s, n))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s:%zu: not UTF-8 text (or holds a NUL byte)",
                         c->label, line);
    size_t cap = strlen(c->label) + 24;
    char *where = malloc(cap);
    if (!where)
        return oom(c->label);
    snprintf(where, cap, "%s:%zu", c->label, line);
    cJSON *obj = NULL;
    pfx_status pst = pfx_json_parse_object(NULL, where, (const unsigned char *)s, n, &obj);
    free(where);
    if (pst != PFX_SUCCESS)
        return pst;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(obj, "text");
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(obj, "prompt");
    const cJSON *completion = cJSON_GetObjectItemCaseSensitive(obj, "completion");
    pfx_status st;
    if (text) {
        st = cJSON_IsString(text)
                 ? add_example(c, NULL, 0, text->valuestring, strlen(text->valuestring), line)
                 : pfx_error(NULL, PFX_ERROR_FORMAT, "%s:%zu: field 'text' is not a string",
                             c->label, line);
    } else if (prompt || completion) {
        if (!cJSON_IsString(prompt) || !cJSON_IsString(completion))
            st = pfx_error(NULL, PFX_ERROR_FORMAT,
                           "%s:%zu: 'prompt' and 'completion' must both be "
                           "strings",
                           c->label, line);
        else
            st = add_example(c, prompt->valuestring, strlen(prompt->valuestring),
                             completion->valuestring, strlen(completion->valuestring), line);
    } else {
        st = pfx_error(NULL, PFX_ERROR_FORMAT,
                       "%s:%zu: no field 'text' (nor 'prompt' + 'completion')", c->label, line);
    }
    cJSON_Delete(obj);
    return st;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void compute_info(pfx_dataset *ds)
{
    size_t skipped = ds->info.skipped;
    int32_t pad = ds->info.pad_id;
    memset(&ds->info, 0, sizeof(ds->info));
    ds->info.skipped = skipped;
    ds->info.pad_id = pad;
    ds->info.max_length = ds->opt.max_length;
    ds->info.examples = ds->count;
    for (size_t i = 0; i < ds->count; i++) {
        const example *e = &ds->ex[i];
        ds->info.tokens += e->len;
        ds->info.truncated += e->truncated;
        if (e->len > ds->info.longest)
            ds->info.longest = e->len;
        for (size_t t = 1; t < e->len; t++)
            ds->info.counted += ds->labels[e->off + t] != PFX_LABEL_IGNORE;
    }
}

PFX_API pfx_status pfx_dataset_load_memory(const void *data, size_t size, const char *label,
                                           const pfx_tokenizer *tok,
                                           const pfx_dataset_options *options, pfx_dataset **out)
{
    static const char fn[] = "pfx_dataset_load_memory";
    if (out)
        *out = NULL;
    if (!out || !tok || (!data && size))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !out   ? "out"
                         : !tok ? "tok"
                                : "data");
    pfx_dataset_options opt;
    pfx_dataset_default_options(&opt);
    if (options)
        opt = *options;
    if (!label)
        label = "<memory>";
    if ((unsigned)opt.format > PFX_DATA_JSONL)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "%s: options.format %d is not a format",
                         fn, (int)opt.format);
    if (opt.max_length < 2 || opt.max_length > ((size_t)1 << 24))
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: options.max_length %zu is not in "
                         "2 .. 2^24",
                         fn, opt.max_length);
    int32_t eos = pfx_tokenizer_special_id(tok, PFX_TOKEN_EOS);
    if (opt.append_eos && eos < 0)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: options.append_eos, but the tokenizer "
                         "names no EOS token",
                         fn);
    bool jsonl =
        opt.format == PFX_DATA_JSONL ||
        (opt.format == PFX_DATA_AUTO && (ends_with(label, ".jsonl") || ends_with(label, ".json")));
    pfx_dataset *ds = calloc(1, sizeof(*ds));
    if (!ds)
        return oom(label);
    ds->opt = opt;
    int32_t pad = pfx_tokenizer_special_id(tok, PFX_TOKEN_PAD);
    ds->info.pad_id = pad >= 0 ? pad : eos >= 0 ? eos : 0;
    load_ctx c = { ds, tok, label, eos };
    pfx_status st = PFX_SUCCESS;
    const char *s = data ? data : "";
    size_t line = 0;
    for (size_t at = 0; at < size && st == PFX_SUCCESS;) {
        const char *b = s + at, *nl = memchr(b, '\n', size - at);
        size_t n = nl ? (size_t)(nl - b) : size - at;
        at += n + (nl ? 1 : 0);
        line++;
        if (n && b[n - 1] == '\r')
            n--;
        if (jsonl ? blank(b, n) : n == 0)
            continue;
        st = jsonl ? jsonl_line(&c, b, n, line) : add_example(&c, NULL, 0, b, n, line);
    }
    if (st == PFX_SUCCESS && ds->count == 0)
        st = pfx_error(NULL, PFX_ERROR_FORMAT,
                       "%s: no examples (%zu lines, %zu without a counted label)", label, line,
                       ds->info.skipped);
    if (st != PFX_SUCCESS) {
        pfx_dataset_free(&ds);
        return st;
    }
    compute_info(ds);
    *out = ds;
    return PFX_SUCCESS;
}

PFX_API pfx_status pfx_dataset_load(const char *path, const pfx_tokenizer *tok,
                                    const pfx_dataset_options *options, pfx_dataset **out)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dataset_load: %s is NULL",
                         !path ? "path" : "out");
    unsigned char *buf;
    size_t n;
    pfx_status st = pfx_read_file(NULL, path, MAX_DATA_FILE, &buf, &n);
    if (st != PFX_SUCCESS)
        return st;
    st = pfx_dataset_load_memory(buf, n, path, tok, options, out);
    free(buf);
    return st;
}

PFX_API pfx_status pfx_dataset_get_info(const pfx_dataset *ds, pfx_dataset_info *info)
{
    if (!ds || !info)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dataset_get_info: %s is NULL",
                         !ds ? "ds" : "info");
    *info = ds->info;
    return PFX_SUCCESS;
}

PFX_API pfx_status pfx_dataset_example(const pfx_dataset *ds, size_t i, const int32_t **ids,
                                       const int32_t **labels, size_t *len)
{
    if (!ds || !ids || !labels || !len)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_dataset_example: %s is NULL",
                         !ds       ? "ds"
                         : !ids    ? "ids"
                         : !labels ? "labels"
                                   : "len");
    if (i >= ds->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "pfx_dataset_example: i = %zu, %zu examples",
                         i, ds->count);
    *ids = ds->ids + ds->ex[i].off;
    *labels = ds->labels + ds->ex[i].off;
    *len = ds->ex[i].len;
    return PFX_SUCCESS;
}

void pfx_data_permutation(size_t *p, size_t n, uint64_t seed, uint64_t salt)
{
    uint64_t s = seed ^ (salt * 0xd1b54a32d192ed03ull);
    for (size_t i = 0; i < n; i++)
        p[i] = i;
    for (size_t i = n; i > 1; i--) {
        uint64_t bound = i, limit = UINT64_MAX - UINT64_MAX % bound, r;
        do
            r = pfx_splitmix64(&s);
        while (r >= limit);
        size_t j = (size_t)(r % bound), t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
}

PFX_API size_t pfx_dataset_batches_per_epoch(const pfx_dataset *ds, size_t batch)
{
    if (!ds || batch == 0)
        return 0;
    return (ds->count + batch - 1) / batch;
}

PFX_API pfx_status pfx_dataset_next_batch(pfx_dataset *ds, pfx_data_position *pos, size_t batch,
                                          int32_t *ids, int32_t *lengths, int32_t *labels,
                                          size_t *rows, size_t *width)
{
    static const char fn[] = "pfx_dataset_next_batch";
    if (!ds || !pos || !ids || !lengths || !labels || !rows || !width)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !ds        ? "ds"
                         : !pos     ? "pos"
                         : !ids     ? "ids"
                         : !lengths ? "lengths"
                         : !labels  ? "labels"
                         : !rows    ? "rows"
                                    : "width");
    if (batch == 0)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "%s: batch is 0", fn);
    if (pos->index >= ds->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "%s: pos.index %llu, but an epoch has %zu "
                         "examples",
                         fn, (unsigned long long)pos->index, ds->count);
    if (ds->opt.shuffle && (!ds->perm_valid || ds->perm_epoch != pos->epoch)) {
        if (!ds->perm && !(ds->perm = malloc(ds->count * sizeof(*ds->perm))))
            return oom(fn);
        pfx_data_permutation(ds->perm, ds->count, ds->opt.seed, pos->epoch);
        ds->perm_epoch = pos->epoch;
        ds->perm_valid = true;
    }
    size_t start = (size_t)pos->index, r = ds->count - start < batch ? ds->count - start : batch;
    size_t w = 1;
    for (size_t k = 0; k < r; k++) {
        const example *e = &ds->ex[ds->opt.shuffle ? ds->perm[start + k] : start + k];
        if (e->len > w)
            w = e->len;
    }
    for (size_t k = 0; k < batch; k++) {
        const example *e =
            k < r ? &ds->ex[ds->opt.shuffle ? ds->perm[start + k] : start + k] : NULL;
        size_t len = e ? e->len : 0;
        lengths[k] = (int32_t)len;
        for (size_t t = 0; t < w; t++) {
            ids[k * w + t] = t < len ? ds->ids[e->off + t] : ds->info.pad_id;
            labels[k * w + t] = t < len ? ds->labels[e->off + t] : PFX_LABEL_IGNORE;
        }
    }
    *rows = r;
    *width = w;
    pos->index += r;
    if (pos->index == ds->count) {
        pos->epoch++;
        pos->index = 0;
    }
    return PFX_SUCCESS;
}

/* The examples of src whose flag equals `want`, copied into a new set. */
static pfx_dataset *subset(const pfx_dataset *src, const bool *flag, bool want)
{
    pfx_dataset *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->opt = src->opt;
    d->info.pad_id = src->info.pad_id;
    size_t n = 0, tokens = 0;
    for (size_t i = 0; i < src->count; i++)
        if (flag[i] == want) {
            n++;
            tokens += src->ex[i].len;
        }
    d->ex = malloc((n ? n : 1) * sizeof(*d->ex));
    d->ex_cap = n;
    if (!d->ex || !reserve_tokens(d, tokens ? tokens : 1)) {
        pfx_dataset_free(&d);
        return NULL;
    }
    for (size_t i = 0; i < src->count; i++) {
        if (flag[i] != want)
            continue;
        const example *e = &src->ex[i];
        memcpy(d->ids + d->ntok, src->ids + e->off, e->len * sizeof(int32_t));
        memcpy(d->labels + d->ntok, src->labels + e->off, e->len * sizeof(int32_t));
        d->ex[d->count++] = (example){ d->ntok, e->len, e->truncated };
        d->ntok += e->len;
    }
    return d;
}

PFX_API pfx_status pfx_dataset_hold_out(pfx_dataset *ds, size_t count, pfx_dataset **eval)
{
    static const char fn[] = "pfx_dataset_hold_out";
    if (eval)
        *eval = NULL;
    if (!ds || !eval)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn, !ds ? "ds" : "eval");
    if (count == 0 || count >= ds->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "%s: count %zu, but 0 < count < %zu (the "
                         "examples) is needed",
                         fn, count, ds->count);
    size_t *p = malloc(ds->count * sizeof(*p));
    bool *flag = calloc(ds->count, sizeof(*flag));
    pfx_dataset *ev = NULL, *rest = NULL;
    if (p && flag) {
        pfx_data_permutation(p, ds->count, ds->opt.seed, UINT64_MAX); /* a salt no epoch reaches */
        for (size_t k = 0; k < count; k++)
            flag[p[k]] = true;
        ev = subset(ds, flag, true);
        rest = ev ? subset(ds, flag, false) : NULL;
    }
    free(p);
    free(flag);
    if (!rest) {
        pfx_dataset_free(&ev);
        return oom(fn);
    }
    ev->opt.shuffle = false;
    rest->info.skipped = ds->info.skipped;
    compute_info(ev);
    compute_info(rest);
    /* ds becomes the rest, in place. */
    free(ds->ids);
    free(ds->labels);
    free(ds->ex);
    free(ds->perm);
    *ds = *rest;
    free(rest);
    *eval = ev;
    return PFX_SUCCESS;
}
