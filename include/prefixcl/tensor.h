/*
 * prefixcl: device tensors. Contiguous, row-major, 1 to 4 dimensions,
 * float32, half, bfloat16 or Q8_0 (the last three storage only: the host
 * always reads and writes float).
 */
#ifndef PREFIXCL_TENSOR_H
#define PREFIXCL_TENSOR_H

#include "prefixcl/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_tensor pfx_tensor;

typedef enum pfx_dtype {
    PFX_DTYPE_F32 = 0,
    PFX_DTYPE_F16 = 1,
    PFX_DTYPE_BF16 = 2, /* bfloat16: float32's upper 16 bits */
    /* int8 in blocks of 32 consecutive elements of a row, each block with a
     * half scale (34 bytes; llama.cpp's Q8_0): a weight's storage, read by
     * the products and the token embedding. The last dimension is a
     * multiple of 32; writes quantize whole blocks (d = max |x| / 127,
     * q = round(x / d)) and take finite values only. */
    PFX_DTYPE_Q8_0 = 3,
} pfx_dtype;

/* Bytes of one element (4 or 2); 0 for Q8_0 (34 bytes a block of 32) and
 * for an unknown dtype. */
PFX_API size_t pfx_dtype_size(pfx_dtype dtype);

/* "float32", "half", "bfloat16", "Q8_0"; "unknown" for another value. */
PFX_API const char *pfx_dtype_name(pfx_dtype dtype);

/* Bytes of `numel` elements of dtype in *bytes; false for an unknown dtype,
 * a Q8_0 count that is not whole blocks of 32, or an overflow. */
PFX_API bool pfx_dtype_bytes(pfx_dtype dtype, size_t numel, size_t *bytes);

/* Creates an uninitialized tensor of `ndim` (1..4) dimensions, each >= 1.
 * Errors: NULL rt/shape/out, a bad dtype or ndim, a zero dimension, a Q8_0
 * tensor whose last dimension is not a multiple of 32, a byte size that
 * overflows size_t, or more than the device can allocate
 * (PFX_ERROR_OUT_OF_MEMORY). */
PFX_API pfx_status pfx_tensor_create(pfx_runtime *rt, pfx_dtype dtype, unsigned ndim,
                                     const size_t *shape, pfx_tensor **out);

/* Releases the tensor and sets *t to NULL; NULL-safe. */
PFX_API void pfx_tensor_destroy(pfx_tensor **t);

PFX_API pfx_dtype pfx_tensor_dtype(const pfx_tensor *t);
PFX_API unsigned pfx_tensor_ndim(const pfx_tensor *t);
/* Size of dimension i; 0 when i >= ndim. */
PFX_API size_t pfx_tensor_dim(const pfx_tensor *t, unsigned i);
PFX_API size_t pfx_tensor_numel(const pfx_tensor *t);
PFX_API pfx_runtime *pfx_tensor_runtime(const pfx_tensor *t);

/* Copies `count` floats from host memory into elements [offset, offset+count)
 * (rounded to nearest even for F16 and BF16 tensors; Q8_0: offset and count
 * whole blocks of 32, every value finite, else PFX_ERROR_INVALID_ARGUMENT);
 * blocks until done. */
PFX_API pfx_status pfx_tensor_write(pfx_tensor *t, size_t offset, size_t count, const float *src);

/* Copies elements [offset, offset+count) to host memory as floats; blocks. */
PFX_API pfx_status pfx_tensor_read(const pfx_tensor *t, size_t offset, size_t count, float *dst);

/* Sets every element to `value` (enqueued). */
PFX_API pfx_status pfx_tensor_fill(pfx_tensor *t, float value);

/* Copies src into dst: same dtype and element count (enqueued). */
PFX_API pfx_status pfx_tensor_copy(pfx_tensor *dst, const pfx_tensor *src);

#ifdef __cplusplus
}
#endif

#endif
