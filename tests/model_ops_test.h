/*
 * Helpers of the whole-model op suites (test_norm, test_activation,
 * test_rope, test_embedding, test_cross_entropy, test_gemm_weight): random
 * tensors whose host copies hold exactly what the device holds, strided
 * views gathered into double arrays, comparisons against the reference.
 */
#ifndef PFX_MODEL_OPS_TEST_H
#define PFX_MODEL_OPS_TEST_H

#include <math.h>

#include "pfx_test.h"
#include "model_ops.h"
#include "reference/attn_fixture.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

/* A 1-D tensor of n elements uniform in [-amp, amp]; *host = its contents
 * (half-rounded for F16). */
static inline pfx_tensor *mo_upload(pfx_runtime *rt, ref_rng *rng, pfx_dtype dt, size_t n,
                                    float amp, float **host)
{
    pfx_tensor *t = NULL;
    const size_t shape[1] = { n };
    assert_int_equal(attn_upload(rt, rng, dt, 1, shape, amp, host, &t), PFX_SUCCESS);
    return t;
}

/* The same without the host copy (bad-argument tests). */
static inline pfx_tensor *mo_random(pfx_runtime *rt, ref_rng *rng, pfx_dtype dt, size_t n)
{
    float *host = NULL;
    pfx_tensor *t = mo_upload(rt, rng, dt, n, 1.0f, &host);
    free(host);
    return t;
}

static inline float *mo_read(const pfx_tensor *t)
{
    float *x = NULL;
    assert_int_equal(attn_read_all(t, &x), PFX_SUCCESS);
    return x;
}

/* The rows x cols view at offset, row stride ld, of host (as float, and as
 * double for the reference). */
static inline float *mo_gather_f(const float *host, size_t offset, size_t rows, size_t cols,
                                 size_t ld)
{
    float *x = malloc((rows && cols ? rows * cols : 1) * sizeof(float));
    assert_non_null(x);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            x[r * cols + c] = host[offset + r * ld + c];
    return x;
}

static inline double *mo_f2d(const float *x, size_t n)
{
    double *y = malloc((n ? n : 1) * sizeof(double));
    assert_non_null(y);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

static inline double *mo_gather(const float *host, size_t offset, size_t rows, size_t cols,
                                size_t ld)
{
    float *f = mo_gather_f(host, offset, rows, cols, ld);
    double *d = mo_f2d(f, rows * cols);
    free(f);
    return d;
}

static inline void mo_expect_close(const char *what, const double *ref, const float *got, size_t n,
                                   double tol)
{
    const double err = rel_l2(ref, got, n);
    if (!(err <= tol))
        fail_msg("%s: relative L2 error %.3g > %.3g", what, err, tol);
}

/* The view's elements compared with ref; every element outside the view
 * (before, between rows, after) still equals before[]. */
static inline void mo_expect_view(const char *what, const pfx_tensor *t, const float *before,
                                  size_t offset, size_t rows, size_t cols, size_t ld,
                                  const double *ref, double tol)
{
    float *after = mo_read(t);
    float *got = mo_gather_f(after, offset, rows, cols, ld);
    mo_expect_close(what, ref, got, rows * cols, tol);
    const size_t n = pfx_tensor_numel(t);
    for (size_t i = 0; i < n; i++) {
        const bool inside = i >= offset && (i - offset) / ld < rows && (i - offset) % ld < cols;
        if (!inside && memcmp(&after[i], &before[i], sizeof(float)) != 0)
            fail_msg("%s: element %zu outside the view changed (%g -> %g)", what, i,
                     (double)before[i], (double)after[i]);
    }
    free(got);
    free(after);
}

#endif
