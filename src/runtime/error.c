/* Status names, OpenCL error names and the recorded error detail. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Detail of the last error of a call that had no runtime, per thread. */
static _Thread_local char thread_error[PFX_ERROR_MAX];

#define PFX_STR_(x) #x
#define PFX_STR(x)  PFX_STR_(x)

const char *pfx_version(void)
{
    return PFX_STR(PFX_VERSION_MAJOR) "." PFX_STR(PFX_VERSION_MINOR) "." PFX_STR(PFX_VERSION_PATCH);
}

const char *pfx_status_string(pfx_status status)
{
    switch (status) {
#define NAME(s)                                                                                    \
    case s: return #s;
        NAME(PFX_SUCCESS)
        NAME(PFX_ERROR_NULL_ARGUMENT)
        NAME(PFX_ERROR_INVALID_ARGUMENT)
        NAME(PFX_ERROR_INVALID_SHAPE)
        NAME(PFX_ERROR_SIZE_OVERFLOW)
        NAME(PFX_ERROR_OUT_OF_RANGE)
        NAME(PFX_ERROR_DTYPE_MISMATCH)
        NAME(PFX_ERROR_RUNTIME_MISMATCH)
        NAME(PFX_ERROR_ALIASING)
        NAME(PFX_ERROR_NOT_FINITE)
        NAME(PFX_ERROR_UNSUPPORTED)
        NAME(PFX_ERROR_OUT_OF_MEMORY)
        NAME(PFX_ERROR_NO_DEVICE)
        NAME(PFX_ERROR_DEVICE_NOT_FOUND)
        NAME(PFX_ERROR_BUILD_FAILED)
        NAME(PFX_ERROR_OPENCL)
        NAME(PFX_ERROR_CLBLAST)
        NAME(PFX_ERROR_IO)
        NAME(PFX_ERROR_FORMAT)
        NAME(PFX_ERROR_BUSY)
#undef NAME
    }
    return "PFX_ERROR_UNKNOWN";
}

const char *pfx_cl_error_name(cl_int err)
{
    switch (err) {
#define NAME(e)                                                                                    \
    case e: return #e;
        NAME(CL_SUCCESS)
        NAME(CL_DEVICE_NOT_FOUND)
        NAME(CL_DEVICE_NOT_AVAILABLE)
        NAME(CL_COMPILER_NOT_AVAILABLE)
        NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        NAME(CL_OUT_OF_RESOURCES)
        NAME(CL_OUT_OF_HOST_MEMORY)
        NAME(CL_PROFILING_INFO_NOT_AVAILABLE)
        NAME(CL_MEM_COPY_OVERLAP)
        NAME(CL_IMAGE_FORMAT_MISMATCH)
        NAME(CL_IMAGE_FORMAT_NOT_SUPPORTED)
        NAME(CL_BUILD_PROGRAM_FAILURE)
        NAME(CL_MAP_FAILURE)
        NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        NAME(CL_COMPILE_PROGRAM_FAILURE)
        NAME(CL_LINKER_NOT_AVAILABLE)
        NAME(CL_LINK_PROGRAM_FAILURE)
        NAME(CL_DEVICE_PARTITION_FAILED)
        NAME(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
        NAME(CL_INVALID_VALUE)
        NAME(CL_INVALID_DEVICE_TYPE)
        NAME(CL_INVALID_PLATFORM)
        NAME(CL_INVALID_DEVICE)
        NAME(CL_INVALID_CONTEXT)
        NAME(CL_INVALID_QUEUE_PROPERTIES)
        NAME(CL_INVALID_COMMAND_QUEUE)
        NAME(CL_INVALID_HOST_PTR)
        NAME(CL_INVALID_MEM_OBJECT)
        NAME(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
        NAME(CL_INVALID_IMAGE_SIZE)
        NAME(CL_INVALID_SAMPLER)
        NAME(CL_INVALID_BINARY)
        NAME(CL_INVALID_BUILD_OPTIONS)
        NAME(CL_INVALID_PROGRAM)
        NAME(CL_INVALID_PROGRAM_EXECUTABLE)
        NAME(CL_INVALID_KERNEL_NAME)
        NAME(CL_INVALID_KERNEL_DEFINITION)
        NAME(CL_INVALID_KERNEL)
        NAME(CL_INVALID_ARG_INDEX)
        NAME(CL_INVALID_ARG_VALUE)
        NAME(CL_INVALID_ARG_SIZE)
        NAME(CL_INVALID_KERNEL_ARGS)
        NAME(CL_INVALID_WORK_DIMENSION)
        NAME(CL_INVALID_WORK_GROUP_SIZE)
        NAME(CL_INVALID_WORK_ITEM_SIZE)
        NAME(CL_INVALID_GLOBAL_OFFSET)
        NAME(CL_INVALID_EVENT_WAIT_LIST)
        NAME(CL_INVALID_EVENT)
        NAME(CL_INVALID_OPERATION)
        NAME(CL_INVALID_GL_OBJECT)
        NAME(CL_INVALID_BUFFER_SIZE)
        NAME(CL_INVALID_MIP_LEVEL)
        NAME(CL_INVALID_GLOBAL_WORK_SIZE)
        NAME(CL_INVALID_PROPERTY)
        NAME(CL_INVALID_IMAGE_DESCRIPTOR)
        NAME(CL_INVALID_COMPILER_OPTIONS)
        NAME(CL_INVALID_LINKER_OPTIONS)
        NAME(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef NAME
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "CL_UNKNOWN_ERROR";
}

static char *error_buffer(pfx_runtime *rt)
{
    return rt ? rt->error : thread_error;
}

pfx_status pfx_error(pfx_runtime *rt, pfx_status status, const char *fmt, ...)
{
    /* The detail only: callers print pfx_status_string() beside it. */
    char *buf = error_buffer(rt);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, PFX_ERROR_MAX, fmt, ap);
    va_end(ap);
    return status;
}

void pfx_error_append(pfx_runtime *rt, const char *text)
{
    char *buf = error_buffer(rt);
    size_t used = strlen(buf);
    if (used + 1 < PFX_ERROR_MAX)
        snprintf(buf + used, PFX_ERROR_MAX - used, "%s", text);
}

pfx_status pfx_cl_error(pfx_runtime *rt, cl_int err, const char *what)
{
    pfx_status status = PFX_ERROR_OPENCL;
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
        err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
        status = PFX_ERROR_OUT_OF_MEMORY;
    else if (err == CL_BUILD_PROGRAM_FAILURE)
        status = PFX_ERROR_BUILD_FAILED;
    return pfx_error(rt, status, "%s: %s (%d)", what, pfx_cl_error_name(err), (int)err);
}

const char *pfx_last_error(const pfx_runtime *rt)
{
    return rt ? rt->error : thread_error;
}
