/* POST /v1/completions: a request through the scheduler, answered as one
 * JSON object or streamed as server-sent events. */
#ifndef PFX_TOOLS_SERVE_COMPLETIONS_H
#define PFX_TOOLS_SERVE_COMPLETIONS_H

#include "reply.h"

enum MHD_Result completions_handle(server *srv, struct MHD_Connection *c, const char *body,
                                   size_t len);

#endif
