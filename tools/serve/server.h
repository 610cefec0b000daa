/* What the parts of `prefixcl serve` share: the loaded model (serve_ctx),
 * the scheduler, the names the requests use, the options and the metrics. */
#ifndef PFX_TOOLS_SERVE_SERVER_H
#define PFX_TOOLS_SERVE_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_template.h"
#include "metrics.h"
#include "prefixcl/scheduler.h"
#include "commands/serve_cli.h"

#define SERVE_NAME_MAX 128

typedef struct server {
    serve_ctx ctx;
    pfx_scheduler *sched;
    metrics metrics;
    const char *base_name; /* the model folder's name: no adapter */
    /* the name of each bank entry ("": deleted), under names_mu: the admin
     * endpoints change them while requests read them */
    char adapter_name[SERVE_MAX_ADAPTERS][SERVE_NAME_MAX];
    size_t entry_uses[SERVE_MAX_ADAPTERS]; /* requests holding each entry */
    size_t entries;                        /* bank entries in use */
    pthread_mutex_t names_mu;
    bool allow_admin;                      /* POST and DELETE /v1/adapters */
    pthread_mutex_t admin_mu;              /* one adapter change at a time */
    const char *api_key;                   /* NULL: no authentication */
    chat_template chat;                    /* tokenizer_config.json's */
    size_t max_len;                        /* tokens per request (prompt + new) */
    int32_t stop[PFX_SCHEDULER_MAX_STOPS]; /* the model's end tokens */
    size_t stop_count;
    size_t body_limit; /* bytes of a request body */
} server;

/* The bank entry a request's `model` names: -1 for the base model (or
 * NULL), -2 for an unknown name. */
int32_t server_adapter_entry(server *srv, const char *name);
/* The same, the entry then held by a request until server_adapter_drop:
 * a deleted adapter's entry is loaded again only once no request holds
 * it. */
int32_t server_adapter_take(server *srv, const char *name);
void server_adapter_drop(server *srv, int32_t entry);
/* An entry of a deleted adapter that no request holds (to load another
 * adapter into), or -1. */
int32_t server_free_entry(server *srv);

/* Whether name is unused: not empty, shorter than SERVE_NAME_MAX, not the
 * base model's, not an adapter's (why says which, cap bytes). */
bool server_name_free(server *srv, const char *name, char *why, size_t cap);

/* The names of the adapters (in bank order, deleted ones left out) into
 * names; returns their number. */
size_t server_adapter_names(server *srv, char names[][SERVE_NAME_MAX]);

#endif
