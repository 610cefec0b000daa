/* The table of kernel programs and their per-vendor options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "attention_tuning.h"
#include "device.h"
#include "work_groups.h"

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

const pfx_vendor pfx_vendor_families[PFX_VENDOR_FAMILIES] = {
    PFX_VENDOR_NVIDIA, PFX_VENDOR_AMD, PFX_VENDOR_INTEL_GPU, PFX_VENDOR_CPU, PFX_VENDOR_OTHER,
};

uint64_t pfx_vendor_typical_local_mem(pfx_vendor vendor)
{
    switch (vendor) {
    case PFX_VENDOR_NVIDIA: return 48 * 1024;
    case PFX_VENDOR_AMD:
    case PFX_VENDOR_INTEL_GPU: return 64 * 1024;
    case PFX_VENDOR_CPU: return 1024 * 1024;
    default: return 32 * 1024;
    }
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

/* The programs without tunables, and the peak kernels. */
bool pfx_peak_ilp(pfx_vendor vendor, const char *platform_name)
{
    return vendor == PFX_VENDOR_CPU &&
           !(platform_name && pfx_contains_nocase(platform_name, "rusticl"));
}

static void add_fixed(pfx_vendor vendor, const char *platform_name, pfx_program_config *out,
                      size_t cap, size_t *n)
{
    add(out, cap, n, "elementwise", "");
    /* cl/peak.cl: device ceilings for `prefixcl bench` (src/ops/peak.c uses
     * the same rule) */
    add(out, cap, n, "peak", pfx_peak_ilp(vendor, platform_name) ? "-DPEAK_ILP=1" : "");
    add(out, cap, n, "encoder", "");                /* layer/encoder.c: no tunables */
    add(out, cap, n, "layer", PFX_LAYER_OPTIONS);   /* layer/mse_loss.c */
    add(out, cap, n, "optimizer", PFX_OPT_OPTIONS); /* layer/optimizer.c */
    /* whole-model pieces (model_ops.h): no tunables, in-kernel defaults */
    add(out, cap, n, "embedding", "");                 /* embedding.c */
    add(out, cap, n, "norm", PFX_NORM_OPTIONS);        /* norm.c */
    add(out, cap, n, "activation", "");                /* activation.c, bias.c, columns.c */
    add(out, cap, n, "rope", "");                      /* rope.c */
    add(out, cap, n, "convert", "");                   /* convert.c, gemm.c (half weights) */
    add(out, cap, n, "cross_entropy", PFX_CE_OPTIONS); /* cross_entropy.c */
    add(out, cap, n, "dropout", "");                   /* dropout.c */
    add(out, cap, n, "attention_stats", "");           /* attention_stats.c: no tunables */
    add(out, cap, n, "attention_gain", "");            /* attention_problem.c: device gains */
}

size_t pfx_program_configs(pfx_vendor vendor, const pfx_device_info *info, uint64_t local_mem_bytes,
                           pfx_program_config *out, size_t cap)
{
    size_t n = 0;
    add_fixed(vendor, info ? info->platform_name : NULL, out, cap, &n);
    /* attention_forward.c / attention_backward.c: the tuning database */
    pfx_attn_add_configs(pfx_attn_tuning_lookup(vendor, info, NULL), local_mem_bytes,
                         info ? info->native_float_width : 0, out, cap, &n);
    return n;
}

size_t pfx_runtime_configs(pfx_runtime *rt, pfx_program_config *out, size_t cap)
{
    size_t n = 0;
    add_fixed(rt->vendor, rt->info.platform_name, out, cap, &n);
    const size_t first = n;
    char saved[PFX_ERROR_MAX];
    snprintf(saved, sizeof(saved), "%s", rt->error);
    for (int c = 0; c < PFX_ATTN_CLASS_COUNT; c++) {
        const size_t D = pfx_attn_classes[c];
        const pfx_attn_tuning *db = pfx_attn_tuning_lookup(rt->vendor, &rt->info, NULL);
        pfx_attn_fwd_tiles f;
        pfx_attn_bwd_tiles b;
        char options[PFX_OPTIONS_MAX];
        /* the decode and the wide shape; tiles the device cannot hold are left out */
        for (int decode = 0; decode < 2; decode++)
            if (pfx_attn_fwd_select(rt, "warm-up", D, decode ? 1 : db->decode_rows + 1, &f) ==
                PFX_SUCCESS) {
                pfx_attn_fwd_options(&f, options, sizeof(options));
                pfx_attn_add_unique(out, cap, &n, first, "attention_fwd", options);
            }
        if (pfx_attn_bwd_select(rt, "warm-up", D, &b) == PFX_SUCCESS) {
            pfx_attn_bwd_options(&b, options, sizeof(options));
            pfx_attn_add_unique(out, cap, &n, first, "attention_bwd", options);
        }
    }
    snprintf(rt->error, sizeof(rt->error), "%s", saved);
    return n;
}
