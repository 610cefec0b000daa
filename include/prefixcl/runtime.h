/*
 * prefixcl: device discovery and selection, and the per-device runtime.
 *
 * Thread safety: device discovery (pfx_device_*) may be called from any
 * thread. A pfx_runtime and the tensors created from it must be used by one
 * thread at a time (handing it to another thread between calls is fine); two
 * runtimes, even on the same device, are independent and may be used from two
 * threads at once. pfx_last_error(NULL) is per thread. A call that reaches the
 * device (kernel builds, launches, allocations) while another thread is inside
 * the same runtime fails with PFX_ERROR_BUSY, its detail in
 * pfx_last_error(NULL), instead of racing inside the driver; this is a check
 * (one atomic compare-and-swap), not a lock: the program is still wrong.
 */
#ifndef PREFIXCL_RUNTIME_H
#define PREFIXCL_RUNTIME_H

#include "prefixcl/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_runtime pfx_runtime;

typedef enum pfx_device_type {
    PFX_DEVICE_CPU = 1,
    PFX_DEVICE_GPU = 2,
    PFX_DEVICE_ACCELERATOR = 3,
    PFX_DEVICE_OTHER = 4,
} pfx_device_type;

typedef struct pfx_device_info {
    unsigned platform_index; /* P of the "P:D" selector */
    unsigned device_index;   /* D of the "P:D" selector */
    char platform_name[128];
    char device_name[128];
    char vendor[128];
    char driver_version[64];
    char device_version[64];   /* "OpenCL 3.0 ..." */
    char opencl_c_version[64]; /* "OpenCL C 1.2 ..." */
    pfx_device_type type;
    bool unified_memory; /* integrated GPU or CPU: shares host memory */
    unsigned compute_units;
    unsigned clock_mhz;
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    uint64_t local_mem_bytes;
    size_t max_work_group_size;
    unsigned native_float_width; /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT (CPU SIMD lanes) */
    bool has_fp16;               /* cl_khr_fp16 */
    bool has_fp64;               /* cl_khr_fp64 */
    bool has_subgroups;          /* cl_khr_subgroups or cl_intel_subgroups */
    bool has_nv_attributes;      /* cl_nv_device_attribute_query */
    bool has_amd_attributes;     /* cl_amd_device_attribute_query */
    bool has_intel_attributes;   /* cl_intel_device_attribute_query */
} pfx_device_info;

/* Number of OpenCL devices over every platform. 0 devices is PFX_SUCCESS
 * with *count = 0 (no platform at all is also reported as 0). */
PFX_API pfx_status pfx_device_count(size_t *count);

/* Fills up to `capacity` records (platform order, then device order) and
 * sets *count to the total number of devices. */
PFX_API pfx_status pfx_device_list(pfx_device_info *infos, size_t capacity, size_t *count);

/* Resolves a selector to one device.
 *   NULL or ""  : $PREFIXCL_DEVICE if set, else the default policy: the
 *                 strongest GPU (discrete before integrated, then compute
 *                 units x clock), else the first CPU, else any device.
 *   "P:D"       : platform index P, device index D.
 *   "gpu","cpu","accelerator": the strongest device of that type.
 *   other text  : case-insensitive substring of platform, vendor or device
 *                 name ("nvidia", "pocl", "h200"); the strongest match wins.
 * A selector that matches nothing returns PFX_ERROR_DEVICE_NOT_FOUND with a
 * message (pfx_last_error(NULL)) that names it and lists every device. */
PFX_API pfx_status pfx_device_select(const char *selector, pfx_device_info *info);

/* Same, ignoring $PREFIXCL_DEVICE: what the default policy picks. */
PFX_API pfx_status pfx_device_default(pfx_device_info *info);

/* Whether `info` (a record of pfx_device_list) is one of the devices the
 * selector names: "P:D" that one device, a type or a name substring every
 * device of that type or name. A NULL or "" selector (read without
 * $PREFIXCL_DEVICE) matches every device of the default device's type. For
 * spreading processes over the matching devices; an unparsable selector is
 * PFX_ERROR_INVALID_ARGUMENT. */
PFX_API pfx_status pfx_device_matches(const char *selector, const pfx_device_info *info,
                                      bool *match);

/* Where dense products (the projections, the encoder's MLP) run.
 *   PFX_GEMM_AUTO    : $PREFIXCL_GEMM ("host" or "clblast") when set, else the
 *                      host's BLAS on a CPU device whose buffers live in host
 *                      memory (PoCL), else CLBlast.
 *   PFX_GEMM_CLBLAST : CLBlast kernels on the device (any device).
 *   PFX_GEMM_HOST    : the host's CBLAS on mapped buffers, without copies; only
 *                      on a CPU device with host-unified memory, and only when
 *                      the library was built with a CBLAS (else
 *                      PFX_ERROR_UNSUPPORTED at runtime creation). */
typedef enum pfx_gemm_backend {
    PFX_GEMM_AUTO = 0,
    PFX_GEMM_CLBLAST = 1,
    PFX_GEMM_HOST = 2,
} pfx_gemm_backend;

/* OpenBLAS picks its kernels from the CPU model when it loads; on a model it
 * does not know (new CPUs, some VMs) it falls back to SSE3 kernels at a
 * fraction of the speed. Returns the OPENBLAS_CORETYPE that matches this
 * CPU's vector units (AVX2, AVX-512) when OpenBLAS chose weaker kernels and
 * the variable is unset; NULL otherwise (also in a build without the host
 * backend). Only a fresh process can apply it (the prefixcl tool re-executes
 * itself). */
PFX_API const char *pfx_gemm_host_core_hint(void);

typedef struct pfx_runtime_params {
    const char *device; /* selector as for pfx_device_select; NULL: env, then default */
    const char
        *cache_dir;     /* NULL: $PREFIXCL_CACHE_DIR, $XDG_CACHE_HOME/prefixcl, ~/.cache/prefixcl */
    bool disable_cache; /* never read or write kernel binaries on disk */
    /* Attention tile override, lines "<program> NAME=VALUE ..." (program
     * attention_fwd or attention_bwd; the names and values `prefixcl
     * kernel-configs` prints, e.g. "attention_fwd BLOCK_M=32 BLOCK_N=16").
     * A line with HEAD_DIM=C applies to head sizes up to C. The tiles are used
     * as given: an attention call on a device that cannot hold them returns
     * PFX_ERROR_UNSUPPORTED saying why. NULL: $PREFIXCL_TUNING, else the file
     * tuning.txt in the cache folder, else none. A malformed text fails
     * pfx_runtime_create with PFX_ERROR_INVALID_ARGUMENT; a tuning.txt that
     * cannot be read turns the cache folder off (pfx_runtime_cache_note). */
    const char *kernel_tuning;
    bool allow_overcommit; /* allocate past the device's global memory (the
                                 driver may then fail or swap); by default
                                 live_bytes never exceeds global_mem_bytes and
                                 an allocation past it is PFX_ERROR_OUT_OF_MEMORY */
    pfx_gemm_backend gemm; /* PFX_GEMM_AUTO (0) unless set */
    bool gemm_untuned;     /* ignore a stored CLBlast GEMM tuning (prefixcl gemm-tune) */
} pfx_runtime_params;

PFX_API void pfx_runtime_default_params(pfx_runtime_params *params);

/* Creates a runtime on the selected device: context, one in-order queue with
 * profiling, kernel cache, allocation accounting. params may be NULL. On
 * failure *out is NULL and pfx_last_error(NULL) has the detail. */
PFX_API pfx_status pfx_runtime_create(pfx_runtime **out, const pfx_runtime_params *params);

/* Releases everything the runtime owns and sets *rt to NULL. Tensors must be
 * destroyed first. NULL and a pointer to NULL are accepted. */
PFX_API void pfx_runtime_destroy(pfx_runtime **rt);

PFX_API const pfx_device_info *pfx_runtime_device(const pfx_runtime *rt);

/* The GEMM backend this runtime chose (never PFX_GEMM_AUTO; CLBlast for NULL). */
PFX_API pfx_gemm_backend pfx_runtime_gemm_backend(const pfx_runtime *rt);

/* What became of this device's stored CLBlast GEMM tuning (`prefixcl
 * gemm-tune`, a file in the kernel cache folder) when the runtime was
 * created: "applied <file>", "none (<file> absent)", "ignored <file>:
 * <reason>" (a corrupt or foreign file is rejected and CLBlast keeps its own
 * choice), "off" (params.gemm_untuned or no cache folder). CLBlast holds
 * tunings per device for the whole process. Never NULL. */
PFX_API const char *pfx_runtime_gemm_tuning(const pfx_runtime *rt);

/* "clblast", "host" or "auto"; "unknown" for any other value. */
PFX_API const char *pfx_gemm_backend_name(pfx_gemm_backend backend);

/* Waits for everything enqueued on the runtime's queue. */
PFX_API pfx_status pfx_runtime_finish(pfx_runtime *rt);

/* Detail of the last error of this runtime, or of this thread's last call
 * that had no runtime (rt == NULL). Never NULL; "" when there is none. */
PFX_API const char *pfx_last_error(const pfx_runtime *rt);

typedef struct pfx_memory_stats {
    size_t live_bytes;      /* device bytes held now: tensors and workspaces */
    size_t peak_bytes;      /* high-water mark of live_bytes */
    size_t live_buffers;    /* device allocations held now */
    size_t workspace_bytes; /* of live_bytes: the runtime's scratch, kept and reused by ops */
} pfx_memory_stats;

PFX_API pfx_status pfx_runtime_memory(const pfx_runtime *rt, pfx_memory_stats *stats);

typedef struct pfx_cache_stats {
    unsigned programs_built; /* compiled from source in this runtime */
    unsigned cache_hits;     /* loaded from the on-disk binary cache */
    unsigned cache_writes;   /* binaries written to the cache */
    unsigned cache_rejects;  /* cache files found unusable (truncated, corrupt) and rebuilt */
    double build_seconds;    /* wall time spent building programs or loading them from the
                              * cache: the first use of each kernel, which the jobs keep out
                              * of their rates and estimates */
} pfx_cache_stats;

PFX_API pfx_status pfx_runtime_cache_stats(const pfx_runtime *rt, pfx_cache_stats *stats);

/* The cache folder this runtime uses ("" when disabled). */
PFX_API const char *pfx_runtime_cache_dir(const pfx_runtime *rt);

/* Why the runtime runs without its cache folder, "" when it does not: a
 * folder whose tuning.txt cannot be read for another reason than its absence
 * (the folder is a file, a name is too long, no permission) is not used at
 * all, neither for kernel binaries nor for tuning overrides, and
 * pfx_runtime_create still succeeds; the first such runtime of a process
 * also prints this note on stderr. Never NULL. */
PFX_API const char *pfx_runtime_cache_note(const pfx_runtime *rt);

/* Builds (or loads from cache) every embedded kernel program for this device,
 * so later calls do not pay for compilation. */
PFX_API pfx_status pfx_runtime_warm_up(pfx_runtime *rt);

#ifdef __cplusplus
}
#endif

#endif
