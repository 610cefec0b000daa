/* Elementwise kernels over contiguous tensors of n elements. */

/* y = alpha * x + beta * y (beta == 0 ignores y, so NaN in y does not leak). */
__kernel void pfx_axpby(const ulong n, const float alpha, __global const void *x,
                        const int x_half, const float beta, __global void *y, const int y_half)
{
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
        float v = alpha * pfx_load(x, i, x_half);
        if (beta != 0.0f)
            v += beta * pfx_load(y, i, y_half);
        pfx_store(y, i, v, y_half);
    }
}
