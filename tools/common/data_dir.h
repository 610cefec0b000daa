/* The data the tool ships (data/demo: the demonstration's corpus and
 * tokenizer; data/wordnet: the experiment's tokenizer), found where the tool
 * runs from: installed, under the prefix's share/prefixcl/; run from its
 * build folder, in the source tree. */
#ifndef PFX_TOOLS_DATA_DIR_H
#define PFX_TOOLS_DATA_DIR_H

#include <stddef.h>

/* The folder of data set `name` ("demo", "wordnet") into out[size]: the
 * first that exists of share/prefixcl/NAME beside the running binary's bin/
 * (an installed tool, also under a DESTDIR), the source tree's data/NAME (the
 * build folder's tool), the configured prefix's share/prefixcl/NAME; that
 * last when none exists, for the error to name. Returns out. */
char *tool_data_dir(const char *name, char *out, size_t size);

#endif
