/* Continuous batching (scheduler.h): a bounded queue, a worker thread that
 * owns the model, the KV cache and the bank, slots reused as requests end. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefixcl/scheduler.h"
#include "prompt_cache.h"
#include "serve_internal.h"

typedef struct job {
    uint64_t id;
    int32_t *prompt;
    pfx_sched_request r; /* r.prompt and r.sampling.stop point into this job */
    int32_t stop[PFX_SCHEDULER_MAX_STOPS];
    pfx_logit_bias *bias; /* r.sampling.logit_bias */
    int32_t *out;         /* [max_new_tokens] the tokens generated */
    uint64_t rng;
    size_t generated;
    int32_t last;
    bool cancelled; /* under the mutex */
} job;

/* A pfx_scheduler_call waiting for the worker. */
typedef struct call {
    pfx_status (*fn)(void *user);
    void *user;
    pfx_status result;
    bool done, refused; /* refused: the scheduler shut down first */
    struct call *next;
} call;

struct pfx_scheduler {
    pfx_runtime *rt;
    pfx_model *model;
    pfx_context *ctx; /* the steps' workspace: slots x max_len */
    const pfx_adapter_bank *bank;
    pfx_kv_cache *cache;
    prompt_cache *pc; /* NULL: none */
    pfx_tensor *
        *logits; /* [slots]: logits[B - 1] is [B, vocab] (a step's shape), made when needed */
    size_t slots, max_len, vocab, positions;
    size_t adapters, prefix_len; /* the bank's, under mu (pfx_scheduler_call may add) */
    float *host;                 /* [slots, vocab] */
    int32_t *ids, *lens, *adapter;
    bool *fresh, *cancel; /* [slots]: the worker's marks of one round */
    size_t *reused;       /* [slots]: a newcomer's rows from the prompt cache */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t called; /* a call is done */
    call *calls;           /* waiting for the worker, under mu */
    job **queue;           /* ring of qcap */
    size_t qcap, qhead, qcount;
    job **slot; /* [slots]; set and cleared by the worker under mu */
    size_t running;
    bool stopping, started;
    pthread_t worker;
    uint64_t next_id;
    pfx_scheduler_stats stats;
};

static void *worker_main(void *arg);

static void free_scheduler(pfx_scheduler *s)
{
    for (size_t b = 0; s->logits && b < s->slots; b++)
        pfx_tensor_destroy(&s->logits[b]);
    free(s->logits);
    prompt_cache_destroy(&s->pc);
    pfx_kv_cache_destroy(&s->cache);
    pfx_context_destroy(&s->ctx);
    free(s->host);
    free(s->ids);
    free(s->lens);
    free(s->adapter);
    free(s->fresh);
    free(s->cancel);
    free(s->reused);
    free(s->queue);
    free(s->slot);
    free(s);
}

pfx_status pfx_scheduler_create(pfx_model *model, const pfx_adapter_bank *bank,
                                const pfx_scheduler_params *p, pfx_scheduler **out)
{
    static const char fn[] = "scheduler_create";
    if (!out)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: model is NULL", fn);
    pfx_runtime *rt = model->rt;
    if (!p)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: params is NULL", fn);
    if (p->slots == 0 || p->slots > INT32_MAX)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: params.slots %zu outside 1..%d", fn,
                         p->slots, INT32_MAX);
    if (p->max_len < 2 || p->max_len > model->cfg.shape.max_positions)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: params.max_len %zu outside 2..%zu (the model's positions)", fn,
                         p->max_len, model->cfg.shape.max_positions);
    if (p->queue == 0)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: params.queue is 0", fn);
    if (!pfx_kv_dtype_valid(p->kv_dtype))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: params.kv_dtype %d is not F32, F16 or BF16", fn, (int)p->kv_dtype);
    pfx_scheduler *s = calloc(1, sizeof(*s));
    if (!s)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    const size_t V = model->cfg.shape.vocab, n = p->slots;
    *s = (pfx_scheduler){ .rt = rt,
                          .model = model,
                          .bank = bank,
                          .slots = n,
                          .max_len = p->max_len,
                          .vocab = V,
                          .positions = model->cfg.shape.max_positions,
                          .adapters = bank ? pfx_adapter_bank_count(bank) : 0,
                          .prefix_len = bank ? pfx_adapter_bank_prefix_len(bank) : 0,
                          .qcap = p->queue,
                          .next_id = 1 };
    s->stats.slots = n;
    s->host = malloc(n * V * sizeof(float));
    s->ids = calloc(n * p->max_len, sizeof(int32_t));
    s->lens = calloc(n, sizeof(int32_t));
    s->adapter = calloc(n, sizeof(int32_t));
    s->fresh = calloc(n, sizeof(bool));
    s->cancel = calloc(n, sizeof(bool));
    s->reused = calloc(n, sizeof(size_t));
    s->queue = calloc(p->queue, sizeof(job *));
    s->slot = calloc(n, sizeof(job *));
    s->logits = calloc(n, sizeof(pfx_tensor *));
    pfx_status st = PFX_SUCCESS;
    if (!s->host || !s->ids || !s->lens || !s->adapter || !s->fresh || !s->cancel || !s->reused ||
        !s->queue || !s->slot || !s->logits)
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    pfx_context_params cp = { .max_batch = n, .max_tokens = p->max_len };
    if (st == PFX_SUCCESS)
        st = pfx_context_create(model, &cp, &s->ctx);
    if (st == PFX_SUCCESS)
        st = pfx_kv_cache_create_dtype(model, n, p->max_len, p->kv_dtype, &s->cache);
    if (st == PFX_SUCCESS && p->prompt_cache_bytes &&
        !(s->pc = prompt_cache_create(model, p->kv_dtype, p->prompt_cache_bytes)))
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    if (st == PFX_SUCCESS && pthread_mutex_init(&s->mu, NULL) != 0)
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: cannot make a mutex", fn);
    if (st == PFX_SUCCESS && pthread_cond_init(&s->wake, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: cannot make a condition variable", fn);
    }
    if (st == PFX_SUCCESS && pthread_cond_init(&s->called, NULL) != 0) {
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: cannot make a condition variable", fn);
    }
    if (st == PFX_SUCCESS && pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        pthread_cond_destroy(&s->called);
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: cannot start the worker thread", fn);
    }
    if (st != PFX_SUCCESS) {
        free_scheduler(s);
        return st;
    }
    s->started = true;
    *out = s;
    return PFX_SUCCESS;
}

/* Every field of r checked (errors of the calling thread). */
static pfx_status check_request(const pfx_scheduler *s, const pfx_sched_request *r, size_t adapters,
                                size_t prefix_len)
{
    static const char fn[] = "scheduler_submit";
    if (!r)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: request is NULL", fn);
    if (!r->prompt || !r->on_token || !r->on_done)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: request.%s is NULL", fn,
                         !r->prompt     ? "prompt"
                         : !r->on_token ? "on_token"
                                        : "on_done");
    const pfx_sampling *q = &r->sampling;
    if (r->adapter < -1 || (r->adapter >= 0 && (size_t)r->adapter >= adapters))
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "%s: request.adapter %d is neither -1 nor in the bank (%zu "
                         "adapters)",
                         fn, (int)r->adapter, adapters);
    if (r->prompt_len == 0 || q->max_new_tokens == 0)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "%s: request.%s is 0", fn,
                         !r->prompt_len ? "prompt_len" : "sampling.max_new_tokens");
    if (r->prompt_len > s->max_len || q->max_new_tokens > s->max_len - r->prompt_len)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                         "%s: a prompt of %zu tokens and %zu new tokens exceed the "
                         "limit of %zu tokens per request (max_len)",
                         fn, r->prompt_len, q->max_new_tokens, s->max_len);
    /* the last new token is not fed: it takes no position */
    const size_t P = r->adapter >= 0 ? prefix_len : 0;
    if (P + r->prompt_len + q->max_new_tokens - 1 > s->positions)
        return pfx_error(
            NULL, PFX_ERROR_OUT_OF_RANGE,
            "%s: a prompt of %zu tokens and %zu new tokens after the adapter's prefix of %zu "
            "exceed the model's %zu positions",
            fn, r->prompt_len, q->max_new_tokens, P, s->positions);
    for (size_t i = 0; i < r->prompt_len; i++)
        if (r->prompt[i] < 0 || (size_t)r->prompt[i] >= s->vocab)
            return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                             "%s: request.prompt[%zu] = %d outside [0, %zu)", fn, i,
                             (int)r->prompt[i], s->vocab);
    pfx_status st = pfx_sampling_check(NULL, fn, "request.sampling", q, s->vocab);
    if (st != PFX_SUCCESS)
        return st;
    if (r->on_logprobs && r->top_logprobs > PFX_TOP_LOGPROBS_MAX)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "%s: request.top_logprobs %zu outside 0..%d",
                         fn, r->top_logprobs, PFX_TOP_LOGPROBS_MAX);
    if (q->stop_count > PFX_SCHEDULER_MAX_STOPS || (q->stop_count && !q->stop))
        return pfx_error(NULL, q->stop ? PFX_ERROR_OUT_OF_RANGE : PFX_ERROR_NULL_ARGUMENT,
                         "%s: request.sampling.stop_count %zu: at most %d ids, and stop not NULL",
                         fn, q->stop_count, PFX_SCHEDULER_MAX_STOPS);
    return PFX_SUCCESS;
}

pfx_status pfx_scheduler_submit(pfx_scheduler *s, const pfx_sched_request *r, uint64_t *id)
{
    static const char fn[] = "scheduler_submit";
    if (!s)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: scheduler is NULL", fn);
    pthread_mutex_lock(&s->mu);
    const size_t adapters = s->adapters, prefix_len = s->prefix_len;
    pthread_mutex_unlock(&s->mu);
    pfx_status st = check_request(s, r, adapters, prefix_len);
    if (st != PFX_SUCCESS)
        return st;
    job *j = calloc(1, sizeof(*j));
    int32_t *prompt = malloc(r->prompt_len * sizeof(int32_t));
    const size_t nb = r->sampling.logit_bias_count;
    if (j) {
        j->out = malloc(r->sampling.max_new_tokens * sizeof(int32_t));
        j->bias = nb ? malloc(nb * sizeof(pfx_logit_bias)) : NULL;
    }
    if (!j || !prompt || !j->out || (nb && !j->bias)) {
        if (j) {
            free(j->out);
            free(j->bias);
        }
        free(j);
        free(prompt);
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    }
    memcpy(prompt, r->prompt, r->prompt_len * sizeof(int32_t));
    if (r->sampling.stop_count)
        memcpy(j->stop, r->sampling.stop, r->sampling.stop_count * sizeof(int32_t));
    if (nb)
        memcpy(j->bias, r->sampling.logit_bias, nb * sizeof(pfx_logit_bias));
    j->prompt = prompt;
    j->r = *r;
    j->r.prompt = prompt;
    j->r.sampling.stop = j->stop;
    j->r.sampling.logit_bias = j->bias;
    j->rng = r->seed;
    pthread_mutex_lock(&s->mu);
    st = s->stopping ? PFX_ERROR_UNSUPPORTED : s->qcount == s->qcap ? PFX_ERROR_BUSY : PFX_SUCCESS;
    if (st == PFX_SUCCESS) {
        j->id = s->next_id++;
        s->queue[(s->qhead + s->qcount++) % s->qcap] = j;
        s->stats.queued = s->qcount;
        if (id)
            *id = j->id;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->mu);
    if (st == PFX_SUCCESS)
        return st;
    free(prompt);
    free(j->out);
    free(j->bias);
    free(j);
    if (st == PFX_ERROR_BUSY)
        return pfx_error(NULL, st, "%s: the queue of %zu waiting requests is full: try again later",
                         fn, s->qcap);
    return pfx_error(NULL, st, "%s: the scheduler has shut down", fn);
}

static void free_job(job *j)
{
    free(j->prompt);
    free(j->out);
    free(j->bias);
    free(j);
}

/* Takes the queued job at ring position k out (under mu). */
static job *unqueue(pfx_scheduler *s, size_t k)
{
    job *j = s->queue[(s->qhead + k) % s->qcap];
    for (size_t i = k; i + 1 < s->qcount; i++)
        s->queue[(s->qhead + i) % s->qcap] = s->queue[(s->qhead + i + 1) % s->qcap];
    s->qcount--;
    s->stats.queued = s->qcount;
    return j;
}

pfx_status pfx_scheduler_cancel(pfx_scheduler *s, uint64_t id)
{
    if (!s)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "scheduler_cancel: scheduler is NULL");
    job *gone = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t k = 0; k < s->qcount && !gone; k++)
        if (s->queue[(s->qhead + k) % s->qcap]->id == id)
            gone = unqueue(s, k);
    for (size_t b = 0; b < s->slots && !gone; b++)
        if (s->slot[b] && s->slot[b]->id == id)
            s->slot[b]->cancelled = true;
    pthread_mutex_unlock(&s->mu);
    if (gone) {
        gone->r.on_done(gone->r.user, PFX_FINISH_CANCELLED, NULL);
        free_job(gone);
    }
    return PFX_SUCCESS;
}

pfx_status pfx_scheduler_get_stats(pfx_scheduler *s, pfx_scheduler_stats *out)
{
    if (!s || !out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "scheduler_get_stats: %s is NULL",
                         !s ? "scheduler" : "out");
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
    return PFX_SUCCESS;
}

/* Ends the request of slot b and frees the slot (worker). */
static void finish(pfx_scheduler *s, size_t b, pfx_finish how, const char *error)
{
    job *j = s->slot[b];
    /* the slot is free before the request's owner hears of its end */
    pfx_kv_cache_reset(s->cache, b);
    pthread_mutex_lock(&s->mu);
    s->slot[b] = NULL;
    s->stats.running = --s->running;
    pthread_mutex_unlock(&s->mu);
    j->r.on_done(j->r.user, how, error);
    free_job(j);
}

/* Samples slot b's next token from its logits and hands it over; the
 * request ends at a stop token, at its length, or when its callback says. */
static void next_token(pfx_scheduler *s, size_t b)
{
    job *j = s->slot[b];
    int32_t t;
    pfx_token_logprobs lp = { .top_count = j->r.top_logprobs };
    if (pfx_sample_next(s->host + b * s->vocab, s->vocab, &j->r.sampling, j->prompt,
                        j->r.prompt_len, j->out, j->generated, &j->rng, &t,
                        j->r.on_logprobs ? &lp : NULL) != PFX_SUCCESS) {
        finish(s, b, PFX_FINISH_ERROR, pfx_last_error(NULL));
        return;
    }
    j->out[j->generated++] = t;
    j->last = t;
    if (j->r.on_logprobs)
        j->r.on_logprobs(j->r.user, &lp);
    bool stop = !j->r.on_token(j->r.user, t);
    for (size_t i = 0; i < j->r.sampling.stop_count; i++)
        stop |= j->stop[i] == t;
    if (stop)
        finish(s, b, PFX_FINISH_STOP, NULL);
    else if (j->generated == j->r.sampling.max_new_tokens)
        finish(s, b, PFX_FINISH_LENGTH, NULL);
}

/* One step over the slots with lens > 0 (ids and lens set for batch slots). */
static void run_step(pfx_scheduler *s, size_t batch, size_t tokens, bool prefill)
{
    for (size_t b = 0; b < batch; b++)
        s->adapter[b] = s->slot[b] ? s->slot[b]->r.adapter : -1;
    const pfx_serve_step step = { batch, tokens, s->ids, s->lens, s->adapter };
    const double t0 = pfx_host_seconds();
    const size_t shape[2] = { batch, s->vocab };
    pfx_tensor **logits = &s->logits[batch - 1];
    pfx_status st =
        *logits ? PFX_SUCCESS : pfx_tensor_create(s->rt, PFX_DTYPE_F32, 2, shape, logits);
    if (st == PFX_SUCCESS)
        st = pfx_serve_step_run(s->ctx, s->cache, s->bank, &step, *logits);
    if (st == PFX_SUCCESS) /* slots may carry different adapters' gains: one step */
        st = pfx_tensor_read(*logits, 0, batch * s->vocab, s->host);
    const double dt = pfx_host_seconds() - t0;
    size_t fed = 0, active = 0;
    for (size_t b = 0; b < batch; b++) {
        fed += (size_t)s->lens[b];
        active += s->lens[b] > 0;
    }
    pthread_mutex_lock(&s->mu);
    s->stats.step_seconds += dt;
    if (prefill) {
        s->stats.prefill_steps++;
        s->stats.prefill_tokens += fed;
    } else {
        s->stats.decode_steps++;
        s->stats.occupied_slot_steps += active;
    }
    s->stats.failed_steps += st != PFX_SUCCESS;
    s->stats.generated_tokens += st == PFX_SUCCESS ? active : 0;
    pthread_mutex_unlock(&s->mu);
    if (st == PFX_SUCCESS && prefill) /* kept before a slot that ends frees its rows */
        for (size_t b = 0; b < batch; b++)
            if (s->fresh[b] && s->lens[b])
                prompt_cache_save(s->pc, s->cache, b, s->slot[b]->r.adapter, s->slot[b]->prompt,
                                  s->slot[b]->r.prompt_len);
    if (st != PFX_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", pfx_last_error(s->rt));
        for (size_t b = 0; b < batch; b++)
            if (s->lens[b])
                finish(s, b, PFX_FINISH_ERROR, msg);
        return;
    }
    for (size_t b = 0; b < batch; b++)
        if (s->lens[b])
            next_token(s, b);
}

/* 1 + the highest occupied slot. */
static size_t used_slots(const pfx_scheduler *s)
{
    size_t n = 0;
    for (size_t b = 0; b < s->slots; b++)
        if (s->slot[b])
            n = b + 1;
    return n;
}

/* Under mu: marks the cancelled slots and moves waiting requests into free
 * ones; returns the newcomers' longest prompt (0: none). */
static size_t admit(pfx_scheduler *s)
{
    size_t longest = 0;
    for (size_t b = 0; b < s->slots; b++) {
        s->cancel[b] = s->slot[b] && s->slot[b]->cancelled;
        s->fresh[b] = false;
        if (!s->slot[b] && s->qcount) {
            s->slot[b] = unqueue(s, 0);
            s->stats.running = ++s->running;
            s->fresh[b] = true;
            longest = s->slot[b]->r.prompt_len > longest ? s->slot[b]->r.prompt_len : longest;
        }
    }
    return longest;
}

/* Under mu, on the worker: the waiting calls, between two steps. */
static void run_calls(pfx_scheduler *s)
{
    while (s->calls) {
        call *c = s->calls;
        s->calls = c->next;
        pthread_mutex_unlock(&s->mu);
        const pfx_status st = c->fn(c->user);
        prompt_cache_clear(s->pc); /* the bank's entries may be others now */
        pthread_mutex_lock(&s->mu);
        s->adapters = s->bank ? pfx_adapter_bank_count(s->bank) : 0;
        s->prefix_len = s->bank ? pfx_adapter_bank_prefix_len(s->bank) : 0;
        c->result = st;
        c->done = true;
        pthread_cond_broadcast(&s->called);
    }
}

pfx_status pfx_scheduler_call(pfx_scheduler *s, pfx_status (*fn)(void *user), void *user)
{
    if (!s || !fn)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "scheduler_call: %s is NULL",
                         !s ? "scheduler" : "fn");
    call c = { fn, user, PFX_SUCCESS, false, false, NULL };
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "scheduler_call: the scheduler has shut down");
    }
    call **tail = &s->calls;
    while (*tail)
        tail = &(*tail)->next;
    *tail = &c;
    pthread_cond_signal(&s->wake);
    while (!c.done)
        pthread_cond_wait(&s->called, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (c.refused)
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "scheduler_call: the scheduler has shut down");
    return c.result;
}

static void *worker_main(void *arg)
{
    pfx_scheduler *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->qcount && !s->running && !s->calls)
            pthread_cond_wait(&s->wake, &s->mu);
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        run_calls(s);
        const size_t longest = admit(s);
        pthread_mutex_unlock(&s->mu);
        for (size_t b = 0; b < s->slots; b++)
            if (s->cancel[b])
                finish(s, b, PFX_FINISH_CANCELLED, NULL);
        size_t batch = used_slots(s);
        if (longest) {
            /* the newcomers' prompts after the rows they reuse, the running slots idle */
            size_t *reused = s->reused, hits = 0, rows = 0, rest = 0;
            for (size_t b = 0; b < batch; b++) {
                const job *j = s->slot[b];
                reused[b] = s->fresh[b] ? prompt_cache_restore(s->pc, s->cache, b, j->r.adapter,
                                                               j->prompt, j->r.prompt_len)
                                        : 0;
                hits += reused[b] > 0;
                rows += reused[b];
                if (s->fresh[b] && j->r.prompt_len - reused[b] > rest)
                    rest = j->r.prompt_len - reused[b];
            }
            memset(s->ids, 0, batch * rest * sizeof(int32_t));
            for (size_t b = 0; b < batch; b++) {
                const job *j = s->slot[b];
                s->lens[b] = s->fresh[b] ? (int32_t)(j->r.prompt_len - reused[b]) : 0;
                if (s->fresh[b])
                    memcpy(s->ids + b * rest, j->prompt + reused[b],
                           (j->r.prompt_len - reused[b]) * sizeof(int32_t));
            }
            pthread_mutex_lock(&s->mu);
            s->stats.prompt_cache_hits += hits;
            s->stats.prompt_cache_tokens += rows;
            pthread_mutex_unlock(&s->mu);
            run_step(s, batch, rest, true);
            batch = used_slots(s);
        }
        /* one token for every running slot */
        for (size_t b = 0; b < batch; b++) {
            s->lens[b] = s->slot[b] ? 1 : 0;
            s->ids[b] = s->slot[b] ? s->slot[b]->last : 0;
        }
        if (batch)
            run_step(s, batch, 1, false);
    }
}

pfx_status pfx_scheduler_shutdown(pfx_scheduler *s)
{
    if (!s)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "scheduler_shutdown: scheduler is NULL");
    pthread_mutex_lock(&s->mu);
    const bool join = s->started;
    s->stopping = true;
    s->started = false;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (join)
        pthread_join(s->worker, NULL);
    /* calls the worker did not take: refused */
    pthread_mutex_lock(&s->mu);
    for (call *c = s->calls; c; c = c->next) {
        c->refused = c->done = true;
    }
    s->calls = NULL;
    pthread_cond_broadcast(&s->called);
    pthread_mutex_unlock(&s->mu);
    /* the worker is gone: end what it left, on this thread */
    for (size_t b = 0; b < s->slots; b++)
        if (s->slot[b])
            finish(s, b, PFX_FINISH_CANCELLED, NULL);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        job *j = s->qcount ? unqueue(s, 0) : NULL;
        pthread_mutex_unlock(&s->mu);
        if (!j)
            return PFX_SUCCESS;
        j->r.on_done(j->r.user, PFX_FINISH_CANCELLED, NULL);
        free_job(j);
    }
}

void pfx_scheduler_destroy(pfx_scheduler **sp)
{
    if (!sp || !*sp)
        return;
    pfx_scheduler *s = *sp;
    pfx_scheduler_shutdown(s);
    pthread_cond_destroy(&s->called);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free_scheduler(s);
    *sp = NULL;
}
