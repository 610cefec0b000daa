/* Spans of device time on the runtime's queue (prefixcl/profile.h). */
#include <stdlib.h>

#include "timing.h"

struct pfx_span {
    pfx_runtime *rt;
    cl_event begin;
};

pfx_status pfx_span_begin(pfx_runtime *rt, pfx_span **out)
{
    if (!rt || !out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_span_begin: %s is NULL",
                         !rt ? "rt" : "out");
    pfx_span *s = malloc(sizeof(*s));
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

pfx_status pfx_span_end(pfx_span **span, uint64_t *ns)
{
    if (!span || !*span)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_span_end: span is NULL");
    pfx_span *s = *span;
    *span = NULL;
    pfx_status st =
        ns ? PFX_SUCCESS : pfx_error(s->rt, PFX_ERROR_NULL_ARGUMENT, "pfx_span_end: ns is NULL");
    cl_event end = NULL;
    if (st == PFX_SUCCESS)
        st = pfx_marker(s->rt, &end);
    if (st == PFX_SUCCESS)
        st = pfx_event_span_ns(s->rt, s->begin, end, ns);
    if (end)
        clReleaseEvent(end);
    clReleaseEvent(s->begin);
    free(s);
    return st;
}
