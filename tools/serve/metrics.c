/* Prometheus text of the server's counters (metrics.h). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

void metrics_init(metrics *m)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
}

void metrics_free(metrics *m)
{
    pthread_mutex_destroy(&m->mu);
}

void metrics_response(metrics *m, int code)
{
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < METRICS_CODES; i++)
        if (m->code[i] == code || !m->code[i] || i + 1 == METRICS_CODES) {
            /* the last row takes every code past the table's size */
            m->code[i] = m->code[i] ? m->code[i] : code;
            m->requests[i]++;
            break;
        }
    pthread_mutex_unlock(&m->mu);
}

void metrics_tokens(metrics *m, size_t prompt, size_t completion)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->completion_tokens += completion;
    pthread_mutex_unlock(&m->mu);
}

typedef struct text {
    char *s;
    size_t len, cap;
    bool failed;
} text;

__attribute__((format(printf, 2, 3))) static void add(text *t, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !t->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
        } else if (t->s && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        } else {
            size_t cap = (t->cap + (size_t)n + 1) * 2;
            char *s = realloc(t->s, cap);
            t->failed = !s;
            if (s)
                t->s = s, t->cap = cap;
        }
    }
}

char *metrics_render(metrics *m, const pfx_scheduler_stats *st)
{
    text t = { 0 };
    pthread_mutex_lock(&m->mu);
    add(&t, "# HELP prefixcl_requests_total HTTP responses by status code.\n"
            "# TYPE prefixcl_requests_total counter\n");
    for (size_t i = 0; i < METRICS_CODES && m->code[i]; i++)
        add(&t, "prefixcl_requests_total{code=\"%d\"} %llu\n", m->code[i],
            (unsigned long long)m->requests[i]);
    add(&t,
        "# HELP prefixcl_prompt_tokens_total Prompt tokens of the completions served.\n"
        "# TYPE prefixcl_prompt_tokens_total counter\nprefixcl_prompt_tokens_total %llu\n"
        "# HELP prefixcl_generation_tokens_total Tokens generated for the completions served.\n"
        "# TYPE prefixcl_generation_tokens_total counter\nprefixcl_generation_tokens_total %llu\n",
        (unsigned long long)m->prompt_tokens, (unsigned long long)m->completion_tokens);
    pthread_mutex_unlock(&m->mu);
    const double occupancy =
        st->decode_steps && st->slots
            ? (double)st->occupied_slot_steps / ((double)st->decode_steps * st->slots)
            : 0.0;
    add(&t,
        "# HELP prefixcl_queue_depth Requests waiting for a slot.\n# TYPE prefixcl_queue_depth "
        "gauge\n"
        "prefixcl_queue_depth %zu\n"
        "# HELP prefixcl_running_requests Requests holding a slot.\n# TYPE "
        "prefixcl_running_requests gauge\n"
        "prefixcl_running_requests %zu\n"
        "# HELP prefixcl_slots Slots of the KV cache.\n# TYPE prefixcl_slots gauge\nprefixcl_slots "
        "%zu\n"
        "# HELP prefixcl_batch_occupancy Mean fraction of the slots running per decode step.\n"
        "# TYPE prefixcl_batch_occupancy gauge\nprefixcl_batch_occupancy %.4f\n",
        st->queued, st->running, st->slots, occupancy);
    add(&t,
        "# HELP prefixcl_step_seconds Time in model steps (prefill and decode).\n"
        "# TYPE prefixcl_step_seconds summary\nprefixcl_step_seconds_sum "
        "%.6f\nprefixcl_step_seconds_count %llu\n"
        "# HELP prefixcl_steps_total Model steps by kind.\n# TYPE prefixcl_steps_total counter\n"
        "prefixcl_steps_total{kind=\"prefill\"} %llu\nprefixcl_steps_total{kind=\"decode\"} %llu\n"
        "# HELP prefixcl_step_errors_total Failed model steps.\n# TYPE prefixcl_step_errors_total "
        "counter\n"
        "prefixcl_step_errors_total %llu\n",
        st->step_seconds, (unsigned long long)(st->prefill_steps + st->decode_steps),
        (unsigned long long)st->prefill_steps, (unsigned long long)st->decode_steps,
        (unsigned long long)st->failed_steps);
    add(&t,
        "# HELP prefixcl_prompt_cache_hits_total Requests that reused a kept prompt's keys and "
        "values.\n# TYPE prefixcl_prompt_cache_hits_total counter\n"
        "prefixcl_prompt_cache_hits_total %llu\n"
        "# HELP prefixcl_prompt_cache_tokens_total Prompt tokens reused from the prompt cache "
        "(not prefilled).\n# TYPE prefixcl_prompt_cache_tokens_total counter\n"
        "prefixcl_prompt_cache_tokens_total %llu\n",
        (unsigned long long)st->prompt_cache_hits, (unsigned long long)st->prompt_cache_tokens);
    if (t.failed) {
        free(t.s);
        return NULL;
    }
    return t.s;
}
