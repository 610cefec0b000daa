/*
 * Double-precision references of the weight storages: bfloat16 rounding
 * (round to nearest, ties to even, computed on the value, not on its bits).
 */
#ifndef PFX_TEST_STORAGE_REF_H
#define PFX_TEST_STORAGE_REF_H

#ifdef __cplusplus
extern "C" {
#endif

/* f rounded to the nearest bfloat16 (8 significant bits, float32's exponent
 * range and subnormals), ties to even; beyond the largest bfloat16 an
 * infinity; zeros, infinities and NaN as they are. */
float ref_round_bf16(float f);

#ifdef __cplusplus
}
#endif

#endif
