/* Which handler answers a request: method and path to endpoint. */
#ifndef PFX_TOOLS_SERVE_ROUTES_H
#define PFX_TOOLS_SERVE_ROUTES_H

#include "reply.h"

/* Whether the path needs the API key (all but /health). */
bool routes_need_auth(const char *url);

enum MHD_Result routes_handle(server *srv, struct MHD_Connection *c, const char *method,
                              const char *url, const char *body, size_t len);

#endif
