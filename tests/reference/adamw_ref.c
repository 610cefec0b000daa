/* Double-precision AdamW, clipping and schedules (see adamw_ref.h). */
#include <math.h>

#include "adamw_ref.h"

void ref_adamw_step(double *p, double *m, double *v, const float *grad, size_t n, double scale,
                    double lr_factor, uint64_t t, const ref_adamw_group *g)
{
    const double lr = g->lr * lr_factor;
    const double bc1 = 1.0 - pow(g->beta1, (double)t);
    const double bc2 = 1.0 - pow(g->beta2, (double)t);
    for (size_t i = 0; i < n; i++) {
        const double gi = scale * (double)grad[i];
        m[i] = g->beta1 * m[i] + (1.0 - g->beta1) * gi;
        v[i] = g->beta2 * v[i] + (1.0 - g->beta2) * gi * gi;
        const double mhat = m[i] / bc1;
        const double vhat = v[i] / bc2;
        p[i] *= 1.0 - lr * g->weight_decay;
        p[i] -= lr * mhat / (sqrt(vhat) + g->eps);
    }
}

double ref_grad_norm(const float *const *grads, const size_t *sizes, size_t count)
{
    double sum = 0.0;
    for (size_t k = 0; k < count; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            sum += (double)grads[k][i] * (double)grads[k][i];
    return sqrt(sum);
}

double ref_clip_scale(double norm, double max_norm)
{
    if (max_norm == 0.0)
        return 1.0;
    double c = max_norm / (norm + 1e-6);
    return c < 1.0 ? c : 1.0;
}

double ref_lr_factor(uint64_t t, uint64_t warmup, uint64_t decay_steps, double floor)
{
    if (t <= warmup)
        return (double)t / (double)warmup; /* t >= 1, so warmup >= 1 here */
    if (decay_steps == 0)
        return 1.0;
    double progress = (double)(t - warmup) / (double)decay_steps;
    if (progress > 1.0)
        progress = 1.0;
    return floor + (1.0 - floor) * 0.5 * (1.0 + cos(M_PI * progress));
}

double ref_gain_ramp(uint64_t s, uint64_t ramp_steps)
{
    if (ramp_steps == 0 || s >= ramp_steps)
        return 1.0;
    return (double)s / (double)ramp_steps;
}
