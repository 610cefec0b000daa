/* libFuzzer harness for the body of POST /v1/completions
 * (tools/serve/completion_req.c): every input is a request body; it must be
 * refused with a message (naming the field when one is at fault) or give
 * values inside the documented ranges. Also linked into the normal build by
 * run_corpus.c, which replays tests/fuzz/corpus/completion_request/. */
#include <math.h>
#include <string.h>

#include "completion_req.h"
#include "fuzz.h"
#include "internal.h"

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    completion_req r;
    char why[512];
    const char *field;
    const bool ok = completion_req_parse((const char *)data, size, &r, why, sizeof(why), &field);
    if (!ok)
        pfx_error(NULL, PFX_ERROR_FORMAT, "%s", why);
    completion_req_free(&r);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    completion_req r;
    char why[512] = "";
    const char *field = NULL;
    if (!completion_req_parse((const char *)data, size, &r, why, sizeof(why), &field)) {
        /* a refusal says why, and names a field it blames */
        if (!why[0] || (field && !strstr(why, field)))
            abort();
        completion_req_free(&r);
        return 0;
    }
    if (!r.prompt || r.max_tokens < 1 || r.max_tokens > COMPLETION_MAX_TOKENS ||
        !(r.temperature >= 0) || r.temperature > 2 || !(r.top_p >= 0) || r.top_p > 1 ||
        r.stop_count > COMPLETION_MAX_STOPS)
        abort();
    for (size_t i = 0; i < r.stop_count; i++)
        if (!r.stop[i] || !r.stop[i][0])
            abort();
    completion_req_free(&r);
    return 0;
}
