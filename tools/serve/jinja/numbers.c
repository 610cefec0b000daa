/* Python's arithmetic and order as Jinja's operators apply them: integers
 * stay integers (bounded to 64 bits: an overflow is an error), `/` and any
 * float make floats, `//` and `%` floor as Python does; strings and lists
 * add, strings repeat. */
#include <math.h>
#include <string.h>

#include "render.h"

static int64_t as_int(const value *v)
{
    return v->t == V_BOOL ? v->b : v->i;
}

static bool is_int(const value *v)
{
    return v->t == V_INT || v->t == V_BOOL;
}

__attribute__((noreturn)) static void type_error(ctx *c, const node *n, const value *a,
                                                 const value *b)
{
    FAIL(c, n->pos, "'%.*s' of %s and %s", (int)n->n, n->s, val_type_name(a), val_type_name(b));
}

static value *joined(ctx *c, value *a, value *b)
{
    if (a->t == V_STR) {
        sbuf s = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &s, a->s.p, a->s.n);
        sb_add(&c->a, &c->f, &s, b->s.p, b->s.n);
        return str_of(c, s.p, s.n);
    }
    value *r = new_list(c, a->l.n + b->l.n);
    if (a->l.n)
        memcpy(r->l.v, a->l.v, a->l.n * sizeof(value *));
    if (b->l.n)
        memcpy(r->l.v + a->l.n, b->l.v, b->l.n * sizeof(value *));
    r->l.n = a->l.n + b->l.n;
    return r;
}

static value *int_op(ctx *c, const node *n, int64_t x, int64_t y)
{
    const char op = n->s[0];
    int64_t r = 0;
    bool over = false;
    if (op == '+')
        over = __builtin_add_overflow(x, y, &r);
    else if (op == '-')
        over = __builtin_sub_overflow(x, y, &r);
    else if (op == '*' && n->n == 1)
        over = __builtin_mul_overflow(x, y, &r);
    else if (op == '*') { /* ** with y >= 0, by squaring */
        int64_t base = x;
        r = 1;
        for (int64_t e = y; e > 0 && !over;) {
            if (e & 1)
                over = __builtin_mul_overflow(r, base, &r);
            e >>= 1;
            if (e && !over)
                over = __builtin_mul_overflow(base, base, &base);
        }
    } else {
        if (!y)
            FAIL(c, n->pos, "division by zero");
        if (x == INT64_MIN && y == -1)
            over = true;
        else { /* Python's floor division and modulo */
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

static value *float_op(ctx *c, const node *n, double x, double y)
{
    const char op = n->s[0];
    double r;
    if (op == '+')
        r = x + y;
    else if (op == '-')
        r = x - y;
    else if (op == '*' && n->n == 1)
        r = x * y;
    else if (op == '*') {
        if (x == 0 && y < 0)
            FAIL(c, n->pos, "division by zero");
        if (x < 0 && y != floor(y))
            FAIL(c, n->pos, "'**' of a negative number to a fractional power");
        r = pow(x, y);
    } else {
        if (y == 0)
            FAIL(c, n->pos, "division by zero");
        if (op == '/' && n->n == 1)
            r = x / y;
        else { /* Python's float divmod */
            double mod = fmod(x, y), div = (x - mod) / y;
            if (mod) {
                if ((y < 0) != (mod < 0)) {
                    mod += y;
                    div -= 1.0;
                }
            } else {
                mod = copysign(0.0, y);
            }
            double floordiv = copysign(0.0, x / y);
            if (div) {
                floordiv = floor(div);
                if (div - floordiv > 0.5)
                    floordiv += 1.0;
            }
            r = op == '%' ? mod : floordiv;
        }
    }
    return val_float(&c->a, &c->f, r);
}

value *arith_op(ctx *c, const node *n, value *a, value *b)
{
    const char op = n->s[0];
    if (op == '+' && a->t == b->t && (a->t == V_STR || a->t == V_LIST))
        return joined(c, a, b);
    if (op == '*' && n->n == 1 && a->t == V_STR && is_int(b)) {
        const uint64_t times = as_int(b) > 0 ? (uint64_t)as_int(b) : 0;
        uint64_t units; /* each copy paid, an empty string's too */
        jinja_spend(&c->f, __builtin_mul_overflow(times, a->s.n + 1, &units) || units > SIZE_MAX
                               ? SIZE_MAX
                               : (size_t)units);
        sbuf s = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &s, "", 0);
        for (int64_t i = 0; i < as_int(b); i++)
            sb_add(&c->a, &c->f, &s, a->s.p, a->s.n);
        return str_of(c, s.p, s.n);
    }
    if (!val_is_number(a) || !val_is_number(b))
        type_error(c, n, a, b);
    const bool true_div = op == '/' && n->n == 1, int_pow = op == '*' && n->n == 2;
    if (is_int(a) && is_int(b) && !true_div && !(int_pow && as_int(b) < 0))
        return int_op(c, n, as_int(a), as_int(b));
    return float_op(c, n, val_as_double(a), val_as_double(b));
}

value *negate_value(ctx *c, value *v, size_t pos)
{
    if (v->t == V_FLOAT)
        return val_float(&c->a, &c->f, -v->f);
    if (!is_int(v))
        FAIL(c, pos, "'-' of %s", val_type_name(v));
    if (as_int(v) == INT64_MIN)
        FAIL(c, pos, "an integer overflow");
    return val_int(&c->a, &c->f, -as_int(v));
}

value *plus_value(ctx *c, value *v, size_t pos)
{
    if (!val_is_number(v))
        FAIL(c, pos, "'+' of %s", val_type_name(v));
    return v->t == V_BOOL ? val_int(&c->a, &c->f, v->b) : v;
}

int compare_values(ctx *c, value *a, value *b, size_t pos, const char *op)
{
    if (a->t == V_STR && b->t == V_STR) {
        const size_t m = a->s.n < b->s.n ? a->s.n : b->s.n;
        jinja_spend(&c->f, m + 1);
        const int cmp = memcmp(a->s.p, b->s.p, m);
        return cmp ? (cmp > 0) - (cmp < 0) : (a->s.n > b->s.n) - (a->s.n < b->s.n);
    }
    if (is_int(a) && is_int(b))
        return (as_int(a) > as_int(b)) - (as_int(a) < as_int(b));
    if (!val_is_number(a) || !val_is_number(b))
        FAIL(c, pos, "'%s' of %s and %s", op, val_type_name(a), val_type_name(b));
    const double x = val_as_double(a), y = val_as_double(b);
    return (x > y) - (x < y);
}
