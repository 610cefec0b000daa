/* Runtime lifecycle: context, in-order profiling queue and cache folder. The
 * public pfx_runtime_create adds the ops' setup of the device on top
 * (src/ops/runtime_setup.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "program.h"

void pfx_runtime_default_params(pfx_runtime_params *params)
{
    if (params)
        memset(params, 0, sizeof(*params));
}

static pfx_vendor classify_vendor(const pfx_device_info *info)
{
    if (info->type == PFX_DEVICE_CPU)
        return PFX_VENDOR_CPU;
    const char *v = info->vendor;
    if (strstr(v, "NVIDIA") || info->has_nv_attributes)
        return PFX_VENDOR_NVIDIA;
    if (strstr(v, "Advanced Micro Devices") || strstr(v, "AMD") || info->has_amd_attributes)
        return PFX_VENDOR_AMD;
    if (strstr(v, "Intel") && info->type == PFX_DEVICE_GPU)
        return PFX_VENDOR_INTEL_GPU;
    return PFX_VENDOR_OTHER;
}

pfx_status pfx_runtime_open(const pfx_runtime_params *params, pfx_runtime **out)
{
    *out = NULL;
    pfx_runtime *rt = calloc(1, sizeof(*rt));
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "runtime: host allocation failed");
    pfx_status st = pfx_device_resolve(params->device, true, &rt->info, &rt->platform, &rt->device);
    if (st != PFX_SUCCESS) {
        free(rt);
        return st;
    }
    rt->vendor = classify_vendor(&rt->info);
    rt->allow_overcommit = params->allow_overcommit;

    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = { CL_CONTEXT_PLATFORM, (cl_context_properties)rt->platform, 0 };
    rt->context = clCreateContext(props, 1, &rt->device, NULL, NULL, &err);
    if (err == CL_SUCCESS)
        rt->queue = clCreateCommandQueue(rt->context, rt->device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err == CL_SUCCESS)
        st = pfx_cache_dir_resolve(params->disable_cache ? NULL : params->cache_dir,
                                   params->disable_cache, rt->cache_dir, sizeof(rt->cache_dir));
    if (err == CL_SUCCESS && st != PFX_SUCCESS)
        pfx_error(NULL, st, "%s", "cache folder path too long");
    if (err != CL_SUCCESS || st != PFX_SUCCESS) {
        if (err != CL_SUCCESS)
            st = pfx_cl_error(NULL, err, "creating the OpenCL context and queue");
        if (rt->queue)
            clReleaseCommandQueue(rt->queue);
        if (rt->context)
            clReleaseContext(rt->context);
        free(rt);
        return st;
    }
    *out = rt;
    return PFX_SUCCESS;
}

void pfx_runtime_destroy(pfx_runtime **rtp)
{
    if (!rtp || !*rtp)
        return;
    pfx_runtime *rt = *rtp;
    if (rt->queue)
        clFinish(rt->queue);
    pfx_workspace_release(rt);
    pfx_programs_release(rt);
    free(rt->attn_override);
    pfx_launch_log_free(rt);
    if (rt->queue)
        clReleaseCommandQueue(rt->queue);
    if (rt->context)
        clReleaseContext(rt->context);
    free(rt);
    *rtp = NULL;
}

const pfx_device_info *pfx_runtime_device(const pfx_runtime *rt)
{
    return rt ? &rt->info : NULL;
}

pfx_gemm_backend pfx_runtime_gemm_backend(const pfx_runtime *rt)
{
    return rt ? rt->gemm : PFX_GEMM_CLBLAST;
}

const char *pfx_runtime_gemm_tuning(const pfx_runtime *rt)
{
    return rt ? rt->gemm_tuning : "";
}

const char *pfx_gemm_backend_name(pfx_gemm_backend backend)
{
    switch (backend) {
    case PFX_GEMM_AUTO: return "auto";
    case PFX_GEMM_CLBLAST: return "clblast";
    case PFX_GEMM_HOST: return "host";
    }
    return "unknown";
}

pfx_status pfx_runtime_finish(pfx_runtime *rt)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "rt is NULL");
    cl_int err = clFinish(rt->queue);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(rt, err, "waiting for the queue");
}

pfx_status pfx_runtime_memory(const pfx_runtime *rt, pfx_memory_stats *stats)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "rt is NULL");
    if (!stats)
        return pfx_error((pfx_runtime *)rt, PFX_ERROR_NULL_ARGUMENT, "stats is NULL");
    *stats = rt->memory;
    return PFX_SUCCESS;
}

pfx_status pfx_runtime_cache_stats(const pfx_runtime *rt, pfx_cache_stats *stats)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "rt is NULL");
    if (!stats)
        return pfx_error((pfx_runtime *)rt, PFX_ERROR_NULL_ARGUMENT, "stats is NULL");
    *stats = rt->cache;
    return PFX_SUCCESS;
}

const char *pfx_runtime_cache_dir(const pfx_runtime *rt)
{
    return rt ? rt->cache_dir : "";
}

const char *pfx_runtime_cache_note(const pfx_runtime *rt)
{
    return rt ? rt->cache_note : "";
}
