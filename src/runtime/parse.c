/* The strict decimal parser every option and metadata count goes through:
 * strtoull would accept " 5", "+5" and wrap "-5". */
#include "internal.h"

pfx_status pfx_parse_uint(const char *text, uint64_t max, uint64_t *out)
{
    if (!text || !out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_parse_uint: %s is NULL",
                         !text ? "text" : "out");
    if (!*text)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "an empty text is not a number");
    uint64_t v = 0;
    bool over = false;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                             "'%.64s' is not a number (decimal digits only)", text);
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            over = true;
        else
            v = v * 10 + d;
    }
    if (over || v > max)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "%.64s is larger than %llu", text,
                         (unsigned long long)max);
    *out = v;
    return PFX_SUCCESS;
}
