/* The chat template of `prefixcl serve`'s model, read at start (chat.c). */
#ifndef PFX_TOOLS_SERVE_CHAT_TEMPLATE_H
#define PFX_TOOLS_SERVE_CHAT_TEMPLATE_H

#include <stdbool.h>

#include "jinja/jinja.h"

typedef struct chat_template {
    bool found;                  /* tokenizer_config.json has a chat_template */
    jinja_template *parsed;      /* NULL: none, or it did not parse (why) */
    char *bos_token, *eos_token; /* NULL: not given */
    char why[512];
} chat_template;

/* Reads DIR/tokenizer_config.json's chat_template (a string, or in a list
 * of {"name", "template"} the one named "default") and its bos/eos tokens
 * (strings or {"content": ...}), and parses the template. A template that
 * does not parse is kept as its error: the endpoint answers 500 with it
 * while the rest of the server works. */
void chat_template_load(chat_template *t, const char *dir);
void chat_template_free(chat_template *t);

#endif
