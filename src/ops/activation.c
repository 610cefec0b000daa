/* Activations and SwiGLU, forward and backward (cl/activation.cl). */
#include <string.h>

#include "model_args.h"

#define ACT_PROGRAM "activation" /* no tunables: registered with options "" */
#define ACT_LOCAL   64

static const struct {
    const char *name;
    pfx_activation act;
} act_names[] = {
    { "gelu_new", PFX_ACT_GELU_TANH }, { "gelu_pytorch_tanh", PFX_ACT_GELU_TANH },
    { "gelu", PFX_ACT_GELU },          { "relu", PFX_ACT_RELU },
    { "silu", PFX_ACT_SILU },          { "swish", PFX_ACT_SILU },
};

pfx_status pfx_activation_parse(pfx_runtime *rt, const char *name, pfx_activation *out)
{
    if (!out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "activation: out is NULL");
    if (!name)
        return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "activation: no activation named");
    for (size_t i = 0; i < sizeof(act_names) / sizeof(act_names[0]); i++)
        if (strcmp(name, act_names[i].name) == 0) {
            *out = act_names[i].act;
            return PFX_SUCCESS;
        }
    return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                     "activation '%s' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu, "
                     "silu, swish)",
                     name);
}

const char *pfx_activation_name(pfx_activation act)
{
    switch (act) {
    case PFX_ACT_GELU_TANH: return "gelu_new";
    case PFX_ACT_GELU: return "gelu";
    case PFX_ACT_RELU: return "relu";
    case PFX_ACT_SILU: return "silu";
    }
    return "unknown";
}

static pfx_status check_act(pfx_runtime *rt, const char *op, pfx_activation act)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    if ((unsigned)act > PFX_ACT_SILU)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: act %d is not an activation", op,
                         (int)act);
    return PFX_SUCCESS;
}

/* Checks the F32 views ms[0..n) (named names[i]) against the shape of ms[0]. */
static pfx_status check_views(pfx_runtime *rt, const char *op, size_t n, const pfx_mat *const *ms,
                              const char *const *names)
{
    pfx_status st;
    for (size_t i = 0; i < n; i++)
        if ((st = pfx_mat_check(rt, op, names[i], ms[i], PFX_MAT_F32)) ||
            (i && (st = pfx_mat_same_shape(rt, op, names[0], ms[0], names[i], ms[i]))))
            return st;
    return PFX_SUCCESS;
}

static pfx_status launch(pfx_runtime *rt, const char *kernel, const char *op, const pfx_mat *m,
                         size_t nargs, const pfx_arg *args)
{
    /* a work-item per 8 elements (the kernels' step on contiguous views) */
    const size_t items = pfx_ceil_div(m->rows * m->cols, 8);
    return pfx_launch_groups(rt, ACT_PROGRAM, "", kernel, op, pfx_grid_groups(items, ACT_LOCAL),
                             ACT_LOCAL, nargs, args);
}

pfx_status pfx_op_activation_forward(pfx_runtime *rt, pfx_activation act, pfx_mat x, pfx_mat y)
{
    const char *op = "activation";
    pfx_status st = check_act(rt, op, act);
    const pfx_mat *ms[] = { &x, &y };
    const char *names[] = { "x", "y" };
    if (st || (st = check_views(rt, op, 2, ms, names)) ||
        (st = pfx_mat_check_alias(rt, op, "y", &y, "x", &x, true)))
        return st;
    pfx_mat_args xa = pfx_mat_kernel_args(&x), ya = pfx_mat_kernel_args(&y);
    cl_ulong rows = x.rows, cols = x.cols;
    cl_int a = (cl_int)act;
    pfx_arg args[] = { PFX_ARG(rows),   PFX_ARG(cols),      PFX_ARG(a),
                       PFX_ARG(xa.mem), PFX_ARG(xa.offset), PFX_ARG(xa.ld),
                       PFX_ARG(ya.mem), PFX_ARG(ya.offset), PFX_ARG(ya.ld) };
    return launch(rt, "pfx_act_forward", op, &x, sizeof(args) / sizeof(args[0]), args);
}

pfx_status pfx_op_activation_backward(pfx_runtime *rt, pfx_activation act, pfx_mat x, pfx_mat dy,
                                      pfx_mat dx)
{
    const char *op = "activation backward";
    pfx_status st = check_act(rt, op, act);
    const pfx_mat *ms[] = { &x, &dy, &dx };
    const char *names[] = { "x", "dy", "dx" };
    if (st || (st = check_views(rt, op, 3, ms, names)) ||
        (st = pfx_mat_check_alias(rt, op, "dx", &dx, "dy", &dy, true)) ||
        (st = pfx_mat_check_alias(rt, op, "dx", &dx, "x", &x, false)))
        return st;
    pfx_mat_args xa = pfx_mat_kernel_args(&x), da = pfx_mat_kernel_args(&dy);
    pfx_mat_args ga = pfx_mat_kernel_args(&dx);
    cl_ulong rows = x.rows, cols = x.cols;
    cl_int a = (cl_int)act;
    pfx_arg args[] = { PFX_ARG(rows),      PFX_ARG(cols),   PFX_ARG(a),         PFX_ARG(xa.mem),
                       PFX_ARG(xa.offset), PFX_ARG(xa.ld),  PFX_ARG(da.mem),    PFX_ARG(da.offset),
                       PFX_ARG(da.ld),     PFX_ARG(ga.mem), PFX_ARG(ga.offset), PFX_ARG(ga.ld) };
    return launch(rt, "pfx_act_backward", op, &x, sizeof(args) / sizeof(args[0]), args);
}

pfx_status pfx_op_swiglu_forward(pfx_runtime *rt, pfx_mat gate, pfx_mat up, pfx_mat out)
{
    const char *op = "swiglu";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    const pfx_mat *ms[] = { &gate, &up, &out };
    const char *names[] = { "gate", "up", "out" };
    pfx_status st;
    if ((st = check_views(rt, op, 3, ms, names)) ||
        (st = pfx_mat_check_alias(rt, op, "out", &out, "gate", &gate, true)) ||
        (st = pfx_mat_check_alias(rt, op, "out", &out, "up", &up, true)))
        return st;
    pfx_mat_args g = pfx_mat_kernel_args(&gate), u = pfx_mat_kernel_args(&up);
    pfx_mat_args o = pfx_mat_kernel_args(&out);
    cl_ulong rows = gate.rows, cols = gate.cols;
    pfx_arg args[] = { PFX_ARG(rows),  PFX_ARG(cols),     PFX_ARG(g.mem),    PFX_ARG(g.offset),
                       PFX_ARG(g.ld),  PFX_ARG(u.mem),    PFX_ARG(u.offset), PFX_ARG(u.ld),
                       PFX_ARG(o.mem), PFX_ARG(o.offset), PFX_ARG(o.ld) };
    return launch(rt, "pfx_swiglu_forward", op, &gate, sizeof(args) / sizeof(args[0]), args);
}

pfx_status pfx_op_swiglu_backward(pfx_runtime *rt, pfx_mat gate, pfx_mat up, pfx_mat dout,
                                  pfx_mat dgate, pfx_mat dup)
{
    const char *op = "swiglu backward";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    const pfx_mat *ms[] = { &gate, &up, &dout, &dgate, &dup };
    const char *names[] = { "gate", "up", "dout", "dgate", "dup" };
    pfx_status st;
    if ((st = check_views(rt, op, 5, ms, names)) ||
        (st = pfx_mat_check_alias(rt, op, "dgate", &dgate, "gate", &gate, true)) ||
        (st = pfx_mat_check_alias(rt, op, "dgate", &dgate, "up", &up, false)) ||
        (st = pfx_mat_check_alias(rt, op, "dgate", &dgate, "dout", &dout, false)) ||
        (st = pfx_mat_check_alias(rt, op, "dup", &dup, "up", &up, true)) ||
        (st = pfx_mat_check_alias(rt, op, "dup", &dup, "gate", &gate, false)) ||
        (st = pfx_mat_check_alias(rt, op, "dup", &dup, "dout", &dout, false)) ||
        (st = pfx_mat_check_alias(rt, op, "dup", &dup, "dgate", &dgate, false)))
        return st;
    pfx_mat_args g = pfx_mat_kernel_args(&gate), u = pfx_mat_kernel_args(&up);
    pfx_mat_args d = pfx_mat_kernel_args(&dout), dg = pfx_mat_kernel_args(&dgate);
    pfx_mat_args du = pfx_mat_kernel_args(&dup);
    cl_ulong rows = gate.rows, cols = gate.cols;
    pfx_arg args[] = { PFX_ARG(rows),      PFX_ARG(cols),     PFX_ARG(g.mem),    PFX_ARG(g.offset),
                       PFX_ARG(g.ld),      PFX_ARG(u.mem),    PFX_ARG(u.offset), PFX_ARG(u.ld),
                       PFX_ARG(d.mem),     PFX_ARG(d.offset), PFX_ARG(d.ld),     PFX_ARG(dg.mem),
                       PFX_ARG(dg.offset), PFX_ARG(dg.ld),    PFX_ARG(du.mem),   PFX_ARG(du.offset),
                       PFX_ARG(du.ld) };
    return launch(rt, "pfx_swiglu_backward", op, &gate, sizeof(args) / sizeof(args[0]), args);
}
