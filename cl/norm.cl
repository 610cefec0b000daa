/*
 * LayerNorm and RMSNorm over rows, forward and dX backward (src/ops/norm.c).
 * One work-group of PFX_WG items per row (row_base + group id: no loop
 * around the barriers; the host launches slices of rows); each item sums its
 * 8-column chunks lid, lid + PFX_WG, ... and then its tail columns in
 * order, then a fixed-order tree combines the items: deterministic for a
 * given PFX_WG. Activations are float32
 * (offset, row stride); weights float or half (offset, step, half flag).
 */
#ifndef PFX_WG
#error "built with -DPFX_WG=<work-group size> (src/ops/work_groups.h)"
#endif

#define NORM_W(c) pfx_load(w, w_off + (ulong)(c) * w_step, w_half)

/* Item lid's columns, 8 at a time: the chunks lid, lid + PFX_WG, ... of
 * whole 8-column chunks (j the chunk), then the tail columns one by one at
 * the same stride (c the column); a fixed order per item. */
#define FOR_CHUNKS for (ulong j = lid; j < cols / 8; j += PFX_WG)
#define FOR_TAIL for (ulong c = cols / 8 * 8 + lid; c < cols; c += PFX_WG)


/* y = (x - mean) * rstd * w (+ b); rms: y = x * rstd * w (no mean). Stats
 * (when has_stats) go to mean[mean_off + row * step] (LayerNorm only) and
 * rstd[...]. y may be x: every element is read before its item writes it. */
__kernel __attribute__((reqd_work_group_size(PFX_WG, 1, 1)))
void pfx_norm_forward(const ulong row_base, const ulong cols, const int rms,
                      __global const float *x, const ulong x_off, const ulong x_ld,
                      __global const void *w, const ulong w_off, const ulong w_step,
                      const int w_half,
                      __global const void *b, const ulong b_off, const ulong b_step,
                      const int b_half, const int has_b, const float eps,
                      __global float *y, const ulong y_off, const ulong y_ld,
                      __global float *mean, const ulong mean_off, const ulong mean_step,
                      __global float *rstd, const ulong rstd_off, const ulong rstd_step,
                      const int has_stats)
{
    __local float s[PFX_WG];
    const uint lid = get_local_id(0);
    const float inv_cols = 1.0f / (float)cols;
    {
        const ulong row = row_base + get_group_id(0);
        __global const float *xr = x + x_off + row * x_ld;
        float mu = 0.0f;
        if (!rms) {
            float8 a8 = (float8)0.0f;
            FOR_CHUNKS a8 += vload8(j, xr);
            float a = pfx_sum8(a8);
            FOR_TAIL a += xr[c];
            mu = pfx_group_sum(s, a, PFX_WG) * inv_cols;
        }
        float8 q8 = (float8)0.0f;
        FOR_CHUNKS {
            const float8 d = vload8(j, xr) - mu;
            q8 += d * d;
        }
        float q = pfx_sum8(q8);
        FOR_TAIL {
            const float d = xr[c] - mu;
            q += d * d;
        }
        const float r = rsqrt(pfx_group_sum(s, q, PFX_WG) * inv_cols + eps);
        __global float *yr = y + y_off + row * y_ld;
        FOR_CHUNKS {
            float8 v = (vload8(j, xr) - mu) * r * pfx_load8(w, w_off, w_step, w_half, j);
            if (has_b)
                v += pfx_load8(b, b_off, b_step, b_half, j);
            vstore8(v, j, yr);
        }
        FOR_TAIL {
            float v = (xr[c] - mu) * r * NORM_W(c);
            if (has_b)
                v += pfx_load(b, b_off + c * b_step, b_half);
            yr[c] = v;
        }
        if (has_stats && lid == 0) {
            if (!rms)
                mean[mean_off + row * mean_step] = mu;
            rstd[rstd_off + row * rstd_step] = r;
        }
    }
}

/* dX: xhat = (x - mean) * rstd (mean 0 for rms), g = dy * w,
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) (no mean(g) for rms),
 * written or added (accumulate). */
__kernel __attribute__((reqd_work_group_size(PFX_WG, 1, 1)))
void pfx_norm_backward(const ulong row_base, const ulong cols, const int rms,
                       __global const float *x, const ulong x_off, const ulong x_ld,
                       __global const void *w, const ulong w_off, const ulong w_step,
                       const int w_half,
                       __global const float *mean, const ulong mean_off, const ulong mean_step,
                       __global const float *rstd, const ulong rstd_off, const ulong rstd_step,
                       __global const float *dy, const ulong dy_off, const ulong dy_ld,
                       __global float *dx, const ulong dx_off, const ulong dx_ld,
                       const int accumulate)
{
    __local float s[PFX_WG];
    const uint lid = get_local_id(0);
    const float inv_cols = 1.0f / (float)cols;
    {
        const ulong row = row_base + get_group_id(0);
        __global const float *xr = x + x_off + row * x_ld;
        __global const float *dyr = dy + dy_off + row * dy_ld;
        const float mu = rms ? 0.0f : mean[mean_off + row * mean_step];
        const float r = rstd[rstd_off + row * rstd_step];
        float8 sg8 = (float8)0.0f, sgx8 = (float8)0.0f;
        FOR_CHUNKS {
            const float8 g = vload8(j, dyr) * pfx_load8(w, w_off, w_step, w_half, j);
            sg8 += g;
            sgx8 += g * (vload8(j, xr) - mu) * r;
        }
        float sg = pfx_sum8(sg8), sgx = pfx_sum8(sgx8);
        FOR_TAIL {
            const float g = dyr[c] * NORM_W(c);
            sg += g;
            sgx += g * (xr[c] - mu) * r;
        }
        const float mg = rms ? 0.0f : pfx_group_sum(s, sg, PFX_WG) * inv_cols;
        const float mgx = pfx_group_sum(s, sgx, PFX_WG) * inv_cols;
        __global float *dxr = dx + dx_off + row * dx_ld;
        FOR_CHUNKS {
            const float8 g = vload8(j, dyr) * pfx_load8(w, w_off, w_step, w_half, j);
            const float8 xhat = (vload8(j, xr) - mu) * r;
            const float8 v = r * (g - mg - xhat * mgx);
            vstore8(accumulate ? vload8(j, dxr) + v : v, j, dxr);
        }
        FOR_TAIL {
            const float g = dyr[c] * NORM_W(c);
            const float xhat = (xr[c] - mu) * r;
            const float v = r * (g - mg - xhat * mgx);
            dxr[c] = accumulate ? dxr[c] + v : v;
        }
    }
}

/* Gradients of the norm's weight and bias: per column c,
 *   dw[c] (+)= sum_r dy[r, c] * xhat[r, c],  xhat = (x - mean) * rstd (mean 0 for rms),
 *   db[c] (+)= sum_r dy[r, c]                (when has_db),
 * one work-item a column (grid-stride), the rows in order: deterministic,
 * no atomics; neighbouring work-items read neighbouring columns. */
__kernel void pfx_norm_param_grad(const ulong rows, const ulong cols, const int rms,
                                  __global const float *x, const ulong x_off, const ulong x_ld,
                                  __global const float *mean, const ulong mean_off, const ulong mean_step,
                                  __global const float *rstd, const ulong rstd_off, const ulong rstd_step,
                                  __global const float *dy, const ulong dy_off, const ulong dy_ld,
                                  __global float *dw, const ulong dw_off, const ulong dw_step,
                                  __global float *db, const ulong db_off, const ulong db_step,
                                  const int has_db, const int accumulate)
{
    for (ulong c = get_global_id(0); c < cols; c += get_global_size(0)) {
        float sw = 0.0f, sb = 0.0f;
        for (ulong r = 0; r < rows; r++) {
            const float g = dy[dy_off + r * dy_ld + c];
            const float mu = rms ? 0.0f : mean[mean_off + r * mean_step];
            sw += g * (x[x_off + r * x_ld + c] - mu) * rstd[rstd_off + r * rstd_step];
            sb += g;
        }
        __global float *w = dw + dw_off + c * dw_step;
        *w = accumulate ? *w + sw : sw;
        if (has_db) {
            __global float *b = db + db_off + c * db_step;
            *b = accumulate ? *b + sb : sb;
        }
    }
}
