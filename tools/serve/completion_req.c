/* POST /v1/completions' body (completion_req.h), through cJSON. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "completion_req.h"
#include "request_json.h"

typedef struct parse {
    const cJSON *root;
    char *why;
    size_t cap;
    const char **field;
} parse;

__attribute__((format(printf, 3, 4))) static bool bad(parse *p, const char *field, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, p->cap, fmt, ap);
    va_end(ap);
    *p->field = field;
    return false;
}

/* The member `name`, or NULL when absent or null (its default then). */
static const cJSON *member(const parse *p, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->root, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool integer(parse *p, const char *name, double lo, double hi, uint64_t *out)
{
    const cJSON *v = member(p, name);
    if (!v)
        return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return bad(p, name, "%s: an integer expected", name);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return bad(p, name, "%s: %.17g is outside [%.0f, %.0f]", name, v->valuedouble, lo, hi);
    *out = (uint64_t)v->valuedouble;
    return true;
}

static bool number(parse *p, const char *name, double lo, double hi, float *out)
{
    const cJSON *v = member(p, name);
    if (!v)
        return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return bad(p, name, "%s: a number expected", name);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return bad(p, name, "%s: %.17g is outside [%g, %g]", name, v->valuedouble, lo, hi);
    *out = (float)v->valuedouble;
    return true;
}

/* A string member (copied); required or not. */
static bool string(parse *p, const char *name, bool required, char **out)
{
    const cJSON *v = member(p, name);
    if (!v)
        return required ? bad(p, name, "%s: missing", name) : true;
    if (!cJSON_IsString(v))
        return bad(p, name, "%s: a string expected", name);
    *out = strdup(v->valuestring);
    return *out ? true : bad(p, name, "%s: out of host memory", name);
}

static bool stops(parse *p, completion_req *r)
{
    const cJSON *v = member(p, "stop");
    if (!v)
        return true;
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > COMPLETION_MAX_STOPS)
        return bad(p, "stop", "stop: at most %d strings", COMPLETION_MAX_STOPS);
    if (!cJSON_IsString(v) && !cJSON_IsArray(v))
        return bad(p, "stop", "stop: a string or a list of strings expected");
    const cJSON *e = cJSON_IsString(v) ? v : v->child;
    for (; e; e = cJSON_IsString(v) ? NULL : e->next) {
        if (!cJSON_IsString(e) || !e->valuestring[0])
            return bad(p, "stop", "stop: every stop must be a non-empty string");
        if (!(r->stop[r->stop_count++] = strdup(e->valuestring)))
            return bad(p, "stop", "stop: out of host memory");
    }
    return true;
}

/* "prompt": a string or a non-empty list of strings (a completion's). */
static bool prompts(parse *p, completion_req *r)
{
    const cJSON *v = member(p, "prompt");
    if (!v)
        return bad(p, "prompt", "prompt: missing");
    if (cJSON_IsArray(v) && (!v->child || cJSON_GetArraySize(v) > COMPLETION_MAX_PROMPTS))
        return bad(p, "prompt", "prompt: a list of 1 to %d strings expected",
                   COMPLETION_MAX_PROMPTS);
    if (!cJSON_IsString(v) && !cJSON_IsArray(v))
        return bad(p, "prompt", "prompt: a string or a list of strings expected");
    const cJSON *e = cJSON_IsString(v) ? v : v->child;
    for (; e; e = cJSON_IsString(v) ? NULL : e->next) {
        if (!cJSON_IsString(e))
            return bad(p, "prompt", "prompt: item %zu is not a string", r->prompt_count);
        if (!(r->prompts[r->prompt_count++] = strdup(e->valuestring)))
            return bad(p, "prompt", "prompt: out of host memory");
    }
    r->prompt = r->prompts[0];
    return true;
}

/* "logit_bias": {"token id": bias in [-100, 100]} (the ids checked
 * against the vocabulary by the scheduler). */
static bool logit_bias(parse *p, completion_req *r)
{
    const cJSON *v = member(p, "logit_bias");
    if (!v)
        return true;
    if (!cJSON_IsObject(v) || cJSON_GetArraySize(v) > COMPLETION_MAX_BIASES)
        return bad(p, "logit_bias",
                   "logit_bias: an object of at most %d {\"token id\": bias} expected",
                   COMPLETION_MAX_BIASES);
    const size_t n = (size_t)cJSON_GetArraySize(v);
    if (n && !(r->logit_bias = calloc(n, sizeof(pfx_logit_bias))))
        return bad(p, "logit_bias", "logit_bias: out of host memory");
    for (const cJSON *e = v->child; e; e = e->next) {
        char *end = NULL;
        const long id = strtol(e->string, &end, 10);
        if (!e->string[0] || *end || id < 0 || id > INT32_MAX || e->string[0] == '+' ||
            e->string[0] == ' ')
            return bad(p, "logit_bias", "logit_bias: key \"%.40s\" is not a token id", e->string);
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= -100 && e->valuedouble <= 100))
            return bad(p, "logit_bias", "logit_bias[\"%s\"]: a number in [-100, 100] expected",
                       e->string);
        r->logit_bias[r->logit_bias_count++] =
            (pfx_logit_bias){ (int32_t)id, (float)e->valuedouble };
    }
    return true;
}

/* "logprobs" and "top_logprobs": a completion's logprobs is the count of
 * alternatives (0..5 in OpenAI's API, 0..20 here); a chat's is true or
 * false, with top_logprobs 0..20 beside it. */
static bool logprobs(parse *p, completion_req *r)
{
    const cJSON *v = member(p, "logprobs"), *top = member(p, "top_logprobs");
    uint64_t k = 0;
    if (!r->chat) {
        if (top)
            return bad(p, "top_logprobs",
                       "top_logprobs: a chat completion's field (here \"logprobs\" is the count)");
        if (!integer(p, "logprobs", 0, PFX_TOP_LOGPROBS_MAX, &k))
            return false;
        r->logprobs = v != NULL;
        r->top_logprobs = (size_t)k;
        return true;
    }
    if (v && !cJSON_IsBool(v))
        return bad(p, "logprobs", "logprobs: true or false expected");
    r->logprobs = v && cJSON_IsTrue(v);
    if (!integer(p, "top_logprobs", 0, PFX_TOP_LOGPROBS_MAX, &k))
        return false;
    if (top && !r->logprobs)
        return bad(p, "top_logprobs", "top_logprobs: needs \"logprobs\": true");
    r->top_logprobs = (size_t)k;
    return true;
}

/* "stream_options": {"include_usage": bool}, with stream true only. */
static bool stream_options(parse *p, completion_req *r)
{
    const cJSON *v = member(p, "stream_options");
    if (!v)
        return true;
    if (!r->stream)
        return bad(p, "stream_options", "stream_options: only with \"stream\": true");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(v, "include_usage");
    if (!cJSON_IsObject(v) || (v->child && (!u || v->child->next)) || (u && !cJSON_IsBool(u)))
        return bad(p, "stream_options",
                   "stream_options: {\"include_usage\": true or false} expected");
    r->include_usage = u && cJSON_IsTrue(u);
    return true;
}

/* A chat's messages: detached from the body into *out. */
static bool messages(parse *p, cJSON *root, cJSON **out)
{
    const cJSON *m = member(p, "messages");
    if (!m)
        return bad(p, "messages", "messages: missing");
    if (!cJSON_IsArray(m) || !m->child)
        return bad(p, "messages", "messages: a non-empty list of {\"role\", \"content\"} expected");
    size_t i = 0;
    for (const cJSON *e = m->child; e; e = e->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role"),
                    *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsObject(e) || !cJSON_IsString(role) || !cJSON_IsString(content))
            return bad(p, "messages",
                       "messages: item %zu is not an object with the strings \"role\" and "
                       "\"content\"",
                       i);
    }
    *out = cJSON_DetachItemFromObjectCaseSensitive(root, "messages");
    return *out != NULL;
}

/* The body; a chat's (messages not NULL) or a completion's. */
static bool parse_body(const char *body, size_t len, completion_req *r, cJSON **msgs, char *why,
                       size_t cap, const char **field)
{
    memset(r, 0, sizeof(*r));
    r->max_tokens = 16;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->chat = msgs != NULL;
    static const char *const fields[] = { "model",
                                          "prompt",
                                          "messages",
                                          "max_tokens",
                                          "temperature",
                                          "top_p",
                                          "top_k",
                                          "min_p",
                                          "n",
                                          "seed",
                                          "stop",
                                          "stream",
                                          "stream_options",
                                          "logprobs",
                                          "top_logprobs",
                                          "presence_penalty",
                                          "frequency_penalty",
                                          "repetition_penalty",
                                          "logit_bias",
                                          NULL };
    cJSON *root = request_json_parse(body, len, fields, why, cap, field);
    if (!root)
        return false;
    parse p = { root, why, cap, field };
    bool ok = true;
    uint64_t max_tokens = r->max_tokens, top_k = 0, n = 1;
    ok = ok && string(&p, "model", false, &r->model) &&
         (msgs ? messages(&p, root, msgs) : prompts(&p, r)) &&
         integer(&p, "max_tokens", 1, COMPLETION_MAX_TOKENS, &max_tokens) &&
         number(&p, "temperature", 0, 2, &r->temperature) && number(&p, "top_p", 0, 1, &r->top_p) &&
         integer(&p, "top_k", 0, 1 << 30, &top_k) && integer(&p, "n", 1, COMPLETION_MAX_N, &n) &&
         integer(&p, "seed", 0, 9007199254740992.0, &r->seed) && stops(&p, r) &&
         number(&p, "min_p", 0, 1, &r->min_p) &&
         number(&p, "presence_penalty", -2, 2, &r->presence_penalty) &&
         number(&p, "frequency_penalty", -2, 2, &r->frequency_penalty) &&
         number(&p, "repetition_penalty", 0, 1e6, &r->repetition_penalty) && logit_bias(&p, r) &&
         logprobs(&p, r);
    if (ok && member(&p, "repetition_penalty") && r->repetition_penalty == 0.0f)
        ok = bad(&p, "repetition_penalty", "repetition_penalty: must be > 0 (1: off)");
    r->max_tokens = (size_t)max_tokens;
    r->top_k = (size_t)top_k;
    r->n = (size_t)n;
    r->has_seed = ok && member(&p, "seed");
    const cJSON *stream = ok ? member(&p, "stream") : NULL;
    if (stream && !cJSON_IsBool(stream))
        ok = bad(&p, "stream", "stream: true or false expected");
    r->stream = stream && cJSON_IsTrue(stream);
    ok = ok && stream_options(&p, r);
    cJSON_Delete(root);
    if (!ok && msgs) {
        cJSON_Delete(*msgs);
        *msgs = NULL;
    }
    return ok;
}

bool completion_req_parse(const char *body, size_t len, completion_req *r, char *why, size_t cap,
                          const char **field)
{
    return parse_body(body, len, r, NULL, why, cap, field);
}

bool chat_req_parse(const char *body, size_t len, completion_req *r, cJSON **msgs, char *why,
                    size_t cap, const char **field)
{
    *msgs = NULL;
    return parse_body(body, len, r, msgs, why, cap, field);
}

void completion_req_free(completion_req *r)
{
    free(r->model);
    if (r->prompt_count) /* prompt is prompts[0] */
        for (size_t i = 0; i < r->prompt_count; i++)
            free(r->prompts[i]);
    else
        free(r->prompt);
    free(r->logit_bias);
    for (size_t i = 0; i < r->stop_count; i++)
        free(r->stop[i]);
    memset(r, 0, sizeof(*r));
}
