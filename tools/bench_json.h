/* A small JSON reader (RFC 8259 syntax, UTF-8 passed through, \u escapes of
 * the Basic Multilingual Plane) for `prefixcl bench --compare`. The rule of
 * every JSON reader of the project: the escape \u0000 and a key twice in an
 * object are refused. */
#ifndef PFX_TOOLS_BENCH_JSON_H
#define PFX_TOOLS_BENCH_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum json_type {
    JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    bool boolean;
    double number;
    char *string;          /* JSON_STRING; a member's value keeps its key in `key` */
    char *key;             /* set on object members */
    json_value *items;     /* arrays and objects: `count` children */
    size_t count;
};

/* Parses text (NUL-terminated); NULL on a syntax error with a message
 * ("line 3, column 7: expected ':'") in err. Free with json_free. */
json_value *json_parse(const char *text, char *err, size_t errlen);
void json_free(json_value *v);

/* Member of an object by key, or NULL (also when v is not an object). */
const json_value *json_get(const json_value *v, const char *key);

#endif
