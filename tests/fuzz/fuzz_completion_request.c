/* libFuzzer harness for the bodies of POST /v1/completions and
 * /v1/chat/completions (tools/serve/completion_req.c, request_json.c):
 * every input is a request body of both; it must be refused with a message
 * (naming the field when one is at fault) or give values inside the
 * documented ranges, from a body that keeps the JSON rule (fuzz_request.h).
 * Also linked into the normal build by run_corpus.c, which replays
 * tests/fuzz/corpus/completion_request/. */
#include <math.h>
#include <string.h>

#include "completion_req.h"
#include "fuzz.h"
#include "fuzz_request.h"
#include "internal.h"

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    completion_req r;
    char why[512];
    const char *field;
    bool ok = completion_req_parse((const char *)data, size, &r, why, sizeof(why), &field);
    completion_req_free(&r);
    cJSON *messages = NULL;
    char chat_why[512];
    if (!ok) /* a chat's body then; the completion's reason if neither */
        ok = chat_req_parse((const char *)data, size, &r, &messages, chat_why, sizeof(chat_why),
                            &field);
    if (!ok)
        pfx_error(NULL, PFX_ERROR_FORMAT, "%s", why);
    completion_req_free(&r);
    cJSON_Delete(messages);
    return ok;
}

/* A chat's body: refused as a completion's is, or messages given. */
static void chat(const uint8_t *data, size_t size)
{
    completion_req r;
    cJSON *messages = NULL;
    char why[512] = "";
    const char *field = NULL;
    if (!chat_req_parse((const char *)data, size, &r, &messages, why, sizeof(why), &field)) {
        if (!why[0] || (field && !strstr(why, field)) || messages)
            abort();
    } else {
        if (!cJSON_IsArray(messages) || !messages->child || r.prompt)
            abort();
        pfx_fuzz_request_accepted(data, size);
    }
    completion_req_free(&r);
    cJSON_Delete(messages);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    completion_req r;
    char why[512] = "";
    const char *field = NULL;
    chat(data, size);
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
    if (!r.prompt_count || r.prompt_count > COMPLETION_MAX_PROMPTS || r.prompt != r.prompts[0] ||
        r.top_logprobs > PFX_TOP_LOGPROBS_MAX || !(r.min_p >= 0) || r.min_p > 1 ||
        !(fabsf(r.presence_penalty) <= 2) || !(fabsf(r.frequency_penalty) <= 2) ||
        !(r.repetition_penalty >= 0) || r.logit_bias_count > COMPLETION_MAX_BIASES ||
        (r.include_usage && !r.stream))
        abort();
    for (size_t i = 0; i < r.prompt_count; i++)
        if (!r.prompts[i])
            abort();
    for (size_t i = 0; i < r.logit_bias_count; i++)
        if (r.logit_bias[i].token < 0 || !(fabsf(r.logit_bias[i].bias) <= 100))
            abort();
    pfx_fuzz_request_accepted(data, size);
    completion_req_free(&r);
    return 0;
}
