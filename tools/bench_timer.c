/* prefixcl bench: untimed warm-up, a run count calibrated to a target time,
 * device-event times, the median. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "timing.h"

static double host_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Enqueues `count` runs and stores each run's device time (ns) in out[]. */
static pfx_status timed_runs(pfx_runtime *rt, bench_enqueue_fn fn, void *ctx, unsigned count,
                             bool host, double *out)
{
    if (host) {
        for (unsigned i = 0; i < count; i++) {
            pfx_status st = pfx_runtime_finish(rt);
            double t0 = host_now_ns();
            void *ev = NULL;
            if (st == PFX_SUCCESS)
                st = fn(rt, ctx, &ev);
            if (ev)
                clReleaseEvent((cl_event)ev);
            if (st == PFX_SUCCESS)
                st = pfx_runtime_finish(rt);
            if (st != PFX_SUCCESS)
                return st;
            out[i] = host_now_ns() - t0;
        }
        return PFX_SUCCESS;
    }
    /* markers[i] precedes run i; markers[count] follows the last one. */
    cl_event *markers = calloc((size_t)count + 1, sizeof(cl_event));
    cl_event *kernels = calloc(count, sizeof(cl_event));
    pfx_status st = markers && kernels ? PFX_SUCCESS
                                       : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "bench: timer");
    unsigned queued = 0;
    if (st == PFX_SUCCESS)
        st = pfx_marker(rt, &markers[0]);
    for (unsigned i = 0; i < count && st == PFX_SUCCESS; i++) {
        void *ev = NULL;
        st = fn(rt, ctx, &ev);
        kernels[i] = (cl_event)ev;
        if (st == PFX_SUCCESS)
            st = pfx_marker(rt, &markers[i + 1]);
        if (st == PFX_SUCCESS)
            queued++;
    }
    if (st == PFX_SUCCESS)
        st = pfx_runtime_finish(rt);
    for (unsigned i = 0; i < queued && st == PFX_SUCCESS; i++) {
        uint64_t ns = 0;
        st = kernels[i] ? pfx_event_ns(rt, kernels[i], &ns)
                        : pfx_event_span_ns(rt, markers[i], markers[i + 1], &ns);
        out[i] = (double)ns;
    }
    if (markers)
        for (unsigned i = 0; i <= count; i++)
            if (markers[i])
                clReleaseEvent(markers[i]);
    if (kernels)
        for (unsigned i = 0; i < count; i++)
            if (kernels[i])
                clReleaseEvent(kernels[i]);
    free(markers);
    free(kernels);
    return st;
}

pfx_status bench_measure(pfx_runtime *rt, const bench_timing *timing, bench_enqueue_fn fn,
                         void *ctx, bench_result *r, bool *host_timer)
{
    /* Warm-up: builds kernels, touches buffers, fills caches; not timed. */
    void *ev = NULL;
    pfx_status st = fn(rt, ctx, &ev);
    if (ev)
        clReleaseEvent((cl_event)ev);
    if (st == PFX_SUCCESS)
        st = pfx_runtime_finish(rt);
    if (st != PFX_SUCCESS)
        return st;

    unsigned max_runs = timing->max_runs < 1 ? 1 : timing->max_runs;
    double *ns = calloc(max_runs, sizeof(double));
    if (!ns)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "bench: timer");
    /* The first timed run calibrates the count. */
    st = timed_runs(rt, fn, ctx, 1, *host_timer, ns);
    if (st == PFX_ERROR_UNSUPPORTED && !*host_timer) {
        *host_timer = true;
        st = timed_runs(rt, fn, ctx, 1, true, ns);
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
            st = timed_runs(rt, fn, ctx, batch, *host_timer, ns + runs);
            runs += batch;
        }
    }
    if (st == PFX_SUCCESS) {
        qsort(ns, runs, sizeof(double), cmp_double);
        double median = runs % 2 ? ns[runs / 2] : 0.5 * (ns[runs / 2 - 1] + ns[runs / 2]);
        r->runs = runs;
        r->ms = median * 1e-6;
        r->ms_min = ns[0] * 1e-6;
        r->ms_max = ns[runs - 1] * 1e-6;
        if (r->ms <= 0.0)
            st = pfx_error(rt, PFX_ERROR_UNSUPPORTED, "the device reported a zero time");
    }
    free(ns);
    return st;
}
