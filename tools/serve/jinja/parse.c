/* The parser of the Jinja subset (jinja.h): the tokens of lex.c into a
 * syntax tree (jinja_impl.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lex.h"

static bool is_op(const parser *p, const char *op)
{
    return p->tok.k == T_OP && name_is(p->tok.s, p->tok.n, op);
}

static bool is_name(const parser *p, const char *name)
{
    return p->tok.k == T_NAME && name_is(p->tok.s, p->tok.n, name);
}

static void expect_op(parser *p, const char *op)
{
    if (!is_op(p, op))
        jinja_fail(p->f, JINJA_ERROR_SYNTAX, p->tok.pos, "'%s' expected", op);
    lex_next(p);
}

static token expect_name(parser *p)
{
    if (p->tok.k != T_NAME)
        lex_fail(p, p->tok.pos, "a name expected");
    const token t = p->tok;
    lex_next(p);
    return t;
}

static node *mk(parser *p, nkind k, size_t pos)
{
    node *n = arena_alloc(p->a, p->f, sizeof(*n));
    n->k = k;
    n->pos = pos;
    return n;
}

static void push(parser *p, node *n, node *item, const char *kw, size_t kwn)
{
    if (!(n->count & (n->count - 1)) || !n->count) {
        const size_t cap = n->count ? 2 * n->count : 1;
        node **items = arena_alloc(p->a, p->f, cap * sizeof(*items));
        const char **k = arena_alloc(p->a, p->f, cap * sizeof(*k));
        size_t *kn = arena_alloc(p->a, p->f, cap * sizeof(*kn));
        if (n->count) {
            memcpy(items, n->items, n->count * sizeof(*items));
            memcpy(k, n->kw, n->count * sizeof(*k));
            memcpy(kn, n->kwn, n->count * sizeof(*kn));
        }
        n->items = items;
        n->kw = k;
        n->kwn = kn;
    }
    n->items[n->count] = item;
    n->kw[n->count] = kw;
    n->kwn[n->count++] = kwn;
}

static void enter(parser *p)
{
    if (++p->depth > JINJA_MAX_DEPTH)
        jinja_fail(p->f, JINJA_ERROR_LIMIT, p->tok.pos, "nested deeper than %d", JINJA_MAX_DEPTH);
}

static node *expr(parser *p);

/* (args) of a call, filter or test: positional and name=value. */
static void args(parser *p, node *n)
{
    expect_op(p, "(");
    while (!is_op(p, ")")) {
        const char *kw = NULL;
        size_t kwn = 0;
        if (is_op(p, "*")) { /* f(*list): its items as positional arguments */
            lex_next(p);
            kw = "";
        } else if (p->tok.k == T_NAME) {
            const parser save = *p;
            const token t = expect_name(p);
            if (is_op(p, "=")) {
                lex_next(p);
                kw = t.s;
                kwn = t.n;
            } else {
                *p = save;
            }
        }
        push(p, n, expr(p), kw, kwn);
        if (!is_op(p, ")"))
            expect_op(p, ",");
    }
    lex_next(p);
}

static node *primary(parser *p)
{
    const token t = p->tok;
    node *n;
    if (t.k == T_NAME) {
        lex_next(p);
        n = mk(p, E_LIT, t.pos);
        if (name_is(t.s, t.n, "true") || name_is(t.s, t.n, "True"))
            n->lit = val_bool(true);
        else if (name_is(t.s, t.n, "false") || name_is(t.s, t.n, "False"))
            n->lit = val_bool(false);
        else if (name_is(t.s, t.n, "none") || name_is(t.s, t.n, "None"))
            n->lit = val_none();
        else {
            n->k = E_NAME;
            n->s = t.s;
            n->n = t.n;
        }
        return n;
    }
    if (t.k == T_STRING) {
        sbuf b = { .limit = (size_t)-1 / 2 };
        while (p->tok.k == T_STRING) { /* 'a' 'b' is 'ab' */
            sb_add(p->a, p->f, &b, p->tok.s, p->tok.n);
            lex_next(p);
        }
        n = mk(p, E_LIT, t.pos);
        n->lit = val_str(p->a, p->f, b.p ? b.p : "", b.n);
        return n;
    }
    if (t.k == T_INT || t.k == T_FLOAT) {
        lex_next(p);
        n = mk(p, E_LIT, t.pos);
        n->lit = t.k == T_INT ? val_int(p->a, p->f, t.i) : val_float(p->a, p->f, t.d);
        return n;
    }
    if (is_op(p, "(")) { /* (x), or a tuple: (), (x,), (x, y) */
        lex_next(p);
        node *tuple = mk(p, E_LIST, t.pos);
        tuple->neg = true;
        if (is_op(p, ")")) {
            lex_next(p);
            return tuple;
        }
        n = expr(p);
        if (is_op(p, ",")) {
            push(p, tuple, n, NULL, 0);
            while (is_op(p, ",")) {
                lex_next(p);
                if (is_op(p, ")"))
                    break;
                push(p, tuple, expr(p), NULL, 0);
            }
            n = tuple;
        }
        expect_op(p, ")");
        return n;
    }
    if (is_op(p, "[") || is_op(p, "{")) {
        const bool list = is_op(p, "[");
        lex_next(p);
        n = mk(p, list ? E_LIST : E_DICT, t.pos);
        while (!is_op(p, list ? "]" : "}")) {
            push(p, n, expr(p), NULL, 0);
            if (!list) {
                expect_op(p, ":");
                push(p, n, expr(p), NULL, 0);
            }
            if (!is_op(p, list ? "]" : "}"))
                expect_op(p, ",");
        }
        lex_next(p);
        return n;
    }
    lex_fail(p, t.pos,
             t.k == T_EOF || t.k == T_VAR_END || t.k == T_BLOCK_END ? "an expression expected"
                                                                    : "an unexpected token");
}

/* [a], [a:b:c] */
static node *subscript(parser *p, node *obj, size_t pos)
{
    node *bound[3] = { NULL, NULL, NULL };
    int colons = 0;
    for (;;) {
        if (is_op(p, "]"))
            break;
        if (is_op(p, ":")) {
            if (++colons > 2)
                lex_fail(p, p->tok.pos, "a slice has at most three parts");
            lex_next(p);
            continue;
        }
        if (bound[colons])
            lex_fail(p, p->tok.pos, "':' or ']' expected");
        bound[colons] = expr(p);
    }
    lex_next(p);
    if (!colons && !bound[0])
        lex_fail(p, pos, "an empty subscript");
    node *n = mk(p, colons ? E_SLICE : E_ITEM, pos);
    n->a = obj;
    n->b = bound[0];
    n->c = bound[1];
    n->d = bound[2];
    return n;
}

/* A node of kind k on operand named by the next token (attribute, filter, test). */
static node *named(parser *p, nkind k, size_t pos, node *operand)
{
    const token t = expect_name(p);
    node *n = mk(p, k, pos);
    n->a = operand;
    n->s = t.s;
    n->n = t.n;
    return n;
}

/* .name, [subscript] and (call) after n */
static node *postfix(parser *p, node *n)
{
    for (;;) {
        const size_t pos = p->tok.pos;
        if (is_op(p, ".") && p->at < p->len && isdigit((unsigned char)p->src[p->at])) {
            lex_next(p); /* x.0: x[0] */
            node *item = mk(p, E_ITEM, pos);
            item->a = n;
            item->b = primary(p);
            n = item;
        } else if (is_op(p, ".")) {
            lex_next(p);
            n = named(p, E_ATTR, pos, n);
        } else if (is_op(p, "[")) {
            lex_next(p);
            n = subscript(p, n, pos);
        } else if (is_op(p, "(")) {
            node *c = mk(p, E_CALL, pos);
            c->a = n;
            args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

/* Whether the current token begins a test's one argument written without
 * parentheses (x is divisibleby 3, x is sameas none), as jinja2 decides. */
static bool test_argument_follows(const parser *p)
{
    if (p->tok.k == T_NAME)
        return !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and");
    return p->tok.k == T_STRING || p->tok.k == T_INT || p->tok.k == T_FLOAT || is_op(p, "[") ||
           is_op(p, "{");
}

/* filters (x|f, x|f(a)) and tests (x is t, x is not t(a), x is t a) after n */
static node *filtered(parser *p, node *n)
{
    for (;;) {
        const size_t pos = p->tok.pos;
        if (is_op(p, "|")) {
            lex_next(p);
            node *f = named(p, E_FILTER, pos, n);
            if (is_op(p, "("))
                args(p, f);
            n = f;
        } else if (is_name(p, "is")) {
            lex_next(p);
            const bool neg = is_name(p, "not");
            if (neg)
                lex_next(p);
            node *t = named(p, E_TEST, pos, n);
            t->neg = neg;
            if (is_op(p, "("))
                args(p, t);
            else if (test_argument_follows(p))
                push(p, t, postfix(p, primary(p)), NULL, 0);
            n = t;
        } else if (is_op(p, "(")) {
            node *c = mk(p, E_CALL, pos);
            c->a = n;
            args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

static node *binary(parser *p, node *a, size_t pos, const char *op, node *b)
{
    node *n = mk(p, E_BIN, pos);
    n->a = a;
    n->b = b;
    n->s = op;
    n->n = strlen(op);
    return n;
}

/* -x and +x; as jinja2 parses them the filters after apply to the
 * negated value (-1|abs is 1) */
static node *unary_or_filtered(parser *p, bool with_filters)
{
    const size_t pos = p->tok.pos;
    node *n;
    if (is_op(p, "-") || is_op(p, "+")) {
        const bool neg = is_op(p, "-");
        lex_next(p);
        enter(p);
        n = mk(p, E_NEG, pos);
        n->neg = !neg; /* +x */
        n->a = unary_or_filtered(p, false);
        p->depth--;
        n = postfix(p, n);
    } else {
        n = postfix(p, primary(p));
    }
    return with_filters ? filtered(p, n) : n;
}

static node *unary(parser *p)
{
    return unary_or_filtered(p, true);
}

/* operand (op operand)*, left to right, ops NULL-terminated */
static node *left_assoc(parser *p, node *(*operand)(parser *), const char *const *ops)
{
    node *n = operand(p);
    for (;;) {
        const char *op = NULL;
        for (size_t i = 0; ops[i] && !op; i++)
            if (is_op(p, ops[i]) || is_name(p, ops[i]))
                op = ops[i];
        if (!op)
            return n;
        const size_t pos = p->tok.pos;
        lex_next(p);
        node *rhs = operand(p);
        if (!strcmp(op, "and") || !strcmp(op, "or")) {
            node *l = mk(p, op[0] == 'a' ? E_AND : E_OR, pos);
            l->a = n;
            l->b = rhs;
            n = l;
        } else {
            n = binary(p, n, pos, op, rhs);
        }
    }
}

static node *power(parser *p)
{
    static const char *const ops[] = { "**", NULL };
    return left_assoc(p, unary, ops);
}

static node *product(parser *p)
{
    static const char *const ops[] = { "*", "/", "//", "%", NULL };
    return left_assoc(p, power, ops);
}

static node *concat(parser *p)
{
    static const char *const ops[] = { "~", NULL };
    return left_assoc(p, product, ops);
}

static node *sum(parser *p)
{
    static const char *const ops[] = { "+", "-", NULL };
    return left_assoc(p, concat, ops);
}

static node *compare(parser *p)
{
    node *n = sum(p);
    for (;;) {
        const token t = p->tok;
        const char *op = NULL;
        if (is_op(p, "==") || is_op(p, "!=") || is_op(p, "<") || is_op(p, ">") || is_op(p, "<=") ||
            is_op(p, ">="))
            op = t.s;
        else if (is_name(p, "in"))
            op = "in";
        else if (is_name(p, "not")) {
            const parser save = *p;
            lex_next(p);
            if (!is_name(p, "in")) {
                *p = save;
                return n;
            }
            op = "not in";
        } else
            return n;
        lex_next(p);
        n = binary(p, n, t.pos, op, sum(p));
    }
}

static node *not_expr(parser *p)
{
    if (is_name(p, "not")) {
        node *n = mk(p, E_NOT, p->tok.pos);
        lex_next(p);
        enter(p);
        n->a = not_expr(p);
        p->depth--;
        return n;
    }
    return compare(p);
}

static node *and_expr(parser *p)
{
    static const char *const ops[] = { "and", NULL };
    return left_assoc(p, not_expr, ops);
}

static node *or_expr(parser *p)
{
    static const char *const ops[] = { "or", NULL };
    return left_assoc(p, and_expr, ops);
}

/* a if b else c */
static node *expr(parser *p)
{
    enter(p);
    node *n = or_expr(p);
    if (is_name(p, "if")) {
        node *c = mk(p, E_COND, p->tok.pos);
        lex_next(p);
        c->b = n;
        c->a = or_expr(p);
        if (is_name(p, "else")) {
            lex_next(p);
            c->c = expr(p);
        }
        n = c;
    }
    p->depth--;
    return n;
}

static void end_block(parser *p)
{
    if (p->tok.k != T_BLOCK_END)
        lex_fail(p, p->tok.pos, "'%}' expected");
    lex_next(p);
}

static node *body(parser *p, const char *const *ends);

/* if/elif after the keyword; ends at endif (consumed) */
static node *if_block(parser *p, size_t pos)
{
    static const char *const ends[] = { "elif", "else", "endif", NULL };
    node *n = mk(p, N_IF, pos);
    n->a = expr(p);
    end_block(p);
    n->b = body(p, ends);
    const token kw = p->tok;
    lex_next(p);
    if (name_is(kw.s, kw.n, "elif")) {
        enter(p);
        n->c = if_block(p, kw.pos);
        p->depth--;
    } else if (name_is(kw.s, kw.n, "else")) {
        static const char *const endif[] = { "endif", NULL };
        end_block(p);
        n->c = body(p, endif);
        lex_next(p);
        end_block(p);
    } else {
        end_block(p);
    }
    return n;
}

/* The names a for or set statement assigns: `a` or `a SEP b` (s, s2). */
static node *target(parser *p, nkind k, size_t pos, const char *sep)
{
    node *n = mk(p, k, pos);
    token t = expect_name(p);
    n->s = t.s;
    n->n = t.n;
    if (is_op(p, sep)) {
        lex_next(p);
        t = expect_name(p);
        n->s2 = t.s;
        n->n2 = t.n;
    }
    return n;
}

static node *for_block(parser *p, size_t pos)
{
    static const char *const ends[] = { "else", "endfor", NULL };
    node *n = target(p, N_FOR, pos, ",");
    if (!is_name(p, "in"))
        lex_fail(p, p->tok.pos, "'in' expected");
    lex_next(p);
    n->a = or_expr(p);
    if (is_name(p, "if")) {
        lex_next(p);
        n->d = expr(p);
    }
    if (is_name(p, "recursive"))
        lex_fail(p, p->tok.pos, "recursive loops are not supported");
    end_block(p);
    n->b = body(p, ends);
    const bool has_else = is_name(p, "else");
    lex_next(p);
    end_block(p);
    if (has_else) {
        static const char *const endfor[] = { "endfor", NULL };
        n->c = body(p, endfor);
        lex_next(p);
        end_block(p);
    }
    return n;
}

/* {% set x = expr %}, or {% set x %}body{% endset %} */
/* expr, or an implicit tuple: expr, expr... */
static node *expr_or_tuple(parser *p)
{
    node *n = expr(p);
    if (!is_op(p, ","))
        return n;
    node *tuple = mk(p, E_LIST, n->pos);
    tuple->neg = true;
    push(p, tuple, n, NULL, 0);
    while (is_op(p, ",")) {
        lex_next(p);
        push(p, tuple, expr(p), NULL, 0);
    }
    return tuple;
}

/* {% set x = expr %}, {% set a, b = expr %}, {% set ns.x = expr %}, or
 * {% set x %}body{% endset %} */
static node *set_stmt(parser *p, size_t pos)
{
    const bool parens = is_op(p, "(");
    if (parens)
        lex_next(p);
    node *n = target(p, N_SET, pos, ".");
    if (is_op(p, ",") && !n->s2) { /* several names: one each in kw */
        push(p, n, NULL, n->s, n->n);
        while (is_op(p, ",")) {
            lex_next(p);
            if (parens && is_op(p, ")"))
                break;
            const token t = expect_name(p);
            push(p, n, NULL, t.s, t.n);
        }
    }
    if (parens)
        expect_op(p, ")");
    if (is_op(p, "|"))
        lex_fail(p, p->tok.pos, "a filtered block set is not supported");
    if (p->tok.k == T_BLOCK_END) {
        static const char *const ends[] = { "endset", NULL };
        end_block(p);
        n->b = body(p, ends);
        lex_next(p);
        end_block(p);
        return n;
    }
    if (!is_op(p, "="))
        lex_fail(p, p->tok.pos, "'=' expected");
    lex_next(p);
    n->a = expr_or_tuple(p);
    end_block(p);
    return n;
}

/* (a, b=default): the parameters of macro m */
static void params(parser *p, node *m)
{
    expect_op(p, "(");
    bool defaults = false;
    while (!is_op(p, ")")) {
        const token param = expect_name(p);
        node *value = NULL;
        if (is_op(p, "=")) {
            lex_next(p);
            value = expr(p);
            defaults = true;
        } else if (defaults) {
            lex_fail(p, param.pos, "a parameter without a default after one with a default");
        }
        push(p, m, value, param.s, param.n);
        if (!is_op(p, ")"))
            expect_op(p, ",");
    }
    lex_next(p);
}

/* {% macro name(a, b=default) %}body{% endmacro %} */
static node *macro_block(parser *p, size_t pos)
{
    static const char *const ends[] = { "endmacro", NULL };
    node *n = mk(p, N_MACRO, pos);
    const token name = expect_name(p);
    n->s = name.s;
    n->n = name.n;
    params(p, n);
    end_block(p);
    n->b = body(p, ends);
    lex_next(p);
    if (p->tok.k == T_NAME) /* {% endmacro name %} */
        lex_next(p);
    end_block(p);
    return n;
}

/* {% call(params) m(args) %}body{% endcall %}: m's caller(args) renders the body */
static node *call_block(parser *p, size_t pos)
{
    static const char *const ends[] = { "endcall", NULL };
    node *n = mk(p, N_CALL_BLOCK, pos);
    n->c = mk(p, N_MACRO, pos);
    n->c->s = "caller";
    n->c->n = 6;
    if (is_op(p, "("))
        params(p, n->c);
    n->a = expr(p);
    if (n->a->k != E_CALL)
        lex_fail(p, n->a->pos, "{% call %} needs a macro call");
    end_block(p);
    n->c->b = body(p, ends);
    lex_next(p);
    end_block(p);
    return n;
}

/* {% filter f(args)|g %}body{% endfilter %}: the body's text through the filters */
static node *filter_block(parser *p, size_t pos)
{
    static const char *const ends[] = { "endfilter", NULL };
    node *text = mk(p, E_CAPTURE, pos), *out = mk(p, N_OUT, pos);
    node *f = named(p, E_FILTER, pos, text);
    if (is_op(p, "("))
        args(p, f);
    out->a = filtered(p, f);
    end_block(p);
    text->b = body(p, ends);
    lex_next(p);
    end_block(p);
    return out;
}

/* transformers' {% generation %}...{% endgeneration %}: it marks the
 * assistant's tokens; rendered as its body */
static node *generation_block(parser *p, size_t pos)
{
    (void)pos;
    static const char *const ends[] = { "endgeneration", NULL };
    end_block(p);
    node *n = body(p, ends);
    lex_next(p);
    end_block(p);
    return n;
}

/* Statements until one of ends (the block tag's keyword is left as the
 * current token) or, without ends, the end of the template. */
static node *body(parser *p, const char *const *ends)
{
    enter(p);
    node *b = mk(p, N_BODY, p->tok.pos);
    for (;;) {
        const token t = p->tok;
        if (t.k == T_EOF) {
            if (ends) {
                size_t last = 0;
                while (ends[last + 1])
                    last++;
                jinja_fail(p->f, JINJA_ERROR_SYNTAX, t.pos, "the template ends before {%% %s %%}",
                           ends[last]);
            }
            break;
        }
        if (t.k == T_TEXT) {
            node *n = mk(p, N_TEXT, t.pos);
            n->s = t.s;
            n->n = t.n;
            push(p, b, n, NULL, 0);
            lex_next(p);
            continue;
        }
        if (t.k == T_VAR_BEGIN) {
            lex_next(p);
            node *n = mk(p, N_OUT, t.pos);
            n->a = expr(p);
            if (p->tok.k != T_VAR_END)
                lex_fail(p, p->tok.pos, "'}}' expected");
            lex_next(p);
            push(p, b, n, NULL, 0);
            continue;
        }
        lex_next(p); /* {% */
        const token kw = p->tok;
        if (kw.k != T_NAME)
            lex_fail(p, kw.pos, "a statement name expected");
        for (size_t i = 0; ends && ends[i]; i++)
            if (name_is(kw.s, kw.n, ends[i])) {
                p->depth--;
                return b;
            }
        lex_next(p);
        static const struct {
            const char *name;
            node *(*parse)(parser *, size_t); /* after the keyword, to the block's end */
        } blocks[] = {
            { "if", if_block },
            { "for", for_block },
            { "set", set_stmt },
            { "macro", macro_block },
            { "call", call_block },
            { "filter", filter_block },
            { "generation", generation_block },
        };
        node *n = NULL;
        for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]) && !n; i++)
            if (name_is(kw.s, kw.n, blocks[i].name))
                n = blocks[i].parse(p, kw.pos);
        if (!n && (name_is(kw.s, kw.n, "break") || name_is(kw.s, kw.n, "continue"))) {
            n = mk(p, kw.s[0] == 'b' ? N_BREAK : N_CONTINUE, kw.pos);
            end_block(p);
        } else if (!n) {
            jinja_fail(p->f, JINJA_ERROR_SYNTAX, kw.pos, "{%% %.*s %%} is not supported",
                       (int)(kw.n < 40 ? kw.n : 40), kw.s);
        }
        push(p, b, n, NULL, 0);
    }
    p->depth--;
    return b;
}

jinja_template *jinja_parse(const char *src, size_t len, char *why, size_t cap)
{
    jinja_template *volatile t = calloc(1, sizeof(*t));
    char *copy = malloc(len + 1);
    if (!t || !copy) {
        free(t);
        free(copy);
        snprintf(why, cap, "out of host memory");
        return NULL;
    }
    memcpy(copy, src, len);
    /* Jinja drops one newline at the end (keep_trailing_newline off) */
    if (len && copy[len - 1] == '\n')
        len -= len > 1 && copy[len - 2] == '\r' ? 2 : 1;
    copy[len] = 0;
    t->src = copy;
    t->len = len;
    jfail f = { .why = why, .cap = cap, .src = copy, .src_len = len };
    parser p = { .src = copy, .len = len, .a = &t->a, .f = &f };
    if (setjmp(f.jb)) {
        jinja_free(t);
        return NULL;
    }
    lex_next(&p);
    t->root = body(&p, NULL);
    return t;
}

void jinja_free(jinja_template *t)
{
    if (!t)
        return;
    arena_free(&t->a);
    free(t->src);
    free(t);
}
