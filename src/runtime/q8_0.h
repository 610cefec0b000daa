/*
 * The Q8_0 block format on the host (PFX_DTYPE_Q8_0): 32 consecutive
 * elements of a row as int8 values q with one half-precision scale d, an
 * element being d * q; 34 bytes a block, the scale first (llama.cpp's
 * block_q8_0, so a tensor's bytes are those of a GGUF Q8_0 tensor).
 * Quantization as llama.cpp's reference: d = max |x| / 127, q = round(x / d)
 * (half away from zero) with d before its rounding to half.
 */
#ifndef PFX_RUNTIME_Q8_0_H
#define PFX_RUNTIME_Q8_0_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "half.h"

#define PFX_Q8_0_BLOCK 32 /* elements a block */
#define PFX_Q8_0_BYTES 34 /* bytes a block: the scale, then the values */

typedef struct pfx_q8_0_block {
    uint16_t d; /* half bits */
    int8_t q[PFX_Q8_0_BLOCK];
} pfx_q8_0_block;

_Static_assert(sizeof(pfx_q8_0_block) == PFX_Q8_0_BYTES, "a Q8_0 block is 34 bytes");

/* One block of 32 values x; false (the block untouched) when a value is not
 * finite or the scale overflows half: Q8_0 holds neither. */
static inline bool pfx_q8_0_quantize(const float *x, pfx_q8_0_block *out)
{
    float amax = 0.0f;
    for (int j = 0; j < PFX_Q8_0_BLOCK; j++) {
        if (!isfinite(x[j]))
            return false;
        amax = fmaxf(amax, fabsf(x[j]));
    }
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = pfx_float_to_half(d);
    if ((dh & 0x7c00u) == 0x7c00u)
        return false;
    out->d = dh;
    /* a scale below half's range reads back as zeros: store them (1 / d
     * may overflow there, and an infinite x / d has no int8) */
    const bool zero = (dh & 0x7fffu) == 0;
    for (int j = 0; j < PFX_Q8_0_BLOCK; j++)
        out->q[j] = zero ? 0 : (int8_t)roundf(x[j] * id);
    return true;
}

/* Element j of a block as float. */
static inline float pfx_q8_0_value(const pfx_q8_0_block *b, int j)
{
    return pfx_half_to_float(b->d) * (float)b->q[j];
}

/* Element e of the blocks starting at p (element 0 at a block's start). */
static inline float pfx_q8_0_at(const void *p, size_t e)
{
    return pfx_q8_0_value((const pfx_q8_0_block *)p + e / PFX_Q8_0_BLOCK,
                          (int)(e % PFX_Q8_0_BLOCK));
}

#endif
