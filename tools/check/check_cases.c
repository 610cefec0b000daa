/* The table of `prefixcl check` cases and the row printer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

void check_report(check_totals *totals, const char *op, const char *shape, pfx_status status,
                  pfx_runtime *rt, double error, double tolerance)
{
    bool ok = status == PFX_SUCCESS && error <= tolerance; /* NaN fails */
    totals->run++;
    totals->passed += ok;
    if (status != PFX_SUCCESS)
        printf("%-22s %-56s %12s %12.1e  FAIL (%s)\n", op, shape, "-", tolerance,
               pfx_last_error(rt));
    else
        printf("%-22s %-56s %12.2e %12.1e  %s\n", op, shape, error, tolerance,
               ok ? "pass" : "FAIL");
}

/* axpby on a float32 and a half destination of awkward length. */
static void check_axpby(pfx_runtime *rt, check_totals *totals)
{
    const size_t n = 1031;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *got = malloc(n * sizeof(float));
    for (pfx_dtype dt = PFX_DTYPE_F32; dt <= PFX_DTYPE_F16; dt++) {
        pfx_tensor *tx = NULL, *ty = NULL;
        double num = 0, den = 0;
        unsigned seed = 12345;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            x[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
            y[i] = (float)((seed >> 4) % 997) / 500.0f - 1.0f;
        }
        pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &tx);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(rt, dt, 1, &n, &ty);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_write(tx, 0, n, x);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_write(ty, 0, n, y);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_read(ty, 0, n, y); /* what the device holds (half-rounded) */
        if (st == PFX_SUCCESS)
            st = pfx_axpby(ty, 0.75f, tx, -1.25f);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_read(ty, 0, n, got);
        for (size_t i = 0; st == PFX_SUCCESS && i < n; i++) {
            double want = 0.75 * x[i] - 1.25 * y[i];
            num += (got[i] - want) * (got[i] - want);
            den += want * want;
        }
        check_report(totals, "axpby", dt == PFX_DTYPE_F32 ? "n=1031 f32" : "n=1031 f16", st, rt,
                     sqrt(num / den), dt == PFX_DTYPE_F32 ? 1e-6 : 1e-3);
        pfx_tensor_destroy(&tx);
        pfx_tensor_destroy(&ty);
    }
    free(x);
    free(y);
    free(got);
}

const check_case check_cases[] = {
    check_axpby,
    check_attention_forward,
    check_attention_backward,
    check_attention_stats,
};
const size_t check_case_count = sizeof(check_cases) / sizeof(check_cases[0]);
