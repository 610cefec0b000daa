/* The endpoints of `prefixcl serve` (routes.h); completions.c has the main one. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "chat.h"
#include "completions.h"
#include "routes.h"
#include "tokenize.h"

static cJSON *model_entry(const char *id, const char *parent, long long created)
{
    cJSON *m = cJSON_CreateObject();
    if (!cJSON_AddStringToObject(m, "id", id) || !cJSON_AddStringToObject(m, "object", "model") ||
        !cJSON_AddNumberToObject(m, "created", (double)created) ||
        !cJSON_AddStringToObject(m, "owned_by", "prefixcl") ||
        !(parent ? cJSON_AddStringToObject(m, "parent", parent)
                 : cJSON_AddNullToObject(m, "parent"))) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

static enum MHD_Result models(server *srv, struct MHD_Connection *c, const char *body, size_t len)
{
    const long long now = (long long)time(NULL);
    cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "data");
    bool ok = list && cJSON_AddStringToObject(o, "object", "list") &&
              cJSON_AddItemToArray(list, model_entry(srv->base_name, NULL, now));
    char names[SERVE_MAX_ADAPTERS][SERVE_NAME_MAX];
    const size_t n = server_adapter_names(srv, names);
    for (size_t i = 0; ok && i < n; i++)
        ok = cJSON_AddItemToArray(list, model_entry(names[i], srv->base_name, now));
    if (!ok) {
        cJSON_Delete(o);
        return MHD_NO;
    }
    return reply_json(srv, c, MHD_HTTP_OK, o);
}

static enum MHD_Result health(server *srv, struct MHD_Connection *c, const char *body, size_t len)
{
    cJSON *o = cJSON_CreateObject();
    if (!cJSON_AddStringToObject(o, "status", "ok")) {
        cJSON_Delete(o);
        return MHD_NO;
    }
    return reply_json(srv, c, MHD_HTTP_OK, o);
}

static enum MHD_Result metrics_page(server *srv, struct MHD_Connection *c, const char *body,
                                    size_t len)
{
    pfx_scheduler_stats st;
    pfx_scheduler_get_stats(srv->sched, &st);
    return reply_text(srv, c, MHD_HTTP_OK, "text/plain; version=0.0.4",
                      metrics_render(&srv->metrics, &st));
}

typedef struct route {
    const char *method, *path;
    enum MHD_Result (*handle)(server *srv, struct MHD_Connection *c, const char *body, size_t len);
} route;

static const route routes[] = {
    { "POST", "/v1/completions", completions_handle },
    { "POST", "/v1/adapters", admin_add },
    { "POST", "/v1/chat/completions", chat_handle },
    { "POST", "/tokenize", tokenize_handle },
    { "POST", "/detokenize", detokenize_handle },
    { "GET", "/v1/models", models },
    { "GET", "/health", health },
    { "GET", "/metrics", metrics_page },
};

bool routes_need_auth(const char *url)
{
    return strcmp(url, "/health") != 0;
}

enum MHD_Result routes_handle(server *srv, struct MHD_Connection *c, const char *method,
                              const char *url, const char *body, size_t len)
{
    static const char adapters[] = "/v1/adapters/";
    if (!strncmp(url, adapters, strlen(adapters)) && !strcmp(method, "DELETE"))
        return admin_delete(srv, c, url + strlen(adapters));
    bool path_known = false;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (strcmp(url, routes[i].path))
            continue;
        path_known = true;
        if (!strcmp(method, routes[i].method))
            return routes[i].handle(srv, c, body, len);
    }
    if (path_known)
        return reply_error(srv, c, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, "%s %s: method not allowed",
                           method, url);
    return reply_error(srv, c, MHD_HTTP_NOT_FOUND, NULL, "no endpoint %s %s", method, url);
}
