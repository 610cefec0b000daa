/*
 * Shared by every kernel program: the runtime puts this file in front of each
 * cl/<program>.cl before building. OpenCL C 1.2, no extension required.
 *
 * Tensors may be stored as float or half. Kernels take such tensors as
 * __global void pointers plus a compile-time or uniform flag; vload_half and
 * vstore_half are core OpenCL 1.2 and need no cl_khr_fp16.
 */
#define pfx_load(ptr, i, is_half)                                     \
    ((is_half) ? vload_half((i), (__global const half *)(ptr))        \
               : ((__global const float *)(ptr))[(i)])

#define pfx_store(ptr, i, value, is_half)                             \
    do {                                                              \
        if (is_half)                                                  \
            vstore_half((value), (i), (__global half *)(ptr));        \
        else                                                          \
            ((__global float *)(ptr))[(i)] = (value);                 \
    } while (0)
