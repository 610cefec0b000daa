/* prefixcl bench: untimed warm-up, a run count calibrated to a target time,
 * device times of spans and events (prefixcl/profile.h) and the host wall
 * time of the same runs, their medians. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/tool_util.h"

/* One run on an idle queue: its host wall time (ns) from the first enqueue to
 * the end of the finish after it in *wall_ns, and its device time (between
 * two markers, or its single kernel's event) in *dev_ns; with `host` the
 * device time is the wall time. Each run is finished before the next: the
 * wall time is what a caller of the library waits for one call. */
static pfx_status timed_run(pfx_runtime *rt, bench_enqueue_fn fn, void *ctx, bool host,
                            double *dev_ns, double *wall_ns)
{
    pfx_status st = pfx_runtime_finish(rt);
    if (st != PFX_SUCCESS)
        return st;
    pfx_span *span = NULL;
    pfx_event *kernel = NULL;
    const double t0 = tool_now_s();
    if (!host)
        st = pfx_span_begin(rt, &span);
    if (st == PFX_SUCCESS)
        st = fn(rt, ctx, &kernel);
    if (st == PFX_SUCCESS && span)
        st = pfx_span_end(span);
    if (st == PFX_SUCCESS)
        st = pfx_runtime_finish(rt);
    *wall_ns = (tool_now_s() - t0) * 1e9;
    uint64_t ns = 0;
    if (st == PFX_SUCCESS && !host)
        st = kernel ? pfx_event_time_ns(kernel, &ns) : pfx_span_time_ns(span, &ns);
    *dev_ns = host ? *wall_ns : (double)ns;
    pfx_span_release(&span);
    pfx_event_release(&kernel);
    return st;
}

/* `count` runs into dev[] and wall[]. */
static pfx_status timed_runs(pfx_runtime *rt, bench_enqueue_fn fn, void *ctx, unsigned count,
                             bool host, double *dev, double *wall)
{
    pfx_status st = PFX_SUCCESS;
    for (unsigned i = 0; i < count && st == PFX_SUCCESS; i++)
        st = timed_run(rt, fn, ctx, host, &dev[i], &wall[i]);
    return st;
}

pfx_status bench_measure(pfx_runtime *rt, const bench_timing *timing, bench_enqueue_fn fn,
                         void *ctx, bench_result *r, bool *host_timer)
{
    /* Warm-up: builds kernels, touches buffers, fills caches; not timed. */
    pfx_event *ev = NULL;
    pfx_status st = fn(rt, ctx, &ev);
    pfx_event_release(&ev);
    if (st == PFX_SUCCESS)
        st = pfx_runtime_finish(rt);
    if (st != PFX_SUCCESS)
        return st;

    unsigned max_runs = timing->max_runs < 1 ? 1 : timing->max_runs;
    double *ns = calloc(2 * (size_t)max_runs, sizeof(double));
    if (!ns) {
        snprintf(r->reason, sizeof(r->reason), "bench: no host memory for the timer");
        return PFX_ERROR_OUT_OF_MEMORY;
    }
    double *wall = ns + max_runs;
    /* The first timed run calibrates the count (by its wall time: what the
     * runs take). */
    st = timed_runs(rt, fn, ctx, 1, *host_timer, ns, wall);
    if (st == PFX_ERROR_UNSUPPORTED && !*host_timer) {
        *host_timer = true;
        st = timed_runs(rt, fn, ctx, 1, true, ns, wall);
    }
    unsigned runs = 1;
    if (st == PFX_SUCCESS) {
        double first = wall[0] > 1.0 ? wall[0] : 1.0;
        double want = timing->target_s * 1e9 / first;
        unsigned n = want > (double)max_runs ? max_runs : (unsigned)want;
        if (n < timing->min_runs)
            n = timing->min_runs;
        if (n > max_runs)
            n = max_runs;
        st = timed_runs(rt, fn, ctx, n - runs, *host_timer, ns + runs, wall + runs);
        runs = n;
    }
    if (st == PFX_SUCCESS) {
        double median = tool_median(ns, runs); /* sorts ns */
        r->runs = runs;
        r->ms = median * 1e-6;
        r->ms_min = ns[0] * 1e-6;
        r->ms_max = ns[runs - 1] * 1e-6;
        r->wall_ms = tool_median(wall, runs) * 1e-6; /* sorts wall */
        r->wall_p10 = tool_quantile(wall, runs, 0.1) * 1e-6;
        r->wall_p90 = tool_quantile(wall, runs, 0.9) * 1e-6;
        if (r->ms <= 0.0) {
            snprintf(r->reason, sizeof(r->reason), "the device reported a zero time");
            st = PFX_ERROR_UNSUPPORTED;
        }
    }
    free(ns);
    return st;
}
