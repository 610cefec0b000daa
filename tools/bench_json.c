/* A small recursive-descent JSON reader (see bench_json.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_json.h"

typedef struct parser {
    const char *p, *start;
    char *err;
    size_t errlen;
    bool failed;
    int depth;
} parser;

static void fail(parser *ps, const char *what)
{
    if (ps->failed)
        return;
    ps->failed = true;
    int line = 1, col = 1;
    for (const char *c = ps->start; c < ps->p; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(ps->err, ps->errlen, "line %d, column %d: %s", line, col, what);
}

static void ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static bool parse_value(parser *ps, json_value *out);

static void put_utf8(char *out, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static char *parse_string(parser *ps)
{
    if (*ps->p != '"') {
        fail(ps, "expected a string");
        return NULL;
    }
    ps->p++;
    const char *s = ps->p;
    size_t cap = 0;
    while (s[cap] && s[cap] != '"')
        cap += s[cap] == '\\' && s[cap + 1] ? 2 : 1;
    char *out = malloc(cap * 3 + 1); /* \uXXXX grows to at most 3 bytes */
    if (!out) {
        fail(ps, "out of memory");
        return NULL;
    }
    size_t n = 0;
    for (;;) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c == 0) {
            fail(ps, "unterminated string");
            free(out);
            return NULL;
        }
        if (c < 0x20) {
            fail(ps, "control character in a string");
            free(out);
            return NULL;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            ps->p++;
            continue;
        }
        ps->p++;
        char e = *ps->p++;
        switch (e) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp = 0;
            for (int i = 0; i < 4; i++) {
                char h = *ps->p++;
                cp <<= 4;
                if (h >= '0' && h <= '9')
                    cp |= (unsigned)(h - '0');
                else if (h >= 'a' && h <= 'f')
                    cp |= (unsigned)(h - 'a' + 10);
                else if (h >= 'A' && h <= 'F')
                    cp |= (unsigned)(h - 'A' + 10);
                else {
                    fail(ps, "bad \\u escape");
                    free(out);
                    return NULL;
                }
            }
            if (cp == 0) { /* the rule of every JSON reader: it would cut the string */
                fail(ps, "the escape \\u0000 (NUL) in a string");
                free(out);
                return NULL;
            }
            put_utf8(out, &n, cp);
            break;
        }
        default:
            ps->p--;
            fail(ps, "bad escape in a string");
            free(out);
            return NULL;
        }
    }
    out[n] = 0;
    return out;
}

static bool parse_number(parser *ps, json_value *out)
{
    const char *s = ps->p;
    const char *c = s;
    if (*c == '-')
        c++;
    if (*c < '0' || *c > '9') {
        fail(ps, "unexpected character");
        return false;
    }
    while (*c >= '0' && *c <= '9')
        c++;
    if (*c == '.') {
        c++;
        if (*c < '0' || *c > '9') {
            fail(ps, "bad number");
            return false;
        }
        while (*c >= '0' && *c <= '9')
            c++;
    }
    if (*c == 'e' || *c == 'E') {
        c++;
        if (*c == '+' || *c == '-')
            c++;
        if (*c < '0' || *c > '9') {
            fail(ps, "bad number");
            return false;
        }
        while (*c >= '0' && *c <= '9')
            c++;
    }
    out->type = JSON_NUMBER;
    out->number = strtod(s, NULL);
    ps->p = c;
    return true;
}

static bool push(parser *ps, json_value *parent, size_t *cap, json_value **slot)
{
    if (parent->count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        json_value *n = realloc(parent->items, ncap * sizeof(json_value));
        if (!n) {
            fail(ps, "out of memory");
            return false;
        }
        parent->items = n;
        *cap = ncap;
    }
    *slot = &parent->items[parent->count];
    memset(*slot, 0, sizeof(**slot));
    return true;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The rule of every JSON reader: no key twice in an object (n log n). */
static bool unique_keys(parser *ps, const json_value *obj)
{
    if (obj->count < 2)
        return true;
    char **keys = malloc(obj->count * sizeof(*keys));
    if (!keys) {
        fail(ps, "out of memory");
        return false;
    }
    for (size_t i = 0; i < obj->count; i++)
        keys[i] = obj->items[i].key;
    qsort(keys, obj->count, sizeof(*keys), cmp_key);
    bool ok = true;
    for (size_t i = 1; i < obj->count && ok; i++)
        if (!strcmp(keys[i - 1], keys[i])) {
            char what[120];
            snprintf(what, sizeof(what), "the key '%.64s' appears twice in an object", keys[i]);
            fail(ps, what);
            ok = false;
        }
    free(keys);
    return ok;
}

static bool parse_container(parser *ps, json_value *out, bool object)
{
    out->type = object ? JSON_OBJECT : JSON_ARRAY;
    char close = object ? '}' : ']';
    size_t cap = 0;
    ps->p++;
    ws(ps);
    if (*ps->p == close) {
        ps->p++;
        return true;
    }
    for (;;) {
        ws(ps);
        json_value *item;
        if (!push(ps, out, &cap, &item))
            return false;
        if (object) {
            char *key = parse_string(ps);
            if (!key)
                return false;
            ws(ps);
            if (*ps->p != ':') {
                free(key);
                fail(ps, "expected ':'");
                return false;
            }
            ps->p++;
            ws(ps);
            if (!parse_value(ps, item)) {
                out->count++;
                item->key = key;
                return false;
            }
            item->key = key;
        } else if (!parse_value(ps, item)) {
            out->count++;
            return false;
        }
        out->count++;
        ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            return !object || unique_keys(ps, out);
        }
        fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
        return false;
    }
}

static bool parse_value(parser *ps, json_value *out)
{
    ws(ps);
    if (++ps->depth > 64) {
        fail(ps, "nested too deeply");
        return false;
    }
    bool ok = true;
    char c = *ps->p;
    if (c == '{' || c == '[') {
        ok = parse_container(ps, out, c == '{');
    } else if (c == '"') {
        out->type = JSON_STRING;
        out->string = parse_string(ps);
        ok = out->string != NULL;
    } else if (!strncmp(ps->p, "true", 4)) {
        out->type = JSON_BOOL;
        out->boolean = true;
        ps->p += 4;
    } else if (!strncmp(ps->p, "false", 5)) {
        out->type = JSON_BOOL;
        ps->p += 5;
    } else if (!strncmp(ps->p, "null", 4)) {
        out->type = JSON_NULL;
        ps->p += 4;
    } else if (c == 0) {
        fail(ps, "unexpected end of the file");
        ok = false;
    } else {
        ok = parse_number(ps, out);
    }
    ps->depth--;
    return ok;
}

static void free_children(json_value *v)
{
    for (size_t i = 0; i < v->count; i++) {
        free_children(&v->items[i]);
        free(v->items[i].key);
    }
    free(v->items);
    free(v->string);
}

void json_free(json_value *v)
{
    if (!v)
        return;
    free_children(v);
    free(v);
}

json_value *json_parse(const char *text, char *err, size_t errlen)
{
    parser ps = { text, text, err, errlen, false, 0 };
    json_value *v = calloc(1, sizeof(*v));
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    bool ok = parse_value(&ps, v);
    if (ok) {
        ws(&ps);
        if (*ps.p) {
            fail(&ps, "text after the end of the JSON value");
            ok = false;
        }
    }
    if (!ok) {
        json_free(v);
        return NULL;
    }
    return v;
}

const json_value *json_get(const json_value *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (v->items[i].key && !strcmp(v->items[i].key, key))
            return &v->items[i];
    return NULL;
}
