/* The request readers' JSON rule (request_json.h), over cJSON. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request_json.h"

#define KEY_SHOWN 64 /* bytes of a key quoted in a message */

/* The first "\u0000" escape in s[0, n), or n. A backslash outside strings
 * is a syntax error; inside, skipping the escaped character keeps "\\u0000"
 * (a backslash, then text) apart from "\u0000". */
static size_t nul_escape(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\')
            continue;
        if (i + 5 < n && s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4))
            return i;
        i++;
    }
    return n;
}

/* The top-level key (as written, escapes left as they are) of the member
 * whose value holds byte `at` of the text s[0, n) of a JSON object, into
 * key (cap bytes); "" when `at` lies in a key of the object itself. */
static void member_at(const char *s, size_t n, size_t at, char *key, size_t cap)
{
    int depth = 0;
    bool in_string = false;
    size_t start = 0;
    key[0] = '\0';
    for (size_t i = 0; i < at; i++) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\') {
                i++;
            } else if (c == '"') {
                in_string = false;
                size_t j = i + 1;
                while (j < at && s[j] && strchr(" \t\r\n", s[j]))
                    j++;
                if (depth == 1 && j < at && s[j] == ':') /* a key of the object */
                    snprintf(key, cap, "%.*s", (int)(i - start), s + start);
            }
        } else if (c == '"') {
            in_string = true;
            start = i + 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    if (in_string && depth == 1 && key[0]) {
        /* inside a string at the object's own level: its key or its value */
        size_t j = at;
        while (j < n && s[j] != '"')
            j += s[j] == '\\' ? 2 : 1;
        for (j++; j < n && s[j] && strchr(" \t\r\n", s[j]); j++)
            ;
        if (j < n && s[j] == ':')
            key[0] = '\0';
    }
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A key of object v given twice (sorting the keys finds it in n log n), or
 * NULL; *oom on a failed allocation. */
static const char *keys_twice(const cJSON *v, bool *oom)
{
    const char *dup = NULL;
    const int n = cJSON_GetArraySize(v);
    if (n < 2)
        return NULL;
    const char **keys = malloc((size_t)n * sizeof(*keys));
    if (!keys) {
        *oom = true;
        return NULL;
    }
    int k = 0;
    for (const cJSON *c = v->child; c; c = c->next)
        keys[k++] = c->string;
    qsort(keys, (size_t)n, sizeof(*keys), by_string);
    for (int i = 1; i < n && !dup; i++)
        if (!strcmp(keys[i - 1], keys[i]))
            dup = keys[i];
    free(keys);
    return dup;
}

/* The same in every object of v and below (cJSON's nesting limit bounds
 * the recursion). */
static const char *twice(const cJSON *v, bool *oom)
{
    const char *dup = cJSON_IsObject(v) ? keys_twice(v, oom) : NULL;
    for (const cJSON *c = v->child; c && !dup && !*oom; c = c->next)
        dup = twice(c, oom);
    return dup;
}

/* The entry of fields equal to key, or NULL. */
static const char *known(const char *const *fields, const char *key)
{
    for (; fields && *fields; fields++)
        if (!strcmp(*fields, key))
            return *fields;
    return NULL;
}

cJSON *request_json_parse(const char *body, size_t len, const char *const *fields, char *why,
                          size_t cap, const char **field)
{
    *field = NULL;
    const char *nul = memchr(body, '\0', len);
    if (nul) {
        snprintf(why, cap, "the body holds a NUL byte (byte %zu)", (size_t)(nul - body));
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        snprintf(why, cap, "the body is not valid JSON (near byte %zu)",
                 end ? (size_t)(end - body) : (size_t)0);
        return NULL;
    }
    const char *rest = end; /* the body need not end in a NUL */
    while (rest < body + len && (*rest == ' ' || *rest == '\t' || *rest == '\r' || *rest == '\n'))
        rest++;
    if (rest < body + len) {
        snprintf(why, cap, "the body holds bytes after the JSON value (from byte %zu)",
                 (size_t)(rest - body));
    } else if (!cJSON_IsObject(root)) {
        snprintf(why, cap, "the body must be a JSON object");
    } else {
        const size_t at = nul_escape(body, len);
        char key[KEY_SHOWN + 1];
        bool oom = false;
        const char *dup = NULL;
        if (at < len) {
            member_at(body, len, at, key, sizeof(key));
            if (key[0])
                snprintf(why, cap, "%s: a string holds the escape \\u0000 (NUL)", key);
            else
                snprintf(why, cap, "a key holds the escape \\u0000 (NUL)");
            *field = key[0] ? known(fields, key) : NULL;
        } else {
            /* a member given twice, then a key twice in an object inside one */
            if ((dup = keys_twice(root, &oom))) {
                snprintf(why, cap, "%.*s: given twice", KEY_SHOWN, dup);
                *field = known(fields, dup);
            }
            for (const cJSON *m = root->child; m && !dup && !oom; m = m->next)
                if ((dup = twice(m, &oom))) {
                    snprintf(why, cap, "%.*s: the key \"%.*s\" appears twice in an object",
                             KEY_SHOWN, m->string, KEY_SHOWN, dup);
                    *field = known(fields, m->string);
                }
            if (oom)
                snprintf(why, cap, "out of host memory");
        }
        if (at == len && !dup && !oom)
            return root;
    }
    cJSON_Delete(root);
    return NULL;
}
