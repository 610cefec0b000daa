/*
 * prefixcl: the tokenizer of a model folder (text -> int32 token ids -> text).
 *
 * Supported: BPE as Hugging Face `tokenizers` runs it, from a tokenizer.json
 * or from GPT-2's vocab.json + merges.txt:
 *  - byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM): pre-tokenizer ByteLevel
 *    (add_prefix_space, use_regex with GPT-2's regex), Split (regex or string
 *    pattern, every behavior, invert), Digits, Sequence; normalizers NFC,
 *    NFD, NFKC, NFKD (utf8proc); decoder ByteLevel;
 *  - BPE with byte_fallback (<0xNN> tokens), unk_token / fuse_unk, Metaspace
 *    (Llama 2, Mistral, TinyLlama): pre-tokenizer and decoder Metaspace
 *    (replacement, prepend_scheme, split), normalizers Prepend / Replace /
 *    Sequence, decoders Replace / ByteFallback / Fuse / Strip / Sequence;
 *  - BPE with the Whitespace, WhitespaceSplit and Punctuation pre-tokenizers
 *    and the Lowercase, StripAccents and Strip normalizers (HF's quick-tour
 *    tokenizers);
 *  - added tokens (special or not; lstrip, rstrip, single_word, normalized)
 *    matched before pre-tokenization, leftmost-longest;
 *  - post-processors TemplateProcessing (single sequence), ByteLevel,
 *    RobertaProcessing, BertProcessing and Sequence.
 * Anything else (WordPiece, Unigram, WordLevel models, BertNormalizer,
 * Precompiled and other normalizers, BPE dropout, subword prefixes) is refused with
 * PFX_ERROR_UNSUPPORTED and a message naming it. Pre-tokenizer regexes run
 * on PCRE2 (UTF + UCP).
 *
 * Input text is bytes: invalid UTF-8 is tokenized too (byte-level tokenizers
 * map every byte through their byte table; others fall back to <0xNN> or
 * unk), and decoding never substitutes U+FFFD, so for a byte-level tokenizer
 * without a normalizer (nor lstrip / rstrip added tokens) encode then decode
 * gives back any input byte for byte.
 *
 * Tests compare the ids with HF tokenizers 0.23 on hundreds of strings per
 * pipeline (tests/fixtures/make_tokenizer_fixture.py). Known differences:
 * decode returns bytes where HF substitutes U+FFFD; invalid UTF-8 input (HF
 * takes only valid strings); after an rstrip token the search for the next
 * added token resumes past the stripped spaces; a Replace normalizer whose
 * regex matches the empty string at the start (HF inserts its content twice
 * there); the Unicode tables are PCRE2's and utf8proc's, whose versions may
 * differ from HF's for newly assigned characters.
 *
 * A loaded tokenizer is read-only: encode and decode may run from several
 * threads at once. Errors are recorded per thread in pfx_last_error(NULL);
 * a malformed file gives PFX_ERROR_FORMAT naming the file and the field.
 */
#ifndef PREFIXCL_TOKENIZER_H
#define PREFIXCL_TOKENIZER_H

#include "prefixcl/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_tokenizer pfx_tokenizer;

/* Largest tokenizer file accepted (bytes). */
#define PFX_TOKENIZER_MAX_FILE ((size_t)512 * 1024 * 1024)

/* Loads the tokenizer of a model folder: DIR/tokenizer.json, or else
 * DIR/vocab.json + DIR/merges.txt (GPT-2's byte-level files). When
 * DIR/tokenizer_config.json exists, its bos_token / eos_token / pad_token /
 * unk_token name the ids returned by pfx_tokenizer_special_id (its
 * add_bos_token / add_eos_token are not read: transformers 5 keeps
 * tokenizer.json's post-processor too). PFX_ERROR_IO when the
 * folder has neither, PFX_ERROR_FORMAT for malformed files,
 * PFX_ERROR_UNSUPPORTED for a tokenizer kind this library does not run. */
PFX_API pfx_status pfx_tokenizer_load(const char *dir, pfx_tokenizer **out);

/* A tokenizer.json file, or the same bytes in memory (`label` names them in
 * messages; NULL: "<memory>"). What a load costs: model.vocab and
 * model.merges are read straight from the text into the tokenizer's hash
 * tables (the rest goes through a JSON tree), so a load holds the file (the
 * path form reads it whole) plus about 4 times its size at the peak, most
 * of which the tokenizer keeps (a 23 MB file of 700,000 short tokens and
 * merges: 125 MB resident in all, 260 MB through a whole JSON tree). */
PFX_API pfx_status pfx_tokenizer_load_json(const char *path, pfx_tokenizer **out);
PFX_API pfx_status pfx_tokenizer_load_json_memory(const void *data, size_t size, const char *label,
                                                  pfx_tokenizer **out);

/* GPT-2's vocab.json (token -> id) and merges.txt (one "a b" pair a line; an
 * optional first line "#version: ..."): byte-level pre-tokenizer with GPT-2's
 * regex, ByteLevel decoder, and <|endoftext|> as a special token when the
 * vocabulary has it. The memory form takes both files' bytes. */
PFX_API pfx_status pfx_tokenizer_load_vocab_merges(const char *vocab_path, const char *merges_path,
                                                   pfx_tokenizer **out);
PFX_API pfx_status pfx_tokenizer_load_vocab_merges_memory(const void *vocab, size_t vocab_size,
                                                          const void *merges, size_t merges_size,
                                                          const char *label, pfx_tokenizer **out);

/* Releases the tokenizer and sets *tok to NULL; NULL-safe. */
PFX_API void pfx_tokenizer_free(pfx_tokenizer **tok);

/* 1 + the largest id of the vocabulary and the added tokens: the rows an
 * embedding table needs (0 for NULL). */
PFX_API size_t pfx_tokenizer_vocab_size(const pfx_tokenizer *tok);

/* The id of a token string (model vocabulary or added token), or -1 (also
 * for NULL arguments). */
PFX_API int32_t pfx_tokenizer_token_to_id(const pfx_tokenizer *tok, const char *token);

/* The token string of an id (owned by the tokenizer, NUL-terminated; *len
 * gets its length when len is not NULL), or NULL for an unknown id. As in
 * HF, an added token marked normalized gives its normalized content. */
PFX_API const char *pfx_tokenizer_id_to_token(const pfx_tokenizer *tok, int32_t id, size_t *len);

/* True when id is an added token marked special. */
PFX_API bool pfx_tokenizer_is_special(const pfx_tokenizer *tok, int32_t id);

typedef enum pfx_special_token {
    PFX_TOKEN_BOS = 0,
    PFX_TOKEN_EOS,
    PFX_TOKEN_PAD,
    PFX_TOKEN_UNK,
} pfx_special_token;

/* Id of a special token, or -1 when the tokenizer names none. BOS: the
 * config's bos_token, else the first special token the post-processor puts
 * before the text; EOS and PAD: the config's, EOS else <|endoftext|> when the
 * vocabulary has it; UNK: the model's unk_token. */
PFX_API int32_t pfx_tokenizer_special_id(const pfx_tokenizer *tok, pfx_special_token which);

/* Flags of pfx_tokenizer_encode. */
#define PFX_ENCODE_ADD_SPECIAL 1u /* add the post-processor's tokens (BOS ...) */

/* Encodes len bytes of text (text may be NULL when len is 0). *ids gets a
 * malloc'ed array (release with free(); never NULL on success, even for no
 * ids) and *count its length. On failure *ids is NULL and *count 0.
 * The regexes of the pre-tokenizers and normalizers share one budget per
 * call, 4096 PCRE2 match-limit units per byte of text plus 2^22: a pattern
 * that backtracks beyond it (or beyond PCRE2's JIT stack) is
 * PFX_ERROR_UNSUPPORTED naming the regex, in time linear in len. */
PFX_API pfx_status pfx_tokenizer_encode(const pfx_tokenizer *tok, const char *text, size_t len,
                                        unsigned flags, int32_t **ids, size_t *count);

/* Flags of pfx_tokenizer_decode. */
#define PFX_DECODE_SKIP_SPECIAL 1u /* leave out added tokens marked special */

/* Decodes ids through the tokenizer's decoder. *text gets malloc'ed bytes
 * with a NUL after the last one (release with free()), *len their number.
 * An id outside the vocabulary is PFX_ERROR_OUT_OF_RANGE. */
PFX_API pfx_status pfx_tokenizer_decode(const pfx_tokenizer *tok, const int32_t *ids, size_t count,
                                        unsigned flags, char **text, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
