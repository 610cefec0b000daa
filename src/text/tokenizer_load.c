/* Loading tokenizers: tokenizer.json (HF tokenizers' format), GPT-2's
 * vocab.json + merges.txt, and a model folder with its tokenizer_config.json.
 * Every field is checked; a malformed one is PFX_ERROR_FORMAT naming the
 * file and the field, a kind this library does not run PFX_ERROR_UNSUPPORTED
 * naming the kind. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "text_internal.h"

/* Ids may leave holes, but not millions of them (an embedding table's rows). */
#define MAX_ID_SLACK ((size_t)1 << 20)

pfx_tokenizer *pfx_tokenizer_alloc(void)
{
    pfx_byte_level_init();
    pfx_tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok)
        return NULL;
    tok->unk_id = -1;
    for (int i = 0; i < 256; i++)
        tok->byte_ids[i] = -1;
    for (int i = 0; i < 4; i++)
        tok->special[i] = -1;
    return tok;
}

void pfx_tokenizer_free(pfx_tokenizer **ptok)
{
    if (!ptok || !*ptok)
        return;
    pfx_tokenizer *tok = *ptok;
    pfx_strmap_free(&tok->vocab);
    pfx_pairmap_free(&tok->merges);
    for (size_t i = 0; i < tok->norm_count; i++) {
        free(tok->norms[i].text);
        free(tok->norms[i].pattern);
        free(tok->norms[i].source);
        pcre2_code_free(tok->norms[i].re);
    }
    free(tok->norms);
    for (size_t i = 0; i < tok->pretok_count; i++) {
        pcre2_code_free(tok->pretoks[i].re);
        free(tok->pretoks[i].source);
    }
    free(tok->pretoks);
    for (size_t i = 0; i < tok->dec_count; i++) {
        free(tok->decs[i].pattern);
        free(tok->decs[i].content);
    }
    free(tok->decs);
    for (size_t i = 0; i < tok->added_count; i++) {
        if (tok->added[i].pattern != tok->added[i].content)
            free(tok->added[i].pattern);
        free(tok->added[i].content);
    }
    free(tok->added);
    free(tok->added_order);
    free(tok->prefix_ids);
    free(tok->suffix_ids);
    free(tok->id_token);
    free(tok->id_len);
    free(tok->id_added);
    pcre2_code_free(tok->word_re);
    free(tok);
    *ptok = NULL;
}

static pfx_status oom(const char *label)
{
    return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

/* ---- JSON field helpers: absent or null -> default ---- */
static bool is_absent(const cJSON *it)
{
    return !it || cJSON_IsNull(it);
}

static pfx_status get_bool(const cJSON *obj, const char *key, bool def, bool *out, const char *label,
                           const char *where)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (is_absent(it)) {
        *out = def;
        return PFX_SUCCESS;
    }
    if (!cJSON_IsBool(it))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.%s is not a boolean", label, where, key);
    *out = cJSON_IsTrue(it);
    return PFX_SUCCESS;
}

static pfx_status get_string(const cJSON *obj, const char *key, bool required, const char **out,
                             const char *label, const char *where)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (is_absent(it)) {
        if (required)
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s has no string '%s'", label, where, key);
        return PFX_SUCCESS;
    }
    if (!cJSON_IsString(it))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.%s is not a string", label, where, key);
    *out = it->valuestring;
    return PFX_SUCCESS;
}

static pfx_status get_type(const cJSON *obj, const char **type, const char *label, const char *where)
{
    if (!cJSON_IsObject(obj))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s is not an object", label, where);
    return get_string(obj, "type", true, type, label, where);
}

/* A {"String": s} or {"Regex": r} pattern. */
static pfx_status get_pattern(const cJSON *obj, const char **text, bool *regex, const char *label,
                              const char *where)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(obj, "pattern");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "Regex");
    if (!cJSON_IsObject(p) || (cJSON_IsString(s) == cJSON_IsString(r)))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.pattern is not {\"String\": ...} or "
                         "{\"Regex\": ...}", label, where);
    *regex = cJSON_IsString(r);
    *text = *regex ? r->valuestring : s->valuestring;
    return PFX_SUCCESS;
}

/* A single character of `where`.key as UTF-8 (Metaspace's replacement). */
static pfx_status get_char(const cJSON *obj, const char *key, char *out, size_t *len,
                           const char *label, const char *where)
{
    const char *s;
    pfx_status st = get_string(obj, key, true, &s, label, where);
    if (st != PFX_SUCCESS)
        return st;
    size_t n = strlen(s);
    uint32_t cp;
    if (n == 0 || pfx_utf8_next((const unsigned char *)s, n, &cp) != n || n > 4)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.%s is not one character", label, where, key);
    memcpy(out, s, n);
    *len = n;
    return PFX_SUCCESS;
}

static pfx_status get_prepend_scheme(const cJSON *obj, pfx_prepend_scheme *out, const char *label,
                                     const char *where)
{
    const char *s;
    pfx_status st = get_string(obj, "prepend_scheme", false, &s, label, where);
    if (st != PFX_SUCCESS)
        return st;
    if (!s) { /* the older form: add_prefix_space */
        bool add = true;
        st = get_bool(obj, "add_prefix_space", true, &add, label, where);
        *out = add ? PFX_PREPEND_ALWAYS : PFX_PREPEND_NEVER;
        return st;
    }
    if (strcmp(s, "always") == 0)
        *out = PFX_PREPEND_ALWAYS;
    else if (strcmp(s, "first") == 0)
        *out = PFX_PREPEND_FIRST;
    else if (strcmp(s, "never") == 0)
        *out = PFX_PREPEND_NEVER;
    else
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.prepend_scheme '%s' is not always, first "
                         "or never", label, where, s);
    return PFX_SUCCESS;
}

static bool grow(void **arr, size_t *count, size_t size)
{
    void *p = realloc(*arr, (*count + 1) * size);
    if (!p)
        return false;
    *arr = p;
    memset((char *)p + *count * size, 0, size);
    (*count)++;
    return true;
}

/* ---- model ---- */
pfx_status pfx_add_merge(pfx_tokenizer *tok, const char *a, size_t alen, const char *b, size_t blen,
                         uint32_t rank, const char *label)
{
    int32_t ia = pfx_strmap_get(&tok->vocab, a, alen), ib = pfx_strmap_get(&tok->vocab, b, blen);
    if (ia < 0 || ib < 0)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: merge %u: '%.*s' is not in the vocabulary",
                         label, rank, (int)(ia < 0 ? alen : blen), ia < 0 ? a : b);
    char stack[256];
    char *ab = alen + blen <= sizeof(stack) ? stack : malloc(alen + blen);
    if (!ab)
        return oom(label);
    memcpy(ab, a, alen);
    memcpy(ab + alen, b, blen);
    int32_t id = pfx_strmap_get(&tok->vocab, ab, alen + blen);
    pfx_status st = PFX_SUCCESS;
    if (id < 0)
        st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: merge %u: '%.*s' (the merged token) is not in "
                       "the vocabulary", label, rank, (int)(alen + blen), ab);
    else if (!pfx_pairmap_put(&tok->merges, ia, ib, rank, id))
        st = oom(label);
    if (ab != stack)
        free(ab);
    return st;
}

static pfx_status parse_vocab(pfx_tokenizer *tok, const cJSON *vocab, const char *label,
                              const char *where)
{
    if (!cJSON_IsObject(vocab))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s is not an object of token -> id", label, where);
    for (const cJSON *it = vocab->child; it; it = it->next) {
        uint64_t id;
        if (!pfx_json_uint(it, &id) || id > INT32_MAX)
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s['%s'] is not an id (an integer 0 .. 2^31-1)",
                             label, where, it->string);
        if (!pfx_strmap_put(&tok->vocab, it->string, strlen(it->string), (int32_t)id))
            return oom(label);
    }
    return PFX_SUCCESS;
}

static pfx_status parse_merges(pfx_tokenizer *tok, const cJSON *merges, const char *label)
{
    if (!cJSON_IsArray(merges))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: model.merges is not an array", label);
    uint32_t rank = 0;
    for (const cJSON *m = merges->child; m; m = m->next, rank++) {
        const char *a, *b;
        size_t alen, blen;
        if (cJSON_IsString(m)) { /* "a b", split at the first space */
            const char *sp = strchr(m->valuestring, ' ');
            if (!sp)
                return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: model.merges[%u] '%s' is not \"a b\"",
                                 label, rank, m->valuestring);
            a = m->valuestring;
            alen = (size_t)(sp - a);
            b = sp + 1;
            blen = strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            a = m->child->valuestring;
            b = m->child->next->valuestring;
            alen = strlen(a);
            blen = strlen(b);
        } else {
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: model.merges[%u] is neither \"a b\" nor "
                             "[\"a\", \"b\"]", label, rank);
        }
        pfx_status st = pfx_add_merge(tok, a, alen, b, blen, rank, label);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

/* model.vocab and model.merges left out of the cJSON tree (vocab_stream.c). */
typedef struct streamed {
    const char *text;
    pfx_json_span vocab, merges;
} streamed;

static pfx_status parse_model(pfx_tokenizer *tok, const cJSON *model, const char *label, const streamed *sv)
{
    if (!cJSON_IsObject(model))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: no object 'model'", label);
    const char *type;
    pfx_status st = get_string(model, "type", false, &type, label, "model");
    if (st != PFX_SUCCESS)
        return st;
    if (type && strcmp(type, "BPE") != 0)
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: tokenizer model '%s' is not supported "
                         "(only BPE)", label, type);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (!is_absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0.0))
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: model.dropout (BPE dropout is random; "
                         "only null or 0)", label);
    const char *keys[] = { "continuing_subword_prefix", "end_of_word_suffix" };
    for (int k = 0; k < 2; k++) {
        const char *s;
        if ((st = get_string(model, keys[k], false, &s, label, "model")) != PFX_SUCCESS)
            return st;
        if (s && *s)
            return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: model.%s '%s' is not supported",
                             label, keys[k], s);
    }
    if ((st = get_bool(model, "fuse_unk", false, &tok->fuse_unk, label, "model")) ||
        (st = get_bool(model, "byte_fallback", false, &tok->byte_fallback, label, "model")) ||
        (st = get_bool(model, "ignore_merges", false, &tok->ignore_merges, label, "model")))
        return st;
    st = sv->vocab.e ? pfx_stream_vocab(tok, sv->text + sv->vocab.b, sv->vocab.e - sv->vocab.b, label, "model.vocab")
                     : parse_vocab(tok, cJSON_GetObjectItemCaseSensitive(model, "vocab"), label, "model.vocab");
    if (st != PFX_SUCCESS)
        return st;
    st = sv->merges.e ? pfx_stream_merges(tok, sv->text + sv->merges.b, sv->merges.e - sv->merges.b, label)
                      : parse_merges(tok, cJSON_GetObjectItemCaseSensitive(model, "merges"), label);
    if (st != PFX_SUCCESS)
        return st;
    const char *unk;
    if ((st = get_string(model, "unk_token", false, &unk, label, "model")))
        return st;
    if (unk) {
        tok->unk_id = pfx_strmap_get(&tok->vocab, unk, strlen(unk));
        if (tok->unk_id < 0)
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: model.unk_token '%s' is not in the vocabulary",
                             label, unk);
    }
    return PFX_SUCCESS;
}

static pfx_status add_token(pfx_tokenizer *tok, int32_t id, const char *content, bool special,
                            bool normalized, const char *label)
{
    if (!grow((void **)&tok->added, &tok->added_count, sizeof(*tok->added)))
        return oom(label);
    pfx_added *a = &tok->added[tok->added_count - 1];
    a->id = id;
    a->len = strlen(content);
    a->content = dup_bytes(content, a->len);
    a->special = special;
    a->normalized = normalized;
    return a->content ? PFX_SUCCESS : oom(label);
}

static pfx_status parse_added(pfx_tokenizer *tok, const cJSON *arr, const char *label)
{
    if (is_absent(arr))
        return PFX_SUCCESS;
    if (!cJSON_IsArray(arr))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: added_tokens is not an array", label);
    int k = 0;
    for (const cJSON *t = arr->child; t; t = t->next, k++) {
        char where[64];
        snprintf(where, sizeof(where), "added_tokens[%d]", k);
        const char *content;
        uint64_t id;
        bool special = false, normalized = false;
        pfx_status st;
        if (!cJSON_IsObject(t))
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s is not an object", label, where);
        if (!pfx_json_uint(cJSON_GetObjectItemCaseSensitive(t, "id"), &id) || id > INT32_MAX)
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.id is not an id", label, where);
        if ((st = get_string(t, "content", true, &content, label, where)) ||
            (st = get_bool(t, "special", false, &special, label, where)) ||
            (st = get_bool(t, "normalized", !special, &normalized, label, where)) ||
            (st = add_token(tok, (int32_t)id, content, special, normalized, label)))
            return st;
        pfx_added *a = &tok->added[tok->added_count - 1];
        if ((st = get_bool(t, "lstrip", false, &a->lstrip, label, where)) ||
            (st = get_bool(t, "rstrip", false, &a->rstrip, label, where)) ||
            (st = get_bool(t, "single_word", false, &a->single_word, label, where)))
            return st;
    }
    return PFX_SUCCESS;
}

/* ---- Sequence: a list of components, each parsed by fn ---- */
typedef pfx_status (*parse_fn)(pfx_tokenizer *tok, const cJSON *item, const char *label, int depth);

static pfx_status parse_sequence(pfx_tokenizer *tok, const cJSON *obj, const char *key, parse_fn fn,
                                 const char *label, const char *where, int depth)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsArray(list) || depth > 8)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.%s is not an array (or nests too deep)",
                         label, where, key);
    for (const cJSON *c = list->child; c; c = c->next) {
        pfx_status st = fn(tok, c, label, depth + 1);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

/* The start every component shares: absent or null is nothing to do, else
 * its "type"; a Sequence is its list `list_key` through fn. *type is NULL
 * when nothing is left to parse. */
static pfx_status component(pfx_tokenizer *tok, const cJSON *obj, const char *where,
                            const char *list_key, parse_fn fn, const char *label, int depth,
                            const char **type)
{
    *type = NULL;
    if (is_absent(obj))
        return PFX_SUCCESS;
    const char *t;
    pfx_status st = get_type(obj, &t, label, where);
    if (st != PFX_SUCCESS)
        return st;
    if (strcmp(t, "Sequence") == 0)
        return parse_sequence(tok, obj, list_key, fn, label, where, depth);
    *type = t;
    return PFX_SUCCESS;
}

/* ---- normalizer ---- */
static pfx_status parse_normalizer(pfx_tokenizer *tok, const cJSON *n, const char *label, int depth)
{
    static const char where[] = "normalizer";
    const char *type;
    pfx_status st = component(tok, n, where, "normalizers", parse_normalizer, label, depth, &type);
    if (st != PFX_SUCCESS || !type)
        return st;
    static const struct { const char *name; int options; } forms[] = {
        { "NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE },
        { "NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE },
        { "NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT },
        { "NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT },
    };
    int form = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(type, forms[k].name) == 0)
            form = k;
    bool prepend = strcmp(type, "Prepend") == 0;
    bool lower = strcmp(type, "Lowercase") == 0, accents = strcmp(type, "StripAccents") == 0;
    bool strip = strcmp(type, "Strip") == 0;
    if (form < 0 && !prepend && !lower && !accents && !strip && strcmp(type, "Replace") != 0)
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: normalizer '%s' is not supported (only "
                         "NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Prepend, Replace and "
                         "Sequence)", label, type);
    if (!grow((void **)&tok->norms, &tok->norm_count, sizeof(*tok->norms)))
        return oom(label);
    pfx_norm *nm = &tok->norms[tok->norm_count - 1];
    if (form >= 0) {
        nm->kind = PFX_NORM_UNICODE;
        nm->unicode_options = forms[form].options;
        return PFX_SUCCESS;
    }
    if (lower || accents) {
        nm->kind = lower ? PFX_NORM_LOWERCASE : PFX_NORM_STRIP_ACCENTS;
        return PFX_SUCCESS;
    }
    if (strip) {
        nm->kind = PFX_NORM_STRIP;
        if ((st = get_bool(n, "strip_left", true, &nm->strip_left, label, where)) ||
            (st = get_bool(n, "strip_right", true, &nm->strip_right, label, where)))
            return st;
        return PFX_SUCCESS;
    }
    nm->kind = prepend ? PFX_NORM_PREPEND : PFX_NORM_REPLACE;
    const char *text;
    if ((st = get_string(n, prepend ? "prepend" : "content", true, &text, label, where)))
        return st;
    nm->text_len = strlen(text);
    if (!(nm->text = dup_bytes(text, nm->text_len)))
        return oom(label);
    if (prepend)
        return PFX_SUCCESS;
    const char *pat;
    bool regex;
    if ((st = get_pattern(n, &pat, &regex, label, where)))
        return st;
    if (regex) {
        if (!(nm->re = pfx_regex_compile(pat, strlen(pat), false, label, where)))
            return PFX_ERROR_FORMAT;
        return (nm->source = dup_bytes(pat, strlen(pat))) ? PFX_SUCCESS : oom(label);
    }
    nm->pattern_len = strlen(pat);
    return (nm->pattern = dup_bytes(pat, nm->pattern_len)) ? PFX_SUCCESS : oom(label);
}

/* ---- pre-tokenizer ---- */
static pfx_status parse_behavior(const cJSON *p, pfx_split_behavior *out, const char *label,
                                 const char *where)
{
    static const char *names[] = { "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                   "Contiguous" };
    const char *s;
    pfx_status st = get_string(p, "behavior", true, &s, label, where);
    if (st != PFX_SUCCESS)
        return st;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (pfx_split_behavior)i;
            return PFX_SUCCESS;
        }
    return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.behavior '%s' is not a split behavior", label,
                     where, s);
}

static pfx_status parse_pretok(pfx_tokenizer *tok, const cJSON *p, const char *label, int depth)
{
    static const char where[] = "pre_tokenizer";
    const char *type;
    pfx_status st = component(tok, p, where, "pretokenizers", parse_pretok, label, depth, &type);
    if (st != PFX_SUCCESS || !type)
        return st;
    pfx_pretok pt = { 0 };
    const char *src = ""; /* the regex's pattern */
    if (strcmp(type, "ByteLevel") == 0) {
        bool use_regex = true;
        pt.kind = PFX_PRE_BYTE_LEVEL;
        if ((st = get_bool(p, "add_prefix_space", true, &pt.add_prefix_space, label, where)) ||
            (st = get_bool(p, "use_regex", true, &use_regex, label, where)))
            return st;
        src = pfx_gpt2_pattern;
        if (use_regex && !(pt.re = pfx_regex_compile(pfx_gpt2_pattern, PCRE2_ZERO_TERMINATED, false,
                                                     label, where)))
            return PFX_ERROR_FORMAT;
    } else if (strcmp(type, "Split") == 0) {
        const char *pat;
        bool regex;
        pt.kind = PFX_PRE_SPLIT;
        if ((st = get_pattern(p, &pat, &regex, label, where)) ||
            (st = parse_behavior(p, &pt.behavior, label, where)) ||
            (st = get_bool(p, "invert", false, &pt.invert, label, where)))
            return st;
        src = pat;
        if ((regex || *pat) && !(pt.re = pfx_regex_compile(pat, strlen(pat), !regex, label, where)))
            return PFX_ERROR_FORMAT;
    } else if (strcmp(type, "Digits") == 0) {
        bool single = false;
        pt.kind = PFX_PRE_SPLIT;
        pt.behavior = PFX_SPLIT_ISOLATED;
        if ((st = get_bool(p, "individual_digits", false, &single, label, where)))
            return st;
        /* Rust's char::is_numeric: the categories Nd, Nl, No. */
        const char *pat = single ? "\\p{N}" : "\\p{N}+";
        src = pat;
        if (!(pt.re = pfx_regex_compile(pat, PCRE2_ZERO_TERMINATED, false, label, where)))
            return PFX_ERROR_FORMAT;
    } else if (strcmp(type, "Whitespace") == 0 || strcmp(type, "WhitespaceSplit") == 0 ||
               strcmp(type, "Punctuation") == 0) {
        /* HF's fixed splitters as regexes: \w+|[^\w\s]+ kept (Whitespace),
         * runs of White_Space removed (WhitespaceSplit), punctuation split
         * off by a behavior (Punctuation: Unicode P* and ASCII punctuation). */
#define PFX_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"
#define PFX_SPACE "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}" \
                  "\\x{202f}\\x{205f}\\x{3000}"
        const char *pat;
        pt.kind = PFX_PRE_SPLIT;
        if (type[0] == 'P') {
            pat = "[\\p{P}!-/:-@\\[-`{-~]";
            pt.behavior = PFX_SPLIT_ISOLATED;
            if (cJSON_GetObjectItemCaseSensitive(p, "behavior") &&
                (st = parse_behavior(p, &pt.behavior, label, where)))
                return st;
        } else if (strcmp(type, "Whitespace") == 0) {
            pat = "[" PFX_WORD "]+|[^" PFX_WORD PFX_SPACE "]+";
            pt.behavior = PFX_SPLIT_REMOVED;
            pt.invert = true;
        } else {
            pat = "[" PFX_SPACE "]+";
            pt.behavior = PFX_SPLIT_REMOVED;
        }
#undef PFX_WORD
#undef PFX_SPACE
        src = pat;
        if (!(pt.re = pfx_regex_compile(pat, PCRE2_ZERO_TERMINATED, false, label, where)))
            return PFX_ERROR_FORMAT;
    } else if (strcmp(type, "Metaspace") == 0) {
        pt.kind = PFX_PRE_METASPACE;
        if ((st = get_char(p, "replacement", pt.repl, &pt.repl_len, label, where)) ||
            (st = get_prepend_scheme(p, &pt.prepend, label, where)) ||
            (st = get_bool(p, "split", true, &pt.split, label, where)))
            return st;
    } else {
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: pre-tokenizer '%s' is not supported (only "
                         "ByteLevel, Split, Digits, Metaspace, Whitespace, WhitespaceSplit, Punctuation and "
                         "Sequence)", label, type);
    }
    if ((pt.re && !(pt.source = dup_bytes(src, strlen(src)))) ||
        !grow((void **)&tok->pretoks, &tok->pretok_count, sizeof(*tok->pretoks))) {
        pcre2_code_free(pt.re);
        free(pt.source);
        return oom(label);
    }
    tok->pretoks[tok->pretok_count - 1] = pt;
    return PFX_SUCCESS;
}

/* ---- decoder ---- */
static pfx_status parse_decoder(pfx_tokenizer *tok, const cJSON *d, const char *label, int depth)
{
    static const char where[] = "decoder";
    if (!is_absent(d))
        tok->has_decoder = true;
    const char *type;
    pfx_status st = component(tok, d, where, "decoders", parse_decoder, label, depth, &type);
    if (st != PFX_SUCCESS || !type)
        return st;
    pfx_dec dc = { 0 };
    const char *s;
    if (strcmp(type, "ByteLevel") == 0) {
        dc.kind = PFX_DEC_BYTE_LEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        dc.kind = PFX_DEC_BYTE_FALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        dc.kind = PFX_DEC_FUSE;
    } else if (strcmp(type, "Metaspace") == 0) {
        dc.kind = PFX_DEC_METASPACE;
        if ((st = get_char(d, "replacement", dc.repl, &dc.repl_len, label, where)) ||
            (st = get_prepend_scheme(d, &dc.prepend, label, where)))
            return st;
    } else if (strcmp(type, "Replace") == 0 || strcmp(type, "Strip") == 0) {
        bool strip = type[0] == 'S', regex = false;
        dc.kind = strip ? PFX_DEC_STRIP : PFX_DEC_REPLACE;
        if ((st = get_string(d, "content", true, &s, label, where)))
            return st;
        dc.content_len = strlen(s);
        if (!(dc.content = dup_bytes(s, dc.content_len)))
            return oom(label);
        if (strip) {
            uint64_t a, b;
            uint32_t cp;
            if (!pfx_json_uint(cJSON_GetObjectItemCaseSensitive(d, "start"), &a) ||
                !pfx_json_uint(cJSON_GetObjectItemCaseSensitive(d, "stop"), &b) ||
                pfx_utf8_next((const unsigned char *)s, dc.content_len, &cp) != dc.content_len) {
                free(dc.content);
                return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: decoder Strip needs one character "
                                 "'content' and counts 'start', 'stop'", label);
            }
            dc.start = (size_t)a;
            dc.stop = (size_t)b;
        } else {
            st = get_pattern(d, &s, &regex, label, where);
            if (st == PFX_SUCCESS && regex)
                st = pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: decoder Replace with a regex pattern "
                               "is not supported", label);
            dc.pattern_len = st == PFX_SUCCESS ? strlen(s) : 0;
            if (st == PFX_SUCCESS && !(dc.pattern = dup_bytes(s, dc.pattern_len)))
                st = oom(label);
            if (st != PFX_SUCCESS) {
                free(dc.content);
                return st;
            }
        }
    } else {
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: decoder '%s' is not supported (only "
                         "ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence)",
                         label, type);
    }
    if (!grow((void **)&tok->decs, &tok->dec_count, sizeof(*tok->decs))) {
        free(dc.pattern);
        free(dc.content);
        return oom(label);
    }
    tok->decs[tok->dec_count - 1] = dc;
    return PFX_SUCCESS;
}

/* ---- post-processor: ids before and after the sequence ---- */
static bool ids_append(int32_t **arr, size_t *n, const int32_t *ids, size_t k, bool front)
{
    int32_t *p = realloc(*arr, (*n + k + 1) * sizeof(*p));
    if (!p)
        return false;
    if (k == 0) {
        *arr = p;
        return true;
    }
    if (front) {
        memmove(p + k, p, *n * sizeof(*p));
        memcpy(p, ids, k * sizeof(*p));
    } else {
        memcpy(p + *n, ids, k * sizeof(*p));
    }
    *arr = p;
    *n += k;
    return true;
}

/* [token, id] of RobertaProcessing / BertProcessing. */
static pfx_status pair_id(const cJSON *p, const char *key, int32_t *id, const char *label)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, key);
    uint64_t v;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2 || !cJSON_IsString(a->child) ||
        !pfx_json_uint(a->child->next, &v) || v > INT32_MAX)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor.%s is not [token, id]", label, key);
    *id = (int32_t)v;
    return PFX_SUCCESS;
}

static pfx_status template_ids(const cJSON *specials, const char *name, int32_t **ids, size_t *n,
                               const char *label)
{
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(specials, name);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(sp, "ids");
    *ids = NULL;
    *n = 0;
    if (!cJSON_IsArray(arr))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor.special_tokens has no ids for '%s'",
                         label, name);
    *n = 0;
    *ids = malloc(((size_t)cJSON_GetArraySize(arr) + 1) * sizeof(**ids));
    if (!*ids)
        return oom(label);
    for (const cJSON *c = arr->child; c; c = c->next) {
        uint64_t v;
        if (!pfx_json_uint(c, &v) || v > INT32_MAX) {
            free(*ids);
            *ids = NULL;
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor.special_tokens['%s'].ids "
                             "holds a bad id", label, name);
        }
        (*ids)[(*n)++] = (int32_t)v;
    }
    return PFX_SUCCESS;
}

static pfx_status parse_template(pfx_tokenizer *tok, const cJSON *p, const char *label)
{
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
    if (!cJSON_IsArray(single) || !cJSON_IsObject(specials))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor TemplateProcessing needs arrays "
                         "'single' and an object 'special_tokens'", label);
    int32_t *pre = NULL, *post = NULL;
    size_t npre = 0, npost = 0;
    bool seen_a = false;
    pfx_status st = PFX_SUCCESS;
    for (const cJSON *it = single->child; it && st == PFX_SUCCESS; it = it->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp ? sp : sq, "id");
        if (!cJSON_IsString(id)) {
            st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor.single holds an item that is "
                           "neither SpecialToken nor Sequence", label);
        } else if (sq) {
            if (strcmp(id->valuestring, "A") != 0 || seen_a)
                st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor.single must hold sequence "
                               "A once", label);
            seen_a = true;
        } else {
            int32_t *ids;
            size_t n = 0;
            st = template_ids(specials, id->valuestring, &ids, &n, label);
            if (st == PFX_SUCCESS && !ids_append(seen_a ? &post : &pre, seen_a ? &npost : &npre, ids, n,
                                                 false))
                st = oom(label);
            free(ids);
        }
    }
    if (st == PFX_SUCCESS && !seen_a)
        st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor.single has no sequence A", label);
    /* A later processor wraps what the earlier ones produced. */
    if (st == PFX_SUCCESS && (!ids_append(&tok->prefix_ids, &tok->prefix_count, pre, npre, true) ||
                              !ids_append(&tok->suffix_ids, &tok->suffix_count, post, npost, false)))
        st = oom(label);
    free(pre);
    free(post);
    return st;
}

static pfx_status parse_post(pfx_tokenizer *tok, const cJSON *p, const char *label, int depth)
{
    static const char where[] = "post_processor";
    const char *type;
    pfx_status st = component(tok, p, where, "processors", parse_post, label, depth, &type);
    if (st != PFX_SUCCESS || !type)
        return st;
    if (strcmp(type, "ByteLevel") == 0)
        return PFX_SUCCESS; /* offsets only */
    if (strcmp(type, "TemplateProcessing") == 0)
        return parse_template(tok, p, label);
    if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        int32_t cls, sep;
        if ((st = pair_id(p, "cls", &cls, label)) || (st = pair_id(p, "sep", &sep, label)))
            return st;
        if (!ids_append(&tok->prefix_ids, &tok->prefix_count, &cls, 1, true) ||
            !ids_append(&tok->suffix_ids, &tok->suffix_count, &sep, 1, false))
            return oom(label);
        return PFX_SUCCESS;
    }
    return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: post-processor '%s' is not supported (only "
                     "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing and Sequence)",
                     label, type);
}

/* ---- tables once everything is in ---- */
static const pfx_tokenizer *sort_tok; /* qsort has no context argument */

static int added_cmp(const void *pa, const void *pb)
{
    const pfx_added *a = &sort_tok->added[*(const uint32_t *)pa], *b = &sort_tok->added[*(const uint32_t *)pb];
    if (a->normalized != b->normalized)
        return a->normalized ? 1 : -1;
    unsigned ca = (unsigned char)a->pattern[0], cb = (unsigned char)b->pattern[0];
    if (ca != cb)
        return ca < cb ? -1 : 1;
    if (a->pattern_len != b->pattern_len)
        return a->pattern_len > b->pattern_len ? -1 : 1;
    uint32_t ia = *(const uint32_t *)pa, ib = *(const uint32_t *)pb; /* the first added wins a tie */
    return ia < ib ? -1 : ia > ib;
}

/* The bucket index find_added scans; tokens with an empty pattern never match. */
static pfx_status index_added(pfx_tokenizer *tok, const char *label)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    tok->added_order = malloc((tok->added_count + 1) * sizeof(*tok->added_order));
    if (!tok->added_order)
        return oom(label);
    size_t n = 0;
    for (size_t k = 0; k < tok->added_count; k++)
        if (tok->added[k].pattern_len)
            tok->added_order[n++] = (uint32_t)k;
    pthread_mutex_lock(&lock);
    sort_tok = tok;
    qsort(tok->added_order, n, sizeof(*tok->added_order), added_cmp);
    pthread_mutex_unlock(&lock);
    memset(tok->added_bucket, 0, sizeof(tok->added_bucket));
    for (size_t k = 0; k < n; k++) {
        const pfx_added *a = &tok->added[tok->added_order[k]];
        tok->added_bucket[a->normalized][(unsigned char)a->pattern[0] + 1]++;
    }
    /* Prefix sums; the normalized buckets start after the others. */
    uint32_t at = 0;
    for (int nz = 0; nz < 2; nz++) {
        for (int b = 0; b <= 256; b++) {
            uint32_t c = b < 256 ? tok->added_bucket[nz][b + 1] : 0;
            tok->added_bucket[nz][b] = at;
            at += c;
        }
    }
    return PFX_SUCCESS;
}
pfx_status pfx_tokenizer_finish(pfx_tokenizer *tok, const char *label)
{
    size_t max_id = 0, count = tok->vocab.count + tok->added_count;
    bool any = false;
    for (size_t e = 0; e < tok->vocab.count; e++) {
        any = true;
        if ((size_t)tok->vocab.entries[e].value > max_id)
            max_id = (size_t)tok->vocab.entries[e].value;
    }
    for (size_t k = 0; k < tok->added_count; k++) {
        any = true;
        if ((size_t)tok->added[k].id > max_id)
            max_id = (size_t)tok->added[k].id;
    }
    if (!any)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: the vocabulary is empty", label);
    if (max_id >= count + MAX_ID_SLACK)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: id %zu is far beyond the %zu tokens (holes of "
                         "more than %zu ids)", label, max_id, count, MAX_ID_SLACK);
    tok->vocab_size = max_id + 1;
    tok->id_token = calloc(tok->vocab_size, sizeof(*tok->id_token));
    tok->id_len = calloc(tok->vocab_size, sizeof(*tok->id_len));
    tok->id_added = calloc(tok->vocab_size, sizeof(*tok->id_added));
    if (!tok->id_token || !tok->id_len || !tok->id_added)
        return oom(label);
    for (size_t e = 0; e < tok->vocab.count; e++) {
        int32_t id = tok->vocab.entries[e].value;
        if (tok->id_token[id])
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: the vocabulary gives id %d to both '%s' and "
                             "'%s'", label, (int)id, tok->id_token[id],
                             pfx_strmap_key(&tok->vocab, e, &tok->id_len[id]));
        tok->id_token[id] = pfx_strmap_key(&tok->vocab, e, &tok->id_len[id]);
    }
    pfx_encode_scratch sc = { 0 };
    if (!pfx_scratch_regex_init(&sc, 0)) {
        pfx_scratch_regex_free(&sc);
        return oom(label);
    }
    pfx_status st = PFX_SUCCESS;
    for (size_t k = 0; k < tok->added_count && st == PFX_SUCCESS; k++) {
        pfx_added *a = &tok->added[k];
        tok->id_added[a->id] = a->special ? 2 : 1;
        a->pattern = a->content;
        a->pattern_len = a->len;
        if (a->normalized && tok->norm_count) { /* matched as the normalizers rewrite it */
            pfx_buf nb = { 0 };
            pfx_scratch_regex_budget(&sc, a->len);
            st = pfx_normalize(tok, &sc, a->content, a->len, &nb);
            if (st == PFX_SUCCESS && !nb.data && !pfx_buf_add(&nb, "", 0))
                st = oom(label);
            a->pattern = nb.data;
            a->pattern_len = nb.len;
            if (st != PFX_SUCCESS) {
                pfx_buf_free(&nb);
                a->pattern = a->content;
            }
        }
        /* HF's token string (id_to_token, decode) is the normalized content. */
        tok->id_token[a->id] = a->pattern;
        tok->id_len[a->id] = a->pattern_len;
    }
    pfx_scratch_regex_free(&sc);
    if (st != PFX_SUCCESS)
        return st;
    for (size_t i = 0; i < tok->prefix_count + tok->suffix_count; i++) {
        int32_t id = i < tok->prefix_count ? tok->prefix_ids[i] : tok->suffix_ids[i - tok->prefix_count];
        if ((size_t)id >= tok->vocab_size || !tok->id_token[id])
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor id %d is not a token of the "
                             "vocabulary", label, (int)id);
    }
    if ((st = index_added(tok, label)))
        return st;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        tok->byte_ids[b] = pfx_strmap_get(&tok->vocab, name, 6);
    }
    /* regex-syntax's is_word_character (Unicode \w), which HF's single_word uses. */
    static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
    if (!(tok->word_re = pfx_regex_compile(word, PCRE2_ZERO_TERMINATED, false, label, "word class")))
        return PFX_ERROR_FORMAT;
    tok->special[PFX_TOKEN_UNK] = tok->unk_id;
    if (tok->prefix_count)
        tok->special[PFX_TOKEN_BOS] = tok->prefix_ids[0];
    tok->special[PFX_TOKEN_EOS] = pfx_tokenizer_token_to_id(tok, "<|endoftext|>");
    return PFX_SUCCESS;
}

/* ---- entry points ---- */
static pfx_status check_out(pfx_tokenizer **out, const char *fn)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    return PFX_SUCCESS;
}

/* The rule of every JSON reader (pfx_json_parse_object): no \u0000, no key
 * twice. */
static pfx_status parse_json(const unsigned char *data, size_t size, const char *label, cJSON **root)
{
    if (!pfx_utf8_valid(data, size)) {
        *root = NULL;
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not UTF-8 text (or holds a NUL byte)", label);
    }
    return pfx_json_parse_object(NULL, label, data, size, root);
}

PFX_API pfx_status pfx_tokenizer_load_json_memory(const void *data, size_t size, const char *label,
                                                  pfx_tokenizer **out)
{
    pfx_status st = check_out(out, "pfx_tokenizer_load_json_memory");
    if (st != PFX_SUCCESS)
        return st;
    if (!data && size)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_tokenizer_load_json_memory: data is NULL");
    if (!label)
        label = "<memory>";
    const char *text = data ? data : "";
    if (!pfx_utf8_valid((const unsigned char *)text, size))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not UTF-8 text (or holds a NUL byte)", label);
    /* cJSON gets the text without model.vocab and model.merges (read from
     * the text itself): a tree of them would cost ten times the file */
    streamed sv = { text, { 0, 0 }, { 0, 0 } };
    pfx_tokenizer_json_spans(text, size, &sv.vocab, &sv.merges);
    char *rest = NULL;
    size_t rest_len = size;
    if (sv.vocab.e || sv.merges.e) {
        if (!(rest = malloc(size + 1)))
            return oom(label);
        const pfx_json_span *cut[2] = { &sv.vocab, &sv.merges };
        if (sv.merges.e && (!sv.vocab.e || sv.merges.b < sv.vocab.b)) {
            cut[0] = &sv.merges;
            cut[1] = &sv.vocab;
        }
        size_t from = 0;
        rest_len = 0;
        for (int k = 0; k < 2; k++) {
            if (!cut[k]->e)
                continue;
            memcpy(rest + rest_len, text + from, cut[k]->b - from);
            rest_len += cut[k]->b - from;
            memcpy(rest + rest_len, cut[k] == &sv.vocab ? "{}" : "[]", 2);
            rest_len += 2;
            from = cut[k]->e;
        }
        memcpy(rest + rest_len, text + from, size - from);
        rest_len += size - from;
    }
    cJSON *root;
    st = parse_json((const unsigned char *)(rest ? rest : text), rest_len, label, &root);
    free(rest);
    if (st != PFX_SUCCESS)
        return st;
    pfx_tokenizer *tok = pfx_tokenizer_alloc();
    if (!tok) {
        cJSON_Delete(root);
        return oom(label);
    }
    const cJSON *trunc = cJSON_GetObjectItemCaseSensitive(root, "truncation");
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(root, "padding");
    if (!is_absent(trunc) || !is_absent(pad))
        st = pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: truncation / padding inside tokenizer.json "
                       "are not supported (the data set truncates and pads)", label);
    if (!st)
        st = parse_model(tok, cJSON_GetObjectItemCaseSensitive(root, "model"), label, &sv);
    if (!st)
        st = parse_added(tok, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), label);
    if (!st)
        st = parse_normalizer(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), label, 0);
    if (!st)
        st = parse_pretok(tok, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), label, 0);
    if (!st)
        st = parse_decoder(tok, cJSON_GetObjectItemCaseSensitive(root, "decoder"), label, 0);
    if (!st)
        st = parse_post(tok, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), label, 0);
    if (!st)
        st = pfx_tokenizer_finish(tok, label);
    cJSON_Delete(root);
    if (st != PFX_SUCCESS) {
        pfx_tokenizer_free(&tok);
        return st;
    }
    *out = tok;
    return PFX_SUCCESS;
}

PFX_API pfx_status pfx_tokenizer_load_json(const char *path, pfx_tokenizer **out)
{
    pfx_status st = check_out(out, "pfx_tokenizer_load_json");
    if (st != PFX_SUCCESS)
        return st;
    if (!path)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_tokenizer_load_json: path is NULL");
    unsigned char *buf;
    size_t n = 0;
    if ((st = pfx_read_file(NULL, path, PFX_TOKENIZER_MAX_FILE, &buf, &n)))
        return st;
    st = pfx_tokenizer_load_json_memory(buf, n, path, out);
    free(buf);
    return st;
}

pfx_status pfx_parse_merges_txt(pfx_tokenizer *tok, const char *data, size_t size, const char *label)
{
    uint32_t rank = 0;
    size_t line = 0;
    for (size_t at = 0; at < size; line++) {
        const char *s = data + at, *nl = memchr(s, '\n', size - at);
        size_t len = nl ? (size_t)(nl - s) : size - at;
        at += len + (nl ? 1 : 0);
        if (len && s[len - 1] == '\r')
            len--;
        if (line == 0 && len >= 8 && memcmp(s, "#version", 8) == 0)
            continue;
        const char *sp = memchr(s, ' ', len);
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)) || sp == s || sp + 1 == s + len)
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: line %zu is not \"a b\"", label, line + 1);
        pfx_status st = pfx_add_merge(tok, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp + 1 - s),
                                      rank++, label);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

PFX_API pfx_status pfx_tokenizer_load_vocab_merges_memory(const void *vocab, size_t vocab_size,
                                                          const void *merges, size_t merges_size,
                                                          const char *label, pfx_tokenizer **out)
{
    static const char fn[] = "pfx_tokenizer_load_vocab_merges_memory";
    pfx_status st = check_out(out, fn);
    if (st != PFX_SUCCESS)
        return st;
    if ((!vocab && vocab_size) || (!merges && merges_size))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn, vocab ? "merges" : "vocab");
    if (!label)
        label = "<memory>";
    char vlabel[1024], mlabel[1024];
    snprintf(vlabel, sizeof(vlabel), "%s (vocab.json)", label);
    snprintf(mlabel, sizeof(mlabel), "%s (merges.txt)", label);
    if (!pfx_utf8_valid(merges ? merges : (const void *)"", merges_size))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not UTF-8 text (or holds a NUL byte)", mlabel);
    const char *vtext = vocab ? vocab : "";
    if (!pfx_utf8_valid((const unsigned char *)vtext, vocab_size))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not UTF-8 text (or holds a NUL byte)", vlabel);
    pfx_tokenizer *tok = pfx_tokenizer_alloc();
    if (!tok)
        return oom(label);
    st = pfx_stream_vocab_json(tok, vtext, vocab_size, vlabel); /* no tree: a tenth of the memory */
    if (!st)
        st = pfx_parse_merges_txt(tok, merges ? merges : "", merges_size, mlabel);
    /* GPT-2's setup: ByteLevel without a prefix space, GPT-2's regex. */
    pfx_pretok pt = { .kind = PFX_PRE_BYTE_LEVEL };
    if (!st && !(pt.re = pfx_regex_compile(pfx_gpt2_pattern, PCRE2_ZERO_TERMINATED, false, label,
                                           "GPT-2 regex")))
        st = PFX_ERROR_FORMAT;
    if (!st && (!(pt.source = dup_bytes(pfx_gpt2_pattern, strlen(pfx_gpt2_pattern))) ||
                !grow((void **)&tok->pretoks, &tok->pretok_count, sizeof(*tok->pretoks)))) {
        pcre2_code_free(pt.re);
        free(pt.source);
        st = oom(label);
    }
    if (!st) {
        tok->pretoks[0] = pt;
        tok->has_decoder = true;
        if (!grow((void **)&tok->decs, &tok->dec_count, sizeof(*tok->decs)))
            st = oom(label);
    }
    int32_t eot = pfx_strmap_get(&tok->vocab, "<|endoftext|>", 13);
    if (!st && eot >= 0)
        st = add_token(tok, eot, "<|endoftext|>", true, false, label);
    if (!st)
        st = pfx_tokenizer_finish(tok, label);
    if (st != PFX_SUCCESS) {
        pfx_tokenizer_free(&tok);
        return st;
    }
    *out = tok;
    return PFX_SUCCESS;
}

PFX_API pfx_status pfx_tokenizer_load_vocab_merges(const char *vocab_path, const char *merges_path,
                                                   pfx_tokenizer **out)
{
    static const char fn[] = "pfx_tokenizer_load_vocab_merges";
    pfx_status st = check_out(out, fn);
    if (st != PFX_SUCCESS)
        return st;
    if (!vocab_path || !merges_path)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         vocab_path ? "merges_path" : "vocab_path");
    unsigned char *v = NULL, *m = NULL;
    size_t vn, mn;
    if ((st = pfx_read_file(NULL, vocab_path, PFX_TOKENIZER_MAX_FILE, &v, &vn)))
        return st;
    if ((st = pfx_read_file(NULL, merges_path, PFX_TOKENIZER_MAX_FILE, &m, &mn))) {
        free(v);
        return st;
    }
    /* Messages name the vocabulary's path; merges lines carry their number. */
    st = pfx_tokenizer_load_vocab_merges_memory(v, vn, m, mn, vocab_path, out);
    free(v);
    free(m);
    return st;
}

/* A token name of tokenizer_config.json: a string or {"content": string}. */
static const char *config_token(const cJSON *cfg, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(it))
        it = cJSON_GetObjectItemCaseSensitive(it, "content");
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static pfx_status read_config(pfx_tokenizer *tok, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return PFX_SUCCESS; /* optional */
    unsigned char *buf;
    size_t n = 0;
    pfx_status st = pfx_read_file(NULL, path, 64u << 20, &buf, &n);
    if (st != PFX_SUCCESS)
        return st;
    cJSON *cfg;
    st = parse_json(buf, n, path, &cfg);
    free(buf);
    if (st != PFX_SUCCESS)
        return st;
    static const char *keys[] = { "bos_token", "eos_token", "pad_token", "unk_token" };
    for (int k = 0; k < 4 && st == PFX_SUCCESS; k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, keys[k]);
        if (is_absent(it))
            continue;
        const char *name = config_token(cfg, keys[k]);
        if (!name)
            st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s is neither a string nor {\"content\": "
                           "string}", path, keys[k]);
        else /* a name the tokenizer lacks: -1, as for no name */
            tok->special[k] = pfx_tokenizer_token_to_id(tok, name);
    }
    cJSON_Delete(cfg);
    return st;
}

PFX_API pfx_status pfx_tokenizer_load(const char *dir, pfx_tokenizer **out)
{
    pfx_status st = check_out(out, "pfx_tokenizer_load");
    if (st != PFX_SUCCESS)
        return st;
    if (!dir)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_tokenizer_load: dir is NULL");
    size_t n = strlen(dir) + 32;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return oom(dir);
    }
    struct stat sb;
    snprintf(a, n, "%s/tokenizer.json", dir);
    if (stat(a, &sb) == 0) {
        st = pfx_tokenizer_load_json(a, out);
    } else {
        snprintf(a, n, "%s/vocab.json", dir);
        snprintf(b, n, "%s/merges.txt", dir);
        if (stat(a, &sb) == 0 && stat(b, &sb) == 0)
            st = pfx_tokenizer_load_vocab_merges(a, b, out);
        else
            st = pfx_error(NULL, PFX_ERROR_IO, "'%s' has neither tokenizer.json nor vocab.json + "
                           "merges.txt", dir);
    }
    if (st == PFX_SUCCESS) {
        snprintf(a, n, "%s/tokenizer_config.json", dir);
        st = read_config(*out, a);
        if (st != PFX_SUCCESS)
            pfx_tokenizer_free(out);
    }
    free(a);
    free(b);
    return st;
}
