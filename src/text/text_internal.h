/* Shared by src/text: the tokenizer's tables and pipeline stages. Not installed. */
#ifndef PFX_TEXT_INTERNAL_H
#define PFX_TEXT_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "io_internal.h"
#include "prefixcl/data.h"
#include "prefixcl/tokenizer.h"

/* ---- data order (dataset.c) ---- */

/* A permutation of 0..n-1 from (seed, salt): splitmix64 with unbiased
 * bounded draws (Fisher-Yates). The order of an epoch (salt: the epoch). */
void pfx_data_permutation(size_t *p, size_t n, uint64_t seed, uint64_t salt);

/* ---- token shards (shards.c; data.h) ---- */

/* Where a shard's tokens lie in its file. */
typedef struct pfx_shard_layout {
    size_t offset; /* of the first token */
    size_t tokens;
    unsigned width; /* bytes a token: 2 or 4 */
} pfx_shard_layout;

/* Checks the header of a file of `size` bytes whose first min(size,
 * PFX_SHARD_HEADER_BYTES) bytes are at data against the format and the
 * size; PFX_ERROR_FORMAT naming `name` and the offset. */
pfx_status pfx_shard_layout_parse(const uint8_t *data, size_t size, pfx_shard_format format,
                                  const char *name, pfx_shard_layout *out);
/* n tokens of `width` bytes at data (little-endian) as ids, each below
 * vocab (0: below 2^31); PFX_ERROR_FORMAT naming `name` and the byte
 * offset (`offset` is data's) of the first that is not. */
pfx_status pfx_shard_convert(const uint8_t *data, unsigned width, size_t n, size_t vocab,
                             const char *name, size_t offset, int32_t *out);

/* pfx_shards_write reading the file `chunk_bytes` at a time (at least: a
 * piece grows to hold a longer line). */
pfx_status pfx_shards_write_chunked(const char *path, const pfx_tokenizer *tok, const char *prefix,
                                    size_t shard_tokens, size_t chunk_bytes,
                                    pfx_shard_write_info *info);

/* Shards memory-mapped, their tokens one stream in name order. */
typedef struct pfx_shard_set pfx_shard_set;
pfx_status pfx_shard_set_open(const char *pattern, pfx_shard_format format, pfx_shard_set **out);
size_t pfx_shard_set_tokens(const pfx_shard_set *s);
/* Tokens [first, first + n) of the stream as ids (each below vocab, 0: any);
 * the pages read are given back to the kernel. */
pfx_status pfx_shard_set_read(const pfx_shard_set *s, size_t first, size_t n, size_t vocab,
                              int32_t *out);
void pfx_shard_set_free(pfx_shard_set **s);

/* ---- growable byte buffer ---- */
typedef struct pfx_buf {
    char *data;
    size_t len, cap;
} pfx_buf;

bool pfx_buf_reserve(pfx_buf *b, size_t extra);
bool pfx_buf_add(pfx_buf *b, const void *data, size_t n);
void pfx_buf_free(pfx_buf *b);

/* ---- string -> int32 map; keys are copied (NUL-terminated) into an arena ---- */
typedef struct pfx_strmap {
    uint32_t *slots; /* entry index + 1; 0 is empty */
    size_t cap;      /* power of two */
    struct pfx_strmap_entry {
        uint32_t off, len;
        int32_t value;
    } * entries; /* keys under 4 GB */
    size_t count, entries_cap;
    pfx_buf keys;
} pfx_strmap;

/* Inserts or overwrites; false when out of memory. */
bool pfx_strmap_put(pfx_strmap *m, const char *key, size_t len, int32_t value);
/* The value, or -1 when absent. */
int32_t pfx_strmap_get(const pfx_strmap *m, const char *key, size_t len);
const char *pfx_strmap_key(const pfx_strmap *m, size_t entry, size_t *len);
void pfx_strmap_free(pfx_strmap *m);

/* ---- (id, id) -> (rank, merged id) ---- */
typedef struct pfx_pairmap {
    struct pfx_pair_slot {
        uint64_t key;
        uint32_t rank;
        int32_t id;
    } * slots; /* id < 0: empty */
    size_t cap, count;
} pfx_pairmap;

bool pfx_pairmap_put(pfx_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id);
/* The slot of (a, b), or NULL. */
const struct pfx_pair_slot *pfx_pairmap_get(const pfx_pairmap *m, int32_t a, int32_t b);
void pfx_pairmap_free(pfx_pairmap *m);

/* ---- pipeline description ---- */
typedef enum pfx_split_behavior {
    PFX_SPLIT_REMOVED = 0,
    PFX_SPLIT_ISOLATED,
    PFX_SPLIT_MERGED_WITH_PREVIOUS,
    PFX_SPLIT_MERGED_WITH_NEXT,
    PFX_SPLIT_CONTIGUOUS,
} pfx_split_behavior;

typedef enum pfx_prepend_scheme {
    PFX_PREPEND_ALWAYS = 0,
    PFX_PREPEND_FIRST,
    PFX_PREPEND_NEVER
} pfx_prepend_scheme;

typedef enum pfx_pretok_kind {
    PFX_PRE_BYTE_LEVEL = 0,
    PFX_PRE_SPLIT,
    PFX_PRE_METASPACE
} pfx_pretok_kind;

typedef struct pfx_pretok {
    pfx_pretok_kind kind;
    pcre2_code *re; /* Split, Digits, ByteLevel with use_regex */
    char *source;   /* re's pattern, for messages */
    pfx_split_behavior behavior;
    bool invert;
    bool add_prefix_space; /* ByteLevel */
    char repl[8];          /* Metaspace replacement (UTF-8) */
    size_t repl_len;
    pfx_prepend_scheme prepend;
    bool split; /* Metaspace: split on the replacement */
} pfx_pretok;

typedef enum pfx_norm_kind {
    PFX_NORM_PREPEND = 0,
    PFX_NORM_REPLACE,
    PFX_NORM_UNICODE,
    PFX_NORM_LOWERCASE,
    PFX_NORM_STRIP_ACCENTS,
    PFX_NORM_STRIP,
} pfx_norm_kind;

typedef struct pfx_norm {
    pfx_norm_kind kind;
    char *text; /* Prepend: the prefix; Replace: the content */
    size_t text_len;
    char *pattern; /* Replace with a string pattern */
    size_t pattern_len;
    pcre2_code *re;               /* Replace with a regex pattern */
    char *source;                 /* re's pattern, for messages */
    int unicode_options;          /* NFC / NFD / NFKC / NFKD: utf8proc_map's options */
    bool strip_left, strip_right; /* Strip */
} pfx_norm;

typedef enum pfx_dec_kind {
    PFX_DEC_BYTE_LEVEL = 0,
    PFX_DEC_METASPACE,
    PFX_DEC_REPLACE,
    PFX_DEC_BYTE_FALLBACK,
    PFX_DEC_FUSE,
    PFX_DEC_STRIP,
} pfx_dec_kind;

typedef struct pfx_dec {
    pfx_dec_kind kind;
    char *pattern, *content; /* Replace (string pattern); Strip: content */
    size_t pattern_len, content_len;
    char repl[8]; /* Metaspace */
    size_t repl_len;
    pfx_prepend_scheme prepend;
    size_t start, stop; /* Strip */
} pfx_dec;

typedef struct pfx_added {
    int32_t id;
    char *content;
    size_t len;
    char *pattern; /* what is matched: content, normalized when `normalized` */
    size_t pattern_len;
    bool special, lstrip, rstrip, single_word, normalized;
} pfx_added;

struct pfx_tokenizer {
    pfx_strmap vocab; /* the model's vocabulary */
    pfx_pairmap merges;
    bool byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id;        /* -1: none */
    int32_t byte_ids[256]; /* <0xNN> tokens, -1 when absent */

    pfx_norm *norms;
    size_t norm_count;
    pfx_pretok *pretoks;
    size_t pretok_count;
    pfx_dec *decs;
    size_t dec_count;
    bool has_decoder; /* false: tokens joined with spaces, as HF does */

    pfx_added *added;
    size_t added_count;
    /* Added tokens by (normalized, first byte, longest first): those of
     * bucket [normalized][byte] are added_order[added_bucket[n][b] ..
     * added_bucket[n][b + 1]). */
    uint32_t *added_order;
    uint32_t added_bucket[2][257];
    int32_t *prefix_ids, *suffix_ids; /* post-processor, single sequence */
    size_t prefix_count, suffix_count;

    size_t vocab_size;     /* 1 + largest id */
    const char **id_token; /* [vocab_size]: NUL-terminated, or NULL */
    size_t *id_len;
    signed char *id_added; /* [vocab_size]: 1 added, 2 added and special */
    int32_t special[4];
    pcre2_code *word_re; /* Unicode \w, for single_word tokens */
};

/* GPT-2's pre-tokenizer regex (ByteLevel with use_regex). */
extern const char pfx_gpt2_pattern[];

/* Compiles a pattern (regex, or a literal when `literal`) in UTF + UCP mode;
 * NULL with the reason recorded, naming `what` of `label`. */
pcre2_code *pfx_regex_compile(const char *pattern, size_t len, bool literal, const char *label,
                              const char *what);

/* The byte-level table: byte -> UTF-8 of its code point (1-2 bytes) and back. */
void pfx_byte_level_init(void);
const char *pfx_byte_to_utf8(unsigned char b, size_t *len);
/* Byte of a code point of the table, or -1. */
int pfx_byte_from_codepoint(uint32_t cp);

/* Unicode's White_Space property. (pfx_utf8_next: src/io/io_internal.h.) */
bool pfx_is_white_space(uint32_t cp);

/* ---- encode pipeline ---- */
typedef struct pfx_piece {
    size_t off, len;
    int32_t added; /* an added token's id, or -1 for text */
    bool first;    /* starts at offset 0 of the original text */
} pfx_piece;

typedef struct pfx_pieces {
    pfx_buf text;
    pfx_piece *p;
    size_t count, cap;
} pfx_pieces;

typedef struct pfx_encode_scratch {
    pcre2_match_data *md;
    pcre2_match_context *mc; /* carries each call's share of the budget */
    uint64_t regex_left;     /* PCRE2 match-limit units this encode may still spend */
    size_t text_len;         /* the encoded text's length, for messages */
    pfx_pieces a, b;         /* ping-pong buffers of the stages */
    struct pfx_bpe_symbol *sym;
    size_t sym_cap;
    struct pfx_bpe_merge *heap;
    size_t heap_cap;
    int32_t *ids;
    size_t id_count, id_cap;
} pfx_encode_scratch;

bool pfx_pieces_add(pfx_pieces *ps, const char *data, size_t len, int32_t added, bool first);
void pfx_pieces_clear(pfx_pieces *ps);
void pfx_pieces_free(pfx_pieces *ps);

/* Prepares sc's regex matching for a text of len bytes: match data and a
 * budget of PCRE2 match-limit units that grows with len, shared by every
 * regex call of the encode (PCRE2's own limit holds per call, and a
 * backtracking pattern called at every position multiplies it). False when
 * out of memory. */
bool pfx_scratch_regex_init(pfx_encode_scratch *sc, size_t len);
/* A fresh budget for a text of len bytes. */
void pfx_scratch_regex_budget(pfx_encode_scratch *sc, size_t len);
void pfx_scratch_regex_free(pfx_encode_scratch *sc);

/* Splits text on added tokens (those with normalized == `normalized`), runs
 * the normalizers when `normalize`, and appends the pieces to out. */
pfx_status pfx_split_added(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const pfx_pieces *in,
                           bool normalized, bool normalize, pfx_pieces *out);
/* Runs the normalizers over [s, s+n) into out (replacing its content). */
pfx_status pfx_normalize(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const char *s, size_t n,
                         pfx_buf *out);
/* One pre-tokenizer over every text piece of in (added pieces pass through). */
pfx_status pfx_pretokenize(const pfx_tokenizer *tok, const pfx_pretok *pt, pfx_encode_scratch *sc,
                           const pfx_pieces *in, pfx_pieces *out);
/* BPE of one word; appends its ids to sc->ids. */
pfx_status pfx_bpe_word(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const char *word,
                        size_t len);
bool pfx_ids_add(pfx_encode_scratch *sc, int32_t id);

/* The first ids of text's encoding (no special tokens): at least `want` of
 * them when the text has that many (possibly more; the caller cuts), the
 * same as pfx_tokenizer_encode's. Only a head of the text is tokenized,
 * grown until its complete pieces give `want` ids: the work and memory
 * follow what is kept, not the text's length. */
pfx_status pfx_tokenizer_encode_head(const pfx_tokenizer *tok, const char *text, size_t len,
                                     size_t want, int32_t **ids, size_t *count);

/* ---- loading (tokenizer_load.c, vocab_stream.c) ---- */
/* A value's bytes [b, e) in a JSON text; e == 0: none. */
typedef struct pfx_json_span {
    size_t b, e;
} pfx_json_span;
/* Where model.vocab (an object) and model.merges (an array) of a
 * tokenizer.json text lie, found without building a tree; none of them for
 * a text that is not an object of well-nested values (cJSON then says what
 * is wrong). */
void pfx_tokenizer_json_spans(const char *s, size_t n, pfx_json_span *vocab, pfx_json_span *merges);
/* Reads the object of token -> id at s[0] == '{' ([s, s+n)) into tok->vocab. */
pfx_status pfx_stream_vocab(pfx_tokenizer *tok, const char *s, size_t n, const char *label,
                            const char *where);
/* A whole vocab.json (one object of token -> id, UTF-8 checked by the
 * caller) into tok->vocab. */
pfx_status pfx_stream_vocab_json(pfx_tokenizer *tok, const char *s, size_t n, const char *label);
/* Reads the merges array at s[0] == '[' into tok->merges. */
pfx_status pfx_stream_merges(pfx_tokenizer *tok, const char *s, size_t n, const char *label);

pfx_tokenizer *pfx_tokenizer_alloc(void);
/* Builds the id tables and checks merges once vocab and added tokens are in. */
pfx_status pfx_tokenizer_finish(pfx_tokenizer *tok, const char *label);
/* Parses GPT-2's merges.txt into tok->merges. */
pfx_status pfx_parse_merges_txt(pfx_tokenizer *tok, const char *data, size_t size,
                                const char *label);
/* Adds a merge (a, b) of rank `rank`; FORMAT when a, b or a+b is not in the vocabulary. */
pfx_status pfx_add_merge(pfx_tokenizer *tok, const char *a, size_t alen, const char *b, size_t blen,
                         uint32_t rank, const char *label);

#endif
