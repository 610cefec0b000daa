/* Device buffers with allocation accounting (live and peak bytes). */
#include "internal.h"

static pfx_status buffer_create(pfx_runtime *rt, size_t bytes, const void *host_copy, cl_mem *out)
{
    if (bytes == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "buffer of 0 bytes");
    if (bytes > rt->info.max_alloc_bytes)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY,
                         "buffer of %zu bytes exceeds the device's largest allocation (%llu bytes)",
                         bytes, (unsigned long long)rt->info.max_alloc_bytes);
    /* Drivers accept far more than they hold and fail (or page) later. */
    if (!rt->allow_overcommit && (rt->memory.live_bytes > rt->info.global_mem_bytes ||
                                  bytes > rt->info.global_mem_bytes - rt->memory.live_bytes))
        return pfx_error(
            rt, PFX_ERROR_OUT_OF_MEMORY,
            "buffer of %zu bytes: %zu bytes are live and the device has %llu bytes of global "
            "memory (pfx_runtime_params.allow_overcommit allows more)",
            bytes, rt->memory.live_bytes, (unsigned long long)rt->info.global_mem_bytes);
    cl_int err = CL_SUCCESS;
    cl_mem_flags flags = CL_MEM_READ_WRITE | (host_copy ? CL_MEM_COPY_HOST_PTR : 0);
    /* The host GEMM backend maps buffers in place: ask for host memory. */
    if (rt->gemm == PFX_GEMM_HOST)
        flags |= CL_MEM_ALLOC_HOST_PTR;
    cl_mem mem = clCreateBuffer(rt->context, flags, bytes, (void *)host_copy, &err);
    if (err != CL_SUCCESS)
        return pfx_cl_error(rt, err, "allocating a device buffer");
    rt->memory.live_bytes += bytes;
    rt->memory.live_buffers++;
    if (rt->memory.live_bytes > rt->memory.peak_bytes)
        rt->memory.peak_bytes = rt->memory.live_bytes;
    *out = mem;
    return PFX_SUCCESS;
}

pfx_status pfx_buffer_create(pfx_runtime *rt, size_t bytes, const void *host_copy, cl_mem *out)
{
    *out = NULL;
    pfx_status st = pfx_rt_enter(rt, "allocating a device buffer");
    if (st != PFX_SUCCESS)
        return st;
    st = buffer_create(rt, bytes, host_copy, out);
    pfx_rt_leave(rt);
    return st;
}

void pfx_buffer_release(pfx_runtime *rt, cl_mem mem, size_t bytes)
{
    if (!mem)
        return;
    clReleaseMemObject(mem);
    rt->memory.live_bytes -= bytes;
    rt->memory.live_buffers--;
}
