/*
 * prefixcl bench: the fixed suite run on each device.
 *
 *   ceilings   float32 FMA throughput (cl/peak.cl, best vector width) and copy
 *              bandwidth (float4 copy, bytes read + written), as clpeak does
 *   sgemm.N    SGEMM through the library's GEMM wrapper (the runtime's backend:
 *              CLBlast or the host BLAS), row-major N x N x N, 2 N^3 FLOPs
 *   attn_fwd.* pfx_attention_forward at the shapes (a)-(d) of bench/bench_attention.c,
 *              4 B H N (P+M) D FLOPs over visible pairs only (causal);
 *              decode (d) also as GB/s of K/V read (input and prefix, once)
 *   attn_bwd.* pfx_attention_backward (dQ, dK, dV, dKp, dVp) at the same shapes,
 *              counted as 2.5x the forward FLOPs (the FlashAttention convention:
 *              five products instead of two); (d) as GB/s of K/V read + dK/dV written
 *   encoder.*  the prefix encoder MLP at GPT-2-small sizes, forward and backward
 *   layer.step one training step of a GPT-2-small attention layer: forward, MSE
 *              loss, backward (dX, prefix, gains), AdamW on the prefix and gains
 *
 * Every test owns its buffers for its own duration only, so the largest one
 * bounds the memory a device needs. A test that cannot run is skipped with its
 * reason and the suite goes on.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family.h"
#include "common/cli.h"
#include "common/tool_util.h"

/* ---------------------------------------------------------------- helpers */

/* Whether `id` starts with one of the comma-separated prefixes of `only`. */
static bool selected(const char *only, const char *id)
{
    if (!only)
        return true;
    for (const char *p = only; *p;) {
        size_t len = strcspn(p, ",");
        if (len && !strncmp(id, p, len))
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

bench_result *suite_begin(suite *s, const char *id, const char *group, const char *label)
{
    bench_device *dev = s->dev;
    if (!selected(s->only, id) || cli_stop) /* left out as --only leaves tests out */
        return NULL;
    if (dev->count >= BENCH_MAX_TESTS)
        return NULL;
    bench_result *r = &dev->tests[dev->count++];
    memset(r, 0, sizeof(*r));
    snprintf(r->id, sizeof(r->id), "%s", id);
    snprintf(r->group, sizeof(r->group), "%s", group);
    snprintf(r->label, sizeof(r->label), "%s", label);
    r->gflops = r->gbs = r->share = -1.0;
    if (s->progress)
        s->progress(s->user, id, dev->count, s->total);
    return r;
}

void suite_skip(bench_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    r->ok = false;
}

/* Records a failed status as a skip with the library's message. */
void suite_skip_status(suite *s, bench_result *r, pfx_status st)
{
    const char *msg = pfx_last_error(s->rt);
    if (!msg[0])
        msg = pfx_last_error(NULL);
    if (st == PFX_ERROR_OUT_OF_MEMORY)
        suite_skip(r, "too little memory: %s", msg);
    else if (st == PFX_ERROR_UNSUPPORTED)
        suite_skip(r, "unsupported on this device: %s", msg);
    else
        suite_skip(r, "%s: %s", pfx_status_string(st), msg);
}

double suite_mib(double bytes)
{
    return bytes / (1024.0 * 1024.0);
}

/* Whether `total` bytes (largest single buffer `largest`) fit the device; a
 * quarter of the memory stays free for the library's workspaces. */
bool suite_fits(suite *s, bench_result *r, double total, double largest)
{
    const pfx_device_info *info = &s->dev->info;
    if (largest > (double)info->max_alloc_bytes) {
        suite_skip(r, "too little memory: a %.0f MiB buffer, the device allocates at most %.0f MiB",
                   suite_mib(largest), suite_mib((double)info->max_alloc_bytes));
        return false;
    }
    if (total > 0.75 * (double)info->global_mem_bytes) {
        suite_skip(r, "too little memory: needs %.0f MiB, the device has %.0f MiB",
                   suite_mib(total), suite_mib((double)info->global_mem_bytes));
        return false;
    }
    return true;
}

/* In --quick, whether the test would be too slow to time (then skipped). */
bool suite_quick_too_slow(suite *s, bench_result *r, double flops, double hint_gflops,
                          const char *hint)
{
    if (!s->quick || hint_gflops <= 0)
        return false;
    double predicted = flops / (hint_gflops * 1e9);
    if (predicted <= QUICK_MAX_RUN_S)
        return false;
    suite_skip(r,
               "--quick: one run would take about %.1f s here (at the rate of %s); run without "
               "--quick",
               predicted, hint);
    return true;
}

/* Times fn and fills the figures: flops and bytes per run (0: not counted). */
void suite_measure(suite *s, bench_result *r, bench_enqueue_fn fn, void *ctx, double flops,
                   double bytes, bench_ceiling ceiling)
{
    r->reason[0] = '\0';
    pfx_status st = bench_measure(s->rt, &s->timing, fn, ctx, r, &s->host_timer);
    if (st != PFX_SUCCESS) {
        if (r->reason[0]) /* the timer's own message */
            r->ok = false;
        else
            suite_skip_status(s, r, st);
        return;
    }
    r->ok = true;
    double sec = r->ms * 1e-3;
    if (flops > 0)
        r->gflops = flops / sec * 1e-9;
    if (bytes > 0)
        r->gbs = bytes / sec * 1e-9;
    r->ceiling = ceiling;
    if (ceiling == BENCH_CEIL_FMA && s->fma_gflops > 0 && r->gflops > 0)
        r->share = 100.0 * r->gflops / s->fma_gflops;
    else if (ceiling == BENCH_CEIL_COPY && s->copy_gbs > 0 && r->gbs > 0)
        r->share = 100.0 * r->gbs / s->copy_gbs;
}

/* A float32 tensor of random values in [-amp, amp]: a 64 Ki-value random
 * block written over and over (benchmark data need not be unique). */
pfx_status suite_random_tensor(pfx_runtime *rt, unsigned ndim, const size_t *shape, uint64_t seed,
                               float amp, pfx_tensor **out)
{
    enum { BLOCK = 1 << 16 };
    pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, ndim, shape, out);
    if (st != PFX_SUCCESS)
        return st;
    float *block = malloc(BLOCK * sizeof(float));
    if (!block) {
        pfx_tensor_destroy(out);
        return PFX_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < BLOCK; i++)
        block[i] = tool_uniform(&seed, amp);
    size_t n = pfx_tensor_numel(*out);
    for (size_t off = 0; off < n && st == PFX_SUCCESS; off += BLOCK)
        st = pfx_tensor_write(*out, off, n - off < BLOCK ? n - off : BLOCK, block);
    free(block);
    if (st != PFX_SUCCESS)
        pfx_tensor_destroy(out);
    return st;
}

size_t suite_local_size(const pfx_device_info *info)
{
    size_t l = 256;
    while (l > info->max_work_group_size && l > 1)
        l /= 2;
    return l;
}

/* ---------------------------------------------------------------- shapes */

const attn_shape suite_attn_shapes[SUITE_ATTN_SHAPES] = {
    { 'a', 1, 8, 8, 1024, 1024, 32, 64, false, false },
    { 'b', 1, 8, 8, 1024, 1024, 32, 64, true, false },
    { 'c', 4, 16, 16, 2048, 2048, 64, 64, false, false },
    { 'd', 8, 32, 8, 1, 8192, 64, 128, false, true },
};

double suite_attn_pairs(const attn_shape *sh)
{
    double per_head;
    if (!sh->causal) {
        per_head = (double)sh->N * (double)(sh->P + sh->M);
    } else {
        /* bottom-right aligned: row i sees the prefix and inputs t <= i + M - N */
        per_head = 0;
        for (size_t i = 0; i < sh->N; i++) {
            size_t last = i + sh->M - sh->N;
            per_head += (double)sh->P + (double)(last + 1 < sh->M ? last + 1 : sh->M);
        }
    }
    return per_head * (double)sh->B * (double)sh->H;
}

/* ---------------------------------------------------------------- suite */

static const size_t sgemm_sizes[] = { 512, 1024, 2048, 4096 };

static size_t sgemm_count(const pfx_device_info *info)
{
    return info->type == PFX_DEVICE_GPU ? 4 : 3; /* 4096 on GPUs only */
}

size_t bench_suite_size(const pfx_device_info *info)
{
    return 2 + sgemm_count(info) + 2 * (SUITE_ATTN_SHAPES) + 2 + 1;
}

void bench_suite_run(pfx_runtime *rt, bool quick, const char *only, bench_device *dev,
                     bench_progress_fn progress, void *user)
{
    suite s = {
        .rt = rt, .quick = quick, .dev = dev, .progress = progress, .user = user, .only = only
    };
    s.timing.target_s = quick ? 0.2 : 1.0;
    s.timing.min_runs = quick ? 3 : 5;
    s.timing.max_runs = quick ? 200 : 1000;
    s.total = bench_suite_size(&dev->info);
    dev->count = 0;

    family_fma_peak(&s);
    family_copy_bandwidth(&s);
    double sgemm_rate = 0;
    for (size_t i = 0; i < sgemm_count(&dev->info); i++)
        family_sgemm(&s, sgemm_sizes[i], &sgemm_rate);
    for (size_t i = 0; i < SUITE_ATTN_SHAPES; i++)
        family_attention(&s, &suite_attn_shapes[i], false);
    for (size_t i = 0; i < SUITE_ATTN_SHAPES; i++)
        family_attention(&s, &suite_attn_shapes[i], true);
    family_encoder(&s, false);
    family_encoder(&s, true);
    family_layer_step(&s, sgemm_rate);
    snprintf(dev->timer, sizeof(dev->timer), "%s", s.host_timer ? "host" : "events");
    snprintf(dev->gemm, sizeof(dev->gemm), "%s",
             pfx_gemm_backend_name(pfx_runtime_gemm_backend(rt)));
    const char *tuning = pfx_runtime_gemm_tuning(rt); /* its first word */
    snprintf(dev->gemm_tuning, sizeof(dev->gemm_tuning), "%.*s", (int)strcspn(tuning, " "), tuning);
}
