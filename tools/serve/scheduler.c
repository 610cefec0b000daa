/* Continuous batching (scheduler.h): a bounded queue, a worker thread that
 * owns the model, the KV cache and the bank, slots reused as requests end. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "scheduler.h"
#include "step_groups.h"
#include "tool_util.h"

typedef struct job {
    uint64_t id;
    int32_t *prompt;
    sched_request r; /* r.prompt and r.stop point into this job */
    int32_t stop[SCHED_MAX_STOPS];
    pfx_sampling sampling;
    uint64_t rng;
    size_t generated;
    int32_t last;
    bool cancelled; /* under the mutex */
} job;

struct sched {
    pfx_runtime *rt;
    pfx_model *model;
    const pfx_adapter_bank *bank;
    pfx_kv_cache *cache;
    pfx_tensor *
        *logits; /* [slots]: logits[B - 1] is [B, vocab] (a step's shape), made when needed */
    size_t slots, max_len, vocab, adapters;
    float *host; /* [slots, vocab] */
    int32_t *ids, *lens, *adapter;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    job **queue; /* ring of qcap */
    size_t qcap, qhead, qcount;
    job **slot; /* [slots]; set and cleared by the worker under mu */
    size_t running;
    bool stopping, started;
    pthread_t worker;
    uint64_t next_id;
    sched_stats stats;
};

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && cap)
        vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

static void *worker_main(void *arg);

static void free_logits(sched *s)
{
    for (size_t b = 0; s->logits && b < s->slots; b++)
        pfx_tensor_destroy(&s->logits[b]);
    free(s->logits);
}

sched *sched_create(pfx_runtime *rt, pfx_model *model, const pfx_adapter_bank *bank, size_t slots,
                    size_t max_len, size_t queue, char *why, size_t cap)
{
    pfx_model_shape shape;
    if (!rt || !model || !slots || !max_len || !queue ||
        pfx_model_get_shape(model, &shape) != PFX_SUCCESS) {
        say(why, cap, "a model, slots, max_len and queue are needed");
        return NULL;
    }
    sched *s = calloc(1, sizeof(*s));
    if (!s) {
        say(why, cap, "out of host memory");
        return NULL;
    }
    s->rt = rt;
    s->model = model;
    s->bank = bank;
    s->slots = slots;
    s->max_len = max_len;
    s->vocab = shape.vocab;
    s->adapters = bank ? pfx_adapter_bank_count(bank) : 0;
    s->qcap = queue;
    s->stats.slots = slots;
    s->next_id = 1;
    s->host = malloc(slots * shape.vocab * sizeof(float));
    s->ids = calloc(slots * max_len, sizeof(int32_t));
    s->lens = calloc(slots, sizeof(int32_t));
    s->adapter = calloc(slots, sizeof(int32_t));
    s->queue = calloc(queue, sizeof(job *));
    s->slot = calloc(slots, sizeof(job *));
    s->logits = calloc(slots, sizeof(pfx_tensor *));
    if (!s->host || !s->ids || !s->lens || !s->adapter || !s->queue || !s->slot || !s->logits) {
        say(why, cap, "out of host memory");
    } else if (pfx_kv_cache_create(model, slots, max_len, &s->cache) != PFX_SUCCESS) {
        if (why && cap)
            snprintf(why, cap, "%s", pfx_last_error(rt));
    } else if (pthread_mutex_init(&s->mu, NULL) == 0) {
        if (pthread_cond_init(&s->wake, NULL) == 0) {
            if (pthread_create(&s->worker, NULL, worker_main, s) == 0) {
                s->started = true;
                return s;
            }
            pthread_cond_destroy(&s->wake);
        }
        pthread_mutex_destroy(&s->mu);
        say(why, cap, "cannot start the worker thread");
    }
    free_logits(s);
    pfx_kv_cache_destroy(&s->cache);
    free(s->host);
    free(s->ids);
    free(s->lens);
    free(s->adapter);
    free(s->queue);
    free(s->slot);
    free(s);
    return NULL;
}

/* Whether r can run at all: NULL or the reason (in why). */
static bool valid_request(const sched *s, const sched_request *r, char *why, size_t cap)
{
    if (!r || !r->prompt || !r->prompt_len || !r->on_token || !r->on_done) {
        say(why, cap, "a prompt of at least one token and both callbacks are needed");
        return false;
    }
    if (r->adapter < -1 || (r->adapter >= 0 && (size_t)r->adapter >= s->adapters)) {
        say(why, cap, "adapter %d is neither -1 nor one of the %zu adapters", (int)r->adapter,
            s->adapters);
        return false;
    }
    if (!r->max_new_tokens) {
        say(why, cap, "max_new_tokens must be at least 1");
        return false;
    }
    if (r->prompt_len > s->max_len || r->max_new_tokens > s->max_len - r->prompt_len) {
        say(why, cap,
            "a prompt of %zu tokens and %zu new tokens exceed the limit of %zu tokens per request",
            r->prompt_len, r->max_new_tokens, s->max_len);
        return false;
    }
    for (size_t i = 0; i < r->prompt_len; i++)
        if (r->prompt[i] < 0 || (size_t)r->prompt[i] >= s->vocab) {
            say(why, cap, "prompt token %zu is outside the vocabulary of %zu", i, s->vocab);
            return false;
        }
    if (!isfinite(r->temperature) || r->temperature < 0 || !isfinite(r->top_p) || r->top_p < 0 ||
        r->top_p > 1 || r->stop_count > SCHED_MAX_STOPS || (r->stop_count && !r->stop)) {
        say(why, cap, "temperature >= 0, top_p in [0, 1] and at most %d stop ids expected",
            SCHED_MAX_STOPS);
        return false;
    }
    return true;
}

sched_answer sched_submit(sched *s, const sched_request *r, uint64_t *id, char *why, size_t cap)
{
    if (!s)
        return SCHED_STOPPED;
    if (!valid_request(s, r, why, cap))
        return SCHED_INVALID;
    job *j = calloc(1, sizeof(*j));
    int32_t *prompt = malloc(r->prompt_len * sizeof(int32_t));
    if (!j || !prompt) {
        free(j);
        free(prompt);
        say(why, cap, "out of host memory");
        return SCHED_BUSY;
    }
    memcpy(prompt, r->prompt, r->prompt_len * sizeof(int32_t));
    if (r->stop_count)
        memcpy(j->stop, r->stop, r->stop_count * sizeof(int32_t));
    j->prompt = prompt;
    j->r = *r;
    j->r.prompt = prompt;
    j->r.stop = j->stop;
    j->sampling = (pfx_sampling){ r->temperature,    r->top_k, r->top_p,
                                  r->max_new_tokens, j->stop,  r->stop_count };
    j->rng = r->seed;
    pthread_mutex_lock(&s->mu);
    sched_answer a = s->stopping ? SCHED_STOPPED : s->qcount == s->qcap ? SCHED_BUSY : SCHED_OK;
    if (a == SCHED_OK) {
        j->id = s->next_id++;
        s->queue[(s->qhead + s->qcount++) % s->qcap] = j;
        s->stats.queued = s->qcount;
        if (id)
            *id = j->id;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->mu);
    if (a != SCHED_OK) {
        if (a == SCHED_BUSY)
            say(why, cap, "the queue of %zu waiting requests is full", s->qcap);
        else
            say(why, cap, "the server is shutting down");
        free(prompt);
        free(j);
    }
    return a;
}

static void free_job(job *j)
{
    free(j->prompt);
    free(j);
}

/* Takes the queued job at ring position k out (under mu). */
static job *unqueue(sched *s, size_t k)
{
    job *j = s->queue[(s->qhead + k) % s->qcap];
    for (size_t i = k; i + 1 < s->qcount; i++)
        s->queue[(s->qhead + i) % s->qcap] = s->queue[(s->qhead + i + 1) % s->qcap];
    s->qcount--;
    s->stats.queued = s->qcount;
    return j;
}

void sched_cancel(sched *s, uint64_t id)
{
    if (!s)
        return;
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
        gone->r.on_done(gone->r.user, SCHED_FINISH_CANCELLED, NULL);
        free_job(gone);
    }
}

void sched_get_stats(sched *s, sched_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

/* Ends the request of slot b and frees the slot (worker). */
static void finish(sched *s, size_t b, sched_finish how, const char *error)
{
    job *j = s->slot[b];
    j->r.on_done(j->r.user, how, error);
    pfx_kv_cache_reset(s->cache, b);
    pthread_mutex_lock(&s->mu);
    s->slot[b] = NULL;
    s->stats.running = --s->running;
    pthread_mutex_unlock(&s->mu);
    free_job(j);
}

/* Samples slot b's next token from its logits and hands it over; the
 * request ends at a stop, its length, or when its callback says so. */
static void next_token(sched *s, size_t b)
{
    job *j = s->slot[b];
    int32_t t;
    if (pfx_sample_token(s->host + b * s->vocab, s->vocab, &j->sampling, &j->rng, &t) !=
        PFX_SUCCESS) {
        finish(s, b, SCHED_FINISH_ERROR, pfx_last_error(NULL));
        return;
    }
    j->generated++;
    j->last = t;
    bool stop = !j->r.on_token(j->r.user, t);
    for (size_t i = 0; i < j->r.stop_count; i++)
        stop |= j->stop[i] == t;
    if (stop)
        finish(s, b, SCHED_FINISH_STOP, NULL);
    else if (j->generated == j->r.max_new_tokens)
        finish(s, b, SCHED_FINISH_LENGTH, NULL);
}

/* One step over the slots with lens > 0 (ids, lens set for batch slots). */
static bool run_step(sched *s, size_t batch, size_t tokens, bool prefill)
{
    for (size_t b = 0; b < batch; b++)
        s->adapter[b] = s->slot[b] ? s->slot[b]->r.adapter : -1;
    const pfx_serve_step step = { batch, tokens, s->ids, s->lens, s->adapter };
    const double t0 = tool_now_s();
    const size_t shape[2] = { batch, s->vocab };
    pfx_tensor **logits = &s->logits[batch - 1];
    pfx_status st =
        *logits ? PFX_SUCCESS : pfx_tensor_create(s->rt, PFX_DTYPE_F32, 2, shape, logits);
    if (st == PFX_SUCCESS)
        st = step_run_grouped(s->model, s->cache, s->bank, &step, *logits, s->host, s->vocab);
    const double dt = tool_now_s() - t0;
    size_t fed = 0, active = 0;
    for (size_t b = 0; b < batch; b++) {
        fed += (size_t)s->lens[b];
        active += s->lens[b] > 0;
    }
    pthread_mutex_lock(&s->mu);
    s->stats.steps++;
    s->stats.step_seconds += dt;
    if (prefill) {
        s->stats.prefill_steps++;
        s->stats.prefill_tokens += fed;
    } else {
        s->stats.decode_steps++;
        s->stats.occupied_slot_steps += active;
    }
    s->stats.errors += st != PFX_SUCCESS;
    pthread_mutex_unlock(&s->mu);
    if (st != PFX_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", pfx_last_error(s->rt));
        for (size_t b = 0; b < batch; b++)
            if (s->lens[b])
                finish(s, b, SCHED_FINISH_ERROR, msg);
        return false;
    }
    for (size_t b = 0; b < batch; b++)
        if (s->lens[b])
            next_token(s, b);
    pthread_mutex_lock(&s->mu);
    s->stats.generated_tokens += active;
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* 1 + the highest occupied slot. */
static size_t used_slots(const sched *s)
{
    size_t n = 0;
    for (size_t b = 0; b < s->slots; b++)
        if (s->slot[b])
            n = b + 1;
    return n;
}

static void *worker_main(void *arg)
{
    sched *s = arg;
    bool *fresh = calloc(s->slots, sizeof(bool)), *cancel = calloc(s->slots, sizeof(bool));
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->qcount && !s->running)
            pthread_cond_wait(&s->wake, &s->mu);
        if (s->stopping || !fresh || !cancel) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        size_t newcomers = 0, longest = 0;
        for (size_t b = 0; b < s->slots; b++) {
            cancel[b] = s->slot[b] && s->slot[b]->cancelled;
            fresh[b] = false;
            if (!s->slot[b] && s->qcount) {
                s->slot[b] = unqueue(s, 0);
                s->stats.running = ++s->running;
                fresh[b] = true;
                newcomers++;
                longest = s->slot[b]->r.prompt_len > longest ? s->slot[b]->r.prompt_len : longest;
            }
        }
        pthread_mutex_unlock(&s->mu);
        for (size_t b = 0; b < s->slots; b++)
            if (cancel[b])
                finish(s, b, SCHED_FINISH_CANCELLED, NULL);
        if (newcomers) {
            /* the newcomers' prompts, the running slots idle */
            const size_t batch = used_slots(s);
            memset(s->ids, 0, batch * longest * sizeof(int32_t));
            for (size_t b = 0; b < batch; b++) {
                s->lens[b] = fresh[b] ? (int32_t)s->slot[b]->r.prompt_len : 0;
                if (fresh[b])
                    memcpy(s->ids + b * longest, s->slot[b]->r.prompt,
                           s->slot[b]->r.prompt_len * sizeof(int32_t));
            }
            run_step(s, batch, longest, true);
        }
        /* one token for every running slot */
        const size_t batch = used_slots(s);
        for (size_t b = 0; b < batch; b++) {
            s->lens[b] = s->slot[b] ? 1 : 0;
            s->ids[b] = s->slot[b] ? s->slot[b]->last : 0;
        }
        if (batch)
            run_step(s, batch, 1, false);
    }
    free(fresh);
    free(cancel);
    return NULL;
}

void sched_shutdown(sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    const bool join = s->started;
    s->stopping = true;
    s->started = false;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (join)
        pthread_join(s->worker, NULL);
    /* the worker is gone: end what it left, on this thread */
    for (size_t b = 0; b < s->slots; b++)
        if (s->slot[b])
            finish(s, b, SCHED_FINISH_CANCELLED, NULL);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        job *j = s->qcount ? unqueue(s, 0) : NULL;
        pthread_mutex_unlock(&s->mu);
        if (!j)
            break;
        j->r.on_done(j->r.user, SCHED_FINISH_CANCELLED, NULL);
        free_job(j);
    }
}

void sched_destroy(sched **sp)
{
    if (!sp || !*sp)
        return;
    sched *s = *sp;
    sched_shutdown(s);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free_logits(s);
    pfx_kv_cache_destroy(&s->cache);
    free(s->host);
    free(s->ids);
    free(s->lens);
    free(s->adapter);
    free(s->queue);
    free(s->slot);
    free(s);
    *sp = NULL;
}
