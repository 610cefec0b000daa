/* One completion between its HTTP connection and the scheduler's worker:
 * the tokens as they come, their text (cut at a stop string) and how much
 * of it may be sent yet; held by both sides, freed by the last. */
#ifndef PFX_TOOLS_SERVE_COMPLETION_JOB_H
#define PFX_TOOLS_SERVE_COMPLETION_JOB_H

#include <pthread.h>

#include <cjson/cJSON.h>

#include "completion_req.h"
#include "server.h"

/* One of the request's n choices: one scheduler request. */
typedef struct completion_choice {
    struct completion *c;
    size_t index;
    uint64_t sched_id;
    bool submitted;
    /* written by the worker, under c->mu */
    int32_t *ids;
    size_t count;
    char *text;
    size_t text_len, ready; /* text[0, ready) may be sent */
    bool done;
    pfx_finish finish;
    char error[512];
    /* the stream's state (its connection's thread) */
    size_t sent;
    bool final_sent;
} completion_choice;

typedef struct completion {
    pthread_mutex_t mu;
    pthread_cond_t changed;
    int refs;
    server *srv;
    completion_req req;
    const char *model; /* the name it was asked for */
    char id[40];
    long long created;
    size_t prompt_len;
    size_t hold; /* bytes held back while they may begin a stop string */
    size_t n;    /* choices */
    completion_choice *choices;
    /* the stream's state (its connection's thread) */
    int stage; /* 0: text, 1: final chunks sent, 2: [DONE] sent */
    char *pending;
    size_t pending_len, pending_off;
} completion;

/* A job of req->n choices, req taken, held by its connection; each choice
 * submitted to the scheduler takes one more hold (completion_hold). */
completion *completion_new(server *srv, completion_req *req, size_t prompt_len);
void completion_hold(completion *c);
void completion_release(completion *c);

/* The scheduler's callbacks (user: a completion_choice). */
bool completion_on_token(void *user, int32_t token);
void completion_on_done(void *user, pfx_finish finish, const char *error);

/* Waits until every choice has ended; when the client on socket fd (-1:
 * none) goes away meanwhile, cancels them and returns true. */
bool completion_wait(completion *c, int fd);
/* Cancels every choice still running (their slots freed at the next step). */
void completion_cancel(completion *c);

/* A completion object of OpenAI without choices (its "choices" list empty). */
cJSON *completion_object(const completion *c);
/* Appends choice `index` to o's choices: text (NULL: "", or an empty delta in
 * a stream's final chunk), finish_reason NULL (stream chunks) or
 * "stop"/"length". */
bool completion_add_choice(const completion *c, cJSON *o, size_t index, const char *text,
                           const char *finish);
/* The usage of the whole request: the prompt once, the tokens of every choice. */
bool completion_add_usage(const completion *c, cJSON *o);

/* "stop" or "length" for an ended choice. */
const char *completion_finish_reason(const completion_choice *ch);

#endif
