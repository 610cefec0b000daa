/* A completion streamed as server-sent events: `data: {chunk}` per new
 * piece of text, a final chunk with finish_reason and usage, `data: [DONE]`.
 * A client that goes away cancels its request. */
#ifndef PFX_TOOLS_SERVE_SSE_H
#define PFX_TOOLS_SERVE_SSE_H

#include "completion_job.h"
#include "reply.h"

/* Answers with the stream of c, whose connection holder it takes over. */
enum MHD_Result sse_reply(server *srv, struct MHD_Connection *conn, completion *c);

#endif
