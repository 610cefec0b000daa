/* Token embeddings (+ learned positions), forward only (cl/embedding.cl). */
#include "model_args.h"

#define EMB_LOCAL 64

pfx_status pfx_op_embedding(pfx_runtime *rt, const pfx_ids *ids, size_t batch, size_t tokens,
                            pfx_mat wte, const pfx_mat *wpe, size_t pos0, pfx_mat out)
{
    const char *op = "embedding";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "wte", &wte, PFX_MAT_WEIGHT)) ||
        (st = pfx_mat_check(rt, op, "out", &out, PFX_MAT_F32)) ||
        (st = pfx_mat_check_alias(rt, op, "out", &out, "wte", &wte, false)))
        return st;
    size_t rows;
    if (batch == 0 || tokens == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: batch %zu and tokens %zu must be >= 1",
                         op, batch, tokens);
    if (pfx_mul_overflows(batch, tokens, &rows))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "%s: batch * tokens overflows", op);
    if (out.rows != rows || out.cols != wte.cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: out is %zu x %zu, expected [batch * tokens = %zu, C = %zu]", op,
                         out.rows, out.cols, rows, wte.cols);
    if ((st = pfx_ids_check(rt, op, "ids", ids, 0, rows, wte.rows, false, NULL)))
        return st;
    if (wpe) {
        if ((st = pfx_mat_check(rt, op, "wpe", wpe, PFX_MAT_WEIGHT)) ||
            (st = pfx_mat_check_alias(rt, op, "out", &out, "wpe", wpe, false)))
            return st;
        if (wpe->cols != wte.cols)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: wpe has %zu cols, wte %zu", op,
                             wpe->cols, wte.cols);
        if (pos0 > wpe->rows || tokens > wpe->rows - pos0)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: positions %zu .. %zu beyond wpe's %zu rows", op, pos0,
                             pos0 + tokens - 1, wpe->rows);
    }
    pfx_mat_args ta = pfx_mat_kernel_args(&wte), oa = pfx_mat_kernel_args(&out);
    pfx_mat_args pa = { NULL, 0, 0, 0 };
    if (wpe)
        pa = pfx_mat_kernel_args(wpe);
    cl_ulong r = rows, c = wte.cols, n = tokens, p0 = pos0;
    cl_int has_wpe = wpe != NULL;
    pfx_arg args[] = { PFX_ARG(r),       PFX_ARG(c),         PFX_ARG(n),      PFX_ARG(ids->mem),
                       PFX_ARG(ta.mem),  PFX_ARG(ta.offset), PFX_ARG(ta.ld),  PFX_ARG(ta.half),
                       PFX_ARG(pa.mem),  PFX_ARG(pa.offset), PFX_ARG(pa.ld),  PFX_ARG(pa.half),
                       PFX_ARG(has_wpe), PFX_ARG(p0),        PFX_ARG(oa.mem), PFX_ARG(oa.offset),
                       PFX_ARG(oa.ld) };
    return pfx_launch_groups(rt, "embedding", "", "pfx_embedding", op,
                             pfx_grid_groups(rows * wte.cols, EMB_LOCAL), EMB_LOCAL,
                             sizeof(args) / sizeof(args[0]), args);
}
