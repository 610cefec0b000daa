/* POST /v1/adapters {name, path} and DELETE /v1/adapters/NAME, off (403)
 * unless --allow-adapter-admin. An adapter joins the bank between two
 * steps of the scheduler; a deleted one loses its name (the requests using
 * it finish), its bank entry stays taken. */
#ifndef PFX_TOOLS_SERVE_ADMIN_H
#define PFX_TOOLS_SERVE_ADMIN_H

#include "reply.h"

enum MHD_Result admin_add(server *srv, struct MHD_Connection *c, const char *body, size_t len);
enum MHD_Result admin_delete(server *srv, struct MHD_Connection *c, const char *name);

#endif
