/* The pieces tokenizer.json's parsers share (tokenizer_fields.c) and the
 * parser of each component (tokenizer_model.c, _normalizer.c,
 * _pretokenizer.c, _decoder.c, _post.c); tokenizer_load.c runs them in
 * order. Each returns PFX_ERROR_FORMAT naming the file (label) and the
 * field, or PFX_ERROR_UNSUPPORTED naming a kind this library does not run. */
#ifndef PFX_TEXT_TOKENIZER_PARSE_H
#define PFX_TEXT_TOKENIZER_PARSE_H

#include <cjson/cJSON.h>

#include "text_internal.h"

/* ---- shared field readers (absent or null: the default) ---- */
pfx_status pfx_tok_oom(const char *label);
/* A NUL-terminated copy of [s, s+n); NULL without memory. */
char *pfx_dup_bytes(const char *s, size_t n);
bool pfx_json_absent(const cJSON *it);
pfx_status pfx_tok_get_bool(const cJSON *obj, const char *key, bool def, bool *out,
                            const char *label, const char *where);
pfx_status pfx_tok_get_string(const cJSON *obj, const char *key, bool required, const char **out,
                              const char *label, const char *where);
/* obj is an object with a string "type". */
pfx_status pfx_tok_get_type(const cJSON *obj, const char **type, const char *label,
                            const char *where);
/* A {"String": s} or {"Regex": r} pattern. */
pfx_status pfx_tok_get_pattern(const cJSON *obj, const char **text, bool *regex, const char *label,
                               const char *where);
/* A single character of `where`.key as UTF-8 (Metaspace's replacement). */
pfx_status pfx_tok_get_char(const cJSON *obj, const char *key, char *out, size_t *len,
                            const char *label, const char *where);
pfx_status pfx_tok_get_prepend_scheme(const cJSON *obj, pfx_prepend_scheme *out, const char *label,
                                      const char *where);
/* Appends one zeroed element of `size` bytes to *arr (*count of them). */
bool pfx_grow_one(void **arr, size_t *count, size_t size);

typedef pfx_status (*pfx_tok_parse_fn)(pfx_tokenizer *tok, const cJSON *item, const char *label,
                                       int depth);
/* The start every component shares: absent or null is nothing to do, else
 * its "type"; a Sequence is its list `list_key` through fn. *type is NULL
 * when nothing is left to parse. */
pfx_status pfx_tok_component(pfx_tokenizer *tok, const cJSON *obj, const char *where,
                             const char *list_key, pfx_tok_parse_fn fn, const char *label,
                             int depth, const char **type);

/* ---- the components ---- */
/* model.vocab and model.merges left out of the cJSON tree (vocab_stream.c). */
typedef struct pfx_tok_streamed {
    const char *text;
    pfx_json_span vocab, merges;
} pfx_tok_streamed;

pfx_status pfx_tok_parse_model(pfx_tokenizer *tok, const cJSON *model, const char *label,
                               const pfx_tok_streamed *sv);
pfx_status pfx_tok_add_token(pfx_tokenizer *tok, int32_t id, const char *content, bool special,
                             bool normalized, const char *label);
pfx_status pfx_tok_parse_added(pfx_tokenizer *tok, const cJSON *arr, const char *label);
pfx_status pfx_tok_parse_normalizer(pfx_tokenizer *tok, const cJSON *n, const char *label,
                                    int depth);
pfx_status pfx_tok_parse_pretok(pfx_tokenizer *tok, const cJSON *p, const char *label, int depth);
pfx_status pfx_tok_parse_decoder(pfx_tokenizer *tok, const cJSON *d, const char *label, int depth);
pfx_status pfx_tok_parse_post(pfx_tokenizer *tok, const cJSON *p, const char *label, int depth);

#endif
