/*
 * Attention analysis (cl/attention_stats.cl): per-head entropy, top-k mass and
 * prefix mass without storing the map, and the explicit probability map of
 * one (item, head) for heat maps.
 *
 * Stats: one work-item per query row streams over its visible keys once
 * (online max, sum of exp, sum of exp * logit relative to the max, prefix
 * part, the top_k largest logits in private memory) and writes 4 floats per
 * row to a workspace; a second kernel averages the valid rows of each head in
 * a fixed order (deterministic). The workspace is B * H * N * 16 bytes, far
 * below the N x (P + M) map.
 */
#include <stdio.h>
#include <string.h>

#include "attention_problem.h"
#include "registry.h"

#define STATS_PROGRAM   "attention_stats"
#define STATS_ROW_WG    64
#define STATS_REDUCE_WG 64 /* PFX_REDUCE_WG default of the program */
#define STATS_TOPK_MAX  PFX_ATTENTION_TOPK_MAX

/* Kernel arguments common to the row kernels (values must outlive the launch). */
typedef struct row_args {
    cl_uint B, H, group, N, M, P, D;
    cl_int causal;
    cl_mem q, k, pk;
    cl_int q_half, k_half, pk_half;
    pfx_attn_strides qs, kvs, ps;
    cl_mem head;
    cl_int has_dim;
    cl_mem items;
} row_args;

static void row_args_init(row_args *a, const pfx_attn_problem *p, const pfx_attention_inputs *in,
                          const pfx_attn_params *params)
{
    memset(a, 0, sizeof(*a));
    a->B = (cl_uint)p->B;
    a->H = (cl_uint)p->H;
    a->group = (cl_uint)p->group;
    a->N = (cl_uint)p->N;
    a->M = (cl_uint)p->M;
    a->P = (cl_uint)p->P;
    a->D = (cl_uint)p->D;
    a->causal = p->causal;
    a->q = in->q->mem;
    a->k = in->k->mem;
    a->pk = in->prefix_k ? in->prefix_k->mem : NULL;
    a->q_half = p->q_half;
    a->k_half = p->k_half;
    a->pk_half = p->pk_half;
    a->qs = p->q;
    a->kvs = p->kv;
    a->ps = p->prefix;
    a->head = params->head;
    a->has_dim = p->dim_factor != NULL;
    a->items = params->items;
}

/* Writes the 25 common arguments from index 0 of args. */
static size_t row_args_fill(const row_args *a, pfx_arg *args)
{
    size_t n = 0;
    args[n++] = PFX_ARG(a->B);
    args[n++] = PFX_ARG(a->H);
    args[n++] = PFX_ARG(a->group);
    args[n++] = PFX_ARG(a->N);
    args[n++] = PFX_ARG(a->M);
    args[n++] = PFX_ARG(a->P);
    args[n++] = PFX_ARG(a->D);
    args[n++] = PFX_ARG(a->causal);
    args[n++] = PFX_ARG(a->q);
    args[n++] = PFX_ARG(a->q_half);
    args[n++] = PFX_ARG(a->qs.batch);
    args[n++] = PFX_ARG(a->qs.head);
    args[n++] = PFX_ARG(a->qs.row);
    args[n++] = PFX_ARG(a->k);
    args[n++] = PFX_ARG(a->k_half);
    args[n++] = PFX_ARG(a->kvs.batch);
    args[n++] = PFX_ARG(a->kvs.head);
    args[n++] = PFX_ARG(a->kvs.row);
    args[n++] = PFX_ARG(a->pk);
    args[n++] = PFX_ARG(a->pk_half);
    args[n++] = PFX_ARG(a->ps.batch);
    args[n++] = PFX_ARG(a->ps.head);
    args[n++] = PFX_ARG(a->ps.row);
    args[n++] = PFX_ARG(a->head);
    args[n++] = PFX_ARG(a->has_dim);
    args[n++] = PFX_ARG(a->items);
    return n;
}

/* The kernels index with 32-bit row and column counts. */
static pfx_status check_limits(pfx_runtime *rt, const char *op, const pfx_attn_problem *p)
{
    const size_t lim = (size_t)1 << 31;
    if (p->B >= lim || p->H >= lim || p->N >= lim || p->M >= lim || p->P >= lim || p->D >= lim ||
        p->P + p->M >= lim || p->B * p->H >= lim)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "%s: a dimension exceeds 2^31", op);
    return PFX_SUCCESS;
}

pfx_status pfx_attention_stats(pfx_runtime *rt, const pfx_attention_desc *desc,
                               const pfx_attention_inputs *in, unsigned top_k, pfx_tensor *entropy,
                               pfx_tensor *topk_mass, pfx_tensor *prefix_mass)
{
    static const char op[] = "pfx_attention_stats";
    pfx_attn_problem p;
    pfx_status st = pfx_attn_problem_init(rt, op, desc, in, &p);
    if (st != PFX_SUCCESS)
        return st;
    if ((st = pfx_attn_problem_forward_only(rt, op, &p)) ||
        (st = pfx_attn_problem_no_dropout(rt, op, &p))) {
        pfx_attn_problem_free(&p);
        return st;
    }

    pfx_tensor *outs[3] = { entropy, topk_mass, prefix_mass };
    const char *out_names[3] = { "entropy", "topk_mass", "prefix_mass" };
    const pfx_tensor *others[7] = { in->q, in->k, in->v, in->prefix_k, in->prefix_v, NULL, NULL };
    const char *other_names[7] = { "in.q", "in.k", "in.v", "in.prefix_k", "in.prefix_v", "", "" };
    if (top_k < 1 || top_k > STATS_TOPK_MAX) {
        st = pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: top_k (%u) is not in [1, %d]", op,
                       top_k, STATS_TOPK_MAX);
        goto done;
    }
    if (!entropy && !topk_mass && !prefix_mass) {
        st = pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                       "%s: entropy, topk_mass and prefix_mass are all NULL", op);
        goto done;
    }
    for (int o = 0; o < 3 && st == PFX_SUCCESS; o++) {
        if (!outs[o])
            continue;
        st = pfx_attn_check_tensor(rt, op, &p, outs[o], out_names[o], PFX_ATTN_PER_HEAD, true);
        if (st == PFX_SUCCESS) {
            /* The inputs, then the other outputs. */
            size_t n = 5;
            for (int x = 0; x < 3; x++)
                if (x != o && outs[x]) {
                    others[n] = outs[x];
                    other_names[n++] = out_names[x];
                }
            st = pfx_attn_check_alias(rt, op, outs[o], out_names[o], others, other_names, n);
        }
    }
    if (st == PFX_SUCCESS)
        st = check_limits(rt, op, &p);
    if (st != PFX_SUCCESS)
        goto done;

    cl_kernel rows_k, reduce_k;
    const char *options = ""; /* cl/attention_stats.cl has no tunables */
    if ((st = pfx_kernel_get(rt, STATS_PROGRAM, options, "pfx_attn_stats_rows", &rows_k)) ||
        (st = pfx_kernel_get(rt, STATS_PROGRAM, options, "pfx_attn_stats_reduce", &reduce_k)))
        goto done;

    size_t rows_count = p.B * p.H * p.N, rows_bytes;
    if (pfx_mul_overflows(rows_count, 4 * sizeof(float), &rows_bytes)) {
        st = pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "%s: workspace size overflows", op);
        goto done;
    }
    pfx_attn_params params;
    if ((st = pfx_attn_params_upload(rt, &p, &params)))
        goto done;
    cl_mem rows = NULL;
    if ((st = pfx_workspace_get(rt, PFX_WS_TMP0, rows_bytes, &rows))) {
        pfx_attn_params_release(rt, &params);
        goto done;
    }

    row_args a;
    row_args_init(&a, &p, in, &params);
    cl_int k_arg = (cl_int)top_k;
    pfx_arg args[32];
    size_t n = row_args_fill(&a, args);
    args[n++] = PFX_ARG(k_arg);
    args[n++] = PFX_ARG(rows);
    size_t local[2] = { STATS_ROW_WG, 1 };
    if (p.N < STATS_ROW_WG)
        local[0] = p.N;
    size_t global[2] = { pfx_ceil_div(p.N, local[0]) * local[0], p.B * p.H };
    st = pfx_launch(rt, rows_k, "pfx_attention_stats rows", 2, global, local, n, args);

    if (st == PFX_SUCCESS) {
        cl_uint per_head = (cl_uint)(p.B * p.N);
        cl_mem dummy = rows; /* bound where an output is not wanted, never written */
        cl_mem e = entropy ? entropy->mem : dummy, t = topk_mass ? topk_mass->mem : dummy,
               pm = prefix_mass ? prefix_mass->mem : dummy;
        cl_int we = entropy != NULL, wt = topk_mass != NULL, wp = prefix_mass != NULL;
        pfx_arg rargs[] = { PFX_ARG(per_head), PFX_ARG(rows), PFX_ARG(e),  PFX_ARG(we),
                            PFX_ARG(t),        PFX_ARG(wt),   PFX_ARG(pm), PFX_ARG(wp) };
        size_t rl = STATS_REDUCE_WG, rg = p.H * STATS_REDUCE_WG;
        st = pfx_launch(rt, reduce_k, "pfx_attention_stats reduce", 1, &rg, &rl,
                        sizeof(rargs) / sizeof(rargs[0]), rargs);
    }
    pfx_attn_params_release(rt, &params);
done:
    pfx_attn_problem_free(&p);
    return st;
}

pfx_status pfx_gain_softmax_probs(pfx_runtime *rt, const pfx_attention_desc *desc,
                                  const pfx_attention_inputs *in, size_t item, size_t head,
                                  pfx_tensor *probs)
{
    static const char op[] = "pfx_gain_softmax_probs";
    pfx_attn_problem p;
    pfx_status st = pfx_attn_problem_init(rt, op, desc, in, &p);
    if (st != PFX_SUCCESS)
        return st;
    if ((st = pfx_attn_problem_forward_only(rt, op, &p)) ||
        (st = pfx_attn_problem_no_dropout(rt, op, &p))) {
        pfx_attn_problem_free(&p);
        return st;
    }
    if (item >= p.B) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: item (%zu) is not below batch (%zu)", op,
                       item, p.B);
        goto done;
    }
    if (head >= p.H) {
        st = pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: head (%zu) is not below heads (%zu)", op,
                       head, p.H);
        goto done;
    }
    if (!probs) {
        st = pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: probs is NULL", op);
        goto done;
    }
    if (probs->rt != rt) {
        st = pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: probs belongs to another runtime", op);
        goto done;
    }
    if (probs->dtype != PFX_DTYPE_F32) {
        st = pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: probs must be float32", op);
        goto done;
    }
    if (probs->ndim != 2 || probs->shape[0] != p.N || probs->shape[1] != p.P + p.M) {
        char got[96];
        pfx_shape_text(got, sizeof(got), probs->ndim, probs->shape);
        st = pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                       "%s: probs has shape %s, expected [N, P + M] = [%zu, %zu]", op, got, p.N,
                       p.P + p.M);
        goto done;
    }
    const pfx_tensor *others[5] = { in->q, in->k, in->v, in->prefix_k, in->prefix_v };
    const char *other_names[5] = { "in.q", "in.k", "in.v", "in.prefix_k", "in.prefix_v" };
    if ((st = pfx_attn_check_alias(rt, op, probs, "probs", others, other_names, 5)) ||
        (st = check_limits(rt, op, &p)))
        goto done;

    cl_kernel lse_k, map_k;
    const char *options = ""; /* cl/attention_stats.cl has no tunables */
    if ((st = pfx_kernel_get(rt, STATS_PROGRAM, options, "pfx_attn_probs_lse", &lse_k)) ||
        (st = pfx_kernel_get(rt, STATS_PROGRAM, options, "pfx_attn_probs_map", &map_k)))
        goto done;

    pfx_attn_params params;
    if ((st = pfx_attn_params_upload(rt, &p, &params)))
        goto done;
    size_t lse_bytes = 2 * p.N * sizeof(float); /* (row max, log sum) pairs */
    cl_mem lse = NULL;
    if ((st = pfx_workspace_get(rt, PFX_WS_TMP0, lse_bytes, &lse))) {
        pfx_attn_params_release(rt, &params);
        goto done;
    }
    row_args a;
    row_args_init(&a, &p, in, &params);
    cl_uint b = (cl_uint)item, h = (cl_uint)head;
    pfx_arg args[32];
    size_t n = 0;
    args[n++] = PFX_ARG(b);
    args[n++] = PFX_ARG(h);
    n += row_args_fill(&a, args + n);
    args[n++] = PFX_ARG(lse);
    size_t local = p.N < 64 ? p.N : 64, global = pfx_ceil_div(p.N, local) * local;
    st = pfx_launch(rt, lse_k, "pfx_gain_softmax_probs lse", 1, &global, &local, n, args);
    if (st == PFX_SUCCESS) {
        args[n++] = PFX_ARG(probs->mem);
        size_t cols = p.P + p.M;
        size_t local2[2] = { cols < 16 ? cols : 16, p.N < 4 ? p.N : 4 };
        size_t global2[2] = { pfx_ceil_div(cols, local2[0]) * local2[0],
                              pfx_ceil_div(p.N, local2[1]) * local2[1] };
        st = pfx_launch(rt, map_k, "pfx_gain_softmax_probs map", 2, global2, local2, n, args);
    }
    pfx_attn_params_release(rt, &params);
done:
    pfx_attn_problem_free(&p);
    return st;
}
