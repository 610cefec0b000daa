/* Rendering the syntax tree of the Jinja subset (jinja.h): scopes as
 * Jinja has them (a for loop's body sets names of its own; namespace()
 * objects carry values out), Undefined as Jinja's default one (empty and
 * false, an error when its attributes are read), the filters, tests and
 * string methods chat templates use. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

#define MAX_SCOPES (JINJA_MAX_DEPTH + 2)

typedef struct ctx {
    arena a;
    jfail f;
    sbuf out;
    size_t steps;
    int depth;
    value *scope[MAX_SCOPES]; /* [0]: the caller's names, [1]: the template's */
    int scopes;
    int flow; /* 1: break, 2: continue */
} ctx;

#define FAIL(c, pos, ...) jinja_fail(&(c)->f, JINJA_ERROR_RENDER, pos, __VA_ARGS__)

static value *eval(ctx *c, const node *n);

static value *str_of(ctx *c, const char *p, size_t n)
{
    return val_str(&c->a, &c->f, p, n);
}

static value *lookup(ctx *c, const char *name, size_t n)
{
    for (int i = c->scopes - 1; i >= 0; i--) {
        value *v = dict_get(c->scope[i], name, n);
        if (v)
            return v;
    }
    return val_undef();
}

static void bind(ctx *c, const char *name, size_t n, value *v)
{
    dict_set(&c->a, &c->f, c->scope[c->scopes - 1], str_of(c, name, n), v);
}

static void step(ctx *c, size_t pos)
{
    if (++c->steps > JINJA_MAX_STEPS)
        jinja_fail(&c->f, JINJA_ERROR_LIMIT, pos, "more than %u steps", JINJA_MAX_STEPS);
}

/* The string of v as str() gives it (in the arena). */
static value *to_str(ctx *c, value *v)
{
    if (v->t == V_STR)
        return v;
    sbuf b = { .limit = JINJA_MAX_MEMORY };
    val_write(&c->a, &c->f, &b, v, false);
    return str_of(c, b.p ? b.p : "", b.n);
}

static value *need(ctx *c, value *v, vtype t, size_t pos, const char *what)
{
    if (v->t != t)
        FAIL(c, pos, "%s: a %s expected, not %s", what, val_type_name(&(value){ .t = t }),
             val_type_name(v));
    return v;
}

/* The UTF-8 characters of s: their start offsets (count + 1 of them). */
static size_t *char_starts(ctx *c, const value *s, size_t *count)
{
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
    return need(c, eval(c, n), V_INT, n->pos, "an index")->i;
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
    value *v = eval(c, n->a), *r;
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

/* obj.name and obj[key] (key a string) */
static value *attr(ctx *c, value *obj, const char *name, size_t n, size_t pos)
{
    if (obj->t == V_UNDEF)
        FAIL(c, pos, "'%.*s' of an undefined value", (int)(n < 60 ? n : 60), name);
    if (obj->t == V_DICT || obj->t == V_NS) {
        value *v = dict_get(obj, name, n);
        return v ? v : val_undef();
    }
    if (obj->t == V_LOOP)
        return loop_attr(c, obj->loop, name, n);
    return val_undef();
}

static value *item(ctx *c, const node *n)
{
    value *obj = eval(c, n->a), *key = eval(c, n->b);
    if (key->t == V_STR)
        return attr(c, obj, key->s.p, key->s.n, n->pos);
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

typedef struct call_args {
    value *v[4];
    size_t n;
    const node *call;
} call_args;

/* The arguments of a call (positional, then those named as listed in
 * names, NULL-terminated, in order): at most max, at least min. */
static call_args get_args(ctx *c, const node *call, const char *what, size_t min, size_t max,
                          const char *const *names)
{
    call_args a = { .call = call };
    for (size_t i = 0; i < call->count; i++) {
        size_t slot = a.n;
        if (call->kw[i]) {
            slot = max;
            for (size_t k = 0; names && names[k]; k++)
                if (name_is(call->kw[i], call->kwn[i], names[k]))
                    slot = k;
            if (slot >= max)
                FAIL(c, call->items[i]->pos, "%s: no argument named '%.*s'", what,
                     (int)(call->kwn[i] < 40 ? call->kwn[i] : 40), call->kw[i]);
        } else if (slot >= max) {
            FAIL(c, call->pos, "%s: at most %zu arguments", what, max);
        }
        a.v[slot] = eval(c, call->items[i]);
        if (slot >= a.n)
            a.n = slot + 1;
    }
    for (size_t i = 0; i < max; i++)
        if (!a.v[i]) {
            if (i < min)
                FAIL(c, call->pos, "%s: %zu arguments expected", what, min);
            a.v[i] = NULL;
        }
    return a;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* strip/lstrip/rstrip (which: 3, 1, 2) of s by chars (NULL: whitespace) */
static value *strip(ctx *c, value *s, const value *chars, int which)
{
    size_t lo = 0, hi = s->s.n;
#define STRIPPED(ch) (chars ? memchr(chars->s.p, (ch), chars->s.n) != NULL : is_space(ch))
    while ((which & 1) && lo < hi && STRIPPED(s->s.p[lo]))
        lo++;
    while ((which & 2) && hi > lo && STRIPPED(s->s.p[hi - 1]))
        hi--;
#undef STRIPPED
    return str_of(c, s->s.p + lo, hi - lo);
}

static value *change_case(ctx *c, value *s,
                          int how) /* 0: lower, 1: upper, 2: capitalize, 3: title */
{
    value *r = str_of(c, s->s.p, s->s.n);
    char *p = (char *)r->s.p;
    bool word_start = true;
    for (size_t i = 0; i < r->s.n; i++) {
        const char ch = p[i];
        const bool alpha = (ch | 32) >= 'a' && (ch | 32) <= 'z';
        const bool up = how == 1 || (how == 2 && i == 0) || (how == 3 && word_start);
        if (alpha)
            p[i] = up ? (char)(ch & ~32) : (char)(ch | 32);
        word_start = !alpha && !(ch & 0x80);
    }
    return r;
}

static value *split(ctx *c, value *s, const value *sep, int64_t max, size_t pos)
{
    if (sep && !sep->s.n)
        FAIL(c, pos, "split: an empty separator");
    value *r = val_new(&c->a, &c->f, V_LIST);
    size_t cap = 0, i = 0, start = 0;
    for (;;) {
        value *part;
        if (!sep) {
            while (i < s->s.n && is_space(s->s.p[i]))
                i++;
            if (i >= s->s.n)
                break;
            start = i;
            while (i < s->s.n && (!is_space(s->s.p[i]) || (max >= 0 && (int64_t)r->l.n >= max)))
                i++;
            part = str_of(c, s->s.p + start, i - start);
        } else {
            const char *hit = NULL;
            if (max < 0 || (int64_t)r->l.n < max)
                hit = memmem(s->s.p + start, s->s.n - start, sep->s.p, sep->s.n);
            const size_t end = hit ? (size_t)(hit - s->s.p) : s->s.n;
            part = str_of(c, s->s.p + start, end - start);
            start = hit ? end + sep->s.n : s->s.n + 1;
        }
        if (r->l.n == cap) {
            cap = cap ? 2 * cap : 8;
            value **grown = arena_alloc(&c->a, &c->f, cap * sizeof(*grown));
            if (r->l.n)
                memcpy(grown, r->l.v, r->l.n * sizeof(*grown));
            r->l.v = grown;
        }
        r->l.v[r->l.n++] = part;
        step(c, pos);
        if (sep && start > s->s.n)
            break;
    }
    return r;
}

static value *replace(ctx *c, value *s, value *from, value *to)
{
    sbuf b = { .limit = JINJA_MAX_MEMORY };
    sb_add(&c->a, &c->f, &b, "", 0);
    size_t i = 0;
    while (i <= s->s.n) {
        const char *hit = from->s.n ? memmem(s->s.p + i, s->s.n - i, from->s.p, from->s.n) : NULL;
        if (!hit) {
            sb_add(&c->a, &c->f, &b, s->s.p + i, s->s.n - i);
            break;
        }
        sb_add(&c->a, &c->f, &b, s->s.p + i, (size_t)(hit - s->s.p) - i);
        sb_add(&c->a, &c->f, &b, to->s.p, to->s.n);
        i = (size_t)(hit - s->s.p) + from->s.n;
    }
    return str_of(c, b.p, b.n);
}

static value *dict_view(ctx *c, value *d, int which) /* 0: keys, 1: values, 2: items */
{
    value *r = val_new(&c->a, &c->f, V_LIST);
    r->l.v = arena_alloc(&c->a, &c->f, (d->d.n + 1) * sizeof(value *));
    r->l.n = d->d.n;
    for (size_t i = 0; i < d->d.n; i++) {
        if (which < 2) {
            r->l.v[i] = which ? d->d.v[i] : d->d.k[i];
            continue;
        }
        value *pair = val_new(&c->a, &c->f, V_LIST);
        pair->l.v = arena_alloc(&c->a, &c->f, 2 * sizeof(value *));
        pair->l.v[0] = d->d.k[i];
        pair->l.v[1] = d->d.v[i];
        pair->l.n = 2;
        r->l.v[i] = pair;
    }
    return r;
}

/* Which of names (NULL-terminated) a method without arguments is: -1 for none. */
static int no_arg_method(ctx *c, const node *call, const char *what, const char *name, size_t n,
                         const char *const *names)
{
    for (int k = 0; names[k]; k++)
        if (name_is(name, n, names[k])) {
            get_args(c, call, what, 0, 0, NULL);
            return k;
        }
    return -1;
}

/* The string methods (filters too: trim is strip); NULL for another name. */
static value *str_method(ctx *c, const node *call, value *obj, const char *name, size_t n,
                         const char *what)
{
    static const char *const none[] = { NULL }, *const chars_name[] = { "chars", NULL };
    const bool strips = name_is(name, n, "strip") || name_is(name, n, "lstrip") ||
                        name_is(name, n, "rstrip") || name_is(name, n, "trim");
    if (strips) {
        call_args a = get_args(c, call, what, 0, 1, chars_name);
        const value *chars =
            a.v[0] && a.v[0]->t != V_NONE ? need(c, a.v[0], V_STR, call->pos, what) : NULL;
        return strip(c, obj, chars, name[0] == 'l' ? 1 : name[0] == 'r' ? 2 : 3);
    }
    if (name_is(name, n, "startswith") || name_is(name, n, "endswith")) {
        call_args a = get_args(c, call, what, 1, 1, none);
        const value *x = need(c, a.v[0], V_STR, call->pos, what);
        if (x->s.n > obj->s.n)
            return val_bool(false);
        const char *at = name[0] == 's' ? obj->s.p : obj->s.p + obj->s.n - x->s.n;
        return val_bool(!memcmp(at, x->s.p, x->s.n));
    }
    if (name_is(name, n, "split")) {
        static const char *const names[] = { "sep", "maxsplit", NULL };
        call_args a = get_args(c, call, what, 0, 2, names);
        const value *sep =
            a.v[0] && a.v[0]->t != V_NONE ? need(c, a.v[0], V_STR, call->pos, what) : NULL;
        return split(c, obj, sep, a.v[1] ? need(c, a.v[1], V_INT, call->pos, what)->i : -1,
                     call->pos);
    }
    static const char *const cases[] = { "lower", "upper", "capitalize", "title", NULL };
    const int k = no_arg_method(c, call, what, name, n, cases);
    if (k >= 0)
        return change_case(c, obj, k);
    if (name_is(name, n, "replace")) {
        call_args a = get_args(c, call, what, 2, 2, none);
        return replace(c, obj, need(c, a.v[0], V_STR, call->pos, what),
                       need(c, a.v[1], V_STR, call->pos, what));
    }
    return NULL;
}

static value *method(ctx *c, const node *call, value *obj, const char *name, size_t n)
{
    char what[64];
    snprintf(what, sizeof(what), ".%.*s()", (int)(n < 40 ? n : 40), name);
    value *r = obj->t == V_STR && !name_is(name, n, "trim")
                   ? str_method(c, call, obj, name, n, what)
                   : NULL;
    if (r)
        return r;
    if (obj->t == V_DICT) {
        static const char *const views[] = { "keys", "values", "items", NULL };
        const int k = no_arg_method(c, call, what, name, n, views);
        if (k >= 0)
            return dict_view(c, obj, k);
        if (name_is(name, n, "get")) {
            call_args a = get_args(c, call, what, 1, 2, NULL);
            value *v = a.v[0]->t == V_STR ? dict_get(obj, a.v[0]->s.p, a.v[0]->s.n) : NULL;
            return v ? v : a.v[1] ? a.v[1] : val_none();
        }
    }
    FAIL(c, call->pos, "the method %s of a %s is not supported", what, val_type_name(obj));
}

static value *call(ctx *c, const node *n)
{
    const node *f = n->a;
    if (f->k == E_ATTR)
        return method(c, n, eval(c, f->a), f->s, f->n);
    if (f->k != E_NAME || lookup(c, f->s, f->n)->t != V_UNDEF)
        FAIL(c, n->pos, "only methods and raise_exception(), namespace(), range() can be called");
    if (name_is(f->s, f->n, "raise_exception")) {
        call_args a = get_args(c, n, "raise_exception()", 1, 1, NULL);
        value *msg = to_str(c, a.v[0]);
        if (!msg->s.n || !msg->s.p[0]) /* an error always says something */
            jinja_fail(&c->f, JINJA_ERROR_RAISED, n->pos, "raise_exception() without a message");
        jinja_fail(&c->f, JINJA_ERROR_RAISED, n->pos, "%.*s",
                   (int)(msg->s.n < 400 ? msg->s.n : 400), msg->s.p);
    }
    if (name_is(f->s, f->n, "namespace")) {
        value *ns = val_new(&c->a, &c->f, V_NS);
        for (size_t i = 0; i < n->count; i++) {
            if (!n->kw[i])
                FAIL(c, n->items[i]->pos, "namespace(): only name=value arguments");
            dict_set(&c->a, &c->f, ns, str_of(c, n->kw[i], n->kwn[i]), eval(c, n->items[i]));
        }
        return ns;
    }
    if (name_is(f->s, f->n, "range")) {
        call_args a = get_args(c, n, "range()", 1, 3, NULL);
        int64_t v[3] = { 0, 0, 1 };
        for (size_t i = 0; i < a.n; i++)
            v[a.n == 1 ? 1 : i] = need(c, a.v[i], V_INT, n->pos, "range()")->i;
        if (!v[2])
            FAIL(c, n->pos, "range(): a step of 0");
        value *r = val_new(&c->a, &c->f, V_LIST);
        size_t count = 0;
        for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2], count++)
            step(c, n->pos);
        r->l.v = arena_alloc(&c->a, &c->f, (count + 1) * sizeof(value *));
        for (size_t i = 0; i < count; i++)
            r->l.v[i] = val_int(&c->a, &c->f, v[0] + (int64_t)i * v[2]);
        r->l.n = count;
        return r;
    }
    FAIL(c, n->pos, "the function '%.*s' is not defined", (int)(f->n < 40 ? f->n : 40), f->s);
}

static value *length(ctx *c, value *v, size_t pos)
{
    size_t n;
    if (v->t == V_STR)
        char_starts(c, v, &n);
    else if (v->t == V_LIST)
        n = v->l.n;
    else if (v->t == V_DICT)
        n = v->d.n;
    else if (v->t == V_UNDEF)
        n = 0;
    else
        FAIL(c, pos, "length of a %s", val_type_name(v));
    return val_int(&c->a, &c->f, (int64_t)n);
}

static value *filter(ctx *c, const node *n)
{
    value *v = eval(c, n->a);
    char what[64];
    snprintf(what, sizeof(what), "|%.*s", (int)(n->n < 40 ? n->n : 40), n->s);
    static const char *const none[] = { NULL };
    if (name_is(n->s, n->n, "default") || name_is(n->s, n->n, "d")) {
        static const char *const names[] = { "default_value", "boolean", NULL };
        call_args a = get_args(c, n, what, 0, 2, names);
        const bool use = v->t == V_UNDEF || (a.v[1] && val_truthy(a.v[1]) && !val_truthy(v));
        return use ? (a.v[0] ? a.v[0] : str_of(c, "", 0)) : v;
    }
    if (name_is(n->s, n->n, "tojson")) {
        static const char *const names[] = { "indent", NULL };
        call_args a = get_args(c, n, what, 0, 1, names);
        const int64_t indent =
            a.v[0] && a.v[0]->t != V_NONE ? need(c, a.v[0], V_INT, n->pos, what)->i : -1;
        if (indent > 16)
            FAIL(c, n->pos, "|tojson: an indent over 16");
        sbuf b = { .limit = JINJA_MAX_MEMORY };
        val_json(&c->a, &c->f, &b, v, (int)indent, 0, n->pos);
        return str_of(c, b.p, b.n);
    }
    if (name_is(n->s, n->n, "length") || name_is(n->s, n->n, "count")) {
        get_args(c, n, what, 0, 0, none);
        return length(c, v, n->pos);
    }
    if (name_is(n->s, n->n, "safe") || name_is(n->s, n->n, "list")) {
        get_args(c, n, what, 0, 0, none);
        if (n->s[0] == 'l' && v->t == V_DICT)
            return dict_view(c, v, 0);
        return v;
    }
    if (name_is(n->s, n->n, "string")) {
        get_args(c, n, what, 0, 0, none);
        return to_str(c, v);
    }
    if (name_is(n->s, n->n, "items")) {
        get_args(c, n, what, 0, 0, none);
        return v->t == V_UNDEF ? dict_view(c, val_new(&c->a, &c->f, V_DICT), 2)
                               : dict_view(c, need(c, v, V_DICT, n->pos, what), 2);
    }
    if (name_is(n->s, n->n, "first") || name_is(n->s, n->n, "last")) {
        get_args(c, n, what, 0, 0, none);
        need(c, v, V_LIST, n->pos, what);
        return !v->l.n ? val_undef() : v->l.v[n->s[0] == 'f' ? 0 : v->l.n - 1];
    }
    if (name_is(n->s, n->n, "join")) {
        static const char *const names[] = { "d", NULL };
        call_args a = get_args(c, n, what, 0, 1, names);
        const value *sep = a.v[0] ? need(c, a.v[0], V_STR, n->pos, what) : NULL;
        need(c, v, V_LIST, n->pos, what);
        sbuf b = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &b, "", 0);
        for (size_t i = 0; i < v->l.n; i++) {
            if (i && sep)
                sb_add(&c->a, &c->f, &b, sep->s.p, sep->s.n);
            val_write(&c->a, &c->f, &b, v->l.v[i], false);
        }
        return str_of(c, b.p, b.n);
    }
    /* the string filters: the methods of the same names (trim: strip) */
    static const char *const string_filters[] = { "trim",       "lower", "upper",
                                                  "capitalize", "title", "replace" };
    for (size_t k = 0; k < sizeof(string_filters) / sizeof(string_filters[0]); k++)
        if (name_is(n->s, n->n, string_filters[k]))
            return str_method(c, n, to_str(c, v), n->s, n->n, what);
    FAIL(c, n->pos, "the filter %s is not supported", what);
}

static value *test(ctx *c, const node *n)
{
    value *v = eval(c, n->a);
    bool r;
    const char *s = n->s;
    const size_t len = n->n;
    if (name_is(s, len, "defined") || name_is(s, len, "undefined"))
        r = (v->t != V_UNDEF) == (s[0] == 'd');
    else if (name_is(s, len, "none"))
        r = v->t == V_NONE;
    else if (name_is(s, len, "string"))
        r = v->t == V_STR;
    else if (name_is(s, len, "number") || name_is(s, len, "integer"))
        r = v->t == V_INT;
    else if (name_is(s, len, "boolean"))
        r = v->t == V_BOOL;
    else if (name_is(s, len, "true") || name_is(s, len, "false"))
        r = v->t == V_BOOL && v->b == (s[0] == 't');
    else if (name_is(s, len, "mapping"))
        r = v->t == V_DICT;
    else if (name_is(s, len, "sequence") || name_is(s, len, "iterable"))
        r = v->t == V_LIST || v->t == V_STR || v->t == V_DICT;
    else if (name_is(s, len, "even") || name_is(s, len, "odd"))
        r = need(c, v, V_INT, n->pos, "is even/odd")->i % 2 == (s[0] == 'o');
    else if (name_is(s, len, "equalto") || name_is(s, len, "eq") || name_is(s, len, "sameas")) {
        call_args a = get_args(c, n, "is equalto", 1, 1, NULL);
        r = val_eq(v, a.v[0]);
    } else
        FAIL(c, n->pos, "the test 'is %.*s' is not supported", (int)(len < 40 ? len : 40), s);
    if (n->count && !name_is(s, len, "equalto") && !name_is(s, len, "eq") &&
        !name_is(s, len, "sameas"))
        FAIL(c, n->pos, "the test 'is %.*s' takes no argument", (int)(len < 40 ? len : 40), s);
    return val_bool(r != n->neg);
}

static int64_t as_int(ctx *c, value *v, const node *n)
{
    if (v->t == V_BOOL)
        return v->b;
    if (v->t != V_INT)
        FAIL(c, n->pos, "'%.*s' of %s", (int)n->n, n->s, val_type_name(v));
    return v->i;
}

static value *contains(ctx *c, value *hay, value *x, size_t pos)
{
    if (hay->t == V_STR) {
        need(c, x, V_STR, pos, "'in' a string");
        return val_bool(!x->s.n || memmem(hay->s.p, hay->s.n, x->s.p, x->s.n));
    }
    if (hay->t == V_LIST) {
        for (size_t i = 0; i < hay->l.n; i++)
            if (val_eq(hay->l.v[i], x))
                return val_bool(true);
        return val_bool(false);
    }
    if (hay->t == V_DICT || hay->t == V_NS)
        return val_bool(x->t == V_STR && dict_get(hay, x->s.p, x->s.n));
    FAIL(c, pos, "'in' a %s", val_type_name(hay));
}

static value *arith(ctx *c, const node *n, value *a, value *b)
{
    const char op = n->s[0];
    if (op == '+' && a->t == V_STR && b->t == V_STR) {
        sbuf s = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &s, a->s.p, a->s.n);
        sb_add(&c->a, &c->f, &s, b->s.p, b->s.n);
        return str_of(c, s.p, s.n);
    }
    if (op == '+' && a->t == V_LIST && b->t == V_LIST) {
        value *r = val_new(&c->a, &c->f, V_LIST);
        r->l.v = arena_alloc(&c->a, &c->f, (a->l.n + b->l.n + 1) * sizeof(value *));
        if (a->l.n)
            memcpy(r->l.v, a->l.v, a->l.n * sizeof(value *));
        if (b->l.n)
            memcpy(r->l.v + a->l.n, b->l.v, b->l.n * sizeof(value *));
        r->l.n = a->l.n + b->l.n;
        return r;
    }
    if (op == '*' && a->t == V_STR && (b->t == V_INT || b->t == V_BOOL)) {
        sbuf s = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &s, "", 0);
        for (int64_t i = 0; i < as_int(c, b, n); i++)
            sb_add(&c->a, &c->f, &s, a->s.p, a->s.n);
        return str_of(c, s.p, s.n);
    }
    if ((a->t != V_INT && a->t != V_BOOL) || (b->t != V_INT && b->t != V_BOOL))
        FAIL(c, n->pos, "'%.*s' of %s and %s", (int)n->n, n->s, val_type_name(a), val_type_name(b));
    const int64_t x = as_int(c, a, n), y = as_int(c, b, n);
    int64_t r = 0;
    bool over = false;
    if (op == '+')
        over = __builtin_add_overflow(x, y, &r);
    else if (op == '-')
        over = __builtin_sub_overflow(x, y, &r);
    else if (op == '*')
        over = __builtin_mul_overflow(x, y, &r);
    else if (n->n == 1 && op == '/')
        FAIL(c, n->pos, "'/' gives a float: floats are not supported (use '//')");
    else {
        if (!y)
            FAIL(c, n->pos, "division by zero");
        if (x == INT64_MIN && y == -1)
            over = true;
        else {
            /* Python's floor division and modulo */
            int64_t q = x / y, m = x % y;
            if (m && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            r = op == '%' ? m : q;
        }
    }
    if (over)
        FAIL(c, n->pos, "an integer overflow");
    return val_int(&c->a, &c->f, r);
}

static value *binop(ctx *c, const node *n)
{
    value *a = eval(c, n->a), *b = eval(c, n->b);
    const char *op = n->s;
    if (name_is(op, n->n, "=="))
        return val_bool(val_eq(a, b));
    if (name_is(op, n->n, "!="))
        return val_bool(!val_eq(a, b));
    if (name_is(op, n->n, "in"))
        return contains(c, b, a, n->pos);
    if (name_is(op, n->n, "not in"))
        return val_bool(!contains(c, b, a, n->pos)->b);
    if (name_is(op, n->n, "~")) {
        sbuf s = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &s, "", 0);
        val_write(&c->a, &c->f, &s, a, false);
        val_write(&c->a, &c->f, &s, b, false);
        return str_of(c, s.p, s.n);
    }
    if (op[0] == '<' || op[0] == '>') {
        int cmp;
        if (a->t == V_STR && b->t == V_STR) {
            const size_t m = a->s.n < b->s.n ? a->s.n : b->s.n;
            cmp = memcmp(a->s.p, b->s.p, m);
            cmp = cmp ? cmp : (a->s.n > b->s.n) - (a->s.n < b->s.n);
        } else {
            const int64_t x = as_int(c, a, n), y = as_int(c, b, n);
            cmp = (x > y) - (x < y);
        }
        const bool eq = n->n == 2;
        return val_bool(op[0] == '<' ? (cmp < 0 || (eq && !cmp)) : (cmp > 0 || (eq && !cmp)));
    }
    if ((a->t == V_UNDEF || b->t == V_UNDEF))
        FAIL(c, n->pos, "'%.*s' of an undefined value", (int)n->n, op);
    return arith(c, n, a, b);
}

static value *eval(ctx *c, const node *n)
{
    if (++c->depth > 4 * JINJA_MAX_DEPTH)
        jinja_fail(&c->f, JINJA_ERROR_LIMIT, n->pos, "nested deeper than %d", JINJA_MAX_DEPTH);
    value *r;
    switch (n->k) {
    case E_LIT: r = n->lit; break;
    case E_NAME: r = lookup(c, n->s, n->n); break;
    case E_ATTR: r = attr(c, eval(c, n->a), n->s, n->n, n->pos); break;
    case E_ITEM: r = item(c, n); break;
    case E_SLICE: r = slice(c, n); break;
    case E_CALL: r = call(c, n); break;
    case E_FILTER: r = filter(c, n); break;
    case E_TEST: r = test(c, n); break;
    case E_NOT: r = val_bool(!val_truthy(eval(c, n->a))); break;
    case E_NEG: {
        value *v = eval(c, n->a);
        const int64_t i = as_int(c, v, &(node){ .pos = n->pos, .s = "-", .n = 1 });
        if (i == INT64_MIN)
            FAIL(c, n->pos, "an integer overflow");
        r = val_int(&c->a, &c->f, -i);
        break;
    }
    case E_BIN: r = binop(c, n); break;
    case E_AND:
        r = eval(c, n->a);
        r = val_truthy(r) ? eval(c, n->b) : r;
        break;
    case E_OR:
        r = eval(c, n->a);
        r = val_truthy(r) ? r : eval(c, n->b);
        break;
    case E_COND:
        r = val_truthy(eval(c, n->a)) ? eval(c, n->b) : n->c ? eval(c, n->c) : val_undef();
        break;
    case E_LIST:
        r = val_new(&c->a, &c->f, V_LIST);
        r->l.v = arena_alloc(&c->a, &c->f, (n->count + 1) * sizeof(value *));
        for (size_t i = 0; i < n->count; i++)
            r->l.v[i] = eval(c, n->items[i]);
        r->l.n = n->count;
        break;
    case E_DICT:
        r = val_new(&c->a, &c->f, V_DICT);
        for (size_t i = 0; i + 1 < n->count; i += 2) {
            value *k = eval(c, n->items[i]);
            if (k->t != V_STR)
                FAIL(c, n->items[i]->pos, "dict keys must be strings");
            dict_set(&c->a, &c->f, r, k, eval(c, n->items[i + 1]));
        }
        break;
    default: FAIL(c, n->pos, "not an expression");
    }
    c->depth--;
    return r;
}

static void run(ctx *c, const node *n);

static void push_scope(ctx *c, size_t pos)
{
    if (c->scopes == MAX_SCOPES)
        jinja_fail(&c->f, JINJA_ERROR_LIMIT, pos, "nested deeper than %d", JINJA_MAX_DEPTH);
    c->scope[c->scopes++] = val_new(&c->a, &c->f, V_DICT);
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
    value *seq = eval(c, n->a);
    value **items;
    size_t count;
    if (seq->t == V_LIST) {
        items = seq->l.v;
        count = seq->l.n;
    } else if (seq->t == V_DICT) {
        items = seq->d.k;
        count = seq->d.n;
    } else if (seq->t == V_STR) {
        const size_t *at = char_starts(c, seq, &count);
        items = arena_alloc(&c->a, &c->f, (count + 1) * sizeof(value *));
        for (size_t i = 0; i < count; i++)
            items[i] = str_of(c, seq->s.p + at[i], at[i + 1] - at[i]);
    } else if (seq->t == V_UNDEF) {
        items = NULL;
        count = 0;
    } else {
        FAIL(c, n->a->pos, "a %s is not iterable", val_type_name(seq));
    }
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
            step(c, n->pos);
            bind_turn(c, scope, keys, items[i], NULL, n->pos, n);
            if (val_truthy(eval(c, n->d)))
                kept[k++] = items[i];
        }
        st->items = kept;
        st->length = k;
    }
    value *loop = val_new(&c->a, &c->f, V_LOOP);
    loop->loop = st;
    for (st->index = 0; st->index < st->length; st->index++) {
        step(c, n->pos);
        bind_turn(c, scope, keys, st->items[st->index], loop, n->pos, n);
        run(c, n->b);
        if (c->flow == 1) {
            c->flow = 0;
            break;
        }
        c->flow = 0;
    }
    c->scopes--;
    if (!st->length && n->c)
        run(c, n->c);
}

static void run(ctx *c, const node *n)
{
    step(c, n->pos);
    switch (n->k) {
    case N_BODY:
        for (size_t i = 0; i < n->count && !c->flow; i++)
            run(c, n->items[i]);
        return;
    case N_TEXT: sb_add(&c->a, &c->f, &c->out, n->s, n->n); return;
    case N_OUT: val_write(&c->a, &c->f, &c->out, eval(c, n->a), false); return;
    case N_IF:
        if (val_truthy(eval(c, n->a)))
            run(c, n->b);
        else if (n->c)
            run(c, n->c);
        return;
    case N_FOR: for_loop(c, n); return;
    case N_SET: {
        value *v = eval(c, n->a);
        if (!n->s2) {
            bind(c, n->s, n->n, v);
            return;
        }
        value *ns = lookup(c, n->s, n->n);
        if (ns->t != V_NS)
            FAIL(c, n->pos, "set %.*s.%.*s: %.*s is not a namespace()", (int)n->n, n->s, (int)n->n2,
                 n->s2, (int)n->n, n->s);
        dict_set(&c->a, &c->f, ns, str_of(c, n->s2, n->n2), v);
        return;
    }
    case N_BREAK:
    case N_CONTINUE:
        if (c->scopes <= 2)
            FAIL(c, n->pos, "break or continue outside a loop");
        c->flow = n->k == N_BREAK ? 1 : 2;
        return;
    default: FAIL(c, n->pos, "not a statement");
    }
}

jinja_status jinja_render(const jinja_template *t, const cJSON *vars, char **out, size_t *out_len,
                          char *why, size_t cap)
{
    *out = NULL;
    *out_len = 0;
    ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, cap, "out of host memory");
        return JINJA_ERROR_MEMORY;
    }
    c->f = (jfail){ .why = why, .cap = cap, .src = t->src, .src_len = t->len };
    c->out = (sbuf){ .limit = JINJA_MAX_OUTPUT, .heap = true };
    jinja_status st = JINJA_OK;
    if (setjmp(c->f.jb)) {
        st = c->f.st;
        free(c->out.p);
    } else {
        if (vars && !cJSON_IsObject(vars))
            jinja_fail(&c->f, JINJA_ERROR_RENDER, 0, "the names must be a JSON object");
        c->scope[0] = vars ? val_from_json(&c->a, &c->f, vars) : val_new(&c->a, &c->f, V_DICT);
        c->scopes = 1;
        push_scope(c, 0);
        sb_add(&c->a, &c->f, &c->out, "", 0);
        run(c, t->root);
        *out = c->out.p;
        *out_len = c->out.n;
    }
    arena_free(&c->a);
    free(c);
    return st;
}
