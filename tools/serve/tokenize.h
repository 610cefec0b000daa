/* POST /tokenize and /detokenize as llama-server has them: {"content",
 * "add_special", "with_pieces"} to {"tokens"}, {"tokens"} to {"content"},
 * through the model folder's tokenizer. */
#ifndef PFX_TOOLS_SERVE_TOKENIZE_H
#define PFX_TOOLS_SERVE_TOKENIZE_H

#include "reply.h"

enum MHD_Result tokenize_handle(server *srv, struct MHD_Connection *c, const char *body,
                                size_t len);
enum MHD_Result detokenize_handle(server *srv, struct MHD_Connection *c, const char *body,
                                  size_t len);

#endif
