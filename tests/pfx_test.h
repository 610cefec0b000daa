/* Shared by the device test suites: runtime setup that skips (exit 77) when
 * no OpenCL device exists, and accounting checks. */
#ifndef PFX_TEST_H
#define PFX_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prefixcl/prefixcl.h"

#define PFX_TEST_SKIP 77

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
#define assert_status_names(rt, call, status, needle)                                \
    do {                                                                             \
        assert_int_equal((call), (status));                                          \
        if (!strstr(pfx_last_error(rt), (needle)))                                   \
            fail_msg("message '%s' does not name '%s'", pfx_last_error(rt), (needle)); \
    } while (0)

#endif
