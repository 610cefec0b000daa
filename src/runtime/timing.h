/*
 * Device-side timing on the runtime's profiling queue. Internal (tools and
 * benchmarks); not installed.
 *
 * A span is measured between two markers (clEnqueueMarkerWithWaitList with an
 * event) on the in-order queue: the time from the end of the first to the end
 * of the second is the device time of everything enqueued between them, one
 * kernel or a whole library call. A single kernel can also be launched with its
 * own event (pfx_launch_event) and timed from its start to its end.
 */
#ifndef PFX_RUNTIME_TIMING_H
#define PFX_RUNTIME_TIMING_H

#include "internal.h"

/* Enqueues a marker and returns its event (release with clReleaseEvent). */
pfx_status pfx_marker(pfx_runtime *rt, cl_event *out);

/* Nanoseconds from the end of `from` to the end of `to` (waits for `to`).
 * PFX_ERROR_UNSUPPORTED when the device gives no profiling times for markers. */
pfx_status pfx_event_span_ns(pfx_runtime *rt, cl_event from, cl_event to, uint64_t *ns);

/* Nanoseconds from the start to the end of one command (waits for it). */
pfx_status pfx_event_ns(pfx_runtime *rt, cl_event ev, uint64_t *ns);

/* A public pfx_event owning ev (released on failure, after waiting for it). */
pfx_status pfx_event_wrap(pfx_runtime *rt, cl_event ev, pfx_event **out);

/* pfx_launch that also returns the kernel's event. */
pfx_status pfx_launch_event(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
                            const size_t *global, const size_t *local, size_t nargs,
                            const pfx_arg *args, cl_event *event);

#endif
