/* The HTTP daemon of `prefixcl serve` (libmicrohttpd, a thread per
 * connection): bodies up to the server's limit (413 past it), the API key
 * (401 without it), then the routes. */
#ifndef PFX_TOOLS_SERVE_HTTP_H
#define PFX_TOOLS_SERVE_HTTP_H

#include <stdint.h>

#include "server.h"

typedef struct http http;

/* Listens on host:port (port 0: any free one; *bound gets it). NULL after
 * why (cap bytes). */
http *http_start(server *srv, const char *host, uint16_t port, uint16_t *bound, char *why,
                 size_t cap);
/* Stops accepting, waits for the connections' threads, frees. */
void http_stop(http **h);

#endif
