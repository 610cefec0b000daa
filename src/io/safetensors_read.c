/* safetensors: the validating host-side reader. */
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "safetensors_internal.h"

static const struct {
    const char *name;
    size_t size;
} dtype_table[] = {
    [PFX_ST_F32] = { "F32", 4 },         [PFX_ST_F16] = { "F16", 2 },
    [PFX_ST_BF16] = { "BF16", 2 },       [PFX_ST_F64] = { "F64", 8 },
    [PFX_ST_I64] = { "I64", 8 },         [PFX_ST_I32] = { "I32", 4 },
    [PFX_ST_I16] = { "I16", 2 },         [PFX_ST_I8] = { "I8", 1 },
    [PFX_ST_U64] = { "U64", 8 },         [PFX_ST_U32] = { "U32", 4 },
    [PFX_ST_U16] = { "U16", 2 },         [PFX_ST_U8] = { "U8", 1 },
    [PFX_ST_BOOL] = { "BOOL", 1 },       [PFX_ST_F8_E4M3] = { "F8_E4M3", 1 },
    [PFX_ST_F8_E5M2] = { "F8_E5M2", 1 },
};
#define DTYPE_COUNT (sizeof(dtype_table) / sizeof(dtype_table[0]))

const char *pfx_st_dtype_name(pfx_st_dtype dtype)
{
    return (unsigned)dtype < DTYPE_COUNT ? dtype_table[dtype].name : "?";
}

size_t pfx_st_dtype_size(pfx_st_dtype dtype)
{
    return (unsigned)dtype < DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

static bool dtype_from_name(const char *name, pfx_st_dtype *out)
{
    for (unsigned i = 0; i < DTYPE_COUNT; i++) {
        if (strcmp(dtype_table[i].name, name) == 0) {
            *out = (pfx_st_dtype)i;
            return true;
        }
    }
    return false;
}

void pfx_safetensors_close(pfx_safetensors **f)
{
    if (!f || !*f)
        return;
    pfx_safetensors *s = *f;
    for (size_t i = 0; i < s->count; i++)
        free(s->entries[i].name);
    free(s->entries);
    for (size_t i = 0; i < s->meta_count; i++) {
        free(s->meta_keys[i]);
        free(s->meta_values[i]);
    }
    free(s->meta_keys);
    free(s->meta_values);
    free(s->buf);
    free(s);
    *f = NULL;
}

/* Names in messages: at most 200 bytes. */
static int cmp_entry_offset(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* One entry of the header: {"dtype", "shape", "data_offsets"} exactly. */
static pfx_status parse_entry(pfx_runtime *rt, const char *label, const cJSON *obj,
                              size_t data_size, st_entry *e)
{
    const char *name = obj->string;
    if (!cJSON_IsObject(obj))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor " NAME_FMT " is not a JSON object",
                         label, name);
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const cJSON *c = obj->child; c; c = c->next) {
        const cJSON **slot = NULL;
        if (strcmp(c->string, "dtype") == 0)
            slot = &dtype;
        else if (strcmp(c->string, "shape") == 0)
            slot = &shape;
        else if (strcmp(c->string, "data_offsets") == 0)
            slot = &offsets;
        if (!slot)
            return pfx_error(rt, PFX_ERROR_FORMAT,
                             "%s: tensor " NAME_FMT " has an unknown field " NAME_FMT, label, name,
                             c->string);
        if (*slot)
            return pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor " NAME_FMT " has field '%s' twice",
                             label, name, c->string);
        *slot = c;
    }
    if (!dtype || !shape || !offsets)
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor " NAME_FMT " lacks the field '%s'",
                         label, name,
                         !dtype   ? "dtype"
                         : !shape ? "shape"
                                  : "data_offsets");

    if (!cJSON_IsString(dtype))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor " NAME_FMT ": dtype is not a string",
                         label, name);
    if (!dtype_from_name(dtype->valuestring, &e->dtype))
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                         "%s: tensor " NAME_FMT ": unknown dtype " NAME_FMT, label, name,
                         dtype->valuestring);

    if (!cJSON_IsArray(shape))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor " NAME_FMT ": shape is not an array",
                         label, name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > PFX_ST_MAX_DIMS)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: tensor " NAME_FMT ": %d dimensions, at most %d", label, name, ndim,
                         PFX_ST_MAX_DIMS);
    e->ndim = (unsigned)ndim;
    size_t numel = 1;
    unsigned k = 0;
    for (const cJSON *c = shape->child; c; c = c->next, k++) {
        uint64_t v;
        if (cJSON_IsNumber(c) && c->valuedouble > PFX_JSON_MAX_INT)
            return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                             "%s: tensor " NAME_FMT ": shape[%u] is absurd (above 2^53)", label,
                             name, k);
        if (!pfx_json_uint(c, &v))
            return pfx_error(rt, PFX_ERROR_FORMAT,
                             "%s: tensor " NAME_FMT ": shape[%u] is not a non-negative integer",
                             label, name, k);
        if (v > SIZE_MAX || pfx_mul_overflows(numel, (size_t)v, &numel))
            return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                             "%s: tensor " NAME_FMT ": the shape's element count overflows", label,
                             name);
        e->shape[k] = (size_t)v;
    }
    e->numel = numel;
    size_t bytes;
    if (pfx_mul_overflows(numel, pfx_st_dtype_size(e->dtype), &bytes))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                         "%s: tensor " NAME_FMT ": the byte size overflows", label, name);

    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: tensor " NAME_FMT ": data_offsets is not [begin, end]", label, name);
    uint64_t b, en;
    if ((cJSON_IsNumber(offsets->child) && offsets->child->valuedouble > PFX_JSON_MAX_INT) ||
        (cJSON_IsNumber(offsets->child->next) &&
         offsets->child->next->valuedouble > PFX_JSON_MAX_INT))
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: tensor " NAME_FMT
                         ": data_offsets lie outside the data section of %zu bytes (above 2^53)",
                         label, name, data_size);
    if (!pfx_json_uint(offsets->child, &b) || !pfx_json_uint(offsets->child->next, &en))
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: tensor " NAME_FMT ": data_offsets are not non-negative integers",
                         label, name);
    if (en < b)
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: tensor " NAME_FMT ": data_offsets [%llu, %llu) end before they begin",
                         label, name, (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: tensor " NAME_FMT
                         ": data_offsets [%llu, %llu) lie outside the data section of %zu bytes",
                         label, name, (unsigned long long)b, (unsigned long long)en, data_size);
    e->begin = (size_t)b;
    e->end = (size_t)en;
    if (e->end - e->begin != bytes)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: tensor " NAME_FMT ": %zu bytes for %zu elements of %s (%zu expected)",
                         label, name, e->end - e->begin, numel, pfx_st_dtype_name(e->dtype), bytes);
    return PFX_SUCCESS;
}

static pfx_status parse_metadata(pfx_runtime *rt, const char *label, const cJSON *obj,
                                 pfx_safetensors *s)
{
    if (!cJSON_IsObject(obj))
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: __metadata__ is not a JSON object", label);
    size_t n = (size_t)cJSON_GetArraySize(obj);
    if (n == 0)
        return PFX_SUCCESS;
    s->meta_keys = calloc(n, sizeof(char *));
    s->meta_values = calloc(n, sizeof(char *));
    if (!s->meta_keys || !s->meta_values)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for metadata", label);
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return pfx_error(rt, PFX_ERROR_FORMAT,
                             "%s: __metadata__ value of " NAME_FMT " is not a string", label,
                             c->string);
        size_t i = s->meta_count;
        s->meta_keys[i] = strdup(c->string);
        s->meta_values[i] = strdup(c->valuestring);
        s->meta_count++;
        if (!s->meta_keys[i] || !s->meta_values[i])
            return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for metadata", label);
    }
    char **sorted = malloc(n * sizeof(char *));
    if (!sorted)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for metadata", label);
    memcpy(sorted, s->meta_keys, n * sizeof(char *));
    qsort(sorted, n, sizeof(char *), pfx_cmp_str_ptr);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            pfx_status st =
                pfx_error(rt, PFX_ERROR_FORMAT, "%s: __metadata__ key " NAME_FMT " appears twice",
                          label, sorted[i]);
            free(sorted);
            return st;
        }
    }
    free(sorted);
    return PFX_SUCCESS;
}

static pfx_status parse_header(pfx_runtime *rt, const char *label, pfx_safetensors *s,
                               const unsigned char *hdr, size_t hlen)
{
    if (hlen == 0 || hdr[0] != '{')
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the JSON header does not start with '{'",
                         label);
    if (!pfx_utf8_valid(hdr, hlen))
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: the header is not valid UTF-8 (or holds a NUL byte)", label);
    if (pfx_json_has_nul_escape((const char *)hdr, hlen))
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: a name or metadata string holds the escape \\u0000 (NUL)", label);
    /* A NUL-terminated copy: cJSON never reads past it. */
    char *text = malloc(hlen + 1);
    if (!text)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: %zu bytes of host memory for the header",
                         label, hlen);
    memcpy(text, hdr, hlen);
    text[hlen] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, hlen, &end, 0);
    pfx_status st = PFX_SUCCESS;
    if (!root) {
        size_t at = end && end >= text && end <= text + hlen ? (size_t)(end - text) : 0;
        const char *err = cJSON_GetErrorPtr();
        if (err && err >= text && err <= text + hlen)
            at = (size_t)(err - text);
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: the header is not valid JSON (near byte %zu)",
                       label, at);
        goto out;
    }
    for (const char *p = end; p < text + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: bytes after the JSON header (at byte %zu)",
                           label, (size_t)(p - text));
            goto out;
        }
    }
    if (!cJSON_IsObject(root)) {
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: the header is not a JSON object", label);
        goto out;
    }
    size_t n = 0;
    bool seen_meta = false;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            if (seen_meta) {
                st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: __metadata__ appears twice", label);
                goto out;
            }
            seen_meta = true;
            if ((st = parse_metadata(rt, label, c, s)) != PFX_SUCCESS)
                goto out;
        } else {
            n++;
        }
    }
    if (n) {
        s->entries = calloc(n, sizeof(st_entry));
        if (!s->entries) {
            st =
                pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for %zu tensors", label, n);
            goto out;
        }
    }
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0)
            continue;
        st_entry *e = &s->entries[s->count];
        if ((st = parse_entry(rt, label, c, s->data_size, e)) != PFX_SUCCESS)
            goto out;
        if (!(e->name = strdup(c->string))) {
            st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for names", label);
            goto out;
        }
        s->count++;
    }

    /* Unique names; then the data section covered exactly, without overlap. */
    if (n) {
        void **idx = malloc(n * sizeof(void *));
        if (!idx) {
            st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            idx[i] = s->entries[i].name;
        qsort(idx, n, sizeof(void *), pfx_cmp_str_ptr);
        for (size_t i = 1; i < n && st == PFX_SUCCESS; i++)
            if (strcmp(idx[i - 1], idx[i]) == 0)
                st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor name " NAME_FMT " appears twice",
                               label, (const char *)idx[i]);
        if (st == PFX_SUCCESS) {
            for (size_t i = 0; i < n; i++)
                idx[i] = &s->entries[i];
            qsort(idx, n, sizeof(void *), cmp_entry_offset);
            size_t pos = 0;
            for (size_t i = 0; i < n && st == PFX_SUCCESS; i++) {
                const st_entry *e = idx[i];
                if (e->begin < pos)
                    st = pfx_error(rt, PFX_ERROR_FORMAT,
                                   "%s: tensors " NAME_FMT " and " NAME_FMT
                                   " overlap in the data section",
                                   label, ((const st_entry *)idx[i - 1])->name, e->name);
                else if (e->begin > pos)
                    st = pfx_error(rt, PFX_ERROR_FORMAT,
                                   "%s: data bytes [%zu, %zu) before tensor " NAME_FMT
                                   " belong to no tensor",
                                   label, pos, e->begin, e->name);
                if (e->end > pos)
                    pos = e->end;
            }
            if (st == PFX_SUCCESS && pos != s->data_size)
                st = pfx_error(rt, PFX_ERROR_FORMAT,
                               "%s: data bytes [%zu, %zu) at the end belong to no tensor", label,
                               pos, s->data_size);
        }
        free(idx);
    } else if (s->data_size != 0) {
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: %zu data bytes but no tensor", label,
                       s->data_size);
    }
out:
    cJSON_Delete(root);
    free(text);
    return st;
}

pfx_status pfx_st_parse_owned(pfx_runtime *rt, unsigned char *buf, size_t size, const char *label,
                              pfx_safetensors **out)
{
    *out = NULL;
    if (!label)
        label = "<memory>";
    if (size < 8) {
        free(buf);
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: truncated: %zu bytes, fewer than the 8-byte header length", label,
                         size);
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | buf[i];
    if (hlen > PFX_ST_MAX_HEADER) {
        free(buf);
        /* the length is the file's first 8 bytes: not quoted, since a file
         * that is no safetensors would have its content printed */
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: not a safetensors file: the header length (its first 8 bytes) is "
                         "absurd, more than %llu bytes",
                         label, (unsigned long long)PFX_ST_MAX_HEADER);
    }
    if (hlen > size - 8) {
        free(buf);
        return pfx_error(rt, PFX_ERROR_FORMAT,
                         "%s: truncated, or not a safetensors file: the header length (its first "
                         "8 bytes) runs past the end of the file (%zu bytes)",
                         label, size);
    }
    pfx_safetensors *s = calloc(1, sizeof(*s));
    if (!s) {
        free(buf);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
    }
    s->buf = buf;
    s->size = size;
    s->data = buf + 8 + hlen;
    s->data_size = size - 8 - (size_t)hlen;
    pfx_status st = parse_header(rt, label, s, buf + 8, (size_t)hlen);
    if (st != PFX_SUCCESS) {
        pfx_safetensors_close(&s);
        return st;
    }
    *out = s;
    return PFX_SUCCESS;
}

pfx_status pfx_st_open_rt(pfx_runtime *rt, const char *path, pfx_safetensors **out)
{
    if (!out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_open: out is NULL");
    *out = NULL;
    if (!path)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_open: path is NULL");
    unsigned char *buf;
    size_t size;
    /* The header is capped; the data is limited by memory only. */
    pfx_status st = pfx_read_file(rt, path, SIZE_MAX - 1, &buf, &size);
    if (st != PFX_SUCCESS)
        return st;
    return pfx_st_parse_owned(rt, buf, size, path, out);
}

pfx_status pfx_safetensors_open(const char *path, pfx_safetensors **out)
{
    return pfx_st_open_rt(NULL, path, out);
}

pfx_status pfx_safetensors_open_memory(const void *data, size_t size, const char *label,
                                       pfx_safetensors **out)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_open_memory: out is NULL");
    *out = NULL;
    if (!data && size)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_safetensors_open_memory: data is NULL");
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_safetensors_open_memory: %zu bytes",
                         size);
    if (size)
        memcpy(buf, data, size);
    return pfx_st_parse_owned(NULL, buf, size, label, out);
}

size_t pfx_safetensors_count(const pfx_safetensors *f)
{
    return f ? f->count : 0;
}

pfx_status pfx_safetensors_info(const pfx_safetensors *f, size_t i, pfx_st_info *info)
{
    if (!f || !info)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_info: %s is NULL",
                         !f ? "f" : "info");
    if (i >= f->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "pfx_safetensors_info: index %zu, the file has %zu tensors", i, f->count);
    const st_entry *e = &f->entries[i];
    memset(info, 0, sizeof(*info));
    info->name = e->name;
    info->dtype = e->dtype;
    info->ndim = e->ndim;
    memcpy(info->shape, e->shape, sizeof(info->shape));
    info->numel = e->numel;
    info->bytes = e->end - e->begin;
    return PFX_SUCCESS;
}

long pfx_safetensors_find(const pfx_safetensors *f, const char *name)
{
    if (!f || !name)
        return -1;
    for (size_t i = 0; i < f->count; i++)
        if (strcmp(f->entries[i].name, name) == 0)
            return (long)i;
    return -1;
}

const void *pfx_safetensors_data(const pfx_safetensors *f, size_t i)
{
    if (!f || i >= f->count)
        return NULL;
    return f->data + f->entries[i].begin;
}

pfx_status pfx_st_read_f32_rt(pfx_runtime *rt, const pfx_safetensors *f, size_t index, float *dst,
                              size_t count)
{
    const st_entry *e = &f->entries[index];
    if (!pfx_st_is_float(e->dtype))
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                         "tensor " NAME_FMT " is %s, not a float type", e->name,
                         pfx_st_dtype_name(e->dtype));
    if (count != e->numel)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "tensor " NAME_FMT " has %zu elements, %zu asked for", e->name, e->numel,
                         count);
    const unsigned char *p = f->data + e->begin;
    for (size_t i = 0; i < count; i++) {
        switch (e->dtype) {
        case PFX_ST_F32: {
            const unsigned char *b = p + 4 * i;
            uint32_t u =
                (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
            memcpy(&dst[i], &u, 4);
            break;
        }
        case PFX_ST_F16: {
            const unsigned char *b = p + 2 * i;
            dst[i] = pfx_half_to_float((uint16_t)(b[0] | b[1] << 8));
            break;
        }
        case PFX_ST_BF16: {
            const unsigned char *b = p + 2 * i;
            uint32_t u = ((uint32_t)b[0] | (uint32_t)b[1] << 8) << 16;
            memcpy(&dst[i], &u, 4);
            break;
        }
        default: { /* F64 */
            const unsigned char *b = p + 8 * i;
            uint64_t u = 0;
            for (int k = 7; k >= 0; k--)
                u = (u << 8) | b[k];
            double d;
            memcpy(&d, &u, 8);
            dst[i] = (float)d;
            break;
        }
        }
    }
    return PFX_SUCCESS;
}

pfx_status pfx_safetensors_read_f32(const pfx_safetensors *f, const char *name, float *dst,
                                    size_t count)
{
    if (!f || !name || (!dst && count))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_read_f32: %s is NULL",
                         !f      ? "f"
                         : !name ? "name"
                                 : "dst");
    long i = pfx_safetensors_find(f, name);
    if (i < 0)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "no tensor named " NAME_FMT " in the file", name);
    return pfx_st_read_f32_rt(NULL, f, (size_t)i, dst, count);
}

size_t pfx_safetensors_metadata_count(const pfx_safetensors *f)
{
    return f ? f->meta_count : 0;
}

pfx_status pfx_safetensors_metadata(const pfx_safetensors *f, size_t i, const char **key,
                                    const char **value)
{
    if (!f || !key || !value)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_metadata: NULL argument");
    if (i >= f->meta_count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "metadata index %zu, the file has %zu entries", i, f->meta_count);
    *key = f->meta_keys[i];
    *value = f->meta_values[i];
    return PFX_SUCCESS;
}

const char *pfx_safetensors_metadata_get(const pfx_safetensors *f, const char *key)
{
    if (!f || !key)
        return NULL;
    for (size_t i = 0; i < f->meta_count; i++)
        if (strcmp(f->meta_keys[i], key) == 0)
            return f->meta_values[i];
    return NULL;
}
