/* Dense products: argument checks, then CLBlast or the host backend (see gemm.h). */
#include <stdio.h>
#include <stdlib.h>

#include "gemm.h" /* first: sets CL_TARGET_OPENCL_VERSION before CL/cl.h */
#include "gemm_rows.h"
#include "model_args.h"
#include "q8_0.h"

#include <clblast_c.h>

const char *pfx_clblast_status_name(int status)
{
    switch ((CLBlastStatusCode)status) {
#define NAME(s)                                                                                    \
    case s: return #s;
        NAME(CLBlastSuccess)
        NAME(CLBlastOpenCLCompilerNotAvailable)
        NAME(CLBlastTempBufferAllocFailure)
        NAME(CLBlastOpenCLOutOfResources)
        NAME(CLBlastOpenCLOutOfHostMemory)
        NAME(CLBlastOpenCLBuildProgramFailure)
        NAME(CLBlastInvalidValue)
        NAME(CLBlastInvalidCommandQueue)
        NAME(CLBlastInvalidMemObject)
        NAME(CLBlastInvalidBinary)
        NAME(CLBlastInvalidBuildOptions)
        NAME(CLBlastInvalidProgram)
        NAME(CLBlastInvalidProgramExecutable)
        NAME(CLBlastInvalidKernelName)
        NAME(CLBlastInvalidKernelDefinition)
        NAME(CLBlastInvalidKernel)
        NAME(CLBlastInvalidArgIndex)
        NAME(CLBlastInvalidArgValue)
        NAME(CLBlastInvalidArgSize)
        NAME(CLBlastInvalidKernelArgs)
        NAME(CLBlastInvalidLocalNumDimensions)
        NAME(CLBlastInvalidLocalThreadsTotal)
        NAME(CLBlastInvalidLocalThreadsDim)
        NAME(CLBlastInvalidGlobalOffset)
        NAME(CLBlastInvalidEventWaitList)
        NAME(CLBlastInvalidEvent)
        NAME(CLBlastInvalidOperation)
        NAME(CLBlastInvalidBufferSize)
        NAME(CLBlastInvalidGlobalWorkSize)
        NAME(CLBlastNotImplemented)
        NAME(CLBlastInvalidMatrixA)
        NAME(CLBlastInvalidMatrixB)
        NAME(CLBlastInvalidMatrixC)
        NAME(CLBlastInvalidVectorX)
        NAME(CLBlastInvalidVectorY)
        NAME(CLBlastInvalidDimension)
        NAME(CLBlastInvalidLeadDimA)
        NAME(CLBlastInvalidLeadDimB)
        NAME(CLBlastInvalidLeadDimC)
        NAME(CLBlastInvalidIncrementX)
        NAME(CLBlastInvalidIncrementY)
        NAME(CLBlastInsufficientMemoryA)
        NAME(CLBlastInsufficientMemoryB)
        NAME(CLBlastInsufficientMemoryC)
        NAME(CLBlastInsufficientMemoryX)
        NAME(CLBlastInsufficientMemoryY)
        NAME(CLBlastInsufficientMemoryTemp)
        NAME(CLBlastInvalidBatchCount)
        NAME(CLBlastInvalidOverrideKernel)
        NAME(CLBlastMissingOverrideParameter)
        NAME(CLBlastInvalidLocalMemUsage)
        NAME(CLBlastNoHalfPrecision)
        NAME(CLBlastNoDoublePrecision)
        NAME(CLBlastInvalidVectorScalar)
        NAME(CLBlastInsufficientMemoryScalar)
        NAME(CLBlastDatabaseError)
        NAME(CLBlastUnknownError)
        NAME(CLBlastUnexpectedError)
#undef NAME
    }
    return "CLBlastUnknownStatus";
}

pfx_status pfx_clblast_error(pfx_runtime *rt, int status, const char *what)
{
    if (status == CLBlastSuccess)
        return PFX_SUCCESS;
    char text[256];
    snprintf(text, sizeof(text), "%s: CLBlast %s", what ? what : "gemm",
             pfx_clblast_status_name(status));
    /* CLBlast passes OpenCL errors through with their own codes (> -1000). */
    if (status > -1000)
        return pfx_cl_error(rt, (cl_int)status, text);
    return pfx_error(rt, PFX_ERROR_CLBLAST, "%s (%d)", text, status);
}

static pfx_status check_dims(pfx_runtime *rt, const char *what, size_t m, size_t n, size_t k,
                             size_t batch)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: rt is NULL", what ? what : "gemm");
    if (m == 0 || n == 0 || k == 0 || batch == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: gemm dimensions m=%zu n=%zu k=%zu batch=%zu must all be >= 1",
                         what ? what : "gemm", m, n, k, batch);
    return PFX_SUCCESS;
}

/* One operand stored rows x cols with leading dimension ld: ld covers a row
 * and every item's [offset, offset + (rows - 1) ld + cols) lies in the buffer.
 * `pick` selects the item's offset of this operand (0 A, 1 B, 2 C). */
static pfx_status check_operand(pfx_runtime *rt, const char *what, char name, cl_mem mem, size_t ld,
                                size_t rows, size_t cols, const pfx_gemm_item *items, size_t count,
                                int pick)
{
    what = what ? what : "gemm";
    if (!mem)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: buffer of %c is NULL", what, name);
    if (ld < cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: ld%c=%zu is smaller than a stored row of %c (%zu elements)", what,
                         (char)(name - 'A' + 'a'), ld, name, cols);
    size_t bytes = 0, span = 0;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof(bytes), &bytes, NULL);
    if (err != CL_SUCCESS)
        return pfx_cl_error(rt, err, what);
    if (pfx_mul_overflows(rows - 1, ld, &span) || __builtin_add_overflow(span, cols, &span))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "%s: the extent of %c overflows", what, name);
    size_t have = bytes / sizeof(float);
    for (size_t i = 0; i < count; i++) {
        size_t off = pick == 0 ? items[i].a : pick == 1 ? items[i].b : items[i].c;
        if (off > have || span > have - off)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: %c of item %zu needs elements [%zu, %zu + %zu) but its buffer "
                             "holds %zu",
                             what, name, i, off, off, span, have);
    }
    return PFX_SUCCESS;
}

static pfx_status check_operands(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b,
                                 size_t m, size_t n, size_t k, cl_mem a, size_t lda, cl_mem b,
                                 size_t ldb, cl_mem c, size_t ldc, const pfx_gemm_item *items,
                                 size_t count)
{
    pfx_status st =
        check_operand(rt, what, 'A', a, lda, trans_a ? k : m, trans_a ? m : k, items, count, 0);
    if (st == PFX_SUCCESS)
        st =
            check_operand(rt, what, 'B', b, ldb, trans_b ? n : k, trans_b ? k : n, items, count, 1);
    if (st == PFX_SUCCESS)
        st = check_operand(rt, what, 'C', c, ldc, m, n, items, count, 2);
    return st;
}

static CLBlastTranspose op(bool t)
{
    return t ? CLBlastTransposeYes : CLBlastTransposeNo;
}

/* One validated call: its kind picks the CLBlast entry point; the host
 * backend takes the items. */
typedef struct gemm_call {
    enum { CALL_ONE, CALL_STRIDED, CALL_BATCHED } kind;
    bool trans_a, trans_b;
    size_t m, n, k, batch;
    pfx_gemm_operand a, b, c; /* offsets/strides: CALL_ONE, CALL_STRIDED */
    const float *alphas, *betas;
    const size_t *a_offsets, *b_offsets, *c_offsets;
    const pfx_gemm_item *items;
} gemm_call;

static pfx_status dispatch(pfx_runtime *rt, const char *what, const gemm_call *g)
{
    pfx_status st = pfx_rt_enter(rt, what ? what : "gemm");
    if (st != PFX_SUCCESS)
        return st;
    if (rt->gemm == PFX_GEMM_HOST) {
        st = pfx_gemm_host(rt, what, g->trans_a, g->trans_b, g->m, g->n, g->k, g->a.mem, g->a.ld,
                           g->b.mem, g->b.ld, g->c.mem, g->c.ld, g->items, g->batch);
        pfx_rt_leave(rt);
        return st;
    }
    CLBlastStatusCode s;
    const CLBlastLayout row = CLBlastLayoutRowMajor;
    const float alpha = g->items[0].alpha, beta = g->items[0].beta;
    if (g->kind == CALL_ONE)
        s = CLBlastSgemm(row, op(g->trans_a), op(g->trans_b), g->m, g->n, g->k, alpha, g->a.mem,
                         g->a.offset, g->a.ld, g->b.mem, g->b.offset, g->b.ld, beta, g->c.mem,
                         g->c.offset, g->c.ld, &rt->queue, NULL);
    else if (g->kind == CALL_STRIDED)
        s = CLBlastSgemmStridedBatched(
            row, op(g->trans_a), op(g->trans_b), g->m, g->n, g->k, alpha, g->a.mem, g->a.offset,
            g->a.ld, g->a.stride, g->b.mem, g->b.offset, g->b.ld, g->b.stride, beta, g->c.mem,
            g->c.offset, g->c.ld, g->c.stride, g->batch, &rt->queue, NULL);
    else
        s = CLBlastSgemmBatched(row, op(g->trans_a), op(g->trans_b), g->m, g->n, g->k, g->alphas,
                                g->a.mem, g->a_offsets, g->a.ld, g->b.mem, g->b_offsets, g->b.ld,
                                g->betas, g->c.mem, g->c_offsets, g->c.ld, g->batch, &rt->queue,
                                NULL);
    pfx_rt_leave(rt);
    return pfx_clblast_error(rt, s, what);
}

pfx_status pfx_gemm(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                    size_t n, size_t k, float alpha, pfx_gemm_operand a, pfx_gemm_operand b,
                    float beta, pfx_gemm_operand c)
{
    pfx_status st = check_dims(rt, what, m, n, k, 1);
    const pfx_gemm_item item = { a.offset, b.offset, c.offset, alpha, beta };
    if (st == PFX_SUCCESS)
        st = check_operands(rt, what, trans_a, trans_b, m, n, k, a.mem, a.ld, b.mem, b.ld, c.mem,
                            c.ld, &item, 1);
    if (st != PFX_SUCCESS)
        return st;
    gemm_call g = { .kind = CALL_ONE,
                    .trans_a = trans_a,
                    .trans_b = trans_b,
                    .m = m,
                    .n = n,
                    .k = k,
                    .batch = 1,
                    .a = a,
                    .b = b,
                    .c = c,
                    .items = &item };
    return dispatch(rt, what, &g);
}

pfx_status pfx_gemm_strided_batched(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b,
                                    size_t m, size_t n, size_t k, float alpha, pfx_gemm_operand a,
                                    pfx_gemm_operand b, float beta, pfx_gemm_operand c,
                                    size_t batch)
{
    pfx_status st = check_dims(rt, what, m, n, k, batch);
    if (st != PFX_SUCCESS)
        return st;
    pfx_gemm_item *items = calloc(batch, sizeof(*items));
    if (!items)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host allocation failed",
                         what ? what : "gemm");
    for (size_t i = 0; i < batch && st == PFX_SUCCESS; i++) {
        size_t oa = 0, ob = 0, oc = 0;
        if (pfx_mul_overflows(i, a.stride, &oa) || __builtin_add_overflow(oa, a.offset, &oa) ||
            pfx_mul_overflows(i, b.stride, &ob) || __builtin_add_overflow(ob, b.offset, &ob) ||
            pfx_mul_overflows(i, c.stride, &oc) || __builtin_add_overflow(oc, c.offset, &oc))
            st = pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "%s: batch item %zu's offset overflows",
                           what ? what : "gemm", i);
        items[i] = (pfx_gemm_item){ oa, ob, oc, alpha, beta };
    }
    if (st == PFX_SUCCESS)
        st = check_operands(rt, what, trans_a, trans_b, m, n, k, a.mem, a.ld, b.mem, b.ld, c.mem,
                            c.ld, items, batch);
    gemm_call g = { .kind = CALL_STRIDED,
                    .trans_a = trans_a,
                    .trans_b = trans_b,
                    .m = m,
                    .n = n,
                    .k = k,
                    .batch = batch,
                    .a = a,
                    .b = b,
                    .c = c,
                    .items = items };
    if (st == PFX_SUCCESS)
        st = dispatch(rt, what, &g);
    free(items);
    return st;
}

pfx_status pfx_gemm_batched(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                            size_t n, size_t k, const float *alphas, cl_mem a,
                            const size_t *a_offsets, size_t lda, cl_mem b, const size_t *b_offsets,
                            size_t ldb, const float *betas, cl_mem c, const size_t *c_offsets,
                            size_t ldc, size_t batch)
{
    pfx_status st = check_dims(rt, what, m, n, k, batch);
    if (st != PFX_SUCCESS)
        return st;
    if (!alphas || !betas || !a_offsets || !b_offsets || !c_offsets)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                         "%s: batched gemm needs alphas, betas and the three offset arrays",
                         what ? what : "gemm");
    pfx_gemm_item *items = calloc(batch, sizeof(*items));
    if (!items)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host allocation failed",
                         what ? what : "gemm");
    for (size_t i = 0; i < batch; i++)
        items[i] = (pfx_gemm_item){ a_offsets[i], b_offsets[i], c_offsets[i], alphas[i], betas[i] };
    st = check_operands(rt, what, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, items, batch);
    gemm_call g = { .kind = CALL_BATCHED,
                    .trans_a = trans_a,
                    .trans_b = trans_b,
                    .m = m,
                    .n = n,
                    .k = k,
                    .batch = batch,
                    .a = PFX_GEMM_OP(a, 0, lda),
                    .b = PFX_GEMM_OP(b, 0, ldb),
                    .c = PFX_GEMM_OP(c, 0, ldc),
                    .alphas = alphas,
                    .betas = betas,
                    .a_offsets = a_offsets,
                    .b_offsets = b_offsets,
                    .c_offsets = c_offsets,
                    .items = items };
    if (st == PFX_SUCCESS)
        st = dispatch(rt, what, &g);
    free(items);
    return st;
}

/* ---- frozen weights of either storage (model_ops.h) ---- */

/* A 16-bit or Q8_0 weight on the host backend: a few rows read it as stored, more
 * widen it blockwise on the host into the workspace (pfx_gemm_host_stored;
 * w validated by pfx_mat_check). */
static pfx_status stored_on_host(pfx_runtime *rt, const char *op, size_t m, size_t n, size_t k,
                                 float alpha, pfx_gemm_operand a, pfx_gemm_operand w,
                                 pfx_gemm_rows_type w_type, bool trans_w, float beta,
                                 pfx_gemm_operand c, const pfx_tensor *workspace)
{
    const pfx_gemm_item item = { a.offset, w.offset, c.offset, alpha, beta };
    pfx_status st = check_operand(rt, op, 'A', a.mem, a.ld, m, k, &item, 1, 0);
    if (st == PFX_SUCCESS)
        st = check_operand(rt, op, 'C', c.mem, c.ld, m, n, &item, 1, 2);
    if (st == PFX_SUCCESS)
        st = pfx_rt_enter(rt, op);
    if (st != PFX_SUCCESS)
        return st;
    st = pfx_gemm_host_stored(rt, op, m, n, k, alpha, a, w, w_type, trans_w, beta, c,
                              workspace->mem, workspace->numel);
    pfx_rt_leave(rt);
    return st;
}

pfx_status pfx_gemm_weight(pfx_runtime *rt, const char *what, size_t m, size_t n, size_t k,
                           float alpha, pfx_gemm_operand a, pfx_mat w, bool trans_w, float beta,
                           pfx_gemm_operand c, const pfx_tensor *workspace)
{
    const char *op = what ? what : "gemm";
    pfx_status st = check_dims(rt, op, m, n, k, 1);
    if (st != PFX_SUCCESS)
        return st;
    if ((st = pfx_mat_check(rt, op, "weight", &w, PFX_MAT_BLOCK_WEIGHT)))
        return st;
    const size_t w_rows = trans_w ? n : k, w_cols = trans_w ? k : n;
    if (w.rows != w_rows || w.cols != w_cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: weight is %zu x %zu, expected %zu x %zu (%s)", op, w.rows, w.cols,
                         w_rows, w_cols, trans_w ? "[n, k]" : "[k, n]");
    const size_t ldw = w.rows > 1 ? w.ld : w.cols;
    const pfx_dtype dt = w.t->dtype;
    if (dt == PFX_DTYPE_Q8_0 && (w.offset % PFX_Q8_0_BLOCK || (w.rows > 1 && ldw % PFX_Q8_0_BLOCK)))
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: a Q8_0 weight view starts on a block of %d and its rows are whole "
                         "blocks (offset %zu, row stride %zu)",
                         op, PFX_Q8_0_BLOCK, w.offset, ldw);
    if (dt == PFX_DTYPE_F32)
        return pfx_gemm(rt, op, false, trans_w, m, n, k, alpha, a,
                        PFX_GEMM_OP(w.t->mem, w.offset, ldw), beta, c);

    /* 16-bit or Q8_0: output columns in blocks of nb, each block widened first */
    if (!workspace)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: a %s weight needs a workspace", op,
                         pfx_dtype_name(dt));
    if (workspace->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: workspace belongs to another runtime",
                         op);
    if (workspace->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: workspace must be float32", op);
    if (workspace->numel < k)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: workspace of %zu elements holds less than one column (k = %zu)", op,
                         workspace->numel, k);
    if (workspace->mem == a.mem || workspace->mem == c.mem)
        return pfx_error(rt, PFX_ERROR_ALIASING, "%s: workspace is also an operand", op);
    if (rt->gemm == PFX_GEMM_HOST)
        return stored_on_host(rt, op, m, n, k, alpha, a, PFX_GEMM_OP(w.t->mem, w.offset, ldw),
                              dt == PFX_DTYPE_BF16   ? PFX_ROWS_BF16
                              : dt == PFX_DTYPE_Q8_0 ? PFX_ROWS_Q8_0
                                                     : PFX_ROWS_F16,
                              trans_w, beta, c, workspace);
    const size_t nb_max = workspace->numel / k < n ? workspace->numel / k : n;
    for (size_t n0 = 0; n0 < n; n0 += nb_max) {
        const size_t nb = n - n0 < nb_max ? n - n0 : nb_max;
        /* trans_w: rows n0.. of [n, k]; else columns n0.. of [k, n] */
        pfx_mat block = trans_w ? pfx_mat_of(w.t, w.offset + n0 * ldw, nb, k, ldw)
                                : pfx_mat_of(w.t, w.offset + n0, k, nb, ldw);
        pfx_mat wide = trans_w ? PFX_MAT(workspace, nb, k) : PFX_MAT(workspace, k, nb);
        pfx_gemm_operand cb = c;
        cb.offset += n0;
        if ((st = pfx_op_to_float(rt, block, wide)) ||
            (st = pfx_gemm(rt, op, false, trans_w, m, nb, k, alpha, a,
                           PFX_GEMM_OP(workspace->mem, 0, trans_w ? k : nb), beta, cb)))
            return st;
    }
    return PFX_SUCCESS;
}
