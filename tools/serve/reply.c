/* Responses of the server (reply.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access_log.h"
#include "commands/gen_output.h"
#include "reply.h"

enum MHD_Result reply_queue(server *srv, struct MHD_Connection *c, unsigned status,
                            struct MHD_Response *response)
{
    if (!response)
        return MHD_NO;
    metrics_response(&srv->metrics, (int)status);
    access_log_status(status);
    const enum MHD_Result r = MHD_queue_response(c, status, response);
    MHD_destroy_response(response);
    return r;
}

enum MHD_Result reply_text(server *srv, struct MHD_Connection *c, unsigned status, const char *type,
                           char *text)
{
    if (!text)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    return reply_queue(srv, c, status, r);
}

enum MHD_Result reply_json(server *srv, struct MHD_Connection *c, unsigned status, cJSON *body)
{
    char *text = body ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    if (!text)
        return MHD_NO;
    /* cJSON's allocator is malloc: MHD frees it */
    const size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (!line) {
        free(text);
        return MHD_NO;
    }
    memcpy(line + n, "\n", 2);
    return reply_text(srv, c, status, "application/json", line);
}

static const char *error_type(unsigned status)
{
    switch (status) {
    case MHD_HTTP_UNAUTHORIZED: return "authentication_error";
    case MHD_HTTP_FORBIDDEN: return "permission_error";
    case MHD_HTTP_NOT_FOUND: return "not_found_error";
    case MHD_HTTP_SERVICE_UNAVAILABLE: return "server_busy";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

enum MHD_Result reply_error(server *srv, struct MHD_Connection *c, unsigned status,
                            const char *param, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* the message may quote the request: valid UTF-8 whatever it held */
    char *text = gen_valid_utf8(msg);
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    const bool ok = text && e && cJSON_AddStringToObject(e, "message", text);
    free(text);
    if (!ok || !cJSON_AddStringToObject(e, "type", error_type(status)) ||
        !(param ? cJSON_AddStringToObject(e, "param", param) : cJSON_AddNullToObject(e, "param")) ||
        !cJSON_AddNullToObject(e, "code")) {
        cJSON_Delete(o);
        return MHD_NO;
    }
    return reply_json(srv, c, status, o);
}
