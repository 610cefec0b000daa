/* The HTTP daemon of `prefixcl serve` (libmicrohttpd, a thread per
 * connection): bodies up to the server's limit (413 past it), the API key
 * (401 without it), an HTTP/1.1 request without Host (400), then the
 * routes. Slow clients are bounded: a connection's request (headers and
 * body) must arrive within a time, or it is closed; connections are
 * capped in all and per client address. */
#ifndef PFX_TOOLS_SERVE_HTTP_H
#define PFX_TOOLS_SERVE_HTTP_H

#include <stdint.h>

#include "server.h"

typedef struct http_limits {
    unsigned
        request_seconds;  /* from a connection's start, or its last answer, to a whole request */
    unsigned connections; /* open at once */
    unsigned per_client;  /* open at once from one address; 0: no cap */
} http_limits;

typedef struct http http;

/* Listens on host:port (port 0: any free one; *bound gets it). NULL after
 * why (cap bytes). */
http *http_start(server *srv, const char *host, uint16_t port, const http_limits *limits,
                 uint16_t *bound, char *why, size_t cap);
/* Stops accepting, waits for the connections' threads, frees. */
void http_stop(http **h);

#endif
