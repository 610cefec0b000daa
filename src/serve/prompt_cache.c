/* The prompt cache (prompt_cache.h). Each entry holds its rows in one
 * device buffer of the KV cache's dtype, layer by layer: keys
 * [len, Hkv * D], then values. */
#include <stdlib.h>
#include <string.h>

#include "prompt_cache.h"

typedef struct entry {
    int32_t adapter;
    int32_t *tokens;
    size_t len, bytes;
    pfx_tensor *rows;
    uint64_t used; /* the clock of its last use */
} entry;

struct prompt_cache {
    pfx_model *model;
    size_t budget, bytes, row; /* row: bytes of one token in one layer's keys */
    pfx_dtype dtype;           /* the KV cache's */
    entry *e;
    size_t count, cap;
    uint64_t clock;
};

prompt_cache *prompt_cache_create(pfx_model *model, pfx_dtype dtype, size_t budget)
{
    if (!budget)
        return NULL;
    prompt_cache *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return NULL;
    const pfx_model_shape *s = &model->cfg.shape;
    pc->model = model;
    pc->budget = budget;
    pc->dtype = dtype;
    pc->row = s->kv_heads * s->head_dim * pfx_dtype_size(dtype);
    return pc;
}

static void drop(prompt_cache *pc, size_t i)
{
    pc->bytes -= pc->e[i].bytes;
    pfx_tensor_destroy(&pc->e[i].rows);
    free(pc->e[i].tokens);
    pc->e[i] = pc->e[--pc->count];
}

void prompt_cache_clear(prompt_cache *pc)
{
    while (pc && pc->count)
        drop(pc, pc->count - 1);
}

void prompt_cache_destroy(prompt_cache **pcp)
{
    if (!pcp || !*pcp)
        return;
    prompt_cache_clear(*pcp);
    free((*pcp)->e);
    free(*pcp);
    *pcp = NULL;
}

static size_t common(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t n = 0;
    while (n < na && n < nb && a[n] == b[n])
        n++;
    return n;
}

/* Copies n rows of every layer between an entry and a slot. */
static bool copy(prompt_cache *pc, const pfx_kv_cache *cache, size_t slot, const entry *e, size_t n,
                 bool into_slot)
{
    const size_t L = pc->model->cfg.shape.layers, rows = e->len;
    cl_command_queue q = pc->model->rt->queue;
    cl_int err = CL_SUCCESS;
    for (size_t l = 0; l < L && err == CL_SUCCESS; l++)
        for (int kv = 0; kv < 2 && err == CL_SUCCESS; kv++) {
            cl_mem side = (kv ? cache->values : cache->keys)[l]->mem;
            const size_t at_slot = slot * cache->max_len * pc->row,
                         at_entry = (2 * l + (size_t)kv) * rows * pc->row;
            err = into_slot ? clEnqueueCopyBuffer(q, e->rows->mem, side, at_entry, at_slot,
                                                  n * pc->row, 0, NULL, NULL)
                            : clEnqueueCopyBuffer(q, side, e->rows->mem, at_slot, at_entry,
                                                  n * pc->row, 0, NULL, NULL);
        }
    return err == CL_SUCCESS;
}

size_t prompt_cache_restore(prompt_cache *pc, pfx_kv_cache *cache, size_t slot, int32_t adapter,
                            const int32_t *prompt, size_t len)
{
    if (!pc || len < 2 || cache->len[slot] || cache->dtype != pc->dtype)
        return 0;
    size_t best = 0, at = 0;
    for (size_t i = 0; i < pc->count; i++) {
        const size_t n = pc->e[i].adapter == adapter
                             ? common(pc->e[i].tokens, pc->e[i].len, prompt, len - 1)
                             : 0;
        if (n > best) {
            best = n;
            at = i;
        }
    }
    if (!best || !copy(pc, cache, slot, &pc->e[at], best, true))
        return 0;
    pc->e[at].used = ++pc->clock;
    cache->len[slot] = best;
    cache->adapter[slot] = adapter;
    return best;
}

void prompt_cache_save(prompt_cache *pc, const pfx_kv_cache *cache, size_t slot, int32_t adapter,
                       const int32_t *prompt, size_t len)
{
    const size_t L = pc ? pc->model->cfg.shape.layers : 0, bytes = 2 * L * len * (pc ? pc->row : 0);
    if (!pc || bytes > pc->budget || cache->dtype != pc->dtype)
        return;
    for (size_t i = 0; i < pc->count; i++) {
        entry *e = &pc->e[i];
        if (e->adapter != adapter)
            continue;
        const size_t n = common(e->tokens, e->len, prompt, len);
        if (n == len) { /* kept already, within a longer one or alike */
            e->used = ++pc->clock;
            return;
        }
        if (n == e->len) /* the new one holds it */
            drop(pc, i--);
    }
    while (pc->bytes + bytes > pc->budget && pc->count) {
        size_t old = 0;
        for (size_t i = 1; i < pc->count; i++)
            old = pc->e[i].used < pc->e[old].used ? i : old;
        drop(pc, old);
    }
    if (pc->count == pc->cap) {
        const size_t cap = pc->cap ? 2 * pc->cap : 8;
        entry *grown = realloc(pc->e, cap * sizeof(entry));
        if (!grown)
            return;
        pc->e = grown;
        pc->cap = cap;
    }
    entry e = { adapter, malloc(len * sizeof(int32_t)), len, bytes, NULL, ++pc->clock };
    const size_t shape[1] = { bytes / pfx_dtype_size(pc->dtype) };
    if (!e.tokens || pfx_tensor_create(pc->model->rt, pc->dtype, 1, shape, &e.rows) ||
        !copy(pc, cache, slot, &e, len, false)) {
        pfx_tensor_destroy(&e.rows);
        free(e.tokens);
        return;
    }
    memcpy(e.tokens, prompt, len * sizeof(int32_t));
    pc->e[pc->count++] = e;
    pc->bytes += bytes;
}
