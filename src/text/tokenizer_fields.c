/* The field readers that tokenizer.json's component parsers share: absent
 * or null gives the default, a value of the wrong type PFX_ERROR_FORMAT
 * naming the file and the field; and the start of every component (its
 * "type", or a Sequence of components). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parse.h"

pfx_status pfx_tok_oom(const char *label)
{
    return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
}

char *pfx_dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

/* ---- JSON field helpers: absent or null -> default ---- */
bool pfx_json_absent(const cJSON *it)
{
    return !it || cJSON_IsNull(it);
}

pfx_status pfx_tok_get_bool(const cJSON *obj, const char *key, bool def, bool *out,
                            const char *label, const char *where)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (pfx_json_absent(it)) {
        *out = def;
        return PFX_SUCCESS;
    }
    if (!cJSON_IsBool(it))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.%s is not a boolean", label, where, key);
    *out = cJSON_IsTrue(it);
    return PFX_SUCCESS;
}

pfx_status pfx_tok_get_string(const cJSON *obj, const char *key, bool required, const char **out,
                              const char *label, const char *where)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (pfx_json_absent(it)) {
        if (required)
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s has no string '%s'", label, where,
                             key);
        return PFX_SUCCESS;
    }
    if (!cJSON_IsString(it))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.%s is not a string", label, where, key);
    *out = it->valuestring;
    return PFX_SUCCESS;
}

pfx_status pfx_tok_get_type(const cJSON *obj, const char **type, const char *label,
                            const char *where)
{
    if (!cJSON_IsObject(obj))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s is not an object", label, where);
    return pfx_tok_get_string(obj, "type", true, type, label, where);
}

/* A {"String": s} or {"Regex": r} pattern. */
pfx_status pfx_tok_get_pattern(const cJSON *obj, const char **text, bool *regex, const char *label,
                               const char *where)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(obj, "pattern");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "Regex");
    if (!cJSON_IsObject(p) || (cJSON_IsString(s) == cJSON_IsString(r)))
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: %s.pattern is not {\"String\": ...} or "
                         "{\"Regex\": ...}",
                         label, where);
    *regex = cJSON_IsString(r);
    *text = *regex ? r->valuestring : s->valuestring;
    return PFX_SUCCESS;
}

/* A single character of `where`.key as UTF-8 (Metaspace's replacement). */
pfx_status pfx_tok_get_char(const cJSON *obj, const char *key, char *out, size_t *len,
                            const char *label, const char *where)
{
    const char *s;
    pfx_status st = pfx_tok_get_string(obj, key, true, &s, label, where);
    if (st != PFX_SUCCESS)
        return st;
    size_t n = strlen(s);
    uint32_t cp;
    if (n == 0 || pfx_utf8_next((const unsigned char *)s, n, &cp) != n || n > 4)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.%s is not one character", label, where,
                         key);
    memcpy(out, s, n);
    *len = n;
    return PFX_SUCCESS;
}

pfx_status pfx_tok_get_prepend_scheme(const cJSON *obj, pfx_prepend_scheme *out, const char *label,
                                      const char *where)
{
    const char *s;
    pfx_status st = pfx_tok_get_string(obj, "prepend_scheme", false, &s, label, where);
    if (st != PFX_SUCCESS)
        return st;
    if (!s) { /* the older form: add_prefix_space */
        bool add = true;
        st = pfx_tok_get_bool(obj, "add_prefix_space", true, &add, label, where);
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
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: %s.prepend_scheme '%s' is not always, first "
                         "or never",
                         label, where, s);
    return PFX_SUCCESS;
}

bool pfx_grow_one(void **arr, size_t *count, size_t size)
{
    void *p = realloc(*arr, (*count + 1) * size);
    if (!p)
        return false;
    *arr = p;
    memset((char *)p + *count * size, 0, size);
    (*count)++;
    return true;
}

/* ---- Sequence: a list of components, each parsed by fn ---- */
static pfx_status parse_sequence(pfx_tokenizer *tok, const cJSON *obj, const char *key,
                                 pfx_tok_parse_fn fn, const char *label, const char *where,
                                 int depth)
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
pfx_status pfx_tok_component(pfx_tokenizer *tok, const cJSON *obj, const char *where,
                             const char *list_key, pfx_tok_parse_fn fn, const char *label,
                             int depth, const char **type)
{
    *type = NULL;
    if (pfx_json_absent(obj))
        return PFX_SUCCESS;
    const char *t;
    pfx_status st = pfx_tok_get_type(obj, &t, label, where);
    if (st != PFX_SUCCESS)
        return st;
    if (strcmp(t, "Sequence") == 0)
        return parse_sequence(tok, obj, list_key, fn, label, where, depth);
    *type = t;
    return PFX_SUCCESS;
}
