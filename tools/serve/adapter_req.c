/* POST /v1/adapters' body (adapter_req.h), through cJSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "adapter_req.h"
#include "request_json.h"

static bool text(const cJSON *o, const char *key, char **out, char *why, size_t cap,
                 const char **field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || !v->valuestring[0]) {
        snprintf(why, cap, "%s: a non-empty string expected", key);
        *field = key;
        return false;
    }
    if (!(*out = strdup(v->valuestring))) {
        snprintf(why, cap, "%s: out of host memory", key);
        *field = key;
        return false;
    }
    return true;
}

bool adapter_req_parse(const char *body, size_t len, adapter_req *r, char *why, size_t cap,
                       const char **field)
{
    static const char *const fields[] = { "name", "path", NULL };
    memset(r, 0, sizeof(*r));
    cJSON *o = request_json_parse(body, len, fields, why, cap, field);
    const bool ok = o && text(o, "name", &r->name, why, cap, field) &&
                    text(o, "path", &r->path, why, cap, field);
    cJSON_Delete(o);
    return ok;
}

void adapter_req_free(adapter_req *r)
{
    free(r->name);
    free(r->path);
    memset(r, 0, sizeof(*r));
}
