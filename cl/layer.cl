/*
 * Attention layer kernels (src/layer/attention_layer.c). The products are
 * CLBlast GEMMs; these are the small pieces around them. Matrices are
 * row-major float32 [rows, cols].
 */

/* out[i, j] = (has_src ? src[i, j] : 0) + (has_bias ? bias[j] : 0): the
 * starting value of a GEMM with beta = 1 (bias and/or residual). */
__kernel void pfx_layer_init(const ulong rows, const ulong cols, __global float *out,
                             __global const float *src, const int has_src,
                             __global const float *bias, const int has_bias)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        float v = has_src ? src[i] : 0.0f;
        if (has_bias)
            v += bias[i % cols];
        out[i] = v;
    }
}

/* db[j] (+)= sum_i src[i, j], rows summed in order: deterministic. One
 * work-item per column. */
__kernel void pfx_layer_bias_grad(const ulong rows, const ulong cols,
                                  __global const float *src, __global float *db,
                                  const int accumulate)
{
    const ulong j = get_global_id(0);
    if (j >= cols)
        return;
    float s = 0.0f;
    for (ulong i = 0; i < rows; i++)
        s += src[i * cols + j];
    db[j] = accumulate ? db[j] + s : s;
}

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
