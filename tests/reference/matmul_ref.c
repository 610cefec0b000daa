/* The double-precision reference of pfx_matmul (matmul_ref.h). */
#include "matmul_ref.h"

void ref_matmul(const float *a, const float *b, double *c, size_t m, size_t k, size_t n)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t p = 0; p < k; p++)
                s += (double)a[i * k + p] * (double)b[p * n + j];
            c[i * n + j] = s;
        }
}
