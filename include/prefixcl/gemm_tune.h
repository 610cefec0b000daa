/*
 * prefixcl: CLBlast GEMM tunings. The tuner behind `prefixcl gemm-tune`
 * searches the spaces CLBlast's own tuners search (Xgemm kernel 0 as its
 * tuner's variation 2, XgemmDirect as its variation 2, both under their
 * rules), each candidate timed on the products the library runs (layer-sized
 * and tiny) and checked against a double-precision dot product on sampled
 * entries; then it picks XGEMM_MIN_INDIRECT_SIZE from the two winners' times
 * per shape, and stores the result for the device in the kernel cache folder,
 * where every later runtime on that device and driver applies it
 * (pfx_runtime_gemm_tuning says what became of it). Candidates are tried in a
 * seeded random order after CLBlast's defaults and a CPU-shaped seed (on CPU
 * devices the CPU-shaped ones of the sample first: each candidate costs a
 * CLBlast build there), until the time limit.
 */
#ifndef PREFIXCL_GEMM_TUNE_H
#define PREFIXCL_GEMM_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/common.h"
#include "prefixcl/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameters of CLBlast's Xgemm and XgemmDirect kernels, in CLBlast's
 * database order (alphabetical). */
enum { PFX_XGEMM_PARAMS = 16, PFX_XGEMM_DIRECT_PARAMS = 10 };

/* CLBlast's name of parameter index of Xgemm (direct false) or XgemmDirect
 * (direct true): "GEMMK", "KWID"; NULL for an index out of range. */
PFX_API const char *pfx_gemm_param_name(bool direct, size_t index);

typedef struct pfx_gemm_tuning {
    size_t xgemm[PFX_XGEMM_PARAMS];
    size_t direct[PFX_XGEMM_DIRECT_PARAMS];
    size_t min_indirect;   /* XGEMM_MIN_INDIRECT_SIZE: products with m n k below its cube
                              take the direct kernel */
    double untuned_gflops; /* informative: the tuner's shapes before and after */
    double tuned_gflops;
} pfx_gemm_tuning;

typedef struct pfx_gemm_tune_shape {
    size_t m, n, k;
    bool trans_a, trans_b;
} pfx_gemm_tune_shape;

/* fraction in [0, 1] of the time limit; phase "untuned", "Xgemm",
 * "XgemmDirect", "threshold", "tuned". */
typedef void (*pfx_gemm_tune_progress)(void *user, double fraction, const char *phase,
                                       unsigned tried, double best_gflops);

typedef struct pfx_gemm_tune_params {
    double time_limit_s; /* > 0; the search stops there (one candidate per kernel at least) */
    const pfx_gemm_tune_shape
        *shapes; /* NULL: the library's shapes (pfx_gemm_tune_default_shapes) */
    size_t shape_count;
    uint64_t seed;
    pfx_gemm_tune_progress progress; /* may be NULL */
    void *user;
} pfx_gemm_tune_params;

typedef struct pfx_gemm_tune_report {
    char path[1200];          /* the file written */
    unsigned tried, rejected; /* candidates timed; failed to build/run or gave wrong results */
    double untuned_gflops;    /* all shapes together, before and after */
    double tuned_gflops;
    pfx_gemm_tuning tuning;
} pfx_gemm_tune_report;

/* The shapes the library runs: GPT-2-width layer products (forward, dX, dW)
 * and the tiny ones of `prefixcl train`, the encoder and a decode step. */
PFX_API size_t pfx_gemm_tune_default_shapes(const pfx_gemm_tune_shape **out);

/* Tunes rt's device (a CLBlast runtime, best created with
 * params.gemm_untuned so that the baseline is CLBlast's own choice) and
 * writes the file into rt's cache folder (refused without one). Leaves the
 * winner applied in the process. */
PFX_API pfx_status pfx_gemm_tune(pfx_runtime *rt, const pfx_gemm_tune_params *params,
                                 pfx_gemm_tune_report *report);

/* Without creating a runtime: the GEMM backend a runtime on this device
 * would choose by default ($PREFIXCL_GEMM included; when it refuses, its
 * error is recorded for the thread and returned, *backend left
 * PFX_GEMM_CLBLAST) and a line on the device's stored tuning in cache_dir
 * (NULL: the default kernel cache folder): "tuned (...)", "not tuned ...",
 * "rejected file ...: reason", "no cache folder". */
PFX_API pfx_status pfx_gemm_device_status(const pfx_device_info *info, const char *cache_dir,
                                          pfx_gemm_backend *backend, char *tuning, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
