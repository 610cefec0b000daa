/* The tokenizer's endpoints (tokenize.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands/gen_output.h"
#include "request_json.h"
#include "tokenize.h"

/* The body under the JSON rule, or NULL after a 400 (*r set). */
static cJSON *body_of(server *srv, struct MHD_Connection *c, const char *body, size_t len,
                      const char *const *fields, enum MHD_Result *r)
{
    char why[512];
    const char *field = NULL;
    cJSON *o = request_json_parse(body, len, fields, why, sizeof(why), &field);
    if (!o)
        *r = reply_error(srv, c, MHD_HTTP_BAD_REQUEST, field, "%s", why);
    else if (!srv->ctx.tok) {
        cJSON_Delete(o);
        o = NULL;
        *r = reply_error(srv, c, MHD_HTTP_BAD_REQUEST, NULL, "the model folder has no tokenizer");
    }
    return o;
}

/* A member that must be true or false (absent or null: false). */
static bool flag(const cJSON *o, const char *name, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = cJSON_IsTrue(v);
    return !v || cJSON_IsNull(v) || cJSON_IsBool(v);
}

/* {"id", "piece"} of each token: the piece its own decoding, valid UTF-8. */
static bool add_pieces(const pfx_tokenizer *tok, cJSON *list, const int32_t *ids, size_t n)
{
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        char *text = NULL, *valid = NULL;
        size_t len = 0;
        cJSON *e = cJSON_CreateObject();
        ok = e && pfx_tokenizer_decode(tok, &ids[i], 1, 0, &text, &len) == PFX_SUCCESS &&
             (valid = gen_valid_utf8(text)) && cJSON_AddNumberToObject(e, "id", ids[i]) &&
             cJSON_AddStringToObject(e, "piece", valid) && cJSON_AddItemToArray(list, e);
        if (!ok)
            cJSON_Delete(e);
        free(text);
        free(valid);
    }
    return ok;
}

enum MHD_Result tokenize_handle(server *srv, struct MHD_Connection *c, const char *body, size_t len)
{
    static const char *const fields[] = { "content", "add_special", "with_pieces", NULL };
    enum MHD_Result r = MHD_NO;
    cJSON *o = body_of(srv, c, body, len, fields, &r);
    if (!o)
        return r;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    bool special, pieces;
    const char *bad = !cJSON_IsString(content)            ? "content"
                      : !flag(o, "add_special", &special) ? "add_special"
                      : !flag(o, "with_pieces", &pieces)  ? "with_pieces"
                                                          : NULL;
    if (bad) {
        cJSON_Delete(o);
        return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, bad, "%s: %s expected", bad,
                           strcmp(bad, "content") ? "true or false" : "a string");
    }
    int32_t *ids = NULL;
    size_t n = 0;
    const pfx_status st =
        pfx_tokenizer_encode(srv->ctx.tok, content->valuestring, strlen(content->valuestring),
                             special ? PFX_ENCODE_ADD_SPECIAL : 0, &ids, &n);
    cJSON_Delete(o);
    if (st != PFX_SUCCESS)
        return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, "content", "content: %s",
                           pfx_last_error(NULL));
    cJSON *out = cJSON_CreateObject(), *list = out ? cJSON_AddArrayToObject(out, "tokens") : NULL;
    bool ok = list != NULL;
    if (ok && pieces)
        ok = add_pieces(srv->ctx.tok, list, ids, n);
    for (size_t i = 0; ok && !pieces && i < n; i++)
        ok = cJSON_AddItemToArray(list, cJSON_CreateNumber(ids[i]));
    free(ids);
    if (!ok) {
        cJSON_Delete(out);
        return reply_error(srv, c, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "out of host memory");
    }
    return reply_json(srv, c, MHD_HTTP_OK, out);
}

enum MHD_Result detokenize_handle(server *srv, struct MHD_Connection *c, const char *body,
                                  size_t len)
{
    static const char *const fields[] = { "tokens", NULL };
    enum MHD_Result r = MHD_NO;
    cJSON *o = body_of(srv, c, body, len, fields, &r);
    if (!o)
        return r;
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(o, "tokens");
    if (!cJSON_IsArray(tokens)) {
        cJSON_Delete(o);
        return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, "tokens",
                           "tokens: a list of token ids expected");
    }
    const size_t n = (size_t)cJSON_GetArraySize(tokens), V = srv->ctx.shape.vocab;
    int32_t *ids = malloc((n ? n : 1) * sizeof(int32_t));
    size_t i = 0;
    for (const cJSON *e = tokens->child; ids && e; e = e->next, i++) {
        const double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(v >= 0 && v < (double)V && v == floor(v))) {
            free(ids);
            cJSON_Delete(o);
            return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, "tokens",
                               "tokens: item %zu is not a token id in [0, %zu)", i, V);
        }
        ids[i] = (int32_t)v;
    }
    cJSON_Delete(o);
    char *text = NULL, *valid = NULL;
    size_t tlen = 0;
    const bool ok = ids &&
                    pfx_tokenizer_decode(srv->ctx.tok, ids, n, 0, &text, &tlen) == PFX_SUCCESS &&
                    (valid = gen_valid_utf8(text));
    free(ids);
    free(text);
    cJSON *out = ok ? cJSON_CreateObject() : NULL;
    if (!out || !cJSON_AddStringToObject(out, "content", valid)) {
        free(valid);
        cJSON_Delete(out);
        return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, "tokens", "tokens: %s",
                           ok ? "out of host memory" : pfx_last_error(NULL));
    }
    free(valid);
    return reply_json(srv, c, MHD_HTTP_OK, out);
}
