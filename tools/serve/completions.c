/* POST /v1/completions (completions.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access_log.h"
#include "completion_job.h"
#include "completions.h"
#include "sse.h"

/* A seed for a request that gave none: different each time. */
static uint64_t fresh_seed(void)
{
    static uint64_t count;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                 (__atomic_add_fetch(&count, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The first choice that failed or was cancelled, or NULL. */
static const completion_choice *failed(const completion *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->choices[i].finish == PFX_FINISH_ERROR ||
            c->choices[i].finish == PFX_FINISH_CANCELLED)
            return &c->choices[i];
    return NULL;
}

static enum MHD_Result answer(server *srv, struct MHD_Connection *conn, completion *c)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const bool gone = completion_wait(c, info ? info->connect_fd : -1);
    const completion_choice *bad = failed(c);
    enum MHD_Result r;
    if (gone) {
        /* no one to answer: counted as nginx counts a client that closed first */
        metrics_response(&srv->metrics, 499);
        access_log_status(499);
        r = MHD_NO;
    } else if (bad && bad->finish == PFX_FINISH_ERROR) {
        r = reply_error(srv, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "generation failed: %s",
                        bad->error);
    } else if (bad) {
        r = reply_error(srv, conn, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
                        "the server is shutting down");
    } else {
        cJSON *o = completion_object(c);
        bool ok = o != NULL;
        for (size_t i = 0; ok && i < c->n; i++)
            ok = completion_add_choice(c, o, i, c->choices[i].text,
                                       completion_finish_reason(&c->choices[i]), 0,
                                       c->choices[i].count);
        if (!ok || !completion_add_usage(c, o)) {
            cJSON_Delete(o);
            o = NULL;
        }
        metrics_tokens(&srv->metrics, c->prompt_len, completion_tokens(c));
        access_log_tokens(c->prompt_len, completion_tokens(c));
        r = reply_json(srv, conn, MHD_HTTP_OK, o);
    }
    completion_release(c);
    return r;
}

enum MHD_Result completions_handle(server *srv, struct MHD_Connection *conn, const char *body,
                                   size_t len)
{
    completion_req req;
    char why[512];
    const char *field;
    if (!completion_req_parse(body, len, &req, why, sizeof(why), &field)) {
        completion_req_free(&req);
        return reply_error(srv, conn, MHD_HTTP_BAD_REQUEST, field, "%s", why);
    }
    return completions_run(srv, conn, &req, PFX_ENCODE_ADD_SPECIAL);
}

/* A 400 naming `what` (req freed, entry dropped, prompts' ids freed). */
static enum MHD_Result refuse(server *srv, struct MHD_Connection *conn, completion_req *req,
                              int32_t entry, int32_t **ids, size_t prompts, const char *what,
                              const char *why)
{
    enum MHD_Result r = reply_error(srv, conn, MHD_HTTP_BAD_REQUEST, what, "%s", why);
    for (size_t i = 0; i < prompts; i++)
        free(ids[i]);
    completion_req_free(req);
    server_adapter_drop(srv, entry);
    return r;
}

enum MHD_Result completions_run(server *srv, struct MHD_Connection *conn, completion_req *r,
                                unsigned encode_flags)
{
    completion_req req = *r;
    memset(r, 0, sizeof(*r));
    if (req.model && strcmp(req.model, srv->base_name))
        access_log_adapter(req.model);
    /* held from here: by the completion once made */
    const int32_t entry = server_adapter_take(srv, req.model);
    if (entry == -2) {
        enum MHD_Result res = reply_error(
            srv, conn, MHD_HTTP_NOT_FOUND, "model",
            "model \"%s\" is neither the base model \"%s\" nor an adapter (GET /v1/models)",
            req.model, srv->base_name);
        completion_req_free(&req);
        return res;
    }
    /* a chat's one rendered prompt, or a completion's prompts */
    const size_t prompts = req.prompt_count ? req.prompt_count : 1;
    int32_t *ids[COMPLETION_MAX_PROMPTS] = { NULL };
    size_t lens[COMPLETION_MAX_PROMPTS] = { 0 }, total = 0;
    const char *what = req.chat ? "messages" : "prompt";
    char why[600];
    for (size_t p = 0; p < prompts; p++) {
        const char *text = req.prompt_count ? req.prompts[p] : req.prompt;
        if (!srv->ctx.tok ||
            pfx_tokenizer_encode(srv->ctx.tok, text, strlen(text), encode_flags, &ids[p],
                                 &lens[p]) != PFX_SUCCESS ||
            !lens[p]) {
            const char *cause = !srv->ctx.tok ? "the model folder has no tokenizer"
                                : lens[p]     ? pfx_last_error(NULL)
                                              : "no tokens";
            if (prompts > 1)
                snprintf(why, sizeof(why), "%s[%zu]: %s", what, p, cause);
            else
                snprintf(why, sizeof(why), "%s: %s", what, cause);
            return refuse(srv, conn, &req, entry, ids, prompts, what, why);
        }
        if (lens[p] > srv->max_len || req.max_tokens > srv->max_len - lens[p]) {
            snprintf(why, sizeof(why),
                     "max_tokens: a prompt of %zu tokens and %zu new tokens exceed the limit of "
                     "%zu tokens per request (--max-len)",
                     lens[p], req.max_tokens, srv->max_len);
            return refuse(srv, conn, &req, entry, ids, prompts, "max_tokens", why);
        }
        total += lens[p];
    }
    access_log_tokens(total, 0);
    const pfx_sampling sampling = { .temperature = req.temperature,
                                    .top_k = req.top_k,
                                    .top_p = req.top_p,
                                    .max_new_tokens = req.max_tokens,
                                    .stop = srv->stop,
                                    .stop_count = srv->stop_count,
                                    .min_p = req.min_p,
                                    .presence_penalty = req.presence_penalty,
                                    .frequency_penalty = req.frequency_penalty,
                                    .repetition_penalty = req.repetition_penalty,
                                    .logit_bias = req.logit_bias,
                                    .logit_bias_count = req.logit_bias_count };
    const uint64_t seed = req.has_seed ? req.seed : fresh_seed();
    const bool stream = req.stream, logprobs = req.logprobs;
    const size_t top_logprobs = req.top_logprobs, per = req.n ? req.n : 1;
    completion *c = completion_new(srv, &req, prompts, total);
    if (!c) {
        for (size_t p = 0; p < prompts; p++)
            free(ids[p]);
        completion_req_free(&req);
        server_adapter_drop(srv, entry);
        return reply_error(srv, conn, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "out of host memory");
    }
    c->entry = entry;
    /* choice p * n + i: prompt p, sampled with seed + i: the choices of a
     * prompt differ, and each equals a request of n 1 with that seed
     * (the scheduler copies the prompt and the logit bias) */
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; i < c->n && st == PFX_SUCCESS; i++) {
        completion_choice *ch = &c->choices[i];
        const pfx_sched_request sr = { .prompt = ids[ch->prompt],
                                       .prompt_len = lens[ch->prompt],
                                       .adapter = entry,
                                       .sampling = sampling,
                                       .seed = seed + i % per,
                                       .on_token = completion_on_token,
                                       .on_done = completion_on_done,
                                       .user = ch,
                                       .on_logprobs = logprobs ? completion_on_logprobs : NULL,
                                       .top_logprobs = top_logprobs };
        completion_hold(c); /* the scheduler's, released by completion_on_done */
        uint64_t sched_id = 0;
        st = pfx_scheduler_submit(srv->sched, &sr, &sched_id);
        pthread_mutex_lock(&c->mu);
        ch->sched_id = sched_id;
        ch->submitted = st == PFX_SUCCESS;
        pthread_mutex_unlock(&c->mu);
        if (st != PFX_SUCCESS)
            completion_release(c); /* never taken */
    }
    for (size_t p = 0; p < prompts; p++)
        free(ids[p]);
    if (st != PFX_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", pfx_last_error(NULL));
        completion_cancel(c); /* the choices submitted before */
        completion_release(c);
        /* a full queue, or shutting down: try again later */
        if (st == PFX_ERROR_BUSY || st == PFX_ERROR_UNSUPPORTED)
            return reply_error(srv, conn, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, "%s", msg);
        const char *field = strstr(msg, "logit_bias") ? "logit_bias" : "max_tokens";
        return reply_error(srv, conn, MHD_HTTP_BAD_REQUEST, field, "%s", msg);
    }
    return stream ? sse_reply(srv, conn, c) : answer(srv, conn, c);
}
