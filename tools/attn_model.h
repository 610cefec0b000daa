/* prefixcl attn-map --model DIR: one head's attention of a model over a text
 * (attn_model.c); the rest of attn-map draws random problems. */
#ifndef PFX_TOOLS_ATTN_MODEL_H
#define PFX_TOOLS_ATTN_MODEL_H

int attn_map_model(int argc, char **argv);

#endif
