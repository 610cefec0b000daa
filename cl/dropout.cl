/* Dropout of the residual branches and embeddings (src/ops/dropout.c): the
 * mask of cl/common.cl's pfx_dropout_factor, element (row0 + r, c). */

/* out[r, c] = (has_base ? base[r, c] : 0) + x[r, c] * factor(row0 + r, c):
 * a kept element scaled by 1/(1-p), a dropped one times 0 (NaN and Inf
 * stay NaN, as torch's x * mask * scale). out may be x or base (same view). */
__kernel void pfx_dropout(const ulong rows, const ulong cols, const uint4 stream,
                          const uint threshold, const float scale, const uint row0,
                          __global const float *x, const ulong x_off, const ulong x_ld,
                          __global const float *base, const ulong base_off, const ulong base_ld,
                          const int has_base, __global float *out, const ulong out_off,
                          const ulong out_ld)
{
    for (ulong e = get_global_id(0); e < rows * cols; e += get_global_size(0)) {
        const ulong r = e / cols, c = e % cols;
        const float f = pfx_dropout_factor(stream, threshold, scale, row0 + (uint)r, (uint)c);
        float v = x[x_off + r * x_ld + c] * f;
        if (has_base)
            v = base[base_off + r * base_ld + c] + v;
        out[out_off + r * out_ld + c] = v;
    }
}
