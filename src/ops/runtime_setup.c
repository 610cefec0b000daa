/* The public runtime calls that need the ops: creation (the runtime of
 * src/runtime, then this device's attention tile override and GEMM backend)
 * and warm-up (every program of the registry). They live a floor above the
 * runtime so that the runtime never calls up into the ops. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention_tuning.h"
#include "gemm.h"
#include "registry.h"

/* One line on stderr per process: every runtime of a program that creates
 * many would repeat it. */
static void note_once(const char *note)
{
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        fprintf(stderr, "prefixcl: %s\n", note);
}

/* The kernel tuning override; parse errors are recorded for the thread. */
static pfx_status load_attn_override(pfx_runtime *rt, const pfx_runtime_params *params)
{
    pfx_attn_override override;
    pfx_status st = pfx_attn_override_load(NULL, params->kernel_tuning, rt->cache_dir, &override);
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
    return st;
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

    pfx_runtime *rt;
    pfx_status st = pfx_runtime_open(params, &rt);
    if (st == PFX_SUCCESS)
        st = load_attn_override(rt, params);
    if (st == PFX_SUCCESS)
        st = pfx_gemm_setup(rt, params); /* records its errors for the thread */
    if (st != PFX_SUCCESS) {
        pfx_runtime_destroy(&rt);
        return st;
    }
    *out = rt;
    return PFX_SUCCESS;
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
        pfx_status st =
            pfx_program_get_source(rt, configs[i].program, source, configs[i].options, &program);
        free(source);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}
