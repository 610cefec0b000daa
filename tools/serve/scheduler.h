/* Continuous batching of generation requests over one model, KV cache and
 * adapter bank, without HTTP: any thread submits requests into a bounded
 * queue; one worker thread owns the model and, at every step, moves waiting
 * requests into free cache slots (one prefill step for the newcomers, the
 * running slots idle), then runs one decode step over every running slot.
 * Each new token goes to its request's callback on the worker thread; a
 * request leaves its slot when done or cancelled and the slot is reused.
 *
 * The tokens of a request do not depend on the others sharing its steps:
 * with temperature 0 they equal pfx_generate's for that request alone. */
#ifndef PFX_TOOLS_SERVE_SCHEDULER_H
#define PFX_TOOLS_SERVE_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prefixcl/prefixcl.h"

#define SCHED_MAX_STOPS 16

typedef struct sched sched;

typedef enum sched_finish {
    SCHED_FINISH_LENGTH = 0, /* max_new_tokens generated */
    SCHED_FINISH_STOP,       /* a stop id, or the token callback asked to stop */
    SCHED_FINISH_CANCELLED,  /* sched_cancel, or the scheduler shut down */
    SCHED_FINISH_ERROR,      /* a step failed (the message says why) */
} sched_finish;

/* A new token of a request (on the worker thread); false: the request ends
 * here (finish SCHED_FINISH_STOP), e.g. at a stop string. */
typedef bool (*sched_token_fn)(void *user, int32_t token);
/* The request's end (on the worker thread, or on the thread of
 * sched_shutdown): called once, after its last token; `error` is NULL unless
 * finish is SCHED_FINISH_ERROR. The scheduler forgets `user` then. */
typedef void (*sched_done_fn)(void *user, sched_finish finish, const char *error);

typedef struct sched_request {
    const int32_t *prompt; /* ids (copied at submission) */
    size_t prompt_len;
    int32_t adapter;       /* bank entry or -1 */
    float temperature;     /* 0: greedy */
    size_t top_k;          /* 0: off */
    float top_p;           /* 0 or 1: off */
    size_t max_new_tokens; /* >= 1 */
    uint64_t seed;
    const int32_t *stop; /* stop ids (kept in the output), at most SCHED_MAX_STOPS */
    size_t stop_count;
    sched_token_fn on_token;
    sched_done_fn on_done;
    void *user;
} sched_request;

typedef enum sched_answer {
    SCHED_OK = 0,
    SCHED_BUSY,    /* the queue is full: try again later */
    SCHED_INVALID, /* a bad request, or one that cannot fit (why says which limit) */
    SCHED_STOPPED, /* shut down */
} sched_answer;

typedef struct sched_stats {
    size_t queued, running, slots;
    uint64_t steps, prefill_steps, decode_steps;
    uint64_t prefill_tokens, generated_tokens;
    uint64_t occupied_slot_steps; /* sum over decode steps of the slots running */
    double step_seconds;          /* total time in steps (prefill and decode) */
    uint64_t errors;              /* failed steps */
} sched_stats;

/* A scheduler of `slots` requests of up to `max_len` tokens each (prompt +
 * new tokens) over model and bank (NULL: no adapters), with a queue of
 * `queue` waiting requests (rt: the model's runtime); it makes its own KV cache and starts its worker
 * thread. The model and bank belong to the worker until sched_destroy. NULL
 * after "why" (cap bytes) on failure. */
sched *sched_create(pfx_runtime *rt, pfx_model *model, const pfx_adapter_bank *bank, size_t slots,
                    size_t max_len, size_t queue, char *why, size_t cap);

/* Queues a request; *id (may be NULL) gets its number for sched_cancel. Not
 * SCHED_OK: why (cap bytes) says why and no callback will be called. */
sched_answer sched_submit(sched *s, const sched_request *r, uint64_t *id, char *why, size_t cap);

/* Ends request `id` at the next step (a queued one at once, on this thread),
 * finish SCHED_FINISH_CANCELLED; nothing when it has already ended. */
void sched_cancel(sched *s, uint64_t id);

void sched_get_stats(sched *s, sched_stats *out);

/* Refuses further submissions, ends every queued and running request
 * (SCHED_FINISH_CANCELLED) and stops the worker. */
void sched_shutdown(sched *s);

/* sched_shutdown, then frees the cache and the scheduler. */
void sched_destroy(sched **s);

#endif
