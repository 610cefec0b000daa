/* The mean squared error and its gradient (include/prefixcl/layer.h), in
 * cl/layer.cl: per-work-group partial sums, added on the host in double. */
#include "layer_internal.h"

#define MSE_GROUPS_MAX 256

pfx_status pfx_mse_loss(const pfx_tensor *pred, const pfx_tensor *target, pfx_tensor *grad,
                        double *loss)
{
    static const char fn[] = "mse_loss";
    if (!pred)
        return pfx_error(target ? target->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "%s: pred is NULL",
                         fn);
    pfx_runtime *rt = pred->rt;
    if (!target)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: target is NULL", fn);
    if (!loss && !grad)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: loss and grad are both NULL", fn);
    const pfx_tensor *ts[3] = { pred, target, grad };
    const char *names[3] = { "pred", "target", "grad" };
    for (int i = 0; i < 3; i++) {
        if (!ts[i])
            continue;
        if (ts[i]->rt != rt)
            return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: %s belongs to another runtime",
                             fn, names[i]);
        if (ts[i]->dtype != PFX_DTYPE_F32)
            return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s must be float32", fn, names[i]);
        if (ts[i]->numel != pred->numel)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s has %zu elements, pred %zu", fn,
                             names[i], ts[i]->numel, pred->numel);
    }
    if (grad && (grad->mem == pred->mem || grad->mem == target->mem))
        return pfx_error(rt, PFX_ERROR_ALIASING, "%s: grad is the same tensor as %s", fn,
                         grad->mem == pred->mem ? "pred" : "target");
    const size_t n = pred->numel;
    size_t groups = pfx_ceil_div(n, PFX_LAYER_WG);
    if (groups > MSE_GROUPS_MAX)
        groups = MSE_GROUPS_MAX;
    cl_mem partial = NULL;
    size_t pbytes = groups * sizeof(float);
    pfx_status st = pfx_workspace_get(rt, PFX_WS_TMP0, pbytes, &partial);
    if (st != PFX_SUCCESS)
        return st;
    cl_kernel kernel;
    st = pfx_kernel_get(rt, LAYER_PROGRAM, LAYER_OPTIONS, "pfx_layer_mse", &kernel);
    if (st == PFX_SUCCESS) {
        cl_ulong nn = n;
        cl_mem gmem = grad ? grad->mem : NULL;
        cl_int has_grad = grad != NULL;
        float scale = (float)(2.0 / (double)n);
        size_t local = PFX_LAYER_WG, global = groups * PFX_LAYER_WG;
        pfx_arg args[] = { PFX_ARG(nn),     PFX_ARG(pred->mem), PFX_ARG(target->mem),
                           PFX_ARG(gmem),   PFX_ARG(has_grad),  PFX_ARG(scale),
                           PFX_ARG(partial) };
        st = pfx_launch(rt, kernel, "mse_loss", 1, &global, &local, 7, args);
    }
    if (st != PFX_SUCCESS || !loss) /* without loss nothing waits */
        return st;
    float host[MSE_GROUPS_MAX];
    cl_int err = clEnqueueReadBuffer(rt->queue, partial, CL_TRUE, 0, pbytes, host, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return pfx_cl_error(rt, err, "mse_loss: reading the partial sums");
    double sum = 0.0;
    for (size_t i = 0; i < groups; i++)
        sum += host[i];
    *loss = sum / (double)n;
    return PFX_SUCCESS;
}
