/*
 * The framework the benchmark families of `prefixcl bench` share: the state
 * of one device's run (suite), recording, skipping, memory and time checks,
 * timing and benchmark data (bench_suite.c), and the families themselves
 * (bench_ceilings.c: the device ceilings; bench_ops.c: the library's
 * operations). Callers outside the suite use bench.h.
 */
#ifndef PFX_TOOLS_BENCH_FAMILY_H
#define PFX_TOOLS_BENCH_FAMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench.h"

typedef struct suite {
    pfx_runtime *rt;
    bool quick;
    bench_device *dev;
    bench_timing timing;
    bool host_timer;
    bench_progress_fn progress;
    void *user;
    size_t total;
    double fma_gflops; /* measured ceilings; 0 when unknown */
    double copy_gbs;
    double attn_gflops[2]; /* forward, backward rate at shape (a): predicts (c) */
    const char *only;      /* comma-separated id prefixes; NULL: every test */
} suite;

/* --quick skips a test whose one run would take longer than this, predicted
 * from a smaller test of the same operation measured just before. */
#define QUICK_MAX_RUN_S 6.0

/* ---- the framework (bench_suite.c) ---- */

/* The next result slot for test id, or NULL when --only leaves it out or a
 * stop was asked (cli_stop: SIGINT, SIGTERM; then nothing is recorded);
 * reports progress. */
bench_result *suite_begin(suite *s, const char *id, const char *group, const char *label);
/* Marks r skipped with a reason (printf format). */
void suite_skip(bench_result *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Records a failed status as a skip with the library's message. */
void suite_skip_status(suite *s, bench_result *r, pfx_status st);
double suite_mib(double bytes);
/* Whether `total` bytes (largest single buffer `largest`) fit the device;
 * skips r when not. */
bool suite_fits(suite *s, bench_result *r, double total, double largest);
/* In --quick, whether one run would be too slow to time (then r is skipped). */
bool suite_quick_too_slow(suite *s, bench_result *r, double flops, double hint_gflops,
                          const char *hint);
/* Times fn and fills the figures: flops and bytes per run (0: not counted). */
void suite_measure(suite *s, bench_result *r, bench_enqueue_fn fn, void *ctx, double flops,
                   double bytes, bench_ceiling ceiling);
/* A float32 tensor of random values in [-amp, amp] (a 64 Ki-value block
 * written over and over). */
pfx_status suite_random_tensor(pfx_runtime *rt, unsigned ndim, const size_t *shape, uint64_t seed,
                               float amp, pfx_tensor **out);
/* A work-group size the device takes (256 or less). */
size_t suite_local_size(const pfx_device_info *info);

/* The attention shapes (a)-(d), shared by the attention tests and the layer
 * step's FLOP count. */
typedef struct attn_shape {
    char tag;
    size_t B, H, Hkv, N, M, P, D;
    bool causal;
    bool decode; /* memory-bound: judged by GB/s against the copy bandwidth */
} attn_shape;

#define SUITE_ATTN_SHAPES 4
extern const attn_shape suite_attn_shapes[SUITE_ATTN_SHAPES];
/* Visible (query, key) pairs over every item and head. */
double suite_attn_pairs(const attn_shape *sh);

/* ---- the families ---- */
void family_fma_peak(suite *s);
void family_copy_bandwidth(suite *s);
void family_sgemm(suite *s, size_t n, double *hint_gflops);
void family_attention(suite *s, const attn_shape *sh, bool backward);
void family_encoder(suite *s, bool backward);
void family_layer_step(suite *s, double hint_gflops);

#endif
