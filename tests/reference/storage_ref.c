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
