/* What the parts of `prefixcl serve` share: the loaded model (serve_ctx),
 * the scheduler, the names the requests use, the options and the metrics. */
#ifndef PFX_TOOLS_SERVE_SERVER_H
#define PFX_TOOLS_SERVE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "prefixcl/scheduler.h"
#include "serve_cli.h"

typedef struct server {
    serve_ctx ctx;
    pfx_scheduler *sched;
    metrics metrics;
    const char *base_name; /* the model folder's name: no adapter */
    const char *adapter_name[SERVE_MAX_ADAPTERS];
    const char *api_key;                   /* NULL: no authentication */
    bool chat_template;                    /* tokenizer_config.json has one */
    size_t max_len;                        /* tokens per request (prompt + new) */
    int32_t stop[PFX_SCHEDULER_MAX_STOPS]; /* the model's end tokens */
    size_t stop_count;
    size_t body_limit; /* bytes of a request body */
} server;

/* The bank entry a request's `model` names: -1 for the base model (or
 * NULL), -2 for an unknown name. */
int32_t server_adapter_entry(const server *srv, const char *name);

#endif
