/* One completion between its HTTP connection and the scheduler's worker:
 * the tokens as they come, their text (cut at a stop string) and how much
 * of it may be sent yet; held by both sides, freed by the last. */
#ifndef PFX_TOOLS_SERVE_COMPLETION_JOB_H
#define PFX_TOOLS_SERVE_COMPLETION_JOB_H

#include <pthread.h>

#include <cjson/cJSON.h>

#include "completion_req.h"
#include "server.h"

typedef struct completion {
    pthread_mutex_t mu;
    pthread_cond_t changed;
    int refs;
    server *srv;
    completion_req req;
    const char *model; /* the name it was asked for */
    char id[40];
    long long created;
    uint64_t sched_id;
    size_t prompt_len;
    size_t hold; /* bytes held back while they may begin a stop string */
    /* written by the worker, under mu */
    int32_t *ids;
    size_t count;
    char *text;
    size_t text_len, ready; /* text[0, ready) may be sent */
    bool done;
    pfx_finish finish;
    char error[512];
    /* the stream's state (its connection's thread) */
    size_t sent;
    int stage; /* 0: text, 1: final chunk sent, 2: [DONE] sent */
    char *pending;
    size_t pending_len, pending_off;
} completion;

/* A job of two holders (the connection and the scheduler), req taken. */
completion *completion_new(server *srv, completion_req *req, size_t prompt_len);
void completion_release(completion *c);

/* The scheduler's callbacks (user: the completion). */
bool completion_on_token(void *user, int32_t token);
void completion_on_done(void *user, pfx_finish finish, const char *error);

/* Waits until the request has ended; when the client on socket fd (-1:
 * none) goes away meanwhile, cancels it and returns true. */
bool completion_wait(completion *c, int fd);

/* A completion object of OpenAI: text (NULL: ""), finish_reason NULL
 * (stream chunks) or "stop"/"length", usage with the final one. */
cJSON *completion_json(const completion *c, const char *text, const char *finish, bool usage);

/* "stop" or "length" for an ended request. */
const char *completion_finish_reason(const completion *c);

#endif
