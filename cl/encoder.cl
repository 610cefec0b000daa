/*
 * Prefix encoder kernels (src/layer/encoder.c). The products themselves are
 * CLBlast GEMMs; these are the elementwise pieces around them.
 *
 * Y is [m, ldy] row-major (ldy = 2*L*Hkv*D); one (layer, K or V) block is the
 * hkv*d columns starting at col0, viewed as [m][hkv][d]. A prefix tensor is
 * [hkv, m, d].
 */

/* T[i, j] = tanh(A[i, j] + b1[j]) in place, A [rows, cols]. */
__kernel void pfx_encoder_bias_tanh(const ulong rows, const ulong cols,
                                    __global float *a, __global const float *b1)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0))
        a[i] = tanh(a[i] + b1[i % cols]);
}

/* dA = dT * (1 - T^2) in place on dT, both [n]. */
__kernel void pfx_encoder_tanh_backward(const ulong n, __global float *dt,
                                        __global const float *t)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const float v = t[i];
        dt[i] = dt[i] * (1.0f - v * v);
    }
}

/* prefix[hk, t, dd] = Y[t, col0 + hk*d + dd] + b2[col0 + hk*d + dd].
 * Global: (hkv * d, m). */
__kernel void pfx_encoder_scatter(const uint m, const uint d, const uint width,
                                  const ulong ldy, const ulong col0,
                                  __global const float *y, __global const float *b2,
                                  __global void *prefix, const int prefix_half)
{
    const uint c = get_global_id(0);
    const uint t = get_global_id(1);
    if (c >= width || t >= m)
        return;
    const uint hk = c / d, dd = c - hk * d;
    const float v = y[t * ldy + col0 + c] + b2[col0 + c];
    pfx_store(prefix, ((ulong)hk * m + t) * d + dd, v, prefix_half);
}

/* dY[t, col0 + hk*d + dd] = dprefix[hk, t, dd], or 0 without a gradient
 * (has_grad == 0; dprefix is then not read). Global: (hkv * d, m). */
__kernel void pfx_encoder_gather(const uint m, const uint d, const uint width,
                                 const ulong ldy, const ulong col0,
                                 __global const void *dprefix, const int dprefix_half,
                                 const int has_grad, __global float *dy)
{
    const uint c = get_global_id(0);
    const uint t = get_global_id(1);
    if (c >= width || t >= m)
        return;
    const uint hk = c / d, dd = c - hk * d;
    float v = 0.0f;
    if (has_grad)
        v = pfx_load(dprefix, ((ulong)hk * m + t) * d + dd, dprefix_half);
    dy[t * ldy + col0 + c] = v;
}
