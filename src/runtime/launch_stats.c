/*
 * Launch statistics (pfx_launch_stats, profile.h): the events of the kernels
 * launched while they are on, summed when read, and the host times of the
 * launch path and of host-BLAS products.
 */
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "timing.h"

/* Events kept before they are summed in the middle of a run (bounds the
 * memory; summing waits for them, so keep it rare). */
#define PENDING_MAX 8192

struct pfx_launch_log {
    pfx_launch_stats totals; /* device_ns of the events summed so far */
    cl_event pending[PENDING_MAX];
    size_t count;
    pfx_status failed; /* a kernel without profiling times: reported at read */
};

uint64_t pfx_host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Waits for the pending events and adds their times. */
static void fold(pfx_runtime *rt, struct pfx_launch_log *log)
{
    for (size_t i = 0; i < log->count; i++) {
        uint64_t ns = 0;
        if (log->failed == PFX_SUCCESS) {
            pfx_status st = pfx_event_ns(rt, log->pending[i], &ns);
            if (st != PFX_SUCCESS)
                log->failed = st;
        }
        log->totals.device_ns += ns;
        clReleaseEvent(log->pending[i]);
    }
    log->count = 0;
}

void pfx_launch_log_kernel(pfx_runtime *rt, cl_event ev, uint64_t enqueue_ns)
{
    struct pfx_launch_log *log = rt->launch_log;
    if (!log) {
        if (ev)
            clReleaseEvent(ev);
        return;
    }
    log->totals.kernels++;
    log->totals.enqueue_ns += enqueue_ns;
    if (!ev)
        return;
    if (log->count == PENDING_MAX)
        fold(rt, log);
    log->pending[log->count++] = ev;
}

void pfx_launch_log_host_gemm(pfx_runtime *rt, uint64_t ns)
{
    if (!rt->launch_log)
        return;
    rt->launch_log->totals.host_gemms++;
    rt->launch_log->totals.host_gemm_ns += ns;
}

void pfx_launch_log_free(pfx_runtime *rt)
{
    if (!rt->launch_log)
        return;
    for (size_t i = 0; i < rt->launch_log->count; i++)
        clReleaseEvent(rt->launch_log->pending[i]);
    free(rt->launch_log);
    rt->launch_log = NULL;
}

pfx_status pfx_launch_stats_enable(pfx_runtime *rt, bool on)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_launch_stats_enable: rt is NULL");
    pfx_status st = pfx_rt_enter(rt, "pfx_launch_stats_enable");
    if (st != PFX_SUCCESS)
        return st;
    pfx_launch_log_free(rt);
    if (on && !(rt->launch_log = calloc(1, sizeof(*rt->launch_log))))
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_launch_stats_enable: out of host memory");
    pfx_rt_leave(rt);
    return st;
}

pfx_status pfx_launch_stats_read(pfx_runtime *rt, pfx_launch_stats *out)
{
    if (!rt || !out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_launch_stats_read: %s is NULL",
                         !rt ? "rt" : "out");
    pfx_status st = pfx_rt_enter(rt, "pfx_launch_stats_read");
    if (st != PFX_SUCCESS)
        return st;
    if (!rt->launch_log) {
        pfx_rt_leave(rt);
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_launch_stats_read: the statistics are off "
                         "(pfx_launch_stats_enable)");
    }
    fold(rt, rt->launch_log);
    st = rt->launch_log->failed;
    if (st == PFX_SUCCESS)
        *out = rt->launch_log->totals;
    else
        pfx_error(rt, st, "pfx_launch_stats_read: the device gives no kernel times");
    pfx_rt_leave(rt);
    return st;
}
