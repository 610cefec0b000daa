/* The double-precision reference of pfx_matmul (prefixcl/matmul.h). */
#ifndef PFX_TEST_MATMUL_REF_H
#define PFX_TEST_MATMUL_REF_H

#include <stddef.h>

/* c[m x n] = a[m x k] b[k x n], row-major, summed in double. */
void ref_matmul(const float *a, const float *b, double *c, size_t m, size_t k, size_t n);

#endif
