/* The "logprobs" of a choice as OpenAI writes them: a completion's
 * {tokens, token_logprobs, top_logprobs, text_offset}, a chat's
 * {content: [{token, logprob, bytes, top_logprobs}], refusal}. */
#ifndef PFX_TOOLS_SERVE_LOGPROBS_H
#define PFX_TOOLS_SERVE_LOGPROBS_H

#include <cjson/cJSON.h>

#include "completion_job.h"

/* The object of choice ch's tokens [from, to), or NULL (out of memory). */
cJSON *logprobs_object(const completion *c, const completion_choice *ch, size_t from, size_t to);

#endif
