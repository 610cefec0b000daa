/* The table of kernel programs and their per-vendor options; warm-up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "attention_backward.h"
#include "attention_tuning.h"

const char *pfx_vendor_name(pfx_vendor vendor)
{
    switch (vendor) {
    case PFX_VENDOR_NVIDIA: return "nvidia";
    case PFX_VENDOR_AMD: return "amd";
    case PFX_VENDOR_INTEL_GPU: return "intel";
    case PFX_VENDOR_CPU: return "cpu";
    default: return "other";
    }
}

const char *pfx_elementwise_options(const pfx_runtime *rt)
{
    (void)rt;
    return "";
}

static void add(pfx_program_config *out, size_t cap, size_t *n, const char *program,
                const char *options)
{
    if (*n < cap) {
        out[*n].program = program;
        snprintf(out[*n].options, sizeof(out[*n].options), "%s", options);
    }
    (*n)++;
}

size_t pfx_program_configs(pfx_vendor vendor, uint64_t local_mem_bytes, pfx_program_config *out,
                           size_t cap)
{
    (void)vendor;
    (void)local_mem_bytes;
    size_t n = 0;
    add(out, cap, &n, "elementwise", "");
    /* cl/peak.cl: device ceilings for `prefixcl bench` (tools/bench_suite.c
     * uses the same rule: the many-chain FMA kernels on CPUs only) */
    add(out, cap, &n, "peak", vendor == PFX_VENDOR_CPU ? "-DPEAK_ILP=1" : "");
    add(out, cap, &n, "encoder", ""); /* layer/encoder.c: no tunables */
    add(out, cap, &n, "layer", ""); /* layer/attention_layer.c: no tunables */
    add(out, cap, &n, "optimizer", ""); /* layer/optimizer.c: no tunables */
    /* whole-model pieces (model_ops.h): no tunables, in-kernel defaults */
    add(out, cap, &n, "embedding", "");     /* embedding.c */
    add(out, cap, &n, "norm", "");          /* norm.c: NORM_LOCAL 64 */
    add(out, cap, &n, "activation", "");    /* activation.c, bias.c */
    add(out, cap, &n, "rope", "");          /* rope.c */
    add(out, cap, &n, "convert", "");       /* convert.c, gemm.c (half weights) */
    add(out, cap, &n, "cross_entropy", ""); /* cross_entropy.c: CE_LOCAL 64 */
    pfx_attn_fwd_add_configs(vendor, local_mem_bytes, out, cap, &n); /* attention_tuning.c */
    add(out, cap, &n, "attention_stats", ""); /* attention_stats.c: stats_options */
    add(out, cap, &n, "attention_gain", ""); /* attention_problem.c: device gains */
    /* attention_backward.c: one option set per head-size bucket */
    for (unsigned i = 0; i < PFX_ATTN_BWD_BUCKETS; i++) {
        pfx_attn_bwd_tiles t;
        char options[PFX_OPTIONS_MAX];
        if (pfx_attn_bwd_tiles_for(vendor, local_mem_bytes, pfx_attn_bwd_buckets[i], &t)) {
            pfx_attn_bwd_options(&t, options, sizeof(options));
            add(out, cap, &n, "attention_bwd", options);
        }
    }
    return n;
}

pfx_status pfx_runtime_warm_up(pfx_runtime *rt)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "rt is NULL");
    pfx_program_config configs[64];
    size_t n = pfx_program_configs(rt->vendor, rt->info.local_mem_bytes, configs, 64);
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
