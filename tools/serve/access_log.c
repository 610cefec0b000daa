/* The access log (access_log.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "access_log.h"

static _Thread_local access_entry *current;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* src with its control characters and spaces as '?' (a line per request) */
static void copy_plain(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++)
        dst[i] = (unsigned char)src[i] <= ' ' || src[i] == 0x7f ? '?' : src[i];
    dst[i] = '\0';
}

void access_log_begin(access_entry *e, const char *method, const char *path)
{
    memset(e, 0, sizeof(*e));
    copy_plain(e->method, sizeof(e->method), method);
    copy_plain(e->path, sizeof(e->path), path);
    e->start = now();
    current = e;
}

void access_log_status(unsigned status)
{
    if (current)
        current->status = status;
}

void access_log_adapter(const char *name)
{
    if (current && name)
        copy_plain(current->adapter, sizeof(current->adapter), name);
}

void access_log_tokens(size_t prompt, size_t completion)
{
    if (!current)
        return;
    current->tokens = true;
    current->prompt_tokens = prompt;
    current->completion_tokens = completion;
}

void access_log_end(access_entry *e)
{
    if (current == e)
        current = NULL;
    char p[24] = "-", c[24] = "-";
    if (e->tokens) {
        snprintf(p, sizeof(p), "%zu", e->prompt_tokens);
        snprintf(c, sizeof(c), "%zu", e->completion_tokens);
    }
    fprintf(stderr, "access: %s %s %u adapter=%s prompt_tokens=%s completion_tokens=%s %.3f s\n",
            e->method, e->path, e->status, e->adapter[0] ? e->adapter : "-", p, c,
            now() - e->start);
}
