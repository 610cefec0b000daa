/* cJSON with the project's rule for --compare files (bench_json.h). */
#include "bench_json.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_JSON_MAX_DEPTH 64

static void fail_at(const char *text, const char *at, const char *what, char *err, size_t errlen)
{
    int line = 1, col = 1;
    for (const char *c = text; c < at; c++) {
        line += *c == '\n';
        col = *c == '\n' ? 1 : col + 1;
    }
    snprintf(err, errlen, "line %d, column %d: %s", line, col, what);
}

/* The first \u0000 escape in a string, or NULL. A backslash outside strings
 * is a syntax error; inside, skipping the escaped character keeps "\\u0000"
 * (a backslash, then text) apart from "\u0000". */
static const char *nul_escape(const char *s)
{
    for (; *s; s++) {
        if (*s != '\\')
            continue;
        if (!strncmp(s + 1, "u0000", 5))
            return s;
        if (!*++s) /* past the escaped character */
            break;
    }
    return NULL;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Depth and keys of v and below: false with the message in err. Sorting an
 * object's keys finds a repeated one in n log n. */
static bool check_tree(const cJSON *v, int depth, char *err, size_t errlen)
{
    if (depth > BENCH_JSON_MAX_DEPTH) {
        snprintf(err, errlen, "nested too deeply (more than %d levels)", BENCH_JSON_MAX_DEPTH);
        return false;
    }
    const int n = cJSON_IsObject(v) ? cJSON_GetArraySize(v) : 0;
    const char **keys = n > 1 ? malloc((size_t)n * sizeof(*keys)) : NULL;
    if (n > 1 && !keys) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    int k = 0;
    bool ok = true;
    for (const cJSON *c = v->child; c && ok; c = c->next) {
        if (keys)
            keys[k++] = c->string;
        ok = check_tree(c, depth + 1, err, errlen);
    }
    if (ok && keys) {
        qsort(keys, (size_t)n, sizeof(*keys), by_string);
        for (int i = 1; i < n && ok; i++)
            if (!strcmp(keys[i - 1], keys[i])) {
                snprintf(err, errlen, "the key '%.64s' appears twice in an object", keys[i]);
                ok = false;
            }
    }
    free(keys);
    return ok;
}

cJSON *bench_json_parse(const char *text, char *err, size_t errlen)
{
    const char *at = nul_escape(text);
    if (at) {
        fail_at(text, at, "the escape \\u0000 (NUL) in a string", err, errlen);
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, false);
    if (!root) {
        fail_at(text, end ? end : text,
                end && *end ? "unexpected character" : "unexpected end of the file", err, errlen);
        return NULL;
    }
    /* the tree first: what a reader going left to right meets first */
    if (!check_tree(root, 1, err, errlen)) {
        cJSON_Delete(root);
        return NULL;
    }
    end += strspn(end, " \t\r\n");
    if (*end) {
        fail_at(text, end, "text after the end of the JSON value", err, errlen);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
