/* The KV cache of served requests: per slot and layer the keys and values
 * of the tokens seen so far, in tensors allocated once at their maximum
 * length and filled in place (a token's row is written once, by the step
 * that computes it), stored float32, half or bfloat16. Prefixes are not in
 * here: they stay in their bank, float32. */
#include <stdlib.h>
#include <string.h>

#include "serve_internal.h"

pfx_status pfx_kv_cache_create(pfx_model *model, size_t slots, size_t max_len, pfx_kv_cache **out)
{
    return pfx_kv_cache_create_dtype(model, slots, max_len, PFX_DTYPE_F32, out);
}

pfx_status pfx_kv_cache_create_dtype(pfx_model *model, size_t slots, size_t max_len,
                                     pfx_dtype dtype, pfx_kv_cache **out)
{
    static const char fn[] = "kv_cache_create";
    if (!out)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: model is NULL", fn);
    pfx_runtime *rt = model->rt;
    const pfx_model_shape *s = &model->cfg.shape;
    if (!pfx_kv_dtype_valid(dtype))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: dtype %d is not F32, F16 or BF16", fn,
                         (int)dtype);
    if (slots == 0 || slots > INT32_MAX)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: slots %zu outside 1..%d", fn, slots,
                         INT32_MAX);
    if (max_len == 0 || max_len > s->max_positions || max_len > INT32_MAX / 2)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: max_len %zu outside 1..%zu (the model's positions)", fn, max_len,
                         s->max_positions);
    if (model->cfg.sliding_window && max_len > model->cfg.sliding_window)
        return pfx_error(
            rt, PFX_ERROR_UNSUPPORTED,
            "%s: max_len %zu is longer than the model's sliding_window %zu (not computed)", fn,
            max_len, model->cfg.sliding_window);
    pfx_kv_cache *c = calloc(1, sizeof(*c));
    if (c) {
        c->model = model;
        c->keys = calloc(s->layers, sizeof(*c->keys));
        c->values = calloc(s->layers, sizeof(*c->values));
        c->len = calloc(slots, sizeof(*c->len));
        c->adapter = calloc(slots, sizeof(*c->adapter));
    }
    if (!c || !c->keys || !c->values || !c->len || !c->adapter) {
        pfx_kv_cache_destroy(&c);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    }
    c->slots = slots;
    c->max_len = max_len;
    c->dtype = dtype;
    for (size_t i = 0; i < slots; i++)
        c->adapter[i] = -1;
    const size_t shape[4] = { slots, max_len, s->kv_heads, s->head_dim };
    pfx_status st = PFX_SUCCESS;
    for (size_t l = 0; st == PFX_SUCCESS && l < s->layers; l++)
        if ((st = pfx_tensor_create(rt, dtype, 4, shape, &c->keys[l])) == PFX_SUCCESS)
            st = pfx_tensor_create(rt, dtype, 4, shape, &c->values[l]);
    if (st != PFX_SUCCESS) {
        pfx_kv_cache_destroy(&c);
        return st;
    }
    *out = c;
    return PFX_SUCCESS;
}

void pfx_kv_cache_destroy(pfx_kv_cache **cache)
{
    if (!cache || !*cache)
        return;
    pfx_kv_cache *c = *cache;
    for (size_t l = 0; c->model && l < c->model->cfg.shape.layers; l++) {
        if (c->keys)
            pfx_tensor_destroy(&c->keys[l]);
        if (c->values)
            pfx_tensor_destroy(&c->values[l]);
    }
    free(c->keys);
    free(c->values);
    free(c->len);
    free(c->adapter);
    free(c);
    *cache = NULL;
}

pfx_dtype pfx_kv_cache_dtype(const pfx_kv_cache *cache)
{
    return cache ? cache->dtype : PFX_DTYPE_F32;
}

size_t pfx_kv_cache_len(const pfx_kv_cache *cache, size_t slot)
{
    return cache && slot < cache->slots ? cache->len[slot] : 0;
}

pfx_status pfx_kv_cache_reset(pfx_kv_cache *cache, size_t slot)
{
    if (!cache)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "kv_cache_reset: cache is NULL");
    if (slot >= cache->slots)
        return pfx_error(cache->model->rt, PFX_ERROR_OUT_OF_RANGE,
                         "kv_cache_reset: slot %zu outside [0, %zu)", slot, cache->slots);
    cache->len[slot] = 0;
    cache->adapter[slot] = -1;
    return PFX_SUCCESS;
}

size_t pfx_kv_cache_bytes(const pfx_kv_cache *cache)
{
    size_t sum = 0;
    for (size_t l = 0; cache && l < cache->model->cfg.shape.layers; l++)
        sum += cache->keys[l]->bytes + cache->values[l]->bytes;
    return sum;
}

uint64_t pfx_kv_cache_rows_written(const pfx_kv_cache *cache)
{
    return cache ? cache->rows_written : 0;
}

pfx_status pfx_kv_cache_layer(const pfx_kv_cache *cache, size_t layer, const pfx_tensor **keys,
                              const pfx_tensor **values)
{
    if (!cache || !keys || !values)
        return pfx_error(cache ? cache->model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "kv_cache_layer: %s is NULL",
                         !cache  ? "cache"
                         : !keys ? "keys"
                                 : "values");
    if (layer >= cache->model->cfg.shape.layers)
        return pfx_error(cache->model->rt, PFX_ERROR_OUT_OF_RANGE,
                         "kv_cache_layer: layer %zu outside [0, %zu)", layer,
                         cache->model->cfg.shape.layers);
    *keys = cache->keys[layer];
    *values = cache->values[layer];
    return PFX_SUCCESS;
}
