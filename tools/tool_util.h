/* Helpers the tool's commands share: seeded random numbers and tensors, a
 * monotonic and the process clock. One copy each (tool_util.c); option values: cli.h. */
#ifndef PFX_TOOLS_TOOL_UTIL_H
#define PFX_TOOLS_TOOL_UTIL_H

#include <stdint.h>

#include "prefixcl/prefixcl.h"

/* splitmix64: the next value of *state, uniform in [-amp, amp). */
float tool_uniform(uint64_t *state, float amp);

/* A new float32 tensor of tool_uniform(rng, amp) values, drawn in order. On
 * failure *out is NULL. */
pfx_status tool_random_tensor(pfx_runtime *rt, unsigned ndim, const size_t *shape, uint64_t *rng,
                              float amp, pfx_tensor **out);

/* Seconds of CLOCK_MONOTONIC. */
double tool_now_s(void);
/* CPU seconds of the whole process (every thread: PoCL's workers too), which
 * on a CPU device shared with other jobs measures the work where wall time
 * measures the contention too. */
double tool_cpu_s(void);

#endif
