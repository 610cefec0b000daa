/* safetensors: the atomic writer. */
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "safetensors_internal.h"

typedef struct save_item {
    pfx_st_dtype dtype;
    unsigned ndim;
    size_t shape[PFX_MAX_DIMS];
    size_t numel;
    size_t bytes;
} save_item;

static pfx_status check_item(pfx_runtime *rt, const pfx_named_tensor *it, size_t i, save_item *out)
{
    if (!it->name)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_safetensors_save: items[%zu].name is NULL", i);
    size_t nlen = strlen(it->name);
    if (nlen == 0 || strcmp(it->name, "__metadata__") == 0 ||
        !pfx_utf8_valid((const unsigned char *)it->name, nlen))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_safetensors_save: items[%zu].name " NAME_FMT
                         " is empty, reserved or not UTF-8",
                         i, it->name);
    pfx_dtype dt;
    if (it->tensor) {
        if (it->tensor->rt != rt)
            return pfx_error(rt, rt ? PFX_ERROR_RUNTIME_MISMATCH : PFX_ERROR_NULL_ARGUMENT,
                             "pfx_safetensors_save: tensor " NAME_FMT " %s", it->name,
                             rt ? "belongs to another runtime"
                                : "is a device tensor but rt is NULL");
        dt = it->tensor->dtype;
        out->ndim = it->tensor->ndim;
        memcpy(out->shape, it->tensor->shape, sizeof(out->shape));
        out->numel = it->tensor->numel;
    } else {
        if (!it->host)
            return pfx_error(
                rt, PFX_ERROR_NULL_ARGUMENT,
                "pfx_safetensors_save: " NAME_FMT " has neither a tensor nor host data", it->name);
        if (it->ndim > PFX_MAX_DIMS)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                             "pfx_safetensors_save: " NAME_FMT ": ndim %u > %d", it->name, it->ndim,
                             PFX_MAX_DIMS);
        dt = it->dtype;
        out->ndim = it->ndim;
        out->numel = 1;
        for (unsigned k = 0; k < it->ndim; k++) {
            out->shape[k] = it->shape[k];
            if (pfx_mul_overflows(out->numel, it->shape[k], &out->numel))
                return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                                 "pfx_safetensors_save: " NAME_FMT
                                 ": the shape's element count overflows",
                                 it->name);
        }
        if ((double)out->numel * 4.0 > PFX_JSON_MAX_INT)
            return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                             "pfx_safetensors_save: " NAME_FMT " is too large", it->name);
    }
    if (dt == PFX_DTYPE_F32)
        out->dtype = PFX_ST_F32;
    else if (dt == PFX_DTYPE_F16)
        out->dtype = PFX_ST_F16;
    else if (dt == PFX_DTYPE_BF16)
        out->dtype = PFX_ST_BF16;
    else
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                         "pfx_safetensors_save: " NAME_FMT ": dtype %s (%d) is not saved (F32, F16 "
                         "or BF16)",
                         it->name, pfx_dtype_name(dt), (int)dt);
    if (pfx_mul_overflows(out->numel, pfx_st_dtype_size(out->dtype), &out->bytes))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                         "pfx_safetensors_save: " NAME_FMT " is too large", it->name);
    return PFX_SUCCESS;
}

static pfx_status build_header(pfx_runtime *rt, const pfx_named_tensor *items, const save_item *si,
                               size_t count, const pfx_st_metadata *meta, size_t nmeta, char **out)
{
    *out = NULL;
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && nmeta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        ok = m != NULL;
        for (size_t i = 0; ok && i < nmeta; i++)
            ok = cJSON_AddStringToObject(m, meta[i].key, meta[i].value) != NULL;
    }
    size_t offset = 0;
    for (size_t i = 0; ok && i < count; i++) {
        cJSON *t = cJSON_AddObjectToObject(root, items[i].name);
        ok = t && cJSON_AddStringToObject(t, "dtype", pfx_st_dtype_name(si[i].dtype));
        cJSON *shape = ok ? cJSON_AddArrayToObject(t, "shape") : NULL;
        ok = ok && shape;
        for (unsigned k = 0; ok && k < si[i].ndim; k++) {
            cJSON *v = cJSON_CreateNumber((double)si[i].shape[k]);
            ok = v && cJSON_AddItemToArray(shape, v);
        }
        cJSON *offs = ok ? cJSON_AddArrayToObject(t, "data_offsets") : NULL;
        ok = ok && offs;
        cJSON *b = ok ? cJSON_CreateNumber((double)offset) : NULL;
        ok = ok && b && cJSON_AddItemToArray(offs, b);
        offset += si[i].bytes;
        cJSON *e = ok ? cJSON_CreateNumber((double)offset) : NULL;
        ok = ok && e && cJSON_AddItemToArray(offs, e);
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY,
                         "pfx_safetensors_save: building the JSON header");
    *out = text;
    return PFX_SUCCESS;
}

static void put_le(unsigned char *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

pfx_status pfx_safetensors_save(pfx_runtime *rt, const char *path, const pfx_named_tensor *items,
                                size_t count, const pfx_st_metadata *metadata,
                                size_t metadata_count)
{
    if (!path)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_save: path is NULL");
    if ((!items && count) || (!metadata && metadata_count))
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_save: %s is NULL",
                         !items && count ? "items" : "metadata");
    save_item *si = calloc(count ? count : 1, sizeof(save_item));
    const char **names = calloc(count + metadata_count + 1, sizeof(char *));
    char *header = NULL;
    float *host = NULL;
    unsigned char *bytes = NULL;
    pfx_atomic_file af = { 0 };
    pfx_status st = PFX_SUCCESS;
    if (!si || !names) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_safetensors_save: host memory");
        goto out;
    }
    size_t total = 0, largest = 0;
    for (size_t i = 0; i < count; i++) {
        if ((st = check_item(rt, &items[i], i, &si[i])) != PFX_SUCCESS)
            goto out;
        if (__builtin_add_overflow(total, si[i].bytes, &total) ||
            (double)total > PFX_JSON_MAX_INT) {
            st = pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                           "pfx_safetensors_save: the data is too large");
            goto out;
        }
        if (si[i].numel > largest)
            largest = si[i].numel;
        names[i] = items[i].name;
    }
    qsort(names, count, sizeof(char *), pfx_cmp_str_ptr);
    for (size_t i = 1; i < count; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            st =
                pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                          "pfx_safetensors_save: tensor name " NAME_FMT " appears twice", names[i]);
            goto out;
        }
    }
    for (size_t i = 0; i < metadata_count; i++) {
        const char *k = metadata[i].key, *v = metadata[i].value;
        if (!k || !v) {
            st = pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                           "pfx_safetensors_save: metadata[%zu] has a NULL %s", i,
                           !k ? "key" : "value");
            goto out;
        }
        if (!pfx_utf8_valid((const unsigned char *)k, strlen(k)) ||
            !pfx_utf8_valid((const unsigned char *)v, strlen(v))) {
            st = pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                           "pfx_safetensors_save: metadata " NAME_FMT " is not UTF-8", k);
            goto out;
        }
        names[i] = k;
    }
    qsort(names, metadata_count, sizeof(char *), pfx_cmp_str_ptr);
    for (size_t i = 1; i < metadata_count; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            st = pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                           "pfx_safetensors_save: metadata key " NAME_FMT " appears twice",
                           names[i]);
            goto out;
        }
    }
    if ((st = build_header(rt, items, si, count, metadata, metadata_count, &header)) != PFX_SUCCESS)
        goto out;
    size_t hlen = strlen(header), padded = (hlen + 7) & ~(size_t)7;
    host = malloc((largest ? largest : 1) * sizeof(float));
    bytes = malloc((largest ? largest : 1) * 4);
    if (!host || !bytes) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_safetensors_save: host memory");
        goto out;
    }
    if ((st = pfx_atomic_begin(rt, path, &af)) != PFX_SUCCESS)
        goto out;
    unsigned char len8[8];
    put_le(len8, padded, 8);
    static const char spaces[8] = "        ";
    if ((st = pfx_atomic_write(rt, &af, len8, 8)) != PFX_SUCCESS ||
        (st = pfx_atomic_write(rt, &af, header, hlen)) != PFX_SUCCESS ||
        (st = pfx_atomic_write(rt, &af, spaces, padded - hlen)) != PFX_SUCCESS)
        goto out;
    for (size_t i = 0; i < count; i++) {
        const float *src = items[i].host;
        if (items[i].tensor) {
            if ((st = pfx_tensor_read(items[i].tensor, 0, si[i].numel, host)) != PFX_SUCCESS)
                goto out;
            src = host;
        }
        for (size_t k = 0; k < si[i].numel; k++) {
            if (si[i].dtype == PFX_ST_F32) {
                uint32_t u;
                memcpy(&u, &src[k], 4);
                put_le(bytes + 4 * k, u, 4);
            } else {
                put_le(bytes + 2 * k, pfx_float_to_16bit(src[k], si[i].dtype == PFX_ST_BF16), 2);
            }
        }
        if ((st = pfx_atomic_write(rt, &af, bytes, si[i].bytes)) != PFX_SUCCESS)
            goto out;
    }
    st = pfx_atomic_commit(rt, &af);
out:
    if (st != PFX_SUCCESS)
        pfx_atomic_abort(&af);
    free(si);
    free(names);
    free(header);
    free(host);
    free(bytes);
    return st;
}
