/* Bias added to every row (cl/activation.cl, pfx_bias_add). */
#include "model_args.h"

#define BIAS_LOCAL 64

pfx_status pfx_op_bias_add(pfx_runtime *rt, pfx_mat y, pfx_mat bias)
{
    const char *op = "bias add";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "y", &y, PFX_MAT_F32)) ||
        (st = pfx_mat_check_vector(rt, op, "bias", &bias, y.cols, PFX_MAT_WEIGHT)) ||
        (st = pfx_mat_check_alias(rt, op, "y", &y, "bias", &bias, false)))
        return st;
    pfx_mat_args ya = pfx_mat_kernel_args(&y), ba = pfx_mat_kernel_args(&bias);
    cl_ulong rows = y.rows, cols = y.cols, step = pfx_mat_vector_step(&bias);
    pfx_arg args[] = { PFX_ARG(rows),      PFX_ARG(cols),  PFX_ARG(ya.mem),
                       PFX_ARG(ya.offset), PFX_ARG(ya.ld), PFX_ARG(ba.mem),
                       PFX_ARG(ba.offset), PFX_ARG(step),  PFX_ARG(ba.half) };
    /* a work-item per 8 columns where the kernel takes them 8 at a time */
    const size_t items = y.cols % 8 == 0 ? y.rows * y.cols / 8 : y.rows * y.cols;
    return pfx_launch_groups(rt, "activation", "", "pfx_bias_add", op,
                             pfx_grid_groups(items, BIAS_LOCAL), BIAS_LOCAL,
                             sizeof(args) / sizeof(args[0]), args);
}

pfx_status pfx_op_bias_grad(pfx_runtime *rt, pfx_mat dy, pfx_mat db, bool accumulate)
{
    const char *op = "bias grad";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "dy", &dy, PFX_MAT_F32)) ||
        (st = pfx_mat_check_vector(rt, op, "db", &db, dy.cols, PFX_MAT_F32)) ||
        (st = pfx_mat_check_alias(rt, op, "db", &db, "dy", &dy, false)))
        return st;
    pfx_mat_args ya = pfx_mat_kernel_args(&dy);
    cl_ulong rows = dy.rows, cols = dy.cols, off = db.offset, step = pfx_mat_vector_step(&db);
    cl_int acc = accumulate;
    pfx_arg args[] = { PFX_ARG(rows),      PFX_ARG(cols),  PFX_ARG(ya.mem),
                       PFX_ARG(ya.offset), PFX_ARG(ya.ld), PFX_ARG(db.t->mem),
                       PFX_ARG(off),       PFX_ARG(step),  PFX_ARG(acc) };
    return pfx_launch_groups(rt, "activation", "", "pfx_bias_grad", op,
                             pfx_grid_groups(dy.cols, BIAS_LOCAL), BIAS_LOCAL,
                             sizeof(args) / sizeof(args[0]), args);
}
