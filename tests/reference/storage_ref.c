/* Weight storages in double precision (storage_ref.h). */
#include "storage_ref.h"

#include <math.h>

float ref_round_bf16(float f)
{
    if (!isfinite(f) || f == 0.0f)
        return f;
    int e;
    frexp(f, &e); /* |f| in [2^(e-1), 2^e): 8 significant bits leave steps of 2^(e-8) */
    const int step_exp = e - 8 < -133 ? -133 : e - 8; /* subnormals: steps of 2^-133 */
    const double q = ldexp((double)f, -step_exp);
    /* nearbyint rounds ties to even in the default rounding mode */
    return (float)ldexp(nearbyint(q), step_exp);
}

float ref_round_half(float f)
{
    if (!isfinite(f) || f == 0.0f)
        return f;
    int e;
    frexp(f, &e); /* 11 significant bits: steps of 2^(e-11); subnormals 2^-24 */
    const int step_exp = e - 11 < -24 ? -24 : e - 11;
    const double r = ldexp(nearbyint(ldexp((double)f, -step_exp)), step_exp);
    return fabs(r) > 65504.0 ? (float)copysign(INFINITY, r) : (float)r;
}

void ref_q8_0(const float *x, size_t n, float *out)
{
    for (size_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b;
        double amax = 0.0;
        for (int j = 0; j < 32; j++)
            amax = fmax(amax, fabs((double)xb[j]));
        /* the format's own float steps: d and its inverse as float, as the
         * quantizer computes them (llama.cpp's quantize_row_q8_0_ref) */
        const float d = (float)amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const double dh = ref_round_half(d);
        for (int j = 0; j < 32; j++) {
            /* halves away from zero, stored as an int8 (no negative zero); a
             * scale that rounds to a zero half holds zeros */
            const double q = dh == 0.0 ? 0.0 : (double)(int)round((double)(xb[j] * id));
            out[32 * b + j] = (float)(dh * q);
        }
    }
}
