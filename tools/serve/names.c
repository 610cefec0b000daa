/* The names requests give adapters by (server.h). */
#include <stdio.h>
#include <string.h>

#include "server.h"

int32_t server_adapter_entry(server *srv, const char *name)
{
    if (!name || !strcmp(name, srv->base_name))
        return -1;
    int32_t entry = -2;
    pthread_mutex_lock(&srv->names_mu);
    for (size_t i = 0; i < srv->entries && entry == -2; i++)
        if (srv->adapter_name[i][0] && !strcmp(name, srv->adapter_name[i]))
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
