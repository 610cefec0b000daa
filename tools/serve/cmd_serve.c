/* prefixcl serve: an OpenAI-compatible HTTP server over a model folder and
 * its prefix adapters, requests batched continuously (scheduler.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "commands.h"
#include "http.h"
#include "server.h"
#include "tool_util.h"

#define BODY_LIMIT (1u << 20)

static int usage(FILE *out)
{
    static const char text[] =
        "usage: prefixcl serve --model DIR [--adapter NAME=PATH]... [options]\n"
        "  --adapter NAME=PATH    a prefix adapter (as generate takes it), which a request's\n"
        "                         \"model\" asks for by NAME (default: the path's last name);\n"
        "                         the model folder's own name means none (repeatable)\n"
        "  --host ADDR            numeric address to listen on (default 127.0.0.1)\n"
        "  --port N               (default 8000; 0: any free port, printed)\n"
        "  --slots N              requests generating at once (default 4)\n"
        "  --max-len N            tokens of a request, prompt and completion (default: the\n"
        "                         model's positions less the prefix, at most 512)\n"
        "  --queue N              requests waiting for a slot before 503 (default 64)\n"
        "  --api-key KEY          require Authorization: Bearer KEY (all but /health)\n"
        "  --allow-adapter-admin  POST /v1/adapters {name, path}, DELETE /v1/adapters/NAME\n"
        "  --storage T            the weights on the device: f32 (default), f16 or bf16\n"
        "  --device SEL\n"
        "At most %d adapters in all, of one prefix length. Endpoints: POST /v1/completions,\n"
        "POST /v1/chat/completions, GET /v1/models, GET /health, GET /metrics.\n"
        "SIGINT or SIGTERM stops the server.\n";
    fprintf(out, text, SERVE_MAX_ADAPTERS);
    return out == stdout ? 0 : 2;
}

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
    const char *model = NULL, *device = NULL, *host = "127.0.0.1";
    uint64_t port = 8000, slots = 4, max_len = 0, queue = 64, u;
    static char base[256];
    bool admin = false;
    server srv;
    memset(&srv, 0, sizeof(srv));
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        if (!strcmp(argv[i], "--allow-adapter-admin")) {
            admin = true;
            continue;
        }
        const int got = serve_option(argc, argv, &i, "serve", &a, &v);
        if (got <= 0)
            return usage(got ? stderr : stdout);
        if (!strcmp(a, "--model")) {
            model = v;
        } else if (!strcmp(a, "--device")) {
            device = v;
        } else if (!strcmp(a, "--storage") && tool_storage_parse(v, &srv.ctx.storage)) {
            /* parsed into srv.ctx.storage */
        } else if (!strcmp(a, "--host")) {
            host = v;
        } else if (!strcmp(a, "--api-key") && v[0]) {
            srv.api_key = v;
        } else if (!strcmp(a, "--adapter") && srv.ctx.adapters < SERVE_MAX_ADAPTERS) {
            const char *eq = strchr(v, '=');
            const size_t k = srv.ctx.adapters++;
            char *name = srv.adapter_name[k];
            if (eq)
                snprintf(name, SERVE_NAME_MAX, "%.*s", (int)(eq - v), v);
            else
                last_name(v, name, SERVE_NAME_MAX);
            srv.ctx.adapter[k] = eq ? eq + 1 : v;
        } else if (!strcmp(a, "--port") && cli_uint(v, 0, 65535, &u)) {
            port = u;
        } else if (!strcmp(a, "--slots") && cli_uint(v, 1, 256, &u)) {
            slots = u;
        } else if (!strcmp(a, "--max-len") && cli_uint(v, 2, 1u << 20, &u)) {
            max_len = u;
        } else if (!strcmp(a, "--queue") && cli_uint(v, 1, 1u << 16, &u)) {
            queue = u;
        } else {
            if (!strcmp(a, "--adapter"))
                fprintf(stderr, "prefixcl serve: at most %d --adapter options\n",
                        SERVE_MAX_ADAPTERS);
            else
                fprintf(stderr, "prefixcl serve: bad option or value: %s \"%s\"\n", a, v);
            return usage(stderr);
        }
    }
    if (!model) {
        fprintf(stderr, "prefixcl serve: --model is required\n");
        return usage(stderr);
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
    pfx_model_shape shape;
    if (pfx_model_read_config(model, &shape) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl serve: %s\n", pfx_last_error(NULL));
        return 1;
    }
    const bool max_len_given = max_len != 0;
    if (!max_len)
        max_len = shape.max_positions < 512 ? shape.max_positions : 512;
    if (!serve_open(&srv.ctx, "serve", device, model, slots, max_len))
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
    const pfx_scheduler_params sp = { slots, max_len, queue };
    if (pfx_scheduler_create(srv.ctx.model, srv.ctx.bank, &sp, &srv.sched) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl serve: %s\n", pfx_last_error(srv.ctx.rt));
        goto out;
    }
    cli_stop_catch();
    uint16_t bound = 0;
    if (!(h = http_start(&srv, host, (uint16_t)port, &bound, why, sizeof(why)))) {
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
