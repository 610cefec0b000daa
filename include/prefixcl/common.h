/*
 * prefixcl: common definitions shared by every public header.
 *
 * Return convention: every fallible call returns a pfx_status; 0 (PFX_SUCCESS)
 * means success, negative values are errors. pfx_last_error() gives the
 * detail of the most recent error (argument name, shapes, OpenCL error name,
 * kernel build log).
 */
#ifndef PREFIXCL_COMMON_H
#define PREFIXCL_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#if defined(_WIN32) && defined(PFX_BUILDING_DLL)
#define PFX_API __declspec(dllexport)
#elif defined(__GNUC__) && defined(PFX_BUILDING_LIBRARY)
#define PFX_API __attribute__((visibility("default")))
#else
#define PFX_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these headers; pfx_version() gives the library's (the two
 * differ when a program runs against another build of the library). */
#define PFX_VERSION_MAJOR 0
#define PFX_VERSION_MINOR 1
#define PFX_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library in use (static). */
PFX_API const char *pfx_version(void);

#define PFX_MAX_DIMS 4

typedef enum pfx_status {
    PFX_SUCCESS = 0,
    PFX_ERROR_NULL_ARGUMENT = -1,    /* a required handle or pointer is NULL */
    PFX_ERROR_INVALID_ARGUMENT = -2, /* a value out of its domain (flag, enum, count) */
    PFX_ERROR_INVALID_SHAPE = -3,    /* zero/too many dimensions, shapes that do not agree */
    PFX_ERROR_SIZE_OVERFLOW = -4,    /* a byte size that does not fit in size_t */
    PFX_ERROR_OUT_OF_RANGE = -5,     /* read/write past a tensor, index beyond a bank, length > N */
    PFX_ERROR_DTYPE_MISMATCH = -6,   /* element type not accepted here */
    PFX_ERROR_RUNTIME_MISMATCH = -7, /* tensors from different runtimes */
    PFX_ERROR_ALIASING = -8,         /* an output tensor is also an input */
    PFX_ERROR_NOT_FINITE = -9,       /* NaN or infinite gain, scale or ramp */
    PFX_ERROR_UNSUPPORTED = -10,     /* valid, but beyond what this device/kernel handles */
    PFX_ERROR_OUT_OF_MEMORY = -11,   /* host or device allocation failed */
    PFX_ERROR_NO_DEVICE = -12,       /* no OpenCL platform or device at all */
    PFX_ERROR_DEVICE_NOT_FOUND = -13, /* a selector that matches no device */
    PFX_ERROR_BUILD_FAILED = -14,     /* kernel compilation failed; the log is in pfx_last_error */
    PFX_ERROR_OPENCL = -15,           /* any other OpenCL error; its name is in pfx_last_error */
    PFX_ERROR_CLBLAST = -16,          /* a CLBlast error; its name is in pfx_last_error */
    PFX_ERROR_IO = -17,               /* a file could not be read or written */
    PFX_ERROR_FORMAT = -18,           /* a file's content is malformed (bad header, JSON, layout) */
    PFX_ERROR_BUSY = -19,             /* a runtime entered from a second thread while in use */
} pfx_status;

/* Static name of a status ("PFX_ERROR_INVALID_SHAPE"); never NULL.
 * pfx_last_error() holds the detail only, never this name. */
PFX_API const char *pfx_status_string(pfx_status status);

/* The one integer parser of the library and its tools (options, selectors,
 * file metadata): decimal digits only, no sign, space, prefix or suffix, and
 * at most `max`. PFX_ERROR_NULL_ARGUMENT, PFX_ERROR_INVALID_ARGUMENT (not
 * digits only, or empty) or PFX_ERROR_OUT_OF_RANGE (above max); the detail,
 * quoting the text, goes to pfx_last_error(NULL). *out is set on success only. */
PFX_API pfx_status pfx_parse_uint(const char *text, uint64_t max, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif
