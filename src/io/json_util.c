/* Helpers shared by the safetensors and PEFT readers: UTF-8, whole-file
 * reads, JSON numbers. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>

#include "io_internal.h"

size_t pfx_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    *cp = 0xffffffffu;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if ((c & 0xe0) == 0xc0) {
        len = 2;
        v = c & 0x1f;
        min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        v = c & 0x0f;
        min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 1;
    }
    if (n < len)
        return 1;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 1;
        v = (v << 6) | (s[k] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 1; /* overlong, beyond Unicode, surrogate */
    *cp = v;
    return len;
}

bool pfx_utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += pfx_utf8_next(s + i, n - i, &cp);
        if (cp == 0 || cp == 0xffffffffu)
            return false;
    }
    return true;
}

pfx_status pfx_read_file(pfx_runtime *rt, const char *path, size_t max_bytes, unsigned char **out,
                         size_t *size)
{
    *out = NULL;
    *size = 0;
    FILE *fp;
    const pfx_status opened = pfx_input_open_rt(rt, path, &fp);
    if (opened != PFX_SUCCESS)
        return opened;
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        fclose(fp);
        return pfx_error(rt, PFX_ERROR_IO, "cannot stat '%s': %s", path, strerror(errno));
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)max_bytes) {
        fclose(fp);
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "'%s' has %lld bytes, more than the %zu accepted", path,
                         (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n + 1);
    if (!buf) {
        fclose(fp);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "reading '%s': %zu bytes of host memory",
                         path, n + 1);
    }
    size_t got = n ? fread(buf, 1, n, fp) : 0;
    int extra = fgetc(fp); /* the file must end where fstat said */
    bool err = ferror(fp);
    fclose(fp);
    if (got != n || extra != EOF || err) {
        free(buf);
        return pfx_error(rt, PFX_ERROR_IO, "reading '%s': size changed or read error", path);
    }
    buf[n] = 0;
    *out = buf;
    *size = n;
    return PFX_SUCCESS;
}

int pfx_cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool pfx_json_uint(const cJSON *item, uint64_t *out)
{
    if (!cJSON_IsNumber(item))
        return false;
    double v = item->valuedouble;
    if (!(v >= 0.0) || v > PFX_JSON_MAX_INT || floor(v) != v)
        return false;
    *out = (uint64_t)v;
    return true;
}

bool pfx_json_has_nul_escape(const char *s, size_t n)
{
    /* Outside strings a backslash is a syntax error anyway; inside, each one
     * starts an escape, so skipping the escaped character keeps "\\u0000"
     * (a backslash, then text) apart from "\u0000". */
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\')
            continue;
        if (i + 5 < n && s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4))
            return true;
        i++;
    }
    return false;
}

const char *pfx_json_duplicate_key(const cJSON *object, bool *oom)
{
    *oom = false;
    size_t n = 0;
    for (const cJSON *c = object->child; c; c = c->next)
        n++;
    if (n < 2)
        return NULL;
    const char **keys = malloc(n * sizeof(*keys));
    if (!keys) {
        *oom = true;
        return NULL;
    }
    size_t i = 0;
    for (const cJSON *c = object->child; c; c = c->next)
        keys[i++] = c->string;
    qsort(keys, n, sizeof(*keys), pfx_cmp_str_ptr);
    const char *dup = NULL;
    for (i = 1; i < n && !dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0)
            dup = keys[i];
    free(keys);
    return dup;
}

const char *pfx_json_duplicate_key_deep(const cJSON *item, bool *oom)
{
    *oom = false;
    /* cJSON's nesting limit bounds the depth of this recursion. */
    const char *dup = cJSON_IsObject(item) ? pfx_json_duplicate_key(item, oom) : NULL;
    if (cJSON_IsObject(item) || cJSON_IsArray(item))
        for (const cJSON *c = item->child; c && !dup && !*oom; c = c->next)
            dup = pfx_json_duplicate_key_deep(c, oom);
    return dup;
}

char *pfx_join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t at = a;
    if (a && dir[a - 1] != '/')
        p[at++] = '/';
    memcpy(p + at, name, b + 1);
    return p;
}

pfx_status pfx_json_field_count(pfx_runtime *rt, const char *path, const cJSON *root,
                                const char *key, bool required, size_t fallback, size_t *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item || cJSON_IsNull(item)) {
        if (required)
            return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%s' is missing", path, key);
        *out = fallback;
        return PFX_SUCCESS;
    }
    uint64_t v;
    if (!pfx_json_uint(item, &v) || v == 0 || v > PFX_JSON_FIELD_MAX)
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: the field '%s' is not a positive integer (at most %llu)", path, key,
                         (unsigned long long)PFX_JSON_FIELD_MAX);
    *out = (size_t)v;
    return PFX_SUCCESS;
}

pfx_status pfx_json_field_bool(pfx_runtime *rt, const char *path, const cJSON *root,
                               const char *key, bool *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item || cJSON_IsNull(item)) {
        *out = false;
        return PFX_SUCCESS;
    }
    if (!cJSON_IsBool(item))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%s' is not true or false", path,
                         key);
    *out = cJSON_IsTrue(item);
    return PFX_SUCCESS;
}

pfx_status pfx_json_field_string(pfx_runtime *rt, const char *path, const cJSON *root,
                                 const char *key, char *out, size_t cap)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    out[0] = 0;
    if (!item || cJSON_IsNull(item))
        return PFX_SUCCESS;
    if (!cJSON_IsString(item))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%s' is not a string", path, key);
    size_t n = strlen(item->valuestring);
    if (n >= cap)
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%s' is longer than %zu bytes", path,
                         key, cap - 1);
    memcpy(out, item->valuestring, n + 1);
    return PFX_SUCCESS;
}

pfx_status pfx_json_parse_object(pfx_runtime *rt, const char *label, const unsigned char *buf,
                                 size_t size, cJSON **out)
{
    *out = NULL;
    if (!pfx_utf8_valid(buf, size))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: not valid UTF-8 (or holds a NUL byte)", label);
    if (pfx_json_has_nul_escape((const char *)buf, size))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: a string holds the escape \\u0000 (NUL)",
                         label);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)buf, size, &end, 0);
    if (!root)
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: not valid JSON", label);
    pfx_status st = PFX_SUCCESS;
    for (const char *p = end; p < (const char *)buf + size && st == PFX_SUCCESS; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: bytes after the JSON object (at byte %zu)",
                           label, (size_t)(p - (const char *)buf));
    if (st == PFX_SUCCESS && !cJSON_IsObject(root))
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: not a JSON object", label);
    if (st == PFX_SUCCESS) {
        bool oom = false;
        const char *dup = pfx_json_duplicate_key_deep(root, &oom);
        if (oom)
            st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
        else if (dup)
            st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%.64s' appears twice", label, dup);
    }
    if (st != PFX_SUCCESS) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return PFX_SUCCESS;
}
