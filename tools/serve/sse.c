/* The event stream of a completion (sse.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The next event of c, waiting for it (c->pending empty); NULL at the end. */
static char *next_event(completion *c, size_t *len)
{
    pthread_mutex_lock(&c->mu);
    while (c->ready <= c->sent && !c->done)
        pthread_cond_wait(&c->changed, &c->mu);
    char *e = NULL;
    if (c->ready > c->sent) {
        char *delta = strndup(c->text + c->sent, c->ready - c->sent);
        c->sent = c->ready;
        pthread_mutex_unlock(&c->mu);
        e = delta ? event(completion_json(c, delta, NULL, false), len) : NULL;
        free(delta);
        return e;
    }
    pthread_mutex_unlock(&c->mu);
    if (c->stage == 0) {
        c->stage = 1;
        if (c->finish == PFX_FINISH_ERROR || c->finish == PFX_FINISH_CANCELLED) {
            cJSON *o = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(o, "error");
            const char *msg =
                c->finish == PFX_FINISH_ERROR ? c->error : "the server is shutting down";
            if (!err || !cJSON_AddStringToObject(err, "message", msg) ||
                !cJSON_AddStringToObject(err, "type", "server_error")) {
                cJSON_Delete(o);
                o = NULL;
            }
            return event(o, len);
        }
        metrics_tokens(&c->srv->metrics, c->prompt_len, c->count);
        return event(completion_json(c, NULL, completion_finish_reason(c), true), len);
    }
    if (c->stage == 1) {
        c->stage = 2;
        *len = strlen("data: [DONE]\n\n");
        return strdup("data: [DONE]\n\n");
    }
    return NULL;
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    completion *c = cls;
    if (c->pending_off == c->pending_len) {
        free(c->pending);
        c->pending_off = c->pending_len = 0;
        if (!(c->pending = next_event(c, &c->pending_len)))
            return c->stage == 2 ? MHD_CONTENT_READER_END_OF_STREAM
                                 : MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = c->pending_len - c->pending_off;
    n = n < max ? n : max;
    memcpy(buf, c->pending + c->pending_off, n);
    c->pending_off += n;
    return (ssize_t)n;
}

/* The response is gone (sent, or its client went away): a request still
 * running is cancelled, its slot freed at the next step. */
static void free_stream(void *cls)
{
    completion *c = cls;
    pthread_mutex_lock(&c->mu);
    const bool running = !c->done;
    pthread_mutex_unlock(&c->mu);
    if (running)
        pfx_scheduler_cancel(c->srv->sched, c->sched_id);
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
    return reply_queue(srv, conn, MHD_HTTP_OK, r);
}
