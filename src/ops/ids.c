/* Token ids and labels: int32 on the device with a host mirror (model_ops.h). */
#include <stdlib.h>
#include <string.h>

#include "model_ops.h"

pfx_status pfx_ids_create(pfx_runtime *rt, size_t count, pfx_ids **out)
{
    if (!out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "ids: out is NULL");
    *out = NULL;
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "ids: rt is NULL");
    size_t bytes;
    if (count == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "ids: count is 0");
    if (pfx_mul_overflows(count, sizeof(int32_t), &bytes))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "ids: %zu entries overflow", count);
    pfx_ids *ids = calloc(1, sizeof(*ids));
    int32_t *host = calloc(count, sizeof(int32_t));
    if (!ids || !host) {
        free(ids);
        free(host);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "ids: host allocation of %zu bytes", bytes);
    }
    pfx_status st = pfx_buffer_create(rt, bytes, host, &ids->mem);
    if (st != PFX_SUCCESS) {
        free(ids);
        free(host);
        return st;
    }
    ids->rt = rt;
    ids->host = host;
    ids->count = count;
    *out = ids;
    return PFX_SUCCESS;
}

/* Waits for the last upload from the host copy (OpenCL reads it until the
 * write command completes). */
static pfx_status wait_upload(pfx_ids *ids)
{
    if (!ids->pending)
        return PFX_SUCCESS;
    cl_int err = clWaitForEvents(1, &ids->pending);
    clReleaseEvent(ids->pending);
    ids->pending = NULL;
    return err == CL_SUCCESS ? PFX_SUCCESS
                             : pfx_cl_error(ids->rt, err, "ids write: the last upload");
}

pfx_status pfx_ids_write(pfx_ids *ids, size_t offset, size_t n, const int32_t *src)
{
    if (!ids)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "ids write: ids is NULL");
    if (!src)
        return pfx_error(ids->rt, PFX_ERROR_NULL_ARGUMENT, "ids write: src is NULL");
    if (offset > ids->count || n > ids->count - offset)
        return pfx_error(ids->rt, PFX_ERROR_OUT_OF_RANGE,
                         "ids write: entries [%zu, %zu) run past %zu entries", offset, offset + n,
                         ids->count);
    if (n == 0)
        return PFX_SUCCESS;
    pfx_status st = wait_upload(ids);
    if (st != PFX_SUCCESS)
        return st;
    memcpy(ids->host + offset, src, n * sizeof(int32_t));
    /* not blocking: a step's uploads do not wait for the previous step */
    cl_int err =
        clEnqueueWriteBuffer(ids->rt->queue, ids->mem, CL_FALSE, offset * sizeof(int32_t),
                             n * sizeof(int32_t), ids->host + offset, 0, NULL, &ids->pending);
    if (err != CL_SUCCESS) {
        ids->pending = NULL;
        return pfx_cl_error(ids->rt, err, "ids write");
    }
    return PFX_SUCCESS;
}

void pfx_ids_destroy(pfx_ids **idsp)
{
    if (!idsp || !*idsp)
        return;
    pfx_ids *ids = *idsp;
    (void)wait_upload(ids); /* before the host copy is freed */
    pfx_buffer_release(ids->rt, ids->mem, ids->count * sizeof(int32_t));
    free(ids->host);
    free(ids);
    *idsp = NULL;
}
