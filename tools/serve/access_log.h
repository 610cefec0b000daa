/* One line on stderr for each request, when its response is done:
 *   access: POST /v1/completions 200 adapter=a1 prompt_tokens=5 completion_tokens=8 0.123 s
 * (adapter "-": the base model or none named; tokens "-" where the
 * endpoint generates nothing). libmicrohttpd runs a connection's request,
 * its response and its end on the connection's thread: the entry being
 * written is that thread's, and the calls below fill it from anywhere in
 * the request's handling (nothing without one). */
#ifndef PFX_TOOLS_SERVE_ACCESS_LOG_H
#define PFX_TOOLS_SERVE_ACCESS_LOG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct access_entry {
    char method[16], path[160];
    double start;
    unsigned status; /* 0: no response queued */
    char adapter[128];
    size_t prompt_tokens, completion_tokens;
    bool tokens;
} access_entry;

/* The request's entry, this thread's from now on. */
void access_log_begin(access_entry *e, const char *method, const char *path);
void access_log_status(unsigned status);
void access_log_adapter(const char *name);
void access_log_tokens(size_t prompt, size_t completion);
/* Writes the line and forgets the entry. */
void access_log_end(access_entry *e);

#endif
