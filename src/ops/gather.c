/* The hidden row of each item's last valid token, for generation logits. */
#include "model_args.h"

pfx_status pfx_op_gather_last(pfx_runtime *rt, pfx_mat hidden, size_t batch, size_t tokens,
                              const int32_t *lengths, pfx_mat out)
{
    const char *op = "gather last";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    if (!lengths)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: lengths is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "hidden", &hidden, PFX_MAT_F32)) ||
        (st = pfx_mat_check(rt, op, "out", &out, PFX_MAT_F32)) ||
        (st = pfx_mat_check_alias(rt, op, "out", &out, "hidden", &hidden, false)))
        return st;
    size_t rows;
    if (batch == 0 || tokens == 0 || pfx_mul_overflows(batch, tokens, &rows))
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: batch %zu x tokens %zu", op, batch,
                         tokens);
    if (hidden.rows != rows || out.rows != batch || out.cols != hidden.cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: hidden %zu x %zu and out %zu x %zu, expected [%zu, C] and [%zu, C]",
                         op, hidden.rows, hidden.cols, out.rows, out.cols, rows, batch);
    for (size_t b = 0; b < batch; b++)
        if (lengths[b] < 1 || (size_t)lengths[b] > tokens)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: lengths[%zu] = %d outside 1..%zu", op,
                             b, (int)lengths[b], tokens);
    /* one row copy per item: rows are contiguous, items few */
    const size_t row_bytes = hidden.cols * sizeof(float);
    const size_t h_ld = hidden.rows > 1 ? hidden.ld : hidden.cols;
    const size_t o_ld = out.rows > 1 ? out.ld : out.cols;
    for (size_t b = 0; b < batch; b++) {
        const size_t src = hidden.offset + (b * tokens + (size_t)lengths[b] - 1) * h_ld;
        const size_t dst = out.offset + b * o_ld;
        cl_int err = clEnqueueCopyBuffer(rt->queue, hidden.t->mem, out.t->mem, src * sizeof(float),
                                         dst * sizeof(float), row_bytes, 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return pfx_cl_error(rt, err, op);
    }
    return PFX_SUCCESS;
}
