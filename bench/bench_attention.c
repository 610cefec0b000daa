/*
 * Attention forward benchmark: median ms and GFLOP/s of
 * pfx_attention_forward for
 *   (a) B=1 H=8 N=M=1024 P=32 D=64, (b) the same causal,
 *   (c) B=4 H=16 N=M=2048 P=64 D=64,
 *   (d) decode B=8 H=32 Hkv=8 N=1 M=8192 P=64 D=128 (also GB/s of K/V read),
 * FLOPs 4*B*H*N*(P+M)*D counting only the visible pairs for causal, and
 * CLBlast SGEMM 1024^3 in the same run with the ratio (a) / SGEMM.
 *
 * usage: bench_attention [--device SEL] [--quick] [--reps N] [--json FILE]
 * Each timing is wall-clock from enqueue to pfx_runtime_finish after warm-up calls
 * (kernel builds excluded); the median over the repetitions is reported,
 * together with the process CPU time (on a CPU device shared with other
 * jobs, wall time also measures the contention).
 *
 * The shape table has one result column per pass (fwd now; a bwd column can
 * be filled beside it by adding a runner to `passes`).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefixcl/prefixcl.h"
#include "tool_util.h"

typedef struct shape {
    char tag;
    size_t B, H, Hkv, N, M, P, D;
    bool causal;
} shape;

static const shape shapes[] = {
    { 'a', 1, 8, 8, 1024, 1024, 32, 64, false },
    { 'b', 1, 8, 8, 1024, 1024, 32, 64, true },
    { 'c', 4, 16, 16, 2048, 2048, 64, 64, false },
    { 'd', 8, 32, 8, 1, 8192, 64, 128, false },
};
#define SHAPE_COUNT (sizeof(shapes) / sizeof(shapes[0]))

typedef struct result {
    bool done;
    double ms, cpu_ms, gflops;
} result;

/* Problem tensors of one shape. */
typedef struct problem {
    pfx_attention_desc desc;
    pfx_tensor *q, *k, *v, *pk, *pv, *o, *lse;
} problem;

typedef pfx_status (*pass_fn)(pfx_runtime *rt, problem *p);

static pfx_status run_forward(pfx_runtime *rt, problem *p)
{
    pfx_attention_inputs in = { p->q, p->k, p->v, p->pk, p->pv };
    return pfx_attention_forward(rt, &p->desc, &in, p->o, p->lse);
}

/* Passes timed per shape, each a column; FLOP factor relative to the forward. */
static const struct {
    const char *name;
    pass_fn run;
    double flop_factor;
} passes[] = {
    { "fwd", run_forward, 1.0 },
};
#define PASS_COUNT (sizeof(passes) / sizeof(passes[0]))

/* 4 D per visible (query, key) pair. */
static double flops_of(const shape *s)
{
    double pairs = 0;
    for (size_t i = 0; i < s->N; i++) {
        double input = s->causal ? fmin((double)s->M, (double)(i + s->M - s->N + 1)) : s->M;
        pairs += s->P + fmax(input, 0.0);
    }
    return 4.0 * s->B * s->H * pairs * s->D;
}

static pfx_tensor *tensor(pfx_runtime *rt, unsigned nd, size_t a, size_t b, size_t c, size_t d,
                          float fill)
{
    size_t shape[4] = { a, b, c, d };
    pfx_tensor *t = NULL;
    if (pfx_tensor_create(rt, PFX_DTYPE_F32, nd, shape, &t) != PFX_SUCCESS) {
        fprintf(stderr, "tensor: %s\n", pfx_last_error(rt));
        exit(1);
    }
    /* Deterministic pseudo-random content. */
    size_t n = pfx_tensor_numel(t);
    float *h = malloc(n * sizeof(float));
    uint32_t x = 12345u + (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        h[i] = fill * ((float)(x >> 8) / 16777216.0f - 0.5f);
    }
    pfx_tensor_write(t, 0, n, h);
    free(h);
    return t;
}

static void problem_create(pfx_runtime *rt, const shape *s, problem *p)
{
    memset(p, 0, sizeof(*p));
    pfx_attention_desc_init(&p->desc);
    pfx_attention_desc *d = &p->desc;
    d->batch = s->B;
    d->heads = s->H;
    d->kv_heads = s->Hkv;
    d->queries = s->N;
    d->keys = s->M;
    d->prefix_len = s->P;
    d->head_dim = s->D;
    d->causal = s->causal;
    p->q = tensor(rt, 4, s->B, s->H, s->N, s->D, 2.0f);
    p->k = tensor(rt, 4, s->B, s->Hkv, s->M, s->D, 2.0f);
    p->v = tensor(rt, 4, s->B, s->Hkv, s->M, s->D, 2.0f);
    if (s->P) {
        p->pk = tensor(rt, 3, s->Hkv, s->P, s->D, 1, 2.0f);
        p->pv = tensor(rt, 3, s->Hkv, s->P, s->D, 1, 2.0f);
    }
    p->o = tensor(rt, 4, s->B, s->H, s->N, s->D, 0.0f);
    p->lse = tensor(rt, 3, s->B, s->H, s->N, 1, 0.0f);
}

static void problem_destroy(problem *p)
{
    pfx_tensor_destroy(&p->q);
    pfx_tensor_destroy(&p->k);
    pfx_tensor_destroy(&p->v);
    pfx_tensor_destroy(&p->pk);
    pfx_tensor_destroy(&p->pv);
    pfx_tensor_destroy(&p->o);
    pfx_tensor_destroy(&p->lse);
}

static result time_pass(pfx_runtime *rt, pass_fn fn, problem *p, double flops, int reps, int warm)
{
    result r = { 0 };
    double wall[64], cpu[64];
    for (int i = 0; i < warm; i++)
        if (fn(rt, p) != PFX_SUCCESS || pfx_runtime_finish(rt) != PFX_SUCCESS) {
            fprintf(stderr, "pass failed: %s\n", pfx_last_error(rt));
            return r;
        }
    for (int i = 0; i < reps; i++) {
        double t0 = tool_now_s() * 1e3, c0 = tool_cpu_s() * 1e3;
        if (fn(rt, p) != PFX_SUCCESS || pfx_runtime_finish(rt) != PFX_SUCCESS) {
            fprintf(stderr, "pass failed: %s\n", pfx_last_error(rt));
            return r;
        }
        wall[i] = tool_now_s() * 1e3 - t0;
        cpu[i] = tool_cpu_s() * 1e3 - c0;
    }
    r.done = true;
    r.ms = tool_median(wall, (size_t)reps);
    r.cpu_ms = tool_median(cpu, (size_t)reps);
    r.gflops = flops / (r.ms * 1e6);
    return r;
}

/* CLBlast SGEMM n^3 through pfx_matmul (the runtime is made with the CLBlast
 * backend, untuned): GFLOP/s (median), 0 on error. */
static double sgemm_gflops(pfx_runtime *rt, size_t n, int reps, double *ms_out)
{
    float *h = malloc(n * n * sizeof(float));
    size_t shape[2] = { n, n };
    pfx_tensor *a = NULL, *b = NULL, *c = NULL;
    pfx_status st = h ? PFX_SUCCESS : PFX_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; h && i < n * n; i++)
        h[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &a);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &b);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &c);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_write(a, 0, n * n, h);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_write(b, 0, n * n, h);
    free(h);
    double wall[64];
    double gf = 0;
    for (int i = -1; i < reps && st == PFX_SUCCESS; i++) { /* i = -1: warm-up (CLBlast compiles) */
        double t0 = tool_now_s() * 1e3;
        st = pfx_matmul(rt, a, b, c);
        if (st == PFX_SUCCESS)
            st = pfx_runtime_finish(rt);
        if (i >= 0)
            wall[i] = tool_now_s() * 1e3 - t0;
    }
    if (st == PFX_SUCCESS) {
        *ms_out = tool_median(wall, (size_t)reps);
        gf = 2.0 * n * n * n / (*ms_out * 1e6);
    } else {
        fprintf(stderr, "SGEMM: %s\n", pfx_last_error(rt));
    }
    pfx_tensor_destroy(&a);
    pfx_tensor_destroy(&b);
    pfx_tensor_destroy(&c);
    return gf;
}

int main(int argc, char **argv)
{
    tool_openblas_settings(argv);
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.gemm = PFX_GEMM_CLBLAST; /* the SGEMM figure is CLBlast's, without a stored tuning */
    params.gemm_untuned = true;
    const char *json = NULL, *only = NULL;
    int reps = 5;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            params.device = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            uint64_t n = 0; /* the library's strict parser: digits only */
            if (pfx_parse_uint(argv[++i], 1000000, &n) != PFX_SUCCESS || n == 0) {
                fprintf(stderr, "%s: --reps '%s': 1 to 1000000\n", argv[0], argv[i]);
                return 2;
            }
            reps = (int)n;
        } else if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else {
            fprintf(stderr,
                    "usage: %s [--device SEL] [--quick] [--reps N] [--shapes abcd] "
                    "[--json FILE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (quick)
        reps = 2;
    if (reps < 1 || reps > 64)
        reps = 5;

    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, &params) != PFX_SUCCESS) {
        fprintf(stderr, "%s\n", pfx_last_error(NULL));
        return 1;
    }
    const pfx_device_info *dev = pfx_runtime_device(rt);
    printf("device: %s (%s), %u compute units\n", dev->device_name, dev->platform_name,
           dev->compute_units);

    result res[SHAPE_COUNT][PASS_COUNT];
    memset(res, 0, sizeof(res));
    double kv_gbs = 0;
    printf("%-5s %-40s", "shape", "B H Hkv N M P D causal");
    for (size_t k = 0; k < PASS_COUNT; k++)
        printf(" %9s_ms %7s_GF/s", passes[k].name, passes[k].name);
    printf("\n");
    for (size_t s = 0; s < SHAPE_COUNT; s++) {
        const shape *sh = &shapes[s];
        if (only && !strchr(only, sh->tag))
            continue;
        problem p;
        problem_create(rt, sh, &p);
        char desc[64];
        snprintf(desc, sizeof(desc), "%zu %zu %zu %zu %zu %zu %zu %s", sh->B, sh->H, sh->Hkv, sh->N,
                 sh->M, sh->P, sh->D, sh->causal ? "yes" : "no");
        printf("(%c)   %-40s", sh->tag, desc);
        fflush(stdout);
        double flops = flops_of(sh);
        for (size_t k = 0; k < PASS_COUNT; k++) {
            int shape_reps = quick && sh->tag == 'c' ? 1 : reps;
            res[s][k] =
                time_pass(rt, passes[k].run, &p, flops * passes[k].flop_factor, shape_reps, 1);
            printf(" %12.2f %12.1f", res[s][k].ms, res[s][k].gflops);
            fflush(stdout);
        }
        if (sh->tag == 'd' && res[s][0].done) {
            double bytes = 2.0 * sh->B * sh->Hkv * (double)(sh->P + sh->M) * sh->D * sizeof(float);
            kv_gbs = bytes / (res[s][0].ms * 1e6);
            printf("  (K/V read %.1f GB/s)", kv_gbs);
        }
        printf("\n");
        problem_destroy(&p);
    }

    double sgemm_ms = 0, sgemm = sgemm_gflops(rt, 1024, quick ? 2 : reps, &sgemm_ms);
    printf("CLBlast SGEMM 1024^3: %.2f ms, %.1f GFLOP/s\n", sgemm_ms, sgemm);
    double ratio = res[0][0].done && sgemm > 0 ? res[0][0].gflops / sgemm : 0;
    if (res[0][0].done && sgemm > 0)
        printf("ratio (a) / SGEMM: %.2f\n", ratio);

    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            fprintf(stderr, "cannot write %s\n", json);
        } else {
            fprintf(f, "{\n  \"device\": \"%s\",\n  \"shapes\": [\n", dev->device_name);
            bool first = true;
            for (size_t s = 0; s < SHAPE_COUNT; s++) {
                if (!res[s][0].done)
                    continue;
                fprintf(f, "%s    {\"shape\": \"%c\"", first ? "" : ",\n", shapes[s].tag);
                for (size_t k = 0; k < PASS_COUNT; k++)
                    fprintf(f, ", \"%s_ms\": %.4f, \"%s_cpu_ms\": %.4f, \"%s_gflops\": %.3f",
                            passes[k].name, res[s][k].ms, passes[k].name, res[s][k].cpu_ms,
                            passes[k].name, res[s][k].gflops);
                if (shapes[s].tag == 'd')
                    fprintf(f, ", \"kv_gbs\": %.3f", kv_gbs);
                fprintf(f, "}");
                first = false;
            }
            fprintf(f, "\n  ],\n  \"sgemm_1024_gflops\": %.3f,\n  \"ratio_a_sgemm\": %.4f\n}\n",
                    sgemm, ratio);
            fclose(f);
        }
    }
    pfx_runtime_destroy(&rt);
    return 0;
}
