/*
 * Internal runtime interface of src/runtime, for every floor above it. Not installed.
 */
#ifndef PFX_RUNTIME_INTERNAL_H
#define PFX_RUNTIME_INTERNAL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdatomic.h>
#include <stdio.h>

#include "prefixcl/prefixcl.h"

#define PFX_ERROR_MAX 16384

/* Vendor family that picks kernel tile defaults (see src/ops/attention_tuning_db.c). */
typedef enum pfx_vendor {
    PFX_VENDOR_OTHER = 0,
    PFX_VENDOR_NVIDIA,
    PFX_VENDOR_AMD,
    PFX_VENDOR_INTEL_GPU,
    PFX_VENDOR_CPU,
} pfx_vendor;

typedef struct pfx_program_entry {
    char *key; /* program name + '\n' + options */
    cl_program program;
} pfx_program_entry;

/* A kernel of an embedded program, found again by the three names alone:
 * the source is read, joined and hashed only on the first launch. */
typedef struct pfx_kernel_entry {
    cl_program program;
    char *program_name;
    char *options;
    char *name;
    cl_kernel kernel;
} pfx_kernel_entry;

/* Slots of the runtime-owned workspace (src/runtime/workspace.c). One call
 * uses each slot for one purpose; calls follow each other on the in-order
 * queue, so the next call's writes come after the last one's reads. */
typedef enum pfx_ws_slot {
    PFX_WS_PARAMS_HEAD = 0, /* attention: per-head scales and structured gains */
    PFX_WS_PARAMS_ITEMS,    /* attention: per-item lengths and bank indices */
    PFX_WS_PARAMS_DSCALE,   /* attention backward: d c_h / d g_h */
    PFX_WS_TMP0,            /* per-op scratch (split-K partials, Delta, ...) */
    PFX_WS_TMP1,
    PFX_WS_TMP2,
    PFX_WS_TMP3,
    PFX_WS_TMP4,
    PFX_WS_SLOTS
} pfx_ws_slot;

struct pfx_runtime {
    pfx_device_info info;
    pfx_vendor vendor;
    pfx_gemm_backend gemm;  /* never PFX_GEMM_AUTO */
    char gemm_tuning[1700]; /* what became of the stored CLBlast tuning (pfx_runtime_gemm_tuning) */
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;

    pfx_memory_stats memory;
    pfx_cache_stats cache;
    char cache_dir[1024];  /* "" when the disk cache is off */
    char cache_note[1200]; /* why the cache folder went unused (pfx_runtime_cache_note) */

    cl_mem workspace[PFX_WS_SLOTS];
    size_t workspace_bytes[PFX_WS_SLOTS];
    /* What the last pfx_workspace_upload wrote in a slot, while nothing else
     * may have written it (NULL: unknown); an upload of the same bytes
     * enqueues nothing. */
    void *workspace_shadow[PFX_WS_SLOTS];
    size_t workspace_shadow_bytes[PFX_WS_SLOTS];

    pfx_program_entry *programs;
    size_t program_count;
    pfx_kernel_entry *kernels;
    size_t kernel_count;

    /* Attention tile override (src/ops/attention_tuning.h); NULL: none. */
    struct pfx_attn_override *attn_override;
    bool allow_overcommit;    /* pfx_runtime_params.allow_overcommit */
    _Atomic(uintptr_t) owner; /* the thread inside the runtime (0: none), see guard.c */
    unsigned owner_depth;     /* nested enters of that thread */

    struct pfx_launch_log *launch_log; /* pfx_launch_stats_enable; NULL: off */

    char error[PFX_ERROR_MAX];
};

struct pfx_tensor {
    pfx_runtime *rt;
    cl_mem mem;
    pfx_dtype dtype;
    unsigned ndim;
    size_t shape[PFX_MAX_DIMS];
    size_t numel;
    size_t bytes;
    /* The storage's host address, kept once the host decode step mapped it
     * (devices whose buffers are host memory, where every map returns that
     * same address: tests/test_encoder.c), else NULL. */
    void *host;
};

/* The storage code that kernels take for a tensor's elements (cl/common.cl,
 * pfx_load and pfx_store): 0 float32, 1 half, 2 bfloat16; 3 Q8_0 (read by
 * pfx_load_weight alone). */
static inline cl_int pfx_storage_code(pfx_dtype dtype)
{
    return dtype == PFX_DTYPE_F16    ? 1
           : dtype == PFX_DTYPE_BF16 ? 2
           : dtype == PFX_DTYPE_Q8_0 ? 3
                                     : 0;
}

/* ---- errors (src/runtime/error.c) ---- */
/* Records a message for rt (or the thread when rt is NULL) and returns status. */
pfx_status pfx_error(pfx_runtime *rt, pfx_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Maps an OpenCL error to a status (allocation failures to OUT_OF_MEMORY)
 * and records "<what>: <CL_ERROR_NAME>". */
pfx_status pfx_cl_error(pfx_runtime *rt, cl_int err, const char *what);
const char *pfx_cl_error_name(cl_int err);
/* Appends text to the recorded message (build logs). */
void pfx_error_append(pfx_runtime *rt, const char *text);

/* ---- launch statistics (src/runtime/launch_stats.c) ---- */
/* Host time now, ns (CLOCK_MONOTONIC). */
uint64_t pfx_host_ns(void);
/* The same in seconds. */
static inline double pfx_host_seconds(void)
{
    return 1e-9 * (double)pfx_host_ns();
}

/* splitmix64 (Steele, Lea and Flood, 2014): the library's one seeded
 * generator (initial weights, data order, sampling, tuning order); state
 * advanced, 64 random bits returned. */
static inline uint64_t pfx_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
/* Records a launched kernel (takes ev; NULL: none) and the host time of its
 * launch path, or a host product's time. No-ops while the statistics are off. */
void pfx_launch_log_kernel(pfx_runtime *rt, cl_event ev, uint64_t enqueue_ns);
void pfx_launch_log_host_gemm(pfx_runtime *rt, uint64_t ns);
/* Frees the log (runtime destruction). */
void pfx_launch_log_free(pfx_runtime *rt);

/* ---- one thread at a time (src/runtime/guard.c) ---- */
/* Marks the calling thread as inside rt (nesting allowed); PFX_ERROR_BUSY,
 * recorded for the calling thread (pfx_last_error(NULL)), when another thread
 * is inside. Every successful enter is paired with a leave. */
pfx_status pfx_rt_enter(pfx_runtime *rt, const char *what);
void pfx_rt_leave(pfx_runtime *rt);

/* ---- files (src/runtime/file.c) ---- */
/* Opens an existing file for reading without blocking on a FIFO or a device:
 * NULL (errno set) when it cannot be opened, NULL with *not_regular set when
 * it is anything but a regular file. */
FILE *pfx_fopen_regular(const char *path, bool *not_regular);

/* ---- checked size arithmetic ---- */
static inline bool pfx_mul_overflows(size_t a, size_t b, size_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

/* a / b rounded up (b > 0). */
static inline size_t pfx_ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* ---- shape text (src/runtime/tensor.c) ---- */
/* "[2, 3, 4]" (truncated to cap) for error messages. */
void pfx_shape_text(char *buf, size_t cap, unsigned ndim, const size_t *shape);

/* Zeroes elements [offset, offset + count) of a float32 tensor (in range):
 * one fill enqueued, nothing waited for. */
pfx_status pfx_tensor_zero_range(pfx_tensor *t, size_t offset, size_t count);

/* t's storage seen with another shape (ndim of a, b, c, d): a stack copy of
 * the handle, not owned, for an op that reads a workspace at a call's shape. */
pfx_tensor pfx_tensor_view(const pfx_tensor *t, unsigned ndim, size_t a, size_t b, size_t c,
                           size_t d);

/* ---- device memory with accounting (src/runtime/memory.c) ---- */
/* Allocates a device buffer; host_copy may be NULL. Zero bytes is refused. */
pfx_status pfx_buffer_create(pfx_runtime *rt, size_t bytes, const void *host_copy, cl_mem *out);
void pfx_buffer_release(pfx_runtime *rt, cl_mem mem, size_t bytes);

/* ---- runtime lifecycle (src/runtime/runtime.c) ---- */
/* A runtime on the device params select: context, in-order profiling queue
 * and cache folder, nothing of the ops yet (pfx_runtime_create, in
 * src/ops/runtime_setup.c, adds their setup). Errors are recorded for the
 * thread; *out is NULL on failure. */
pfx_status pfx_runtime_open(const pfx_runtime_params *params, pfx_runtime **out);

/* ---- the runtime's workspace (src/runtime/workspace.c) ---- */
/* A buffer of at least `bytes` in `slot`, kept for later calls; it grows (the
 * old one lives on until the commands using it are done). Its content is
 * whatever the last user left; the caller may write it. */
pfx_status pfx_workspace_get(pfx_runtime *rt, pfx_ws_slot slot, size_t bytes, cl_mem *out);
/* The same, filled with `bytes` of `data` by a non-blocking write from a
 * private host copy (freed when the write completes): nothing waits. When the
 * slot already holds these bytes from the last upload, nothing is enqueued:
 * every command is one more wake-up of the device's threads, and on a CPU
 * device shared with other work each is a chance to wait for a core. */
pfx_status pfx_workspace_upload(pfx_runtime *rt, pfx_ws_slot slot, const void *data, size_t bytes,
                                cl_mem *out);
/* Tells the workspace that a command writes the buffer a pfx_workspace_upload
 * returned: the next upload writes again. */
void pfx_workspace_written(pfx_runtime *rt, pfx_ws_slot slot);
void pfx_workspace_release(pfx_runtime *rt);

/* ---- programs and kernels (src/runtime/program.c) ---- */
/* Returns a kernel of program `program` (a cl/<program>.cl file) built with
 * `options` (-D tile sizes); built, loaded from the disk cache or reused.
 * The kernel is owned by the runtime. */
pfx_status pfx_kernel_get(pfx_runtime *rt, const char *program, const char *options,
                          const char *kernel_name, cl_kernel *out);
/* Builds an arbitrary source (tests, the compile gate). */
pfx_status pfx_program_get_source(pfx_runtime *rt, const char *name, const char *source,
                                  const char *options, cl_program *out);

/* ---- embedded kernel sources (generated by cl/embed_cl.py) ---- */
typedef struct pfx_embedded_source {
    const char *name; /* file name without .cl */
    const char *source;
} pfx_embedded_source;
extern const pfx_embedded_source pfx_embedded_sources[];
extern const size_t pfx_embedded_source_count;
/* Source of cl/<name>.cl: from $PREFIXCL_KERNEL_DIR when set, else embedded.
 * Returned string is malloc'ed; NULL when not found. */
char *pfx_kernel_source(const char *name);

/* ---- enqueue helpers (src/runtime/launch.c) ---- */
typedef struct pfx_arg {
    size_t size;
    const void *value;
} pfx_arg;
#define PFX_ARG(x)       ((pfx_arg){ sizeof(x), &(x) })
#define PFX_LOCAL(bytes) ((pfx_arg){ (bytes), NULL })
/* Sets args and enqueues an ND-range (dims 1..3). global is rounded up to a
 * multiple of local by the caller. */
pfx_status pfx_launch(pfx_runtime *rt, cl_kernel kernel, const char *what, unsigned dims,
                      const size_t *global, const size_t *local, size_t nargs, const pfx_arg *args);

/* Work-groups for a grid-stride loop over n items with `local` per group:
 * ceil(n / local), at most 4096 (the loop covers the rest), at least 1. */
size_t pfx_grid_groups(size_t n, size_t local);

/* Kernel `name` of cl/<program>.cl with options, launched over
 * `groups` work-groups of `local` items in one dimension. */
pfx_status pfx_launch_groups(pfx_runtime *rt, const char *program, const char *options,
                             const char *name, const char *what, size_t groups, size_t local,
                             size_t nargs, const pfx_arg *args);

/* A grid-stride kernel over n items: pfx_grid_groups(n, 64) groups of 64. */
pfx_status pfx_launch_1d(pfx_runtime *rt, const char *program, const char *options,
                         const char *name, const char *what, size_t n, size_t nargs,
                         const pfx_arg *args);

#endif
