/*
 * prefixcl: continuous batching of generation requests (no HTTP needed).
 * A scheduler owns a KV cache and a worker thread that, from its creation
 * to its destruction, is the only user of the model, the bank and their
 * runtime. Any thread submits requests into a bounded queue; at every step
 * the worker moves waiting requests into free cache slots (one prefill step
 * for the newcomers, the running slots idle), then runs one decode step over
 * every running slot, each slot with its own adapter or none. Each new token
 * goes to its request's callback on the worker thread; a request leaves its
 * slot when it is done or cancelled, and the slot (pfx_kv_cache_reset) takes
 * the next one.
 *
 * The tokens of a request do not depend on the requests sharing its steps:
 * with temperature 0 they equal pfx_generate's for that request alone.
 *
 * pfx_scheduler_create reports errors in pfx_last_error(rt) of the model's
 * runtime; the other calls, from any thread, in pfx_last_error(NULL) of the
 * calling thread (the runtime belongs to the worker).
 */
#ifndef PREFIXCL_SCHEDULER_H
#define PREFIXCL_SCHEDULER_H

#include "prefixcl/generate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_scheduler pfx_scheduler;

#define PFX_SCHEDULER_MAX_STOPS 16

typedef enum pfx_finish {
    PFX_FINISH_LENGTH = 0, /* max_new_tokens generated */
    PFX_FINISH_STOP,       /* a stop token (kept), or the token callback asked to stop */
    PFX_FINISH_CANCELLED,  /* pfx_scheduler_cancel, or the scheduler shut down */
    PFX_FINISH_ERROR,      /* a step failed (the message says why) */
} pfx_finish;

/* A new token of a request (on the worker thread); false ends the request
 * there (PFX_FINISH_STOP), e.g. at a stop string the caller looks for. */
typedef bool (*pfx_sched_token_fn)(void *user, int32_t token);
/* The request's end, once, after its last token: on the worker thread, or
 * on the thread of pfx_scheduler_cancel (a queued request) or of
 * pfx_scheduler_shutdown. error is NULL unless finish is PFX_FINISH_ERROR.
 * The scheduler forgets user then. */
typedef void (*pfx_sched_done_fn)(void *user, pfx_finish finish, const char *error);
/* The log-probabilities of a new token (pfx_sample_next's), on the worker
 * thread just before its on_token. */
typedef void (*pfx_sched_logprobs_fn)(void *user, const pfx_token_logprobs *logprobs);

typedef struct pfx_sched_request {
    const int32_t *prompt; /* host ids, 1..max_len (copied by submit) */
    size_t prompt_len;
    int32_t adapter;       /* bank entry or -1 (none) */
    pfx_sampling sampling; /* max_new_tokens >= 1; at most PFX_SCHEDULER_MAX_STOPS stop ids
                                 * (copied), logit_bias copied; the penalties see the
                                 * prompt and the request's own tokens */
    uint64_t seed;         /* of this request's sampling, as pfx_request's */
    pfx_sched_token_fn on_token;
    pfx_sched_done_fn on_done;
    void *user;
    pfx_sched_logprobs_fn on_logprobs; /* NULL: none */
    size_t top_logprobs;               /* with on_logprobs: 0..PFX_TOP_LOGPROBS_MAX */
} pfx_sched_request;

typedef struct pfx_scheduler_params {
    size_t slots;   /* requests generating at once: >= 1 */
    size_t max_len; /* tokens of a request, prompt and new: 2..the model's positions */
    size_t queue;   /* requests waiting for a slot: >= 1 */
    /* bytes of the prompt cache (0: none): the keys and values of prompts
     * prefilled, per adapter; a new prompt that starts with a kept one
     * reuses those rows and prefills only the rest (its slot then takes a
     * slower step, item by item, and its logits may differ from a whole
     * prefill's in the last bits, as a request's do from slot to slot). The
     * least recently used prompt goes first; a pfx_scheduler_call empties
     * it (the bank may have changed). */
    size_t prompt_cache_bytes;
    /* the KV cache's storage (pfx_kv_cache_create_dtype): PFX_DTYPE_F32 (0,
     * the default), F16 or BF16; another is PFX_ERROR_INVALID_ARGUMENT. The
     * prompt cache keeps its rows in the same dtype. */
    pfx_dtype kv_dtype;
} pfx_scheduler_params;

typedef struct pfx_scheduler_stats {
    size_t queued, running, slots;
    uint64_t prefill_steps, decode_steps;
    uint64_t prefill_tokens, generated_tokens;
    uint64_t occupied_slot_steps; /* sum over decode steps of the slots running */
    double step_seconds;          /* in steps, prefill and decode */
    uint64_t failed_steps;
    uint64_t prompt_cache_hits;   /* requests that reused a kept prompt's rows */
    uint64_t prompt_cache_tokens; /* the rows they reused (tokens not prefilled) */
} pfx_scheduler_stats;

/* A scheduler over model and bank (NULL: no adapters): its context
 * (max_batch slots, max_tokens max_len), its KV cache (slots x max_len, in
 * params.kv_dtype) and its worker thread. */
PFX_API pfx_status pfx_scheduler_create(pfx_model *model, const pfx_adapter_bank *bank,
                                        const pfx_scheduler_params *params, pfx_scheduler **out);

/* Queues a request; *id (may be NULL) gets its number for
 * pfx_scheduler_cancel. A full queue is PFX_ERROR_BUSY (try again later), a
 * request longer than max_len PFX_ERROR_OUT_OF_RANGE naming the limit, a
 * scheduler shut down PFX_ERROR_UNSUPPORTED; on any error no callback is
 * ever called. */
PFX_API pfx_status pfx_scheduler_submit(pfx_scheduler *s, const pfx_sched_request *request,
                                        uint64_t *id);

/* Ends request `id` at the worker's next step (a queued one at once),
 * PFX_FINISH_CANCELLED; nothing when it has already ended. */
PFX_API pfx_status pfx_scheduler_cancel(pfx_scheduler *s, uint64_t id);

PFX_API pfx_status pfx_scheduler_get_stats(pfx_scheduler *s, pfx_scheduler_stats *out);

/* Runs fn(user) on the worker thread between two steps, when the model,
 * the bank and their runtime are free (e.g. for pfx_adapter_bank_add),
 * waits for it and returns what fn returned; requests may name the bank's
 * new entries from then on. A scheduler shut down is PFX_ERROR_UNSUPPORTED
 * (fn not run). Not from a callback of this scheduler (it would wait on
 * itself). */
PFX_API pfx_status pfx_scheduler_call(pfx_scheduler *s, pfx_status (*fn)(void *user), void *user);

/* Refuses further requests, ends every queued and running one
 * (PFX_FINISH_CANCELLED) and stops the worker; the model is the caller's
 * again. */
PFX_API pfx_status pfx_scheduler_shutdown(pfx_scheduler *s);

/* pfx_scheduler_shutdown, then frees the cache and the scheduler; *s = NULL.
 * NULL-safe. */
PFX_API void pfx_scheduler_destroy(pfx_scheduler **s);

#ifdef __cplusplus
}
#endif

#endif
