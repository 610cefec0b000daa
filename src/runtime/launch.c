/* Kernel argument setting and ND-range enqueue with named errors. */
#include <stdio.h>

#include "internal.h"
#include "timing.h"

static pfx_status launch(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
                         const size_t *global, const size_t *local, size_t nargs,
                         const pfx_arg *args, cl_event *event)
{
    for (size_t i = 0; i < nargs; i++) {
        cl_int err = clSetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) {
            char msg[160];
            snprintf(msg, sizeof(msg), "%s: setting argument %zu", what, i);
            return pfx_cl_error(rt, err, msg);
        }
    }
    cl_int err =
        clEnqueueNDRangeKernel(rt->queue, kernel, dims, NULL, global, local, 0, NULL, event);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(rt, err, what);
}

/* launch, counted in the statistics when they are on. */
static pfx_status launch_counted(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
                                 const size_t *global, const size_t *local, size_t nargs,
                                 const pfx_arg *args, cl_event *event)
{
    if (!rt->launch_log)
        return launch(rt, kernel, what, dims, global, local, nargs, args, event);
    const uint64_t t0 = pfx_host_ns();
    cl_event mine = NULL;
    pfx_status st = launch(rt, kernel, what, dims, global, local, nargs, args, &mine);
    const uint64_t t1 = pfx_host_ns();
    if (st != PFX_SUCCESS)
        return st;
    if (event) { /* the caller's reference; the log keeps its own */
        cl_int err = clRetainEvent(mine);
        if (err != CL_SUCCESS) {
            *event = mine; /* the caller owns the only reference: not counted */
            pfx_launch_log_kernel(rt, NULL, t1 - t0);
            return PFX_SUCCESS;
        }
        *event = mine;
    }
    pfx_launch_log_kernel(rt, mine, t1 - t0);
    return PFX_SUCCESS;
}

/* Arguments and enqueue as one step of one thread: a kernel object's
 * arguments are shared by every caller. */
pfx_status pfx_launch_event(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
                            const size_t *global, const size_t *local, size_t nargs,
                            const pfx_arg *args, cl_event *event)
{
    pfx_status st = pfx_rt_enter(rt, what);
    if (st != PFX_SUCCESS)
        return st;
    st = launch_counted(rt, kernel, what, dims, global, local, nargs, args, event);
    pfx_rt_leave(rt);
    return st;
}

pfx_status pfx_launch(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
                      const size_t *global, const size_t *local, size_t nargs, const pfx_arg *args)
{
    return pfx_launch_event(rt, kernel, what, dims, global, local, nargs, args, NULL);
}

size_t pfx_grid_groups(size_t n, size_t local)
{
    size_t groups = pfx_ceil_div(n, local);
    if (groups > 4096)
        groups = 4096; /* grid-stride loops cover the rest */
    return groups ? groups : 1;
}

pfx_status pfx_launch_groups(pfx_runtime *rt, const char *program, const char *options,
                             const char *name, const char *what, size_t groups, size_t local,
                             size_t nargs, const pfx_arg *args)
{
    cl_kernel kernel;
    pfx_status st = pfx_kernel_get(rt, program, options, name, &kernel);
    if (st != PFX_SUCCESS)
        return st;
    size_t global = groups * local;
    return pfx_launch(rt, kernel, what, 1, &global, &local, nargs, args);
}

pfx_status pfx_launch_1d(pfx_runtime *rt, const char *program, const char *options,
                         const char *name, const char *what, size_t n, size_t nargs,
                         const pfx_arg *args)
{
    const size_t local = 64;
    return pfx_launch_groups(rt, program, options, name, what, pfx_grid_groups(n, local), local,
                             nargs, args);
}
