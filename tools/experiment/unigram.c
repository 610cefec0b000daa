/* The unigram floor (unigram.h). */
#include "unigram.h"

#include <math.h>

double unigram_loss(const uint64_t *counts, size_t vocab, uint64_t total, const int32_t *ids,
                    size_t n)
{
    if (n == 0 || vocab == 0)
        return NAN;
    const double denom = (double)total + (double)vocab;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= vocab)
            return NAN;
        sum -= log(((double)counts[ids[i]] + 1.0) / denom);
    }
    return sum / (double)n;
}
