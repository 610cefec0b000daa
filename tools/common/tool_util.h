/* Helpers the tool's commands share: seeded random numbers and tensors, the
 * runtime of a command, a monotonic and the process clock, the median of
 * timings. One copy each (tool_util.c); option values: cli.h. */
#ifndef PFX_TOOLS_TOOL_UTIL_H
#define PFX_TOOLS_TOOL_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "prefixcl/prefixcl.h"

/* OpenBLAS reads its settings when it loads: restarts the program (argv,
 * once) with OPENBLAS_CORETYPE when OpenBLAS chose kernels too weak for this
 * CPU, and with OPENBLAS_THREAD_TIMEOUT=4 unless set (idle OpenBLAS threads
 * otherwise spin after each product on the cores that PoCL's kernels run on
 * next: a GPT-2 prefill's kernels on 2 cores took 62 ms spinning, 35 ms
 * sleeping), and with OMP_WAIT_POLICY=passive unless set (the few-row
 * products' OpenMP threads likewise: GNU OpenMP spins about 300,000 pauses
 * after each region, milliseconds on Skylake; a decode step on a loaded
 * 2-core machine went from 57-67 to 100-460 ms spinning). Returns only when
 * no restart is needed or it failed. */
void tool_openblas_settings(char **argv);

/* In a benchmark's main: runs call, and on failure exits 1 naming the call,
 * its status and rt's last error. */
#define TOOL_CHECK_EXIT(rt, call)                                                                  \
    do {                                                                                           \
        pfx_status st_ = (call);                                                                   \
        if (st_ != PFX_SUCCESS) {                                                                  \
            fprintf(stderr, "%s: %s (%s)\n", #call, pfx_status_string(st_), pfx_last_error(rt));   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The weight storages --storage takes, NULL-terminated, each at the index of
 * its pfx_dtype: "f32", "f16", "bf16" (a CLI_CHOICE's index is the dtype). */
extern const char *const tool_storages[];
/* The KV cache storages --kv-dtype takes, the same way: "f32", "f16", "bf16". */
extern const char *const tool_kv_dtypes[];

/* The pfx_dtype of a --storage name; false (nothing set) for another name. */
bool tool_storage_parse(const char *name, pfx_dtype *out);
/* The same for a --kv-dtype name. */
bool tool_kv_dtype_parse(const char *name, pfx_dtype *out);

/* splitmix64: the next value of *state, uniform in [-amp, amp). */
float tool_uniform(uint64_t *state, float amp);

/* A new float32 tensor of tool_uniform(rng, amp) values, drawn in order. On
 * failure *out is NULL. */
pfx_status tool_random_tensor(pfx_runtime *rt, unsigned ndim, const size_t *shape, uint64_t *rng,
                              float amp, pfx_tensor **out);

/* A runtime on the device a command was given (selector NULL: the default,
 * $PREFIXCL_DEVICE first), or NULL after "prefixcl <command>: <why>" on
 * stderr. */
pfx_runtime *tool_runtime(const char *command, const char *selector);

/* The device's float32 FMA peak in GFLOP/s, the denominator of the model
 * FLOPs utilization: `given` when positive, else the one cached for the
 * device in the kernel cache's fma_peak.txt, else measured as prefixcl bench
 * measures it (pfx_peak_fma_gflops, about a quarter second on a quiet
 * machine) and cached there: measured once a device, not at every run; 0
 * after a note on stderr when it cannot be measured. */
double tool_fma_peak(const char *command, pfx_runtime *rt, double given);

/* The model FLOPs utilization in percent: tokens/s times the FLOPs of a
 * token (pfx_model_train_flops) over the peak of `devices` devices; 0
 * without a peak. */
double tool_mfu(double tokens_per_s, double flops_per_token, double peak_gflops, size_t devices);

/* 1 after printing "prefixcl COMMAND: " and pfx_last_error(NULL) when a
 * dist.h call failed (st), else 0. */
int tool_dist_failed(const char *command, pfx_status st);

/* GPT-2 small's shape (12 layers, 12 heads, 768 wide, 50257 tokens, tied
 * head) with seeded random weights (pfx_model_create_random), for the
 * benchmarks: the config.json goes to a temporary folder that is removed
 * again. On failure *out is NULL and pfx_last_error(rt) says why. */
pfx_status tool_gpt2_small_random(pfx_runtime *rt, const pfx_model_params *params, uint64_t seed,
                                  pfx_model **out);

/* An attention map [rows, P + M] as CSV: header "query,p0..,<key_tag>0..",
 * then one line per row named "<row_tag>i". 0, or -1 with errno set. */
int tool_write_map_csv(const char *path, const float *map, size_t rows, size_t P, size_t M,
                       char key_tag, char row_tag);

/* Removes dir/name when it is there: an earlier run's output that this run
 * does not write, which would pass for this run's. True, or false after
 * "prefixcl COMMAND: cannot remove the stale PATH: why" on stderr. */
bool tool_remove_stale(const char *command, const char *dir, const char *name);

/* How tune and eval built their examples (data.h), one line: "examples:
 * N special tokens a text (the tokenizer's post-processor), EOS (id E)
 * appended, at most M tokens", with the options that change it. */
void tool_print_example_rule(FILE *out, const pfx_example_rule *rule);

/* Kernel building as a phase of its own: once (*said), when a job's step
 * reports `seconds` of it (>= 0.05 s), one line on `out` saying that the
 * rates and the estimate leave it out, after clearing a progress bar's line
 * when `tty`. Returns whether it printed. */
bool tool_say_builds(FILE *out, bool tty, double seconds, bool *said);

/* Seconds of CLOCK_MONOTONIC. */
double tool_now_s(void);
/* CPU seconds of the whole process (every thread: PoCL's workers too), which
 * on a CPU device shared with other jobs measures the work where wall time
 * measures the contention too. */
double tool_cpu_s(void);

/* "cpu", "gpu", "accelerator" or "other". */
const char *tool_device_type(pfx_device_type type);

/* s as a JSON string, quotes and escapes included. */
void tool_json_string(FILE *out, const char *s);

/* qsort's order of doubles (ascending). */
int tool_cmp_double(const void *a, const void *b);
/* The median of x[0, n) (n > 0; the mean of the middle two for even n),
 * sorting x in place. */
double tool_median(double *x, size_t n);
/* The q-quantile (0 <= q <= 1) of sorted[0, n) (n > 0), interpolated
 * linearly between the neighbouring ranks as numpy's default does. */
double tool_quantile(const double *sorted, size_t n, double q);

#endif
