/* Half (or float) views widened into float32, and float32 views narrowed
 * into half or bfloat16 storage (cl/convert.cl). */
#include "model_args.h"

#define CONVERT_LOCAL 64
/* Elements of a row one work item widens (cl/convert.cl). */
#define CONVERT_RUN 8

/* dst = src, from src_kind to dst_kind storage (cl/convert.cl pfx_convert). */
static pfx_status convert(pfx_runtime *rt, const char *op, pfx_mat src, pfx_mat_kind src_kind,
                          pfx_mat dst, pfx_mat_kind dst_kind)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "src", &src, src_kind)) ||
        (st = pfx_mat_check(rt, op, "dst", &dst, dst_kind)) ||
        (st = pfx_mat_same_shape(rt, op, "src", &src, "dst", &dst)) ||
        (st = pfx_mat_check_alias(rt, op, "dst", &dst, "src", &src, false)))
        return st;
    pfx_mat_args s = pfx_mat_kernel_args(&src), d = pfx_mat_kernel_args(&dst);
    cl_ulong rows = src.rows, cols = src.cols;
    pfx_arg args[] = { PFX_ARG(rows), PFX_ARG(cols),   PFX_ARG(s.mem), PFX_ARG(s.offset),
                       PFX_ARG(s.ld), PFX_ARG(s.half), PFX_ARG(d.mem), PFX_ARG(d.offset),
                       PFX_ARG(d.ld), PFX_ARG(d.half) };
    return pfx_launch_groups(
        rt, "convert", "", "pfx_convert", op,
        pfx_grid_groups(src.rows * ((src.cols + CONVERT_RUN - 1) / CONVERT_RUN), CONVERT_LOCAL),
        CONVERT_LOCAL, sizeof(args) / sizeof(args[0]), args);
}

pfx_status pfx_op_to_float(pfx_runtime *rt, pfx_mat src, pfx_mat dst)
{
    return convert(rt, "to float", src, PFX_MAT_BLOCK_WEIGHT, dst, PFX_MAT_F32);
}

pfx_status pfx_op_from_float(pfx_runtime *rt, pfx_mat src, pfx_mat dst)
{
    return convert(rt, "from float", src, PFX_MAT_F32, dst, PFX_MAT_WEIGHT);
}
