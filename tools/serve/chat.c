/* The chat template (chat_template.h) and POST /v1/chat/completions
 * (chat.h). The rendered text is encoded without the tokenizer's added
 * special tokens, as transformers' apply_chat_template(tokenize=True)
 * does: the templates write the BOS token themselves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "completions.h"

/* A special token of tokenizer_config.json: a string or {"content": ...}. */
static char *token_text(const cJSON *config, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, name);
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

/* The template's source in config: NULL (why set when one is there but unusable). */
static const char *template_source(const cJSON *config, chat_template *t)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, "chat_template");
    if (!v || cJSON_IsNull(v))
        return NULL;
    t->found = true;
    if (cJSON_IsString(v))
        return v->valuestring;
    const cJSON *e, *list = cJSON_IsArray(v) ? v : NULL;
    cJSON_ArrayForEach(e, list)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name"),
                    *src = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(src))
            return src->valuestring;
    }
    snprintf(t->why, sizeof(t->why),
             "tokenizer_config.json: chat_template is neither a string nor a list holding a "
             "template named \"default\"");
    return NULL;
}

void chat_template_load(chat_template *t, const char *dir)
{
    memset(t, 0, sizeof(*t));
    char path[4096];
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    FILE *f;
    if (pfx_input_open(path, &f) != PFX_SUCCESS)
        return;
    char *text = NULL;
    size_t len = 0;
    if (!fseek(f, 0, SEEK_END) && (len = (size_t)ftell(f)) < (64u << 20) &&
        !fseek(f, 0, SEEK_SET) && (text = malloc(len + 1)) && fread(text, 1, len, f) == len) {
        cJSON *config = cJSON_ParseWithLength(text, len);
        const char *src = template_source(config, t);
        if (src) {
            char why[400];
            t->parsed = jinja_parse(src, strlen(src), why, sizeof(why));
            if (!t->parsed)
                snprintf(t->why, sizeof(t->why), "the chat template does not parse: %s", why);
        }
        t->bos_token = token_text(config, "bos_token");
        t->eos_token = token_text(config, "eos_token");
        cJSON_Delete(config);
    }
    free(text);
    fclose(f);
}

void chat_template_free(chat_template *t)
{
    jinja_free(t->parsed);
    free(t->bos_token);
    free(t->eos_token);
    memset(t, 0, sizeof(*t));
}

/* The template's names: messages, the special tokens, add_generation_prompt. */
static cJSON *template_names(const chat_template *t, cJSON *messages)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToObject(o, "messages", messages)) {
        cJSON_Delete(o);
        cJSON_Delete(messages);
        return NULL;
    }
    if ((t->bos_token && !cJSON_AddStringToObject(o, "bos_token", t->bos_token)) ||
        (t->eos_token && !cJSON_AddStringToObject(o, "eos_token", t->eos_token)) ||
        !cJSON_AddTrueToObject(o, "add_generation_prompt")) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

enum MHD_Result chat_handle(server *srv, struct MHD_Connection *conn, const char *body, size_t len)
{
    const chat_template *t = &srv->chat;
    if (!t->found)
        return reply_error(
            srv, conn, MHD_HTTP_BAD_REQUEST, NULL,
            "the model's tokenizer folder has no chat template (tokenizer_config.json "
            "\"chat_template\"): use /v1/completions with a prompt");
    if (!t->parsed)
        return reply_error(srv, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "%s", t->why);
    completion_req req;
    cJSON *messages;
    char why[512];
    const char *field;
    if (!chat_req_parse(body, len, &req, &messages, why, sizeof(why), &field)) {
        completion_req_free(&req);
        return reply_error(srv, conn, MHD_HTTP_BAD_REQUEST, field, "%s", why);
    }
    cJSON *names = template_names(t, messages);
    char *text = NULL;
    size_t text_len = 0;
    const jinja_status st = names
                                ? jinja_render(t->parsed, names, &text, &text_len, why, sizeof(why))
                                : JINJA_ERROR_MEMORY;
    cJSON_Delete(names);
    if (st != JINJA_OK) {
        completion_req_free(&req);
        /* raise_exception and the limits answer what was asked; the rest is the template's */
        if (st == JINJA_ERROR_RAISED || st == JINJA_ERROR_LIMIT)
            return reply_error(srv, conn, MHD_HTTP_BAD_REQUEST, "messages",
                               "messages: the chat template refused them: %s", why);
        return reply_error(srv, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL,
                           "the chat template failed: %s",
                           st == JINJA_ERROR_MEMORY && !names ? "out of host memory" : why);
    }
    if (strlen(text) != text_len) {
        free(text);
        completion_req_free(&req);
        return reply_error(srv, conn, MHD_HTTP_BAD_REQUEST, "messages",
                           "messages: the rendered prompt holds a NUL byte");
    }
    req.prompt = text;
    return completions_run(srv, conn, &req, 0);
}
