/* Per-runtime GEMM setup: which backend runs the products (see
 * pfx_gemm_backend in runtime.h). */
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

/* $PREFIXCL_GEMM: unset or "" or "auto" leaves the choice to the device. */
static pfx_status backend_from_env(pfx_gemm_backend *out)
{
    const char *env = getenv("PREFIXCL_GEMM");
    *out = PFX_GEMM_AUTO;
    if (!env || !*env || !strcmp(env, "auto"))
        return PFX_SUCCESS;
    if (!strcmp(env, "host"))
        *out = PFX_GEMM_HOST;
    else if (!strcmp(env, "clblast"))
        *out = PFX_GEMM_CLBLAST;
    else
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "PREFIXCL_GEMM='%s' is none of host, clblast, auto", env);
    return PFX_SUCCESS;
}

static pfx_status choose_backend(pfx_runtime *rt, const pfx_runtime_params *params)
{
    pfx_gemm_backend want = params->gemm;
    if (want != PFX_GEMM_AUTO && want != PFX_GEMM_CLBLAST && want != PFX_GEMM_HOST)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "runtime params: gemm backend %d is none of auto, clblast, host",
                         (int)want);
    pfx_status st = PFX_SUCCESS;
    if (want == PFX_GEMM_AUTO && (st = backend_from_env(&want)) != PFX_SUCCESS)
        return st;
    bool usable = pfx_gemm_host_built() && pfx_gemm_host_usable(&rt->info);
    if (want == PFX_GEMM_AUTO)
        want = usable ? PFX_GEMM_HOST : PFX_GEMM_CLBLAST;
    if (want == PFX_GEMM_HOST && !pfx_gemm_host_built())
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "gemm backend host: this build of prefixcl has no host BLAS (CBLAS)");
    if (want == PFX_GEMM_HOST && !usable)
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "gemm backend host: device '%s' is not a CPU device whose memory is the "
                         "host's; use clblast", rt->info.device_name);
    rt->gemm = want;
    return PFX_SUCCESS;
}

pfx_status pfx_gemm_setup(pfx_runtime *rt, const pfx_runtime_params *params)
{
    return choose_backend(rt, params);
}
