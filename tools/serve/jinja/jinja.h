/* A subset of Jinja2, enough for the chat templates of Hugging Face
 * tokenizers (tokenizer_config.json "chat_template"): rendered the way
 * transformers' apply_chat_template renders them (trim_blocks and
 * lstrip_blocks on, its tojson filter, raise_exception).
 *
 * Why it is written here: Debian 12 packages no maintained C library for
 * Jinja templates, and the server must render them without Python.
 *
 * A template is parsed once (jinja_parse) and rendered per request
 * (jinja_render) with its names given as the members of a JSON object.
 * What the subset lacks (call blocks, tuples, string formatting...) is
 * refused with an error naming the construct and its line:column; output size, work,
 * memory and nesting are bounded, so no input hangs or crashes. */
#ifndef PFX_TOOLS_SERVE_JINJA_H
#define PFX_TOOLS_SERVE_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define JINJA_MAX_OUTPUT (1u << 20) /* bytes rendered */
/* Work, as the output counts bytes: each byte a scan or comparison reads
 * (`in`, ==, <, split, replace, strip, startswith, dict keys...) is a unit, a
 * statement run or a loop turn JINJA_STEP_WORK (2^20 of them at most, as
 * before work was counted). The slowest scan, `in` at glibc's worst case, reads
 * a byte in about 5 ns: the budget is under a tenth of a second of CPU. */
#define JINJA_MAX_WORK   (1u << 24)
#define JINJA_STEP_WORK  16u
#define JINJA_MAX_MEMORY (32u << 20)
#define JINJA_MAX_DEPTH  64 /* nesting of blocks and expressions */

typedef enum jinja_status {
    JINJA_OK = 0,
    JINJA_ERROR_SYNTAX, /* the template is not valid, or uses what is not supported */
    JINJA_ERROR_RENDER, /* an error while rendering (a type, an undefined value...) */
    JINJA_ERROR_RAISED, /* the template called raise_exception(message) */
    JINJA_ERROR_LIMIT,  /* output, work, memory or nesting over its bound */
    JINJA_ERROR_MEMORY, /* out of host memory */
} jinja_status;

typedef struct jinja_template jinja_template;

/* Parses src[0, len); NULL with why (cap bytes) on failure. */
jinja_template *jinja_parse(const char *src, size_t len, char *why, size_t cap);
void jinja_free(jinja_template *t);

/* Renders t with the names of vars (a JSON object; NULL: none) into *out
 * (malloc'ed, NUL-terminated, *out_len bytes). On failure *out is NULL and
 * why (cap bytes) says what failed and where; raise_exception's message
 * alone for JINJA_ERROR_RAISED. */
jinja_status jinja_render(const jinja_template *t, const cJSON *vars, char **out, size_t *out_len,
                          char *why, size_t cap);
/* jinja_render with strftime_now's clock set to now (seconds since the
 * epoch, shown in local time) instead of the time of the call. */
jinja_status jinja_render_at(const jinja_template *t, const cJSON *vars, int64_t now, char **out,
                             size_t *out_len, char *why, size_t cap);

#endif
