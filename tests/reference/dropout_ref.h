/* Dropout masks in plain C, as docs/design.md "Dropout" and cl/common.cl
 * draw them: Philox4x32-10 of counter (col / 4, row, step, tag) under the
 * key (seed low, seed high), word col % 4 kept iff >= floor(p 2^32). */
#ifndef PFX_TEST_DROPOUT_REF_H
#define PFX_TEST_DROPOUT_REF_H

#include <stdint.h>

#include "prefixcl/attention.h"

/* Philox4x32-10 of ctr under key, in place. */
void ref_philox4x32_10(uint32_t ctr[4], const uint32_t key[2]);

/* The factor of element (row, col) of stream s at probability p: 0 when
 * dropped, (float)(1 / (1 - p)) when kept; 1 when p is 0. */
double ref_dropout_factor(const pfx_dropout_stream *s, float p, uint32_t row, uint32_t col);

#endif
