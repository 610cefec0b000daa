/* libFuzzer harness for the index of sharded safetensors checkpoints
 * (model.safetensors.index.json, src/io/st_index.c): every input goes
 * through pfx_st_index_parse; an index that parses must name only plain
 * shard files beside it, each tensor once. Also linked into the normal
 * build by run_corpus.c, which replays tests/fuzz/corpus/st_index/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io/io_internal.h"

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    pfx_st_index *x = NULL;
    pfx_status st = pfx_st_index_parse(NULL, data, size, label, &x);
    pfx_st_index_free(&x);
    return st == PFX_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfx_st_index *x = NULL;
    if (pfx_st_index_parse(NULL, data, size, "fuzz", &x) != PFX_SUCCESS) {
        if (x)
            abort(); /* a failed parse leaves nothing behind */
        return 0;
    }
    if (!x->count || !x->shard_count || x->shard_count > x->count)
        abort();
    for (size_t i = 0; i < x->count; i++)
        if (!x->names[i][0] || x->shard[i] >= x->shard_count)
            abort();
    for (size_t s = 0; s < x->shard_count; s++)
        if (!x->shards[s][0] || strchr(x->shards[s], '/') || strcmp(x->shards[s], "..") == 0)
            abort();
    pfx_st_index_free(&x);
    if (x)
        abort();
    return 0;
}
