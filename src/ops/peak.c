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

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median GFLOP/s of runs of one FMA kernel over `seconds` (at least
 * three, after one untimed). */
static pfx_status fma_rate(pfx_runtime *rt, pfx_peak_kernel kernel, size_t items, size_t local,
                           pfx_tensor *out, double seconds, double *gflops)
{
    const size_t global = pfx_peak_flops_per_item(kernel) > 4096 ? items / 8 : items;
    const double flops = pfx_peak_flops_per_item(kernel) * (double)global;
    enum { MAX_RUNS = 64 };
    double rate[MAX_RUNS];
    size_t n = 0;
    pfx_status st = pfx_peak_enqueue(rt, kernel, global, local, NULL, out, NULL);
    if (st == PFX_SUCCESS)
        st = pfx_runtime_finish(rt);
    const double t0 = pfx_host_seconds();
    while (st == PFX_SUCCESS && n < MAX_RUNS && (n < 3 || pfx_host_seconds() - t0 < seconds)) {
        pfx_event *ev = NULL;
        uint64_t ns = 0;
        const double w0 = pfx_host_seconds();
        st = pfx_peak_enqueue(rt, kernel, global, local, NULL, out, &ev);
        if (st == PFX_SUCCESS)
            st = pfx_runtime_finish(rt);
        const double wall = pfx_host_seconds() - w0;
        if (st == PFX_SUCCESS && pfx_event_time_ns(ev, &ns) != PFX_SUCCESS)
            ns = 0; /* no device times: the wall time */
        pfx_event_release(&ev);
        const double s = ns ? 1e-9 * (double)ns : wall;
        if (st == PFX_SUCCESS && s > 0)
            rate[n++] = flops / s * 1e-9;
    }
    if (st == PFX_SUCCESS && n == 0)
        st = pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                       "pfx_peak_fma_gflops: no run took measurable time");
    if (st == PFX_SUCCESS) {
        qsort(rate, n, sizeof(double), by_value);
        *gflops = rate[n / 2];
    }
    return st;
}

pfx_status pfx_peak_fma_gflops(pfx_runtime *rt, double seconds, double *gflops)
{
    if (!rt || !gflops)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_peak_fma_gflops: %s is NULL",
                         !rt ? "rt" : "gflops");
    if (!(seconds > 0.0) || seconds > 3600.0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_peak_fma_gflops: seconds %g is not in (0, 3600]", seconds);
    *gflops = 0.0;
    /* prefixcl bench's sizes: 64 Ki work-items a compute unit, groups of
     * up to 256 */
    const pfx_device_info *info = &rt->info;
    size_t items = (size_t)(info->compute_units ? info->compute_units : 1) * 65536;
    if (items > ((size_t)1 << 26))
        items = (size_t)1 << 26;
    size_t local = 256;
    while (local > info->max_work_group_size && local > 1)
        local /= 2;
    items = (items + local * 8 - 1) / (local * 8) * (local * 8);
    const size_t kinds =
        pfx_peak_ilp(rt->vendor, info->platform_name) ? PFX_PEAK_COPY : PFX_PEAK_FMA_ILP_F4;
    pfx_tensor *out = NULL;
    pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, (size_t[]){ items }, &out);
    double best = 0.0;
    for (size_t k = 0; st == PFX_SUCCESS && k < kinds; k++) {
        double r = 0.0;
        if ((st = fma_rate(rt, (pfx_peak_kernel)k, items, local, out, seconds / (double)kinds,
                           &r)) == PFX_SUCCESS &&
            r > best)
            best = r;
    }
    pfx_tensor_destroy(&out);
    if (st == PFX_SUCCESS)
        *gflops = best;
    return st;
}
