/* prefixcl bench: untimed warm-up, a run count calibrated to a target time,
 * device times of spans and events (prefixcl/profile.h), the median. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/tool_util.h"

/* Enqueues `count` runs and stores each run's device time (ns) in out[]. */
static pfx_status timed_runs(pfx_runtime *rt, bench_enqueue_fn fn, void *ctx, unsigned count,
                             bool host, double *out, bench_result *r)
{
    if (host) {
        for (unsigned i = 0; i < count; i++) {
            pfx_status st = pfx_runtime_finish(rt);
            double t0 = tool_now_s();
            pfx_event *ev = NULL;
            if (st == PFX_SUCCESS)
                st = fn(rt, ctx, &ev);
            pfx_event_release(&ev);
            if (st == PFX_SUCCESS)
                st = pfx_runtime_finish(rt);
            if (st != PFX_SUCCESS)
                return st;
            out[i] = (tool_now_s() - t0) * 1e9;
        }
        return PFX_SUCCESS;
    }
    /* spans[i] holds run i; kernels[i] its event when it is one kernel */
    pfx_span **spans = calloc(count, sizeof(*spans));
    pfx_event **kernels = calloc(count, sizeof(*kernels));
    pfx_status st = PFX_SUCCESS;
    if (!spans || !kernels) {
        snprintf(r->reason, sizeof(r->reason), "bench: no host memory for the timer");
        st = PFX_ERROR_OUT_OF_MEMORY;
    }
    unsigned queued = 0;
    for (unsigned i = 0; i < count && st == PFX_SUCCESS; i++) {
        st = pfx_span_begin(rt, &spans[i]);
        if (st == PFX_SUCCESS)
            st = fn(rt, ctx, &kernels[i]);
        if (st == PFX_SUCCESS)
            st = pfx_span_end(spans[i]);
        if (st == PFX_SUCCESS)
            queued++;
    }
    if (st == PFX_SUCCESS)
        st = pfx_runtime_finish(rt);
    for (unsigned i = 0; i < queued && st == PFX_SUCCESS; i++) {
        uint64_t ns = 0;
        st = kernels[i] ? pfx_event_time_ns(kernels[i], &ns) : pfx_span_time_ns(spans[i], &ns);
        out[i] = (double)ns;
    }
    for (unsigned i = 0; i < count && spans && kernels; i++) {
        pfx_span_release(&spans[i]);
        pfx_event_release(&kernels[i]);
    }
    free(spans);
    free(kernels);
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
    double *ns = calloc(max_runs, sizeof(double));
    if (!ns) {
        snprintf(r->reason, sizeof(r->reason), "bench: no host memory for the timer");
        return PFX_ERROR_OUT_OF_MEMORY;
    }
    /* The first timed run calibrates the count. */
    st = timed_runs(rt, fn, ctx, 1, *host_timer, ns, r);
    if (st == PFX_ERROR_UNSUPPORTED && !*host_timer) {
        *host_timer = true;
        st = timed_runs(rt, fn, ctx, 1, true, ns, r);
    }
    unsigned runs = 1;
    if (st == PFX_SUCCESS) {
        double first = ns[0] > 1.0 ? ns[0] : 1.0;
        double want = timing->target_s * 1e9 / first;
        unsigned n = want > (double)max_runs ? max_runs : (unsigned)want;
        if (n < timing->min_runs)
            n = timing->min_runs;
        if (n > max_runs)
            n = max_runs;
        /* Batches of at most 64 runs keep the queue and the event count small. */
        while (st == PFX_SUCCESS && runs < n) {
            unsigned batch = n - runs > 64 ? 64 : n - runs;
            st = timed_runs(rt, fn, ctx, batch, *host_timer, ns + runs, r);
            runs += batch;
        }
    }
    if (st == PFX_SUCCESS) {
        double median = tool_median(ns, runs); /* sorts ns */
        r->runs = runs;
        r->ms = median * 1e-6;
        r->ms_min = ns[0] * 1e-6;
        r->ms_max = ns[runs - 1] * 1e-6;
        if (r->ms <= 0.0) {
            snprintf(r->reason, sizeof(r->reason), "the device reported a zero time");
            st = PFX_ERROR_UNSUPPORTED;
        }
    }
    free(ns);
    return st;
}
