/* Per-head logit scales from gains held on the device (desc.gain_tensor), so
 * a training step never reads its gains back to the host:
 *   head_scale[h] = scale * gamma(r g_h),  dscale[h] = scale * r * gamma'(r g_h)
 * with gamma = 1 (mode 0), 1 + x (mode 1), 1 + tanh x (mode 2), as
 * src/ops/attention_problem.c computes them for host gains. */
__kernel void pfx_attn_gain_scales(__global const float *gain, const int heads, const int mode,
                                   const float ramp, const float scale,
                                   __global float *head_scale, __global float *dscale)
{
    const int h = get_global_id(0);
    if (h >= heads)
        return;
    const float x = ramp * gain[h];
    float gamma = 1.0f, slope = 0.0f;
    if (mode == 1) {
        gamma = 1.0f + x;
        slope = 1.0f;
    } else if (mode == 2) {
        const float t = tanh(x);
        gamma = 1.0f + t;
        slope = 1.0f - t * t;
    }
    head_scale[h] = scale * gamma;
    dscale[h] = scale * ramp * slope;
}
