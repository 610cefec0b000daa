/* Counters of `prefixcl serve` for GET /metrics (Prometheus text format). */
#ifndef PFX_TOOLS_SERVE_METRICS_H
#define PFX_TOOLS_SERVE_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "prefixcl/scheduler.h"

#define METRICS_CODES 16

typedef struct metrics {
    pthread_mutex_t mu;
    int code[METRICS_CODES]; /* HTTP status of each counted row */
    uint64_t requests[METRICS_CODES];
    uint64_t prompt_tokens, completion_tokens;
} metrics;

void metrics_init(metrics *m);
void metrics_free(metrics *m);
/* A response with HTTP status `code`. */
void metrics_response(metrics *m, int code);
void metrics_tokens(metrics *m, size_t prompt, size_t completion);
/* The text of every counter and the scheduler's gauges (malloc'ed). */
char *metrics_render(metrics *m, const pfx_scheduler_stats *st);

#endif
