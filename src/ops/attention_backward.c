/* Attention backward (cl/attention_bwd.cl); see include/prefixcl/attention.h
 * and docs/design.md "The math" (backward part). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "attention_problem.h"
#include "attention_tuning.h"

#define OP "attention_backward"

static pfx_status validate(pfx_runtime *rt, const pfx_attention_desc *desc,
                           const pfx_attention_inputs *in, const pfx_tensor *o,
                           const pfx_tensor *lse, const pfx_tensor *d_o,
                           const pfx_attention_grads *g, pfx_attn_problem *p,
                           pfx_attn_bwd_tiles *tiles)
{
    pfx_status st;
    if ((st = pfx_attn_check_tensor(rt, OP, p, o, "o", PFX_ATTN_LIKE_O, false)) ||
        (st = pfx_attn_check_tensor(rt, OP, p, lse, "lse", PFX_ATTN_LSE, true)) ||
        (st = pfx_attn_check_tensor(rt, OP, p, d_o, "d_o", PFX_ATTN_LIKE_O, false)))
        return st;
    if (!g)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: grads is NULL", OP);
    if (!g->dq && !g->dk && !g->dv && !g->dprefix_k && !g->dprefix_v && !g->dgain && !g->ddim_gain)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: grads requests no gradient (every output is NULL)", OP);
    if (p->P == 0 && (g->dprefix_k || g->dprefix_v))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: grads.%s is given but desc.prefix_len is 0", OP,
                         g->dprefix_k ? "dprefix_k" : "dprefix_v");
    if (g->ddim_gain && !desc->dim_gain)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: grads.ddim_gain is given but desc.dim_gain is NULL", OP);
    const struct {
        const pfx_tensor *t;
        const char *name;
        pfx_attn_role role;
    } outs[] = {
        { g->dq, "grads.dq", PFX_ATTN_LIKE_Q },
        { g->dk, "grads.dk", PFX_ATTN_LIKE_KV },
        { g->dv, "grads.dv", PFX_ATTN_LIKE_KV },
        { g->dprefix_k, "grads.dprefix_k", PFX_ATTN_LIKE_PREFIX },
        { g->dprefix_v, "grads.dprefix_v", PFX_ATTN_LIKE_PREFIX },
        { g->dgain, "grads.dgain", PFX_ATTN_PER_HEAD },
        { g->ddim_gain, "grads.ddim_gain", PFX_ATTN_PER_HEAD_DIM },
    };
    enum { NOUT = sizeof(outs) / sizeof(outs[0]), NIN = 8 };
    const pfx_tensor *all[NIN + NOUT] = { in->q,        in->k, in->v, in->prefix_k,
                                          in->prefix_v, o,     lse,   d_o };
    const char *names[NIN + NOUT] = { "in.q",        "in.k", "in.v", "in.prefix_k",
                                      "in.prefix_v", "o",    "lse",  "d_o" };
    for (size_t i = 0; i < NOUT; i++) {
        all[NIN + i] = outs[i].t;
        names[NIN + i] = outs[i].name;
    }
    for (size_t i = 0; i < NOUT; i++) {
        if (!outs[i].t)
            continue;
        if ((st = pfx_attn_check_tensor(rt, OP, p, outs[i].t, outs[i].name, outs[i].role, true)))
            return st;
        /* against every input and the outputs before it */
        if ((st = pfx_attn_check_alias(rt, OP, outs[i].t, outs[i].name, all, names, NIN + i)))
            return st;
    }
    /* int indexing in the kernels */
    if (p->B * p->H * p->N > INT_MAX || p->M > INT_MAX || p->P > INT_MAX)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                         "%s: B * H * N = %zu rows is beyond the kernels' 32-bit indexing", OP,
                         p->B * p->H * p->N);
    return pfx_attn_bwd_select(rt, OP, p->D, tiles);
}

typedef struct bwd_workspace {
    pfx_attn_params params;
    cl_mem delta, dpk_part, dpv_part, gain_part, dscale, dq_part;
    size_t delta_bytes, part_bytes, gain_bytes, dscale_bytes, dq_part_bytes;
} bwd_workspace;

/* The CPU path computes dK/dV and dQ in one pass over the keys when both
 * are wanted (5 tile products per tile pair instead of the two kernels' 7):
 * one work-item per (item, kv head, chunk of key tiles), each with its own
 * dQraw partial of B * H * N * HEAD_DIM floats. Chunks: enough work-items
 * for 4 per compute unit, at most the key tiles, and partials of at most
 * 256 MiB in all (at least one chunk). */
#define SINGLE_PASS_ITEMS_PER_CU  4
#define SINGLE_PASS_PARTIAL_BYTES ((size_t)256 << 20)

static size_t single_pass_chunks(const pfx_runtime *rt, const pfx_attn_problem *p, size_t key_tiles,
                                 size_t partial_bytes)
{
    size_t want = SINGLE_PASS_ITEMS_PER_CU * (rt->info.compute_units ? rt->info.compute_units : 1);
    size_t chunks = pfx_ceil_div(want, p->B * p->Hkv);
    if (chunks > key_tiles)
        chunks = key_tiles;
    if (chunks * partial_bytes > SINGLE_PASS_PARTIAL_BYTES)
        chunks = SINGLE_PASS_PARTIAL_BYTES / partial_bytes;
    return chunks ? chunks : 1;
}

static void workspace_release(pfx_runtime *rt, bwd_workspace *w)
{
    pfx_attn_params_release(rt, &w->params); /* every buffer here is the runtime's workspace */
    memset(w, 0, sizeof(*w));
}

static cl_mem mem_of(const pfx_tensor *t)
{
    return t ? t->mem : NULL;
}

/* The leading arguments of the dK/dV and dQ kernels (the same in both, in
 * this order), from the locals of enqueue(). */
#define SHARED_ARGS                                                                                \
    PFX_ARG(B), PFX_ARG(H), PFX_ARG(Hkv), PFX_ARG(N), PFX_ARG(M), PFX_ARG(P), PFX_ARG(D),          \
        PFX_ARG(causal), PFX_ARG(q), PFX_ARG(q_half), PFX_ARG(p->q.batch), PFX_ARG(p->q.head),     \
        PFX_ARG(p->q.row), PFX_ARG(k), PFX_ARG(k_half), PFX_ARG(v), PFX_ARG(v_half),               \
        PFX_ARG(p->kv.batch), PFX_ARG(p->kv.head), PFX_ARG(p->kv.row), PFX_ARG(pk),                \
        PFX_ARG(pk_half), PFX_ARG(pv), PFX_ARG(pv_half), PFX_ARG(p->prefix.batch),                 \
        PFX_ARG(p->prefix.head), PFX_ARG(p->prefix.row), PFX_ARG(dom), PFX_ARG(do_half),           \
        PFX_ARG(p->o.batch), PFX_ARG(p->o.head), PFX_ARG(p->o.row), PFX_ARG(lsem),                 \
        PFX_ARG(w->delta), PFX_ARG(w->params.head), PFX_ARG(structured), PFX_ARG(w->params.items), \
        PFX_ARG(drop.stream), PFX_ARG(drop.threshold), PFX_ARG(drop.scale),                        \
        PFX_ARG(drop.first_item), PFX_ARG(drop.on)

static pfx_status enqueue(pfx_runtime *rt, const pfx_attn_problem *p,
                          const pfx_attention_inputs *in, const pfx_tensor *o,
                          const pfx_tensor *lse, const pfx_tensor *d_o,
                          const pfx_attention_grads *g, const pfx_attn_bwd_tiles *tiles,
                          bwd_workspace *w)
{
    char options[PFX_OPTIONS_MAX];
    pfx_attn_bwd_options(tiles, options, sizeof(options));
    pfx_attn_dropout_option(p, options, sizeof(options));
    cl_kernel k_delta, k_dkv, k_dq, k_prefix, k_gain, k_dkvq = NULL, k_finish = NULL;
    pfx_status st;
    if ((st = pfx_kernel_get(rt, "attention_bwd", options, "pfx_attn_bwd_delta", &k_delta)) ||
        (st = pfx_kernel_get(rt, "attention_bwd", options, "pfx_attn_bwd_dkv", &k_dkv)) ||
        (st = pfx_kernel_get(rt, "attention_bwd", options, "pfx_attn_bwd_dq", &k_dq)) ||
        (st = pfx_kernel_get(rt, "attention_bwd", options, "pfx_attn_bwd_prefix_reduce",
                             &k_prefix)) ||
        (st = pfx_kernel_get(rt, "attention_bwd", options, "pfx_attn_bwd_gain_reduce", &k_gain)))
        return st;

    bool want_prefix = g->dprefix_k || g->dprefix_v;
    bool want_kv = g->dk || g->dv;
    bool want_gain = g->dgain || g->ddim_gain;
    bool want_q = g->dq || want_gain;
    bool single_pass = tiles->vec > 1 && want_q && (want_kv || want_prefix);
    size_t ntq = pfx_ceil_div(p->N, tiles->block_m);
    if (single_pass &&
        ((st = pfx_kernel_get(rt, "attention_bwd", options, "pfx_attn_bwd_dkvq", &k_dkvq)) ||
         (st = pfx_kernel_get(rt, "attention_bwd", options, "pfx_attn_bwd_dq_finish", &k_finish))))
        return st;

    if ((st = pfx_attn_params_upload(rt, p, &w->params)))
        return st;
    w->delta_bytes = p->B * p->H * p->N * sizeof(float);
    if ((st = pfx_workspace_get(rt, PFX_WS_TMP0, w->delta_bytes, &w->delta)))
        return st;
    w->part_bytes = p->B * p->Hkv * p->P * p->D * sizeof(float);
    if (g->dprefix_k && (st = pfx_workspace_get(rt, PFX_WS_TMP1, w->part_bytes, &w->dpk_part)))
        return st;
    if (g->dprefix_v && (st = pfx_workspace_get(rt, PFX_WS_TMP2, w->part_bytes, &w->dpv_part)))
        return st;
    if (want_gain) {
        w->gain_bytes = p->H * p->B * ntq * p->D * sizeof(float);
        w->dscale_bytes = p->H * sizeof(float);
        if ((st = pfx_workspace_get(rt, PFX_WS_TMP3, w->gain_bytes, &w->gain_part)) ||
            (st = pfx_attn_dscale(rt, p, w->dscale_bytes, &w->dscale)))
            return st;
    }

    cl_int B = (cl_int)p->B, H = (cl_int)p->H, Hkv = (cl_int)p->Hkv, N = (cl_int)p->N,
           M = (cl_int)p->M, P = (cl_int)p->P, D = (cl_int)p->D, causal = p->causal;
    cl_int q_half = p->q_half, k_half = p->k_half, v_half = p->v_half, pk_half = p->pk_half,
           pv_half = p->pv_half;
    cl_int o_half = o->dtype == PFX_DTYPE_F16, do_half = d_o->dtype == PFX_DTYPE_F16;
    cl_int structured = p->dim_factor != NULL, accumulate = g->accumulate;
    cl_mem q = in->q->mem, k = in->k->mem, v = in->v->mem, pk = mem_of(in->prefix_k),
           pv = mem_of(in->prefix_v), om = o->mem, dom = d_o->mem, lsem = lse->mem;
    cl_mem dq = mem_of(g->dq), dk = mem_of(g->dk), dv = mem_of(g->dv);
    cl_mem dpk = mem_of(g->dprefix_k), dpv = mem_of(g->dprefix_v);
    cl_mem dgain = mem_of(g->dgain), ddim = mem_of(g->ddim_gain);
    const pfx_attn_drop_args drop = pfx_attn_drop_args_of(p);

    /* Delta */
    {
        size_t local = 64, global = pfx_ceil_div(p->B * p->H * p->N, local) * local;
        pfx_arg args[] = { PFX_ARG(B),         PFX_ARG(H),        PFX_ARG(N),
                           PFX_ARG(D),         PFX_ARG(om),       PFX_ARG(o_half),
                           PFX_ARG(dom),       PFX_ARG(do_half),  PFX_ARG(p->o.batch),
                           PFX_ARG(p->o.head), PFX_ARG(p->o.row), PFX_ARG(w->delta) };
        if ((st = pfx_launch(rt, k_delta, OP ": delta", 1, &global, &local,
                             sizeof(args) / sizeof(args[0]), args)))
            return st;
    }

    cl_int prefix_tiles = (cl_int)pfx_ceil_div(p->P, tiles->block_n);
    cl_int input_tiles = (cl_int)pfx_ceil_div(p->M, tiles->block_n);
    if (single_pass) {
        /* every key tile: dQ needs the prefix keys and the input keys */
        cl_int all_tiles = prefix_tiles + input_tiles;
        size_t partial = p->B * p->H * p->N * tiles->head_dim * sizeof(float);
        size_t chunks = single_pass_chunks(rt, p, (size_t)all_tiles, partial);
        cl_int nchunks = (cl_int)chunks;
        w->dq_part_bytes = chunks * partial;
        if ((st = pfx_workspace_get(rt, PFX_WS_TMP4, w->dq_part_bytes, &w->dq_part)))
            return st;
        size_t local[2] = { 1, 1 };
        size_t global[2] = { chunks, p->B * p->Hkv };
        pfx_arg args[] = {
            SHARED_ARGS,           PFX_ARG(dk),          PFX_ARG(dv),
            PFX_ARG(accumulate),   PFX_ARG(w->dpk_part), PFX_ARG(w->dpv_part),
            PFX_ARG(prefix_tiles), PFX_ARG(all_tiles),   PFX_ARG(w->dq_part),
        };
        if ((st = pfx_launch(rt, k_dkvq, OP ": dK/dV/dQ", 2, global, local,
                             sizeof(args) / sizeof(args[0]), args)))
            return st;
        size_t fglobal[2] = { ntq, p->B * p->H };
        pfx_arg fargs[] = {
            PFX_ARG(B),
            PFX_ARG(H),
            PFX_ARG(N),
            PFX_ARG(D),
            PFX_ARG(q),
            PFX_ARG(q_half),
            PFX_ARG(p->q.batch),
            PFX_ARG(p->q.head),
            PFX_ARG(p->q.row),
            PFX_ARG(w->params.head),
            PFX_ARG(structured),
            PFX_ARG(w->params.items),
            PFX_ARG(w->dq_part),
            PFX_ARG(nchunks),
            PFX_ARG(dq),
            PFX_ARG(accumulate),
            PFX_ARG(w->gain_part),
        };
        if ((st = pfx_launch(rt, k_finish, OP ": dQ sum", 2, fglobal, local,
                             sizeof(fargs) / sizeof(fargs[0]), fargs)))
            return st;
    }

    if (!single_pass && (want_kv || want_prefix)) {
        cl_int tile_offset = want_prefix ? 0 : prefix_tiles;
        size_t count =
            (size_t)(want_kv ? prefix_tiles + input_tiles : prefix_tiles) - (size_t)tile_offset;
        size_t local[2] = { pfx_attn_bwd_wg_dkv(tiles), 1 };
        size_t global[2] = { count * local[0], p->B * p->Hkv };
        pfx_arg args[] = {
            SHARED_ARGS,          PFX_ARG(dk),          PFX_ARG(dv),          PFX_ARG(accumulate),
            PFX_ARG(w->dpk_part), PFX_ARG(w->dpv_part), PFX_ARG(tile_offset), PFX_ARG(prefix_tiles),
        };
        if (count && (st = pfx_launch(rt, k_dkv, OP ": dK/dV", 2, global, local,
                                      sizeof(args) / sizeof(args[0]), args)))
            return st;
    }

    if (!single_pass && want_q) {
        size_t local[2] = { pfx_attn_bwd_wg_dq(tiles), 1 };
        size_t global[2] = { ntq * local[0], p->B * p->H };
        pfx_arg args[] = {
            SHARED_ARGS,
            PFX_ARG(dq),
            PFX_ARG(accumulate),
            PFX_ARG(w->gain_part),
        };
        if ((st = pfx_launch(rt, k_dq, OP ": dQ", 2, global, local, sizeof(args) / sizeof(args[0]),
                             args)))
            return st;
    }

    if (want_prefix) {
        cl_ulong per_entry = (cl_ulong)p->Hkv * p->P * p->D;
        size_t entries = p->bank_entries ? p->bank_entries : 1;
        cl_ulong total = per_entry * entries;
        cl_int bank = p->bank_entries != 0;
        size_t local = 64, global = pfx_ceil_div((size_t)total, local) * local;
        const struct {
            cl_mem part, out;
        } pv_pairs[2] = { { w->dpk_part, dpk }, { w->dpv_part, dpv } };
        for (int i = 0; i < 2; i++) {
            if (!pv_pairs[i].out)
                continue;
            pfx_arg args[] = { PFX_ARG(B),
                               PFX_ARG(per_entry),
                               PFX_ARG(total),
                               PFX_ARG(bank),
                               PFX_ARG(w->params.items),
                               PFX_ARG(pv_pairs[i].part),
                               PFX_ARG(pv_pairs[i].out),
                               PFX_ARG(accumulate) };
            if ((st = pfx_launch(rt, k_prefix, OP ": prefix reduction", 1, &global, &local,
                                 sizeof(args) / sizeof(args[0]), args)))
                return st;
        }
    }

    if (want_gain) {
        cl_int parts = (cl_int)(p->B * ntq);
        size_t local = 64, global = p->H * local;
        pfx_arg args[] = { PFX_ARG(H),
                           PFX_ARG(D),
                           PFX_ARG(parts),
                           PFX_ARG(w->gain_part),
                           PFX_ARG(w->params.head),
                           PFX_ARG(structured),
                           PFX_ARG(w->dscale),
                           PFX_ARG(dgain),
                           PFX_ARG(ddim),
                           PFX_ARG(accumulate) };
        if ((st = pfx_launch(rt, k_gain, OP ": gain reduction", 1, &global, &local,
                             sizeof(args) / sizeof(args[0]), args)))
            return st;
    }
    return PFX_SUCCESS;
}

pfx_status pfx_attention_backward(pfx_runtime *rt, const pfx_attention_desc *desc,
                                  const pfx_attention_inputs *in, const pfx_tensor *o,
                                  const pfx_tensor *lse, const pfx_tensor *d_o,
                                  const pfx_attention_grads *grads)
{
    pfx_attn_problem p;
    pfx_status st = pfx_attn_problem_init(rt, OP, desc, in, &p);
    if (st != PFX_SUCCESS)
        return st;
    if ((st = pfx_attn_problem_forward_only(rt, OP, &p))) {
        pfx_attn_problem_free(&p);
        return st;
    }
    pfx_attn_bwd_tiles tiles;
    st = validate(rt, desc, in, o, lse, d_o, grads, &p, &tiles);
    if (st == PFX_SUCCESS) {
        bwd_workspace w;
        memset(&w, 0, sizeof(w));
        st = enqueue(rt, &p, in, o, lse, d_o, grads, &tiles, &w);
        /* released while the queue may still run: OpenCL keeps a buffer alive
         * until the commands using it have finished */
        workspace_release(rt, &w);
    }
    pfx_attn_problem_free(&p);
    return st;
}
