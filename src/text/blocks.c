/* Pre-training blocks (data.h, pfx_blocks): a stream of ids, a data set's
 * examples joined in memory or token shards mapped from disk, cut into rows
 * of T tokens and served in an order shuffled per epoch from a seed. */
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"
#include "prefixcl/data.h"

/* The tokens, shared by a set of blocks and the slice split from it. */
typedef struct source {
    int refs;
    int32_t *ids;       /* in memory: [tokens] */
    pfx_shard_set *set; /* or mapped */
} source;

struct pfx_blocks {
    source *src;
    size_t first; /* block of the stream where this set starts */
    size_t count, block;
    size_t vocab; /* ids at or past it refused; 0: unchecked */
};

static void source_drop(source *s)
{
    if (s && --s->refs == 0) {
        free(s->ids);
        pfx_shard_set_free(&s->set);
        free(s);
    }
}

static pfx_status blocks_new(source *src, size_t first, size_t count, size_t block,
                             pfx_blocks **out)
{
    pfx_blocks *b = calloc(1, sizeof(*b));
    if (!b)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_blocks: host memory");
    *b = (pfx_blocks){ .src = src, .first = first, .count = count, .block = block };
    src->refs++;
    *out = b;
    return PFX_SUCCESS;
}

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
    source *src = calloc(1, sizeof(*src));
    if (src)
        src->ids = malloc(count * block * sizeof(int32_t));
    if (!src || !src->ids) {
        free(src);
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY,
                         "pfx_blocks_pack: host memory for %zu blocks", count);
    }
    /* the examples end to end; the tail that fills no block is dropped */
    size_t at = 0;
    for (size_t e = 0; st == PFX_SUCCESS && e < info.examples && at < count * block; e++) {
        const int32_t *ids, *labels;
        size_t len;
        if ((st = pfx_dataset_example(ds, e, &ids, &labels, &len)) == PFX_SUCCESS) {
            const size_t take = len < count * block - at ? len : count * block - at;
            memcpy(src->ids + at, ids, take * sizeof(int32_t));
            at += take;
        }
    }
    if (st == PFX_SUCCESS)
        st = blocks_new(src, 0, count, block, out);
    if (st != PFX_SUCCESS) {
        free(src->ids);
        free(src);
    }
    return st;
}

pfx_status pfx_blocks_open_shards(const char *pattern, pfx_shard_format format, size_t block,
                                  pfx_blocks **out)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_open_shards: out is NULL");
    *out = NULL;
    if (!pattern)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_open_shards: pattern is NULL");
    if (format != PFX_SHARD_LLMC && format != PFX_SHARD_RAW_U16)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_blocks_open_shards: format %d is not LLMC or RAW_U16", (int)format);
    if (block < 2)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_blocks_open_shards: block %zu is below 2 tokens", block);
    source *src = calloc(1, sizeof(*src));
    if (!src)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_blocks_open_shards: host memory");
    pfx_status st = pfx_shard_set_open(pattern, format, &src->set);
    const size_t tokens = st == PFX_SUCCESS ? pfx_shard_set_tokens(src->set) : 0;
    if (st == PFX_SUCCESS && tokens < block)
        st = pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                       "shards %s: their %zu tokens do not fill one block of %zu", pattern, tokens,
                       block);
    if (st == PFX_SUCCESS)
        st = blocks_new(src, 0, tokens / block, block, out);
    if (st != PFX_SUCCESS) {
        pfx_shard_set_free(&src->set);
        free(src);
    }
    return st;
}

void pfx_blocks_free(pfx_blocks **b)
{
    if (!b || !*b)
        return;
    source_drop((*b)->src);
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
    pfx_status st = blocks_new(b->src, b->first + b->count - tail, tail, b->block, out);
    if (st == PFX_SUCCESS) {
        (*out)->vocab = b->vocab;
        b->count -= tail;
    }
    return st;
}

pfx_status pfx_blocks_get(const pfx_blocks *b, size_t i, const int32_t **ids)
{
    if (!b || !ids)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_get: %s is NULL",
                         !b ? "b" : "ids");
    if (i >= b->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "pfx_blocks_get: block %zu of %zu", i,
                         b->count);
    if (!b->src->ids)
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "pfx_blocks_get: the blocks are mapped shards (pfx_blocks_read copies)");
    *ids = b->src->ids + (b->first + i) * b->block;
    return PFX_SUCCESS;
}

/* Block i of the set into ids, its ids checked against the vocabulary. */
static pfx_status read_block(const pfx_blocks *b, size_t i, int32_t *ids)
{
    const size_t at = (b->first + i) * b->block;
    if (b->src->set)
        return pfx_shard_set_read(b->src->set, at, b->block, b->vocab, ids);
    memcpy(ids, b->src->ids + at, b->block * sizeof(int32_t));
    return PFX_SUCCESS; /* checked by pfx_blocks_set_vocab */
}

pfx_status pfx_blocks_read(const pfx_blocks *b, size_t i, int32_t *ids)
{
    if (!b || !ids)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_read: %s is NULL",
                         !b ? "b" : "ids");
    if (i >= b->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "pfx_blocks_read: block %zu of %zu", i,
                         b->count);
    return read_block(b, i, ids);
}

pfx_status pfx_blocks_set_vocab(pfx_blocks *b, size_t vocab)
{
    if (!b)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_set_vocab: b is NULL");
    for (size_t i = 0; vocab && b->src->ids && i < b->count * b->block; i++) {
        const int32_t id = b->src->ids[b->first * b->block + i];
        if (id < 0 || (size_t)id >= vocab)
            return pfx_error(NULL, PFX_ERROR_INVALID_SHAPE,
                             "token id %d (block %zu) is past the vocabulary: vocab_size is %zu",
                             (int)id, i / b->block, vocab);
    }
    b->vocab = vocab;
    return PFX_SUCCESS;
}

/* ---- the order ---- */

/* Position i of the order of (seed, epoch) over [0, n): a Feistel network
 * of four rounds on the smallest even number of bits that covers n (a
 * bijection of [0, 2^bits)), applied again until it lands below n (cycle
 * walking: a bijection of [0, n); 2^bits < 4n, so under four walks on
 * average). */
static size_t permute(size_t i, size_t n, uint64_t seed, uint64_t epoch)
{
    unsigned half = 1;
    while (half < 32 && ((uint64_t)1 << (2 * half)) < (uint64_t)n)
        half++;
    const uint64_t mask = ((uint64_t)1 << half) - 1;
    uint64_t key[4], k = seed ^ (epoch * UINT64_C(0xd1b54a32d192ed03));
    for (int r = 0; r < 4; r++)
        key[r] = pfx_splitmix64(&k);
    uint64_t x = i;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (int round = 0; round < 4; round++) {
            uint64_t s = key[round] ^ r;
            const uint64_t f = pfx_splitmix64(&s) & mask;
            const uint64_t t = r;
            r = l ^ f;
            l = t;
        }
        x = l << half | r;
    } while (x >= n);
    return (size_t)x;
}

pfx_status pfx_blocks_next_rows(pfx_blocks *b, pfx_data_position *pos, size_t batch, uint64_t seed,
                                size_t rank, size_t ranks, int32_t *ids, size_t *rows)
{
    if (!b || !pos || !ids || !rows)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_blocks_next_rows: %s is NULL",
                         !b     ? "b"
                         : !pos ? "pos"
                         : !ids ? "ids"
                                : "rows");
    if (batch == 0)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "pfx_blocks_next_rows: batch is 0");
    if (ranks == 0 || rank >= ranks)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_blocks_next_rows: rank %zu of %zu ranks", rank, ranks);
    if (pos->index > b->count)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "pfx_blocks_next_rows: the position's index %llu is past the %zu blocks",
                         (unsigned long long)pos->index, b->count);
    pfx_data_position p = *pos;
    if (p.index == b->count) { /* the epoch is done */
        p.epoch++;
        p.index = 0;
    }
    const size_t n = b->count - p.index < batch ? b->count - (size_t)p.index : batch;
    const size_t r0 = n * rank / ranks, r1 = n * (rank + 1) / ranks;
    for (size_t r = r0; r < r1; r++) {
        pfx_status st = read_block(b, permute((size_t)p.index + r, b->count, seed, p.epoch),
                                   ids + r * b->block);
        if (st != PFX_SUCCESS)
            return st;
    }
    p.index += n;
    *pos = p;
    *rows = n;
    return PFX_SUCCESS;
}

pfx_status pfx_blocks_next_batch(pfx_blocks *b, pfx_data_position *pos, size_t batch, uint64_t seed,
                                 int32_t *ids, size_t *rows)
{
    return pfx_blocks_next_rows(b, pos, batch, seed, 0, 1, ids, rows);
}
