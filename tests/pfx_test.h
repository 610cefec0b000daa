/* Shared by the device test suites: runtime setup that skips (exit 77) when
 * no OpenCL device exists, and accounting checks. */
#ifndef PFX_TEST_H
#define PFX_TEST_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "prefixcl/prefixcl.h"

#define PFX_TEST_SKIP 77

/* ||a - b|| / ||b|| (relative L2, the tolerances' measure) of two float
 * tensors computed on the device (no double reference). */
static inline double pfx_test_rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* Seconds since t0 (CLOCK_MONOTONIC): the time limits of complexity tests. */
static inline double pfx_test_seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* Address-space limits mean nothing under AddressSanitizer (it reserves
 * terabytes of shadow memory): the cost tests then run without one. */
#if defined(__SANITIZE_ADDRESS__)
#define PFX_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PFX_TEST_ASAN 1
#endif
#endif
#ifndef PFX_TEST_ASAN
#define PFX_TEST_ASAN 0
#endif

/* Address space this process holds, in bytes (/proc/self/statm; 0 when it
 * cannot be read): the base of the memory limits of cost tests. */
static inline size_t pfx_test_address_space(void)
{
    FILE *fp = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (fp) {
        if (fscanf(fp, "%lu", &pages) != 1)
            pages = 0;
        fclose(fp);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* A runtime on the default device, or exit 77 when there is no device. */
static inline pfx_runtime *pfx_test_runtime(void)
{
    pfx_runtime *rt = NULL;
    pfx_status st = pfx_runtime_create(&rt, NULL);
    if (st == PFX_ERROR_NO_DEVICE) {
        fprintf(stderr, "no OpenCL device: skipped\n");
        exit(PFX_TEST_SKIP);
    }
    /* The host GEMM run of a suite on a device that cannot use it. */
    const char *gemm = getenv("PREFIXCL_GEMM");
    if (st == PFX_ERROR_UNSUPPORTED && gemm && !strcmp(gemm, "host")) {
        fprintf(stderr, "%s: skipped\n", pfx_last_error(NULL));
        exit(PFX_TEST_SKIP);
    }
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "runtime: %s\n", pfx_last_error(NULL));
        exit(1);
    }
    return rt;
}

static inline int pfx_test_group_setup(void **state)
{
    *state = pfx_test_runtime();
    return 0;
}

static inline int pfx_test_group_teardown(void **state)
{
    pfx_runtime *rt = *state;
    pfx_runtime_destroy(&rt);
    return 0;
}

/* Device bytes held by tensors and objects: the runtime's reusable
 * workspace (which grows and stays) does not count as a leak. */
static inline size_t pfx_test_live_bytes(const pfx_runtime *rt)
{
    pfx_memory_stats m;
    assert_int_equal(pfx_runtime_memory(rt, &m), PFX_SUCCESS);
    assert_true(m.workspace_bytes <= m.live_bytes);
    return m.live_bytes - m.workspace_bytes;
}

/* Asserts the status and that the recorded message names `needle`. */
#define assert_status_names(rt, call, status, needle)                                              \
    do {                                                                                           \
        assert_int_equal((call), (status));                                                        \
        if (!strstr(pfx_last_error(rt), (needle)))                                                 \
            fail_msg("message '%s' does not name '%s'", pfx_last_error(rt), (needle));             \
    } while (0)

#endif
