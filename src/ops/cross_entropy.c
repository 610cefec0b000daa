/* Fused, chunked causal-LM cross-entropy (cl/cross_entropy.cl). */
#include "model_args.h"
#include "work_groups.h"

#define CE_GROUPS_MAX 65536

pfx_status pfx_op_cross_entropy(pfx_runtime *rt, pfx_mat logits, const pfx_ids *labels,
                                size_t label0, size_t count, bool grad, const pfx_mat *row_loss)
{
    const char *op = "cross entropy";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "logits", &logits, PFX_MAT_F32)))
        return st;
    if (row_loss &&
        ((st = pfx_mat_check_vector(rt, op, "row_loss", row_loss, logits.rows, PFX_MAT_F32)) ||
         (st = pfx_mat_check_alias(rt, op, "row_loss", row_loss, "logits", &logits, false))))
        return st;
    if (logits.cols > (size_t)INT32_MAX)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: vocabulary of %zu beyond int32", op,
                         logits.cols);
    size_t counted = 0;
    if ((st = pfx_ids_check(rt, op, "labels", labels, label0, logits.rows, logits.cols, true,
                            &counted)))
        return st;
    if (count == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: count (counted labels of the batch) must be >= 1", op);
    if (counted > count)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: this chunk alone counts %zu labels, more than count = %zu", op,
                         counted, count);
    if (!row_loss && !grad)
        return PFX_SUCCESS; /* nothing asked */

    pfx_mat_args za = pfx_mat_kernel_args(&logits);
    cl_mem lmem = row_loss ? row_loss->t->mem : NULL;
    cl_ulong base = 0, vocab = logits.cols, l0 = label0;
    cl_ulong loss_off = row_loss ? row_loss->offset : 0;
    cl_ulong loss_step = row_loss ? pfx_mat_vector_step(row_loss) : 0;
    cl_int has_loss = row_loss != NULL, g = grad;
    float inv_count = (float)(1.0 / (double)count);
    pfx_arg args[] = { PFX_ARG(base),      PFX_ARG(vocab),    PFX_ARG(za.mem),
                       PFX_ARG(za.offset), PFX_ARG(za.ld),    PFX_ARG(labels->mem),
                       PFX_ARG(l0),        PFX_ARG(lmem),     PFX_ARG(loss_off),
                       PFX_ARG(loss_step), PFX_ARG(has_loss), PFX_ARG(g),
                       PFX_ARG(inv_count) };
    /* one work-group per row, in slices of at most CE_GROUPS_MAX rows */
    for (base = 0; base < logits.rows; base += CE_GROUPS_MAX) {
        const size_t left = logits.rows - base;
        st = pfx_launch_groups(rt, "cross_entropy", PFX_CE_OPTIONS, "pfx_cross_entropy", op,
                               left < CE_GROUPS_MAX ? left : CE_GROUPS_MAX, PFX_CE_WG,
                               sizeof(args) / sizeof(args[0]), args);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

size_t pfx_labels_shift(const int32_t *labels, size_t batch, size_t tokens, int32_t *shifted)
{
    size_t count = 0;
    for (size_t b = 0; b < batch; b++)
        for (size_t t = 0; t < tokens; t++) {
            const int32_t v = t + 1 < tokens ? labels[b * tokens + t + 1] : PFX_LABEL_IGNORE;
            shifted[b * tokens + t] = v;
            count += v != PFX_LABEL_IGNORE;
        }
    return count;
}
