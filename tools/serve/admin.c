/* The adapter admin endpoints (admin.h). */
#include <stdio.h>
#include <string.h>

#include "adapter_req.h"
#include "admin.h"

typedef struct adding {
    server *srv;
    const char *path;
    int32_t entry; /* a deleted adapter's to load into, or -1: a new one */
    char why[512];
} adding;

/* On the scheduler's worker, between two steps. */
static pfx_status add_to_bank(void *user)
{
    adding *a = user;
    pfx_adapter_bank *bank = a->srv->ctx.bank;
    const pfx_status st = a->entry >= 0 ? pfx_adapter_bank_replace(bank, a->entry, a->path)
                                        : pfx_adapter_bank_add(bank, a->path, &a->entry);
    if (st != PFX_SUCCESS)
        snprintf(a->why, sizeof(a->why), "%s", pfx_last_error(a->srv->ctx.rt));
    return st;
}

static enum MHD_Result added(server *srv, struct MHD_Connection *c, const char *name,
                             const char *path)
{
    char why[256];
    if (!server_name_free(srv, name, why, sizeof(why)))
        return reply_error(srv, c, MHD_HTTP_CONFLICT, "name", "name: %s", why);
    if (!srv->ctx.bank)
        return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, NULL, "the server has no adapter bank");
    /* a deleted adapter's entry no request holds any longer comes first */
    adding a = { srv, path, server_free_entry(srv), "" };
    if (pfx_scheduler_call(srv->sched, add_to_bank, &a) != PFX_SUCCESS)
        return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, "path", "path: %s",
                           a.why[0] ? a.why : pfx_last_error(NULL));
    pthread_mutex_lock(&srv->names_mu);
    snprintf(srv->adapter_name[a.entry], SERVE_NAME_MAX, "%s", name);
    srv->entries = (size_t)a.entry + 1 > srv->entries ? (size_t)a.entry + 1 : srv->entries;
    pthread_mutex_unlock(&srv->names_mu);
    cJSON *o = cJSON_CreateObject();
    if (!cJSON_AddStringToObject(o, "id", name) || !cJSON_AddStringToObject(o, "object", "model") ||
        !cJSON_AddStringToObject(o, "parent", srv->base_name)) {
        cJSON_Delete(o);
        return MHD_NO;
    }
    return reply_json(srv, c, MHD_HTTP_CREATED, o);
}

enum MHD_Result admin_add(server *srv, struct MHD_Connection *c, const char *body, size_t len)
{
    if (!srv->allow_admin)
        return reply_error(srv, c, MHD_HTTP_FORBIDDEN, NULL,
                           "adapter admin is off (start the server with --allow-adapter-admin)");
    adapter_req req;
    char why[256];
    const char *field;
    enum MHD_Result r;
    if (!adapter_req_parse(body, len, &req, why, sizeof(why), &field)) {
        r = reply_error(srv, c, MHD_HTTP_BAD_REQUEST, field, "%s", why);
    } else {
        /* one change at a time: the name checked free stays free */
        pthread_mutex_lock(&srv->admin_mu);
        r = added(srv, c, req.name, req.path);
        pthread_mutex_unlock(&srv->admin_mu);
    }
    adapter_req_free(&req);
    return r;
}

enum MHD_Result admin_delete(server *srv, struct MHD_Connection *c, const char *name)
{
    if (!srv->allow_admin)
        return reply_error(srv, c, MHD_HTTP_FORBIDDEN, NULL,
                           "adapter admin is off (start the server with --allow-adapter-admin)");
    pthread_mutex_lock(&srv->admin_mu);
    const int32_t entry = server_adapter_entry(srv, name);
    if (entry >= 0) {
        pthread_mutex_lock(&srv->names_mu);
        srv->adapter_name[entry][0] = '\0';
        pthread_mutex_unlock(&srv->names_mu);
    }
    pthread_mutex_unlock(&srv->admin_mu);
    if (entry == -1)
        return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, NULL,
                           "\"%s\" is the base model, not an adapter", name);
    if (entry < 0)
        return reply_error(srv, c, MHD_HTTP_NOT_FOUND, NULL, "no adapter \"%s\"", name);
    cJSON *o = cJSON_CreateObject();
    if (!cJSON_AddStringToObject(o, "id", name) || !cJSON_AddStringToObject(o, "object", "model") ||
        !cJSON_AddTrueToObject(o, "deleted")) {
        cJSON_Delete(o);
        return MHD_NO;
    }
    return reply_json(srv, c, MHD_HTTP_OK, o);
}
