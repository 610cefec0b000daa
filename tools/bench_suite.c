/*
 * prefixcl bench: the fixed suite run on each device.
 *
 *   ceilings   float32 FMA throughput (cl/peak.cl, best vector width) and copy
 *              bandwidth (float4 copy, bytes read + written), as clpeak does
 *   sgemm.N    SGEMM through the library's GEMM wrapper (the runtime's backend:
 *              CLBlast or the host BLAS), row-major N x N x N, 2 N^3 FLOPs
 *   attn_fwd.* pfx_attention_forward at the shapes (a)-(d) of the forward issue,
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

#include "bench.h"
#include "gemm.h"
#include "timing.h"
#if PFX_BENCH_HAVE_ENCODER
#include "prefixcl/encoder.h"
#endif
#if PFX_BENCH_HAVE_LAYER
#include "prefixcl/layer.h"
#include "prefixcl/optimizer.h"
#endif

typedef struct suite {
    pfx_runtime *rt;
    bool quick;
    bench_device *dev;
    bench_timing timing;
    bool host_timer;
    bench_progress_fn progress;
    void *user;
    size_t total;
    double fma_gflops;   /* measured ceilings; 0 when unknown */
    double copy_gbs;
    double attn_gflops[2]; /* forward, backward rate at shape (a): predicts (c) */
    const char *only;      /* comma-separated id prefixes; NULL: every test */
} suite;

/* --quick skips a test whose one run would take longer than this, predicted
 * from a smaller test of the same operation measured just before. */
#define QUICK_MAX_RUN_S 6.0

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

static bench_result *begin(suite *s, const char *id, const char *group, const char *label)
{
    bench_device *dev = s->dev;
    if (!selected(s->only, id))
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

static void skip(bench_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    r->ok = false;
}

/* Records a failed status as a skip with the library's message. */
static void skip_status(suite *s, bench_result *r, pfx_status st)
{
    const char *msg = pfx_last_error(s->rt);
    if (!msg[0])
        msg = pfx_last_error(NULL);
    if (st == PFX_ERROR_OUT_OF_MEMORY)
        skip(r, "too little memory: %s", msg);
    else if (st == PFX_ERROR_UNSUPPORTED)
        skip(r, "unsupported on this device: %s", msg);
    else
        skip(r, "%s: %s", pfx_status_string(st), msg);
}

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

/* Whether `total` bytes (largest single buffer `largest`) fit the device; a
 * quarter of the memory stays free for the library's workspaces. */
static bool fits(suite *s, bench_result *r, double total, double largest)
{
    const pfx_device_info *info = &s->dev->info;
    if (largest > (double)info->max_alloc_bytes) {
        skip(r, "too little memory: a %.0f MiB buffer, the device allocates at most %.0f MiB",
             mib(largest), mib((double)info->max_alloc_bytes));
        return false;
    }
    if (total > 0.75 * (double)info->global_mem_bytes) {
        skip(r, "too little memory: needs %.0f MiB, the device has %.0f MiB", mib(total),
             mib((double)info->global_mem_bytes));
        return false;
    }
    return true;
}

/* In --quick, whether the test would be too slow to time (then skipped). */
static bool quick_too_slow(suite *s, bench_result *r, double flops, double hint_gflops,
                           const char *hint)
{
    if (!s->quick || hint_gflops <= 0)
        return false;
    double predicted = flops / (hint_gflops * 1e9);
    if (predicted <= QUICK_MAX_RUN_S)
        return false;
    skip(r, "--quick: one run would take about %.1f s here (at the rate of %s); run without "
            "--quick", predicted, hint);
    return true;
}

/* Times fn and fills the figures: flops and bytes per run (0: not counted). */
static void measure(suite *s, bench_result *r, bench_enqueue_fn fn, void *ctx, double flops,
                    double bytes, bench_ceiling ceiling)
{
    pfx_status st = bench_measure(s->rt, &s->timing, fn, ctx, r, &s->host_timer);
    if (st != PFX_SUCCESS) {
        skip_status(s, r, st);
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

/* splitmix64, uniform in [-amp, amp]. */
static float uniform(uint64_t *state, float amp)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return amp * (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* A float32 tensor of random values in [-amp, amp]: a 64 Ki-value random
 * block written over and over (benchmark data need not be unique). */
static pfx_status random_tensor(pfx_runtime *rt, unsigned ndim, const size_t *shape, uint64_t seed,
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
        block[i] = uniform(&seed, amp);
    size_t n = pfx_tensor_numel(*out);
    for (size_t off = 0; off < n && st == PFX_SUCCESS; off += BLOCK)
        st = pfx_tensor_write(*out, off, n - off < BLOCK ? n - off : BLOCK, block);
    free(block);
    if (st != PFX_SUCCESS)
        pfx_tensor_destroy(out);
    return st;
}

static size_t local_size(const pfx_device_info *info)
{
    size_t l = 256;
    while (l > info->max_work_group_size && l > 1)
        l /= 2;
    return l;
}

/* ---------------------------------------------------------------- ceilings */

typedef struct kernel_ctx {
    cl_kernel kernel;
    const char *what;
    size_t global, local;
    size_t nargs;
    pfx_arg args[3];
} kernel_ctx;

static pfx_status kernel_enqueue(pfx_runtime *rt, void *ctx, void **ev)
{
    kernel_ctx *k = ctx;
    return pfx_launch_event(rt, k->kernel, k->what, 1, &k->global, &k->local, k->nargs, k->args,
                            (cl_event *)ev);
}

static void test_fma_peak(suite *s)
{
    static const struct {
        const char *kernel, *label;
        double flops_per_item; /* per work-item */
    } variants[] = {
        { "peak_fma_f1", "float", 4096 },        { "peak_fma_f2", "float2", 4096 },
        { "peak_fma_f4", "float4", 4096 },       { "peak_fma_f8", "float8", 4096 },
        { "peak_fma_f16", "float16", 4096 },     { "peak_fma_ilp_f4", "float4 x8 chains", 32768 },
        { "peak_fma_ilp_f8", "float8 x8 chains", 32768 },
        { "peak_fma_ilp_f16", "float16 x8 chains", 32768 },
    };
    /* The many-chain kernels exist on CPUs only (the rule of src/ops/registry.c). */
    const bool cpu = s->rt->vendor == PFX_VENDOR_CPU;
    const char *options = cpu ? "-DPEAK_ILP=1" : "";
    const size_t nvar = cpu ? sizeof(variants) / sizeof(variants[0]) : 5;
    bench_result *r = begin(s, "peak.fma", "Ceilings", "float32 FMA (mad)");
    if (!r)
        return;
    const pfx_device_info *info = &s->dev->info;
    /* 64 Ki work-items per compute unit at 4096 FLOPs each (an eighth of that
     * for the 32768-FLOP kernels): the same work for every variant. */
    size_t items = (size_t)(info->compute_units ? info->compute_units : 1) * 65536;
    if (items > ((size_t)1 << 26))
        items = (size_t)1 << 26;
    cl_mem out = NULL;
    size_t out_bytes = items * sizeof(float);
    pfx_status st = pfx_buffer_create(s->rt, out_bytes, NULL, &out);
    if (st != PFX_SUCCESS) {
        skip_status(s, r, st);
        return;
    }
    float a = 1.3f;
    kernel_ctx k = { .what = "peak FMA", .local = local_size(info), .nargs = 2 };
    k.args[0] = PFX_ARG(out);
    k.args[1] = PFX_ARG(a);
    bench_timing saved = s->timing;
    s->timing.target_s /= (double)nvar;
    bench_result best = *r, trial;
    size_t best_variant = 0;
    for (size_t i = 0; i < nvar; i++) {
        k.global = variants[i].flops_per_item > 4096 ? items / 8 : items;
        k.global = (k.global + k.local - 1) / k.local * k.local;
        st = pfx_kernel_get(s->rt, "peak", options, variants[i].kernel, &k.kernel);
        trial = *r;
        if (st == PFX_SUCCESS)
            measure(s, &trial, kernel_enqueue, &k, variants[i].flops_per_item * (double)k.global,
                    0, BENCH_CEIL_NONE);
        else
            skip_status(s, &trial, st);
        if (trial.ok && (!best.ok || trial.gflops > best.gflops)) {
            best = trial;
            best_variant = i;
        } else if (!best.ok && !best.reason[0]) {
            snprintf(best.reason, sizeof(best.reason), "%s", trial.reason);
        }
    }
    s->timing = saved;
    pfx_buffer_release(s->rt, out, out_bytes);
    *r = best;
    if (r->ok) {
        snprintf(r->label, sizeof(r->label), "float32 FMA (mad), best of %zu: %s", nvar,
                 variants[best_variant].label);
        s->fma_gflops = r->gflops;
        r->ceiling = BENCH_CEIL_FMA;
        r->share = 100.0;
    }
}

static void test_copy_bandwidth(suite *s)
{
    bench_result *r = begin(s, "peak.copy", "Ceilings", "");
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
             mib((double)bytes), mib((double)bytes));
    if (bytes == 0) {
        skip(r, "too little memory for a copy buffer");
        return;
    }
    cl_mem in = NULL, out = NULL;
    pfx_status st = pfx_buffer_create(s->rt, bytes, NULL, &in);
    if (st == PFX_SUCCESS)
        st = pfx_buffer_create(s->rt, bytes, NULL, &out);
    kernel_ctx k = { .what = "peak copy", .local = local_size(info), .nargs = 2 };
    k.global = bytes / 16;
    if (st == PFX_SUCCESS) {
        float zero = 0.0f;
        cl_int err = clEnqueueFillBuffer(s->rt->queue, in, &zero, sizeof(zero), 0, bytes, 0, NULL,
                                         NULL);
        if (err != CL_SUCCESS)
            st = pfx_cl_error(s->rt, err, "filling the copy buffer");
    }
    if (st == PFX_SUCCESS)
        st = pfx_kernel_get(s->rt, "peak", s->rt->vendor == PFX_VENDOR_CPU ? "-DPEAK_ILP=1" : "",
                            "peak_copy", &k.kernel);
    if (st == PFX_SUCCESS) {
        k.args[0] = PFX_ARG(in);
        k.args[1] = PFX_ARG(out);
        measure(s, r, kernel_enqueue, &k, 0, 2.0 * (double)bytes, BENCH_CEIL_NONE);
    } else {
        skip_status(s, r, st);
    }
    if (in)
        pfx_buffer_release(s->rt, in, bytes);
    if (out)
        pfx_buffer_release(s->rt, out, bytes);
    if (r->ok) {
        s->copy_gbs = r->gbs;
        r->ceiling = BENCH_CEIL_COPY;
        r->share = 100.0;
    }
}

/* ---------------------------------------------------------------- SGEMM */

typedef struct sgemm_ctx {
    size_t n;
    pfx_tensor *a, *b, *c;
} sgemm_ctx;

static pfx_status sgemm_enqueue(pfx_runtime *rt, void *ctx, void **ev)
{
    (void)ev; /* CLBlast may run helper kernels, the host backend none: timed between markers */
    sgemm_ctx *g = ctx;
    return pfx_gemm(rt, "bench sgemm", false, false, g->n, g->n, g->n, 1.0f,
                    PFX_GEMM_OP(g->a->mem, 0, g->n), PFX_GEMM_OP(g->b->mem, 0, g->n), 0.0f,
                    PFX_GEMM_OP(g->c->mem, 0, g->n));
}

static void test_sgemm(suite *s, size_t n, double *hint_gflops)
{
    char id[32], label[64];
    snprintf(id, sizeof(id), "sgemm.%zu", n);
    snprintf(label, sizeof(label), "%zux%zux%zu", n, n, n);
    bench_result *r = begin(s, id,
                            pfx_runtime_gemm_backend(s->rt) == PFX_GEMM_HOST ? "SGEMM (host BLAS)"
                                                                             : "SGEMM (CLBlast)",
                            label);
    if (!r)
        return;
    double bytes = (double)n * (double)n * 4.0;
    double flops = 2.0 * (double)n * (double)n * (double)n;
    if (!fits(s, r, 3 * bytes, bytes) || quick_too_slow(s, r, flops, *hint_gflops, "a smaller size"))
        return;
    sgemm_ctx g = { .n = n };
    size_t shape[2] = { n, n };
    pfx_status st = random_tensor(s->rt, 2, shape, 11, 1.0f, &g.a);
    if (st == PFX_SUCCESS)
        st = random_tensor(s->rt, 2, shape, 12, 1.0f, &g.b);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(s->rt, PFX_DTYPE_F32, 2, shape, &g.c);
    if (st == PFX_SUCCESS)
        measure(s, r, sgemm_enqueue, &g, flops, 0, BENCH_CEIL_FMA);
    else
        skip_status(s, r, st);
    pfx_tensor_destroy(&g.a);
    pfx_tensor_destroy(&g.b);
    pfx_tensor_destroy(&g.c);
    if (r->ok)
        *hint_gflops = r->gflops;
}

/* ---------------------------------------------------------------- attention */

typedef struct attn_shape {
    char tag;
    size_t B, H, Hkv, N, M, P, D;
    bool causal;
    bool decode; /* memory-bound: judged by GB/s against the copy bandwidth */
} attn_shape;

static const attn_shape attn_shapes[] = {
    { 'a', 1, 8, 8, 1024, 1024, 32, 64, false, false },
    { 'b', 1, 8, 8, 1024, 1024, 32, 64, true, false },
    { 'c', 4, 16, 16, 2048, 2048, 64, 64, false, false },
    { 'd', 8, 32, 8, 1, 8192, 64, 128, false, true },
};

typedef struct attn_ctx {
    pfx_attention_desc desc;
    pfx_attention_inputs in;
    pfx_tensor *q, *k, *v, *pk, *pv, *o, *lse, *d_o;
    pfx_tensor *dq, *dk, *dv, *dpk, *dpv;
    pfx_attention_grads grads;
} attn_ctx;

static void attn_free(attn_ctx *a)
{
    pfx_tensor **all[] = { &a->q, &a->k, &a->v, &a->pk, &a->pv, &a->o, &a->lse, &a->d_o,
                           &a->dq, &a->dk, &a->dv, &a->dpk, &a->dpv };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        pfx_tensor_destroy(all[i]);
}

/* Visible (query, key) pairs of the whole problem. */
static double attn_pairs(const attn_shape *sh)
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

/* Operations not in this build yet are reported as skipped ("not built"); the
 * stubs keep the suite linking without them. */
#if PFX_BENCH_HAVE_ATTENTION_FORWARD
#define bench_attention_forward pfx_attention_forward
#else
static pfx_status bench_attention_forward(pfx_runtime *rt, const pfx_attention_desc *desc,
                                          const pfx_attention_inputs *in, pfx_tensor *o,
                                          pfx_tensor *lse)
{
    (void)desc, (void)in, (void)o, (void)lse;
    return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "pfx_attention_forward is not built");
}
#endif
#if PFX_BENCH_HAVE_ATTENTION_BACKWARD
#define bench_attention_backward pfx_attention_backward
#else
static pfx_status bench_attention_backward(pfx_runtime *rt, const pfx_attention_desc *desc,
                                           const pfx_attention_inputs *in, const pfx_tensor *o,
                                           const pfx_tensor *lse, const pfx_tensor *d_o,
                                           const pfx_attention_grads *grads)
{
    (void)desc, (void)in, (void)o, (void)lse, (void)d_o, (void)grads;
    return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "pfx_attention_backward is not built");
}
#endif

static pfx_status attn_forward_enqueue(pfx_runtime *rt, void *ctx, void **ev)
{
    (void)ev;
    attn_ctx *a = ctx;
    return bench_attention_forward(rt, &a->desc, &a->in, a->o, a->lse);
}

static pfx_status attn_backward_enqueue(pfx_runtime *rt, void *ctx, void **ev)
{
    (void)ev;
    attn_ctx *a = ctx;
    return bench_attention_backward(rt, &a->desc, &a->in, a->o, a->lse, a->d_o, &a->grads);
}

static void attn_label(const attn_shape *sh, char *out, size_t cap)
{
    if (sh->H != sh->Hkv)
        snprintf(out, cap, "(%c) B%zu H%zu Hkv%zu N%zu M%zu P%zu D%zu%s", sh->tag, sh->B, sh->H,
                 sh->Hkv, sh->N, sh->M, sh->P, sh->D, sh->causal ? " causal" : "");
    else
        snprintf(out, cap, "(%c) B%zu H%zu N%zu M%zu P%zu D%zu%s", sh->tag, sh->B, sh->H, sh->N,
                 sh->M, sh->P, sh->D, sh->causal ? " causal" : "");
}

static void test_attention(suite *s, const attn_shape *sh, bool backward)
{
    char id[32], label[64];
    snprintf(id, sizeof(id), "attn_%s.%c", backward ? "bwd" : "fwd", sh->tag);
    attn_label(sh, label, sizeof(label));
    bench_result *r = begin(s, id, backward ? "Attention backward" : "Attention forward", label);
    if (!r)
        return;
#if !PFX_BENCH_HAVE_ATTENTION_FORWARD
    skip(r, "not built: pfx_attention_forward is not in this build yet");
    return;
#endif
#if !PFX_BENCH_HAVE_ATTENTION_BACKWARD
    if (backward) {
        skip(r, "not built: pfx_attention_backward is not in this build yet");
        return;
    }
#endif
    double qbytes = 4.0 * (double)(sh->B * sh->H * sh->N * sh->D);
    double kvbytes = 4.0 * (double)(sh->B * sh->Hkv * sh->M * sh->D);
    double pbytes = 4.0 * (double)(sh->Hkv * sh->P * sh->D);
    double lsebytes = 4.0 * (double)(sh->B * sh->H * sh->N);
    double total = 2 * qbytes + 2 * kvbytes + 2 * pbytes + lsebytes;
    if (backward)
        total *= 2;
    double flops = 4.0 * attn_pairs(sh) * (double)sh->D * (backward ? 2.5 : 1.0);
    if (!fits(s, r, total, kvbytes > qbytes ? kvbytes : qbytes))
        return;
    if (!sh->decode && sh->tag != 'a' &&
        quick_too_slow(s, r, flops, s->attn_gflops[backward], "shape (a)"))
        return;

    attn_ctx a;
    memset(&a, 0, sizeof(a));
    pfx_attention_desc_init(&a.desc);
    a.desc.batch = sh->B;
    a.desc.heads = sh->H;
    a.desc.kv_heads = sh->Hkv;
    a.desc.queries = sh->N;
    a.desc.keys = sh->M;
    a.desc.prefix_len = sh->P;
    a.desc.head_dim = sh->D;
    a.desc.causal = sh->causal;
    size_t qs[4] = { sh->B, sh->H, sh->N, sh->D };
    size_t ks[4] = { sh->B, sh->Hkv, sh->M, sh->D };
    size_t ps[3] = { sh->Hkv, sh->P, sh->D };
    size_t ls[3] = { sh->B, sh->H, sh->N };
    pfx_runtime *rt = s->rt;
    pfx_status st = random_tensor(rt, 4, qs, 1, 1.0f, &a.q);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 4, ks, 2, 1.0f, &a.k);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 4, ks, 3, 1.0f, &a.v);
    if (st == PFX_SUCCESS && sh->P)
        st = random_tensor(rt, 3, ps, 4, 1.0f, &a.pk);
    if (st == PFX_SUCCESS && sh->P)
        st = random_tensor(rt, 3, ps, 5, 1.0f, &a.pv);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &a.o);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ls, &a.lse);
    a.in = (pfx_attention_inputs){ a.q, a.k, a.v, a.pk, a.pv };
    double bytes = sh->decode ? 2 * kvbytes + 2 * pbytes : 0;
    if (backward) {
        if (st == PFX_SUCCESS)
            st = bench_attention_forward(rt, &a.desc, &a.in, a.o, a.lse);
        if (st == PFX_SUCCESS)
            st = random_tensor(rt, 4, qs, 6, 1.0f, &a.d_o);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &a.dq);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, ks, &a.dk);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, ks, &a.dv);
        if (st == PFX_SUCCESS && sh->P)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &a.dpk);
        if (st == PFX_SUCCESS && sh->P)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &a.dpv);
        a.grads = (pfx_attention_grads){ .dq = a.dq, .dk = a.dk, .dv = a.dv,
                                         .dprefix_k = a.dpk, .dprefix_v = a.dpv };
        bytes *= 2; /* K/V read and dK/dV written */
    }
    if (st == PFX_SUCCESS)
        measure(s, r, backward ? attn_backward_enqueue : attn_forward_enqueue, &a, flops, bytes,
                sh->decode ? BENCH_CEIL_COPY : BENCH_CEIL_FMA);
    else
        skip_status(s, r, st);
    attn_free(&a);
    if (r->ok && sh->tag == 'a')
        s->attn_gflops[backward] = r->gflops;
}

/* ---------------------------------------------------------------- encoder */

#define ENC_L 12
#define ENC_HKV 12
#define ENC_D 64
#define ENC_M 20
#define ENC_E 512
#define ENC_H 512

#if PFX_BENCH_HAVE_ENCODER
typedef struct enc_ctx {
    pfx_encoder *enc;
    pfx_tensor *kp[ENC_L], *vp[ENC_L], *dkp[ENC_L], *dvp[ENC_L];
    pfx_tensor *g[PFX_ENCODER_PARAM_COUNT];
    pfx_encoder_grads grads;
} enc_ctx;

static pfx_status enc_forward_enqueue(pfx_runtime *rt, void *ctx, void **ev)
{
    (void)rt;
    (void)ev;
    enc_ctx *e = ctx;
    return pfx_encoder_forward(e->enc, e->kp, e->vp);
}

static pfx_status enc_backward_enqueue(pfx_runtime *rt, void *ctx, void **ev)
{
    (void)rt;
    (void)ev;
    enc_ctx *e = ctx;
    return pfx_encoder_backward(e->enc, (const pfx_tensor *const *)e->dkp,
                                (const pfx_tensor *const *)e->dvp, &e->grads);
}
#endif

static void test_encoder(suite *s, bool backward)
{
    char label[64];
    snprintf(label, sizeof(label), "GPT-2 small: L%d Hkv%d D%d m%d e%d h%d", ENC_L, ENC_HKV, ENC_D,
             ENC_M, ENC_E, ENC_H);
    bench_result *r = begin(s, backward ? "encoder.bwd" : "encoder.fwd",
                            backward ? "Prefix encoder backward" : "Prefix encoder forward", label);
    if (!r)
        return;
#if !PFX_BENCH_HAVE_ENCODER
    skip(r, "not built: the prefix encoder (include/prefixcl/encoder.h) is not in this build yet");
#else
    const double out_dim = 2.0 * ENC_L * ENC_HKV * ENC_D;
    const double params = (double)ENC_M * ENC_E + (double)ENC_H * ENC_E + ENC_H +
                          out_dim * ENC_H + out_dim;
    const double prefix_values = (double)ENC_M * out_dim;
    /* forward: E W1^T (2 m e h) and T W2^T (2 m h O); backward: dW2, dT, dW1, dE */
    double flops = 2.0 * ENC_M * ENC_E * ENC_H + 2.0 * ENC_M * ENC_H * out_dim;
    double bytes = 4.0 * (params + prefix_values); /* parameters read, prefixes written */
    if (backward) {
        flops *= 2.0;
        bytes = 4.0 * (2.0 * params + prefix_values); /* params read, grads written, dY read */
    }
    if (!fits(s, r, 4.0 * (3.0 * params + 2.0 * prefix_values), 4.0 * out_dim * ENC_H))
        return;
    enc_ctx e;
    memset(&e, 0, sizeof(e));
    pfx_encoder_params p = { .layers = ENC_L, .kv_heads = ENC_HKV, .head_dim = ENC_D,
                             .prefix_len = ENC_M, .embed_dim = ENC_E, .hidden_dim = ENC_H };
    pfx_runtime *rt = s->rt;
    pfx_status st = pfx_encoder_create(rt, &p, &e.enc);
    if (st == PFX_SUCCESS)
        st = pfx_encoder_init_random(e.enc, 1234, 1.0f);
    size_t ps[3] = { ENC_HKV, ENC_M, ENC_D };
    for (size_t l = 0; l < ENC_L && st == PFX_SUCCESS; l++) {
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &e.kp[l]);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &e.vp[l]);
        if (st == PFX_SUCCESS && backward)
            st = random_tensor(rt, 3, ps, 100 + 2 * l, 0.1f, &e.dkp[l]);
        if (st == PFX_SUCCESS && backward)
            st = random_tensor(rt, 3, ps, 101 + 2 * l, 0.1f, &e.dvp[l]);
    }
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT && st == PFX_SUCCESS && backward; i++) {
        const pfx_tensor *t = pfx_encoder_tensor(e.enc, (pfx_encoder_param)i);
        size_t shape[PFX_MAX_DIMS];
        unsigned nd = pfx_tensor_ndim(t);
        for (unsigned d = 0; d < nd; d++)
            shape[d] = pfx_tensor_dim(t, d);
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, nd, shape, &e.g[i]);
    }
    e.grads = (pfx_encoder_grads){ .de = e.g[PFX_ENCODER_E], .dw1 = e.g[PFX_ENCODER_W1],
                                   .db1 = e.g[PFX_ENCODER_B1], .dw2 = e.g[PFX_ENCODER_W2],
                                   .db2 = e.g[PFX_ENCODER_B2] };
    if (st == PFX_SUCCESS) {
        /* Judged against whichever ceiling binds on this device (roofline). */
        double t_compute = s->fma_gflops > 0 ? flops / (s->fma_gflops * 1e9) : 0;
        double t_memory = s->copy_gbs > 0 ? bytes / (s->copy_gbs * 1e9) : 0;
        measure(s, r, backward ? enc_backward_enqueue : enc_forward_enqueue, &e, flops, bytes,
                t_memory > t_compute ? BENCH_CEIL_COPY : BENCH_CEIL_FMA);
    } else {
        skip_status(s, r, st);
    }
    for (size_t l = 0; l < ENC_L; l++) {
        pfx_tensor_destroy(&e.kp[l]);
        pfx_tensor_destroy(&e.vp[l]);
        pfx_tensor_destroy(&e.dkp[l]);
        pfx_tensor_destroy(&e.dvp[l]);
    }
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        pfx_tensor_destroy(&e.g[i]);
    pfx_encoder_destroy(&e.enc);
#endif
}

/* ---------------------------------------------------------------- layer step */

/* One training step of one GPT-2-small attention layer: forward, MSE loss
 * against a target (its gradient), backward to dX and the prefix and gain
 * gradients (frozen weights get none), AdamW on the prefix and the gains. */
#define STEP_B 2
#define STEP_N 512
#define STEP_C 768
#define STEP_H 12
#define STEP_D 64
#define STEP_P 20

#if PFX_BENCH_HAVE_LAYER
typedef struct step_ctx {
    pfx_layer *layer;
    pfx_optimizer *opt;
    pfx_tensor *x, *y, *target, *dy, *dx, *kp, *vp, *dkp, *dvp, *gain, *dgain;
    pfx_layer_prefix prefix;
    pfx_layer_grads grads;
} step_ctx;

static pfx_status step_enqueue(pfx_runtime *rt, void *ctx, void **ev)
{
    (void)rt;
    (void)ev;
    step_ctx *c = ctx;
    double loss = 0;
    pfx_status st = pfx_layer_forward(c->layer, c->x, &c->prefix, c->y);
    if (st == PFX_SUCCESS)
        st = pfx_mse_loss(c->y, c->target, c->dy, &loss);
    if (st == PFX_SUCCESS)
        st = pfx_layer_backward(c->layer, c->x, &c->prefix, c->dy, &c->grads);
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_step(c->opt, NULL);
    return st;
}
#endif

static void test_layer_step(suite *s, double hint_gflops)
{
    char label[64];
    snprintf(label, sizeof(label), "B%d N%d C%d H%d D%d P%d causal, fwd+loss+bwd+AdamW", STEP_B,
             STEP_N, STEP_C, STEP_H, STEP_D, STEP_P);
    bench_result *r = begin(s, "layer.step", "Training step of a layer", label);
    if (!r)
        return;
#if !PFX_BENCH_HAVE_LAYER
    (void)hint_gflops;
    skip(r, "no layer API yet");
#else
    const double T = (double)STEP_B * STEP_N, C = STEP_C, HD = (double)STEP_H * STEP_D;
    attn_shape sh = { 's', STEP_B, STEP_H, STEP_H, STEP_N, STEP_N, STEP_P, STEP_D, true, false };
    double attn = 4.0 * attn_pairs(&sh) * STEP_D;
    /* forward: Q, K, V and output projections + attention; backward: the same
     * products for dX (no weight gradients) + attention backward (2.5x) */
    double proj = 2.0 * T * C * 3.0 * HD + 2.0 * T * HD * C;
    double flops = 2.0 * proj + 3.5 * attn;
    double act = 4.0 * T * C;
    if (!fits(s, r, 4.0 * C * HD * 4 + 12 * act, 4.0 * C * HD) ||
        quick_too_slow(s, r, flops, hint_gflops, "SGEMM"))
        return;
    step_ctx c;
    memset(&c, 0, sizeof(c));
    pfx_runtime *rt = s->rt;
    pfx_layer_params lp = { .model_dim = STEP_C, .heads = STEP_H, .kv_heads = STEP_H,
                            .head_dim = STEP_D, .prefix_len = STEP_P, .max_batch = STEP_B,
                            .max_tokens = STEP_N, .bias = true, .causal = true, .residual = true,
                            .gain_mode = PFX_GAIN_TANH };
    size_t xs[3] = { STEP_B, STEP_N, STEP_C }, ps[3] = { STEP_H, STEP_P, STEP_D },
           gs[1] = { STEP_H };
    pfx_status st = pfx_layer_create(rt, &lp, &c.layer);
    if (st == PFX_SUCCESS)
        st = pfx_layer_init_random(c.layer, 7, 1.0f);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 3, xs, 21, 1.0f, &c.x);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 3, xs, 22, 1.0f, &c.target);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 3, ps, 23, 0.5f, &c.kp);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 3, ps, 24, 0.5f, &c.vp);
    if (st == PFX_SUCCESS)
        st = random_tensor(rt, 1, gs, 25, 0.1f, &c.gain);
    pfx_tensor **outs[] = { &c.y, &c.dy, &c.dx };
    for (size_t i = 0; i < 3 && st == PFX_SUCCESS; i++)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, xs, outs[i]);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &c.dkp);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &c.dvp);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, gs, &c.dgain);
    /* The gains the optimizer updates, read on the device: nothing waits. */
    c.prefix = (pfx_layer_prefix){ .k = c.kp, .v = c.vp, .gain_tensor = c.gain, .gain_ramp = 1.0f };
    c.grads = (pfx_layer_grads){ .dx = c.dx, .dprefix_k = c.dkp, .dprefix_v = c.dvp,
                                 .dgain = c.dgain };
    pfx_optimizer_params op = { .max_grad_norm = 1.0f };
    unsigned group = 0;
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_create(rt, &op, &c.opt);
    if (st == PFX_SUCCESS) {
        pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
        st = pfx_optimizer_add_group(c.opt, &gp, &group);
    }
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_add_param(c.opt, group, c.kp, c.dkp, "prefix_k");
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_add_param(c.opt, group, c.vp, c.dvp, "prefix_v");
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_add_param(c.opt, group, c.gain, c.dgain, "gain");
    if (st == PFX_SUCCESS)
        measure(s, r, step_enqueue, &c, flops, 0, BENCH_CEIL_FMA);
    else
        skip_status(s, r, st);
    pfx_optimizer_destroy(&c.opt);
    pfx_tensor **all[] = { &c.x, &c.y, &c.target, &c.dy, &c.dx, &c.kp, &c.vp, &c.dkp, &c.dvp,
                           &c.gain, &c.dgain };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        pfx_tensor_destroy(all[i]);
    pfx_layer_destroy(&c.layer);
#endif
}

/* ---------------------------------------------------------------- suite */

static const size_t sgemm_sizes[] = { 512, 1024, 2048, 4096 };

static size_t sgemm_count(const pfx_device_info *info)
{
    return info->type == PFX_DEVICE_GPU ? 4 : 3; /* 4096 on GPUs only */
}

size_t bench_suite_size(const pfx_device_info *info)
{
    return 2 + sgemm_count(info) + 2 * (sizeof(attn_shapes) / sizeof(attn_shapes[0])) + 2 + 1;
}

void bench_suite_run(pfx_runtime *rt, bool quick, const char *only, bench_device *dev,
                     bench_progress_fn progress, void *user)
{
    suite s = { .rt = rt, .quick = quick, .dev = dev, .progress = progress, .user = user,
                .only = only };
    s.timing.target_s = quick ? 0.2 : 1.0;
    s.timing.min_runs = quick ? 3 : 5;
    s.timing.max_runs = quick ? 200 : 1000;
    s.total = bench_suite_size(&dev->info);
    dev->count = 0;

    test_fma_peak(&s);
    test_copy_bandwidth(&s);
    double sgemm_rate = 0;
    for (size_t i = 0; i < sgemm_count(&dev->info); i++)
        test_sgemm(&s, sgemm_sizes[i], &sgemm_rate);
    for (size_t i = 0; i < sizeof(attn_shapes) / sizeof(attn_shapes[0]); i++)
        test_attention(&s, &attn_shapes[i], false);
    for (size_t i = 0; i < sizeof(attn_shapes) / sizeof(attn_shapes[0]); i++)
        test_attention(&s, &attn_shapes[i], true);
    test_encoder(&s, false);
    test_encoder(&s, true);
    test_layer_step(&s, sgemm_rate);
    snprintf(dev->timer, sizeof(dev->timer), "%s", s.host_timer ? "host" : "events");
    snprintf(dev->gemm, sizeof(dev->gemm), "%s", pfx_gemm_backend_name(pfx_runtime_gemm_backend(rt)));
    const char *tuning = pfx_runtime_gemm_tuning(rt); /* its first word */
    snprintf(dev->gemm_tuning, sizeof(dev->gemm_tuning), "%.*s", (int)strcspn(tuning, " "), tuning);
}
