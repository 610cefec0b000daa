/* The settled-heads measure (settled.h). */
#include "settled.h"

#include <math.h>
#include <stdbool.h>

size_t settled_window(const size_t *steps, size_t m, size_t total, size_t *first)
{
    size_t i = 0;
    /* 5 s >= 4 total in integers: no rounding decides the window's edge */
    while (i < m && 5 * steps[i] < 4 * total)
        i++;
    *first = i;
    return m - i;
}

int settled_heads(const float *history, const size_t *steps, size_t m, size_t heads, size_t total,
                  float threshold, int8_t *sign)
{
    for (size_t h = 0; h < heads; h++)
        sign[h] = 0;
    size_t first;
    const size_t n = settled_window(steps, m, total, &first);
    if (n < SETTLED_MIN_POINTS)
        return -1;
    int settled = 0;
    for (size_t h = 0; h < heads; h++) {
        int s = 0;
        bool ok = true;
        for (size_t i = first; i < m && ok; i++) {
            const float g = history[i * heads + h];
            const int gs = g > 0.0f ? 1 : g < 0.0f ? -1 : 0;
            /* a zero gain has no sign, whatever the threshold */
            ok = gs != 0 && fabsf(g) >= threshold && (s == 0 || gs == s);
            s = gs;
        }
        if (ok) {
            sign[h] = (int8_t)s;
            settled++;
        }
    }
    return settled;
}

size_t settled_since(const float *history, const size_t *steps, size_t m, size_t heads, size_t h,
                     float threshold)
{
    if (m == 0)
        return 0;
    const float last = history[(m - 1) * heads + h];
    const int sign = last > 0.0f ? 1 : last < 0.0f ? -1 : 0;
    size_t i = m;
    while (i > 0) {
        const float g = history[(i - 1) * heads + h];
        const int gs = g > 0.0f ? 1 : g < 0.0f ? -1 : 0;
        if (sign == 0 || gs != sign || !(fabsf(g) >= threshold))
            break;
        i--;
    }
    return i < m ? steps[i] : 0;
}
