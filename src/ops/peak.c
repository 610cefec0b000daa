/* The device-ceiling kernels of cl/peak.cl (prefixcl/profile.h). */
#include "registry.h"
#include "timing.h"

static const struct {
    const char *name;
    double flops_per_item;
    bool cpu_only;
} peaks[PFX_PEAK_KERNEL_COUNT] = {
    [PFX_PEAK_FMA_F1] = { "peak_fma_f1", 4096, false },
    [PFX_PEAK_FMA_F2] = { "peak_fma_f2", 4096, false },
    [PFX_PEAK_FMA_F4] = { "peak_fma_f4", 4096, false },
    [PFX_PEAK_FMA_F8] = { "peak_fma_f8", 4096, false },
    [PFX_PEAK_FMA_F16] = { "peak_fma_f16", 4096, false },
    [PFX_PEAK_FMA_ILP_F4] = { "peak_fma_ilp_f4", 32768, true },
    [PFX_PEAK_FMA_ILP_F8] = { "peak_fma_ilp_f8", 32768, true },
    [PFX_PEAK_FMA_ILP_F16] = { "peak_fma_ilp_f16", 32768, true },
    [PFX_PEAK_COPY] = { "peak_copy", 0, false },
};

double pfx_peak_flops_per_item(pfx_peak_kernel kernel)
{
    return (unsigned)kernel < PFX_PEAK_KERNEL_COUNT ? peaks[kernel].flops_per_item : 0;
}

static bool holds(const pfx_tensor *t, size_t floats)
{
    return t->dtype == PFX_DTYPE_F32 && t->numel >= floats;
}

pfx_status pfx_peak_enqueue(pfx_runtime *rt, pfx_peak_kernel kernel, size_t global, size_t local,
                            const pfx_tensor *in, pfx_tensor *out, pfx_event **event)
{
    if (!rt || !out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_peak_enqueue: %s is NULL",
                         !rt ? "rt" : "out");
    if ((unsigned)kernel >= PFX_PEAK_KERNEL_COUNT)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_peak_enqueue: kernel %d is not a "
                         "pfx_peak_kernel",
                         (int)kernel);
    const bool copy = kernel == PFX_PEAK_COPY;
    if (copy && !in)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_peak_enqueue: in is NULL (copy)");
    if (!copy && in)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_peak_enqueue: in is not NULL "
                         "(an FMA kernel reads nothing)");
    if (out->rt != rt || (in && in->rt != rt))
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "pfx_peak_enqueue: %s is from another "
                         "runtime",
                         out->rt != rt ? "out" : "in");
    if (!global || !local || global % local || local > rt->info.max_work_group_size)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_peak_enqueue: global %zu must be "
                         "a non-zero multiple of local %zu (1..%zu)",
                         global, local, (size_t)rt->info.max_work_group_size);
    size_t floats;
    if (pfx_mul_overflows(global, copy ? 4 : 1, &floats))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "pfx_peak_enqueue: global %zu", global);
    if (!holds(out, floats) || (copy && !holds(in, floats)))
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "pfx_peak_enqueue: %s must be float32 of "
                         "at least %zu values",
                         !holds(out, floats) ? "out" : "in", floats);
    if (copy && in == out)
        return pfx_error(rt, PFX_ERROR_ALIASING, "pfx_peak_enqueue: in and out are the same");
    const bool ilp = pfx_peak_ilp(rt->vendor, rt->info.platform_name);
    if (peaks[kernel].cpu_only && !ilp)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "pfx_peak_enqueue: %s runs on CPU devices only (not Mesa's rusticl)",
                         peaks[kernel].name);
    /* the option set of src/ops/registry.c */
    cl_kernel k;
    pfx_status st = pfx_kernel_get(rt, "peak", ilp ? "-DPEAK_ILP=1" : "", peaks[kernel].name, &k);
    if (st != PFX_SUCCESS)
        return st;
    float a = 1.3f;
    pfx_arg args[2] = { copy ? PFX_ARG(in->mem) : PFX_ARG(out->mem),
                        copy ? PFX_ARG(out->mem) : PFX_ARG(a) };
    cl_event ev = NULL;
    st = pfx_launch_event(rt, k, peaks[kernel].name, 1, &global, &local, 2, args,
                          event ? &ev : NULL);
    if (st == PFX_SUCCESS && event)
        st = pfx_event_wrap(rt, ev, event);
    return st;
}
