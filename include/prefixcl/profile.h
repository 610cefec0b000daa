/*
 * prefixcl: profiling and the kernel configurations, for tools and
 * benchmarks that stay on the public API.
 *
 * A span measures the device time of everything enqueued on a runtime
 * between pfx_span_begin and pfx_span_end (one kernel or whole library
 * calls): the time from the end of one marker on the in-order queue to the
 * end of another.
 *
 * An event times one command alone, from its start to its end.
 *
 * The peak kernels (cl/peak.cl) measure a device's ceilings as clpeak does:
 * float32 multiply-add throughput at each vector width and global-memory
 * copy bandwidth.
 *
 * The kernel configurations are every kernel program and -D option set the
 * runtime may build, per vendor family: what warm-up builds and what the
 * cross-vendor compile gate compiles.
 */
#ifndef PREFIXCL_PROFILE_H
#define PREFIXCL_PROFILE_H

#include "prefixcl/common.h"
#include "prefixcl/runtime.h"
#include "prefixcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_span pfx_span;

/* Enqueues the opening marker of a span; *out is set only on success. */
PFX_API pfx_status pfx_span_begin(pfx_runtime *rt, pfx_span **out);
/* Enqueues the closing marker; does not wait. Once per span. */
PFX_API pfx_status pfx_span_end(pfx_span *span);
/* Waits for the closing marker and gives the device time since the opening
 * one in *ns. PFX_ERROR_UNSUPPORTED: the device gives no times for markers,
 * or stamps both with the same instant (rusticl); the caller may time on the
 * host instead. */
PFX_API pfx_status pfx_span_time_ns(pfx_span *span, uint64_t *ns);
/* Releases *span (ended or not) and NULLs it; NULL-safe. */
PFX_API void pfx_span_release(pfx_span **span);

/* Launch statistics: where the time of a stretch of library calls goes.
 * While on, every kernel the runtime enqueues keeps its event and the host
 * time its launch took (setting arguments and enqueueing: the launch path);
 * dense products on the host BLAS keep their host time. Reading waits for
 * the kernels. device_ns is the sum of the kernels' own times (the device's
 * busy time, without its idle gaps); CLBlast's kernels are not counted. */
typedef struct pfx_launch_stats {
    uint64_t kernels;      /* kernels enqueued */
    uint64_t device_ns;    /* sum of their start-to-end times on the device */
    uint64_t enqueue_ns;   /* host time in the launch path */
    uint64_t host_gemms;   /* products run on the host BLAS */
    uint64_t host_gemm_ns; /* their host time (mapping included) */
} pfx_launch_stats;

/* Switches the statistics on (clearing them) or off (dropping them). */
PFX_API pfx_status pfx_launch_stats_enable(pfx_runtime *rt, bool on);
/* Waits for the kernels counted so far and gives the totals since the
 * statistics were switched on; PFX_ERROR_INVALID_ARGUMENT while they are
 * off; PFX_ERROR_UNSUPPORTED when the device gives no kernel times. */
PFX_API pfx_status pfx_launch_stats_read(pfx_runtime *rt, pfx_launch_stats *out);

typedef struct pfx_event pfx_event;

/* Nanoseconds from the start to the end of the command (waits for it).
 * PFX_ERROR_UNSUPPORTED when the device gives no times for it. */
PFX_API pfx_status pfx_event_time_ns(pfx_event *event, uint64_t *ns);
/* Releases *event and NULLs it; NULL-safe. */
PFX_API void pfx_event_release(pfx_event **event);

typedef enum pfx_peak_kernel {
    PFX_PEAK_FMA_F1 = 0, /* two dependent chains of float mads per work-item */
    PFX_PEAK_FMA_F2,
    PFX_PEAK_FMA_F4,
    PFX_PEAK_FMA_F8,
    PFX_PEAK_FMA_F16,
    PFX_PEAK_FMA_ILP_F4, /* eight chains (CPU devices other than Mesa's rusticl only:
                          * PFX_ERROR_UNSUPPORTED elsewhere) */
    PFX_PEAK_FMA_ILP_F8,
    PFX_PEAK_FMA_ILP_F16,
    PFX_PEAK_COPY, /* float4 copy: 32 bytes read and written per work-item */
    PFX_PEAK_KERNEL_COUNT
} pfx_peak_kernel;

/* FLOPs of one work-item of an FMA kernel (4096; 32768 with eight chains);
 * 0 for PFX_PEAK_COPY and out-of-range values. */
PFX_API double pfx_peak_flops_per_item(pfx_peak_kernel kernel);

/* Enqueues one run of kernel over global work-items in groups of local
 * (global a multiple of local; local at most the device's work-group size).
 * FMA kernels write one float per work-item to out (float32, at least global
 * values) and take no in; PFX_PEAK_COPY copies 4 * global floats from in to
 * out (both float32, at least that long, distinct). When event is not NULL it
 * receives the run's event (release it with pfx_event_release). */
PFX_API pfx_status pfx_peak_enqueue(pfx_runtime *rt, pfx_peak_kernel kernel, size_t global,
                                    size_t local, const pfx_tensor *in, pfx_tensor *out,
                                    pfx_event **event);

/* The device's float32 FMA ceiling in GFLOP/s as prefixcl bench measures
 * it (peak.fma): the best over the FMA kernels above (eight chains on CPU
 * devices) of the median of runs of 64 Ki work-items a compute unit, timed
 * by their events (the host's wall time where the device gives none), in
 * about `seconds` (in (0, 3600]). The denominator of a model FLOPs
 * utilization (model.h, pfx_model_train_flops). */
PFX_API pfx_status pfx_peak_fma_gflops(pfx_runtime *rt, double seconds, double *gflops);

#define PFX_KERNEL_OPTIONS_MAX 384

typedef struct pfx_kernel_config {
    char program[32];                     /* cl/<program>.cl */
    char vendor[16];                      /* "nvidia", "amd", "intel", "cpu", "other"; "device" */
    char options[PFX_KERNEL_OPTIONS_MAX]; /* -D options; "" when none */
    char tuning_entry[128];               /* the attention tuning database entry the tiles come
                                             from: "nvidia/default/default" */
    uint64_t local_mem_bytes;             /* local memory the tiles were fitted to */
} pfx_kernel_config;

/* Every configuration of every vendor family (in the order nvidia, amd,
 * intel, cpu, other; each family with the local memory its devices usually
 * have). Fills up to capacity entries of out (out may be NULL when capacity
 * is 0) and sets *count to the number there are in all. */
PFX_API pfx_status pfx_kernel_configs(pfx_kernel_config *out, size_t capacity, size_t *count);

/* What rt itself builds (what pfx_runtime_warm_up compiles): the
 * configurations of its device's database entry, with rt's kernel tuning
 * override applied and tiles the device cannot hold left out; vendor
 * "device". Fills out as pfx_kernel_configs does. */
PFX_API pfx_status pfx_runtime_kernel_configs(pfx_runtime *rt, pfx_kernel_config *out,
                                              size_t capacity, size_t *count);

/* The kernel tuning override a runtime created now with default parameters
 * would apply: $PREFIXCL_TUNING if set, else tuning.txt in the default
 * kernel cache folder. */
typedef struct pfx_kernel_tuning_override {
    bool present;
    char source[1100];    /* "$PREFIXCL_TUNING" or the file's path; "" when none */
    char text[1024];      /* normalized: one line per override, options spelled out */
    char cache_dir[1024]; /* the folder looked in; "" when caching is off */
} pfx_kernel_tuning_override;

/* PFX_ERROR_INVALID_ARGUMENT (message for the thread) when the override
 * there does not parse. */
PFX_API pfx_status pfx_kernel_tuning_override_get(pfx_kernel_tuning_override *out);

/* Builds one configuration on rt's device, through the kernel cache.
 * PFX_ERROR_INVALID_ARGUMENT for a program that does not exist,
 * PFX_ERROR_BUILD_FAILED with the build log in pfx_last_error(rt). */
PFX_API pfx_status pfx_kernel_config_build(pfx_runtime *rt, const pfx_kernel_config *config);

#ifdef __cplusplus
}
#endif

#endif
