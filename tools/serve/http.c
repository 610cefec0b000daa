/* libmicrohttpd under the routes (http.h). */
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "access_log.h"
#include "http.h"
#include "routes.h"

/* A connection and the deadline of the request it is sending.
 * libmicrohttpd's own timeout counts silence, which any byte renews; the
 * deadline is kept here: past it, a watchdog shuts the socket down (through
 * a duplicate of its descriptor, which stays this connection's until it
 * closes), and libmicrohttpd's thread then closes the connection. */
typedef struct watch {
    struct watch *prev, *next;
    int fd;         /* the duplicate; -1 when none could be made */
    double since;   /* when its request began to be waited for */
    bool answering; /* the request is whole: no deadline */
} watch;

struct http {
    struct MHD_Daemon *daemon;
    server *srv;
    double request_seconds;
    pthread_mutex_t mu; /* over the watches and stopping */
    pthread_cond_t wake;
    watch *watches;
    bool stopping, watchdog_started;
    pthread_t watchdog;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The connection's watch (NULL when it has none). */
static watch *watch_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void set_answering(http *h, struct MHD_Connection *c, bool answering)
{
    watch *w = watch_of(c);
    if (!w)
        return;
    pthread_mutex_lock(&h->mu);
    w->answering = answering;
    w->since = now();
    pthread_mutex_unlock(&h->mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **context,
                          enum MHD_ConnectionNotificationCode code)
{
    http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        watch *w = calloc(1, sizeof(*w));
        if (!w)
            return; /* this one unwatched: libmicrohttpd's timeout still holds */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        w->fd = ci ? fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
        w->since = now();
        pthread_mutex_lock(&h->mu);
        w->next = h->watches;
        if (w->next)
            w->next->prev = w;
        h->watches = w;
        pthread_mutex_unlock(&h->mu);
        *context = w;
    } else if (*context) {
        watch *w = *context;
        pthread_mutex_lock(&h->mu);
        if (w->prev)
            w->prev->next = w->next;
        else
            h->watches = w->next;
        if (w->next)
            w->next->prev = w->prev;
        pthread_mutex_unlock(&h->mu);
        if (w->fd >= 0)
            close(w->fd);
        free(w);
        *context = NULL;
    }
}

/* Every quarter second: the connections whose request is late are shut. */
static void *watchdog(void *arg)
{
    http *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stopping) {
        const double t = now();
        for (watch *w = h->watches; w; w = w->next)
            if (!w->answering && w->fd >= 0 && t - w->since > h->request_seconds) {
                shutdown(w->fd, SHUT_RDWR);
                w->answering = true; /* shut once */
            }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250 * 1000 * 1000;
        until.tv_sec += until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&h->wake, &h->mu, &until);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* One request's body as it arrives. */
typedef struct upload {
    char *body;
    size_t len, cap;
    bool too_large;
    access_entry access;
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

/* HTTP/1.1 and later name the host (RFC 9112, section 3.2). */
static bool host_missing(struct MHD_Connection *c, const char *version)
{
    return strncmp(version, "HTTP/1.", 7) == 0 && strcmp(version, MHD_HTTP_VERSION_1_0) != 0 &&
           !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **state)
{
    http *h = cls;
    server *srv = h->srv;
    upload *u = *state;
    if (!u) {
        /* the headers: refuse early what needs no body to refuse */
        if (!(u = calloc(1, sizeof(*u))))
            return MHD_NO;
        *state = u;
        access_log_begin(&u->access, method, url);
        if (host_missing(c, version))
            return reply_error(srv, c, MHD_HTTP_BAD_REQUEST, NULL, "%s requests need a Host header",
                               version);
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
    set_answering(h, c, true); /* the request is whole */
    if (u->too_large)
        return reply_error(srv, c, MHD_HTTP_CONTENT_TOO_LARGE, NULL,
                           "the body is over the limit of %zu bytes", srv->body_limit);
    return routes_handle(srv, c, method, url, u->body ? u->body : "", u->len);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode why)
{
    (void)why;
    set_answering(cls, c, false); /* the next request's time starts */
    upload *u = *state;
    if (u) {
        access_log_end(&u->access);
        free(u->body);
    }
    free(u);
    *state = NULL;
}

http *http_start(server *srv, const char *host, uint16_t port, const http_limits *limits,
                 uint16_t *bound, char *why, size_t cap)
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
    /* poll, not select: descriptors past FD_SETSIZE stay usable */
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (h) {
        h->srv = srv;
        h->request_seconds = limits->request_seconds;
        pthread_mutex_init(&h->mu, NULL);
        pthread_cond_init(&h->wake, NULL);
        h->watchdog_started = pthread_create(&h->watchdog, NULL, watchdog, h) == 0;
        /* silence: a response its client stops reading, a request between
         * the watchdog's looks */
        const unsigned silence = limits->request_seconds > 30 ? limits->request_seconds : 30;
        if (h->watchdog_started)
            h->daemon = MHD_start_daemon(
                flags, port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
                on_connection, h, MHD_OPTION_CONNECTION_LIMIT, limits->connections,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits->per_client,
                MHD_OPTION_CONNECTION_TIMEOUT, silence, MHD_OPTION_END);
    }
    freeaddrinfo(ai);
    if (!h || !h->daemon) {
        snprintf(why, cap,
                 "cannot listen on %s port %u (in use, or not an address of this machine)", host,
                 (unsigned)port);
        http_stop(&h);
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
    http *h = *hp;
    if (h->daemon)
        MHD_stop_daemon(h->daemon);
    if (h->watchdog_started) {
        pthread_mutex_lock(&h->mu);
        h->stopping = true;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->watchdog, NULL);
    }
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->mu);
    free(h);
    *hp = NULL;
}
