/* libFuzzer harness for the tokenizer.json loader: every input goes through
 * pfx_tokenizer_load_json_memory; a tokenizer that loads encodes a few fixed
 * strings and the input itself, its ids must lie in the vocabulary and
 * decode. Replayed over corpus/tokenizer_json/ by run_corpus.c in every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "prefixcl/tokenizer.h"

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    pfx_tokenizer *tok = NULL;
    bool ok = pfx_tokenizer_load_json_memory(data, size, label, &tok) == PFX_SUCCESS;
    pfx_tokenizer_free(&tok);
    return ok;
}

static void exercise(const pfx_tokenizer *tok, const char *text, size_t len)
{
    for (unsigned flags = 0; flags < 2; flags++) {
        int32_t *ids;
        size_t count;
        if (pfx_tokenizer_encode(tok, text, len, flags, &ids, &count) != PFX_SUCCESS) {
            if (ids || count)
                abort();
            continue;
        }
        for (size_t i = 0; i < count; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= pfx_tokenizer_vocab_size(tok) ||
                !pfx_tokenizer_id_to_token(tok, ids[i], NULL))
                abort();
        char *dec;
        size_t dl;
        if (pfx_tokenizer_decode(tok, ids, count, flags, &dec, &dl) != PFX_SUCCESS || dec[dl] != 0)
            abort();
        free(dec);
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfx_tokenizer *tok = NULL;
    if (pfx_tokenizer_load_json_memory(data, size, "fuzz", &tok) != PFX_SUCCESS) {
        if (tok)
            abort(); /* a failed load leaves nothing behind */
        return 0;
    }
    static const char *texts[] = { "",
                                   " ",
                                   "Hello world's 123 4567!",
                                   "  a\n\n\tb  ",
                                   "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80",
                                   "\xff\xfe<s></s><|endoftext|>",
                                   "\xe2\x96\x81x y" };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        exercise(tok, texts[i], strlen(texts[i]));
    exercise(tok, (const char *)data, size < 512 ? size : 512);
    pfx_tokenizer_free(&tok);
    if (tok)
        abort();
    return 0;
}
