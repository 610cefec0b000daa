/* The index of a sharded safetensors checkpoint (model.safetensors.index.json):
 * {"metadata": {...}, "weight_map": {tensor name: shard file name}}. */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

/* More tensors than any checkpoint has; keeps the duplicate check cheap. */
#define INDEX_MAX_TENSORS ((size_t)1 << 20)

void pfx_st_index_free(pfx_st_index **indexp)
{
    if (!indexp || !*indexp)
        return;
    pfx_st_index *x = *indexp;
    for (size_t i = 0; i < x->count; i++)
        free(x->names[i]);
    for (size_t i = 0; i < x->shard_count; i++)
        free(x->shards[i]);
    free(x->names);
    free(x->shard);
    free(x->shards);
    free(x);
    *indexp = NULL;
}

/* A shard is a file beside the index: a plain name, never a path. */
static bool plain_file_name(const char *s)
{
    return s[0] && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 && !strchr(s, '/') && !strchr(s, '\\');
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

pfx_status pfx_st_index_parse(pfx_runtime *rt, const unsigned char *buf, size_t size, const char *label,
                              pfx_st_index **out)
{
    *out = NULL;
    if (!label)
        label = "<memory>";
    cJSON *root = NULL;
    pfx_status st = pfx_json_parse_object(rt, label, buf, size, &root);
    if (st != PFX_SUCCESS)
        return st;
    pfx_st_index *x = NULL;
    char **sorted = NULL;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (meta && !cJSON_IsObject(meta) && !cJSON_IsNull(meta)) {
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: 'metadata' is not an object", label);
        goto out;
    }
    if (!cJSON_IsObject(map)) {
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: 'weight_map' is missing or not an object", label);
        goto out;
    }
    size_t n = 0;
    for (const cJSON *e = map->child; e; e = e->next)
        n++;
    if (n == 0 || n > INDEX_MAX_TENSORS) {
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: 'weight_map' has %zu entries (1 to %zu accepted)", label, n,
                       INDEX_MAX_TENSORS);
        goto out;
    }
    x = calloc(1, sizeof(*x));
    if (x) {
        x->names = calloc(n, sizeof(char *));
        x->shard = calloc(n, sizeof(size_t));
        x->shards = calloc(n, sizeof(char *));
    }
    sorted = calloc(n, sizeof(char *));
    if (!x || !x->names || !x->shard || !x->shards || !sorted) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for %zu entries", label, n);
        goto out;
    }
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!e->string[0]) {
            st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: 'weight_map' has an empty tensor name", label);
            goto out;
        }
        if (!cJSON_IsString(e) || !plain_file_name(e->valuestring)) {
            st = pfx_error(rt, PFX_ERROR_FORMAT,
                           "%s: the shard of tensor '%.200s' is not a file name beside the index", label,
                           e->string);
            goto out;
        }
        size_t s = 0;
        while (s < x->shard_count && strcmp(x->shards[s], e->valuestring) != 0)
            s++;
        if (s == x->shard_count) {
            if (!(x->shards[s] = strdup(e->valuestring))) {
                st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
                goto out;
            }
            x->shard_count++;
        }
        if (!(x->names[x->count] = strdup(e->string))) {
            st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
            goto out;
        }
        x->shard[x->count] = s;
        sorted[x->count] = x->names[x->count];
        x->count++;
    }
    qsort(sorted, n, sizeof(char *), cmp_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: tensor '%.200s' appears twice in 'weight_map'", label,
                           sorted[i]);
            goto out;
        }
    *out = x;
    x = NULL;
out:
    free(sorted);
    pfx_st_index_free(&x);
    cJSON_Delete(root);
    return st;
}
