/* Shared by every prefixcl command (tools/cli.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

bool cli_float(const char *text, double lo, double hi, float *out)
{
    if (!text || !*text || strchr(" \t\n\v\f\r", *text))
        return false;
    char *end = NULL;
    double x = strtod(text, &end);
    if (!end || *end || !isfinite(x) || x < lo || x > hi || !isfinite((float)x))
        return false;
    *out = (float)x;
    return true;
}

bool cli_ids(const char *text, size_t vocab, int32_t **ids, size_t *count)
{
    if (!text || vocab == 0)
        return false;
    size_t cap = 1;
    for (const char *c = text; *c; c++)
        cap += *c == ',' || *c == ' ';
    int32_t *v = malloc(cap * sizeof(*v));
    size_t n = 0;
    const char *p = text;
    bool ok = v != NULL;
    while (ok) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ,");
        char item[24];
        uint64_t id;
        ok = len > 0 && len < sizeof(item);
        if (ok) {
            memcpy(item, p, len);
            item[len] = '\0';
            ok = cli_uint(item, 0, vocab - 1 < INT32_MAX ? vocab - 1 : INT32_MAX, &id);
        }
        if (!ok)
            break;
        v[n++] = (int32_t)id;
        p += len;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++; /* an id must follow */
        else if (!*p)
            break;
    }
    if (!ok || n == 0) {
        free(v);
        return false;
    }
    *ids = v;
    *count = n;
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
