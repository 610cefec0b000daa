/*
 * AdamW (src/layer/optimizer.c). Three kernels per step:
 *   pfx_opt_sumsq     per gradient tensor: sum of g^2 per work-group
 *                     (grid-stride loop, then a fixed tree) into partial[];
 *   pfx_opt_finalize  one work-item: the partials in order -> norm, clipping
 *                     scale, skip flag into status[0..2];
 *   pfx_adamw_update  per parameter tensor: reads status, does nothing when
 *                     the step is skipped, else the AdamW update.
 * No atomics: the same inputs give the same bits on a given device.
 */

#ifndef PFX_WG
#error "built with -DPFX_WG=<work-group size> (src/ops/work_groups.h)"
#endif

__kernel __attribute__((reqd_work_group_size(PFX_WG, 1, 1)))
void pfx_opt_sumsq(const ulong n, __global const float *g, __global float *partial,
                   const uint offset)
{
    __local float scratch[PFX_WG];
    const uint lid = (uint)get_local_id(0);
    /* 8 elements a step, then the tail: a fixed order per work-item */
    float8 acc8 = (float8)0.0f;
    for (ulong j = get_global_id(0); j < n / 8; j += get_global_size(0)) {
        const float8 x = vload8(j, g);
        acc8 += x * x;
    }
    float acc = pfx_sum8(acc8);
    for (ulong i = n / 8 * 8 + get_global_id(0); i < n; i += get_global_size(0)) {
        const float x = g[i];
        acc += x * x;
    }
    const float sum = pfx_group_sum(scratch, acc, PFX_WG);
    if (lid == 0)
        partial[offset + get_group_id(0)] = sum;
}

/* status[0] = norm, status[1] = clipping scale (0 when skipped), status[2] = 1
 * when the norm is not finite (skip), else 0. max_norm 0 = no clipping. */
__kernel void pfx_opt_finalize(const uint count, __global const float *partial,
                               const float max_norm, __global float *status)
{
    if (get_global_id(0) != 0)
        return;
    float sum = 0.0f;
    for (uint i = 0; i < count; i++)
        sum += partial[i];
    const float norm = sqrt(sum);
    const int skip = isnan(norm) || isinf(norm);
    float scale = 1.0f;
    if (skip)
        scale = 0.0f;
    else if (max_norm > 0.0f)
        scale = fmin(1.0f, max_norm / (norm + 1e-6f));
    status[0] = norm;
    status[1] = scale;
    status[2] = skip ? 1.0f : 0.0f;
}

/* decay = 1 - lr_t * wd, step_size = lr_t / (1 - beta1^t),
 * inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t) (host, double). */
__kernel void pfx_adamw_update(const ulong n, __global float *p, __global const float *g,
                               __global float *m, __global float *v,
                               __global const float *status, const float beta1,
                               const float beta2, const float eps, const float decay,
                               const float step_size, const float inv_sqrt_bc2)
{
    if (status[2] != 0.0f)
        return;
    const float scale = status[1];
    /* 8 elements a step (the same arithmetic per lane: a CPU compiler
     * vectorizes it), then the tail one by one */
    for (ulong j = get_global_id(0); j < n / 8; j += get_global_size(0)) {
        const float8 gi = vload8(j, g) * scale;
        const float8 mi = beta1 * vload8(j, m) + (1.0f - beta1) * gi;
        const float8 vi = beta2 * vload8(j, v) + (1.0f - beta2) * (gi * gi);
        vstore8(mi, j, m);
        vstore8(vi, j, v);
        const float8 denom = sqrt(vi) * inv_sqrt_bc2 + eps;
        vstore8(vload8(j, p) * decay - step_size * (mi / denom), j, p);
    }
    for (ulong i = n / 8 * 8 + get_global_id(0); i < n; i += get_global_size(0)) {
        const float gi = g[i] * scale;
        const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        const float vi = beta2 * v[i] + (1.0f - beta2) * (gi * gi);
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrt(vi) * inv_sqrt_bc2 + eps;
        p[i] = p[i] * decay - step_size * (mi / denom);
    }
}
