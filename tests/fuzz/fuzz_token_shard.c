/* libFuzzer harness for the token shard reader (src/text/shards.c): every
 * input is a whole file, read as llm.c's layout and as nanoGPT's headerless
 * uint16; a file that parses must account for each of its bytes, and its
 * tokens convert (ids below GPT-2's vocabulary) or are refused at a token's
 * offset inside the file. Also linked into the normal build by
 * run_corpus.c, which replays tests/fuzz/corpus/token_shard/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "text/text_internal.h"

enum { VOCAB = 50257, CHUNK = 256 };

/* Parses data as `format` and converts its tokens a chunk at a time. */
static pfx_status read_all(const uint8_t *data, size_t size, pfx_shard_format format,
                           const char *label)
{
    pfx_shard_layout lay;
    pfx_status st = pfx_shard_layout_parse(data, size, format, label, &lay);
    if (st != PFX_SUCCESS)
        return st;
    if ((lay.width != 2 && lay.width != 4) || lay.offset > size ||
        lay.offset + lay.tokens * lay.width != size)
        abort(); /* every byte of a shard is header or token */
    int32_t ids[CHUNK];
    for (size_t t = 0; t < lay.tokens; t += CHUNK) {
        const size_t n = lay.tokens - t < CHUNK ? lay.tokens - t : CHUNK;
        const size_t off = lay.offset + t * lay.width;
        if ((st = pfx_shard_convert(data + off, lay.width, n, VOCAB, label, off, ids)))
            return st;
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= VOCAB)
                abort();
    }
    return PFX_SUCCESS;
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    return read_all(data, size, PFX_SHARD_LLMC, label) == PFX_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_all(data, size, PFX_SHARD_LLMC, "fuzz");
    read_all(data, size, PFX_SHARD_RAW_U16, "fuzz");
    return 0;
}
