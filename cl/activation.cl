/*
 * Elementwise pieces of the MLP over float32 [rows, cols] views (offset, row
 * stride): activations forward and backward, SwiGLU, and the bias added to
 * every row (src/ops/activation.c, src/ops/bias.c). Grid-stride loops over
 * rows * cols; every element is read and written by one work-item, so the
 * in-place forms are safe.
 */

/* Activation codes: the values of pfx_activation (src/ops/model_ops.h). */
#define ACT_GELU_TANH 0
#define ACT_GELU 1
#define ACT_RELU 2
#define ACT_SILU 3

#define GELU_K 0.7978845608028654f   /* sqrt(2 / pi) */
#define GELU_A 0.044715f
#define INV_SQRT2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

inline float sigmoid_f(float u)
{
    return 1.0f / (1.0f + exp(-u));
}

inline float act_forward(int act, float u)
{
    switch (act) {
    case ACT_GELU_TANH:
        return 0.5f * u * (1.0f + tanh(GELU_K * (u + GELU_A * u * u * u)));
    case ACT_GELU:
        return 0.5f * u * (1.0f + erf(u * INV_SQRT2));
    case ACT_RELU:
        return u > 0.0f ? u : 0.0f;
    default:
        return u * sigmoid_f(u);
    }
}

inline float act_derivative(int act, float u)
{
    switch (act) {
    case ACT_GELU_TANH: {
        const float t = tanh(GELU_K * (u + GELU_A * u * u * u));
        return 0.5f * (1.0f + t) + 0.5f * u * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * u * u);
    }
    case ACT_GELU:
        return 0.5f * (1.0f + erf(u * INV_SQRT2)) + u * INV_SQRT_2PI * exp(-0.5f * u * u);
    case ACT_RELU:
        return u > 0.0f ? 1.0f : 0.0f;
    default: {
        const float s = sigmoid_f(u);
        return s * (1.0f + u * (1.0f - s));
    }
    }
}

#define AT(base, off, ld) (base)[(off) + r * (ld) + c]

/* y = act(x) */
__kernel void pfx_act_forward(const ulong rows, const ulong cols, const int act,
                              __global const float *x, const ulong x_off, const ulong x_ld,
                              __global float *y, const ulong y_off, const ulong y_ld)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / cols, c = i - r * cols;
        AT(y, y_off, y_ld) = act_forward(act, AT(x, x_off, x_ld));
    }
}

/* dx = act'(x) * dy */
__kernel void pfx_act_backward(const ulong rows, const ulong cols, const int act,
                               __global const float *x, const ulong x_off, const ulong x_ld,
                               __global const float *dy, const ulong dy_off, const ulong dy_ld,
                               __global float *dx, const ulong dx_off, const ulong dx_ld)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / cols, c = i - r * cols;
        AT(dx, dx_off, dx_ld) = act_derivative(act, AT(x, x_off, x_ld)) * AT(dy, dy_off, dy_ld);
    }
}

/* out = silu(gate) * up */
__kernel void pfx_swiglu_forward(const ulong rows, const ulong cols,
                                 __global const float *g, const ulong g_off, const ulong g_ld,
                                 __global const float *u, const ulong u_off, const ulong u_ld,
                                 __global float *o, const ulong o_off, const ulong o_ld)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / cols, c = i - r * cols;
        const float gv = AT(g, g_off, g_ld);
        AT(o, o_off, o_ld) = gv * sigmoid_f(gv) * AT(u, u_off, u_ld);
    }
}

/* dgate = dout * up * silu'(gate), dup = dout * silu(gate) */
__kernel void pfx_swiglu_backward(const ulong rows, const ulong cols,
                                  __global const float *g, const ulong g_off, const ulong g_ld,
                                  __global const float *u, const ulong u_off, const ulong u_ld,
                                  __global const float *d, const ulong d_off, const ulong d_ld,
                                  __global float *dg, const ulong dg_off, const ulong dg_ld,
                                  __global float *du, const ulong du_off, const ulong du_ld)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / cols, c = i - r * cols;
        const float gv = AT(g, g_off, g_ld), uv = AT(u, u_off, u_ld), dv = AT(d, d_off, d_ld);
        const float s = sigmoid_f(gv);
        AT(dg, dg_off, dg_ld) = dv * uv * s * (1.0f + gv * (1.0f - s));
        AT(du, du_off, du_ld) = dv * gv * s;
    }
}

/* y[r, c] += bias[c] (bias float or half, element c at b_off + c * b_step) */
__kernel void pfx_bias_add(const ulong rows, const ulong cols,
                           __global float *y, const ulong y_off, const ulong y_ld,
                           __global const void *b, const ulong b_off, const ulong b_step,
                           const int b_half)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / cols, c = i - r * cols;
        AT(y, y_off, y_ld) += pfx_load(b, b_off + c * b_step, b_half);
    }
}
