/* The event stream of a completion (sse.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access_log.h"
#include "sse.h"

/* "data: JSON\n\n" of o (deleted), or NULL. */
static char *event(cJSON *o, size_t *len)
{
    char *json = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!json)
        return NULL;
    const size_t n = strlen(json);
    char *e = malloc(n + 9);
    if (e) {
        memcpy(e, "data: ", 6);
        memcpy(e + 6, json, n);
        memcpy(e + 6 + n, "\n\n", 3);
        *len = n + 8;
    }
    free(json);
    return e;
}

/* A chunk of choice `index`: text (NULL: the final one, with finish), the
 * logprobs of its tokens [from, to), the usage (or, with include_usage,
 * "usage": null: the usage comes in a chunk of its own). */
static char *choice_event(const completion *c, size_t index, const char *text, const char *finish,
                          size_t from, size_t to, bool usage, size_t *len)
{
    cJSON *o = completion_object(c);
    if (o && (!completion_add_choice(c, o, index, text, finish, from, to) ||
              (usage && !c->req.include_usage && !completion_add_usage(c, o)) ||
              (c->req.include_usage && !cJSON_AddNullToObject(o, "usage")))) {
        cJSON_Delete(o);
        o = NULL;
    }
    return event(o, len);
}

/* The last chunk of stream_options.include_usage: no choices, the usage. */
static char *usage_event(const completion *c, size_t *len)
{
    cJSON *o = completion_object(c);
    if (o && !completion_add_usage(c, o)) {
        cJSON_Delete(o);
        o = NULL;
    }
    return event(o, len);
}

/* The error event of a failed or cancelled choice. */
static char *error_event(const completion_choice *ch, size_t *len)
{
    cJSON *o = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(o, "error");
    const char *msg = ch->finish == PFX_FINISH_ERROR ? ch->error : "the server is shutting down";
    if (!err || !cJSON_AddStringToObject(err, "message", msg) ||
        !cJSON_AddStringToObject(err, "type", "server_error")) {
        cJSON_Delete(o);
        o = NULL;
    }
    return event(o, len);
}

/* The next event of c, waiting for it (c->pending empty); NULL at the end.
 * Text as it comes, choice by choice; each choice's final chunk when it
 * ends, the last of them with the usage; then [DONE]. */
static char *next_event(completion *c, size_t *len)
{
    if (c->stage == 4) {
        c->stage = 1;
        return usage_event(c, len);
    }
    if (c->stage == 1) {
        c->stage = 2;
        *len = strlen("data: [DONE]\n\n");
        return strdup("data: [DONE]\n\n");
    }
    if (c->stage >= 2)
        return NULL;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        for (size_t i = 0; i < c->n; i++) {
            completion_choice *ch = &c->choices[i];
            if (ch->ready > ch->sent) {
                char *delta = strndup(ch->text + ch->sent, ch->ready - ch->sent);
                const size_t from = ch->logprobs_sent,
                             to = ch->ends ? completion_tokens_before(c, ch, ch->count, ch->ready)
                                           : 0;
                ch->sent = ch->ready;
                ch->logprobs_sent = to > from ? to : from;
                pthread_mutex_unlock(&c->mu);
                char *e = delta
                              ? choice_event(c, i, delta, NULL, from, ch->logprobs_sent, false, len)
                              : NULL;
                free(delta);
                return e;
            }
        }
        for (size_t i = 0; i < c->n; i++) {
            completion_choice *ch = &c->choices[i];
            if (!ch->done || ch->final_sent)
                continue;
            ch->final_sent = true;
            const size_t from = ch->logprobs_sent, to = ch->count;
            ch->logprobs_sent = to;
            size_t sent = 0;
            for (size_t j = 0; j < c->n; j++)
                sent += c->choices[j].final_sent;
            pthread_mutex_unlock(&c->mu);
            if (ch->finish == PFX_FINISH_ERROR || ch->finish == PFX_FINISH_CANCELLED) {
                c->stage = 1;
                return error_event(ch, len);
            }
            const bool last = sent == c->n;
            if (last) {
                c->stage = c->req.include_usage ? 4 : 1;
                metrics_tokens(&c->srv->metrics, c->prompt_len, completion_tokens(c));
                access_log_tokens(c->prompt_len, completion_tokens(c));
            }
            return choice_event(c, i, NULL, completion_finish_reason(ch), from, to, last, len);
        }
        pthread_cond_wait(&c->changed, &c->mu);
    }
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    completion *c = cls;
    if (c->pending_off == c->pending_len) {
        free(c->pending);
        c->pending_off = c->pending_len = 0;
        if (!(c->pending = next_event(c, &c->pending_len))) {
            if (c->stage < 2)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            c->stage = 3;
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
    }
    size_t n = c->pending_len - c->pending_off;
    n = n < max ? n : max;
    memcpy(buf, c->pending + c->pending_off, n);
    c->pending_off += n;
    return (ssize_t)n;
}

/* The response is gone (sent, or its client went away): choices still
 * running are cancelled, their slots freed at the next step. Counted then:
 * 200 when sent to its end, else as nginx counts a client that closed
 * first (499). */
static void free_stream(void *cls)
{
    completion *c = cls;
    metrics_response(&c->srv->metrics, c->stage == 3 ? MHD_HTTP_OK : 499);
    access_log_status(c->stage == 3 ? MHD_HTTP_OK : 499);
    completion_cancel(c);
    completion_release(c);
}

enum MHD_Result sse_reply(server *srv, struct MHD_Connection *conn, completion *c)
{
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read_stream, c, free_stream);
    if (!r) {
        free_stream(c);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    /* not counted yet: free_stream knows whether it reached its client */
    access_log_status(MHD_HTTP_OK);
    const enum MHD_Result res = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return res;
}
