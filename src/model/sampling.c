/* Host-side sampling over one row of next-token logits (logit bias and
 * penalties, then greedy, or temperature, top-k, top-p and min-p) with a splitmix64 generator, and the generation loop over
 * a batch of requests (one prefill, then decode steps). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve_internal.h"

pfx_status pfx_sampling_check(pfx_runtime *rt, const char *fn, const char *name,
                              const pfx_sampling *s, size_t vocab)
{
    if (!s)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn, name);
    if (!isfinite(s->temperature) || s->temperature < 0.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: %s.temperature %g must be finite and >= 0", fn, name,
                         (double)s->temperature);
    if (!isfinite(s->top_p) || s->top_p < 0.0f || s->top_p > 1.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: %s.top_p %g outside [0, 1]", fn, name,
                         (double)s->top_p);
    if (s->max_new_tokens == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: %s.max_new_tokens is 0", fn, name);
    if (s->stop_count && !s->stop)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s.stop is NULL with stop_count %zu", fn,
                         name, s->stop_count);
    if (!(s->min_p >= 0.0f && s->min_p <= 1.0f))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: %s.min_p %g outside [0, 1]", fn, name,
                         (double)s->min_p);
    if (!(s->presence_penalty >= -2.0f && s->presence_penalty <= 2.0f) ||
        !(s->frequency_penalty >= -2.0f && s->frequency_penalty <= 2.0f))
        return pfx_error(
            rt, PFX_ERROR_INVALID_ARGUMENT, "%s: %s.%s_penalty %g outside [-2, 2]", fn, name,
            s->presence_penalty >= -2.0f && s->presence_penalty <= 2.0f ? "frequency" : "presence",
            (double)(s->presence_penalty >= -2.0f && s->presence_penalty <= 2.0f
                         ? s->frequency_penalty
                         : s->presence_penalty));
    if (!isfinite(s->repetition_penalty) || s->repetition_penalty < 0.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: %s.repetition_penalty %g must be finite and > 0 (0: off)", fn, name,
                         (double)s->repetition_penalty);
    if (s->logit_bias_count && !s->logit_bias)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                         "%s: %s.logit_bias is NULL with logit_bias_count %zu", fn, name,
                         s->logit_bias_count);
    for (size_t i = 0; i < s->logit_bias_count; i++) {
        const pfx_logit_bias *b = &s->logit_bias[i];
        if (b->token < 0 || (size_t)b->token >= vocab)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                             "%s: %s.logit_bias[%zu].token %d outside [0, %zu)", fn, name, i,
                             (int)b->token, vocab);
        if (!(b->bias >= -100.0f && b->bias <= 100.0f))
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "%s: %s.logit_bias[%zu].bias %g outside [-100, 100]", fn, name, i,
                             (double)b->bias);
    }
    return PFX_SUCCESS;
}

typedef struct cand {
    float z;
    int32_t id;
} cand;

/* Larger logit first, then the lower id: a total order, so the draw does
 * not depend on qsort's handling of ties. */
static int by_logit(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->z != y->z)
        return x->z > y->z ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool processes(const pfx_sampling *s, size_t prompt_len, size_t generated_len)
{
    const bool repetition = s->repetition_penalty != 0.0f && s->repetition_penalty != 1.0f;
    return s->logit_bias_count || (repetition && prompt_len + generated_len > 0) ||
           ((s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f) && generated_len > 0);
}

/* z[V] = logits after logit_bias and the penalties (pfx_sampling's order). */
static pfx_status process(const float *logits, size_t V, const pfx_sampling *s,
                          const int32_t *prompt, size_t prompt_len, const int32_t *generated,
                          size_t generated_len, float *z)
{
    memcpy(z, logits, V * sizeof(float));
    for (size_t i = 0; i < s->logit_bias_count; i++)
        z[s->logit_bias[i].token] += s->logit_bias[i].bias;
    const float rp = s->repetition_penalty;
    const bool repetition = rp != 0.0f && rp != 1.0f;
    if (!repetition && s->presence_penalty == 0.0f && s->frequency_penalty == 0.0f)
        return PFX_SUCCESS;
    unsigned char *seen = calloc(V, 1); /* bit 0: repetition applied, bit 1: presence */
    if (!seen)
        return PFX_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; repetition && i < prompt_len + generated_len; i++) {
        const int32_t t = i < prompt_len ? prompt[i] : generated[i - prompt_len];
        if (seen[t] & 1)
            continue;
        seen[t] |= 1;
        z[t] = z[t] > 0.0f ? z[t] / rp : z[t] * rp;
    }
    for (size_t i = 0; i < generated_len; i++) {
        const int32_t t = generated[i];
        z[t] -= s->frequency_penalty;
        if (!(seen[t] & 2))
            z[t] -= s->presence_penalty;
        seen[t] |= 2;
    }
    free(seen);
    return PFX_SUCCESS;
}

/* logprobs of token (and the top_count most likely) under softmax(z). */
static void log_softmax_of(const float *z, size_t V, int32_t token, pfx_token_logprobs *lp)
{
    double m = -INFINITY, sum = 0.0;
    for (size_t i = 0; i < V; i++)
        m = z[i] > m ? z[i] : m;
    for (size_t i = 0; i < V; i++)
        sum += z[i] == -INFINITY ? 0.0 : exp((double)z[i] - m);
    const double lse = m + log(sum);
    lp->logprob = (float)((double)z[token] - lse);
    /* the top_count largest, by insertion into a short sorted list */
    const size_t k = lp->top_count < V ? lp->top_count : V;
    size_t n = 0;
    for (size_t i = 0; i < V && k; i++) {
        if (n == k && !(z[i] > z[lp->top_ids[n - 1]]))
            continue;
        size_t at = n < k ? n++ : n - 1;
        while (at > 0 && z[i] > z[lp->top_ids[at - 1]]) {
            lp->top_ids[at] = lp->top_ids[at - 1];
            at--;
        }
        lp->top_ids[at] = (int32_t)i;
    }
    lp->top_count = n;
    for (size_t i = 0; i < n; i++)
        lp->top_logprobs[i] = (float)((double)z[lp->top_ids[i]] - lse);
}

/* The draw from processed logits z (validated). */
static pfx_status draw(const float *z, size_t vocab, const pfx_sampling *s, uint64_t *rng,
                       int32_t *token)
{
    static const char fn[] = "sample_token";
    if (s->temperature == 0.0f) {
        size_t best = 0;
        for (size_t i = 1; i < vocab; i++)
            if (z[i] > z[best])
                best = i;
        *token = (int32_t)best;
        return PFX_SUCCESS;
    }
    cand *c = malloc(vocab * sizeof(*c));
    if (!c)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    for (size_t i = 0; i < vocab; i++)
        c[i] = (cand){ z[i], (int32_t)i };
    qsort(c, vocab, sizeof(*c), by_logit);
    size_t keep = s->top_k && s->top_k < vocab ? s->top_k : vocab;
    /* softmax of z / T over the kept candidates, in double */
    double *w = malloc(keep * sizeof(double)), sum = 0.0;
    if (!w) {
        free(c);
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    }
    for (size_t i = 0; i < keep; i++) {
        w[i] = c[i].z == -INFINITY
                   ? 0.0
                   : exp(((double)c[i].z - (double)c[0].z) / (double)s->temperature);
        sum += w[i];
    }
    if (s->top_p > 0.0f && s->top_p < 1.0f) {
        /* the smallest set of most likely tokens whose mass reaches top_p */
        double acc = 0.0;
        size_t n = 0;
        while (n < keep && acc < (double)s->top_p * sum)
            acc += w[n++];
        keep = n ? n : 1;
        sum = acc > 0.0 ? acc : w[0];
    }
    if (s->min_p > 0.0f) {
        /* the tokens at least min_p times as likely as the first */
        size_t n = 1;
        double acc = w[0];
        while (n < keep && w[n] >= (double)s->min_p * w[0])
            acc += w[n++];
        keep = n;
        sum = acc > 0.0 ? acc : w[0];
    }
    /* a 53-bit uniform in [0, sum) */
    double u = (double)(pfx_splitmix64(rng) >> 11) * (1.0 / 9007199254740992.0) * sum, acc = 0.0;
    size_t pick = keep - 1;
    for (size_t i = 0; i < keep; i++) {
        acc += w[i];
        if (u < acc) {
            pick = i;
            break;
        }
    }
    *token = c[pick].id;
    free(w);
    free(c);
    return PFX_SUCCESS;
}

pfx_status pfx_sample_next(const float *logits, size_t vocab, const pfx_sampling *s,
                           const int32_t *prompt, size_t prompt_len, const int32_t *generated,
                           size_t generated_len, uint64_t *rng, int32_t *token,
                           pfx_token_logprobs *logprobs)
{
    static const char fn[] = "sample_token";
    if (!logits || !rng || !token)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !logits ? "logits"
                         : !rng  ? "rng"
                                 : "token");
    if (vocab == 0 || vocab > INT32_MAX)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "%s: vocab %zu outside 1..%d", fn, vocab,
                         INT32_MAX);
    pfx_status st = pfx_sampling_check(NULL, fn, "sampling", s, vocab);
    if (st != PFX_SUCCESS)
        return st;
    if ((prompt_len && !prompt) || (generated_len && !generated))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL with a length of %zu", fn,
                         prompt_len && !prompt ? "prompt" : "generated",
                         prompt_len && !prompt ? prompt_len : generated_len);
    for (size_t i = 0; i < prompt_len + generated_len; i++) {
        const int32_t t = i < prompt_len ? prompt[i] : generated[i - prompt_len];
        if (t < 0 || (size_t)t >= vocab)
            return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "%s: %s[%zu] = %d outside [0, %zu)", fn,
                             i < prompt_len ? "prompt" : "generated",
                             i < prompt_len ? i : i - prompt_len, (int)t, vocab);
    }
    if (logprobs && logprobs->top_count > PFX_TOP_LOGPROBS_MAX)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "%s: logprobs.top_count %zu outside 0..%d",
                         fn, logprobs->top_count, PFX_TOP_LOGPROBS_MAX);
    for (size_t i = 0; i < vocab; i++)
        if (isnan(logits[i]) || logits[i] == INFINITY)
            return pfx_error(NULL, PFX_ERROR_NOT_FINITE, "%s: logits[%zu] is %g", fn, i,
                             (double)logits[i]);
    float *z = NULL;
    if (processes(s, prompt_len, generated_len)) {
        if (!(z = malloc(vocab * sizeof(float))) ||
            process(logits, vocab, s, prompt, prompt_len, generated, generated_len, z)) {
            free(z);
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
        }
    }
    const float *use = z ? z : logits;
    st = draw(use, vocab, s, rng, token);
    if (st == PFX_SUCCESS && logprobs)
        log_softmax_of(use, vocab, *token, logprobs);
    free(z);
    return st;
}

pfx_status pfx_sample_token(const float *logits, size_t vocab, const pfx_sampling *s, uint64_t *rng,
                            int32_t *token)
{
    return pfx_sample_next(logits, vocab, s, NULL, 0, NULL, 0, rng, token, NULL);
}

static bool is_stop(const pfx_sampling *s, int32_t t)
{
    for (size_t i = 0; i < s->stop_count; i++)
        if (s->stop[i] == t)
            return true;
    return false;
}

/* The whole batch (each request with its adapter's gains), validated by the caller. */
static pfx_status generate_batch(pfx_context *ctx, pfx_kv_cache *cache,
                                 const pfx_adapter_bank *bank, pfx_request *requests, size_t count,
                                 const pfx_sampling *sampling, pfx_token_fn on_token, void *user,
                                 pfx_generate_stats *stats)
{
    const pfx_model *model = pfx_context_model(ctx);
    static const char fn[] = "generate";
    pfx_runtime *rt = model->rt;
    pfx_status st = PFX_SUCCESS;
    const size_t V = model->cfg.shape.vocab;
    size_t N = 0;
    for (size_t r = 0; r < count; r++)
        N = requests[r].prompt_len > N ? requests[r].prompt_len : N;
    int32_t *ids = calloc(count * N, sizeof(int32_t)), *lens = calloc(count, sizeof(int32_t));
    int32_t *adapter = calloc(count, sizeof(int32_t));
    uint64_t *rng = calloc(count, sizeof(uint64_t));
    float *host = malloc(count * V * sizeof(float));
    bool *done = calloc(count, sizeof(bool));
    pfx_tensor *logits = NULL;
    const size_t shape[2] = { count, V };
    if (!ids || !lens || !adapter || !rng || !host || !done)
        st = pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &logits);
    for (size_t r = 0; st == PFX_SUCCESS && r < count; r++) {
        memcpy(ids + r * N, requests[r].prompt, requests[r].prompt_len * sizeof(int32_t));
        lens[r] = (int32_t)requests[r].prompt_len;
        adapter[r] = requests[r].adapter;
        rng[r] = requests[r].seed;
        requests[r].out_len = 0;
        requests[r].end = false;
        st = pfx_kv_cache_reset(cache, r);
    }
    pfx_generate_stats acc;
    memset(&acc, 0, sizeof(acc));
    pfx_serve_step step = { count, N, ids, lens, adapter };
    size_t live = count;
    for (size_t k = 0; st == PFX_SUCCESS && live; k++) {
        const double t0 = pfx_host_seconds(), built0 = rt->cache.build_seconds;
        size_t fed = 0;
        for (size_t r = 0; r < count; r++)
            fed += (size_t)lens[r];
        if ((st = pfx_serve_step_run(ctx, cache, bank, &step, logits)) ||
            (st = pfx_tensor_read(logits, 0, count * V, host)))
            break;
        /* the kernels' first builds apart: the rates count steady-state work */
        const double built = rt->cache.build_seconds - built0, dt = pfx_host_seconds() - t0 - built;
        acc.build_seconds += built;
        if (k == 0) {
            acc.prefill_tokens += fed;
            acc.prefill_seconds += dt;
        } else {
            acc.decode_tokens += fed;
            acc.decode_seconds += dt;
        }
        step.tokens = 1;
        for (size_t r = 0; r < count && st == PFX_SUCCESS; r++) {
            pfx_request *q = &requests[r];
            if (done[r])
                continue;
            int32_t t;
            if ((st = pfx_sample_next(host + r * V, V, sampling, q->prompt, q->prompt_len, q->out,
                                      q->out_len, &rng[r], &t, NULL)))
                st = pfx_error(rt, st, "%s: requests[%zu]: %s", fn, r, pfx_last_error(NULL));
            if (st)
                break;
            q->out[q->out_len++] = t;
            if (on_token)
                on_token(user, r, t);
            done[r] = q->out_len == sampling->max_new_tokens || is_stop(sampling, t) || q->end;
            live -= done[r];
            ids[r] = t;
            lens[r] = done[r] ? 0 : 1;
        }
    }
    stats->prefill_tokens += acc.prefill_tokens;
    stats->prefill_seconds += acc.prefill_seconds;
    stats->decode_tokens += acc.decode_tokens;
    stats->decode_seconds += acc.decode_seconds;
    stats->build_seconds += acc.build_seconds;
    pfx_tensor_destroy(&logits);
    free(ids);
    free(lens);
    free(adapter);
    free(rng);
    free(host);
    free(done);
    return st;
}

pfx_status pfx_generate(pfx_context *ctx, pfx_kv_cache *cache, const pfx_adapter_bank *bank,
                        pfx_request *requests, size_t count, const pfx_sampling *sampling,
                        pfx_token_fn on_token, void *user, pfx_generate_stats *stats)
{
    const pfx_model *model = pfx_context_model(ctx);
    static const char fn[] = "generate";
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: ctx is NULL", fn);
    pfx_runtime *rt = model->rt;
    if (!cache || !requests)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !cache ? "cache" : "requests");
    pfx_status st = pfx_sampling_check(rt, fn, "sampling", sampling, model->cfg.shape.vocab);
    if (st != PFX_SUCCESS)
        return st;
    if (count == 0 || count > cache->slots)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: count %zu outside 1..%zu (the cache's slots)", fn, count,
                         cache->slots);
    if (count > ctx->p.max_batch)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: count %zu exceeds the context's max_batch %zu", fn, count,
                         ctx->p.max_batch);
    for (size_t r = 0; r < count; r++) {
        const pfx_request *q = &requests[r];
        if (!q->prompt || !q->out)
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: requests[%zu].%s is NULL", fn, r,
                             !q->prompt ? "prompt" : "out");
        if (q->prompt_len == 0 || q->prompt_len > ctx->p.max_tokens)
            return pfx_error(
                rt, PFX_ERROR_OUT_OF_RANGE,
                "%s: requests[%zu].prompt_len %zu outside 1..the context's max_tokens %zu", fn, r,
                q->prompt_len, ctx->p.max_tokens);
        if (q->prompt_len + sampling->max_new_tokens - 1 > cache->max_len)
            return pfx_error(
                rt, PFX_ERROR_OUT_OF_RANGE,
                "%s: requests[%zu] needs %zu cached tokens, the cache holds %zu per slot", fn, r,
                q->prompt_len + sampling->max_new_tokens - 1, cache->max_len);
        if (q->adapter < -1 || (q->adapter >= 0 && (!bank || (size_t)q->adapter >= bank->count)))
            return pfx_error(
                rt, PFX_ERROR_OUT_OF_RANGE,
                "%s: requests[%zu].adapter %d is neither -1 nor in the bank (%zu adapters)", fn, r,
                (int)q->adapter, bank ? bank->count : 0);
        for (size_t i = 0; i < q->prompt_len; i++)
            if (q->prompt[i] < 0 || (size_t)q->prompt[i] >= model->cfg.shape.vocab)
                return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                                 "%s: requests[%zu].prompt[%zu] = %d outside [0, %zu)", fn, r, i,
                                 (int)q->prompt[i], model->cfg.shape.vocab);
    }
    pfx_generate_stats acc;
    memset(&acc, 0, sizeof(acc));
    st = generate_batch(ctx, cache, bank, requests, count, sampling, on_token, user, &acc);
    if (stats)
        *stats = acc;
    return st;
}
