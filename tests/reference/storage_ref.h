/*
 * Double-precision references of the weight storages: bfloat16 and half
 * rounding (round to nearest, ties to even, computed on the value, not on
 * its bits), and Q8_0 blocks.
 */
#ifndef PFX_TEST_STORAGE_REF_H
#define PFX_TEST_STORAGE_REF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* f rounded to the nearest bfloat16 (8 significant bits, float32's exponent
 * range and subnormals), ties to even; beyond the largest bfloat16 an
 * infinity; zeros, infinities and NaN as they are. */
float ref_round_bf16(float f);

/* f rounded to the nearest half (11 significant bits, subnormals down to
 * 2^-24), ties to even; beyond 65504 an infinity. */
float ref_round_half(float f);

/* The n values x (n a multiple of 32) as Q8_0 stores them: per block of 32,
 * d = max |x| / 127 and id = 1 / d in float, q = round(x id) (halves away
 * from zero), the value half(d) q. */
void ref_q8_0(const float *x, size_t n, float *out);

#ifdef __cplusplus
}
#endif

#endif
