/* The gains file (prefixcl/io.h: gains.safetensors): its one writer, used
 * by both training jobs, and the test of its format the adapter bank tells
 * files apart by. The reader, pfx_gains_file_read, is public (io.h).
 * Host memory only, no device. Not installed. */
#ifndef PFX_GAINS_FILE_H
#define PFX_GAINS_FILE_H

#include "prefixcl/io.h"

#define PFX_GAINS_FILE "gains.safetensors"

/* Whether f's metadata format is PFX_GAINS_FORMAT. */
bool pfx_gains_file_is(const pfx_safetensors *f);

/* Writes v for a model of L layers, H heads, head size D to path
 * atomically: "gains" [L, H] from v->gains with a gain mode, "dim_gains"
 * [L, H, D] from v->dim_gains when structured, the metadata of io.h (gain_ramp
 * "%.9g", exact for a float). Errors go to pfx_last_error(rt). */
pfx_status pfx_gains_file_write(pfx_runtime *rt, const char *path, size_t L, size_t H, size_t D,
                                const pfx_gains_values *v);

#endif
