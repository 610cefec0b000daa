/* Device-side timing: markers and kernel events on the profiling queue. */
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

/* Time of `end` (at end_what) minus that of `start` (at start_what), in ns
 * (0 when the clock runs backwards); `end` is read first. */
static pfx_status span(pfx_runtime *rt, cl_event start, cl_profiling_info start_what, cl_event end,
                       cl_profiling_info end_what, uint64_t *ns)
{
    cl_ulong a = 0, b = 0;
    pfx_status st = profile(rt, end, end_what, &b);
    if (st == PFX_SUCCESS)
        st = profile(rt, start, start_what, &a);
    if (st != PFX_SUCCESS)
        return st;
    *ns = b > a ? (uint64_t)(b - a) : 0;
    return PFX_SUCCESS;
}

pfx_status pfx_event_span_ns(pfx_runtime *rt, cl_event from, cl_event to, uint64_t *ns)
{
    return span(rt, from, CL_PROFILING_COMMAND_END, to, CL_PROFILING_COMMAND_END, ns);
}

pfx_status pfx_event_ns(pfx_runtime *rt, cl_event ev, uint64_t *ns)
{
    return span(rt, ev, CL_PROFILING_COMMAND_START, ev, CL_PROFILING_COMMAND_END, ns);
}
