/*
 * Double-precision reference of the optimizer (include/prefixcl/optimizer.h):
 * torch.optim.AdamW (amsgrad=False) and torch.nn.utils.clip_grad_norm_, and
 * the learning-rate schedules, written out as plain loops.
 *
 * One step of one tensor, for its t-th update (t >= 1), with lr_t = lr * f
 * (f: the schedule factor) and the clipping scale c:
 *
 *     g    = c * grad
 *     m    = beta1 * m + (1 - beta1) * g
 *     v    = beta2 * v + (1 - beta2) * g^2
 *     mhat = m / (1 - beta1^t)
 *     vhat = v / (1 - beta2^t)
 *     p    = p * (1 - lr_t * wd)                 (decoupled decay, applied first)
 *     p    = p - lr_t * mhat / (sqrt(vhat) + eps)
 *
 * Clipping: norm = sqrt(sum over every gradient of g^2);
 * c = min(1, max_norm / (norm + 1e-6)), or 1 when max_norm is 0.
 */
#ifndef PFX_TEST_ADAMW_REF_H
#define PFX_TEST_ADAMW_REF_H

#include <stddef.h>
#include <stdint.h>

typedef struct ref_adamw_group {
    double lr, beta1, beta2, eps, weight_decay;
} ref_adamw_group;

/* One AdamW step of n elements (p, m, v updated in place). */
void ref_adamw_step(double *p, double *m, double *v, const float *grad, size_t n, double scale,
                    double lr_factor, uint64_t t, const ref_adamw_group *g);

/* Global L2 norm over count gradients (grads[i] has sizes[i] floats). */
double ref_grad_norm(const float *const *grads, const size_t *sizes, size_t count);

/* min(1, max_norm / (norm + 1e-6)); 1 when max_norm == 0. */
double ref_clip_scale(double norm, double max_norm);

/* Schedule factor of update t (1-based): linear warm-up over warmup steps,
 * then constant (decay_steps == 0) or cosine to floor over decay_steps. */
double ref_lr_factor(uint64_t t, uint64_t warmup, uint64_t decay_steps, double floor);

/* Gain ramp after s successful steps: min(1, s / ramp_steps); 1 when ramp_steps == 0. */
double ref_gain_ramp(uint64_t s, uint64_t ramp_steps);

#endif
