/* Dropout masks in plain C (dropout_ref.h). */
#include <math.h>

#include "dropout_ref.h"

void ref_philox4x32_10(uint32_t ctr[4], const uint32_t key[2])
{
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * ctr[0], p1 = (uint64_t)0xCD9E8D57u * ctr[2];
        const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        const uint32_t c1 = ctr[1], c3 = ctr[3];
        ctr[0] = hi1 ^ c1 ^ k0;
        ctr[1] = lo1;
        ctr[2] = hi0 ^ c3 ^ k1;
        ctr[3] = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

double ref_dropout_factor(const pfx_dropout_stream *s, float p, uint32_t row, uint32_t col)
{
    if (p == 0.0f)
        return 1.0;
    uint32_t ctr[4] = { col >> 2, row, s->step, s->tag };
    const uint32_t key[2] = { (uint32_t)(s->seed & 0xffffffffu), (uint32_t)(s->seed >> 32) };
    ref_philox4x32_10(ctr, key);
    const double t = floor((double)p * 4294967296.0);
    const uint32_t threshold = t >= 4294967295.0 ? UINT32_MAX : (uint32_t)t;
    return ctr[col & 3] >= threshold ? (double)(float)(1.0 / (1.0 - (double)p)) : 0.0;
}
