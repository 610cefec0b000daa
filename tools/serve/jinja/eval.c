/* Rendering the syntax tree of the Jinja subset (jinja.h): scopes as
 * Jinja has them (a for loop's body sets names of its own; namespace()
 * objects carry values out), Undefined as Jinja's default one (empty and
 * false, an error when its attributes are read), the statements and the
 * expressions; calls, filters, tests, methods and arithmetic are in the
 * files beside (render.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

value *str_of(ctx *c, const char *p, size_t n)
{
    return val_str(&c->a, &c->f, p, n);
}

value *lookup_name(ctx *c, const char *name, size_t n)
{
    for (int i = c->scopes - 1; i >= 0; i--) {
        value *v = dict_get(&c->f, c->scope[i], name, n);
        if (v)
            return v;
    }
    value *fn = global_function(name, n);
    return fn ? fn : val_undef();
}

void bind_name(ctx *c, const char *name, size_t n, value *v)
{
    dict_set(&c->a, &c->f, c->scope[c->scopes - 1], str_of(c, name, n), v);
}

void count_step(ctx *c, size_t pos)
{
    const size_t at = c->f.at;
    c->f.at = pos;
    jinja_spend(&c->f, JINJA_STEP_WORK);
    c->f.at = at;
}

/* The string of v as str() gives it (in the arena). */
value *new_list(ctx *c, size_t cap)
{
    value *r = val_new(&c->a, &c->f, V_LIST);
    r->l.v = arena_alloc(&c->a, &c->f, (cap + 1) * sizeof(value *));
    return r;
}

/* The string of v as str() gives it (in the arena). */
value *to_str(ctx *c, value *v)
{
    if (v->t == V_STR)
        return v;
    sbuf b = { .limit = JINJA_MAX_MEMORY };
    val_write(&c->a, &c->f, &b, v, false);
    return str_of(c, b.p ? b.p : "", b.n);
}

value *need_type(ctx *c, value *v, vtype t, size_t pos, const char *what)
{
    if (v->t != t)
        FAIL(c, pos, "%s: a %s expected, not %s", what, val_type_name(&(value){ .t = t }),
             val_type_name(v));
    return v;
}

size_t *char_starts(ctx *c, const value *s, size_t *count)
{
    jinja_spend(&c->f, s->s.n);
    size_t *at = arena_alloc(&c->a, &c->f, (s->s.n + 1) * sizeof(*at)), n = 0;
    for (size_t i = 0; i < s->s.n; i++)
        if (((unsigned char)s->s.p[i] & 0xc0) != 0x80)
            at[n++] = i;
    at[n] = s->s.n;
    *count = n;
    return at;
}

static int64_t int_arg(ctx *c, const node *n)
{
    return need_type(c, eval_expr(c, n), V_INT, n->pos, "an index")->i;
}

/* Python's slice of length len: the indices it takes into idx, their count. */
static size_t slice_indices(ctx *c, const node *n, size_t len, size_t **idx)
{
    const int64_t step = n->d ? int_arg(c, n->d) : 1, l = (int64_t)len;
    if (!step)
        FAIL(c, n->pos, "a slice step of 0");
    int64_t lo = step > 0 ? 0 : l - 1, hi = step > 0 ? l : -1;
    if (n->b) {
        int64_t v = int_arg(c, n->b);
        v = v < 0 ? v + l : v;
        lo = step > 0 ? (v < 0 ? 0 : v > l ? l : v) : (v < 0 ? -1 : v >= l ? l - 1 : v);
    }
    if (n->c) {
        int64_t v = int_arg(c, n->c);
        v = v < 0 ? v + l : v;
        hi = step > 0 ? (v < 0 ? 0 : v > l ? l : v) : (v < -1 ? -1 : v >= l ? l - 1 : v);
    }
    *idx = arena_alloc(&c->a, &c->f, (len + 1) * sizeof(**idx));
    size_t k = 0;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
        (*idx)[k++] = (size_t)i;
    return k;
}

static value *slice(ctx *c, const node *n)
{
    value *v = eval_expr(c, n->a), *r;
    size_t *idx, k;
    if (v->t == V_LIST) {
        k = slice_indices(c, n, v->l.n, &idx);
        r = val_new(&c->a, &c->f, V_LIST);
        r->l.v = arena_alloc(&c->a, &c->f, (k + 1) * sizeof(value *));
        for (size_t i = 0; i < k; i++)
            r->l.v[i] = v->l.v[idx[i]];
        r->l.n = k;
        return r;
    }
    if (v->t != V_STR)
        FAIL(c, n->pos, "a slice of %s", val_type_name(v));
    size_t chars;
    const size_t *at = char_starts(c, v, &chars);
    k = slice_indices(c, n, chars, &idx);
    sbuf b = { .limit = JINJA_MAX_MEMORY };
    sb_add(&c->a, &c->f, &b, "", 0);
    for (size_t i = 0; i < k; i++)
        sb_add(&c->a, &c->f, &b, v->s.p + at[idx[i]], at[idx[i] + 1] - at[idx[i]]);
    return str_of(c, b.p, b.n);
}

static value *loop_attr(ctx *c, const loop_state *l, const char *name, size_t n)
{
    const int64_t i = (int64_t)l->index, len = (int64_t)l->length;
    if (name_is(name, n, "index0"))
        return val_int(&c->a, &c->f, i);
    if (name_is(name, n, "index"))
        return val_int(&c->a, &c->f, i + 1);
    if (name_is(name, n, "revindex0"))
        return val_int(&c->a, &c->f, len - i - 1);
    if (name_is(name, n, "revindex"))
        return val_int(&c->a, &c->f, len - i);
    if (name_is(name, n, "first"))
        return val_bool(i == 0);
    if (name_is(name, n, "last"))
        return val_bool(i == len - 1);
    if (name_is(name, n, "length"))
        return val_int(&c->a, &c->f, len);
    if (name_is(name, n, "previtem"))
        return i > 0 ? l->items[i - 1] : val_undef();
    if (name_is(name, n, "nextitem"))
        return i + 1 < len ? l->items[i + 1] : val_undef();
    return val_undef();
}

/* Whether Python's str or dict (of obj's type) has a method of that name. */
static bool has_method(const value *obj, const char *name, size_t n)
{
    static const char *const dict_methods[] = { "clear",      "copy",   "fromkeys", "get",
                                                "items",      "keys",   "pop",      "popitem",
                                                "setdefault", "update", "values",   NULL };
    static const char *const str_methods[] = {
        "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
        "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
        "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
        "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
        "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
        "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
        "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
        "swapcase",     "title",       "translate", "upper",      "zfill",        NULL
    };
    const char *const *names = obj->t == V_DICT  ? dict_methods
                               : obj->t == V_STR ? str_methods
                                                 : NULL;
    for (size_t k = 0; names && names[k]; k++)
        if (name_is(name, n, names[k]))
            return true;
    return false;
}

static value *bound_method(ctx *c, value *obj, const char *name, size_t n)
{
    value *fn = val_new(&c->a, &c->f, V_FUNC);
    fn->fn.kind = F_METHOD;
    fn->fn.self = obj;
    fn->fn.name = name;
    fn->fn.name_n = n;
    return fn;
}

value *get_attr(ctx *c, value *obj, const char *name, size_t n, size_t pos, bool dot)
{
    if (obj->t == V_UNDEF)
        FAIL(c, pos, "'%.*s' of an undefined value", (int)(n < 60 ? n : 60), name);
    const bool method = has_method(obj, name, n);
    if (dot && method) /* x.items is the method, x['items'] the item */
        return bound_method(c, obj, name, n);
    if (obj->t == V_DICT || obj->t == V_NS) {
        value *v = dict_get(&c->f, obj, name, n);
        if (v)
            return v;
    }
    if (obj->t == V_LOOP)
        return loop_attr(c, obj->loop, name, n);
    return method ? bound_method(c, obj, name, n) : val_undef();
}

static value *item(ctx *c, const node *n)
{
    value *obj = eval_expr(c, n->a), *key = eval_expr(c, n->b);
    if (key->t == V_STR)
        return get_attr(c, obj, key->s.p, key->s.n, n->pos, false);
    if (obj->t == V_UNDEF)
        FAIL(c, n->pos, "an item of an undefined value");
    if (key->t != V_INT && key->t != V_BOOL)
        return val_undef();
    int64_t i = key->t == V_INT ? key->i : key->b;
    if (obj->t == V_LIST) {
        i = i < 0 ? i + (int64_t)obj->l.n : i;
        return i >= 0 && i < (int64_t)obj->l.n ? obj->l.v[i] : val_undef();
    }
    if (obj->t == V_STR) {
        size_t chars;
        const size_t *at = char_starts(c, obj, &chars);
        i = i < 0 ? i + (int64_t)chars : i;
        return i >= 0 && i < (int64_t)chars ? str_of(c, obj->s.p + at[i], at[i + 1] - at[i])
                                            : val_undef();
    }
    return val_undef();
}

/* Puts v into a's slot (at most max of them). */
static void put_arg(ctx *c, call_args *a, size_t slot, value *v, size_t max, const char *what,
                    size_t pos)
{
    if (slot >= max)
        FAIL(c, pos, "%s: at most %zu arguments", what, max);
    if (a->v[slot])
        FAIL(c, pos, "%s: an argument given twice", what);
    a->v[slot] = v;
    if (slot >= a->n)
        a->n = slot + 1;
}

call_args get_args(ctx *c, const node *call, size_t first, const char *what, size_t min, size_t max,
                   const char *const *names)
{
    call_args a = { .call = call };
    if (max > sizeof(a.v) / sizeof(a.v[0]))
        FAIL(c, call->pos, "%s: too many parameters", what);
    size_t positional = 0;
    for (size_t i = first; i < call->count; i++) {
        const node *arg = call->items[i];
        if (is_splat(call, i)) {
            const value *list = iterate_value(c, eval_expr(c, arg), arg->pos);
            for (size_t k = 0; k < list->l.n; k++)
                put_arg(c, &a, positional++, list->l.v[k], max, what, arg->pos);
        } else if (call->kw[i]) {
            size_t slot = max;
            for (size_t k = 0; names && names[k]; k++)
                if (name_is(call->kw[i], call->kwn[i], names[k]))
                    slot = k;
            if (slot >= max)
                FAIL(c, arg->pos, "%s: no argument named '%.*s'", what,
                     (int)(call->kwn[i] < 40 ? call->kwn[i] : 40), call->kw[i]);
            put_arg(c, &a, slot, eval_expr(c, arg), max, what, arg->pos);
        } else {
            put_arg(c, &a, positional++, eval_expr(c, arg), max, what, call->pos);
        }
    }
    for (size_t i = 0; i < min; i++)
        if (!a.v[i])
            FAIL(c, call->pos, "%s: %zu arguments expected", what, min);
    return a;
}

static value *binop(ctx *c, const node *n)
{
    value *a = eval_expr(c, n->a), *b = eval_expr(c, n->b);
    const char *op = n->s;
    if (name_is(op, n->n, "=="))
        return val_bool(val_eq(&c->f, a, b));
    if (name_is(op, n->n, "!="))
        return val_bool(!val_eq(&c->f, a, b));
    if (name_is(op, n->n, "in"))
        return contains_value(c, b, a, n->pos);
    if (name_is(op, n->n, "not in"))
        return val_bool(!contains_value(c, b, a, n->pos)->b);
    if (name_is(op, n->n, "~")) {
        sbuf s = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &s, "", 0);
        val_write(&c->a, &c->f, &s, a, false);
        val_write(&c->a, &c->f, &s, b, false);
        return str_of(c, s.p, s.n);
    }
    if (op[0] == '<' || op[0] == '>') {
        const int cmp = compare_values(c, a, b, n->pos, op);
        const bool eq = n->n == 2;
        return val_bool(op[0] == '<' ? (cmp < 0 || (eq && !cmp)) : (cmp > 0 || (eq && !cmp)));
    }
    if ((a->t == V_UNDEF || b->t == V_UNDEF))
        FAIL(c, n->pos, "'%.*s' of an undefined value", (int)n->n, op);
    return arith_op(c, n, a, b);
}

value *eval_expr(ctx *c, const node *n)
{
    if (++c->depth > 4 * JINJA_MAX_DEPTH)
        jinja_fail(&c->f, JINJA_ERROR_LIMIT, n->pos, "nested deeper than %d", JINJA_MAX_DEPTH);
    const size_t at = c->f.at; /* the work of this expression is paid at its place */
    c->f.at = n->pos;
    value *r;
    switch (n->k) {
    case E_LIT: r = n->lit; break;
    case E_NAME: r = lookup_name(c, n->s, n->n); break;
    case E_ATTR: r = get_attr(c, eval_expr(c, n->a), n->s, n->n, n->pos, true); break;
    case E_ITEM: r = item(c, n); break;
    case E_SLICE: r = slice(c, n); break;
    case E_CALL: r = call_expr(c, n); break;
    case E_FILTER: r = filter_expr(c, n); break;
    case E_TEST: r = test_expr(c, n); break;
    case E_NOT: r = val_bool(!val_truthy(eval_expr(c, n->a))); break;
    case E_NEG:
        r = n->neg ? plus_value(c, eval_expr(c, n->a), n->pos)
                   : negate_value(c, eval_expr(c, n->a), n->pos);
        break;
    case E_CAPTURE: r = capture_body(c, n->b); break;
    case E_BIN: r = binop(c, n); break;
    case E_AND:
        r = eval_expr(c, n->a);
        r = val_truthy(r) ? eval_expr(c, n->b) : r;
        break;
    case E_OR:
        r = eval_expr(c, n->a);
        r = val_truthy(r) ? r : eval_expr(c, n->b);
        break;
    case E_COND:
        r = val_truthy(eval_expr(c, n->a)) ? eval_expr(c, n->b)
            : n->c                         ? eval_expr(c, n->c)
                                           : val_undef();
        break;
    case E_LIST:
        r = new_list(c, n->count);
        r->l.tuple = n->neg;
        for (size_t i = 0; i < n->count; i++)
            r->l.v[i] = eval_expr(c, n->items[i]);
        r->l.n = n->count;
        break;
    case E_DICT:
        r = val_new(&c->a, &c->f, V_DICT);
        for (size_t i = 0; i + 1 < n->count; i += 2) {
            value *k = eval_expr(c, n->items[i]);
            if (k->t != V_STR)
                FAIL(c, n->items[i]->pos, "dict keys must be strings");
            dict_set(&c->a, &c->f, r, k, eval_expr(c, n->items[i + 1]));
        }
        break;
    default: FAIL(c, n->pos, "not an expression");
    }
    c->depth--;
    c->f.at = at;
    return r;
}

void push_scope(ctx *c, size_t pos)
{
    if (c->scopes == MAX_SCOPES)
        jinja_fail(&c->f, JINJA_ERROR_LIMIT, pos, "nested deeper than %d", JINJA_MAX_DEPTH);
    c->scope[c->scopes++] = val_new(&c->a, &c->f, V_DICT);
}

value *iterate_value(ctx *c, value *v, size_t pos)
{
    if (v->t == V_LIST)
        return v;
    if (v->t == V_DICT)
        return dict_view(c, v, 0);
    if (v->t == V_UNDEF)
        return new_list(c, 0);
    if (v->t != V_STR)
        FAIL(c, pos, "a %s is not iterable", val_type_name(v));
    size_t count;
    const size_t *at = char_starts(c, v, &count);
    value *r = new_list(c, count);
    for (size_t i = 0; i < count; i++)
        r->l.v[i] = str_of(c, v->s.p + at[i], at[i + 1] - at[i]);
    r->l.n = count;
    return r;
}

/* Binds the loop's names in its scope (emptied first: each turn has its own). */
static void bind_turn(ctx *c, value *scope, value *const keys[3], value *x, value *loop, size_t pos,
                      const node *n)
{
    scope->d.n = 0;
    if (keys[1]) {
        if (x->t != V_LIST || x->l.n != 2)
            FAIL(c, pos, "for %.*s, %.*s: an item is not a pair", (int)n->n, n->s, (int)n->n2,
                 n->s2);
        dict_set(&c->a, &c->f, scope, keys[0], x->l.v[0]);
        dict_set(&c->a, &c->f, scope, keys[1], x->l.v[1]);
    } else {
        dict_set(&c->a, &c->f, scope, keys[0], x);
    }
    if (loop)
        dict_set(&c->a, &c->f, scope, keys[2], loop);
}

static void for_loop(ctx *c, const node *n)
{
    value *seq = iterate_value(c, eval_expr(c, n->a), n->a->pos);
    value **items = seq->l.v;
    const size_t count = seq->l.n;
    value *const keys[3] = { str_of(c, n->s, n->n), n->s2 ? str_of(c, n->s2, n->n2) : NULL,
                             str_of(c, "loop", 4) };
    push_scope(c, n->pos);
    value *scope = c->scope[c->scopes - 1];
    loop_state *st = arena_alloc(&c->a, &c->f, sizeof(*st));
    *st = (loop_state){ items, 0, count };
    if (n->d) { /* for x in xs if cond: the loop sees only the items kept */
        value **kept = arena_alloc(&c->a, &c->f, (count + 1) * sizeof(value *));
        size_t k = 0;
        for (size_t i = 0; i < count; i++) {
            count_step(c, n->pos);
            bind_turn(c, scope, keys, items[i], NULL, n->pos, n);
            if (val_truthy(eval_expr(c, n->d)))
                kept[k++] = items[i];
        }
        st->items = kept;
        st->length = k;
    }
    value *loop = val_new(&c->a, &c->f, V_LOOP);
    loop->loop = st;
    c->loops++;
    for (st->index = 0; st->index < st->length; st->index++) {
        count_step(c, n->pos);
        bind_turn(c, scope, keys, st->items[st->index], loop, n->pos, n);
        run_stmt(c, n->b);
        if (c->flow == 1) {
            c->flow = 0;
            break;
        }
        c->flow = 0;
    }
    c->loops--;
    c->scopes--;
    if (!st->length && n->c)
        run_stmt(c, n->c);
}

/* Macro m as a value: it keeps the scopes it is defined in. */
static value *closure(ctx *c, const node *m)
{
    value *fn = val_new(&c->a, &c->f, V_FUNC);
    fn->fn.kind = F_MACRO;
    fn->fn.macro = m;
    fn->fn.scopes = c->scopes;
    fn->fn.chain = arena_alloc(&c->a, &c->f, (size_t)c->scopes * sizeof(value *));
    memcpy(fn->fn.chain, c->scope, (size_t)c->scopes * sizeof(value *));
    return fn;
}

static void run_one(ctx *c, const node *n)
{
    switch (n->k) {
    case N_BODY:
        for (size_t i = 0; i < n->count && !c->flow; i++)
            run_stmt(c, n->items[i]);
        return;
    case N_TEXT: sb_add(&c->a, &c->f, c->out, n->s, n->n); return;
    case N_OUT: val_write(&c->a, &c->f, c->out, eval_expr(c, n->a), false); return;
    case N_IF:
        if (val_truthy(eval_expr(c, n->a)))
            run_stmt(c, n->b);
        else if (n->c)
            run_stmt(c, n->c);
        return;
    case N_FOR: for_loop(c, n); return;
    case N_SET: {
        value *v = n->a ? eval_expr(c, n->a) : capture_body(c, n->b);
        if (n->count) { /* set a, b = pair */
            const value *items = iterate_value(c, v, n->pos);
            if (items->l.n != n->count)
                FAIL(c, n->pos, "set: %zu names for %zu values", n->count, items->l.n);
            for (size_t i = 0; i < n->count; i++)
                bind_name(c, n->kw[i], n->kwn[i], items->l.v[i]);
            return;
        }
        if (!n->s2) {
            bind_name(c, n->s, n->n, v);
            return;
        }
        value *ns = lookup_name(c, n->s, n->n);
        if (ns->t != V_NS)
            FAIL(c, n->pos, "set %.*s.%.*s: %.*s is not a namespace()", (int)n->n, n->s, (int)n->n2,
                 n->s2, (int)n->n, n->s);
        dict_set(&c->a, &c->f, ns, str_of(c, n->s2, n->n2), v);
        return;
    }
    case N_MACRO: {
        bind_name(c, n->s, n->n, closure(c, n));
        return;
    }
    case N_CALL_BLOCK: { /* the macro called with caller() rendering the body */
        value *caller = closure(c, n->c);
        if (n->a->k != E_CALL)
            FAIL(c, n->pos, "{%% call %%} of what is not a macro call");
        const value *fn = eval_expr(c, n->a->a);
        if (fn->t != V_FUNC || fn->fn.kind != F_MACRO)
            FAIL(c, n->pos, "{%% call %%} of what is not a macro");
        c->caller = caller;
        val_write(&c->a, &c->f, c->out, call_expr(c, n->a), false);
        return;
    }
    case N_BREAK:
    case N_CONTINUE:
        if (!c->loops)
            FAIL(c, n->pos, "break or continue outside a loop");
        c->flow = n->k == N_BREAK ? 1 : 2;
        return;
    default: FAIL(c, n->pos, "not a statement");
    }
}

void run_stmt(ctx *c, const node *n)
{
    count_step(c, n->pos);
    const size_t at = c->f.at; /* the work of this statement is paid at its place */
    c->f.at = n->pos;
    run_one(c, n);
    c->f.at = at;
}

value *capture_body(ctx *c, const node *body)
{
    sbuf *outer = c->out, text = { .limit = JINJA_MAX_MEMORY };
    c->out = &text;
    sb_add(&c->a, &c->f, &text, "", 0);
    run_stmt(c, body);
    value *r = val_new(&c->a, &c->f, V_STR);
    r->s.p = text.p;
    r->s.n = text.n;
    c->out = outer;
    return r;
}

jinja_status jinja_render(const jinja_template *t, const cJSON *vars, char **out, size_t *out_len,
                          char *why, size_t cap)
{
    return jinja_render_at(t, vars, (int64_t)time(NULL), out, out_len, why, cap);
}

jinja_status jinja_render_at(const jinja_template *t, const cJSON *vars, int64_t now, char **out,
                             size_t *out_len, char *why, size_t cap)
{
    *out = NULL;
    *out_len = 0;
    ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, cap, "out of host memory");
        return JINJA_ERROR_MEMORY;
    }
    c->f = (jfail){ .why = why, .cap = cap, .src = t->src, .src_len = t->len, .at = JINJA_NO_POS };
    c->result = (sbuf){ .limit = JINJA_MAX_OUTPUT, .heap = true };
    c->out = &c->result;
    c->now = (time_t)now;
    jinja_status st = JINJA_OK;
    if (setjmp(c->f.jb)) {
        st = c->f.st;
        free(c->result.p);
    } else {
        if (vars && !cJSON_IsObject(vars))
            jinja_fail(&c->f, JINJA_ERROR_RENDER, 0, "the names must be a JSON object");
        c->scope[0] = vars ? val_from_json(&c->a, &c->f, vars) : val_new(&c->a, &c->f, V_DICT);
        c->scopes = 1;
        push_scope(c, 0);
        sb_add(&c->a, &c->f, c->out, "", 0);
        run_stmt(c, t->root);
        *out = c->result.p;
        *out_len = c->result.n;
    }
    arena_free(&c->a);
    free(c);
    return st;
}
