/* Elementwise operations (cl/elementwise.cl). */
#include <math.h>

#include "internal.h"

pfx_status pfx_axpby(pfx_tensor *y, float alpha, const pfx_tensor *x, float beta)
{
    if (!y)
        return pfx_error(x ? x->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "axpby: y is NULL");
    pfx_runtime *rt = y->rt;
    if (!x)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "axpby: x is NULL");
    if (x->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "axpby: x and y belong to different runtimes");
    if (x->numel != y->numel)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "axpby: x has %zu elements, y %zu", x->numel,
                         y->numel);
    const pfx_tensor *blocks = x->dtype == PFX_DTYPE_Q8_0   ? x
                               : y->dtype == PFX_DTYPE_Q8_0 ? y
                                                            : NULL;
    if (blocks)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                         "axpby: %s is Q8_0; axpby takes float32, half or bfloat16",
                         blocks == x ? "x" : "y");
    if (!isfinite(alpha) || !isfinite(beta))
        return pfx_error(rt, PFX_ERROR_NOT_FINITE, "axpby: alpha (%g) and beta (%g) must be finite",
                         (double)alpha, (double)beta);

    cl_kernel kernel;
    pfx_status st = pfx_kernel_get(rt, "elementwise", "", "pfx_axpby", &kernel); /* no tunables */
    if (st != PFX_SUCCESS)
        return st;
    cl_ulong n = y->numel;
    cl_int x_half = pfx_storage_code(x->dtype), y_half = pfx_storage_code(y->dtype);
    size_t local = 64, global = pfx_grid_groups(y->numel, local) * local;
    pfx_arg args[] = { PFX_ARG(n),    PFX_ARG(alpha),  PFX_ARG(x->mem), PFX_ARG(x_half),
                       PFX_ARG(beta), PFX_ARG(y->mem), PFX_ARG(y_half) };
    return pfx_launch(rt, kernel, "axpby", 1, &global, &local, sizeof(args) / sizeof(args[0]),
                      args);
}
