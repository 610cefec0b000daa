/* The demonstration model of `prefixcl tune` with no --model: GPT-2 small's
 * shape (`layers` layers of 768 wide, 12 heads) over the demonstration
 * tokenizer's vocabulary, with seeded random weights, written as a folder
 * that the job (pfx_tune_run) and afterwards generate, eval and attn-map
 * open. */
#ifndef PFX_TOOLS_TUNE_DEMO_H
#define PFX_TOOLS_TUNE_DEMO_H

#include <stddef.h>
#include <stdint.h>

#include "prefixcl/prefixcl.h"

/* Writes DIR = out_dir/demo-model: config.json, model.safetensors (the
 * weights pfx_model_create_random draws from `seed`, in `storage`) and
 * demo_dir's tokenizer.json. Rank 0 writes; every rank returns once the
 * folder is whole (dist.h). DIR in dir (cap bytes). 0, or 1 after printing
 * why. */
int tune_demo_write(pfx_runtime *rt, const char *demo_dir, const char *out_dir, size_t layers,
                    pfx_dtype storage, uint64_t seed, char *dir, size_t cap);

#endif
