/* Jinja's tests (`x is name`, `x is not name(arg)`), as its default
 * environment has them, and the `in` operator they share. */
#include <stdio.h>
#include <string.h>

#include "render.h"

value *contains_value(ctx *c, value *hay, value *x, size_t pos)
{
    if (hay->t == V_STR) {
        need_type(c, x, V_STR, pos, "'in' a string");
        jinja_spend(&c->f, hay->s.n + x->s.n);
        return val_bool(!x->s.n || memmem(hay->s.p, hay->s.n, x->s.p, x->s.n));
    }
    if (hay->t == V_LIST) {
        for (size_t i = 0; i < hay->l.n; i++)
            if (val_eq(&c->f, hay->l.v[i], x))
                return val_bool(true);
        return val_bool(false);
    }
    if (hay->t == V_DICT || hay->t == V_NS)
        return val_bool(x->t == V_STR && dict_get(&c->f, hay, x->s.p, x->s.n));
    if (hay->t == V_UNDEF) /* iterates as nothing */
        return val_bool(false);
    FAIL(c, pos, "'in' a %s", val_type_name(hay));
}

/* str.islower() (upper: isupper()) for ASCII letters: a cased letter and
 * none of the other case */
static bool one_case(const value *s, bool upper)
{
    bool cased = false;
    for (size_t i = 0; i < s->s.n; i++) {
        const char ch = s->s.p[i];
        if (ch >= 'a' && ch <= 'z') {
            if (upper)
                return false;
            cased = true;
        } else if (ch >= 'A' && ch <= 'Z') {
            if (!upper)
                return false;
            cased = true;
        }
    }
    return cased;
}

/* The tests that compare with an argument: the comparison's operator, or NULL. */
static const char *comparison(const char *name, size_t n)
{
    static const char *const names[][2] = {
        { "eq", "==" }, { "equalto", "==" },    { "==", "==" }, { "sameas", "==" },
        { "ne", "!=" }, { "!=", "!=" },         { "lt", "<" },  { "lessthan", "<" },
        { "<", "<" },   { "le", "<=" },         { "<=", "<=" }, { "gt", ">" },
        { ">", ">" },   { "greaterthan", ">" }, { "ge", ">=" }, { ">=", ">=" },
        { "in", "in" }, { "divisibleby", "%" },
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        if (name_is(name, n, names[k][0]))
            return names[k][1];
    return NULL;
}

static bool compared(ctx *c, const char *op, value *v, value *arg, size_t pos)
{
    if (op[0] == '=' || op[0] == '!')
        return val_eq(&c->f, v, arg) == (op[0] == '=');
    if (op[0] == 'i')
        return contains_value(c, arg, v, pos)->b;
    if (op[0] == '%') {
        const int64_t d = need_type(c, arg, V_INT, pos, "is divisibleby")->i;
        if (!d)
            FAIL(c, pos, "is divisibleby: division by zero");
        return d == -1 || need_type(c, v, V_INT, pos, "is divisibleby")->i % d == 0;
    }
    const int cmp = compare_values(c, v, arg, pos, op);
    return op[0] == '<' ? cmp < 0 || (op[1] && !cmp) : cmp > 0 || (op[1] && !cmp);
}

bool apply_test(ctx *c, const char *s, size_t len, value *v, const node *call, size_t first)
{
    char what[64];
    snprintf(what, sizeof(what), "is %.*s", (int)(len < 40 ? len : 40), s);
    const char *op = comparison(s, len);
    if (op)
        return compared(c, op, v, get_args(c, call, first, what, 1, 1, NULL).v[0], call->pos);
    get_args(c, call, first, what, 0, 0, NULL);
    if (name_is(s, len, "defined") || name_is(s, len, "undefined"))
        return (v->t != V_UNDEF) == (s[0] == 'd');
    if (name_is(s, len, "none"))
        return v->t == V_NONE;
    if (name_is(s, len, "string"))
        return v->t == V_STR;
    if (name_is(s, len, "number"))
        return val_is_number(v);
    if (name_is(s, len, "integer"))
        return v->t == V_INT;
    if (name_is(s, len, "float"))
        return v->t == V_FLOAT;
    if (name_is(s, len, "boolean"))
        return v->t == V_BOOL;
    if (name_is(s, len, "true") || name_is(s, len, "false"))
        return v->t == V_BOOL && v->b == (s[0] == 't');
    if (name_is(s, len, "mapping"))
        return v->t == V_DICT;
    if (name_is(s, len, "sequence") || name_is(s, len, "iterable")) /* Undefined: empty */
        return v->t == V_LIST || v->t == V_STR || v->t == V_DICT || v->t == V_UNDEF;
    if (name_is(s, len, "callable")) /* Undefined is: calling it is the error */
        return v->t == V_FUNC || v->t == V_UNDEF;
    if (name_is(s, len, "lower") || name_is(s, len, "upper")) {
        jinja_spend(&c->f, need_type(c, v, V_STR, call->pos, what)->s.n + 1);
        return one_case(v, s[0] == 'u');
    }
    if (name_is(s, len, "even") || name_is(s, len, "odd")) {
        const int64_t i = v->t == V_BOOL ? v->b : need_type(c, v, V_INT, call->pos, what)->i;
        return (i % 2 != 0) == (s[0] == 'o');
    }
    FAIL(c, call->pos, "the test '%s' is not supported", what);
}

value *test_expr(ctx *c, const node *n)
{
    const bool r = apply_test(c, n->s, n->n, eval_expr(c, n->a), n, 0);
    return val_bool(r != n->neg);
}
