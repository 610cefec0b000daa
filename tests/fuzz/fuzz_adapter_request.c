/* libFuzzer harness for the body of POST /v1/adapters
 * (tools/serve/adapter_req.c): every input is a request body; it must be
 * refused with a message (naming the field when one is at fault) or give a
 * non-empty name and path, from a body that keeps the JSON rule
 * (fuzz_request.h). Also linked into the normal build by
 * run_corpus.c, which replays tests/fuzz/corpus/adapter_request/. */
#include <string.h>

#include "adapter_req.h"
#include "fuzz.h"
#include "fuzz_request.h"
#include "internal.h"

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    adapter_req r;
    char why[256];
    const char *field;
    const bool ok = adapter_req_parse((const char *)data, size, &r, why, sizeof(why), &field);
    if (!ok)
        pfx_error(NULL, PFX_ERROR_FORMAT, "%s", why);
    adapter_req_free(&r);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    adapter_req r;
    char why[256] = "";
    const char *field = NULL;
    if (!adapter_req_parse((const char *)data, size, &r, why, sizeof(why), &field)) {
        if (!why[0] || (field && !strstr(why, field)))
            abort();
    } else if (!r.name || !r.name[0] || !r.path || !r.path[0]) {
        abort();
    } else {
        pfx_fuzz_request_accepted(data, size);
    }
    adapter_req_free(&r);
    return 0;
}
