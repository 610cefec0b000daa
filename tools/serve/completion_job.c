/* The completion shared by a connection and the worker (completion_job.h). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands/gen_output.h"
#include "common/stop_text.h"
#include "completion_job.h"
#include "logprobs.h"

completion *completion_new(server *srv, completion_req *req, size_t prompts, size_t prompt_len)
{
    static uint64_t serial;
    const size_t per = req->n ? req->n : 1, n = per * (prompts ? prompts : 1);
    completion *c = calloc(1, sizeof(*c));
    completion_choice *choices = calloc(n, sizeof(*choices));
    if (!c || !choices) {
        free(c);
        free(choices);
        return NULL;
    }
    c->choices = choices;
    for (size_t i = 0; i < n; i++) {
        choices[i].c = c;
        choices[i].index = i;
        choices[i].prompt = i / per;
        choices[i].ids = calloc(req->max_tokens, sizeof(int32_t));
        if (req->logprobs) {
            choices[i].logprobs = calloc(req->max_tokens, sizeof(pfx_token_logprobs));
            choices[i].ends = calloc(req->max_tokens, sizeof(size_t));
        }
        if (!choices[i].ids || (req->logprobs && (!choices[i].logprobs || !choices[i].ends))) {
            for (size_t j = 0; j <= i; j++) {
                free(choices[j].ids);
                free(choices[j].logprobs);
                free(choices[j].ends);
            }
            free(choices);
            free(c);
            return NULL;
        }
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->changed, NULL);
    c->refs = 1;
    c->srv = srv;
    c->entry = -1;
    c->req = *req;
    memset(req, 0, sizeof(*req));
    c->n = n;
    c->model = c->req.model ? c->req.model : srv->base_name;
    c->prompt_len = prompt_len;
    c->created = (long long)time(NULL);
    snprintf(c->id, sizeof(c->id), "%s-%llx-%llu", c->req.chat ? "chatcmpl" : "cmpl",
             (unsigned long long)c->created,
             (unsigned long long)__atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    c->hold = stop_text_hold((const char *const *)c->req.stop, c->req.stop_count);
    return c;
}

void completion_hold(completion *c)
{
    pthread_mutex_lock(&c->mu);
    c->refs++;
    pthread_mutex_unlock(&c->mu);
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
    server_adapter_drop(c->srv, c->entry);
    completion_req_free(&c->req);
    for (size_t i = 0; i < c->n; i++) {
        free(c->choices[i].ids);
        free(c->choices[i].logprobs);
        free(c->choices[i].ends);
        free(c->choices[i].text);
    }
    free(c->choices);
    free(c->pending);
    free(c);
}

void completion_on_logprobs(void *user, const pfx_token_logprobs *logprobs)
{
    completion_choice *ch = user;
    /* the token's slot, counted by completion_on_token next */
    ch->logprobs[ch->count] = *logprobs;
}

bool completion_on_token(void *user, int32_t token)
{
    completion_choice *ch = user;
    completion *c = ch->c;
    if (ch->ends) {
        const size_t start = ch->count ? ch->ends[ch->count - 1] : 0;
        char *own = NULL;
        size_t own_len = 0;
        if (pfx_tokenizer_decode(c->srv->ctx.tok, &token, 1, 0, &own, &own_len) != PFX_SUCCESS)
            own_len = 0;
        free(own);
        ch->ends[ch->count] = start + own_len;
    }
    pthread_mutex_lock(&c->mu);
    ch->ids[ch->count++] = token;
    const size_t count = ch->count;
    pthread_mutex_unlock(&c->mu);
    char *text = NULL;
    size_t len = 0;
    if (pfx_tokenizer_decode(c->srv->ctx.tok, ch->ids, count, PFX_DECODE_SKIP_SPECIAL, &text,
                             &len) != PFX_SUCCESS)
        return true; /* the text stays as it was; the ids go on */
    len = strlen(text);
    const bool stop =
        stop_text_cut(text, &len, (const char *const *)c->req.stop, c->req.stop_count);
    text[len] = '\0';
    const size_t ready = stop ? len : stop_text_sendable(text, len, c->hold);
    pthread_mutex_lock(&c->mu);
    free(ch->text);
    ch->text = text;
    ch->text_len = len;
    ch->ready = ready > ch->ready ? ready : ch->ready;
    ch->ready = ch->ready < len ? ch->ready : len;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->mu);
    return !stop;
}

void completion_on_done(void *user, pfx_finish finish, const char *error)
{
    completion_choice *ch = user;
    completion *c = ch->c;
    pthread_mutex_lock(&c->mu);
    ch->done = true;
    ch->finish = finish;
    ch->ready = ch->text_len;
    if (error)
        snprintf(ch->error, sizeof(ch->error), "%s", error);
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

/* Whether every choice has ended (under c->mu). */
static bool all_done(const completion *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (!c->choices[i].done)
            return false;
    return true;
}

void completion_cancel(completion *c)
{
    for (size_t i = 0; i < c->n; i++) {
        pthread_mutex_lock(&c->mu);
        const bool running = c->choices[i].submitted && !c->choices[i].done;
        pthread_mutex_unlock(&c->mu);
        if (running)
            pfx_scheduler_cancel(c->srv->sched, c->choices[i].sched_id);
    }
}

bool completion_wait(completion *c, int fd)
{
    bool cancelled = false;
    pthread_mutex_lock(&c->mu);
    while (!all_done(c)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c->changed, &c->mu, &until);
        if (!all_done(c) && !cancelled && fd >= 0 && peer_gone(fd)) {
            /* its client is gone: free the slots at the next step */
            pthread_mutex_unlock(&c->mu);
            completion_cancel(c);
            cancelled = true;
            pthread_mutex_lock(&c->mu);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return cancelled;
}

const char *completion_finish_reason(const completion_choice *ch)
{
    return ch->finish == PFX_FINISH_STOP ? "stop" : "length";
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

cJSON *completion_object(const completion *c)
{
    const bool chat = c->req.chat, chunk = chat && c->req.stream;
    const char *object = !chat   ? "text_completion"
                         : chunk ? "chat.completion.chunk"
                                 : "chat.completion";
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "id", c->id) ||
        !cJSON_AddStringToObject(o, "object", object) ||
        !cJSON_AddNumberToObject(o, "created", (double)c->created) ||
        !cJSON_AddStringToObject(o, "model", c->model) || !cJSON_AddArrayToObject(o, "choices")) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

bool completion_add_choice(const completion *c, cJSON *o, size_t index, const char *text,
                           const char *finish, size_t from, size_t to)
{
    char *valid = gen_valid_utf8(text ? text : "");
    cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices"), *choice = cJSON_CreateObject();
    const bool chat = c->req.chat, chunk = chat && c->req.stream;
    bool ok =
        valid && choices && choice &&
        (chat ? chat_message(choice, chunk ? "delta" : "message", text ? valid : NULL, chunk)
              : cJSON_AddStringToObject(choice, "text", valid) != NULL) &&
        cJSON_AddNumberToObject(choice, "index", (double)index) &&
        (c->req.logprobs ? cJSON_AddItemToObject(choice, "logprobs",
                                                 logprobs_object(c, &c->choices[index], from, to))
                         : cJSON_AddNullToObject(choice, "logprobs") != NULL) &&
        (finish ? cJSON_AddStringToObject(choice, "finish_reason", finish)
                : cJSON_AddNullToObject(choice, "finish_reason"));
    if (ok && cJSON_AddItemToArray(choices, choice))
        choice = NULL;
    else
        ok = false;
    free(valid);
    cJSON_Delete(choice);
    return ok;
}

size_t completion_tokens(const completion *c)
{
    size_t tokens = 0;
    for (size_t i = 0; i < c->n; i++)
        tokens += c->choices[i].count;
    return tokens;
}

bool completion_add_usage(const completion *c, cJSON *o)
{
    const size_t tokens = completion_tokens(c);
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    return u && cJSON_AddNumberToObject(u, "prompt_tokens", (double)c->prompt_len) &&
           cJSON_AddNumberToObject(u, "completion_tokens", (double)tokens) &&
           cJSON_AddNumberToObject(u, "total_tokens", (double)(c->prompt_len + tokens));
}
