/* Per-runtime GEMM setup: which backend runs the products (see
 * pfx_gemm_backend in runtime.h), and the device's stored CLBlast tuning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemm.h"
#include "gemm_tuning.h"
#include "program.h"

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

static pfx_status choose_backend(const pfx_device_info *info, const pfx_runtime_params *params,
                                 pfx_gemm_backend *out)
{
    pfx_gemm_backend want = params->gemm;
    if (want != PFX_GEMM_AUTO && want != PFX_GEMM_CLBLAST && want != PFX_GEMM_HOST)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "runtime params: gemm backend %d is none of auto, clblast, host",
                         (int)want);
    pfx_status st = PFX_SUCCESS;
    if (want == PFX_GEMM_AUTO && (st = backend_from_env(&want)) != PFX_SUCCESS)
        return st;
    bool usable = pfx_gemm_host_built() && pfx_gemm_host_usable(info);
    if (want == PFX_GEMM_AUTO)
        want = usable ? PFX_GEMM_HOST : PFX_GEMM_CLBLAST;
    if (want == PFX_GEMM_HOST && !pfx_gemm_host_built())
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "gemm backend host: this build of prefixcl has no host BLAS (CBLAS)");
    if (want == PFX_GEMM_HOST && !usable)
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "gemm backend host: device '%s' is not a CPU device whose memory is the "
                         "host's; use clblast",
                         info->device_name);
    *out = want;
    return PFX_SUCCESS;
}

pfx_status pfx_gemm_device_status(const pfx_device_info *info, const char *cache_dir,
                                  pfx_gemm_backend *backend, char *tuning, size_t cap)
{
    if (!info || !backend || !tuning)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_gemm_device_status: %s is NULL",
                         !info      ? "info"
                         : !backend ? "backend"
                                    : "tuning");
    if (!cap)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "pfx_gemm_device_status: cap is 0");
    char dir[1024];
    if (!cache_dir) {
        if (pfx_cache_dir_resolve(NULL, false, dir, sizeof(dir)) != PFX_SUCCESS)
            dir[0] = '\0';
        cache_dir = dir;
    }
    *backend = PFX_GEMM_CLBLAST;
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    pfx_status st = choose_backend(info, &params, backend);
    char path[1200], why[400] = "";
    pfx_gemm_tuning t;
    if (!pfx_gemm_tuning_path(info, cache_dir, path, sizeof(path)))
        snprintf(tuning, cap, "no cache folder");
    else if (pfx_gemm_tuning_read(path, info, &t, why, sizeof(why)) == PFX_SUCCESS)
        snprintf(tuning, cap, "tuned (%.1f -> %.1f GFLOP/s)", t.untuned_gflops, t.tuned_gflops);
    else if (access(path, F_OK) == 0)
        snprintf(tuning, cap, "rejected file %s: %s", path, why);
    else
        snprintf(tuning, cap, "not tuned (prefixcl gemm-tune)");
    return st;
}

/* Applies the stored tuning when there is a valid one; never fails the
 * runtime: a rejected file is ignored and said so in rt->gemm_tuning. */
static void apply_tuning(pfx_runtime *rt, const pfx_runtime_params *params)
{
    char path[1200], why[400] = "";
    const size_t cap = sizeof(rt->gemm_tuning);
    if (params->gemm_untuned ||
        !pfx_gemm_tuning_path(&rt->info, rt->cache_dir, path, sizeof(path))) {
        snprintf(rt->gemm_tuning, cap, "off");
        return;
    }
    pfx_gemm_tuning t;
    pfx_status st = pfx_gemm_tuning_read(path, &rt->info, &t, why, sizeof(why));
    if (st == PFX_ERROR_IO) {
        snprintf(rt->gemm_tuning, cap, "none (%s absent)", path);
        return;
    }
    if (st == PFX_SUCCESS && (st = pfx_gemm_tuning_override(rt, &t)) != PFX_SUCCESS)
        snprintf(why, sizeof(why), "%.399s", rt->error);
    if (st != PFX_SUCCESS)
        snprintf(rt->gemm_tuning, cap, "ignored %s: %s", path, why);
    else
        snprintf(rt->gemm_tuning, cap, "applied %s", path);
    rt->error[0] = '\0';
}

pfx_status pfx_gemm_setup(pfx_runtime *rt, const pfx_runtime_params *params)
{
    pfx_status st = choose_backend(&rt->info, params, &rt->gemm);
    if (st == PFX_SUCCESS)
        apply_tuning(rt, params);
    return st;
}
