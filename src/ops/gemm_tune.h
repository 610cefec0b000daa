/*
 * The CLBlast GEMM tuner behind `prefixcl gemm-tune` (internal). It searches
 * the spaces CLBlast's own tuners search (Xgemm kernel 0 as its tuner's
 * variation 2, XgemmDirect as its variation 2, both under their rules), each
 * candidate through CLBlastOverrideParameters, timed on the products the
 * library runs (layer-sized and tiny) and checked against a double-precision
 * dot product on sampled entries; then it picks XGEMM_MIN_INDIRECT_SIZE from
 * the two winners' times per shape, and stores the result for the device
 * (gemm_tuning.h). Candidates are tried in a seeded random order after
 * CLBlast's defaults and a CPU-shaped seed (on CPU devices the CPU-shaped
 * ones of the sample first: each candidate costs a CLBlast build there),
 * until the time limit.
 */
#ifndef PFX_OPS_GEMM_TUNE_H
#define PFX_OPS_GEMM_TUNE_H

#include "gemm_tuning.h"

typedef struct pfx_gemm_tune_shape {
    size_t m, n, k;
    bool trans_a, trans_b;
} pfx_gemm_tune_shape;

/* fraction in [0, 1] of the time limit; phase "untuned", "Xgemm",
 * "XgemmDirect", "threshold", "tuned". */
typedef void (*pfx_gemm_tune_progress)(void *user, double fraction, const char *phase,
                                       unsigned tried, double best_gflops);

typedef struct pfx_gemm_tune_params {
    double time_limit_s;                /* > 0; the search stops there (one candidate per kernel at least) */
    const pfx_gemm_tune_shape *shapes;  /* NULL: the library's shapes (pfx_gemm_tune_default_shapes) */
    size_t shape_count;
    uint64_t seed;
    pfx_gemm_tune_progress progress;    /* may be NULL */
    void *user;
} pfx_gemm_tune_params;

typedef struct pfx_gemm_tune_report {
    char path[1200];           /* the file written */
    unsigned tried, rejected;  /* candidates timed; failed to build/run or gave wrong results */
    double untuned_gflops;     /* all shapes together, before and after */
    double tuned_gflops;
    pfx_gemm_tuning tuning;
} pfx_gemm_tune_report;

/* The shapes the library runs: GPT-2-width layer products (forward, dX, dW)
 * and the tiny ones of `prefixcl train`, the encoder and a decode step. */
size_t pfx_gemm_tune_default_shapes(const pfx_gemm_tune_shape **out);

/* Tunes rt's device and writes the file into rt's cache folder (refused
 * without one). Leaves the winner applied in the process. */
pfx_status pfx_gemm_tune(pfx_runtime *rt, const pfx_gemm_tune_params *params,
                         pfx_gemm_tune_report *report);

#endif
