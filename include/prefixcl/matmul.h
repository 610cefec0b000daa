/*
 * prefixcl: dense matrix products of tensors, through the runtime's GEMM
 * backend (CLBlast, or the host BLAS on CPU devices whose memory is the
 * host's; include/prefixcl/runtime.h).
 */
#ifndef PREFIXCL_MATMUL_H
#define PREFIXCL_MATMUL_H

#include "prefixcl/common.h"
#include "prefixcl/runtime.h"
#include "prefixcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C = A B for row-major float32 2-D tensors A [m, k], B [k, n], C [m, n] of
 * one runtime; C is neither A nor B. Enqueued; the result is there for the
 * next command on the runtime. */
PFX_API pfx_status pfx_matmul(pfx_runtime *rt, const pfx_tensor *a, const pfx_tensor *b,
                              pfx_tensor *c);

#ifdef __cplusplus
}
#endif

#endif
