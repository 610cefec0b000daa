/* A choice's logprobs object (logprobs.h). A token's text is its own
 * decoding (special tokens written out), made valid UTF-8; "bytes" are the
 * decoder's bytes before that, so a character split across tokens is whole
 * again when a client joins them. text_offset counts bytes from the start
 * of the choice's text. */
#include <stdlib.h>
#include <string.h>

#include "commands/gen_output.h"
#include "logprobs.h"

/* The token's bytes (malloc'ed, *len set), or NULL. */
static char *token_bytes(const completion *c, int32_t id, size_t *len)
{
    char *text = NULL;
    *len = 0;
    if (pfx_tokenizer_decode(c->srv->ctx.tok, &id, 1, 0, &text, len) != PFX_SUCCESS)
        return NULL;
    return text;
}

/* {"token", "logprob", "bytes"} of one token (a chat's), or NULL. */
static cJSON *chat_entry(const completion *c, int32_t id, float logprob, cJSON **top_list)
{
    size_t len;
    char *bytes = token_bytes(c, id, &len), *valid = bytes ? gen_valid_utf8(bytes) : NULL;
    cJSON *e = cJSON_CreateObject(), *list = e ? cJSON_AddArrayToObject(e, "bytes") : NULL;
    bool ok = valid && list && cJSON_AddStringToObject(e, "token", valid) &&
              cJSON_AddNumberToObject(e, "logprob", (double)logprob);
    for (size_t i = 0; ok && i < len; i++)
        ok = cJSON_AddItemToArray(list, cJSON_CreateNumber((unsigned char)bytes[i]));
    if (ok && top_list)
        ok = (*top_list = cJSON_AddArrayToObject(e, "top_logprobs")) != NULL;
    free(bytes);
    free(valid);
    if (!ok) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

static cJSON *chat_logprobs(const completion *c, const completion_choice *ch, size_t from,
                            size_t to)
{
    cJSON *o = cJSON_CreateObject(), *content = o ? cJSON_AddArrayToObject(o, "content") : NULL;
    bool ok = content && cJSON_AddNullToObject(o, "refusal");
    for (size_t t = from; ok && t < to; t++) {
        const pfx_token_logprobs *lp = &ch->logprobs[t];
        cJSON *top = NULL, *e = chat_entry(c, ch->ids[t], lp->logprob, &top);
        ok = e && cJSON_AddItemToArray(content, e);
        for (size_t k = 0; ok && k < lp->top_count; k++)
            ok =
                cJSON_AddItemToArray(top, chat_entry(c, lp->top_ids[k], lp->top_logprobs[k], NULL));
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The token's text as a completion's logprobs name it. */
static char *token_text(const completion *c, int32_t id)
{
    size_t len;
    char *bytes = token_bytes(c, id, &len), *valid = bytes ? gen_valid_utf8(bytes) : NULL;
    free(bytes);
    return valid;
}

static cJSON *completion_logprobs(const completion *c, const completion_choice *ch, size_t from,
                                  size_t to)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *tokens = o ? cJSON_AddArrayToObject(o, "tokens") : NULL,
          *lps = o ? cJSON_AddArrayToObject(o, "token_logprobs") : NULL,
          *tops = o ? cJSON_AddArrayToObject(o, "top_logprobs") : NULL,
          *offsets = o ? cJSON_AddArrayToObject(o, "text_offset") : NULL;
    bool ok = tokens && lps && tops && offsets;
    for (size_t t = from; ok && t < to; t++) {
        const pfx_token_logprobs *lp = &ch->logprobs[t];
        char *text = token_text(c, ch->ids[t]);
        cJSON *top = cJSON_CreateObject();
        ok = text && top && cJSON_AddItemToArray(tokens, cJSON_CreateString(text)) &&
             cJSON_AddItemToArray(lps, cJSON_CreateNumber((double)lp->logprob)) &&
             cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(t ? ch->ends[t - 1] : 0)));
        free(text);
        /* a dict: texts that decode alike keep the likelier one (listed first) */
        for (size_t k = 0; ok && k < lp->top_count; k++) {
            char *alt = token_text(c, lp->top_ids[k]);
            ok = alt && (cJSON_HasObjectItem(top, alt) ||
                         cJSON_AddNumberToObject(top, alt, (double)lp->top_logprobs[k]));
            free(alt);
        }
        if (ok && cJSON_AddItemToArray(tops, top))
            top = NULL;
        else
            ok = false;
        cJSON_Delete(top);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *logprobs_object(const completion *c, const completion_choice *ch, size_t from, size_t to)
{
    return c->req.chat ? chat_logprobs(c, ch, from, to) : completion_logprobs(c, ch, from, to);
}

size_t completion_tokens_before(const completion *c, const completion_choice *ch, size_t count,
                                size_t bytes)
{
    (void)c;
    size_t n = 0;
    while (n < count && (n ? ch->ends[n - 1] : 0) < bytes)
        n++;
    return n;
}
