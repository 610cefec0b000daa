/* What the evaluator's files (eval.c, calls.c, filters.c, tests.c,
 * numbers.c, strings.c) share: the state of one rendering and the functions
 * each of them uses. */
#ifndef PFX_TOOLS_SERVE_JINJA_RENDER_H
#define PFX_TOOLS_SERVE_JINJA_RENDER_H

#include <time.h>

#include "jinja_impl.h"

#define MAX_SCOPES (JINJA_MAX_DEPTH + 2)

typedef struct ctx {
    arena a;
    jfail f;
    sbuf result; /* the output (on the heap) */
    sbuf *out;   /* where text goes: the output, or what a macro or block set captures */
    int depth;
    value *scope[MAX_SCOPES]; /* [0]: the caller's names, [1]: the template's */
    int scopes;
    int loops;     /* for loops open around the statement run (in this macro) */
    int calls;     /* macro calls open */
    int flow;      /* 1: break, 2: continue */
    value *caller; /* the body of {% call %}, for the macro call that comes next */
    time_t now;    /* strftime_now's */
} ctx;

#define FAIL(c, pos, ...) jinja_fail(&(c)->f, JINJA_ERROR_RENDER, pos, __VA_ARGS__)

/* The arguments of a call, a filter or a test. */
typedef struct call_args {
    value *v[6];
    size_t n;
    const node *call;
} call_args;

/* eval.c */
value *eval_expr(ctx *c, const node *n);
void run_stmt(ctx *c, const node *n);
/* Pays a step's work (JINJA_STEP_WORK) at pos. */
void count_step(ctx *c, size_t pos);
value *str_of(ctx *c, const char *p, size_t n);
value *to_str(ctx *c, value *v);
value *need_type(ctx *c, value *v, vtype t, size_t pos, const char *what);
value *new_list(ctx *c, size_t cap);
/* What `for x in v` goes through, as a list: a list's items, a dict's
 * keys, a string's characters, nothing for undefined. */
value *iterate_value(ctx *c, value *v, size_t pos);
/* The UTF-8 characters of s: their start offsets (count + 1 of them); its
 * bytes paid as work. */
size_t *char_starts(ctx *c, const value *s, size_t *count);
/* obj.name (dot) and obj[name]: Jinja looks for an attribute (a method)
 * first in the one, an item first in the other */
value *get_attr(ctx *c, value *obj, const char *name, size_t n, size_t pos, bool dot);
value *lookup_name(ctx *c, const char *name, size_t n);
void bind_name(ctx *c, const char *name, size_t n, value *v);
void push_scope(ctx *c, size_t pos);
/* What body renders, as a string (the output set aside meanwhile). */
value *capture_body(ctx *c, const node *body);
/* The arguments of call from its first-th on (positional, then those
 * named as listed in names, NULL-terminated, in order): at most max, at
 * least min. */
call_args get_args(ctx *c, const node *call, size_t first, const char *what, size_t min, size_t max,
                   const char *const *names);

/* Whether call's i-th argument is *list (its items given one by one). */
static inline bool is_splat(const node *call, size_t i)
{
    return call->kw[i] && !call->kwn[i];
}

/* calls.c: f(...) of a macro or a global function */
value *call_expr(ctx *c, const node *n);
/* the global function name, or NULL */
value *global_function(const char *name, size_t n);

/* strings.c: the methods of strings and dicts; NULL when not one (the
 * arguments from call's first-th on) */
value *str_method(ctx *c, const node *call, size_t first, value *obj, const char *name, size_t n,
                  const char *what);
typedef enum letter_case {
    CASE_LOWER,
    CASE_UPPER,
    CASE_CAPITALIZE,
    CASE_TITLE,       /* str.title() */
    CASE_JINJA_TITLE, /* jinja2's |title */
} letter_case;
value *change_case(ctx *c, value *s, letter_case how);
bool is_space(char ch); /* Python's ASCII whitespace */
value *call_method(ctx *c, const node *call, value *obj, const char *name, size_t n);
/* 0: keys, 1: values, 2: items */
value *dict_view(ctx *c, value *d, int which);

/* filters.c: x|name(args), the arguments from call's first-th on */
value *apply_filter(ctx *c, const char *name, size_t n, value *v, const node *call, size_t first);
value *filter_expr(ctx *c, const node *n);
/* seq_filters.c: the filters over sequences; NULL for another name */
value *seq_filter(ctx *c, const char *name, size_t n, value *v, const node *call, size_t first,
                  const char *what);

/* tests.c: x is name(args) */
bool apply_test(ctx *c, const char *name, size_t n, value *v, const node *call, size_t first);
value *test_expr(ctx *c, const node *n);
value *contains_value(ctx *c, value *hay, value *x, size_t pos);

/* numbers.c: Python's arithmetic and order */
value *arith_op(ctx *c, const node *n, value *a, value *b);
value *negate_value(ctx *c, value *v, size_t pos);
value *plus_value(ctx *c, value *v, size_t pos); /* +v */
/* a < b: -1, ==: 0, >: 1 (numbers with numbers, strings with strings) */
int compare_values(ctx *c, value *a, value *b, size_t pos, const char *op);

#endif
