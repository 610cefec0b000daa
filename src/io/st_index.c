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
    return s[0] && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 && !strchr(s, '/') &&
           !strchr(s, '\\');
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct shard_ref {
    const char *shard; /* the entry's value in the parsed JSON */
    size_t entry;
} shard_ref;

/* By shard name, then entry: the shards come out sorted by name. */
static int cmp_shard(const void *a, const void *b)
{
    const shard_ref *x = a, *y = b;
    int c = strcmp(x->shard, y->shard);
    return c ? c : (x->entry > y->entry) - (x->entry < y->entry);
}

pfx_status pfx_st_index_parse(pfx_runtime *rt, const unsigned char *buf, size_t size,
                              const char *label, pfx_st_index **out)
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
    shard_ref *by_shard = NULL;
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
        st = pfx_error(rt, PFX_ERROR_FORMAT, "%s: 'weight_map' has %zu entries (1 to %zu accepted)",
                       label, n, INDEX_MAX_TENSORS);
        goto out;
    }
    x = calloc(1, sizeof(*x));
    if (x) {
        x->names = calloc(n, sizeof(char *));
        x->shard = calloc(n, sizeof(size_t));
        x->shards = calloc(n, sizeof(char *));
    }
    sorted = calloc(n, sizeof(char *));
    by_shard = calloc(n, sizeof(*by_shard));
    if (!x || !x->names || !x->shard || !x->shards || !sorted || !by_shard) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for %zu entries", label, n);
        goto out;
    }
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!e->string[0]) {
            st =
                pfx_error(rt, PFX_ERROR_FORMAT, "%s: 'weight_map' has an empty tensor name", label);
            goto out;
        }
        if (!cJSON_IsString(e) || !plain_file_name(e->valuestring)) {
            st = pfx_error(rt, PFX_ERROR_FORMAT,
                           "%s: the shard of tensor '%.200s' is not a file name beside the index",
                           label, e->string);
            goto out;
        }
        by_shard[x->count] = (shard_ref){ e->valuestring, x->count };
        if (!(x->names[x->count] = strdup(e->string))) {
            st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
            goto out;
        }
        sorted[x->count] = x->names[x->count];
        x->count++;
    }
    /* The entries sorted by shard name give the distinct shards in n log n (a
     * checkpoint may put every tensor in a shard of its own). */
    qsort(by_shard, n, sizeof(*by_shard), cmp_shard);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(by_shard[i - 1].shard, by_shard[i].shard) != 0) {
            if (!(x->shards[x->shard_count++] = strdup(by_shard[i].shard))) {
                st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
                goto out;
            }
        }
        x->shard[by_shard[i].entry] = x->shard_count - 1;
    }
    qsort(sorted, n, sizeof(char *), cmp_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            st = pfx_error(rt, PFX_ERROR_FORMAT,
                           "%s: tensor '%.200s' appears twice in 'weight_map'", label, sorted[i]);
            goto out;
        }
    *out = x;
    x = NULL;
out:
    free(sorted);
    free(by_shard);
    pfx_st_index_free(&x);
    cJSON_Delete(root);
    return st;
}
