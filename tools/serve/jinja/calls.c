/* Calls: the methods of values (strings.c), the template's macros and the
 * global functions of transformers' environment (raise_exception,
 * strftime_now) and of Jinja (namespace, range). A macro sees the names
 * of the scopes it was defined in (as they are when it runs), its
 * parameters in a scope of its own,
 * and gives what its body renders; its calls nest at most
 * JINJA_MAX_DEPTH deep. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "render.h"

static const char *const global_names[] = { "", "raise_exception", "namespace", "range",
                                            "strftime_now" };

value *global_function(const char *name, size_t n)
{
    static value fns[] = {
        { .t = V_FUNC, .fn = { .kind = F_MACRO } },
        { .t = V_FUNC, .fn = { .kind = F_RAISE } },
        { .t = V_FUNC, .fn = { .kind = F_NAMESPACE } },
        { .t = V_FUNC, .fn = { .kind = F_RANGE } },
        { .t = V_FUNC, .fn = { .kind = F_STRFTIME_NOW } },
    };
    for (size_t k = 1; k < sizeof(fns) / sizeof(fns[0]); k++)
        if (name_is(name, n, global_names[k]))
            return &fns[k];
    return NULL;
}

__attribute__((noreturn)) static void raise_exception(ctx *c, const node *n)
{
    call_args a = get_args(c, n, 0, "raise_exception()", 1, 1, NULL);
    value *msg = to_str(c, a.v[0]);
    if (!msg->s.n || !msg->s.p[0]) /* an error always says something */
        jinja_fail(&c->f, JINJA_ERROR_RAISED, n->pos, "raise_exception() without a message");
    jinja_fail(&c->f, JINJA_ERROR_RAISED, n->pos, "%.*s", (int)(msg->s.n < 400 ? msg->s.n : 400),
               msg->s.p);
}

static value *namespace(ctx *c, const node *n)
{
    value *ns = val_new(&c->a, &c->f, V_NS);
    for (size_t i = 0; i < n->count; i++) {
        if (!n->kw[i] || is_splat(n, i))
            FAIL(c, n->items[i]->pos, "namespace(): only name=value arguments");
        dict_set(&c->a, &c->f, ns, str_of(c, n->kw[i], n->kwn[i]), eval_expr(c, n->items[i]));
    }
    return ns;
}

static value *range(ctx *c, const node *n)
{
    call_args a = get_args(c, n, 0, "range()", 1, 3, NULL);
    int64_t v[3] = { 0, 0, 1 };
    for (size_t i = 0; i < a.n; i++)
        v[a.n == 1 ? 1 : i] = need_type(c, a.v[i], V_INT, n->pos, "range()")->i;
    if (!v[2])
        FAIL(c, n->pos, "range(): a step of 0");
    size_t count = 0;
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2], count++)
        count_step(c, n->pos);
    value *r = new_list(c, count);
    for (size_t i = 0; i < count; i++)
        r->l.v[i] = val_int(&c->a, &c->f, v[0] + (int64_t)i * v[2]);
    r->l.n = count;
    return r;
}

/* transformers' strftime_now(format): datetime.now().strftime(format) */
static value *strftime_now(ctx *c, const node *n)
{
    call_args a = get_args(c, n, 0, "strftime_now()", 1, 1, NULL);
    const value *format = need_type(c, a.v[0], V_STR, n->pos, "strftime_now()");
    if (memchr(format->s.p, 0, format->s.n))
        FAIL(c, n->pos, "strftime_now(): a NUL byte in the format");
    struct tm tm;
    if (!localtime_r(&c->now, &tm))
        FAIL(c, n->pos, "strftime_now(): no local time");
    char date[1024];
    const size_t len = strftime(date, sizeof(date), format->s.p, &tm);
    if (!len && format->s.n)
        FAIL(c, n->pos, "strftime_now(): the date is longer than %zu bytes", sizeof(date) - 1);
    return str_of(c, date, len);
}

/* The parameter of macro m named name: its index, or m->count. */
static size_t param_index(const node *m, const char *name, size_t n)
{
    size_t k = 0;
    while (k < m->count && !(m->kwn[k] == n && !memcmp(m->kw[k], name, n)))
        k++;
    return k;
}

/* Gives macro m's k-th parameter its value. */
static void give(ctx *c, const node *m, value **given, size_t k, value *v, size_t pos)
{
    const int name_len = (int)(m->n < 40 ? m->n : 40);
    if (k >= m->count)
        FAIL(c, pos, "macro '%.*s' takes not more than %zu argument(s)", name_len, m->s, m->count);
    if (given[k])
        FAIL(c, pos, "macro '%.*s' got the argument '%.*s' twice", name_len, m->s,
             (int)(m->kwn[k] < 40 ? m->kwn[k] : 40), m->kw[k]);
    given[k] = v;
}

static value *call_macro(ctx *c, const node *n, const value *fn)
{
    const node *m = fn->fn.macro;
    const int name_len = (int)(m->n < 40 ? m->n : 40);
    if (c->calls >= JINJA_MAX_DEPTH)
        jinja_fail(&c->f, JINJA_ERROR_LIMIT, n->pos, "macro calls nested deeper than %d",
                   JINJA_MAX_DEPTH);
    /* the arguments, in the caller's scopes */
    value *caller = c->caller;
    c->caller = NULL;
    value **given = arena_alloc(&c->a, &c->f, (m->count + 1) * sizeof(*given));
    size_t positional = 0;
    for (size_t i = 0; i < n->count; i++) {
        const node *arg = n->items[i];
        if (is_splat(n, i)) {
            const value *list = iterate_value(c, eval_expr(c, arg), arg->pos);
            for (size_t k = 0; k < list->l.n; k++)
                give(c, m, given, positional++, list->l.v[k], arg->pos);
        } else if (n->kw[i]) {
            const size_t k = param_index(m, n->kw[i], n->kwn[i]);
            if (k == m->count)
                FAIL(c, arg->pos, "macro '%.*s' takes no argument named '%.*s'", name_len, m->s,
                     (int)(n->kwn[i] < 40 ? n->kwn[i] : 40), n->kw[i]);
            give(c, m, given, k, eval_expr(c, arg), arg->pos);
        } else {
            give(c, m, given, positional++, eval_expr(c, arg), n->pos);
        }
    }
    /* the body, in the scopes of the definition and its own */
    value *saved[MAX_SCOPES];
    memcpy(saved, c->scope, sizeof(saved));
    const int saved_scopes = c->scopes, saved_loops = c->loops;
    memcpy(c->scope, fn->fn.chain, (size_t)fn->fn.scopes * sizeof(value *));
    c->scopes = fn->fn.scopes;
    push_scope(c, n->pos);
    c->loops = 0;
    c->calls++;
    if (caller)
        bind_name(c, "caller", 6, caller);
    for (size_t k = 0; k < m->count; k++) /* defaults may read the parameters before them */
        bind_name(c, m->kw[k], m->kwn[k],
                  given[k]      ? given[k]
                  : m->items[k] ? eval_expr(c, m->items[k])
                                : val_undef());
    value *r = capture_body(c, m->b);
    c->calls--;
    c->loops = saved_loops;
    c->scopes = saved_scopes;
    memcpy(c->scope, saved, sizeof(saved));
    return r;
}

value *call_expr(ctx *c, const node *n)
{
    const node *f = n->a;
    value *fn = eval_expr(c, f);
    if (f->k == E_ATTR && fn->t == V_UNDEF) /* names the method that is not there */
        return call_method(c, n, eval_expr(c, f->a), f->s, f->n);
    if (fn->t != V_FUNC) {
        if (f->k == E_NAME && fn->t == V_UNDEF)
            FAIL(c, n->pos, "the function '%.*s' is not defined", (int)(f->n < 40 ? f->n : 40),
                 f->s);
        FAIL(c, n->pos, "a %s is not callable", val_type_name(fn));
    }
    switch (fn->fn.kind) {
    case F_MACRO: return call_macro(c, n, fn);
    case F_METHOD: return call_method(c, n, fn->fn.self, fn->fn.name, fn->fn.name_n);
    case F_RAISE: raise_exception(c, n);
    case F_NAMESPACE: return namespace(c, n);
    case F_RANGE: return range(c, n);
    case F_STRFTIME_NOW: return strftime_now(c, n);
    }
    FAIL(c, n->pos, "not a function");
}
