/*
 * Storage conversion (src/ops/convert.c): dst[r, c] = src[r, c] as float32,
 * src float or half (vload_half: no cl_khr_fp16 needed). Used to widen a
 * block of a half weight into a float32 workspace before an SGEMM.
 */
__kernel void pfx_to_float(const ulong rows, const ulong cols,
                           __global const void *src, const ulong s_off, const ulong s_ld,
                           const int s_half,
                           __global float *dst, const ulong d_off, const ulong d_ld)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / cols, c = i - r * cols;
        dst[d_off + r * d_ld + c] = pfx_load(src, s_off + r * s_ld + c, s_half);
    }
}
