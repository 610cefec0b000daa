/* The verdict rule (verdict.h). */
#include "verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Student's t at 97.5% for 1 .. 30 degrees of freedom. */
static const double t975[30] = { 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                 2.060,  2.056, 2.052, 2.048, 2.045, 2.042 };

double verdict_t975(size_t df)
{
    return t975[(df < 1 ? 1 : df > 30 ? 30 : df) - 1];
}

/* Mean and 95% half-width of x[0 .. n) (n >= 1; the half-width NAN for 1). */
static void mean_half(const double *x, size_t n, double *mean, double *half)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    *mean = sum / (double)n;
    *half = NAN;
    if (n < 2)
        return;
    double q = 0.0;
    for (size_t i = 0; i < n; i++)
        q += (x[i] - *mean) * (x[i] - *mean);
    *half = verdict_t975(n - 1) * sqrt(q / (double)(n - 1)) / sqrt((double)n);
}

enum { MAX_SEEDS = 64 };

verdict verdict_paired(const double *a, const double *b, size_t n, int sign, double rel_noise)
{
    verdict v = { .kind = VERDICT_MISSING, .n = n, .mean = NAN, .half = NAN };
    if (n == 0)
        return v;
    if (n > MAX_SEEDS)
        n = v.n = MAX_SEEDS;
    double d[MAX_SEEDS], ma = 0.0, mb = 0.0;
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(a[k]) || !isfinite(b[k])) {
            v.kind = VERDICT_NOT_FINITE;
            v.bad_index = k;
            return v;
        }
        d[k] = a[k] - b[k];
        ma += a[k] / (double)n;
        mb += b[k] / (double)n;
    }
    mean_half(d, n, &v.mean, &v.half);
    v.noise = rel_noise * fmax(fabs(ma), fabs(mb));
    if (n == 1) {
        v.kind = VERDICT_ONE_SEED;
        return v;
    }
    if (v.noise > 0 && fabs(v.mean) <= v.noise) { /* without the rule, 0 is no noise */
        v.kind = VERDICT_INCONCLUSIVE;
        v.below_noise = true;
        return v;
    }
    const double lo = v.mean - v.half, hi = v.mean + v.half;
    if (sign < 0 ? hi < 0 : lo > 0)
        v.kind = VERDICT_AGREES;
    else if (sign < 0 ? lo > 0 : hi < 0)
        v.kind = VERDICT_DISAGREES;
    else
        v.kind = VERDICT_INCONCLUSIVE;
    return v;
}

verdict verdict_range(const double *x, size_t n, double lo, double hi)
{
    verdict v = {
        .kind = VERDICT_MISSING, .n = n, .mean = NAN, .half = NAN, .range = true, .lo = lo, .hi = hi
    };
    if (n == 0)
        return v;
    if (n > MAX_SEEDS)
        n = v.n = MAX_SEEDS;
    for (size_t k = 0; k < n; k++)
        if (!isfinite(x[k])) {
            v.kind = VERDICT_NOT_FINITE;
            v.bad_index = k;
            return v;
        }
    mean_half(x, n, &v.mean, &v.half);
    if (n == 1) {
        v.kind = VERDICT_ONE_SEED;
        return v;
    }
    const double a = v.mean - v.half, b = v.mean + v.half;
    if (a >= lo && b <= hi)
        v.kind = VERDICT_AGREES;
    else if (b < lo || a > hi)
        v.kind = VERDICT_DISAGREES;
    else
        v.kind = VERDICT_INCONCLUSIVE;
    return v;
}

const char *verdict_name(verdict_kind kind)
{
    static const char *const names[] = { "agrees",   "disagrees", "inconclusive",
                                         "one_seed", "missing",   "not_finite" };
    return kind <= VERDICT_NOT_FINITE ? names[kind] : "unknown";
}

const char *verdict_text(const verdict *v, const char *fmt, size_t steps, char *buf, size_t cap)
{
    char m[48] = "", h[48] = "", of[64] = "";
    if (!fmt) /* none given: what the figures print with elsewhere */
        fmt = "%+.4g";
    snprintf(m, sizeof(m), fmt, v->mean);
    snprintf(h, sizeof(h), fmt, v->half);
    if (h[0] == '+') /* a half-width has no sign */
        memmove(h, h + 1, strlen(h));
    if (steps)
        snprintf(of, sizeof(of), " of %zu steps", steps);
    const char *what = v->range ? "mean" : "paired difference";
    switch (v->kind) {
    case VERDICT_MISSING: snprintf(buf, cap, "cannot be checked (an arm is missing)"); break;
    case VERDICT_NOT_FINITE:
        snprintf(buf, cap, "gives no verdict: a figure of seed %zu of %zu is not finite",
                 v->bad_index + 1, v->n);
        break;
    case VERDICT_ONE_SEED:
        snprintf(buf, cap,
                 "gives no verdict: one seed%s (%s %s) weighs nothing against the spread between "
                 "seeds; --seeds 3 or more does",
                 of, what, m);
        break;
    case VERDICT_AGREES:
    case VERDICT_DISAGREES:
    case VERDICT_INCONCLUSIVE:
        if (v->below_noise) {
            snprintf(buf, cap,
                     "is inconclusive: the %s over %zu seeds%s, %.3g, is float32 noise (below "
                     "%.3g)",
                     what, v->n, of, v->mean, v->noise);
            break;
        }
        if (v->range) {
            char lo[48], hi[48], range[112];
            snprintf(lo, sizeof(lo), fmt, v->lo);
            snprintf(hi, sizeof(hi), fmt, v->hi);
            const char *where;
            if (isfinite(v->hi)) {
                snprintf(range, sizeof(range), "[%s, %s]", lo, hi);
                where = v->kind == VERDICT_AGREES      ? "lies within"
                        : v->kind == VERDICT_DISAGREES ? "lies outside"
                                                       : "crosses an end of";
            } else {
                snprintf(range, sizeof(range), "%s", lo);
                where = v->kind == VERDICT_AGREES      ? "lies at or above"
                        : v->kind == VERDICT_DISAGREES ? "lies below"
                                                       : "holds";
            }
            snprintf(buf, cap, "%s (%s over %zu seeds%s %s ± %s: the 95%% interval %s %s)",
                     v->kind == VERDICT_AGREES      ? "agrees"
                     : v->kind == VERDICT_DISAGREES ? "disagrees"
                                                    : "is inconclusive",
                     what, v->n, of, m, h, where, range);
            break;
        }
        snprintf(buf, cap, "%s (%s over %zu seeds%s %s ± %s: the 95%% interval %s)",
                 v->kind == VERDICT_AGREES      ? "agrees"
                 : v->kind == VERDICT_DISAGREES ? "disagrees"
                                                : "is inconclusive",
                 what, v->n, of, m, h,
                 v->kind == VERDICT_INCONCLUSIVE ? "holds 0"
                 : (v->mean < 0)                 ? "lies below 0"
                                                 : "lies above 0");
        break;
    }
    return buf;
}
