/* Shared by every prefixcl command (tools/cli.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "prefixcl/prefixcl.h"

bool cli_uint(const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;
    if (!text || pfx_parse_uint(text, hi, &v) != PFX_SUCCESS || v < lo)
        return false;
    *out = v;
    return true;
}

int cli_finish_stdout(int status)
{
    /* Output is the command's result: losing it silently is a failure. */
    errno = 0;
    bool bad = fflush(stdout) != 0 || ferror(stdout);
    int err = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = true;
        err = errno;
    }
    if (bad) {
        fprintf(stderr, "prefixcl: writing standard output: %s\n", err ? strerror(err) : "write error");
        return status ? status : 1;
    }
    return status;
}
