/* The oracle of the harnesses of the server's request bodies: a body the
 * server accepts holds no NUL byte, and when it is UTF-8 it also passes the
 * library's rule of every JSON reader (pfx_json_parse_object: one object,
 * nothing after it, no \u0000 escape, no key twice). */
#ifndef PFX_FUZZ_REQUEST_H
#define PFX_FUZZ_REQUEST_H

#include <string.h>

#include "io/io_internal.h"

static inline void pfx_fuzz_request_accepted(const uint8_t *data, size_t size)
{
    cJSON *root = NULL;
    if (memchr(data, 0, size) ||
        (pfx_utf8_valid(data, size) &&
         pfx_json_parse_object(NULL, "body", data, size, &root) != PFX_SUCCESS))
        abort();
    cJSON_Delete(root);
}

#endif
