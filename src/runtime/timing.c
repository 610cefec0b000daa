/* Device-side timing: markers and kernel events on the profiling queue. */
#include <stdio.h>

#include "timing.h"

pfx_status pfx_marker(pfx_runtime *rt, cl_event *out)
{
    if (!rt || !out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_marker: rt or out is NULL");
    cl_int err = clEnqueueMarkerWithWaitList(rt->queue, 0, NULL, out);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(rt, err, "enqueueing a timing marker");
}

static pfx_status profile(pfx_runtime *rt, cl_event ev, cl_profiling_info what, cl_ulong *t)
{
    cl_int err = clWaitForEvents(1, &ev);
    if (err == CL_SUCCESS)
        err = clGetEventProfilingInfo(ev, what, sizeof(*t), t, NULL);
    if (err == CL_PROFILING_INFO_NOT_AVAILABLE)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "the device gives no profiling times here");
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(rt, err, "reading an event's time");
}

pfx_status pfx_event_span_ns(pfx_runtime *rt, cl_event from, cl_event to, uint64_t *ns)
{
    cl_ulong a = 0, b = 0;
    pfx_status st = profile(rt, to, CL_PROFILING_COMMAND_END, &b);
    if (st == PFX_SUCCESS)
        st = profile(rt, from, CL_PROFILING_COMMAND_END, &a);
    if (st != PFX_SUCCESS)
        return st;
    *ns = b > a ? (uint64_t)(b - a) : 0;
    return PFX_SUCCESS;
}

pfx_status pfx_event_ns(pfx_runtime *rt, cl_event ev, uint64_t *ns)
{
    cl_ulong a = 0, b = 0;
    pfx_status st = profile(rt, ev, CL_PROFILING_COMMAND_END, &b);
    if (st == PFX_SUCCESS)
        st = profile(rt, ev, CL_PROFILING_COMMAND_START, &a);
    if (st != PFX_SUCCESS)
        return st;
    *ns = b > a ? (uint64_t)(b - a) : 0;
    return PFX_SUCCESS;
}

pfx_status pfx_launch_event(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
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
    cl_int err = clEnqueueNDRangeKernel(rt->queue, kernel, dims, NULL, global, local, 0, NULL, event);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(rt, err, what);
}
