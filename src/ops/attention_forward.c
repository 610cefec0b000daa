/* pfx_attention_forward: validation, tile choice, split-K and enqueue of
 * cl/attention_fwd.cl. */
#include <stdio.h>
#include <string.h>

#include "attention_fwd.h" /* cl/: the kernel's argument struct and flags */
#include "attention_problem.h"
#include "attention_tuning.h"

#define OP "attention_forward"

pfx_status pfx_attention_forward(pfx_runtime *rt, const pfx_attention_desc *desc,
                                 const pfx_attention_inputs *in, pfx_tensor *o, pfx_tensor *lse)
{
    pfx_attn_problem p;
    pfx_status st = pfx_attn_problem_init(rt, OP, desc, in, &p);
    if (st != PFX_SUCCESS)
        return st;

    const pfx_tensor *inputs[] = { in->q, in->k, in->v, in->prefix_k, in->prefix_v };
    const char *input_names[] = { "in.q", "in.k", "in.v", "in.prefix_k", "in.prefix_v" };
    if ((st = pfx_attn_check_tensor(rt, OP, &p, o, "o", PFX_ATTN_LIKE_O, false)) ||
        (lse && (st = pfx_attn_check_tensor(rt, OP, &p, lse, "lse", PFX_ATTN_LSE, true))) ||
        (st = pfx_attn_check_alias(rt, OP, o, "o", inputs, input_names, 5)))
        goto done;
    if (lse) {
        const pfx_tensor *all[] = { in->q, in->k, in->v, in->prefix_k, in->prefix_v, o };
        const char *all_names[] = { "in.q", "in.k", "in.v", "in.prefix_k", "in.prefix_v", "o" };
        if ((st = pfx_attn_check_alias(rt, OP, lse, "lse", all, all_names, 6)))
            goto done;
    }

    /* Sizes the kernel indexes with int. */
    const size_t R = p.group * p.N;
    if (p.P + p.M > (size_t)INT32_MAX / 2 || R > (size_t)INT32_MAX / 2 || p.B > (size_t)INT32_MAX ||
        p.H > (size_t)INT32_MAX) {
        st = pfx_error(rt, PFX_ERROR_UNSUPPORTED, "%s: the problem is too large for 32-bit indices",
                       OP);
        goto done;
    }

    pfx_attn_fwd_tiles t;
    if ((st = pfx_attn_fwd_select(rt, OP, p.D, R, &t)))
        goto done;
    const size_t wg = pfx_attn_fwd_wg_size(&t);

    char options[PFX_OPTIONS_MAX];
    pfx_attn_fwd_options(&t, options, sizeof(options));
    pfx_attn_dropout_option(&p, options, sizeof(options));
    cl_kernel kernel, merge = NULL;
    if ((st = pfx_kernel_get(rt, "attention_fwd", options, "pfx_attn_fwd", &kernel)))
        goto done;

    const size_t row_tiles = pfx_ceil_div(R, t.block_m);
    size_t keys_per_split;
    const size_t splits =
        pfx_attn_fwd_splits(pfx_attn_tuning_lookup(rt->vendor, &rt->info, NULL),
                            rt->info.compute_units, &t, p.B, p.Hkv, R, p.P + p.M, &keys_per_split);
    if (splits > 1 &&
        (st = pfx_kernel_get(rt, "attention_fwd", options, "pfx_attn_fwd_merge", &merge)))
        goto done;

    pfx_attn_params params;
    if ((st = pfx_attn_params_upload(rt, &p, &params)))
        goto done;

    cl_mem part_ml = NULL, part_acc = NULL;
    size_t ml_bytes = 0, acc_bytes = 0;
    const size_t rows_total = p.B * p.Hkv * R;
    if (splits > 1) {
        ml_bytes = rows_total * splits * 2 * sizeof(float);
        acc_bytes = rows_total * splits * p.D * sizeof(float);
        if ((st = pfx_workspace_get(rt, PFX_WS_TMP0, ml_bytes, &part_ml)) ||
            (st = pfx_workspace_get(rt, PFX_WS_TMP1, acc_bytes, &part_acc)))
            goto release;
    }

    {
        pfx_attn_dims dims = { (cl_int)p.B, (cl_int)p.H, (cl_int)p.Hkv,   (cl_int)p.N, (cl_int)p.M,
                               (cl_int)p.P, (cl_int)p.D, (cl_int)p.group, (cl_int)R };
        cl_int causal = p.causal, has_dg = p.dim_factor != NULL, has_lse = lse != NULL;
        cl_int flags =
            (p.q_half ? HALF_Q : 0) | (p.k_half ? HALF_K : 0) | (p.v_half ? HALF_V : 0) |
            (p.pk_half ? HALF_PK : 0) | (p.pv_half ? HALF_PV : 0) |
            (o->dtype == PFX_DTYPE_F16 ? HALF_O : 0) |
            ((p.q_bf16 ? HALF_Q : 0) | (p.k_bf16 ? HALF_K : 0) | (p.v_bf16 ? HALF_V : 0) |
             (p.pk_bf16 ? HALF_PK : 0) | (p.pv_bf16 ? HALF_PV : 0))
                << BF16_SHIFT;
        cl_int splits_i = (cl_int)splits, kps = (cl_int)keys_per_split;
        cl_mem pk = in->prefix_k ? in->prefix_k->mem : NULL;
        cl_mem pv = in->prefix_v ? in->prefix_v->mem : NULL;
        cl_mem lse_mem = lse ? lse->mem : NULL;
        const pfx_attn_drop_args drop = pfx_attn_drop_args_of(&p);
        pfx_arg args[] = {
            PFX_ARG(in->q->mem),
            PFX_ARG(in->k->mem),
            PFX_ARG(in->v->mem),
            PFX_ARG(pk),
            PFX_ARG(pv),
            PFX_ARG(o->mem),
            PFX_ARG(lse_mem),
            PFX_ARG(params.head),
            PFX_ARG(params.items),
            PFX_ARG(part_ml),
            PFX_ARG(part_acc),
            PFX_ARG(dims),
            PFX_ARG(causal),
            PFX_ARG(has_dg),
            PFX_ARG(has_lse),
            PFX_ARG(flags),
            PFX_ARG(splits_i),
            PFX_ARG(kps),
            PFX_ARG(p.q.batch),
            PFX_ARG(p.q.head),
            PFX_ARG(p.q.row),
            PFX_ARG(p.kv.batch),
            PFX_ARG(p.kv.head),
            PFX_ARG(p.kv.row),
            PFX_ARG(p.o.batch),
            PFX_ARG(p.o.head),
            PFX_ARG(p.o.row),
            PFX_ARG(p.prefix.batch),
            PFX_ARG(p.prefix.head),
            PFX_ARG(params.head_item_stride),
            PFX_ARG(drop.stream),
            PFX_ARG(drop.threshold),
            PFX_ARG(drop.scale),
            PFX_ARG(drop.first_item),
            PFX_ARG(drop.on),
        };
        size_t global[3] = { row_tiles * splits * wg, p.Hkv, p.B };
        size_t local[3] = { wg, 1, 1 };
        st = pfx_launch(rt, kernel, OP, 3, global, local, sizeof(args) / sizeof(args[0]), args);
        if (st == PFX_SUCCESS && splits > 1) {
            pfx_arg margs[] = {
                PFX_ARG(part_ml),      PFX_ARG(part_acc),  PFX_ARG(o->mem),   PFX_ARG(lse_mem),
                PFX_ARG(params.items), PFX_ARG(dims),      PFX_ARG(has_lse),  PFX_ARG(flags),
                PFX_ARG(splits_i),     PFX_ARG(p.o.batch), PFX_ARG(p.o.head), PFX_ARG(p.o.row),
            };
            size_t mlocal[2] = { 32, 4 };
            size_t mglobal[2] = { pfx_ceil_div(p.D, 32) * 32, pfx_ceil_div(rows_total, 4) * 4 };
            st = pfx_launch(rt, merge, OP " (split-K merge)", 2, mglobal, mlocal,
                            sizeof(margs) / sizeof(margs[0]), margs);
        }
    }

release:
    pfx_attn_params_release(rt, &params); /* the split-K partials are workspace too */
done:
    pfx_attn_problem_free(&p);
    return st;
}
