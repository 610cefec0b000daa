/* Dense products through CLBlast (see gemm.h). */
#include <stdio.h>

#include "gemm.h" /* first: sets CL_TARGET_OPENCL_VERSION before CL/cl.h */

#include <clblast_c.h>

const char *pfx_clblast_status_name(int status)
{
    switch ((CLBlastStatusCode)status) {
#define NAME(s) case s: return #s;
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

static CLBlastTranspose op(bool t)
{
    return t ? CLBlastTransposeYes : CLBlastTransposeNo;
}

pfx_status pfx_gemm(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                    size_t n, size_t k, float alpha, pfx_gemm_operand a, pfx_gemm_operand b,
                    float beta, pfx_gemm_operand c)
{
    pfx_status st = check_dims(rt, what, m, n, k, 1);
    if (st != PFX_SUCCESS)
        return st;
    CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, op(trans_a), op(trans_b), m, n, k,
                                       alpha, a.mem, a.offset, a.ld, b.mem, b.offset, b.ld, beta,
                                       c.mem, c.offset, c.ld, &rt->queue, NULL);
    return pfx_clblast_error(rt, s, what);
}

pfx_status pfx_gemm_strided_batched(pfx_runtime *rt, const char *what, bool trans_a,
                                    bool trans_b, size_t m, size_t n, size_t k, float alpha,
                                    pfx_gemm_operand a, pfx_gemm_operand b, float beta,
                                    pfx_gemm_operand c, size_t batch)
{
    pfx_status st = check_dims(rt, what, m, n, k, batch);
    if (st != PFX_SUCCESS)
        return st;
    CLBlastStatusCode s = CLBlastSgemmStridedBatched(
        CLBlastLayoutRowMajor, op(trans_a), op(trans_b), m, n, k, alpha, a.mem, a.offset, a.ld,
        a.stride, b.mem, b.offset, b.ld, b.stride, beta, c.mem, c.offset, c.ld, c.stride, batch,
        &rt->queue, NULL);
    return pfx_clblast_error(rt, s, what);
}

pfx_status pfx_gemm_batched(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b,
                            size_t m, size_t n, size_t k, const float *alphas, cl_mem a,
                            const size_t *a_offsets, size_t lda, cl_mem b,
                            const size_t *b_offsets, size_t ldb, const float *betas, cl_mem c,
                            const size_t *c_offsets, size_t ldc, size_t batch)
{
    pfx_status st = check_dims(rt, what, m, n, k, batch);
    if (st != PFX_SUCCESS)
        return st;
    if (!alphas || !betas || !a_offsets || !b_offsets || !c_offsets)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                         "%s: batched gemm needs alphas, betas and the three offset arrays",
                         what ? what : "gemm");
    CLBlastStatusCode s = CLBlastSgemmBatched(CLBlastLayoutRowMajor, op(trans_a), op(trans_b), m,
                                              n, k, alphas, a, a_offsets, lda, b, b_offsets, ldb,
                                              betas, c, c_offsets, ldc, batch, &rt->queue, NULL);
    return pfx_clblast_error(rt, s, what);
}
