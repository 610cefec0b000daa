/*
 * Storage conversion (src/ops/convert.c): dst[r, c] = src[r, c], each in its
 * own storage (s_half, d_half: pfx_load's codes; src also Q8_0).
 * Widening: a block of a half weight into a float32 workspace before an
 * SGEMM; narrowing (rounded to nearest even, pfx_store): a half KV cache's
 * new rows. One item converts 8 neighbours of a row, widening with one
 * vector load and store (one element each and a 64-bit division per element
 * was ten times slower on PoCL). vload_half: no cl_khr_fp16 needed.
 */
__kernel void pfx_convert(const ulong rows, const ulong cols,
                          __global const void *src, const ulong s_off, const ulong s_ld,
                          const int s_half,
                          __global void *dst, const ulong d_off, const ulong d_ld,
                          const int d_half)
{
    const ulong per_row = (cols + 7) / 8, n = rows * per_row;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / per_row, c = (i - r * per_row) * 8;
        const ulong s = s_off + r * s_ld + c, d = d_off + r * d_ld + c;
        if (!d_half && c + 8 <= cols && s_half != PFX_Q8_0) {
            vstore8(pfx_load8(src, s, 1, s_half, 0), 0, (__global float *)dst + d);
        } else if (!d_half && c + 8 <= cols && s % 8 == 0) { /* Q8_0: 8 of one block */
            vstore8(pfx_load8_q8_0(src, s), 0, (__global float *)dst + d);
        } else {
            for (ulong e = 0; e < cols - c && e < 8; e++)
                pfx_store(dst, d + e, pfx_load_weight(src, s + e, s_half), d_half);
        }
    }
}
