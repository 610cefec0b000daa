/*
 * Token embedding gather (src/ops/embedding.c): out row r = b * tokens + t
 * gets wte[ids[r]] (+ wpe[pos0 + t], GPT-2's learned positions). Tables are
 * float or half (vload_half), the output float32. The ids were range-checked
 * on the host before the launch.
 */
__kernel void pfx_embedding(const ulong rows, const ulong cols, const ulong tokens,
                            __global const int *ids,
                            __global const void *wte, const ulong wte_off, const ulong wte_ld,
                            const int wte_half,
                            __global const void *wpe, const ulong wpe_off, const ulong wpe_ld,
                            const int wpe_half, const int has_wpe, const ulong pos0,
                            __global float *out, const ulong out_off, const ulong out_ld)
{
    const ulong n = rows * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong r = i / cols, c = i - r * cols;
        float v = pfx_load(wte, wte_off + (ulong)ids[r] * wte_ld + c, wte_half);
        if (has_wpe)
            v += pfx_load(wpe, wpe_off + (pos0 + r % tokens) * wpe_ld + c, wpe_half);
        out[out_off + r * out_ld + c] = v;
    }
}
