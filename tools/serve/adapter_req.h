/* The body of POST /v1/adapters: {"name": string, "path": string}. */
#ifndef PFX_TOOLS_SERVE_ADAPTER_REQ_H
#define PFX_TOOLS_SERVE_ADAPTER_REQ_H

#include <stdbool.h>
#include <stddef.h>

typedef struct adapter_req {
    char *name, *path;
} adapter_req;

/* Parses body[0, len) into *r (freed by adapter_req_free, also after a
 * failure): both strings present and not empty. False with why (cap bytes)
 * and *field (the field at fault, or NULL for the body as a whole). */
bool adapter_req_parse(const char *body, size_t len, adapter_req *r, char *why, size_t cap,
                       const char **field);
void adapter_req_free(adapter_req *r);

#endif
