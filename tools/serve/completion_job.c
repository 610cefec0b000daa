/* The completion shared by a connection and the worker (completion_job.h). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "completion_job.h"
#include "commands/gen_output.h"

completion *completion_new(server *srv, completion_req *req, size_t prompt_len)
{
    static uint64_t serial;
    completion *c = calloc(1, sizeof(*c));
    int32_t *ids = calloc(req->max_tokens, sizeof(int32_t));
    if (!c || !ids) {
        free(c);
        free(ids);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->changed, NULL);
    c->refs = 2;
    c->srv = srv;
    c->req = *req;
    memset(req, 0, sizeof(*req));
    c->model = c->req.model ? c->req.model : srv->base_name;
    c->ids = ids;
    c->prompt_len = prompt_len;
    c->created = (long long)time(NULL);
    snprintf(c->id, sizeof(c->id), "%s-%llx-%llu", c->req.chat ? "chatcmpl" : "cmpl",
             (unsigned long long)c->created,
             (unsigned long long)__atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    for (size_t i = 0; i < c->req.stop_count; i++) {
        const size_t n = strlen(c->req.stop[i]);
        c->hold = n - 1 > c->hold ? n - 1 : c->hold;
    }
    return c;
}

void completion_release(completion *c)
{
    pthread_mutex_lock(&c->mu);
    const bool last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (!last)
        return;
    pthread_cond_destroy(&c->changed);
    pthread_mutex_destroy(&c->mu);
    completion_req_free(&c->req);
    free(c->ids);
    free(c->text);
    free(c->pending);
    free(c);
}

/* Bytes of text[0, len) that may be sent before the request ends: not the
 * tail that may begin a stop string, not a trailing U+FFFD (the next token
 * may complete its character), not half a character. */
static size_t sendable(const completion *c, const char *text, size_t len)
{
    size_t n = len > c->hold ? len - c->hold : 0;
    while (n == len && n >= 3 && !memcmp(text + n - 3, "\xEF\xBF\xBD", 3))
        n -= 3;
    while (n > 0 && n < len && ((unsigned char)text[n] & 0xC0) == 0x80)
        n--;
    return n;
}

bool completion_on_token(void *user, int32_t token)
{
    completion *c = user;
    pthread_mutex_lock(&c->mu);
    c->ids[c->count++] = token;
    const size_t count = c->count;
    pthread_mutex_unlock(&c->mu);
    char *text = NULL;
    size_t len = 0;
    if (pfx_tokenizer_decode(c->srv->ctx.tok, c->ids, count, PFX_DECODE_SKIP_SPECIAL, &text,
                             &len) != PFX_SUCCESS)
        return true; /* the text stays as it was; the ids go on */
    len = strlen(text);
    bool stop = false;
    for (size_t i = 0; i < c->req.stop_count; i++) {
        const char *at = strstr(text, c->req.stop[i]);
        if (at && (size_t)(at - text) < len) {
            len = (size_t)(at - text);
            stop = true;
        }
    }
    text[len] = '\0';
    const size_t ready = stop ? len : sendable(c, text, len);
    pthread_mutex_lock(&c->mu);
    free(c->text);
    c->text = text;
    c->text_len = len;
    c->ready = ready > c->ready ? ready : c->ready;
    c->ready = c->ready < len ? c->ready : len;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->mu);
    return !stop;
}

void completion_on_done(void *user, pfx_finish finish, const char *error)
{
    completion *c = user;
    pthread_mutex_lock(&c->mu);
    c->done = true;
    c->finish = finish;
    c->ready = c->text_len;
    if (error)
        snprintf(c->error, sizeof(c->error), "%s", error);
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->mu);
    completion_release(c);
}

/* Whether the peer of socket fd has closed its end (or the socket failed). */
static bool peer_gone(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLRDHUP };
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

bool completion_wait(completion *c, int fd)
{
    bool cancelled = false;
    pthread_mutex_lock(&c->mu);
    while (!c->done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c->changed, &c->mu, &until);
        if (!c->done && !cancelled && fd >= 0 && peer_gone(fd)) {
            /* its client is gone: free the slot at the next step */
            pthread_mutex_unlock(&c->mu);
            pfx_scheduler_cancel(c->srv->sched, c->sched_id);
            cancelled = true;
            pthread_mutex_lock(&c->mu);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return cancelled;
}

const char *completion_finish_reason(const completion *c)
{
    return c->finish == PFX_FINISH_STOP ? "stop" : "length";
}

/* A chat choice's "message" {role, content}, or a stream's "delta": the
 * assistant's role and the new text, {} in the final chunk (text NULL). */
static bool chat_message(cJSON *choice, const char *name, const char *text, bool delta)
{
    cJSON *m = cJSON_AddObjectToObject(choice, name);
    if (!m)
        return false;
    if (delta && !text)
        return true;
    return cJSON_AddStringToObject(m, "role", "assistant") &&
           cJSON_AddStringToObject(m, "content", text ? text : "");
}

cJSON *completion_json(const completion *c, const char *text, const char *finish, bool usage)
{
    char *valid = gen_valid_utf8(text ? text : "");
    cJSON *o = cJSON_CreateObject(), *choices = cJSON_AddArrayToObject(o, "choices"),
          *choice = cJSON_CreateObject();
    const bool chat = c->req.chat, chunk = chat && c->req.stream;
    const char *object = !chat   ? "text_completion"
                         : chunk ? "chat.completion.chunk"
                                 : "chat.completion";
    bool ok = valid && choices && choice && cJSON_AddStringToObject(o, "id", c->id) &&
              cJSON_AddStringToObject(o, "object", object) &&
              cJSON_AddNumberToObject(o, "created", (double)c->created) &&
              cJSON_AddStringToObject(o, "model", c->model) &&
              (chat ? chat_message(choice, chunk ? "delta" : "message", text ? valid : NULL, chunk)
                    : cJSON_AddStringToObject(choice, "text", valid) != NULL) &&
              cJSON_AddNumberToObject(choice, "index", 0) &&
              cJSON_AddNullToObject(choice, "logprobs") &&
              (finish ? cJSON_AddStringToObject(choice, "finish_reason", finish)
                      : cJSON_AddNullToObject(choice, "finish_reason"));
    if (ok && cJSON_AddItemToArray(choices, choice))
        choice = NULL;
    else
        ok = false;
    if (ok && usage) {
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        ok = u && cJSON_AddNumberToObject(u, "prompt_tokens", (double)c->prompt_len) &&
             cJSON_AddNumberToObject(u, "completion_tokens", (double)c->count) &&
             cJSON_AddNumberToObject(u, "total_tokens", (double)(c->prompt_len + c->count));
    }
    free(valid);
    cJSON_Delete(choice);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
