/* libFuzzer harness for encoding with added tokens and Split regexes: the
 * input is "REGEX\0TEXT" (no NUL: TEXT alone). A byte-level BPE tokenizer
 * with added tokens (single_word, lstrip, rstrip, normalized, special) and
 * Split pre-tokenizers (REGEX when it compiles, then GPT-2's) encodes TEXT
 * repeated to 64 KiB within the per-input time limit (fuzz.h): work beyond
 * linear in the text (a word-boundary test reading the rest of the text, a
 * regex backtracking at every position) aborts. Replayed over
 * corpus/tokenizer_added/ by run_corpus.c in every build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "prefixcl/tokenizer.h"

#define TEXT_BYTES ((size_t)64 << 10)

/* A JSON string body of [s, s+n): escapes for quotes, backslashes, controls. */
static size_t json_escape(char *out, size_t cap, const uint8_t *s, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n && at + 7 < cap; i++) {
        if (s[i] == '"' || s[i] == '\\')
            at += (size_t)snprintf(out + at, cap - at, "\\%c", s[i]);
        else if (s[i] < 0x20)
            at += (size_t)snprintf(out + at, cap - at, "\\u%04x", s[i]);
        else
            out[at++] = (char)s[i];
    }
    out[at] = 0;
    return at;
}

static pfx_tokenizer *load(const uint8_t *re, size_t re_len, const char *label)
{
    static char json[4096];
    char pat[1200];
    json_escape(pat, sizeof(pat), re, re_len < 160 ? re_len : 160);
    snprintf(
        json, sizeof(json),
        "{\"added_tokens\": ["
        "{\"id\": 5, \"content\": \"hello world\", \"single_word\": true, \"lstrip\": false, "
        "\"rstrip\": false, "
        "\"normalized\": true, \"special\": false},"
        "{\"id\": 6, \"content\": \"<mask>\", \"single_word\": false, \"lstrip\": true, "
        "\"rstrip\": true, "
        "\"normalized\": false, \"special\": true},"
        "{\"id\": 7, \"content\": \"ab\", \"single_word\": true, \"lstrip\": true, \"rstrip\": "
        "false, "
        "\"normalized\": false, \"special\": false}],"
        "\"normalizer\": {\"type\": \"Lowercase\"},"
        "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
        "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"%s\"}, \"behavior\": \"Isolated\", "
        "\"invert\": false},"
        "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": \"MergedWithNext\", "
        "\"invert\": false},"
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}]},"
        "\"model\": {\"type\": \"BPE\", \"byte_fallback\": false, \"vocab\": "
        "{\"a\": 0, \"b\": 1, \"c\": 2, \"\\u0120\": 3, \"ab\": 4, \"hello world\": 5, \"<mask>\": "
        "6, "
        "\"x\": 7}, \"merges\": [\"a b\"]}}",
        re_len ? pat : "\\\\p{L}+|\\\\s+");
    pfx_tokenizer *tok = NULL;
    if (pfx_tokenizer_load_json_memory(json, strlen(json), label, &tok) != PFX_SUCCESS)
        return NULL;
    return tok;
}

/* Splits the input into the regex and the text. */
static void parts(const uint8_t *data, size_t size, size_t *re_len, const uint8_t **text,
                  size_t *text_len)
{
    const uint8_t *nul = memchr(data, 0, size);
    *re_len = nul ? (size_t)(nul - data) : 0;
    *text = nul ? nul + 1 : data;
    *text_len = size - (size_t)(*text - data);
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    size_t re_len, text_len;
    const uint8_t *text;
    parts(data, size, &re_len, &text, &text_len);
    pfx_tokenizer *tok = load(data, re_len, label);
    bool ok = tok != NULL;
    pfx_tokenizer_free(&tok);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t re_len, text_len;
    const uint8_t *text;
    parts(data, size, &re_len, &text, &text_len);
    pfx_tokenizer *tok = load(data, re_len, "fuzz");
    if (!tok || !text_len) {
        pfx_tokenizer_free(&tok);
        return 0;
    }
    char *big = malloc(TEXT_BYTES);
    if (!big)
        abort();
    for (size_t at = 0; at < TEXT_BYTES; at += text_len)
        memcpy(big + at, text, TEXT_BYTES - at < text_len ? TEXT_BYTES - at : text_len);
    const double start = pfx_fuzz_now();
    int32_t *ids = NULL;
    size_t count = 0;
    pfx_status st =
        pfx_tokenizer_encode(tok, big, TEXT_BYTES, PFX_ENCODE_ADD_SPECIAL, &ids, &count);
    pfx_fuzz_deadline(start, "encoding 64 KiB with added tokens and Split regexes");
    if (st != PFX_SUCCESS && (ids || count))
        abort();
    for (size_t i = 0; i < count; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= pfx_tokenizer_vocab_size(tok))
            abort();
    free(ids);
    free(big);
    pfx_tokenizer_free(&tok);
    return 0;
}
