/* The gains file of pretraining (pretrain.h: out_dir/gains.safetensors):
 * the trained attention gains of a model, without prefix. Read by the
 * adapter bank (generate.h) and by its fuzz harness; host memory only, no
 * device. Not installed. */
#ifndef PFX_GAINS_FILE_H
#define PFX_GAINS_FILE_H

#include "prefixcl/attention.h"
#include "prefixcl/io.h"

#define PFX_GAINS_FORMAT "prefixcl-gains-1"
#define PFX_GAINS_FILE   "gains.safetensors"

/* Whether f's metadata format is PFX_GAINS_FORMAT. */
bool pfx_gains_file_is(const pfx_safetensors *f);

/* What a gains file holds for a model of L layers, H heads, head size D. */
typedef struct pfx_gains_values {
    pfx_gain_mode gain_mode; /* OFF: no "gains" tensor */
    bool structured;         /* a "dim_gains" tensor */
    float *gains;            /* caller's [L * H], written with a gain mode */
    float *dim_gains;        /* caller's [L * H * D], written when structured */
} pfx_gains_values;

/* Reads the gains file f (named `label` in messages): metadata format
 * prefixcl-gains-1, gain_mode off | linear | tanh, structured true | false;
 * tensor "gains" [L, H] exactly when gain_mode is not off, "dim_gains"
 * [L, H, D] exactly when structured, no other tensor; every value finite.
 * PFX_ERROR_FORMAT: format, gain_mode or structured, a tensor missing or
 * extra; PFX_ERROR_INVALID_SHAPE: a tensor's shape (named, with the
 * model's); PFX_ERROR_DTYPE_MISMATCH: an integer tensor; PFX_ERROR_NOT_FINITE:
 * a NaN or infinite value (tensor and index). Errors go to
 * pfx_last_error(NULL); on failure the values written are meaningless. */
pfx_status pfx_gains_file_read(const pfx_safetensors *f, const char *label, size_t L, size_t H,
                               size_t D, pfx_gains_values *out);

#endif
