/*
 * Fused causal-LM cross-entropy over one chunk of logit rows
 * (src/ops/cross_entropy.c). One work-group of PFX_WG items per row: the
 * row's max, then sum(exp(z - max)), each a per-item fixed-order loop (8
 * logits a step) plus a fixed-order tree, so the result is deterministic; no
 * atomics. Labels were
 * range-checked on the host (IGNORE or in [0, V)).
 *   loss[r] = max + log(sum) - z[label]            (0 when ignored)
 *   z[r, :] <- (softmax(z) - onehot(label)) * inv_count   (with grad; 0 when ignored)
 */
#ifndef PFX_WG
#error "built with -DPFX_WG=<work-group size> (src/ops/work_groups.h)"
#endif
#define CE_IGNORE (-100)

/* exp(z - max) = 2^((z - max) log2 e), an argument <= 0: the polynomial of
 * cl/common.cl (with mad(): rusticl's vector fma() is wrong) on 8 logits at
 * a time, where the library exp is a call per element on CPU compilers. */
PFX_DEFINE_POLY_EXP2_WITH(ce_exp2v, float8, int8, convert_int8, as_float8, mad)
PFX_DEFINE_POLY_EXP2_WITH(ce_exp2, float, int, convert_int, as_float, mad)

__kernel __attribute__((reqd_work_group_size(PFX_WG, 1, 1)))
void pfx_cross_entropy(const ulong row_base, const ulong vocab,
                       __global float *z, const ulong z_off, const ulong z_ld,
                       __global const int *labels, const ulong label0,
                       __global float *loss, const ulong loss_off, const ulong loss_step,
                       const int has_loss, const int grad, const float inv_count)
{
    __local float s[PFX_WG];
    const uint lid = get_local_id(0);
    /* one row per work-group, no loop around the barriers (launched in
     * slices of rows from row_base) */
    const ulong row = row_base + get_group_id(0);
    __global float *zr = z + z_off + row * z_ld;
    const int label = labels[label0 + row];
    if (label == CE_IGNORE) { /* uniform: the whole group takes it */
        if (grad)
            for (ulong c = lid; c < vocab; c += PFX_WG)
                zr[c] = 0.0f;
        if (has_loss && lid == 0)
            loss[loss_off + row * loss_step] = 0.0f;
    } else {
        /* item lid owns the 8-logit chunks lid, lid + PFX_WG, ... and the
         * tail logits past the last whole chunk at the same stride */
        const ulong chunks = vocab / 8, tail = chunks * 8;
        float8 m8 = (float8)(-INFINITY);
        for (ulong j = lid; j < chunks; j += PFX_WG)
            m8 = fmax(m8, vload8(j, zr));
        float m = pfx_max8(m8);
        for (ulong c = tail + lid; c < vocab; c += PFX_WG)
            m = fmax(m, zr[c]);
        const float mx = pfx_group_max(s, m, PFX_WG);
        float8 e8 = (float8)0.0f;
        for (ulong j = lid; j < chunks; j += PFX_WG)
            e8 += ce_exp2v((vload8(j, zr) - mx) * PFX_LOG2E);
        float e = pfx_sum8(e8);
        for (ulong c = tail + lid; c < vocab; c += PFX_WG)
            e += ce_exp2((zr[c] - mx) * PFX_LOG2E);
        const float sum = pfx_group_sum(s, e, PFX_WG);
        /* read by every item before any item overwrites the row with the
         * gradient: the fence must cover global memory, or the read may move
         * past the barrier and see a gradient (a race Oclgrind reports) */
        const float zl = zr[label];
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        if (has_loss && lid == 0)
            loss[loss_off + row * loss_step] = mx + log(sum) - zl;
        if (grad) {
            const float inv_sum = 1.0f / sum;
            const int8 lanes = (int8)(0, 1, 2, 3, 4, 5, 6, 7);
            for (ulong j = lid; j < chunks; j += PFX_WG) {
                const float8 p = ce_exp2v((vload8(j, zr) - mx) * PFX_LOG2E) * inv_sum;
                const int8 hit = lanes + (int8)(8 * (int)j) == (int8)label;
                vstore8((p - select((float8)0.0f, (float8)1.0f, hit)) * inv_count, j, zr);
            }
            for (ulong c = tail + lid; c < vocab; c += PFX_WG) {
                const float p = ce_exp2((zr[c] - mx) * PFX_LOG2E) * inv_sum;
                zr[c] = (p - ((long)c == (long)label ? 1.0f : 0.0f)) * inv_count;
            }
        }
    }
}
