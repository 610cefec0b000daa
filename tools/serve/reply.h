/* Every response of `prefixcl serve` goes out through these: JSON bodies,
 * OpenAI's error objects, and the count of each status in the metrics. */
#ifndef PFX_TOOLS_SERVE_REPLY_H
#define PFX_TOOLS_SERVE_REPLY_H

#include <microhttpd.h>

#include <cjson/cJSON.h>

#include "server.h"

/* Queues `response` (destroyed here) with its status, counted. */
enum MHD_Result reply_queue(server *srv, struct MHD_Connection *c, unsigned status,
                            struct MHD_Response *response);
/* body as JSON (deleted here). */
enum MHD_Result reply_json(server *srv, struct MHD_Connection *c, unsigned status, cJSON *body);
/* text (malloc'ed, taken) with its content type. */
enum MHD_Result reply_text(server *srv, struct MHD_Connection *c, unsigned status, const char *type,
                           char *text);
/* {"error": {"message", "type", "param", "code"}}; param may be NULL. A 503
 * carries Retry-After: 1. */
__attribute__((format(printf, 5, 6))) enum MHD_Result
reply_error(server *srv, struct MHD_Connection *c, unsigned status, const char *param,
            const char *fmt, ...);

#endif
