/* The experiment's own files (saved.h). */
#include "saved.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

char *saved_args_text(int argc, char *const *argv)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *a = root ? cJSON_AddArrayToObject(root, "argv") : NULL;
    if (!a || !cJSON_AddStringToObject(root, "format", SAVED_ARGS_FORMAT)) {
        cJSON_Delete(root);
        return NULL;
    }
    for (int i = 0; i < argc; i++) {
        cJSON *s = cJSON_CreateString(argv[i]);
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(root);
            return NULL;
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

void saved_args_free(int argc, char **argv)
{
    for (int i = 0; argv && i < argc; i++)
        free(argv[i]);
    free(argv);
}

/* The object of `text` with "format" equal to `format`; NULL with err. */
static cJSON *parse(const char *text, size_t len, const char *format, char *err, size_t cap)
{
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        snprintf(err, cap, "not JSON");
        return NULL;
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsObject(root) || !cJSON_IsString(f) || strcmp(f->valuestring, format)) {
        snprintf(err, cap, "\"format\" is not \"%s\"", format);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

int saved_args_read(const char *text, size_t len, int *argc, char ***argv, char *err, size_t cap)
{
    *argc = 0;
    *argv = NULL;
    /* cJSON would decode \u0000 into a NUL that cuts an argument short */
    for (size_t k = 0; k + 6 <= len; k++)
        if (!memcmp(text + k, "\\u0000", 6)) {
            snprintf(err, cap, "an argument holds \\u0000");
            return -1;
        }
    cJSON *root = parse(text, len, SAVED_ARGS_FORMAT, err, cap);
    if (!root)
        return -1;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "argv");
    const int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
    int rc = -1;
    if (n < 1 || n > SAVED_ARGS_MAX) {
        snprintf(err, cap, "\"argv\" is not an array of 1 to %d strings", SAVED_ARGS_MAX);
        goto out;
    }
    char **v = calloc((size_t)n + 1, sizeof(char *));
    if (!v) {
        snprintf(err, cap, "out of host memory");
        goto out;
    }
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        if (!cJSON_IsString(e) || !(v[i] = strdup(e->valuestring))) {
            snprintf(err, cap, "\"argv\"[%d] is not a string", i);
            saved_args_free(i, v);
            goto out;
        }
    }
    *argc = n;
    *argv = v;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

static cJSON *rows(const float *x, size_t m, size_t heads)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < m; i++) {
        cJSON *row = cJSON_CreateArray();
        if (!row || !cJSON_AddItemToArray(a, row)) {
            cJSON_Delete(row);
            cJSON_Delete(a);
            return NULL;
        }
        for (size_t h = 0; h < heads; h++) {
            const double v = x[i * heads + h];
            cJSON *e = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
            if (!e || !cJSON_AddItemToArray(row, e)) {
                cJSON_Delete(e);
                cJSON_Delete(a);
                return NULL;
            }
        }
    }
    return a;
}

char *saved_measures_text(const size_t *steps, const float *entropy, const float *topk, size_t m,
                          size_t heads)
{
    cJSON *root = cJSON_CreateObject(), *st = cJSON_CreateArray();
    cJSON *e = rows(entropy, m, heads), *t = rows(topk, m, heads);
    char *text = NULL;
    bool ok = root && st && e && t;
    for (size_t i = 0; ok && i < m; i++) {
        cJSON *n = cJSON_CreateNumber((double)steps[i]);
        ok = n && cJSON_AddItemToArray(st, n);
        if (!ok)
            cJSON_Delete(n);
    }
    if (ok && cJSON_AddStringToObject(root, "format", SAVED_MEASURES_FORMAT) &&
        cJSON_AddNumberToObject(root, "heads", (double)heads) &&
        cJSON_AddItemToObject(root, "steps", st)) {
        st = NULL;
        if (cJSON_AddItemToObject(root, "entropy", e)) {
            e = NULL;
            if (cJSON_AddItemToObject(root, "top_k_mass", t)) {
                t = NULL;
                text = cJSON_Print(root);
            }
        }
    }
    cJSON_Delete(st);
    cJSON_Delete(e);
    cJSON_Delete(t);
    cJSON_Delete(root);
    return text;
}

/* rows [m][heads] of numbers or null into x. */
static int read_rows(const cJSON *a, const char *name, size_t m, size_t heads, float *x, char *err,
                     size_t cap)
{
    if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) != m) {
        snprintf(err, cap, "\"%s\" is not an array of %zu rows", name, m);
        return -1;
    }
    size_t i = 0;
    for (const cJSON *row = a->child; row; row = row->next, i++) {
        if (!cJSON_IsArray(row) || (size_t)cJSON_GetArraySize(row) != heads) {
            snprintf(err, cap, "\"%s\"[%zu] is not an array of %zu values", name, i, heads);
            return -1;
        }
        size_t h = 0;
        for (const cJSON *v = row->child; v; v = v->next, h++) {
            if (!cJSON_IsNumber(v) && !cJSON_IsNull(v)) {
                snprintf(err, cap, "\"%s\"[%zu][%zu] is not a number", name, i, h);
                return -1;
            }
            x[i * heads + h] = cJSON_IsNull(v) ? NAN : (float)v->valuedouble;
        }
    }
    return 0;
}

int saved_measures_read(const char *text, size_t len, size_t heads, size_t cap, size_t max_step,
                        size_t *steps, float *entropy, float *topk, size_t *m, char *err,
                        size_t errcap)
{
    *m = 0;
    cJSON *root = parse(text, len, SAVED_MEASURES_FORMAT, err, errcap);
    if (!root)
        return -1;
    int rc = -1;
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(root, "heads");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "steps");
    if (!cJSON_IsNumber(hd) || hd->valuedouble != (double)heads) {
        snprintf(err, errcap, "\"heads\" is not %zu", heads);
        goto out;
    }
    const size_t n = cJSON_IsArray(st) ? (size_t)cJSON_GetArraySize(st) : cap + 1;
    if (n > cap) {
        snprintf(err, errcap, "\"steps\" is not an array of at most %zu steps", cap);
        goto out;
    }
    size_t i = 0;
    for (const cJSON *v = st->child; v; v = v->next, i++) {
        const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (!(d >= 1 && d <= (double)max_step && d == floor(d)) ||
            (i && (size_t)d <= steps[i - 1])) {
            snprintf(err, errcap, "\"steps\"[%zu] is not a step after the last, up to %zu", i,
                     max_step);
            goto out;
        }
        steps[i] = (size_t)d;
    }
    if (read_rows(cJSON_GetObjectItemCaseSensitive(root, "entropy"), "entropy", n, heads, entropy,
                  err, errcap) ||
        read_rows(cJSON_GetObjectItemCaseSensitive(root, "top_k_mass"), "top_k_mass", n, heads,
                  topk, err, errcap))
        goto out;
    *m = n;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

char *saved_classify_text(size_t correct, size_t examples)
{
    cJSON *root = cJSON_CreateObject();
    char *text = NULL;
    if (root && cJSON_AddStringToObject(root, "format", SAVED_CLASSIFY_FORMAT) &&
        cJSON_AddNumberToObject(root, "correct", (double)correct) &&
        cJSON_AddNumberToObject(root, "examples", (double)examples))
        text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

int saved_classify_read(const char *text, size_t len, size_t *correct, size_t *examples, char *err,
                        size_t errcap)
{
    *correct = *examples = 0;
    cJSON *root = parse(text, len, SAVED_CLASSIFY_FORMAT, err, errcap);
    if (!root)
        return -1;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "correct");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "examples");
    const double dn = cJSON_IsNumber(n) ? n->valuedouble : NAN;
    const double dc = cJSON_IsNumber(c) ? c->valuedouble : NAN;
    int rc = -1;
    if (!(dn >= 1 && dn <= 1e9 && dn == floor(dn)))
        snprintf(err, errcap, "\"examples\" is not a whole number from 1 to 10^9");
    else if (!(dc >= 0 && dc <= dn && dc == floor(dc)))
        snprintf(err, errcap, "\"correct\" is not a whole number from 0 to \"examples\"");
    else {
        *correct = (size_t)dc;
        *examples = (size_t)dn;
        rc = 0;
    }
    cJSON_Delete(root);
    return rc;
}

char *saved_read(const char *path, size_t max_bytes, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    size_t n = 0, got;
    if (!f)
        return NULL;
    while (n <= max_bytes) {
        char *t = realloc(text, n + 65536 + 1);
        if (!t)
            break;
        text = t;
        got = fread(text + n, 1, 65536, f);
        n += got;
        if (got < 65536)
            break;
    }
    const bool ok = text && !ferror(f) && feof(f) && n <= max_bytes;
    fclose(f);
    if (!ok) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}
