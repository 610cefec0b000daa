/* Pre-training blocks (data.h, pfx_blocks): a data set's examples joined
 * in file order and cut into rows of T tokens, served in an order shuffled
 * per epoch from a seed. */
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"
#include "prefixcl/data.h"

struct pfx_blocks {
    int32_t *ids; /* [count * block] */
    size_t count, block;
    size_t *perm; /* [count]: the order of perm_epoch */
    uint64_t perm_epoch;
    bool have_perm;
};

pfx_status pfx_blocks_pack(const pfx_dataset *ds, size_t block, pfx_blocks **out)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_pack: out is NULL");
    *out = NULL;
    if (!ds)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_pack: ds is NULL");
    if (block < 2)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_blocks_pack: block %zu is below 2 tokens", block);
    pfx_dataset_info info;
    pfx_status st = pfx_dataset_get_info(ds, &info);
    if (st != PFX_SUCCESS)
        return st;
    const size_t count = info.tokens / block;
    if (count == 0)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "pfx_blocks_pack: the data's %zu tokens do not fill one block of %zu",
                         info.tokens, block);
    pfx_blocks *b = calloc(1, sizeof(*b));
    if (b) {
        b->ids = malloc(count * block * sizeof(int32_t));
        b->perm = malloc(count * sizeof(size_t));
    }
    if (!b || !b->ids || !b->perm) {
        pfx_blocks_free(&b);
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY,
                         "pfx_blocks_pack: host memory for %zu blocks", count);
    }
    b->count = count;
    b->block = block;
    /* the examples end to end; the tail that fills no block is dropped */
    size_t at = 0;
    for (size_t e = 0; e < info.examples && at < count * block; e++) {
        const int32_t *ids, *labels;
        size_t len;
        if ((st = pfx_dataset_example(ds, e, &ids, &labels, &len))) {
            pfx_blocks_free(&b);
            return st;
        }
        const size_t take = len < count * block - at ? len : count * block - at;
        memcpy(b->ids + at, ids, take * sizeof(int32_t));
        at += take;
    }
    *out = b;
    return PFX_SUCCESS;
}

void pfx_blocks_free(pfx_blocks **b)
{
    if (!b || !*b)
        return;
    free((*b)->ids);
    free((*b)->perm);
    free(*b);
    *b = NULL;
}

size_t pfx_blocks_count(const pfx_blocks *b)
{
    return b ? b->count : 0;
}

pfx_status pfx_blocks_split(pfx_blocks *b, size_t tail, pfx_blocks **out)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_split: out is NULL");
    *out = NULL;
    if (!b)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_split: b is NULL");
    if (tail == 0 || tail >= b->count)
        return pfx_error(
            NULL, PFX_ERROR_OUT_OF_RANGE,
            "pfx_blocks_split: %zu blocks cannot be held out of %zu (at least one must stay)", tail,
            b->count);
    pfx_blocks *t = calloc(1, sizeof(*t));
    if (t) {
        t->ids = malloc(tail * b->block * sizeof(int32_t));
        t->perm = malloc(tail * sizeof(size_t));
    }
    if (!t || !t->ids || !t->perm) {
        pfx_blocks_free(&t);
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_blocks_split: host memory");
    }
    t->count = tail;
    t->block = b->block;
    b->count -= tail;
    memcpy(t->ids, b->ids + b->count * b->block, tail * b->block * sizeof(int32_t));
    b->have_perm = false;
    *out = t;
    return PFX_SUCCESS;
}

pfx_status pfx_blocks_get(const pfx_blocks *b, size_t i, const int32_t **ids)
{
    if (!b || !ids)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_get: %s is NULL",
                         !b ? "b" : "ids");
    if (i >= b->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "pfx_blocks_get: block %zu of %zu", i,
                         b->count);
    *ids = b->ids + i * b->block;
    return PFX_SUCCESS;
}

pfx_status pfx_blocks_next_batch(pfx_blocks *b, pfx_data_position *pos, size_t batch, uint64_t seed,
                                 int32_t *ids, size_t *rows)
{
    if (!b || !pos || !ids || !rows)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_next_batch: %s is NULL",
                         !b     ? "b"
                         : !pos ? "pos"
                         : !ids ? "ids"
                                : "rows");
    if (batch == 0)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "pfx_blocks_next_batch: batch is 0");
    if (pos->index > b->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "pfx_blocks_next_batch: the position's index %llu is past the %zu blocks",
                         (unsigned long long)pos->index, b->count);
    if (pos->index == b->count) { /* the epoch is done */
        pos->epoch++;
        pos->index = 0;
    }
    if (!b->have_perm || b->perm_epoch != pos->epoch) {
        pfx_data_permutation(b->perm, b->count, seed, pos->epoch);
        b->perm_epoch = pos->epoch;
        b->have_perm = true;
    }
    size_t n = 0;
    while (n < batch && pos->index < b->count) {
        memcpy(ids + n * b->block, b->ids + b->perm[pos->index] * b->block,
               b->block * sizeof(int32_t));
        pos->index++;
        n++;
    }
    *rows = n;
    return PFX_SUCCESS;
}
