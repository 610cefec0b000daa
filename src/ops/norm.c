/* LayerNorm and RMSNorm, forward and dX backward (cl/norm.cl). */
#include <math.h>

#include "model_args.h"
#include "work_groups.h"

#define NORM_PROGRAM    "norm"
#define NORM_GROUPS_MAX 65536

/* An absent vector: a NULL buffer the kernel never reads. */
static const pfx_mat no_vec = { NULL, 0, 1, 1, 1 };

/* One work-group per row, in slices of NORM_GROUPS_MAX rows; *base is the
 * kernel's row_base argument (args point at it). */
static pfx_status launch_rows(pfx_runtime *rt, const char *kernel, const char *op, size_t rows,
                              cl_ulong *base, size_t nargs, const pfx_arg *args)
{
    for (*base = 0; *base < rows; *base += NORM_GROUPS_MAX) {
        const size_t left = rows - *base;
        pfx_status st = pfx_launch_groups(rt, NORM_PROGRAM, PFX_NORM_OPTIONS, kernel, op,
                                          left < NORM_GROUPS_MAX ? left : NORM_GROUPS_MAX,
                                          PFX_NORM_WG, nargs, args);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

static pfx_status check_stats(pfx_runtime *rt, const char *op, const char *name, const pfx_mat *v,
                              size_t rows, const pfx_mat *x, const pfx_mat *y)
{
    pfx_status st = pfx_mat_check_vector(rt, op, name, v, rows, PFX_MAT_F32);
    if (st == PFX_SUCCESS)
        st = pfx_mat_check_alias(rt, op, name, v, "x", x, false);
    if (st == PFX_SUCCESS && y)
        st = pfx_mat_check_alias(rt, op, name, v, "y", y, false);
    return st;
}

static pfx_status forward(pfx_runtime *rt, const char *op, bool rms, pfx_mat x, pfx_mat w,
                          const pfx_mat *b, float eps, pfx_mat y, const pfx_mat *mean,
                          const pfx_mat *rstd)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "x", &x, PFX_MAT_F32)) ||
        (st = pfx_mat_check(rt, op, "y", &y, PFX_MAT_F32)) ||
        (st = pfx_mat_same_shape(rt, op, "x", &x, "y", &y)) ||
        (st = pfx_mat_check_alias(rt, op, "y", &y, "x", &x, true)) ||
        (st = pfx_mat_check_vector(rt, op, "w", &w, x.cols, PFX_MAT_WEIGHT)) ||
        (st = pfx_mat_check_alias(rt, op, "y", &y, "w", &w, false)))
        return st;
    if (b && ((st = pfx_mat_check_vector(rt, op, "b", b, x.cols, PFX_MAT_WEIGHT)) ||
              (st = pfx_mat_check_alias(rt, op, "y", &y, "b", b, false))))
        return st;
    if (!rms && (!mean) != (!rstd))
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                         "%s: mean and rstd are both given or both NULL", op);
    if (mean && (st = check_stats(rt, op, "mean", mean, x.rows, &x, &y)))
        return st;
    if (rstd && (st = check_stats(rt, op, "rstd", rstd, x.rows, &x, &y)))
        return st;
    if (mean && rstd && pfx_mat_overlap(mean, rstd))
        return pfx_error(rt, PFX_ERROR_ALIASING, "%s: mean overlaps rstd", op);
    if (!isfinite(eps) || eps < 0.0f)
        return pfx_error(rt, PFX_ERROR_NOT_FINITE, "%s: eps (%g) must be finite and >= 0", op,
                         (double)eps);

    const pfx_mat *bm = b ? b : &no_vec, *mm = mean ? mean : &no_vec, *rm = rstd ? rstd : &no_vec;
    pfx_mat_args xa = pfx_mat_kernel_args(&x), ya = pfx_mat_kernel_args(&y);
    pfx_mat_args wa = pfx_mat_kernel_args(&w);
    cl_mem bmem = b ? b->t->mem : NULL, mmem = mean ? mean->t->mem : NULL;
    cl_mem rmem = rstd ? rstd->t->mem : NULL;
    cl_ulong base = 0, cols = x.cols, w_step = pfx_mat_vector_step(&w);
    cl_ulong b_off = bm->offset, b_step = pfx_mat_vector_step(bm);
    cl_ulong m_off = mm->offset, m_step = pfx_mat_vector_step(mm);
    cl_ulong r_off = rm->offset, r_step = pfx_mat_vector_step(rm);
    cl_int is_rms = rms, b_half = b ? pfx_mat_kernel_args(b).half : 0, has_b = b != NULL;
    cl_int has_stats = rstd != NULL;
    pfx_arg args[] = { PFX_ARG(base),      PFX_ARG(cols),      PFX_ARG(is_rms), PFX_ARG(xa.mem),
                       PFX_ARG(xa.offset), PFX_ARG(xa.ld),     PFX_ARG(wa.mem), PFX_ARG(wa.offset),
                       PFX_ARG(w_step),    PFX_ARG(wa.half),   PFX_ARG(bmem),   PFX_ARG(b_off),
                       PFX_ARG(b_step),    PFX_ARG(b_half),    PFX_ARG(has_b),  PFX_ARG(eps),
                       PFX_ARG(ya.mem),    PFX_ARG(ya.offset), PFX_ARG(ya.ld),  PFX_ARG(mmem),
                       PFX_ARG(m_off),     PFX_ARG(m_step),    PFX_ARG(rmem),   PFX_ARG(r_off),
                       PFX_ARG(r_step),    PFX_ARG(has_stats) };
    return launch_rows(rt, "pfx_norm_forward", op, x.rows, &base, sizeof(args) / sizeof(args[0]),
                       args);
}

static pfx_status backward(pfx_runtime *rt, const char *op, bool rms, pfx_mat x, pfx_mat w,
                           const pfx_mat *mean, pfx_mat rstd, pfx_mat dy, pfx_mat dx,
                           bool accumulate)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "x", &x, PFX_MAT_F32)) ||
        (st = pfx_mat_check(rt, op, "dy", &dy, PFX_MAT_F32)) ||
        (st = pfx_mat_check(rt, op, "dx", &dx, PFX_MAT_F32)) ||
        (st = pfx_mat_same_shape(rt, op, "x", &x, "dy", &dy)) ||
        (st = pfx_mat_same_shape(rt, op, "x", &x, "dx", &dx)) ||
        (st = pfx_mat_check_vector(rt, op, "w", &w, x.cols, PFX_MAT_WEIGHT)) ||
        (st = pfx_mat_check_vector(rt, op, "rstd", &rstd, x.rows, PFX_MAT_F32)) ||
        (st = pfx_mat_check_alias(rt, op, "dx", &dx, "x", &x, false)) ||
        (st = pfx_mat_check_alias(rt, op, "dx", &dx, "dy", &dy, false)) ||
        (st = pfx_mat_check_alias(rt, op, "dx", &dx, "w", &w, false)) ||
        (st = pfx_mat_check_alias(rt, op, "dx", &dx, "rstd", &rstd, false)))
        return st;
    if (mean && ((st = pfx_mat_check_vector(rt, op, "mean", mean, x.rows, PFX_MAT_F32)) ||
                 (st = pfx_mat_check_alias(rt, op, "dx", &dx, "mean", mean, false))))
        return st;

    const pfx_mat *mm = mean ? mean : &no_vec;
    pfx_mat_args xa = pfx_mat_kernel_args(&x), wa = pfx_mat_kernel_args(&w);
    pfx_mat_args dya = pfx_mat_kernel_args(&dy), dxa = pfx_mat_kernel_args(&dx);
    cl_mem mmem = mean ? mean->t->mem : NULL;
    cl_ulong base = 0, cols = x.cols, w_step = pfx_mat_vector_step(&w);
    cl_ulong m_off = mm->offset, m_step = pfx_mat_vector_step(mm);
    cl_ulong r_off = rstd.offset, r_step = pfx_mat_vector_step(&rstd);
    cl_int is_rms = rms, acc = accumulate;
    pfx_arg args[] = { PFX_ARG(base),    PFX_ARG(cols),        PFX_ARG(is_rms),
                       PFX_ARG(xa.mem),  PFX_ARG(xa.offset),   PFX_ARG(xa.ld),
                       PFX_ARG(wa.mem),  PFX_ARG(wa.offset),   PFX_ARG(w_step),
                       PFX_ARG(wa.half), PFX_ARG(mmem),        PFX_ARG(m_off),
                       PFX_ARG(m_step),  PFX_ARG(rstd.t->mem), PFX_ARG(r_off),
                       PFX_ARG(r_step),  PFX_ARG(dya.mem),     PFX_ARG(dya.offset),
                       PFX_ARG(dya.ld),  PFX_ARG(dxa.mem),     PFX_ARG(dxa.offset),
                       PFX_ARG(dxa.ld),  PFX_ARG(acc) };
    return launch_rows(rt, "pfx_norm_backward", op, x.rows, &base, sizeof(args) / sizeof(args[0]),
                       args);
}

pfx_status pfx_op_layernorm_forward(pfx_runtime *rt, pfx_mat x, pfx_mat w, const pfx_mat *b,
                                    float eps, pfx_mat y, const pfx_mat *mean, const pfx_mat *rstd)
{
    return forward(rt, "layernorm", false, x, w, b, eps, y, mean, rstd);
}

pfx_status pfx_op_layernorm_backward(pfx_runtime *rt, pfx_mat x, pfx_mat w, pfx_mat mean,
                                     pfx_mat rstd, pfx_mat dy, pfx_mat dx, bool accumulate)
{
    return backward(rt, "layernorm backward", false, x, w, &mean, rstd, dy, dx, accumulate);
}

pfx_status pfx_op_rmsnorm_forward(pfx_runtime *rt, pfx_mat x, pfx_mat w, float eps, pfx_mat y,
                                  const pfx_mat *rstd)
{
    return forward(rt, "rmsnorm", true, x, w, NULL, eps, y, NULL, rstd);
}

pfx_status pfx_op_rmsnorm_backward(pfx_runtime *rt, pfx_mat x, pfx_mat w, pfx_mat rstd, pfx_mat dy,
                                   pfx_mat dx, bool accumulate)
{
    return backward(rt, "rmsnorm backward", true, x, w, NULL, rstd, dy, dx, accumulate);
}

pfx_status pfx_op_norm_param_grad(pfx_runtime *rt, pfx_mat x, const pfx_mat *mean, pfx_mat rstd,
                                  pfx_mat dy, pfx_mat dw, const pfx_mat *db, bool accumulate)
{
    const char *op = "norm weight grad";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "x", &x, PFX_MAT_F32)) ||
        (st = pfx_mat_check(rt, op, "dy", &dy, PFX_MAT_F32)) ||
        (st = pfx_mat_same_shape(rt, op, "x", &x, "dy", &dy)) ||
        (st = pfx_mat_check_vector(rt, op, "rstd", &rstd, x.rows, PFX_MAT_F32)) ||
        (st = pfx_mat_check_vector(rt, op, "dw", &dw, x.cols, PFX_MAT_F32)))
        return st;
    if (mean && (st = pfx_mat_check_vector(rt, op, "mean", mean, x.rows, PFX_MAT_F32)))
        return st;
    if (db && (st = pfx_mat_check_vector(rt, op, "db", db, x.cols, PFX_MAT_F32)))
        return st;
    /* the outputs overlap no input and not each other */
    const pfx_mat *outs[2] = { &dw, db };
    const char *out_names[2] = { "dw", "db" };
    const pfx_mat *ins[4] = { &x, &dy, &rstd, mean };
    const char *in_names[4] = { "x", "dy", "rstd", "mean" };
    for (int o = 0; o < 2; o++)
        for (int i = 0; outs[o] && i < 4; i++)
            if (ins[i] && (st = pfx_mat_check_alias(rt, op, out_names[o], outs[o], in_names[i],
                                                    ins[i], false)))
                return st;
    if (db && pfx_mat_overlap(&dw, db))
        return pfx_error(rt, PFX_ERROR_ALIASING, "%s: dw overlaps db", op);

    const pfx_mat *mm = mean ? mean : &no_vec, *bm = db ? db : &no_vec;
    pfx_mat_args xa = pfx_mat_kernel_args(&x), dya = pfx_mat_kernel_args(&dy);
    cl_mem mmem = mean ? mean->t->mem : NULL, bmem = db ? db->t->mem : NULL;
    cl_ulong rows = x.rows, cols = x.cols;
    cl_ulong m_off = mm->offset, m_step = pfx_mat_vector_step(mm);
    cl_ulong r_off = rstd.offset, r_step = pfx_mat_vector_step(&rstd);
    cl_ulong w_off = dw.offset, w_step = pfx_mat_vector_step(&dw);
    cl_ulong b_off = bm->offset, b_step = pfx_mat_vector_step(bm);
    cl_int is_rms = mean == NULL, has_db = db != NULL, acc = accumulate;
    pfx_arg args[] = { PFX_ARG(rows),        PFX_ARG(cols),       PFX_ARG(is_rms),
                       PFX_ARG(xa.mem),      PFX_ARG(xa.offset),  PFX_ARG(xa.ld),
                       PFX_ARG(mmem),        PFX_ARG(m_off),      PFX_ARG(m_step),
                       PFX_ARG(rstd.t->mem), PFX_ARG(r_off),      PFX_ARG(r_step),
                       PFX_ARG(dya.mem),     PFX_ARG(dya.offset), PFX_ARG(dya.ld),
                       PFX_ARG(dw.t->mem),   PFX_ARG(w_off),      PFX_ARG(w_step),
                       PFX_ARG(bmem),        PFX_ARG(b_off),      PFX_ARG(b_step),
                       PFX_ARG(has_db),      PFX_ARG(acc) };
    return pfx_launch_groups(rt, NORM_PROGRAM, PFX_NORM_OPTIONS, "pfx_norm_param_grad", op,
                             pfx_grid_groups(x.cols, PFX_NORM_WG), PFX_NORM_WG,
                             sizeof(args) / sizeof(args[0]), args);
}
