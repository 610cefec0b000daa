/* libFuzzer harness for GPT-2's vocab.json + merges.txt loader. An input is
 * split at its first NUL byte: vocab.json before, merges.txt after (no NUL:
 * all vocab.json, no merges). A tokenizer that loads encodes fixed strings
 * and the input; when the vocabulary has all 256 byte characters, decode
 * must give back every string byte for byte. Replayed over
 * corpus/vocab_merges/ by run_corpus.c in every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "prefixcl/tokenizer.h"
#include "text/text_internal.h" /* the byte-level table */

static pfx_status load(const uint8_t *data, size_t size, const char *label, pfx_tokenizer **tok)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t vn = nul ? (size_t)(nul - data) : size;
    const uint8_t *m = nul ? nul + 1 : data + size;
    return pfx_tokenizer_load_vocab_merges_memory(data, vn, m, size - vn - (nul ? 1 : 0), label,
                                                  tok);
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    pfx_tokenizer *tok = NULL;
    bool ok = load(data, size, label, &tok) == PFX_SUCCESS;
    pfx_tokenizer_free(&tok);
    return ok;
}

/* Every byte's character of the byte-level table is a token. */
static bool has_all_bytes(const pfx_tokenizer *tok)
{
    pfx_byte_level_init();
    for (unsigned b = 0; b < 256; b++) {
        size_t n;
        const char *u = pfx_byte_to_utf8((unsigned char)b, &n);
        char s[3] = { 0 };
        memcpy(s, u, n);
        if (pfx_tokenizer_token_to_id(tok, s) < 0)
            return false;
    }
    return true;
}

static void exercise(const pfx_tokenizer *tok, const char *text, size_t len, bool lossless)
{
    int32_t *ids;
    size_t count;
    if (pfx_tokenizer_encode(tok, text, len, PFX_ENCODE_ADD_SPECIAL, &ids, &count) != PFX_SUCCESS)
        abort(); /* only memory can fail here */
    char *dec;
    size_t dl;
    if (pfx_tokenizer_decode(tok, ids, count, 0, &dec, &dl) != PFX_SUCCESS)
        abort();
    if (lossless && (dl != len || memcmp(dec, text, len) != 0))
        abort();
    free(dec);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfx_tokenizer *tok = NULL;
    if (load(data, size, "fuzz", &tok) != PFX_SUCCESS) {
        if (tok)
            abort();
        return 0;
    }
    bool lossless = has_all_bytes(tok);
    static const char *texts[] = { "", "Hello world's 123!", "  a\n\n\tb  ",
                                   "caf\xc3\xa9 \xf0\x9f\x98\x80 \xff" };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        exercise(tok, texts[i], strlen(texts[i]), lossless);
    /* The input as text: <|endoftext|> in it is a special token, which decodes to itself. */
    exercise(tok, (const char *)data, size < 512 ? size : 512, lossless);
    pfx_tokenizer_free(&tok);
    return 0;
}
