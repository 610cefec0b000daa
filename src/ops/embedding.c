/* Token embeddings (+ learned positions), forward and the tables' gradients
 * (cl/embedding.cl). */
#include <stdint.h>
#include <stdlib.h>

#include "model_args.h"

#define EMB_LOCAL 64

pfx_status pfx_op_embedding(pfx_runtime *rt, const pfx_ids *ids, size_t batch, size_t tokens,
                            pfx_mat wte, const pfx_mat *wpe, size_t pos0, pfx_mat out)
{
    const char *op = "embedding";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    if ((st = pfx_mat_check(rt, op, "wte", &wte, PFX_MAT_BLOCK_WEIGHT)) ||
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

/* The gather plan of pfx_embedding_backward (cl/embedding.cl) from the ids'
 * host copy: order [rows] (rows by id, a stable counting sort), start
 * [unique + 1], id [unique]; *unique set. NULL when out of host memory. */
static int32_t *gather_plan(const int32_t *ids, size_t rows, size_t vocab, size_t *unique)
{
    size_t *count = calloc(vocab + 1, sizeof(size_t));
    int32_t *plan = malloc((3 * rows + 1) * sizeof(int32_t));
    if (!count || !plan) {
        free(count);
        free(plan);
        return NULL;
    }
    size_t u = 0;
    for (size_t r = 0; r < rows; r++)
        u += count[ids[r] + 1]++ == 0;
    for (size_t v = 0; v < vocab; v++)
        count[v + 1] += count[v]; /* count[v]: the first slot of id v */
    int32_t *order = plan, *start = plan + rows, *id = start + u + 1;
    size_t k = 0;
    for (size_t v = 0; v < vocab; v++)
        if (count[v + 1] > count[v]) {
            start[k] = (int32_t)count[v];
            id[k++] = (int32_t)v;
        }
    start[u] = (int32_t)rows;
    for (size_t r = 0; r < rows; r++)
        order[count[ids[r]]++] = (int32_t)r;
    free(count);
    *unique = u;
    return plan;
}

/* dout's checks shared by both tables' gradients: [batch * tokens, cols]. */
static pfx_status check_dout(pfx_runtime *rt, const char *op, size_t batch, size_t tokens,
                             const pfx_mat *dout, size_t cols, size_t *rows)
{
    pfx_status st = pfx_mat_check(rt, op, "dout", dout, PFX_MAT_F32);
    if (st != PFX_SUCCESS)
        return st;
    if (batch == 0 || tokens == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: batch %zu and tokens %zu must be >= 1",
                         op, batch, tokens);
    if (pfx_mul_overflows(batch, tokens, rows) || *rows > INT32_MAX)
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "%s: batch * tokens is too large", op);
    if (dout->rows != *rows || dout->cols != cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: dout is %zu x %zu, expected [batch * tokens = %zu, C = %zu]", op,
                         dout->rows, dout->cols, *rows, cols);
    return PFX_SUCCESS;
}

pfx_status pfx_op_embedding_backward(pfx_runtime *rt, const pfx_ids *ids, size_t batch,
                                     size_t tokens, pfx_mat dout, pfx_mat dwte)
{
    const char *op = "embedding backward";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    size_t rows = 0;
    if ((st = pfx_mat_check(rt, op, "dwte", &dwte, PFX_MAT_F32)) ||
        (st = check_dout(rt, op, batch, tokens, &dout, dwte.cols, &rows)) ||
        (st = pfx_mat_check_alias(rt, op, "dwte", &dwte, "dout", &dout, false)) ||
        (st = pfx_ids_check(rt, op, "ids", ids, 0, rows, dwte.rows, false, NULL)))
        return st;
    size_t unique = 0;
    int32_t *plan = gather_plan(ids->host, rows, dwte.rows, &unique);
    if (!plan)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", op);
    const size_t plan_bytes = (rows + 2 * unique + 1) * sizeof(int32_t);
    cl_mem pm = NULL;
    st = pfx_buffer_create(rt, plan_bytes, plan, &pm); /* copied at creation */
    free(plan);
    if (st != PFX_SUCCESS)
        return st;
    pfx_mat_args da = pfx_mat_kernel_args(&dout), ta = pfx_mat_kernel_args(&dwte);
    cl_ulong r = rows, u = unique, c = dwte.cols;
    pfx_arg args[] = { PFX_ARG(r),         PFX_ARG(u),         PFX_ARG(c),     PFX_ARG(pm),
                       PFX_ARG(da.mem),    PFX_ARG(da.offset), PFX_ARG(da.ld), PFX_ARG(ta.mem),
                       PFX_ARG(ta.offset), PFX_ARG(ta.ld) };
    st = pfx_launch_groups(rt, "embedding", "", "pfx_embedding_backward", op,
                           pfx_grid_groups(unique * dwte.cols, EMB_LOCAL), EMB_LOCAL,
                           sizeof(args) / sizeof(args[0]), args);
    /* released now, freed by OpenCL once the kernel that reads it is done */
    pfx_buffer_release(rt, pm, plan_bytes);
    return st;
}

pfx_status pfx_op_position_backward(pfx_runtime *rt, size_t batch, size_t tokens, pfx_mat dout,
                                    pfx_mat dwpe, size_t pos0)
{
    const char *op = "position backward";
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", op);
    pfx_status st;
    size_t rows = 0;
    if ((st = pfx_mat_check(rt, op, "dwpe", &dwpe, PFX_MAT_F32)) ||
        (st = check_dout(rt, op, batch, tokens, &dout, dwpe.cols, &rows)) ||
        (st = pfx_mat_check_alias(rt, op, "dwpe", &dwpe, "dout", &dout, false)))
        return st;
    if (pos0 > dwpe.rows || tokens > dwpe.rows - pos0)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: %zu positions from pos0 %zu pass dwpe's %zu rows", op, tokens, pos0,
                         dwpe.rows);
    pfx_mat_args da = pfx_mat_kernel_args(&dout), pa = pfx_mat_kernel_args(&dwpe);
    cl_ulong b = batch, n = tokens, c = dwpe.cols, p0 = pos0;
    pfx_arg args[] = { PFX_ARG(b),         PFX_ARG(n),     PFX_ARG(c),      PFX_ARG(da.mem),
                       PFX_ARG(da.offset), PFX_ARG(da.ld), PFX_ARG(pa.mem), PFX_ARG(pa.offset),
                       PFX_ARG(pa.ld),     PFX_ARG(p0) };
    return pfx_launch_groups(rt, "embedding", "", "pfx_position_backward", op,
                             pfx_grid_groups(tokens * dwpe.cols, EMB_LOCAL), EMB_LOCAL,
                             sizeof(args) / sizeof(args[0]), args);
}
