/* Runtime lifecycle: context, in-order profiling queue, cache folder, and
 * warm-up (every program the ops may build on this device, from the registry). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "program.h"
#include "registry.h"
#include "attention_tuning.h"

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

/* One line on stderr per process: every runtime of a program that creates
 * many would repeat it. */
static void note_once(const char *note)
{
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        fprintf(stderr, "prefixcl: %s\n", note);
}

pfx_status pfx_runtime_create(pfx_runtime **out, const pfx_runtime_params *params)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "out is NULL");
    *out = NULL;
    pfx_runtime_params defaults;
    pfx_runtime_default_params(&defaults);
    if (!params)
        params = &defaults;

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
    if (err == CL_SUCCESS && st == PFX_SUCCESS) {
        /* the kernel tuning override; parse errors are recorded for the thread */
        pfx_attn_override override;
        st = pfx_attn_override_load(NULL, params->kernel_tuning, rt->cache_dir, &override);
        if (st == PFX_ERROR_IO) {
            /* Only a missing tuning.txt means "no override"; a cache folder
             * that cannot be read (a file, a name too long, no search
             * permission) leaves the runtime uncached and without override. */
            snprintf(rt->cache_note, sizeof(rt->cache_note), "kernel cache off: %.1100s",
                     pfx_last_error(NULL));
            rt->cache_dir[0] = '\0';
            note_once(rt->cache_note);
            pfx_error(NULL, PFX_SUCCESS, "%s", "");
            st = PFX_SUCCESS;
        }
        if (st == PFX_SUCCESS && override.count) {
            if ((rt->attn_override = malloc(sizeof(override))))
                *rt->attn_override = override;
            else
                st = pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "runtime: host allocation failed");
        }
    }
    if (err == CL_SUCCESS && st == PFX_SUCCESS)
        st = pfx_gemm_setup(rt, params); /* records its errors for the thread */
    if (err != CL_SUCCESS || st != PFX_SUCCESS) {
        if (err != CL_SUCCESS)
            st = pfx_cl_error(NULL, err, "creating the OpenCL context and queue");
        free(rt->attn_override);
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

pfx_status pfx_runtime_warm_up(pfx_runtime *rt)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "rt is NULL");
    pfx_program_config configs[64];
    size_t n = pfx_runtime_configs(rt, configs, 64);
    for (size_t i = 0; i < n && i < 64; i++) {
        char *source = pfx_kernel_source(configs[i].program);
        if (!source)
            return pfx_error(rt, PFX_ERROR_BUILD_FAILED, "kernel program '%s' not found",
                             configs[i].program);
        cl_program program;
        pfx_status st = pfx_program_get_source(rt, configs[i].program, source,
                                               configs[i].options, &program);
        free(source);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}
