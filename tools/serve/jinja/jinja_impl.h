/* What the parser (parse.c) and the evaluator (eval.c, value.c) of the
 * Jinja subset (jinja.h) share: an arena, values, the syntax tree. Errors
 * jump back (longjmp) to the entry point, which frees the arena: nothing
 * else is allocated outside it. */
#ifndef PFX_TOOLS_SERVE_JINJA_IMPL_H
#define PFX_TOOLS_SERVE_JINJA_IMPL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

typedef struct arena_block arena_block;
typedef struct arena {
    arena_block *head;
    size_t used; /* bytes of all blocks */
} arena;

/* Where errors go: the message, its status, the jump back. */
typedef struct jfail {
    jmp_buf jb;
    jinja_status st;
    char *why;
    size_t cap;
    const char *src; /* for line:column */
    size_t src_len;
    size_t work; /* rendering: units of work done (jinja.h JINJA_MAX_WORK) */
    size_t at;   /* rendering: the place of the node being run, for jinja_spend */
} jfail;

/* A pos that names no place in the template (before it runs). */
#define JINJA_NO_POS SIZE_MAX

__attribute__((noreturn, format(printf, 4, 5))) void jinja_fail(jfail *f, jinja_status st,
                                                                size_t pos, const char *fmt, ...);
/* Counts units of work; past JINJA_MAX_WORK fails (JINJA_ERROR_LIMIT)
 * naming the place f->at. Called before the work it pays for. */
void jinja_spend(jfail *f, size_t units);
void *arena_alloc(arena *a, jfail *f, size_t n);
void arena_free(arena *a);

typedef enum vtype {
    V_UNDEF,
    V_NONE,
    V_BOOL,
    V_INT,
    V_FLOAT,
    V_STR,
    V_LIST,
    V_DICT,
    V_NS,
    V_LOOP,
    V_FUNC, /* a macro or a global function */
} vtype;

/* The global functions (transformers' environment and Jinja's). */
typedef enum jfunc { F_MACRO, F_METHOD, F_RAISE, F_NAMESPACE, F_RANGE, F_STRFTIME_NOW } jfunc;

typedef struct value value;
typedef struct node node;
typedef struct loop_state {
    value **items;
    size_t index, length;
} loop_state;

struct value {
    vtype t;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        struct {
            value **v;
            size_t n;
            bool tuple; /* written (a, b) */
        } l;
        struct { /* V_DICT and V_NS: keys are strings, in insertion order */
            value **k, **v;
            size_t n, cap;
        } d;
        const loop_state *loop;
        struct {
            jfunc kind;
            const node *macro; /* F_MACRO: its definition */
            value **chain;     /* F_MACRO: the scopes it sees (those where it was defined) */
            int scopes;        /* their count */
            value *self;       /* F_METHOD: self.name, a method of a dict or string */
            const char *name;
            size_t name_n;
        } fn;
    };
};

value *val_new(arena *a, jfail *f, vtype t);
value *val_str(arena *a, jfail *f, const char *p, size_t n);
value *val_int(arena *a, jfail *f, int64_t i);
value *val_float(arena *a, jfail *f, double d);
/* Python's repr() of a float: the shortest string that reads back as d */
void float_repr(double d, char out[32]);
value *val_bool(bool b);
value *val_none(void);
value *val_undef(void);
value *val_from_json(arena *a, jfail *f, const void *cjson);
/* d[key]: NULL when absent (the keys it reads paid to f) */
value *dict_get(jfail *f, const value *d, const char *key, size_t n);
void dict_set(arena *a, jfail *f, value *d, value *key, value *v);
bool val_truthy(const value *v);
/* Python's ==, the bytes and items it reads paid to f */
bool val_eq(jfail *f, const value *a, const value *b);
bool val_is_number(const value *v); /* int, float or bool */
double val_as_double(const value *v);
const char *val_type_name(const value *v);

/* A growing byte string (in the arena, or malloc'ed for the output). */
typedef struct sbuf {
    char *p;
    size_t n, cap, limit;
    bool heap;
} sbuf;
void sb_add(arena *a, jfail *f, sbuf *b, const char *p, size_t n);
/* Python's str() of v into b; repr: Python's repr() */
void val_write(arena *a, jfail *f, sbuf *b, const value *v, bool repr);
/* The options of transformers' tojson: json.dumps(v, ensure_ascii=ascii,
 * indent=indent (< 0: none), separators=(item_sep, key_sep), sort_keys) */
typedef struct json_style {
    int indent;
    const value *item_sep, *key_sep; /* NULL: json.dumps' defaults */
    bool sort_keys;
    bool ascii; /* ensure_ascii */
} json_style;
void val_json(arena *a, jfail *f, sbuf *b, const value *v, const json_style *style, int level,
              size_t pos);

typedef enum nkind {
    N_BODY,
    N_TEXT,
    N_OUT,
    N_IF,
    N_FOR,
    N_SET,        /* s = a; without a: s = what body b renders */
    N_MACRO,      /* s: its name; kw: the parameters, items: their defaults (NULL: none); b: body */
    N_CALL_BLOCK, /* {% call m(args) %}body{% endcall %}: a, the call; c, the body as a macro */
    N_BREAK,
    N_CONTINUE,
    E_LIT,
    E_NAME,
    E_ATTR,
    E_ITEM,
    E_SLICE,
    E_CALL,
    E_FILTER,
    E_TEST,
    E_NOT,
    E_NEG,
    E_BIN,
    E_AND,
    E_OR,
    E_COND,
    E_LIST,
    E_DICT,
    E_CAPTURE, /* what body b renders ({% filter %}) */
} nkind;

struct node {
    nkind k;
    size_t pos;
    const char *s, *s2; /* text, name, attribute, operator, filter or test; s2: a second name */
    size_t n, n2;
    bool neg;            /* E_TEST: `is not`; E_LIST: a tuple; E_NEG: +x */
    value *lit;          /* E_LIT */
    node *a, *b, *c, *d; /* operands, condition, bodies, slice bounds */
    node **items;        /* N_BODY's statements, arguments, list or dict items */
    const char **kw;     /* the name of each keyword argument (NULL: positional; "" *splat) */
    size_t *kwn, count;
};

struct jinja_template {
    arena a;
    char *src;
    size_t len;
    node *root;
};

static inline bool name_is(const char *s, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i]; i++)
        if (s[i] != lit[i])
            return false;
    return i == n && !lit[i];
}

#endif
