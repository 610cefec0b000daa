/*
 * The mean squared error of include/prefixcl/layer.h (src/layer/mse_loss.c):
 * no op computes it. The attention layer itself runs on the ops (GEMM,
 * bias, attention) and has no kernel of its own.
 */

/* Squared-error partial sums: partial[group] = sum over the group's elements
 * of (pred - target)^2 (fixed-order tree in local memory, so the result is
 * deterministic for a fixed launch shape); grad (when has_grad) receives
 * grad_scale * (pred - target). Local size PFX_WG (a power of two). */
#ifndef PFX_WG
#error "built with -DPFX_WG=<work-group size> (src/ops/work_groups.h)"
#endif
__kernel __attribute__((reqd_work_group_size(PFX_WG, 1, 1)))
void pfx_layer_mse(const ulong n, __global const float *pred, __global const float *target,
                   __global float *grad, const int has_grad, const float grad_scale,
                   __global float *partial)
{
    __local float sums[PFX_WG];
    const uint lid = get_local_id(0);
    float s = 0.0f;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const float d = pred[i] - target[i];
        s += d * d;
        if (has_grad)
            grad[i] = grad_scale * d;
    }
    const float sum = pfx_group_sum(sums, s, PFX_WG);
    if (lid == 0)
        partial[get_group_id(0)] = sum;
}
