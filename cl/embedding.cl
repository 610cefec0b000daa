/*
 * Token embedding gather (src/ops/embedding.c): out row r = b * tokens + t
 * gets wte[ids[r]] (+ wpe[pos0 + t], GPT-2's learned positions). Tables are
 * float, half (vload_half) or bfloat16, wte also Q8_0; the output float32. The ids were range-checked
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
        float v = pfx_load_weight(wte, wte_off + (ulong)ids[r] * wte_ld + c, wte_half);
        if (has_wpe)
            v += pfx_load(wpe, wpe_off + (pos0 + r % tokens) * wpe_ld + c, wpe_half);
        out[out_off + r * out_ld + c] = v;
    }
}

/* The table's gradient, a scatter-add written as a gather so that no two
 * work-items write one element. plan holds order [rows] (the rows sorted by
 * id, stably: the rows of one id ascending), start [unique + 1] and id
 * [unique]: distinct id u owns order[start[u] .. start[u + 1]). Work-item
 * (u, c) adds the sum of those rows' column c, in order, into dwte[id[u], c]. */
__kernel void pfx_embedding_backward(const ulong rows, const ulong unique, const ulong cols,
                                     __global const int *plan,
                                     __global const float *dout, const ulong dout_off, const ulong dout_ld,
                                     __global float *dwte, const ulong dwte_off, const ulong dwte_ld)
{
    __global const int *order = plan, *start = plan + rows, *id = start + unique + 1;
    const ulong n = unique * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong u = i / cols, c = i - u * cols;
        float s = 0.0f;
        for (int k = start[u]; k < start[u + 1]; k++)
            s += dout[dout_off + (ulong)order[k] * dout_ld + c];
        dwte[dwte_off + (ulong)id[u] * dwte_ld + c] += s;
    }
}

/* The learned positions' gradient: dwpe[pos0 + t, c] += sum_b dout[b * tokens + t, c],
 * the items in order. */
__kernel void pfx_position_backward(const ulong batch, const ulong tokens, const ulong cols,
                                    __global const float *dout, const ulong dout_off, const ulong dout_ld,
                                    __global float *dwpe, const ulong dwpe_off, const ulong dwpe_ld,
                                    const ulong pos0)
{
    const ulong n = tokens * cols;
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong t = i / cols, c = i - t * cols;
        float s = 0.0f;
        for (ulong b = 0; b < batch; b++)
            s += dout[dout_off + (b * tokens + t) * dout_ld + c];
        dwpe[dwpe_off + (pos0 + t) * dwpe_ld + c] += s;
    }
}
