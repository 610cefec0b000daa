/* RoPE (HF rotate-half), forward and backward, and inv_freq (cl/rope.cl). */
#include <math.h>

#include "model_args.h"

#define ROPE_LOCAL 64

static pfx_status check_params(pfx_runtime *rt, const pfx_rope_params *p)
{
    const char *op = "rope inv_freq";
    if (!p)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: params is NULL", op);
    if (!(p->theta > 0.0) || !isfinite(p->theta))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: rope_theta %g must be > 0", op,
                         p->theta);
    if (p->head_dim < 2 || p->head_dim % 2)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: head_dim %zu must be even and >= 2",
                         op, p->head_dim);
    if (p->type == PFX_ROPE_DEFAULT)
        return PFX_SUCCESS;
    if (p->type != PFX_ROPE_LLAMA3)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: rope type %d is not known", op,
                         (int)p->type);
    if (!(p->factor > 0.0) || !(p->low_freq_factor > 0.0) ||
        !(p->high_freq_factor > p->low_freq_factor) ||
        !(p->original_max_position_embeddings > 0.0) || !isfinite(p->factor) ||
        !isfinite(p->high_freq_factor) || !isfinite(p->original_max_position_embeddings))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: llama3 needs factor > 0 (%g), 0 < low_freq_factor (%g) < "
                         "high_freq_factor (%g), original_max_position_embeddings > 0 (%g)",
                         op, p->factor, p->low_freq_factor, p->high_freq_factor,
                         p->original_max_position_embeddings);
    return PFX_SUCCESS;
}

pfx_status pfx_rope_inv_freq(pfx_runtime *rt, const pfx_rope_params *p, float *inv_freq)
{
    pfx_status st = check_params(rt, p);
    if (st != PFX_SUCCESS)
        return st;
    if (!inv_freq)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "rope inv_freq: inv_freq is NULL");
    const size_t half = p->head_dim / 2;
    const double pi = 3.14159265358979323846;
    for (size_t i = 0; i < half; i++) {
        double f = 1.0 / pow(p->theta, (double)(2 * i) / (double)p->head_dim);
        if (p->type == PFX_ROPE_LLAMA3) {
            /* transformers' _compute_llama3_parameters */
            const double orig = p->original_max_position_embeddings;
            const double low_wavelen = orig / p->low_freq_factor;
            const double high_wavelen = orig / p->high_freq_factor;
            const double wavelen = 2.0 * pi / f;
            if (wavelen > low_wavelen) {
                f /= p->factor;
            } else if (!(wavelen < high_wavelen)) {
                const double s = (orig / wavelen - p->low_freq_factor) /
                                 (p->high_freq_factor - p->low_freq_factor);
                f = (1.0 - s) * f / p->factor + s * f;
            }
        }
        inv_freq[i] = (float)f;
    }
    return PFX_SUCCESS;
}

static pfx_status rope(pfx_runtime *rt, const char *op, float sign, pfx_mat x, size_t batch,
                       size_t tokens, size_t heads, size_t head_dim, size_t pos0, pfx_mat inv_freq)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "x", &x, PFX_MAT_F32)))
        return st;
    if (batch == 0 || tokens == 0 || heads == 0 || head_dim < 2 || head_dim % 2)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: batch %zu, tokens %zu, heads %zu >= 1 and an even head_dim %zu >= 2",
                         op, batch, tokens, heads, head_dim);
    size_t rows, cols;
    if (pfx_mul_overflows(batch, tokens, &rows) || pfx_mul_overflows(heads, head_dim, &cols))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "%s: sizes overflow", op);
    if (x.rows != rows || x.cols != cols)
        return pfx_error(
            rt, PFX_ERROR_INVALID_SHAPE,
            "%s: x is %zu x %zu, expected [batch * tokens = %zu, heads * head_dim = %zu]", op,
            x.rows, x.cols, rows, cols);
    if (pos0 > SIZE_MAX - tokens || pos0 + tokens > (size_t)1 << 24)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: positions %zu + %zu beyond 2^24 are not exact in float", op, pos0,
                         tokens);
    if ((st = pfx_mat_check_vector(rt, op, "inv_freq", &inv_freq, head_dim / 2, PFX_MAT_F32)) ||
        (st = pfx_mat_check_alias(rt, op, "x", &x, "inv_freq", &inv_freq, false)))
        return st;
    pfx_mat_args xa = pfx_mat_kernel_args(&x);
    cl_ulong r = rows, n = tokens, h = heads, hd = head_dim / 2, p0 = pos0;
    cl_ulong f_off = inv_freq.offset, f_step = pfx_mat_vector_step(&inv_freq);
    pfx_arg args[] = { PFX_ARG(r),      PFX_ARG(n),
                       PFX_ARG(h),      PFX_ARG(hd),
                       PFX_ARG(p0),     PFX_ARG(sign),
                       PFX_ARG(xa.mem), PFX_ARG(xa.offset),
                       PFX_ARG(xa.ld),  PFX_ARG(inv_freq.t->mem),
                       PFX_ARG(f_off),  PFX_ARG(f_step) };
    return pfx_launch_groups(rt, "rope", "", "pfx_rope", op,
                             pfx_grid_groups(rows * heads * (head_dim / 2), ROPE_LOCAL), ROPE_LOCAL,
                             sizeof(args) / sizeof(args[0]), args);
}

pfx_status pfx_op_rope_forward(pfx_runtime *rt, pfx_mat x, size_t batch, size_t tokens,
                               size_t heads, size_t head_dim, size_t pos0, pfx_mat inv_freq)
{
    return rope(rt, "rope", 1.0f, x, batch, tokens, heads, head_dim, pos0, inv_freq);
}

pfx_status pfx_op_rope_backward(pfx_runtime *rt, pfx_mat x, size_t batch, size_t tokens,
                                size_t heads, size_t head_dim, size_t pos0, pfx_mat inv_freq)
{
    return rope(rt, "rope backward", -1.0f, x, batch, tokens, heads, head_dim, pos0, inv_freq);
}
