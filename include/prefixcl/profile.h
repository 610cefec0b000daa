/*
 * prefixcl: profiling and the kernel configurations, for tools and
 * benchmarks that stay on the public API.
 *
 * A span measures the device time of everything enqueued on a runtime
 * between pfx_span_begin and pfx_span_end (one kernel or whole library
 * calls): the time from the end of one marker on the in-order queue to the
 * end of another.
 *
 * The kernel configurations are every kernel program and -D option set the
 * runtime may build, per vendor family: what warm-up builds and what the
 * cross-vendor compile gate compiles.
 */
#ifndef PREFIXCL_PROFILE_H
#define PREFIXCL_PROFILE_H

#include "prefixcl/common.h"
#include "prefixcl/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_span pfx_span;

/* Enqueues the opening marker of a span; *out is set only on success. */
PFX_API pfx_status pfx_span_begin(pfx_runtime *rt, pfx_span **out);
/* Enqueues the closing marker, waits for it and gives the device time since
 * the opening one in *ns. The span is freed and *span NULLed on every
 * outcome. PFX_ERROR_UNSUPPORTED: the device gives no times for markers (the
 * caller may time on the host instead). */
PFX_API pfx_status pfx_span_end(pfx_span **span, uint64_t *ns);

#define PFX_KERNEL_OPTIONS_MAX 256

typedef struct pfx_kernel_config {
    char program[32];                     /* cl/<program>.cl */
    char vendor[16];                      /* "nvidia", "amd", "intel", "cpu" or "other" */
    char options[PFX_KERNEL_OPTIONS_MAX]; /* -D options; "" when none */
} pfx_kernel_config;

/* Every configuration of every vendor family (in the order nvidia, amd,
 * intel, cpu, other; each family with the local memory its devices usually
 * have). Fills up to capacity entries of out (out may be NULL when capacity
 * is 0) and sets *count to the number there are in all. */
PFX_API pfx_status pfx_kernel_configs(pfx_kernel_config *out, size_t capacity, size_t *count);

/* Builds one configuration on rt's device, through the kernel cache.
 * PFX_ERROR_INVALID_ARGUMENT for a program that does not exist,
 * PFX_ERROR_BUILD_FAILED with the build log in pfx_last_error(rt). */
PFX_API pfx_status pfx_kernel_config_build(pfx_runtime *rt, const pfx_kernel_config *config);

#ifdef __cplusplus
}
#endif

#endif
