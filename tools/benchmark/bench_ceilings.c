/* prefixcl bench: the device ceilings, float32 FMA throughput (the best of
 * cl/peak.cl's vector widths) and copy bandwidth, as clpeak measures them;
 * every other test's share is taken against them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"

/* ---------------------------------------------------------------- ceilings */

typedef struct kernel_ctx {
    pfx_peak_kernel kernel;
    size_t global, local;
    const pfx_tensor *in;
    pfx_tensor *out;
} kernel_ctx;

static pfx_status kernel_enqueue(pfx_runtime *rt, void *ctx, pfx_event **ev)
{
    kernel_ctx *k = ctx;
    return pfx_peak_enqueue(rt, k->kernel, k->global, k->local, k->in, k->out, ev);
}

void family_fma_peak(suite *s)
{
    static const struct {
        pfx_peak_kernel kernel;
        const char *label;
    } variants[] = {
        { PFX_PEAK_FMA_F1, "float" },
        { PFX_PEAK_FMA_F2, "float2" },
        { PFX_PEAK_FMA_F4, "float4" },
        { PFX_PEAK_FMA_F8, "float8" },
        { PFX_PEAK_FMA_F16, "float16" },
        { PFX_PEAK_FMA_ILP_F4, "float4 x8 chains" },
        { PFX_PEAK_FMA_ILP_F8, "float8 x8 chains" },
        { PFX_PEAK_FMA_ILP_F16, "float16 x8 chains" },
    };
    /* The many-chain kernels exist on CPUs only (pfx_peak_enqueue). */
    const pfx_device_info *info = &s->dev->info;
    const bool cpu = info->type == PFX_DEVICE_CPU;
    const size_t nvar = cpu ? sizeof(variants) / sizeof(variants[0]) : 5;
    bench_result *r = suite_begin(s, "peak.fma", "Ceilings", "float32 FMA (fma)");
    if (!r)
        return;
    /* 64 Ki work-items per compute unit at 4096 FLOPs each (an eighth of that
     * for the 32768-FLOP kernels): the same work for every variant. */
    size_t items = (size_t)(info->compute_units ? info->compute_units : 1) * 65536;
    if (items > ((size_t)1 << 26))
        items = (size_t)1 << 26;
    kernel_ctx k = { .local = suite_local_size(info) };
    size_t out_shape[1] = { (items + k.local - 1) / k.local * k.local };
    pfx_status st = pfx_tensor_create(s->rt, PFX_DTYPE_F32, 1, out_shape, &k.out);
    if (st != PFX_SUCCESS) {
        suite_skip_status(s, r, st);
        return;
    }
    bench_timing saved = s->timing;
    s->timing.target_s /= (double)nvar;
    bench_result best = *r, trial;
    size_t best_variant = 0;
    for (size_t i = 0; i < nvar; i++) {
        double per_item = pfx_peak_flops_per_item(variants[i].kernel);
        k.kernel = variants[i].kernel;
        k.global = per_item > 4096 ? items / 8 : items;
        k.global = (k.global + k.local - 1) / k.local * k.local;
        trial = *r;
        suite_measure(s, &trial, kernel_enqueue, &k, per_item * (double)k.global, 0,
                      BENCH_CEIL_NONE);
        if (trial.ok && (!best.ok || trial.gflops > best.gflops)) {
            best = trial;
            best_variant = i;
        } else if (!best.ok && !best.reason[0]) {
            snprintf(best.reason, sizeof(best.reason), "%s", trial.reason);
        }
    }
    s->timing = saved;
    pfx_tensor_destroy(&k.out);
    *r = best;
    if (r->ok) {
        snprintf(r->label, sizeof(r->label), "float32 FMA (fma), best of %zu: %s", nvar,
                 variants[best_variant].label);
        s->fma_gflops = r->gflops;
        r->ceiling = BENCH_CEIL_FMA;
        r->share = 100.0;
    }
}

void family_copy_bandwidth(suite *s)
{
    bench_result *r = suite_begin(s, "peak.copy", "Ceilings", "");
    if (!r)
        return;
    const pfx_device_info *info = &s->dev->info;
    double want = info->type == PFX_DEVICE_GPU ? 512.0 * 1048576 : 128.0 * 1048576;
    if (want > (double)info->max_alloc_bytes)
        want = (double)info->max_alloc_bytes;
    if (want > (double)info->global_mem_bytes / 4)
        want = (double)info->global_mem_bytes / 4;
    size_t bytes = (size_t)want / (16 * 4096) * (16 * 4096);
    snprintf(r->label, sizeof(r->label), "float4 copy, %.0f MiB -> %.0f MiB (read + write)",
             suite_mib((double)bytes), suite_mib((double)bytes));
    if (bytes == 0) {
        suite_skip(r, "too little memory for a copy buffer");
        return;
    }
    kernel_ctx k = { .kernel = PFX_PEAK_COPY,
                     .local = suite_local_size(info),
                     .global = bytes / 16 };
    size_t shape[1] = { bytes / sizeof(float) };
    pfx_tensor *in = NULL;
    pfx_status st = pfx_tensor_create(s->rt, PFX_DTYPE_F32, 1, shape, &in);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(s->rt, PFX_DTYPE_F32, 1, shape, &k.out);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_fill(in, 0.0f);
    k.in = in;
    if (st == PFX_SUCCESS)
        suite_measure(s, r, kernel_enqueue, &k, 0, 2.0 * (double)bytes, BENCH_CEIL_NONE);
    else
        suite_skip_status(s, r, st);
    pfx_tensor_destroy(&in);
    pfx_tensor_destroy(&k.out);
    if (r->ok) {
        s->copy_gbs = r->gbs;
        r->ceiling = BENCH_CEIL_COPY;
        r->share = 100.0;
    }
}
