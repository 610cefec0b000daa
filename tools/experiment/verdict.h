/* The rule every claim of `prefixcl experiment gain` is judged by: a verdict
 * only from evidence. Figures from several seeds, each arm of a seed paired
 * with the others of that seed (same initialization, same data order); the
 * 95% interval of the mean paired difference (Student's t) decides. Pure
 * host code: the experiment command and its tests. */
#ifndef PFX_TOOLS_EXPERIMENT_VERDICT_H
#define PFX_TOOLS_EXPERIMENT_VERDICT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum verdict_kind {
    VERDICT_AGREES,       /* the interval lies on the claimed side */
    VERDICT_DISAGREES,    /* it lies on the other side */
    VERDICT_INCONCLUSIVE, /* it holds the boundary, or the difference is float32 noise */
    VERDICT_ONE_SEED,     /* figures only: one seed weighs no spread */
    VERDICT_MISSING,      /* no seed has both figures */
    VERDICT_NOT_FINITE    /* a figure is NaN or infinite (bad_index) */
} verdict_kind;

typedef struct verdict {
    verdict_kind kind;
    size_t n;          /* seeds with both figures */
    double mean, half; /* mean (of the differences), 95% half-width (NAN for n < 2) */
    double noise;      /* the difference below which it is float32 noise (0: not applied) */
    size_t bad_index;  /* VERDICT_NOT_FINITE: the first seed with a non-finite figure */
    bool below_noise;  /* VERDICT_INCONCLUSIVE for that reason */
    bool range;        /* judged by verdict_range: mean is of the figure itself */
    double lo, hi;     /* verdict_range's claimed range */
} verdict;

/* A float32 figure's own noise, relative to its size: 64 units of float32's
 * last place (FLT_EPSILON). A loss is a sum of thousands of float32 terms;
 * two arms that compute the same thing to float32's accuracy differ by that
 * much, and by no more than that when a gain of ~1e-7 is all that differs. */
#define VERDICT_F32_NOISE (64.0 * 1.1920928955078125e-7)

/* Student's t at 97.5% for `df` degrees of freedom (>= 1; past 30 the
 * value for 30, which overstates the interval slightly). */
double verdict_t975(size_t df);

/* The claim "a is below b" (sign -1) or "a is above b" (+1), judged on the
 * paired differences a[k] - b[k] of n seeds. rel_noise: a mean difference
 * whose size is below rel_noise x the larger of |mean a| and |mean b| is
 * noise (VERDICT_INCONCLUSIVE); 0: every difference counts (timings, whose
 * noise the interval measures; accuracies, exact shares), and equal figures
 * are judged by their interval, which holds 0. Checked in this order: n 0 (MISSING), a
 * non-finite figure (NOT_FINITE), n 1 (ONE_SEED, mean set), noise, the
 * interval (holding 0: INCONCLUSIVE). */
verdict verdict_paired(const double *a, const double *b, size_t n, int sign, double rel_noise);

/* The claim "the figure lies in [lo, hi]" (hi may be INFINITY), judged on
 * the 95% interval of the mean of x over n seeds: AGREES inside,
 * DISAGREES wholly outside, INCONCLUSIVE across an end. */
verdict verdict_range(const double *x, size_t n, double lo, double hi);

/* The kind as one word for results.json: agrees, disagrees, inconclusive,
 * one_seed, missing, not_finite. */
const char *verdict_name(verdict_kind kind);

/* "agrees", "disagrees", "is inconclusive", ... with the evidence: the
 * mean difference and its interval (in `fmt`, e.g. "%.3f"), the seeds it
 * rests on and `steps` (0: not said) of each. Returns buf. */
const char *verdict_text(const verdict *v, const char *fmt, size_t steps, char *buf, size_t cap);

#endif
