/* Spans of device time on the runtime's queue and single commands' events
 * (prefixcl/profile.h). */
#include <stdlib.h>

#include "timing.h"

struct pfx_event {
    pfx_runtime *rt;
    cl_event event;
};

struct pfx_span {
    pfx_runtime *rt;
    cl_event begin, end;
};

pfx_status pfx_span_begin(pfx_runtime *rt, pfx_span **out)
{
    if (!rt || !out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_span_begin: %s is NULL",
                         !rt ? "rt" : "out");
    pfx_span *s = calloc(1, sizeof(*s));
    if (!s)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_span_begin: out of host memory");
    s->rt = rt;
    pfx_status st = pfx_marker(rt, &s->begin);
    if (st != PFX_SUCCESS) {
        free(s);
        return st;
    }
    *out = s;
    return PFX_SUCCESS;
}

pfx_status pfx_span_end(pfx_span *span)
{
    if (!span)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_span_end: span is NULL");
    if (span->end)
        return pfx_error(span->rt, PFX_ERROR_INVALID_ARGUMENT, "pfx_span_end: already ended");
    return pfx_marker(span->rt, &span->end);
}

pfx_status pfx_span_time_ns(pfx_span *span, uint64_t *ns)
{
    if (!span || !ns)
        return pfx_error(span ? span->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_span_time_ns: %s is NULL", !span ? "span" : "ns");
    if (!span->end)
        return pfx_error(span->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_span_time_ns: the span has not ended (pfx_span_end)");
    uint64_t t = 0;
    pfx_status st = pfx_event_span_ns(span->rt, span->begin, span->end, &t);
    if (st != PFX_SUCCESS)
        return st;
    /* Some drivers (Mesa's rusticl 22.3) stamp every marker with the same
     * instant whatever ran between them: a span of no time is no measure. */
    if (t == 0)
        return pfx_error(span->rt, PFX_ERROR_UNSUPPORTED,
                         "pfx_span_time_ns: the device's markers carry no time (both report the "
                         "same instant); time on the host instead");
    *ns = t;
    return PFX_SUCCESS;
}

void pfx_span_release(pfx_span **span)
{
    if (!span || !*span)
        return;
    clReleaseEvent((*span)->begin);
    if ((*span)->end)
        clReleaseEvent((*span)->end);
    free(*span);
    *span = NULL;
}

pfx_status pfx_event_time_ns(pfx_event *event, uint64_t *ns)
{
    if (!event || !ns)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_event_time_ns: %s is NULL",
                         !event ? "event" : "ns");
    return pfx_event_ns(event->rt, event->event, ns);
}

void pfx_event_release(pfx_event **event)
{
    if (!event || !*event)
        return;
    clReleaseEvent((*event)->event);
    free(*event);
    *event = NULL;
}

pfx_status pfx_event_wrap(pfx_runtime *rt, cl_event ev, pfx_event **out)
{
    pfx_event *e = malloc(sizeof(*e));
    if (!e) {
        clWaitForEvents(1, &ev);
        clReleaseEvent(ev);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "an event: out of host memory");
    }
    e->rt = rt;
    e->event = ev;
    *out = e;
    return PFX_SUCCESS;
}
