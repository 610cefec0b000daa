/* Kernel argument setting and ND-range enqueue with named errors. */
#include <stdio.h>

#include "internal.h"
#include "timing.h"

static pfx_status launch(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
                         const size_t *global, const size_t *local, size_t nargs, const pfx_arg *args,
                         cl_event *event)
{
    for (size_t i = 0; i < nargs; i++) {
        cl_int err = clSetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) {
            char msg[160];
            snprintf(msg, sizeof(msg), "%s: setting argument %zu", what, i);
            return pfx_cl_error(rt, err, msg);
        }
    }
    cl_int err = clEnqueueNDRangeKernel(rt->queue, kernel, dims, NULL, global, local, 0, NULL, event);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(rt, err, what);
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
    st = launch(rt, kernel, what, dims, global, local, nargs, args, event);
    pfx_rt_leave(rt);
    return st;
}

pfx_status pfx_launch(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
                      const size_t *global, const size_t *local, size_t nargs, const pfx_arg *args)
{
    return pfx_launch_event(rt, kernel, what, dims, global, local, nargs, args, NULL);
}
