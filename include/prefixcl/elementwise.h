/* prefixcl: elementwise operations on tensors. */
#ifndef PREFIXCL_ELEMENTWISE_H
#define PREFIXCL_ELEMENTWISE_H

#include "prefixcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = alpha * x + beta * y over every element (enqueued). x and y have the
 * same element count and runtime; either may be float32, half or bfloat16
 * (Q8_0: PFX_ERROR_DTYPE_MISMATCH).
 * With beta == 0, y's previous contents are not read. alpha and beta must be
 * finite. */
PFX_API pfx_status pfx_axpby(pfx_tensor *y, float alpha, const pfx_tensor *x, float beta);

#ifdef __cplusplus
}
#endif

#endif
