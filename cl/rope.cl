/*
 * RoPE in HF's rotate-half convention on float32 BNHD rows (src/ops/rope.c):
 * row b * N + t, head h at columns h*D .. h*D+D-1, pairs (d, d + D/2). One
 * work-item per (row, head, d < D/2) owns both elements of its pair, so the
 * rotation is in place. sign = +1 rotates by the angle (forward), -1 by its
 * negative (the transpose: backward of a gradient).
 */
__kernel void pfx_rope(const ulong rows, const ulong tokens, const ulong heads, const ulong half_dim,
                       const ulong pos0, const float sign,
                       __global float *x, const ulong x_off, const ulong x_ld,
                       __global const float *inv_freq, const ulong f_off, const ulong f_step)
{
    const ulong per_row = heads * half_dim, n = rows * per_row;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / per_row, rem = i - r * per_row;
        const ulong h = rem / half_dim, d = rem - h * half_dim;
        /* the angle as a float32 product, as transformers forms it */
        const float a = (float)(pos0 + r % tokens) * inv_freq[f_off + d * f_step];
        const float c = cos(a), s = sign * sin(a);
        __global float *p = x + x_off + r * x_ld + h * 2 * half_dim + d;
        const float x1 = p[0], x2 = p[half_dim];
        p[0] = x1 * c - x2 * s;
        p[half_dim] = x2 * c + x1 * s;
    }
}
