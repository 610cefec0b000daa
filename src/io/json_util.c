/* Helpers shared by the safetensors and PEFT readers and writers. */
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
        len = 2; v = c & 0x1f; min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3; v = c & 0x0f; min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4; v = c & 0x07; min = 0x10000;
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

pfx_status pfx_read_file(pfx_runtime *rt, const char *path, size_t max_bytes,
                         unsigned char **out, size_t *size)
{
    *out = NULL;
    *size = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return pfx_error(rt, PFX_ERROR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return pfx_error(rt, PFX_ERROR_IO, "'%s' is not a regular file", path);
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)max_bytes) {
        fclose(fp);
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "'%s' has %lld bytes, more than the %zu accepted",
                         path, (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n + 1);
    if (!buf) {
        fclose(fp);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "reading '%s': %zu bytes of host memory", path, n + 1);
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

pfx_status pfx_atomic_begin(pfx_runtime *rt, const char *path, pfx_atomic_file *af)
{
    memset(af, 0, sizeof(*af));
    size_t len = strlen(path);
    af->path = malloc(len + 1);
    af->tmp_path = malloc(len + 16);
    if (!af->path || !af->tmp_path) {
        pfx_atomic_abort(af);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "writing '%s': host memory", path);
    }
    memcpy(af->path, path, len + 1);
    snprintf(af->tmp_path, len + 16, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(af->tmp_path);
    if (fd < 0) {
        pfx_status st = pfx_error(rt, PFX_ERROR_IO, "cannot create a temporary file for '%s': %s",
                                  path, strerror(errno));
        free(af->tmp_path);
        af->tmp_path = NULL;
        pfx_atomic_abort(af);
        return st;
    }
    (void)fchmod(fd, 0644);
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        close(fd);
        pfx_atomic_abort(af);
        return pfx_error(rt, PFX_ERROR_IO, "cannot open a temporary file for '%s'", path);
    }
    return PFX_SUCCESS;
}

pfx_status pfx_atomic_write(pfx_runtime *rt, pfx_atomic_file *af, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, af->fp) != n)
        return pfx_error(rt, PFX_ERROR_IO, "writing '%s': %s", af->path, strerror(errno));
    return PFX_SUCCESS;
}

pfx_status pfx_atomic_commit(pfx_runtime *rt, pfx_atomic_file *af)
{
    pfx_status st = PFX_SUCCESS;
    if (fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0)
        st = pfx_error(rt, PFX_ERROR_IO, "writing '%s': %s", af->path, strerror(errno));
    if (fclose(af->fp) != 0 && st == PFX_SUCCESS)
        st = pfx_error(rt, PFX_ERROR_IO, "closing '%s': %s", af->path, strerror(errno));
    af->fp = NULL;
    if (st == PFX_SUCCESS && rename(af->tmp_path, af->path) != 0)
        st = pfx_error(rt, PFX_ERROR_IO, "cannot rename '%s' to '%s': %s", af->tmp_path, af->path,
                       strerror(errno));
    if (st == PFX_SUCCESS) {
        free(af->tmp_path);
        af->tmp_path = NULL;
    }
    pfx_atomic_abort(af);
    return st;
}

void pfx_atomic_abort(pfx_atomic_file *af)
{
    if (af->fp)
        fclose(af->fp);
    if (af->tmp_path)
        unlink(af->tmp_path);
    free(af->tmp_path);
    free(af->path);
    memset(af, 0, sizeof(*af));
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

pfx_status pfx_json_field_count(pfx_runtime *rt, const char *path, const cJSON *root, const char *key,
                              bool required, size_t fallback, size_t *out)
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
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%s' is not a positive integer (at most %llu)",
                         path, key, (unsigned long long)PFX_JSON_FIELD_MAX);
    *out = (size_t)v;
    return PFX_SUCCESS;
}

pfx_status pfx_json_field_bool(pfx_runtime *rt, const char *path, const cJSON *root, const char *key, bool *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item || cJSON_IsNull(item)) {
        *out = false;
        return PFX_SUCCESS;
    }
    if (!cJSON_IsBool(item))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%s' is not true or false", path, key);
    *out = cJSON_IsTrue(item);
    return PFX_SUCCESS;
}

pfx_status pfx_json_field_string(pfx_runtime *rt, const char *path, const cJSON *root, const char *key, char *out,
                               size_t cap)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    out[0] = 0;
    if (!item || cJSON_IsNull(item))
        return PFX_SUCCESS;
    if (!cJSON_IsString(item))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%s' is not a string", path, key);
    size_t n = strlen(item->valuestring);
    if (n >= cap)
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%s' is longer than %zu bytes", path, key, cap - 1);
    memcpy(out, item->valuestring, n + 1);
    return PFX_SUCCESS;
}

pfx_status pfx_json_parse_object(pfx_runtime *rt, const char *label, const unsigned char *buf, size_t size,
                                 cJSON **out)
{
    *out = NULL;
    if (!pfx_utf8_valid(buf, size))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: not valid UTF-8 (or holds a NUL byte)", label);
    cJSON *root = cJSON_ParseWithLength((const char *)buf, size);
    if (!root)
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: not valid JSON", label);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: not a JSON object", label);
    }
    for (const cJSON *a = root->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (strcmp(a->string, b->string) == 0) {
                pfx_status st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: the field '%.64s' appears twice", label,
                                          a->string);
                cJSON_Delete(root);
                return st;
            }
    *out = root;
    return PFX_SUCCESS;
}
