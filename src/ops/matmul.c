/* Dense products of tensors (prefixcl/matmul.h). */
#include "gemm.h"

pfx_status pfx_matmul(pfx_runtime *rt, const pfx_tensor *a, const pfx_tensor *b, pfx_tensor *c)
{
    if (!rt || !a || !b || !c)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_matmul: %s is NULL",
                         !rt  ? "rt"
                         : !a ? "a"
                         : !b ? "b"
                              : "c");
    const pfx_tensor *t[3] = { a, b, c };
    static const char *const names[3] = { "a", "b", "c" };
    for (int i = 0; i < 3; i++) {
        if (t[i]->rt != rt)
            return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                             "pfx_matmul: %s is from another runtime", names[i]);
        if (t[i]->dtype != PFX_DTYPE_F32)
            return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "pfx_matmul: %s is not float32",
                             names[i]);
        if (t[i]->ndim != 2)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                             "pfx_matmul: %s has %u dimensions, "
                             "not 2",
                             names[i], t[i]->ndim);
    }
    const size_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    if (b->shape[0] != k || c->shape[0] != m || c->shape[1] != n)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "pfx_matmul: a [%zu, %zu] b [%zu, %zu] c [%zu, %zu] do not agree "
                         "(a [m, k], b [k, n], c [m, n])",
                         m, k, b->shape[0], n, c->shape[0], c->shape[1]);
    if (c == a || c == b)
        return pfx_error(rt, PFX_ERROR_ALIASING, "pfx_matmul: c is also %s", c == a ? "a" : "b");
    return pfx_gemm(rt, "pfx_matmul", false, false, m, n, k, 1.0f, PFX_GEMM_OP(a->mem, 0, k),
                    PFX_GEMM_OP(b->mem, 0, n), 0.0f, PFX_GEMM_OP(c->mem, 0, n));
}
