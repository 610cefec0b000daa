/*
 * prefixcl bench: shared types of the device benchmark (tools/commands/cmd_bench.c).
 *   bench_timer.c  : warm-up, calibrated run count, medians of spans and events
 *   bench_suite.c  : the fixed suite and the framework of its families
 *                    (bench_family.h): bench_ceilings.c (FMA, copy) and
 *                    bench_ops.c (SGEMM, attention, encoder, layer step)
 *   bench_report.c : text tables, JSON, CSV, --compare
 *   bench_json.c   : cJSON under the project's JSON rule, for --compare files
 *   bench_plot.c   : the --plot bar chart (PNG or SVG through tools/chart/)
 */
#ifndef PFX_TOOLS_BENCH_H
#define PFX_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "prefixcl/prefixcl.h"

#define BENCH_MAX_TESTS   32
#define BENCH_MAX_DEVICES 16

typedef enum bench_ceiling {
    BENCH_CEIL_NONE = 0,
    BENCH_CEIL_FMA = 1,  /* share of the measured float32 FMA peak (GFLOP/s) */
    BENCH_CEIL_COPY = 2, /* share of the measured copy bandwidth (GB/s) */
} bench_ceiling;

typedef struct bench_result {
    char id[32];    /* stable key in JSON/CSV/--compare: "sgemm.1024" */
    char group[40]; /* "CLBlast SGEMM" */
    char label[64]; /* "1024x1024x1024" */
    bool ok;        /* false: skipped, see reason */
    char reason[200];
    unsigned runs; /* timed runs */
    double ms;     /* median device time of one run */
    double ms_min, ms_max;
    double gflops;         /* < 0: not applicable */
    double gbs;            /* < 0: not applicable */
    bench_ceiling ceiling; /* which ceiling `share` refers to */
    double share;          /* percent of that ceiling; < 0 when unknown */
} bench_result;

typedef struct bench_device {
    char selector[16]; /* "P:D" */
    pfx_device_info info;
    char timer[16];       /* "events" or "host" */
    char gemm[16];        /* the runtime's GEMM backend: "host" or "clblast" ("" when unknown) */
    char gemm_tuning[24]; /* the CLBlast tuning: "applied", "none", "ignored", "off" */
    size_t count;
    bench_result tests[BENCH_MAX_TESTS];
} bench_device;

typedef struct bench_run {
    char date[40]; /* ISO 8601, local time */
    bool quick;
    size_t device_count;
    bench_device devices[BENCH_MAX_DEVICES];
} bench_run;

/* ---- bench_timer.c ---- */
typedef struct bench_timing {
    double target_s; /* timed runs until about this much device time */
    unsigned min_runs, max_runs;
} bench_timing;

/* One run of a test: enqueue its work on the runtime's queue. When the work is
 * a single kernel the callback may return that kernel's event in *ev (then it
 * is timed from its start to its end); otherwise leave *ev NULL and the run is
 * timed as a span (prefixcl/profile.h). */
typedef pfx_status (*bench_enqueue_fn)(pfx_runtime *rt, void *ctx, pfx_event **ev);

/* One untimed warm-up run, then timed runs (count from the first timed one),
 * the median in r->ms. On failure returns the status, the message in
 * pfx_last_error(rt) or, for the timer's own failures, in r->reason.
 * *host_timer is set when the device gives no times for spans and host wall
 * time (with a finish per run) was used instead. */
pfx_status bench_measure(pfx_runtime *rt, const bench_timing *timing, bench_enqueue_fn fn,
                         void *ctx, bench_result *r, bool *host_timer);

/* ---- bench_suite.c ---- */
typedef void (*bench_progress_fn)(void *user, const char *test_id, size_t index, size_t total);

/* Runs the fixed suite on one runtime, filling dev->tests. Never stops at a
 * failing test: it is recorded as skipped with its reason. `only`: comma-
 * separated test id prefixes ("sgemm,attn_fwd.a"); NULL runs every test. */
void bench_suite_run(pfx_runtime *rt, bool quick, const char *only, bench_device *dev,
                     bench_progress_fn progress, void *user);
/* Number of tests the suite reports on a device of this type. */
size_t bench_suite_size(const pfx_device_info *info);

/* ---- bench_report.c ---- */
void bench_print_device(FILE *out, const bench_device *dev);
void bench_print_side_by_side(FILE *out, const bench_run *run);
int bench_write_json(FILE *out, const bench_run *run);
int bench_write_csv(FILE *out, const bench_run *run);
/* Loads a saved JSON run; 0 on success, else -1 with a message in err. */
int bench_load_json(const char *path, bench_run *run, char *err, size_t errlen);
/* The same from the file's text (NUL-terminated). */
int bench_parse_json(const char *text, bench_run *run, char *err, size_t errlen);
void bench_print_compare(FILE *out, const bench_run *now, const bench_run *base, const char *path);
/* The test of that id on a device; NULL when it has none. */
const bench_result *bench_find_test(const bench_device *dev, const char *id);
/* The saved device that dev (index-th in its run) is compared with: the one of
 * the same name and platform, else the one at the same index (then
 * *by_position is set), else NULL. */
const bench_device *bench_match_device(const bench_run *base, const bench_device *dev, size_t index,
                                       bool *by_position);
/* The figure a test is judged by (GB/s for memory-bound tests, else GFLOP/s)
 * and its unit; < 0 when the test has none. */
double bench_primary(const bench_result *r, const char **unit);

/* ---- bench_plot.c ---- */
/* Horizontal bars, one group per test, one bar per device (and per saved
 * device when base is not NULL): the figure and its unit on the bar, the
 * device's ceiling as a marker with the share beside it, the change against
 * base in percent beside the group. PNG, or SVG for a ".svg" name. Returns a
 * chart.h code (CHART_UNAVAILABLE in a build without cairo). */
int bench_plot(const char *path, const bench_run *run, const bench_run *base);

#endif
