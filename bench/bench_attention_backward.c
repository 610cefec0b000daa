/*
 * Attention backward beside the forward: median ms and GFLOP/s for the shapes
 * of bench_attention.c
 *   (a) B=1 H=8 N=M=1024 P=32 D=64, (b) the same causal,
 *   (c) B=4 H=16 N=M=2048 P=64 D=64,
 * the backward counted as 2.5x the forward's FLOPs 4*B*H*N*(P+M)*D (only the
 * visible pairs for causal), and the ratio backward / forward time.
 *
 * usage: bench_attention_backward [--device SEL] [--reps N] [--shapes abc]
 * Each timing is wall-clock from enqueue to pfx_runtime_finish, after one
 * warm-up call (kernel builds excluded). All gradients are requested
 * (dQ, dK, dV, dKp, dVp, dgain) with a linear gain.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefixcl/prefixcl.h"
#include "tool_util.h"

typedef struct shape {
    char tag;
    size_t B, H, N, M, P, D;
    bool causal;
} shape;

static const shape shapes[] = {
    { 'a', 1, 8, 1024, 1024, 32, 64, false },
    { 'b', 1, 8, 1024, 1024, 32, 64, true },
    { 'c', 4, 16, 2048, 2048, 64, 64, false },
};

static double visible_pairs(const shape *s)
{
    if (!s->causal)
        return (double)s->N * (double)(s->P + s->M);
    double pairs = 0;
    for (size_t i = 0; i < s->N; i++) {
        double last = (double)i + (double)s->M - (double)s->N; /* t <= last */
        double seen = last < 0 ? 0 : last + 1;
        pairs += (double)s->P + (seen < (double)s->M ? seen : (double)s->M);
    }
    return pairs;
}

static pfx_status random_tensor(pfx_runtime *rt, unsigned ndim, const size_t *shp, unsigned seed,
                                pfx_tensor **t)
{
    size_t n = 1;
    for (unsigned i = 0; i < ndim; i++)
        n *= shp[i];
    float *x = malloc(n * sizeof(float));
    if (!x)
        return PFX_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
    }
    pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, ndim, shp, t);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_write(*t, 0, n, x);
    free(x);
    return st;
}

typedef pfx_status (*run_fn)(pfx_runtime *rt, void *ctx);

typedef struct ctx {
    pfx_attention_desc d;
    pfx_attention_inputs in;
    pfx_tensor *o, *lse, *d_o;
    pfx_attention_grads g;
} ctx;

static pfx_status run_fwd(pfx_runtime *rt, void *p)
{
    ctx *c = p;
    return pfx_attention_forward(rt, &c->d, &c->in, c->o, c->lse);
}

static pfx_status run_bwd(pfx_runtime *rt, void *p)
{
    ctx *c = p;
    return pfx_attention_backward(rt, &c->d, &c->in, c->o, c->lse, c->d_o, &c->g);
}

/* Median wall ms of reps timed calls after one warm-up (*cpu: median
 * process CPU ms); -1 on failure. */
static double time_it(pfx_runtime *rt, run_fn fn, ctx *c, int reps, double *cpu)
{
    double *t = malloc(2 * (size_t)reps * sizeof(double)), *tc = t + reps;
    if (fn(rt, c) != PFX_SUCCESS || pfx_runtime_finish(rt) != PFX_SUCCESS) {
        fprintf(stderr, "%s\n", pfx_last_error(rt));
        free(t);
        return -1;
    }
    for (int r = 0; r < reps; r++) {
        double t0 = tool_now_s() * 1e3, c0 = tool_cpu_s() * 1e3;
        if (fn(rt, c) != PFX_SUCCESS || pfx_runtime_finish(rt) != PFX_SUCCESS) {
            fprintf(stderr, "%s\n", pfx_last_error(rt));
            free(t);
            return -1;
        }
        t[r] = tool_now_s() * 1e3 - t0;
        tc[r] = tool_cpu_s() * 1e3 - c0;
    }
    qsort(t, (size_t)reps, sizeof(double), tool_cmp_double);
    qsort(tc, (size_t)reps, sizeof(double), tool_cmp_double);
    double m = t[reps / 2];
    *cpu = tc[reps / 2];
    free(t);
    return m;
}

static int bench_shape(pfx_runtime *rt, const shape *s, int reps)
{
    ctx c;
    memset(&c, 0, sizeof(c));
    float gain[16];
    for (size_t h = 0; h < s->H; h++)
        gain[h] = 0.1f * (float)h - 0.3f;
    pfx_attention_desc_init(&c.d);
    c.d.batch = s->B;
    c.d.heads = c.d.kv_heads = s->H;
    c.d.queries = s->N;
    c.d.keys = s->M;
    c.d.prefix_len = s->P;
    c.d.head_dim = s->D;
    c.d.causal = s->causal;
    c.d.gain_mode = PFX_GAIN_LINEAR;
    c.d.gain = gain;
    size_t qs[4] = { s->B, s->H, s->N, s->D }, ks[4] = { s->B, s->H, s->M, s->D };
    size_t ps[3] = { s->H, s->P, s->D }, ls[3] = { s->B, s->H, s->N }, hs[1] = { s->H };
    pfx_tensor *q = NULL, *k = NULL, *v = NULL, *pk = NULL, *pv = NULL;
    pfx_tensor *dq = NULL, *dk = NULL, *dv = NULL, *dpk = NULL, *dpv = NULL, *dg = NULL;
    pfx_status st = PFX_SUCCESS;
    if (!st)
        st = random_tensor(rt, 4, qs, 1, &q);
    if (!st)
        st = random_tensor(rt, 4, ks, 2, &k);
    if (!st)
        st = random_tensor(rt, 4, ks, 3, &v);
    if (!st)
        st = random_tensor(rt, 3, ps, 4, &pk);
    if (!st)
        st = random_tensor(rt, 3, ps, 5, &pv);
    if (!st)
        st = random_tensor(rt, 4, qs, 6, &c.d_o);
    if (!st)
        st = random_tensor(rt, 4, qs, 7, &c.o);
    if (!st)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ls, &c.lse);
    if (!st)
        st = pfx_tensor_fill(c.lse, 8.0f); /* replaced by the forward's when it exists */
    if (!st)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &dq);
    if (!st)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, ks, &dk);
    if (!st)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, ks, &dv);
    if (!st)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &dpk);
    if (!st)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &dpv);
    if (!st)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hs, &dg);
    if (st) {
        fprintf(stderr, "setup: %s\n", pfx_last_error(rt));
        return 1;
    }
    c.in = (pfx_attention_inputs){ q, k, v, pk, pv };
    c.g = (pfx_attention_grads){ dq, dk, dv, dpk, dpv, dg, NULL, false };

    double fwd_flops = 4.0 * s->B * s->H * visible_pairs(s) * s->D;
    double fwd_ms = -1, fwd_cpu = 0, bwd_cpu = 0;
    fwd_ms = time_it(rt, run_fwd, &c, reps, &fwd_cpu); /* also gives the backward O, LSE */
    double bwd_ms = time_it(rt, run_bwd, &c, reps, &bwd_cpu);
    char label[96];
    snprintf(label, sizeof(label), "(%c) B=%zu H=%zu N=M=%zu P=%zu D=%zu%s", s->tag, s->B, s->H,
             s->N, s->P, s->D, s->causal ? " causal" : "");
    if (fwd_ms > 0)
        printf("%-44s fwd %9.2f ms %7.2f GFLOP/s | bwd %9.2f ms %7.2f GFLOP/s | bwd/fwd %.2f\n",
               label, fwd_ms, fwd_flops / fwd_ms * 1e-6, bwd_ms, 2.5 * fwd_flops / bwd_ms * 1e-6,
               bwd_ms / fwd_ms);
    else
        printf("%-44s fwd %9s    %7s         | bwd %9.2f ms %7.2f GFLOP/s\n", label, "n/a", "",
               bwd_ms, 2.5 * fwd_flops / bwd_ms * 1e-6);
    if (fwd_ms > 0)
        printf("%-44s process CPU: fwd %9.1f ms, bwd %9.1f ms, bwd/fwd %.2f\n", "", fwd_cpu,
               bwd_cpu, bwd_cpu / fwd_cpu);
    else
        printf("%-44s process CPU: bwd %9.1f ms\n", "", bwd_cpu);
    fflush(stdout);
    pfx_tensor *all[] = { q, k, v, pk, pv, c.o, c.lse, c.d_o, dq, dk, dv, dpk, dpv, dg };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        pfx_tensor_destroy(&all[i]);
    return bwd_ms < 0;
}

int main(int argc, char **argv)
{
    tool_openblas_settings(argv);
    const char *device = NULL, *which = "abc";
    int reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            uint64_t n = 0; /* the library's strict parser: digits only */
            if (pfx_parse_uint(argv[++i], 1000000, &n) != PFX_SUCCESS || n == 0) {
                fprintf(stderr, "%s: --reps '%s': 1 to 1000000\n", argv[0], argv[i]);
                return 2;
            }
            reps = (int)n;
        } else if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
            which = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--device SEL] [--reps N] [--shapes abc]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.device = device;
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, &params) != PFX_SUCCESS) {
        fprintf(stderr, "%s\n", pfx_last_error(NULL));
        return 1;
    }
    printf("device: %s (%s)\n", pfx_runtime_device(rt)->device_name,
           pfx_runtime_device(rt)->platform_name);
    int fails = 0;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        if (strchr(which, shapes[i].tag))
            fails += bench_shape(rt, &shapes[i], reps);
    pfx_runtime_destroy(&rt);
    return fails ? 1 : 0;
}
