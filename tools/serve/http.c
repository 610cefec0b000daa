/* libmicrohttpd under the routes (http.h). */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http.h"
#include "routes.h"

struct http {
    struct MHD_Daemon *daemon;
    server *srv;
};

/* One request's body as it arrives. */
typedef struct upload {
    char *body;
    size_t len, cap;
    bool too_large;
} upload;

/* a == the key, in time that depends on the key's length only */
static bool key_matches(const char *given, const char *key)
{
    const size_t n = strlen(key), m = strlen(given);
    unsigned char diff = m != n;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

static bool authorized(const server *srv, struct MHD_Connection *c)
{
    if (!srv->api_key)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    return h && !strncmp(h, "Bearer ", 7) && key_matches(h + 7, srv->api_key);
}

static bool append(upload *u, const char *data, size_t n, size_t limit)
{
    if (u->too_large || n > limit - u->len) {
        u->too_large = true;
        return true; /* the rest is read and dropped; 413 at the end */
    }
    if (u->len + n + 1 > u->cap) {
        size_t cap = (u->len + n + 1) * 2;
        cap = cap < limit + 1 ? cap : limit + 1;
        char *b = realloc(u->body, cap);
        if (!b)
            return false;
        u->body = b;
        u->cap = cap;
    }
    memcpy(u->body + u->len, data, n);
    u->len += n;
    u->body[u->len] = '\0';
    return true;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **state)
{
    (void)version;
    server *srv = cls;
    upload *u = *state;
    if (!u) {
        /* the headers: refuse early what needs no body to refuse */
        if (!(u = calloc(1, sizeof(*u))))
            return MHD_NO;
        *state = u;
        if (routes_need_auth(url) && !authorized(srv, c))
            return reply_error(srv, c, MHD_HTTP_UNAUTHORIZED, NULL,
                               "missing or wrong API key (Authorization: Bearer KEY)");
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > srv->body_limit)
            return reply_error(srv, c, MHD_HTTP_CONTENT_TOO_LARGE, NULL,
                               "the body is over the limit of %zu bytes", srv->body_limit);
        return MHD_YES;
    }
    if (*data_size) {
        const bool ok = append(u, data, *data_size, srv->body_limit);
        *data_size = 0;
        return ok ? MHD_YES : MHD_NO;
    }
    if (u->too_large)
        return reply_error(srv, c, MHD_HTTP_CONTENT_TOO_LARGE, NULL,
                           "the body is over the limit of %zu bytes", srv->body_limit);
    return routes_handle(srv, c, method, url, u->body ? u->body : "", u->len);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    upload *u = *state;
    if (u)
        free(u->body);
    free(u);
    *state = NULL;
}

http *http_start(server *srv, const char *host, uint16_t port, uint16_t *bound, char *why,
                 size_t cap)
{
    struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM },
                    *ai = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%u", (unsigned)port);
    const int gai = getaddrinfo(host, service, &hints, &ai);
    if (gai) {
        snprintf(why, cap, "--host %s: %s (a numeric IPv4 or IPv6 address expected)", host,
                 gai_strerror(gai));
        return NULL;
    }
    http *h = calloc(1, sizeof(*h));
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (h) {
        h->srv = srv;
        h->daemon = MHD_start_daemon(flags, port, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR,
                                     ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                                     MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
                                     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    }
    freeaddrinfo(ai);
    if (!h || !h->daemon) {
        snprintf(why, cap,
                 "cannot listen on %s port %u (in use, or not an address of this machine)", host,
                 (unsigned)port);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *bound = info ? info->port : port;
    return h;
}

void http_stop(http **hp)
{
    if (!hp || !*hp)
        return;
    MHD_stop_daemon((*hp)->daemon);
    free(*hp);
    *hp = NULL;
}
