/* libFuzzer harness for the chat-template renderer of `prefixcl serve`
 * (tools/serve/jinja/): every input is a template's source, parsed, then
 * rendered with a fixed conversation. It must end in the text or an error
 * that says why, within the renderer's limits (output size, work, memory,
 * nesting) and the time of an input. Also linked into the normal build by
 * run_corpus.c, which replays tests/fuzz/corpus/chat_template/. */
#include <string.h>

#include "fuzz.h"
#include "internal.h"
#include "jinja/jinja.h"

static const char conversation[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    "{\"role\": \"user\", \"content\": \"H\\u00e9llo \\ud83d\\ude42 \"},"
    "{\"role\": \"assistant\", \"content\": \"\"},"
    "{\"role\": \"user\", \"content\": \"2+2?\", \"tool_calls\": [{\"function\": "
    "{\"name\": \"f\", \"arguments\": {\"a\": [1, true, null]}}}]}],"
    "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true}";

/* The status of parsing and rendering data; why says what failed. */
static jinja_status render(const uint8_t *data, size_t size, char *why, size_t cap)
{
    why[0] = 0;
    jinja_template *t = jinja_parse((const char *)data, size, why, cap);
    if (!t)
        return JINJA_ERROR_SYNTAX;
    cJSON *names = cJSON_Parse(conversation);
    if (!names)
        abort();
    char *out = NULL;
    size_t len = 0;
    const jinja_status st = jinja_render(t, names, &out, &len, why, cap);
    if ((st == JINJA_OK) != (out != NULL) || len > JINJA_MAX_OUTPUT || (out && out[len]))
        abort();
    free(out);
    cJSON_Delete(names);
    jinja_free(t);
    return st;
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    char why[512];
    if (render(data, size, why, sizeof(why)) == JINJA_OK)
        return true;
    pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s", label, why);
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[512];
    const double start = pfx_fuzz_now();
    /* a failure says why */
    if (render(data, size, why, sizeof(why)) != JINJA_OK && !why[0])
        abort();
    pfx_fuzz_deadline(start, "a template");
    return 0;
}
