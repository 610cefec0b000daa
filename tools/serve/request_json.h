/* The one JSON rule of the server's request readers: the body is one JSON
 * object with nothing after it but white space, no NUL byte, no string
 * holding the escape \u0000 (cJSON would cut it short there), no key given
 * twice in any object. */
#ifndef PFX_TOOLS_SERVE_REQUEST_JSON_H
#define PFX_TOOLS_SERVE_REQUEST_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Parses body[0, len) under the rule. NULL after why (cap bytes), which
 * names the top-level member at fault when there is one; *field is then
 * that member's name out of `fields` (the reader's members, NULL-ended),
 * NULL when it is not among them or the body as a whole is at fault. */
cJSON *request_json_parse(const char *body, size_t len, const char *const *fields, char *why,
                          size_t cap, const char **field);

#endif
