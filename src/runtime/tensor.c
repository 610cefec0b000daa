/* Device tensors: creation with checked sizes, host transfers, fill, copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "internal.h"
#include "q8_0.h"

void pfx_shape_text(char *buf, size_t cap, unsigned ndim, const size_t *shape)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (unsigned i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%zu", i ? ", " : "", shape[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

size_t pfx_dtype_size(pfx_dtype dtype)
{
    switch (dtype) {
    case PFX_DTYPE_F32: return 4;
    case PFX_DTYPE_F16:
    case PFX_DTYPE_BF16: return 2;
    case PFX_DTYPE_Q8_0: return 0;
    }
    return 0;
}

const char *pfx_dtype_name(pfx_dtype dtype)
{
    switch (dtype) {
    case PFX_DTYPE_F32: return "float32";
    case PFX_DTYPE_F16: return "half";
    case PFX_DTYPE_BF16: return "bfloat16";
    case PFX_DTYPE_Q8_0: return "Q8_0";
    }
    return "unknown";
}

bool pfx_dtype_bytes(pfx_dtype dtype, size_t numel, size_t *bytes)
{
    if (!bytes)
        return false;
    if (dtype == PFX_DTYPE_Q8_0)
        return numel % PFX_Q8_0_BLOCK == 0 &&
               !pfx_mul_overflows(numel / PFX_Q8_0_BLOCK, PFX_Q8_0_BYTES, bytes);
    const size_t es = pfx_dtype_size(dtype);
    return es && !pfx_mul_overflows(numel, es, bytes);
}

pfx_status pfx_tensor_create(pfx_runtime *rt, pfx_dtype dtype, unsigned ndim, const size_t *shape,
                             pfx_tensor **out)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "tensor_create: rt is NULL");
    if (!out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "tensor_create: out is NULL");
    *out = NULL;
    if (!shape)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "tensor_create: shape is NULL");
    if (!pfx_dtype_size(dtype) && dtype != PFX_DTYPE_Q8_0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "tensor_create: dtype %d is unknown",
                         (int)dtype);
    if (ndim < 1 || ndim > PFX_MAX_DIMS)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "tensor_create: ndim %u is not in 1..%d",
                         ndim, PFX_MAX_DIMS);
    size_t numel = 1, bytes = 0;
    for (unsigned i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "tensor_create: shape[%u] is 0", i);
        if (pfx_mul_overflows(numel, shape[i], &numel))
            return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                             "tensor_create: element count overflows size_t at shape[%u] = %zu", i,
                             shape[i]);
    }
    if (dtype == PFX_DTYPE_Q8_0 && shape[ndim - 1] % PFX_Q8_0_BLOCK)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "tensor_create: a Q8_0 tensor's last dimension (shape[%u] = %zu) is a "
                         "multiple of %d",
                         ndim - 1, shape[ndim - 1], PFX_Q8_0_BLOCK);
    if (!pfx_dtype_bytes(dtype, numel, &bytes))
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                         "tensor_create: the bytes of %zu elements overflow size_t", numel);

    pfx_tensor *t = calloc(1, sizeof(*t));
    if (!t)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "tensor_create: host allocation failed");
    pfx_status st = pfx_buffer_create(rt, bytes, NULL, &t->mem);
    if (st == PFX_SUCCESS) {
        /* Drivers may allocate lazily and fail at first use: touch the last
         * byte now, so that failure comes back here as OUT_OF_MEMORY. */
        const unsigned char zero = 0;
        cl_int err = clEnqueueFillBuffer(rt->queue, t->mem, &zero, 1, bytes - 1, 1, 0, NULL, NULL);
        if (err == CL_SUCCESS)
            err = clFinish(rt->queue);
        if (err != CL_SUCCESS) {
            st = pfx_cl_error(rt, err, "tensor_create: first use of the device buffer");
            pfx_buffer_release(rt, t->mem, bytes);
        }
    }
    if (st != PFX_SUCCESS) {
        free(t);
        return st;
    }
    t->rt = rt;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, ndim * sizeof(size_t));
    t->numel = numel;
    t->bytes = bytes;
    *out = t;
    return PFX_SUCCESS;
}

void pfx_tensor_destroy(pfx_tensor **tp)
{
    if (!tp || !*tp)
        return;
    pfx_tensor *t = *tp;
    pfx_buffer_release(t->rt, t->mem, t->bytes);
    free(t);
    *tp = NULL;
}

pfx_dtype pfx_tensor_dtype(const pfx_tensor *t)
{
    return t ? t->dtype : PFX_DTYPE_F32;
}
unsigned pfx_tensor_ndim(const pfx_tensor *t)
{
    return t ? t->ndim : 0;
}
size_t pfx_tensor_dim(const pfx_tensor *t, unsigned i)
{
    return t && i < t->ndim ? t->shape[i] : 0;
}
size_t pfx_tensor_numel(const pfx_tensor *t)
{
    return t ? t->numel : 0;
}
pfx_runtime *pfx_tensor_runtime(const pfx_tensor *t)
{
    return t ? t->rt : NULL;
}

/* Checks a transfer of [offset, offset + count) against the tensor. */
static pfx_status check_range(const pfx_tensor *t, size_t offset, size_t count, const void *host,
                              const char *what, const char *host_name)
{
    if (!t)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: t is NULL", what);
    if (!host)
        return pfx_error(t->rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", what, host_name);
    if (offset > t->numel || count > t->numel - offset)
        return pfx_error(t->rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: elements [%zu, %zu + %zu) are outside the tensor of %zu elements",
                         what, offset, offset, count, t->numel);
    return PFX_SUCCESS;
}

/* Q8_0: [offset, offset + count) as whole blocks, quantized on the host. */
static pfx_status write_q8_0(pfx_tensor *t, size_t offset, size_t count, const float *src)
{
    if (offset % PFX_Q8_0_BLOCK || count % PFX_Q8_0_BLOCK)
        return pfx_error(t->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "tensor_write: a Q8_0 tensor is written in whole blocks of %d elements "
                         "(offset %zu, count %zu)",
                         PFX_Q8_0_BLOCK, offset, count);
    const size_t blocks = count / PFX_Q8_0_BLOCK;
    pfx_q8_0_block *q = malloc(blocks * sizeof(*q));
    if (!q)
        return pfx_error(t->rt, PFX_ERROR_OUT_OF_MEMORY, "tensor_write: host staging failed");
    for (size_t b = 0; b < blocks; b++)
        if (!pfx_q8_0_quantize(src + b * PFX_Q8_0_BLOCK, &q[b])) {
            free(q);
            return pfx_error(t->rt, PFX_ERROR_INVALID_ARGUMENT,
                             "tensor_write: elements %zu .. %zu do not fit Q8_0 (a value is not "
                             "finite or beyond 127 x 65504)",
                             offset + b * PFX_Q8_0_BLOCK, offset + (b + 1) * PFX_Q8_0_BLOCK - 1);
        }
    cl_int err = clEnqueueWriteBuffer(t->rt->queue, t->mem, CL_TRUE,
                                      offset / PFX_Q8_0_BLOCK * PFX_Q8_0_BYTES,
                                      blocks * PFX_Q8_0_BYTES, q, 0, NULL, NULL);
    free(q);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(t->rt, err, "tensor_write");
}

pfx_status pfx_tensor_write(pfx_tensor *t, size_t offset, size_t count, const float *src)
{
    pfx_status st = check_range(t, offset, count, src, "tensor_write", "src");
    if (st != PFX_SUCCESS || count == 0)
        return st;
    if (t->dtype == PFX_DTYPE_Q8_0)
        return write_q8_0(t, offset, count, src);
    size_t esize = pfx_dtype_size(t->dtype);
    const void *data = src;
    uint16_t *halves = NULL;
    if (esize == 2) {
        halves = malloc(count * sizeof(uint16_t));
        if (!halves)
            return pfx_error(t->rt, PFX_ERROR_OUT_OF_MEMORY, "tensor_write: host staging failed");
        const int bf16 = t->dtype == PFX_DTYPE_BF16;
        for (size_t i = 0; i < count; i++)
            halves[i] = pfx_float_to_16bit(src[i], bf16);
        data = halves;
    }
    cl_int err = clEnqueueWriteBuffer(t->rt->queue, t->mem, CL_TRUE, offset * esize, count * esize,
                                      data, 0, NULL, NULL);
    free(halves);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(t->rt, err, "tensor_write");
}

/* Q8_0: the blocks that hold [offset, offset + count), dequantized. */
static pfx_status read_q8_0(const pfx_tensor *t, size_t offset, size_t count, float *dst)
{
    const size_t b0 = offset / PFX_Q8_0_BLOCK, b1 = (offset + count - 1) / PFX_Q8_0_BLOCK + 1;
    pfx_q8_0_block *q = malloc((b1 - b0) * sizeof(*q));
    if (!q)
        return pfx_error(t->rt, PFX_ERROR_OUT_OF_MEMORY, "tensor_read: host staging failed");
    cl_int err = clEnqueueReadBuffer(t->rt->queue, t->mem, CL_TRUE, b0 * PFX_Q8_0_BYTES,
                                     (b1 - b0) * PFX_Q8_0_BYTES, q, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        for (size_t i = 0; i < count; i++)
            dst[i] = pfx_q8_0_at(q, offset - b0 * PFX_Q8_0_BLOCK + i);
    free(q);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(t->rt, err, "tensor_read");
}

pfx_status pfx_tensor_read(const pfx_tensor *t, size_t offset, size_t count, float *dst)
{
    pfx_status st = check_range(t, offset, count, dst, "tensor_read", "dst");
    if (st != PFX_SUCCESS || count == 0)
        return st;
    if (t->dtype == PFX_DTYPE_Q8_0)
        return read_q8_0(t, offset, count, dst);
    size_t esize = pfx_dtype_size(t->dtype);
    void *data = dst;
    uint16_t *halves = NULL;
    if (esize == 2) {
        halves = malloc(count * sizeof(uint16_t));
        if (!halves)
            return pfx_error(t->rt, PFX_ERROR_OUT_OF_MEMORY, "tensor_read: host staging failed");
        data = halves;
    }
    cl_int err = clEnqueueReadBuffer(t->rt->queue, t->mem, CL_TRUE, offset * esize, count * esize,
                                     data, 0, NULL, NULL);
    if (err == CL_SUCCESS && halves)
        for (size_t i = 0; i < count; i++)
            dst[i] = pfx_16bit_to_float(halves[i], t->dtype == PFX_DTYPE_BF16);
    free(halves);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(t->rt, err, "tensor_read");
}

pfx_status pfx_tensor_fill(pfx_tensor *t, float value)
{
    if (!t)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "tensor_fill: t is NULL");
    cl_int err;
    if (t->dtype == PFX_DTYPE_Q8_0) {
        /* a pattern of 34 bytes is not one OpenCL fills: written from the host */
        float block[PFX_Q8_0_BLOCK];
        for (int j = 0; j < PFX_Q8_0_BLOCK; j++)
            block[j] = value;
        pfx_q8_0_block q;
        if (!pfx_q8_0_quantize(block, &q))
            return pfx_error(t->rt, PFX_ERROR_INVALID_ARGUMENT,
                             "tensor_fill: value %g does not fit Q8_0", (double)value);
        const size_t blocks = t->numel / PFX_Q8_0_BLOCK;
        pfx_q8_0_block *all = malloc(blocks * sizeof(*all));
        if (!all)
            return pfx_error(t->rt, PFX_ERROR_OUT_OF_MEMORY, "tensor_fill: host staging failed");
        for (size_t b = 0; b < blocks; b++)
            all[b] = q;
        err = clEnqueueWriteBuffer(t->rt->queue, t->mem, CL_TRUE, 0, t->bytes, all, 0, NULL, NULL);
        free(all);
    } else if (pfx_dtype_size(t->dtype) == 2) {
        uint16_t h = pfx_float_to_16bit(value, t->dtype == PFX_DTYPE_BF16);
        err = clEnqueueFillBuffer(t->rt->queue, t->mem, &h, sizeof(h), 0, t->bytes, 0, NULL, NULL);
    } else {
        err = clEnqueueFillBuffer(t->rt->queue, t->mem, &value, sizeof(value), 0, t->bytes, 0, NULL,
                                  NULL);
    }
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(t->rt, err, "tensor_fill");
}

pfx_status pfx_tensor_zero_range(pfx_tensor *t, size_t offset, size_t count)
{
    const float zero = 0.0f;
    if (count == 0)
        return PFX_SUCCESS;
    cl_int err = clEnqueueFillBuffer(t->rt->queue, t->mem, &zero, sizeof(zero),
                                     offset * sizeof(float), count * sizeof(float), 0, NULL, NULL);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(t->rt, err, "tensor_zero_range");
}

pfx_tensor pfx_tensor_view(const pfx_tensor *t, unsigned ndim, size_t a, size_t b, size_t c,
                           size_t d)
{
    pfx_tensor v = *t;
    const size_t s[4] = { a, b, c, d };
    v.ndim = ndim;
    v.numel = 1;
    for (unsigned i = 0; i < PFX_MAX_DIMS; i++) {
        v.shape[i] = i < ndim ? s[i] : 0;
        v.numel *= i < ndim ? s[i] : 1;
    }
    if (!pfx_dtype_bytes(v.dtype, v.numel, &v.bytes))
        v.bytes = 0;
    return v;
}

pfx_status pfx_tensor_copy(pfx_tensor *dst, const pfx_tensor *src)
{
    if (!dst)
        return pfx_error(src ? src->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "tensor_copy: dst is NULL");
    if (!src)
        return pfx_error(dst->rt, PFX_ERROR_NULL_ARGUMENT, "tensor_copy: src is NULL");
    if (dst->rt != src->rt)
        return pfx_error(dst->rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "tensor_copy: src and dst belong to different runtimes");
    if (dst->dtype != src->dtype)
        return pfx_error(dst->rt, PFX_ERROR_DTYPE_MISMATCH,
                         "tensor_copy: src dtype %d differs from dst dtype %d", (int)src->dtype,
                         (int)dst->dtype);
    if (dst->numel != src->numel)
        return pfx_error(dst->rt, PFX_ERROR_INVALID_SHAPE,
                         "tensor_copy: src has %zu elements, dst %zu", src->numel, dst->numel);
    if (dst == src)
        return PFX_SUCCESS;
    cl_int err =
        clEnqueueCopyBuffer(dst->rt->queue, src->mem, dst->mem, 0, 0, dst->bytes, 0, NULL, NULL);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(dst->rt, err, "tensor_copy");
}
