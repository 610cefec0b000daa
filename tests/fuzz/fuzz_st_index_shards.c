/* libFuzzer harness for shard indexes of many shards: the input's first
 * bytes choose how many tensors (up to 131,071) and how they spread over
 * shards (each its own, or a few), its rest spells the names; the grown
 * index goes through pfx_st_index_parse within the per-input time limit
 * (fuzz.h), so work beyond n log n in the tensors aborts. Replayed over
 * corpus/st_index_shards/ by run_corpus.c in every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io/io_internal.h"

/* The index the input stands for; *len its length. NULL for too short an input. */
static char *grow(const uint8_t *data, size_t size, size_t *len)
{
    if (size < 3)
        return NULL;
    const size_t n = 1 + (((size_t)data[0] << 8 | data[1]) << 1);
    const size_t shards = data[2] & 1 ? n : 1 + (size_t)(data[2] >> 1);
    char tail[33]; /* the rest of the input as name characters */
    size_t t = 0;
    for (size_t i = 3; i < size && t < sizeof(tail) - 1; i++)
        tail[t++] = "abcdefghijklmnopqrstuvwxyz0123456789._-/\\\"\\u"[data[i] % 44];
    tail[t] = 0;
    size_t cap = 64 + n * (2 * sizeof(tail) + 48);
    char *text = malloc(cap);
    if (!text)
        return NULL;
    size_t at = (size_t)snprintf(text, cap, "{\"metadata\": {}, \"weight_map\": {");
    for (size_t i = 0; i < n; i++) /* shards out of order, names with the tail in them */
        at += (size_t)snprintf(text + at, cap - at, "%s\"t%zu%s\": \"s%zu%s.safetensors\"",
                               i ? ", " : "", i, tail, (i * 7919) % shards, i % 3 ? "" : tail);
    at += (size_t)snprintf(text + at, cap - at, "}}");
    *len = at;
    return text;
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    size_t len;
    char *text = grow(data, size, &len);
    pfx_st_index *x = NULL;
    pfx_status st = text ? pfx_st_index_parse(NULL, (const unsigned char *)text, len, label, &x)
                         : pfx_st_index_parse(NULL, data, size, label, &x);
    pfx_st_index_free(&x);
    free(text);
    return st == PFX_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len;
    char *text = grow(data, size, &len);
    if (!text)
        return 0;
    const double start = pfx_fuzz_now();
    pfx_st_index *x = NULL;
    pfx_status st = pfx_st_index_parse(NULL, (const unsigned char *)text, len, "fuzz", &x);
    pfx_fuzz_deadline(start, "a shard index of many shards");
    free(text);
    if (st != PFX_SUCCESS) {
        if (x)
            abort(); /* a failed parse leaves nothing behind */
        return 0;
    }
    if (!x->count || !x->shard_count || x->shard_count > x->count)
        abort();
    for (size_t i = 0; i < x->count; i++)
        if (x->shard[i] >= x->shard_count)
            abort();
    for (size_t s = 1; s < x->shard_count; s++)
        if (strcmp(x->shards[s - 1], x->shards[s]) >= 0) /* distinct, sorted */
            abort();
    pfx_st_index_free(&x);
    return 0;
}
