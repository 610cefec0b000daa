/* POST /v1/completions: a request through the scheduler, answered as one
 * JSON object or streamed as server-sent events. */
#ifndef PFX_TOOLS_SERVE_COMPLETIONS_H
#define PFX_TOOLS_SERVE_COMPLETIONS_H

#include "completion_req.h"
#include "reply.h"

enum MHD_Result completions_handle(server *srv, struct MHD_Connection *c, const char *body,
                                   size_t len);

/* Runs a parsed request (taken: *req is emptied) with its prompt encoded
 * with encode_flags (PFX_ENCODE_*), and answers it; shared by the chat
 * endpoint, whose prompt is its rendered messages. */
enum MHD_Result completions_run(server *srv, struct MHD_Connection *c, completion_req *req,
                                unsigned encode_flags);

#endif
