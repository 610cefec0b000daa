/* How `prefixcl generate` prints a finished request: a block for people (a
 * header naming the prompt and the adapter, the text as generated, a footer
 * with the token count, why it stopped and tokens/s), or one JSON object a
 * line (--json) for programs. */
#ifndef PFX_TOOLS_GEN_OUTPUT_H
#define PFX_TOOLS_GEN_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct gen_output {
    size_t prompt;           /* the prompt's index (in the order given) */
    const char *prompt_text; /* NULL: given as ids (--prompt-ids) */
    const int32_t *prompt_ids;
    size_t prompt_len;
    const char *adapter; /* as given on the command line; NULL: none */
    const int32_t *ids;  /* the generated ids */
    size_t count;
    const char *text;    /* their decoded text; NULL without a tokenizer */
    bool stopped;        /* ended at a stop token, else at --max-new-tokens */
    double tokens_per_s; /* new tokens over the time from its batch's start to its last token */
} gen_output;

/* "stop" (a stop token, kept in the ids) or "length" (--max-new-tokens). */
const char *gen_stop_reason(const gen_output *g);

/* The block: a blank line before every block but the first. */
void gen_print_block(FILE *out, const gen_output *g, bool first);

/* One line: {"prompt", "prompt_ids", "adapter", "ids", "text", "stop_reason",
 * "tokens_per_s"} (text as valid UTF-8: an invalid sequence becomes U+FFFD,
 * as transformers decodes). False when out of memory. */
bool gen_print_json(FILE *out, const gen_output *g);

/* s with every invalid UTF-8 sequence replaced by U+FFFD, as transformers
 * decodes (malloc'ed; NULL when out of memory). */
char *gen_valid_utf8(const char *s);

#endif
