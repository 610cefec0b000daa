/*
 * Seeded pseudo-random test data: splitmix64, uniform in [lo, hi].
 *
 * Header-only so every test can use it without linking anything. The same
 * seed gives the same numbers on every platform (integer arithmetic only up
 * to the final conversion), so a failing case can be reproduced from its seed.
 */
#ifndef PFX_TEST_RANDOM_H
#define PFX_TEST_RANDOM_H

#include <stddef.h>
#include <stdint.h>

typedef struct ref_rng {
    uint64_t state;
} ref_rng;

static inline void ref_rng_seed(ref_rng *rng, uint64_t seed)
{
    rng->state = seed;
}

/* splitmix64 (Steele, Lea, Flood 2014; the reference constants). */
static inline uint64_t ref_rng_next(ref_rng *rng)
{
    uint64_t z = (rng->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double ref_rng_unit(ref_rng *rng)
{
    return (double)(ref_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform in [lo, hi]. */
static inline double ref_rng_uniform(ref_rng *rng, double lo, double hi)
{
    return lo + (hi - lo) * ref_rng_unit(rng);
}

/* Uniform integer in [0, n) (n > 0; the tiny modulo bias is irrelevant here). */
static inline size_t ref_rng_index(ref_rng *rng, size_t n)
{
    return (size_t)(ref_rng_next(rng) % (uint64_t)n);
}

/* Fill x[0..n) with floats uniform in [lo, hi]. */
static inline void ref_rng_fill(ref_rng *rng, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)ref_rng_uniform(rng, lo, hi);
}

#endif
