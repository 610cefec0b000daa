/* Dropout of the embeddings and residual branches (cl/dropout.cl), and the
 * host side of every mask (dropout.h). */
#include <math.h>

#include "dropout.h"
#include "model_args.h"

#define DROPOUT_LOCAL 64

bool pfx_dropout_valid(float p)
{
    return isfinite(p) && p >= 0.0f && p < 1.0f;
}

uint32_t pfx_dropout_threshold(float p)
{
    const double t = floor((double)p * 4294967296.0);
    return t >= 4294967295.0 ? UINT32_MAX : (uint32_t)t;
}

float pfx_dropout_scale(float p)
{
    return (float)(1.0 / (1.0 - (double)p));
}

cl_uint4 pfx_dropout_words(const pfx_dropout_stream *s)
{
    cl_uint4 w;
    w.s[0] = (cl_uint)(s->seed & 0xffffffffu);
    w.s[1] = (cl_uint)(s->seed >> 32);
    w.s[2] = s->step;
    w.s[3] = s->tag;
    return w;
}

pfx_status pfx_op_dropout(pfx_runtime *rt, float p, const pfx_dropout_stream *s, size_t tokens,
                          pfx_mat x, const pfx_mat *base, pfx_mat out)
{
    const char *op = "dropout";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    if (!s)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: stream is NULL", op);
    if (!pfx_dropout_valid(p))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: p (%g) is not in [0, 1)", op,
                         (double)p);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "x", &x, PFX_MAT_F32)) ||
        (st = pfx_mat_check(rt, op, "out", &out, PFX_MAT_F32)) ||
        (st = pfx_mat_same_shape(rt, op, "x", &x, "out", &out)) ||
        (st = pfx_mat_check_alias(rt, op, "out", &out, "x", &x, true)))
        return st;
    if (base && ((st = pfx_mat_check(rt, op, "base", base, PFX_MAT_F32)) ||
                 (st = pfx_mat_same_shape(rt, op, "x", &x, "base", base)) ||
                 (st = pfx_mat_check_alias(rt, op, "out", &out, "base", base, true))))
        return st;
    if (tokens == 0 || x.rows % tokens)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %zu rows are not items of %zu tokens",
                         op, x.rows, tokens);
    pfx_mat_args xa = pfx_mat_kernel_args(&x), oa = pfx_mat_kernel_args(&out);
    pfx_mat_args ba = base ? pfx_mat_kernel_args(base) : xa;
    cl_ulong rows = x.rows, cols = x.cols;
    cl_uint4 words = pfx_dropout_words(s);
    cl_uint threshold = pfx_dropout_threshold(p);
    cl_uint row0 = (cl_uint)((uint64_t)s->first_item * tokens);
    cl_float scale = pfx_dropout_scale(p);
    cl_int has_base = base != NULL;
    pfx_arg args[] = { PFX_ARG(rows),     PFX_ARG(cols),   PFX_ARG(words),     PFX_ARG(threshold),
                       PFX_ARG(scale),    PFX_ARG(row0),   PFX_ARG(xa.mem),    PFX_ARG(xa.offset),
                       PFX_ARG(xa.ld),    PFX_ARG(ba.mem), PFX_ARG(ba.offset), PFX_ARG(ba.ld),
                       PFX_ARG(has_base), PFX_ARG(oa.mem), PFX_ARG(oa.offset), PFX_ARG(oa.ld) };
    return pfx_launch_groups(rt, "dropout", "", "pfx_dropout", op,
                             pfx_grid_groups(x.rows * x.cols, DROPOUT_LOCAL), DROPOUT_LOCAL,
                             sizeof(args) / sizeof(args[0]), args);
}
