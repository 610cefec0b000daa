/* The names requests give adapters by (server.h). */
#include <stdio.h>
#include <string.h>

#include "server.h"

/* server_adapter_entry under names_mu, taking a hold when `take`. */
static int32_t find(server *srv, const char *name, bool take)
{
    if (!name || !strcmp(name, srv->base_name))
        return -1;
    int32_t entry = -2;
    pthread_mutex_lock(&srv->names_mu);
    for (size_t i = 0; i < srv->entries && entry == -2; i++)
        if (srv->adapter_name[i][0] && !strcmp(name, srv->adapter_name[i]))
            entry = (int32_t)i;
    if (take && entry >= 0)
        srv->entry_uses[entry]++;
    pthread_mutex_unlock(&srv->names_mu);
    return entry;
}

int32_t server_adapter_entry(server *srv, const char *name)
{
    return find(srv, name, false);
}

int32_t server_adapter_take(server *srv, const char *name)
{
    return find(srv, name, true);
}

void server_adapter_drop(server *srv, int32_t entry)
{
    if (entry < 0)
        return;
    pthread_mutex_lock(&srv->names_mu);
    srv->entry_uses[entry]--;
    pthread_mutex_unlock(&srv->names_mu);
}

int32_t server_free_entry(server *srv)
{
    int32_t entry = -1;
    pthread_mutex_lock(&srv->names_mu);
    for (size_t i = 0; i < srv->entries && entry < 0; i++)
        if (!srv->adapter_name[i][0] && !srv->entry_uses[i])
            entry = (int32_t)i;
    pthread_mutex_unlock(&srv->names_mu);
    return entry;
}

bool server_name_free(server *srv, const char *name, char *why, size_t cap)
{
    if (!name[0] || strlen(name) >= SERVE_NAME_MAX) {
        snprintf(why, cap, "an adapter's name has 1 to %d bytes", SERVE_NAME_MAX - 1);
        return false;
    }
    if (server_adapter_entry(srv, name) != -2) {
        snprintf(why, cap, "\"%s\" already names %s", name,
                 strcmp(name, srv->base_name) ? "an adapter" : "the base model");
        return false;
    }
    return true;
}

size_t server_adapter_names(server *srv, char names[][SERVE_NAME_MAX])
{
    size_t n = 0;
    pthread_mutex_lock(&srv->names_mu);
    for (size_t i = 0; i < srv->entries; i++)
        if (srv->adapter_name[i][0])
            memcpy(names[n++], srv->adapter_name[i], SERVE_NAME_MAX);
    pthread_mutex_unlock(&srv->names_mu);
    return n;
}
