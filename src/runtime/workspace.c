/* The runtime-owned workspace: scratch buffers per slot that grow and are
 * reused, so an op does not create and release device buffers per call, and
 * uploads that skip bytes the slot already holds. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The slot's content is no longer known to be the last upload's. */
static void forget(pfx_runtime *rt, pfx_ws_slot slot)
{
    free(rt->workspace_shadow[slot]);
    rt->workspace_shadow[slot] = NULL;
    rt->workspace_shadow_bytes[slot] = 0;
}

static pfx_status get_slot(pfx_runtime *rt, pfx_ws_slot slot, size_t bytes, cl_mem *out)
{
    *out = NULL;
    if (rt->workspace[slot] && rt->workspace_bytes[slot] >= bytes) {
        *out = rt->workspace[slot];
        return PFX_SUCCESS;
    }
    /* Released while enqueued kernels may still use it: OpenCL keeps it alive. */
    forget(rt, slot);
    pfx_buffer_release(rt, rt->workspace[slot], rt->workspace_bytes[slot]);
    rt->memory.workspace_bytes -= rt->workspace_bytes[slot];
    rt->workspace[slot] = NULL;
    rt->workspace_bytes[slot] = 0;
    pfx_status st = pfx_buffer_create(rt, bytes, NULL, &rt->workspace[slot]);
    if (st != PFX_SUCCESS)
        return st;
    rt->workspace_bytes[slot] = bytes;
    rt->memory.workspace_bytes += bytes;
    *out = rt->workspace[slot];
    return PFX_SUCCESS;
}

pfx_status pfx_workspace_get(pfx_runtime *rt, pfx_ws_slot slot, size_t bytes, cl_mem *out)
{
    pfx_status st = pfx_rt_enter(rt, "workspace"); /* the slot table is the runtime's */
    if (st != PFX_SUCCESS)
        return st;
    st = get_slot(rt, slot, bytes, out);
    forget(rt, slot); /* the caller may write it */
    pfx_rt_leave(rt);
    return st;
}

void pfx_workspace_written(pfx_runtime *rt, pfx_ws_slot slot)
{
    if (pfx_rt_enter(rt, "workspace") != PFX_SUCCESS)
        return;
    forget(rt, slot);
    pfx_rt_leave(rt);
}

/* Whether the slot holds exactly these bytes from the last upload. */
static bool holds(const pfx_runtime *rt, pfx_ws_slot slot, const void *data, size_t bytes)
{
    return rt->workspace_shadow[slot] && rt->workspace_shadow_bytes[slot] == bytes &&
           !memcmp(rt->workspace_shadow[slot], data, bytes);
}

/* Remembers an upload's bytes; without memory, only that nothing is known. */
static void remember(pfx_runtime *rt, pfx_ws_slot slot, const void *data, size_t bytes)
{
    void *copy = realloc(rt->workspace_shadow[slot], bytes);
    if (!copy) {
        forget(rt, slot);
        return;
    }
    memcpy(copy, data, bytes);
    rt->workspace_shadow[slot] = copy;
    rt->workspace_shadow_bytes[slot] = bytes;
}

static void CL_CALLBACK free_staging(cl_event event, cl_int status, void *staging)
{
    (void)event;
    (void)status;
    free(staging);
}

pfx_status pfx_workspace_upload(pfx_runtime *rt, pfx_ws_slot slot, const void *data, size_t bytes,
                                cl_mem *out)
{
    cl_mem mem = NULL;
    pfx_status st = pfx_rt_enter(rt, "workspace upload");
    if (st != PFX_SUCCESS)
        return st;
    void *staging = NULL;
    if ((st = get_slot(rt, slot, bytes, &mem)) == PFX_SUCCESS && holds(rt, slot, data, bytes)) {
        *out = mem;
        pfx_rt_leave(rt);
        return PFX_SUCCESS;
    }
    forget(rt, slot); /* until this write is enqueued */
    if (st == PFX_SUCCESS && !(staging = malloc(bytes)))
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "workspace: host allocation failed");
    cl_event done = NULL;
    if (st == PFX_SUCCESS) {
        memcpy(staging, data, bytes);
        cl_int err =
            clEnqueueWriteBuffer(rt->queue, mem, CL_FALSE, 0, bytes, staging, 0, NULL, &done);
        if (err != CL_SUCCESS) {
            free(staging);
            st = pfx_cl_error(rt, err, "workspace: enqueueing an upload");
        }
    }
    if (st == PFX_SUCCESS) {
        if (clSetEventCallback(done, CL_COMPLETE, free_staging, staging) != CL_SUCCESS) {
            clWaitForEvents(1, &done); /* no callback: free it once written */
            free(staging);
        }
        clReleaseEvent(done);
        remember(rt, slot, data, bytes);
        *out = mem;
    }
    pfx_rt_leave(rt);
    return st;
}

void pfx_workspace_release(pfx_runtime *rt)
{
    for (int i = 0; i < PFX_WS_SLOTS; i++) {
        forget(rt, (pfx_ws_slot)i);
        pfx_buffer_release(rt, rt->workspace[i], rt->workspace_bytes[i]);
        rt->workspace[i] = NULL;
        rt->workspace_bytes[i] = 0;
    }
    rt->memory.workspace_bytes = 0;
}
