/* Shared by src/io: small-file reading, UTF-8 checks, JSON number fields and
 * atomic file replacement. Not installed. */
#ifndef PFX_IO_INTERNAL_H
#define PFX_IO_INTERNAL_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "internal.h"
#include "prefixcl/io.h"

/* Largest integer a JSON number carries exactly (2^53). */
#define PFX_JSON_MAX_INT ((double)9007199254740992.0)

/* True when [s, s+n) is well-formed UTF-8 without NUL bytes. */
bool pfx_utf8_valid(const unsigned char *s, size_t n);

/* Length of the UTF-8 character at s (n >= 1 bytes left; 1 for an invalid
 * byte) and its code point in *cp (0xFFFFFFFF when invalid). */
size_t pfx_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* pfx_input_open recording its error for rt. */
pfx_status pfx_input_open_rt(pfx_runtime *rt, const char *path, FILE **out);

/* Reads a whole file of at most `max_bytes` into a malloc'ed buffer with a
 * NUL after the last byte. PFX_ERROR_IO (cannot open/read, not a regular
 * file) or PFX_ERROR_OUT_OF_RANGE (larger than max_bytes), recorded for rt. */
pfx_status pfx_read_file(pfx_runtime *rt, const char *path, size_t max_bytes, unsigned char **out,
                         size_t *size);

/* Replaces `path` atomically with `size` bytes of data (pfx_output_open's
 * rules); an error is recorded for rt. */
pfx_status pfx_write_file(pfx_runtime *rt, const char *path, const void *data, size_t size);

/* True when JSON text [s, s+n) holds a "\u0000" escape, which cJSON would
 * turn into a NUL that silently cuts the string short. */
bool pfx_json_has_nul_escape(const char *s, size_t n);

/* The first key of a JSON object that appears twice, or NULL (n log n). An
 * allocation failure sets *oom. */
const char *pfx_json_duplicate_key(const cJSON *object, bool *oom);
/* The same over every object nested in `item` (itself included), depth
 * first: the first object holding a key twice names it. */
const char *pfx_json_duplicate_key_deep(const cJSON *item, bool *oom);

/* qsort comparison of two char pointers by strcmp. */
int pfx_cmp_str_ptr(const void *a, const void *b);

/* A non-negative integral JSON number no larger than 2^53 into *out. */
bool pfx_json_uint(const cJSON *item, uint64_t *out);

/* Largest count accepted in a config field (keeps products far from overflow). */
#define PFX_JSON_FIELD_MAX ((uint64_t)1 << 31)

/* Parses [buf, buf+size) as one JSON object: UTF-8 without NUL bytes or
 * \u0000 escapes, nothing but white space after it, no key twice in any
 * object, nested ones included (PFX_ERROR_FORMAT naming `label` otherwise).
 * The one rule of every JSON reader of the library: config.json, the PEFT
 * adapter config, the shard index, tokenizer.json, JSONL data lines, the
 * GEMM tuning file. */
pfx_status pfx_json_parse_object(pfx_runtime *rt, const char *label, const unsigned char *buf,
                                 size_t size, cJSON **out);
/* Config fields of an object `root` read from `path` (named in messages).
 * count: a positive integer <= PFX_JSON_FIELD_MAX; absent or null gives
 * `fallback` unless required. bool: absent or null is false. string: absent
 * or null is "", longer than cap - 1 bytes is refused. */
pfx_status pfx_json_field_count(pfx_runtime *rt, const char *path, const cJSON *root,
                                const char *key, bool required, size_t fallback, size_t *out);
pfx_status pfx_json_field_bool(pfx_runtime *rt, const char *path, const cJSON *root,
                               const char *key, bool *out);
pfx_status pfx_json_field_string(pfx_runtime *rt, const char *path, const cJSON *root,
                                 const char *key, char *out, size_t cap);
/* dir + "/" + name, malloc'ed (NULL when out of memory). */
char *pfx_join_path(const char *dir, const char *name);

/* The index of a sharded checkpoint (model.safetensors.index.json): every
 * tensor name (unique, non-empty) and the shard file it lives in (a plain
 * file name beside the index, never a path). */
typedef struct pfx_st_index {
    size_t count;  /* tensors */
    char **names;  /* [count] */
    size_t *shard; /* [count]: index into shards */
    char **shards; /* [shard_count], distinct, sorted by name */
    size_t shard_count;
} pfx_st_index;

/* Parses an index held in memory; `label` names it in messages. */
pfx_status pfx_st_index_parse(pfx_runtime *rt, const unsigned char *buf, size_t size,
                              const char *label, pfx_st_index **out);
void pfx_st_index_free(pfx_st_index **index);

/* Atomic replacement (atomic_file.c): a temporary file next to `path`, then
 * rename. Refuses a destination that exists and is not a regular file. */
typedef struct pfx_atomic_file {
    FILE *fp;
    char *tmp_path;
    char *path;
} pfx_atomic_file;

pfx_status pfx_atomic_begin(pfx_runtime *rt, const char *path, pfx_atomic_file *af);
/* Removes dir/name when it is there: an earlier run's output that this run
 * does not write, which a reader of the folder would take for this run's.
 * PFX_ERROR_IO naming it (after `who: `) when it cannot be removed. */
pfx_status pfx_remove_stale(pfx_runtime *rt, const char *who, const char *dir, const char *name);
/* Writes n bytes; PFX_ERROR_IO on a short write. */
pfx_status pfx_atomic_write(pfx_runtime *rt, pfx_atomic_file *af, const void *data, size_t n);
/* Flushes, syncs, closes and renames over the destination. On failure the
 * temporary file is removed. Always releases af. */
pfx_status pfx_atomic_commit(pfx_runtime *rt, pfx_atomic_file *af);
/* Removes the temporary file and releases af; safe after a failed begin. */
void pfx_atomic_abort(pfx_atomic_file *af);

/* Internal entry points that record errors for rt (NULL: the thread). */
pfx_status pfx_st_open_rt(pfx_runtime *rt, const char *path, pfx_safetensors **out);
/* Tensor `index` of f into dst (of the same shape; a float dtype in the
 * file): pfx_safetensors_load_tensor without the lookup by name. */
pfx_status pfx_st_load_index_rt(pfx_runtime *rt, const pfx_safetensors *f, size_t index,
                                pfx_tensor *dst);
pfx_status pfx_st_parse_owned(pfx_runtime *rt, unsigned char *buf, size_t size, const char *label,
                              pfx_safetensors **out);
pfx_status pfx_st_read_f32_rt(pfx_runtime *rt, const pfx_safetensors *f, size_t index, float *dst,
                              size_t count);
pfx_status pfx_peft_read_config_rt(pfx_runtime *rt, const char *dir, pfx_peft_config *config);
/* Parses adapter_config.json text (need not be NUL-terminated). */
pfx_status pfx_peft_parse_config(pfx_runtime *rt, const unsigned char *buf, size_t size,
                                 const char *label, pfx_peft_config *config);

#endif
