/* The JSON of `prefixcl bench --compare` files, read with cJSON under the rule
 * of every JSON reader of the project: the escape \u0000 and a key twice in
 * an object (at any depth) are refused; so are text after the value and
 * nesting deeper than 64. */
#ifndef PFX_TOOLS_BENCH_JSON_H
#define PFX_TOOLS_BENCH_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Parses text (NUL-terminated); NULL with a message ("line 3, column 7:
 * unexpected character") in err. Free with cJSON_Delete. */
cJSON *bench_json_parse(const char *text, char *err, size_t errlen);

#endif
