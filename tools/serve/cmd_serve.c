/* prefixcl serve: an OpenAI-compatible HTTP server over a model folder and
 * its prefix adapters, requests batched continuously (scheduler.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/cli.h"
#include "commands/commands.h"
#include "http.h"
#include "server.h"
#include "common/tool_util.h"

#define BODY_LIMIT (1u << 20)

static const cli_doc doc = { "prefixcl serve --model DIR [--adapter NAME=PATH]... [options]", NULL,
                             "At most " CLI_STR(
                                 SERVE_MAX_ADAPTERS) " adapters in all, of one prefix length. "
                                                     "Endpoints: POST /v1/completions,\n"
                                                     "POST /v1/chat/completions, GET /v1/models, "
                                                     "GET /health, GET /metrics.\n"
                                                     "SIGINT or SIGTERM stops the server.\n" };

/* The last name of a path ("a/b/" -> "b"), in buf. */
static const char *last_name(const char *path, char *buf, size_t cap)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/')
        s--;
    snprintf(buf, cap, "%.*s", (int)(n - s), path + s);
    return buf;
}

int cmd_serve(int argc, char **argv)
{
    const char *model = NULL, *device = NULL, *host = "127.0.0.1",
               *adapter_args[SERVE_MAX_ADAPTERS];
    uint64_t port = 8000, slots = 4, max_len = 0, queue = 64, request_timeout = 10,
             max_connections = 256, client_connections = 64, prompt_cache = 0;
    static char base[256];
    bool admin = false;
    int storage = PFX_DTYPE_F32, kv_dtype = PFX_DTYPE_F32;
    server srv;
    memset(&srv, 0, sizeof(srv));
    cli_list adapters = { adapter_args, NULL, SERVE_MAX_ADAPTERS, 0, NULL };
    const cli_option opts[] = {
        { "--model", CLI_TEXT, &model, 0, 0, NULL, NULL, "DIR",
          "a Hugging Face folder (config.json, safetensors, tokenizer)", NULL },
        { "--adapter", CLI_TEXTS, &adapters, 0, 0, NULL, NULL, "NAME=PATH",
          "a prefix adapter (as generate takes it), which a request's \"model\" asks for by NAME "
          "(default: the path's last name); the model folder's own name means none (repeatable)",
          NULL },
        { "--host", CLI_TEXT, &host, 0, 0, NULL, NULL, "ADDR", "numeric address to listen on",
          "127.0.0.1" },
        { "--port", CLI_U64, &port, 0, 65535, NULL, NULL, "N",
          "the port; 0: any free port, printed", "8000" },
        { "--slots", CLI_U64, &slots, 1, 256, NULL, NULL, "N", "requests generating at once", "4" },
        { "--max-len", CLI_U64, &max_len, 2, 1 << 20, NULL, NULL, "N",
          "tokens of a request, prompt and completion",
          "the model's positions less the prefix, at most 512" },
        { "--queue", CLI_U64, &queue, 1, 1 << 16, NULL, NULL, "N",
          "requests waiting for a slot before 503", "64" },
        { "--prompt-cache", CLI_U64, &prompt_cache, 0, 1 << 20, NULL, NULL, "MIB",
          "MiB of prompt keys and values kept per adapter: a prompt that starts with a kept one "
          "prefills only the rest (0: none)",
          "0" },
        { "--request-timeout", CLI_U64, &request_timeout, 1, 3600, NULL, NULL, "S",
          "seconds a connection has to send a whole request (headers and body), from its start "
          "or its last answer, before it is closed",
          "10" },
        { "--max-connections", CLI_U64, &max_connections, 1, 1 << 16, NULL, NULL, "N",
          "connections open at once (a thread each); past them new ones are closed", "256" },
        { "--client-connections", CLI_U64, &client_connections, 0, 1 << 16, NULL, NULL, "N",
          "connections open at once from one client address; 0: no cap (behind a proxy, every "
          "client is the proxy)",
          "64" },
        { "--api-key", CLI_TEXT, &srv.api_key, 0, 0, NULL, NULL, "KEY",
          "require Authorization: Bearer KEY (all but /health)", NULL },
        { "--allow-adapter-admin", CLI_FLAG, &admin, 0, 0, NULL, NULL, NULL,
          "POST /v1/adapters {name, path}, DELETE /v1/adapters/NAME", NULL },
        { "--storage", CLI_CHOICE, &storage, 0, 0, tool_storages, NULL, "T",
          "the weights on the device", "f32" },
        { "--kv-dtype", CLI_CHOICE, &kv_dtype, 0, 0, tool_kv_dtypes, NULL, "T",
          "the KV cache's storage: f16 and bf16 hold half the bytes (llama.cpp's cache is f16), "
          "rounded to nearest even",
          "f32" },
        { "--device", CLI_TEXT, &device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
    };
    const int parsed =
        cli_parse("serve", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    srv.ctx.storage = (pfx_dtype)storage; /* tool_storages is in pfx_dtype order */
    /* NAME=PATH, or PATH named by its last name */
    for (size_t k = 0; k < adapters.count; k++) {
        const char *v = adapter_args[k], *eq = strchr(v, '=');
        char *name = srv.adapter_name[k];
        if (eq)
            snprintf(name, SERVE_NAME_MAX, "%.*s", (int)(eq - v), v);
        else
            last_name(v, name, SERVE_NAME_MAX);
        srv.ctx.adapter[k] = eq ? eq + 1 : v;
    }
    srv.ctx.adapters = adapters.count;
    if (!model) {
        fprintf(stderr, "prefixcl serve: --model is required\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    srv.base_name = last_name(model, base, sizeof(base));
    pthread_mutex_init(&srv.names_mu, NULL);
    pthread_mutex_init(&srv.admin_mu, NULL);
    for (size_t i = 0; i < srv.ctx.adapters; i++) {
        char why[256];
        if (!srv.ctx.adapter[i][0] ||
            !server_name_free(&srv, srv.adapter_name[i], why, sizeof(why))) {
            fprintf(stderr, "prefixcl serve: --adapter %s=%s: %s\n", srv.adapter_name[i],
                    srv.ctx.adapter[i], srv.ctx.adapter[i][0] ? why : "the path is empty");
            return 2;
        }
        srv.entries = i + 1;
    }
    srv.allow_admin = admin;
    /* room in the bank for the adapters the admin endpoints add */
    srv.ctx.bank_capacity = admin ? SERVE_MAX_ADAPTERS : 0;
    const bool max_len_given = max_len != 0;
    if (!serve_open(&srv.ctx, "serve", device, model, max_len_given ? max_len : 512))
        return 1;
    if (!max_len_given)
        max_len = srv.ctx.tokens;
    int status = 1;
    http *h = NULL;
    metrics_init(&srv.metrics);
    if (max_len > srv.ctx.tokens) {
        fprintf(stderr,
                "prefixcl serve: --max-len %llu: at most %zu tokens fit (the model's positions "
                "less the "
                "adapters' prefix)\n",
                (unsigned long long)max_len, srv.ctx.tokens);
        goto out;
    }
    srv.max_len = max_len;
    srv.body_limit = BODY_LIMIT;
    chat_template_load(&srv.chat, model);
    if (srv.chat.found && !srv.chat.parsed)
        fprintf(stderr, "prefixcl serve: /v1/chat/completions will answer 500: %s\n", srv.chat.why);
    srv.stop_count = serve_default_stops(&srv.ctx, srv.stop, PFX_SCHEDULER_MAX_STOPS);
    char why[512];
    const pfx_scheduler_params sp = { .slots = slots,
                                      .max_len = max_len,
                                      .queue = queue,
                                      .prompt_cache_bytes = (size_t)prompt_cache << 20,
                                      .kv_dtype = (pfx_dtype)kv_dtype }; /* tool_kv_dtypes order */
    if (pfx_scheduler_create(srv.ctx.model, srv.ctx.bank, &sp, &srv.sched) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl serve: %s\n", pfx_last_error(srv.ctx.rt));
        goto out;
    }
    cli_stop_catch();
    uint16_t bound = 0;
    const http_limits limits = { (unsigned)request_timeout, (unsigned)max_connections,
                                 (unsigned)client_connections };
    if (!(h = http_start(&srv, host, (uint16_t)port, &limits, &bound, why, sizeof(why)))) {
        fprintf(stderr, "prefixcl serve: %s\n", why);
        goto out;
    }
    printf("prefixcl serve: listening on http://%s%s%s:%u (model %s, %zu adapter%s, %llu slots "
           "of %llu tokens, %s)\n",
           strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", (unsigned)bound,
           srv.base_name, srv.ctx.adapters, srv.ctx.adapters == 1 ? "" : "s",
           (unsigned long long)slots, (unsigned long long)max_len,
           pfx_runtime_device(srv.ctx.rt)->device_name);
    fflush(stdout);
    while (!cli_stop) {
        const struct timespec tick = { 0, 100 * 1000 * 1000 };
        nanosleep(&tick, NULL);
    }
    fprintf(stderr, "prefixcl serve: stopping (signal %d)\n", (int)cli_stop);
    status = 0;
out:
    /* the requests end first, so that their connections can finish */
    if (srv.sched)
        pfx_scheduler_shutdown(srv.sched);
    http_stop(&h);
    pfx_scheduler_destroy(&srv.sched);
    metrics_free(&srv.metrics);
    serve_close(&srv.ctx);
    chat_template_free(&srv.chat);
    pthread_mutex_destroy(&srv.admin_mu);
    pthread_mutex_destroy(&srv.names_mu);
    cli_stop_release();
    return status;
}
