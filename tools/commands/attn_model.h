/* prefixcl attn-map --model DIR: one head's attention of a model over a text
 * (attn_model.c); the rest of attn-map draws random problems. */
#ifndef PFX_TOOLS_ATTN_MODEL_H
#define PFX_TOOLS_ATTN_MODEL_H

#include <stdbool.h>

int attn_map_model(int argc, char **argv);

/* Both ways of attn-map: the picture (--out) and the CSV (--csv, NULL when
 * not asked for) writable, and not one file, before any work; false after
 * saying why. */
bool attn_check_outputs(const char *picture, const char *csv);

#endif
