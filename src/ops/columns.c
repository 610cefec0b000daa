/* Column blocks split and joined (cl/activation.cl, pfx_split_columns and
 * pfx_join_columns): one dense product for Q, K and V instead of three. */
#include <stdio.h>

#include "model_args.h"

#define COLUMNS_LOCAL 64

/* split: x to the parts (pfx_split_columns, with the bias arguments);
 * else the parts to x. */
static pfx_status launch(pfx_runtime *rt, const char *op, bool split, size_t parts,
                         const pfx_mat *y, const pfx_mat *bias, pfx_mat x)
{
    static const char *const names[PFX_COLUMN_PARTS_MAX] = { "y[0]", "y[1]", "y[2]" };
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    if (!y)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: y is NULL", op);
    if (parts < 1 || parts > PFX_COLUMN_PARTS_MAX)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: parts %zu outside 1..%d", op, parts,
                         PFX_COLUMN_PARTS_MAX);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "x", &x, PFX_MAT_F32)))
        return st;
    size_t width = 0;
    for (size_t i = 0; i < parts; i++) {
        if ((st = pfx_mat_check(rt, op, names[i], &y[i], PFX_MAT_F32)))
            return st;
        if (y[i].rows != x.rows)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s has %zu rows, x has %zu", op,
                             names[i], y[i].rows, x.rows);
        if ((st = pfx_mat_check_alias(rt, op, names[i], &y[i], "x", &x, false)))
            return st;
        /* the split's outputs: apart from each other and from the bias it reads */
        for (size_t j = 0; split && j < i; j++)
            if ((st = pfx_mat_check_alias(rt, op, names[i], &y[i], names[j], &y[j], false)))
                return st;
        width += y[i].cols;
    }
    if (width != x.cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: the parts' widths add up to %zu, x has %zu columns", op, width,
                         x.cols);
    if (bias && (st = pfx_mat_check_vector(rt, op, "bias", bias, x.cols, PFX_MAT_WEIGHT)))
        return st;
    for (size_t i = 0; bias && i < parts; i++)
        if ((st = pfx_mat_check_alias(rt, op, names[i], &y[i], "bias", bias, false)))
            return st;
    /* unused parts: a NULL buffer of width 0 the kernel never reaches */
    pfx_mat_args xa = pfx_mat_kernel_args(&x), pa[PFX_COLUMN_PARTS_MAX];
    cl_ulong w[PFX_COLUMN_PARTS_MAX];
    for (size_t i = 0; i < PFX_COLUMN_PARTS_MAX; i++) {
        pa[i] = i < parts ? pfx_mat_kernel_args(&y[i]) : (pfx_mat_args){ NULL, 0, 1, 0 };
        w[i] = i < parts ? y[i].cols : 0;
    }
    cl_ulong rows = x.rows;
    pfx_mat_args ba = bias ? pfx_mat_kernel_args(bias) : (pfx_mat_args){ NULL, 0, 1, 0 };
    cl_ulong b_step = bias ? pfx_mat_vector_step(bias) : 1;
    cl_int has_b = bias != NULL;
    pfx_arg args[] = {
        PFX_ARG(rows),         PFX_ARG(w[0]),      PFX_ARG(w[1]),         PFX_ARG(w[2]),
        PFX_ARG(xa.mem),       PFX_ARG(xa.offset), PFX_ARG(xa.ld),        PFX_ARG(pa[0].mem),
        PFX_ARG(pa[0].offset), PFX_ARG(pa[0].ld),  PFX_ARG(pa[1].mem),    PFX_ARG(pa[1].offset),
        PFX_ARG(pa[1].ld),     PFX_ARG(pa[2].mem), PFX_ARG(pa[2].offset), PFX_ARG(pa[2].ld),
        PFX_ARG(ba.mem),       PFX_ARG(ba.offset), PFX_ARG(b_step),       PFX_ARG(ba.half),
        PFX_ARG(has_b),
    };
    /* the join takes no bias arguments (the last 5) */
    const size_t nargs = sizeof(args) / sizeof(args[0]) - (split ? 0 : 5);
    const size_t items =
        w[0] % 8 == 0 && w[1] % 8 == 0 && w[2] % 8 == 0 ? x.rows * x.cols / 8 : x.rows * x.cols;
    return pfx_launch_groups(rt, "activation", "", split ? "pfx_split_columns" : "pfx_join_columns",
                             op, pfx_grid_groups(items, COLUMNS_LOCAL), COLUMNS_LOCAL, nargs, args);
}

pfx_status pfx_op_split_columns(pfx_runtime *rt, pfx_mat x, const pfx_mat *bias, size_t parts,
                                const pfx_mat *y)
{
    return launch(rt, "split columns", true, parts, y, bias, x);
}

pfx_status pfx_op_join_columns(pfx_runtime *rt, size_t parts, const pfx_mat *y, pfx_mat x)
{
    return launch(rt, "join columns", false, parts, y, NULL, x);
}
