/*
 * Fused causal-LM cross-entropy over one chunk of logit rows
 * (src/ops/cross_entropy.c). One work-group of CE_LOCAL items per row: the
 * row's max, then sum(exp(z - max)), each a per-item fixed-order loop plus a
 * fixed-order tree, so the result is deterministic; no atomics. Labels were
 * range-checked on the host (IGNORE or in [0, V)).
 *   loss[r] = max + log(sum) - z[label]            (0 when ignored)
 *   z[r, :] <- (softmax(z) - onehot(label)) * inv_count   (with grad; 0 when ignored)
 */
#ifndef CE_LOCAL
#define CE_LOCAL 64
#endif
#define CE_IGNORE (-100)

__kernel __attribute__((reqd_work_group_size(CE_LOCAL, 1, 1)))
void pfx_cross_entropy(const ulong row_base, const ulong vocab,
                       __global float *z, const ulong z_off, const ulong z_ld,
                       __global const int *labels, const ulong label0,
                       __global float *loss, const ulong loss_off, const ulong loss_step,
                       const int has_loss, const int grad, const float inv_count)
{
    __local float s[CE_LOCAL];
    const uint lid = get_local_id(0);
    /* one row per work-group, no loop around the barriers (launched in
     * slices of rows from row_base) */
    const ulong row = row_base + get_group_id(0);
    __global float *zr = z + z_off + row * z_ld;
    const int label = labels[label0 + row];
    if (label == CE_IGNORE) { /* uniform: the whole group takes it */
        if (grad)
            for (ulong c = lid; c < vocab; c += CE_LOCAL)
                zr[c] = 0.0f;
        if (has_loss && lid == 0)
            loss[loss_off + row * loss_step] = 0.0f;
    } else {
        float m = -INFINITY;
        for (ulong c = lid; c < vocab; c += CE_LOCAL)
            m = fmax(m, zr[c]);
        s[lid] = m;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint w = CE_LOCAL / 2; w > 0; w >>= 1) {
            if (lid < w)
                s[lid] = fmax(s[lid], s[lid + w]);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        const float mx = s[0];
        barrier(CLK_LOCAL_MEM_FENCE);
        float e = 0.0f;
        for (ulong c = lid; c < vocab; c += CE_LOCAL)
            e += exp(zr[c] - mx);
        s[lid] = e;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint w = CE_LOCAL / 2; w > 0; w >>= 1) {
            if (lid < w)
                s[lid] += s[lid + w];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        const float sum = s[0];
        const float zl = zr[label]; /* read by every item before any writes */
        barrier(CLK_LOCAL_MEM_FENCE);
        if (has_loss && lid == 0)
            loss[loss_off + row * loss_step] = mx + log(sum) - zl;
        if (grad) {
            const float inv_sum = 1.0f / sum;
            for (ulong c = lid; c < vocab; c += CE_LOCAL) {
                const float p = exp(zr[c] - mx) * inv_sum;
                zr[c] = (p - ((long)c == (long)label ? 1.0f : 0.0f)) * inv_count;
            }
        }
    }
}
