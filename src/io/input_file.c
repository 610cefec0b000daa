/* Files read from outside (io.h pfx_input_open): opened only when regular
 * (runtime/file.c), so a FIFO or a device never blocks or streams without
 * end; one wording for what is refused. */
#include <errno.h>
#include <string.h>

#include "io_internal.h"

pfx_status pfx_input_open_rt(pfx_runtime *rt, const char *path, FILE **out)
{
    bool not_regular;
    *out = pfx_fopen_regular(path, &not_regular);
    if (*out)
        return PFX_SUCCESS;
    if (not_regular)
        return pfx_error(rt, PFX_ERROR_IO, "not a regular file: %s", path);
    return pfx_error(rt, PFX_ERROR_IO, "cannot open %s: %s", path, strerror(errno));
}

pfx_status pfx_input_open(const char *path, FILE **out)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_input_open: out is NULL");
    *out = NULL;
    if (!path)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_input_open: path is NULL");
    if (!*path)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "pfx_input_open: path is empty");
    return pfx_input_open_rt(NULL, path, out);
}
