/* The body of POST /v1/completions and /v1/chat/completions as JSON
 * (OpenAI's fields): checked field by field, so that a bad one is answered
 * with its name. */
#ifndef PFX_TOOLS_SERVE_COMPLETION_REQ_H
#define PFX_TOOLS_SERVE_COMPLETION_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "prefixcl/generate.h"

#define COMPLETION_MAX_STOPS   4
#define COMPLETION_MAX_TOKENS  (1u << 20)
#define COMPLETION_MAX_N       16  /* choices of one request */
#define COMPLETION_MAX_PROMPTS 16  /* prompts of one completions request */
#define COMPLETION_MAX_BIASES  300 /* logit_bias entries (OpenAI's limit) */

typedef struct completion_req {
    char *model;                           /* NULL: not given */
    char *prompt;                          /* a chat's rendered prompt, or prompts[0] */
    char *prompts[COMPLETION_MAX_PROMPTS]; /* a completion's: "prompt", a string or a list */
    size_t prompt_count;
    size_t max_tokens; /* default 16 */
    float temperature; /* default 1 */
    float top_p;       /* default 1 */
    size_t top_k;      /* default 0: off */
    uint64_t seed;
    bool has_seed;
    char *stop[COMPLETION_MAX_STOPS];
    size_t stop_count;
    size_t n; /* choices, default 1; choice i samples with seed + i */
    bool stream;
    bool include_usage;  /* stream_options.include_usage: the usage in its own last chunk */
    bool chat;           /* a chat completion: prompt rendered from its messages */
    bool logprobs;       /* completions: "logprobs" an integer; chat: "logprobs" true */
    size_t top_logprobs; /* completions: "logprobs"; chat: "top_logprobs" (0..20) */
    float presence_penalty, frequency_penalty, repetition_penalty, min_p; /* 0: off */
    pfx_logit_bias *logit_bias; /* "logit_bias": {"token id": bias} */
    size_t logit_bias_count;
} completion_req;

/* Parses body[0, len) into *r (freed by completion_req_free, also after a
 * failure). False with why (cap bytes) naming the field, and *field (the
 * field's name, or NULL for the body as a whole). */
bool completion_req_parse(const char *body, size_t len, completion_req *r, char *why, size_t cap,
                          const char **field);
void completion_req_free(completion_req *r);

/* The same for a chat completion's body: "messages" (a list of {"role",
 * "content"} objects, content a string) instead of "prompt", into
 * *messages (the caller deletes it; NULL after a failure). */
bool chat_req_parse(const char *body, size_t len, completion_req *r, cJSON **messages, char *why,
                    size_t cap, const char **field);

#endif
