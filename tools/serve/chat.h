/* POST /v1/chat/completions: the messages rendered with the model's chat
 * template (tokenizer_config.json "chat_template", through jinja/), then
 * run as a completion of that text and answered in the chat shape. */
#ifndef PFX_TOOLS_SERVE_CHAT_H
#define PFX_TOOLS_SERVE_CHAT_H

#include "reply.h"

enum MHD_Result chat_handle(server *srv, struct MHD_Connection *c, const char *body, size_t len);

#endif
