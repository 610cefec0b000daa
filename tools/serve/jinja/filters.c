/* Jinja's filters on single values (x|name(args)): text, numbers, JSON,
 * defaults, as jinja2's default filters and transformers' tojson compute
 * them; those over sequences are in seq_filters.c. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

static const char *const no_names[] = { NULL };

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

/* transformers' tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
static value *tojson(ctx *c, value *v, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "ensure_ascii", "indent", "separators", "sort_keys",
                                         NULL };
    call_args a = get_args(c, call, first, what, 0, 4, names);
    json_style style = { .indent = -1,
                         .sort_keys = a.v[3] && val_truthy(a.v[3]),
                         .ascii = a.v[0] && val_truthy(a.v[0]) };
    if (a.v[1] && a.v[1]->t != V_NONE) {
        const int64_t indent = need_type(c, a.v[1], V_INT, call->pos, what)->i;
        if (indent > 16)
            FAIL(c, call->pos, "%s: an indent over 16", what);
        style.indent = indent < 0 ? 0 : (int)indent;
    }
    if (a.v[2] && a.v[2]->t != V_NONE) {
        if (need_type(c, a.v[2], V_LIST, call->pos, what)->l.n != 2)
            FAIL(c, call->pos, "%s: separators must be a pair of strings", what);
        style.item_sep = need_type(c, a.v[2]->l.v[0], V_STR, call->pos, what);
        style.key_sep = need_type(c, a.v[2]->l.v[1], V_STR, call->pos, what);
    }
    sbuf b = { .limit = JINJA_MAX_MEMORY };
    val_json(&c->a, &c->f, &b, v, &style, 0, call->pos);
    return str_of(c, b.p, b.n);
}

/* s without the whitespace around it (into text, NUL-terminated); false
 * when empty, too long or holding a NUL byte. */
static bool stripped(ctx *c, const value *s, char *text, size_t cap)
{
    size_t lo = 0, hi = s->s.n;
    while (lo < hi && is_space(s->s.p[lo]))
        lo++;
    while (hi > lo && is_space(s->s.p[hi - 1]))
        hi--;
    jinja_spend(&c->f, 1 + lo + (s->s.n - hi));
    if (hi == lo || hi - lo >= cap || memchr(s->s.p + lo, 0, hi - lo))
        return false;
    memcpy(text, s->s.p + lo, hi - lo);
    text[hi - lo] = 0;
    return true;
}

/* Python's int(s) of a string (digits, a sign, '_' between digits) */
static bool parse_int(ctx *c, const value *s, int64_t *out)
{
    char text[64];
    if (!stripped(c, s, text, sizeof(text)))
        return false;
    const char *p = text + (text[0] == '-' || text[0] == '+');
    int64_t v = 0; /* negative: INT64_MIN fits */
    if (!*p)
        return false;
    for (; *p; p++) {
        if (*p == '_' && p > text && isdigit((unsigned char)p[-1]) && isdigit((unsigned char)p[1]))
            continue;
        if (!isdigit((unsigned char)*p) || __builtin_mul_overflow(v, 10, &v) ||
            __builtin_sub_overflow(v, *p - '0', &v))
            return false;
    }
    if (text[0] != '-' && v == INT64_MIN)
        return false;
    *out = text[0] == '-' ? v : -v;
    return true;
}

/* Python's float(s) of a string */
static bool parse_float(ctx *c, const value *s, double *out)
{
    char text[64], *end;
    if (!stripped(c, s, text, sizeof(text)) || strpbrk(text, "xXpP")) /* no hexadecimal */
        return false;
    *out = strtod(text, &end);
    return !*end;
}

/* |int(default=0, base=10): int(x), else int(float(x)), else the default */
static value *to_int(ctx *c, value *v, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "default", "base", NULL };
    call_args a = get_args(c, call, first, what, 0, 2, names);
    if (a.v[1] && !(a.v[1]->t == V_INT && a.v[1]->i == 10))
        FAIL(c, call->pos, "%s: only base 10 is supported", what);
    int64_t i;
    double d = NAN;
    if (v->t == V_INT || v->t == V_BOOL)
        return val_int(&c->a, &c->f, v->t == V_INT ? v->i : v->b);
    if (v->t == V_STR && parse_int(c, v, &i))
        return val_int(&c->a, &c->f, i);
    if (v->t == V_FLOAT)
        d = v->f;
    else if (v->t == V_STR && !parse_float(c, v, &d))
        d = NAN;
    if (isnan(d) || isinf(d) || fabs(d) >= 0x1p63)
        return a.v[0] ? a.v[0] : val_int(&c->a, &c->f, 0);
    return val_int(&c->a, &c->f, (int64_t)d);
}

/* |float(default=0.0) */
static value *to_float(ctx *c, value *v, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "default", NULL };
    call_args a = get_args(c, call, first, what, 0, 1, names);
    double d;
    if (val_is_number(v))
        return val_float(&c->a, &c->f, val_as_double(v));
    if (v->t == V_STR && parse_float(c, v, &d))
        return val_float(&c->a, &c->f, d);
    return a.v[0] ? a.v[0] : val_float(&c->a, &c->f, 0);
}

/* |round(precision=0, method='common'): Python's round() (ties to even on
 * the exact binary value, as printf rounds), or math.floor/ceil */
static value *round_filter(ctx *c, value *v, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "precision", "method", NULL };
    call_args a = get_args(c, call, first, what, 0, 2, names);
    const int64_t precision = a.v[0] ? need_type(c, a.v[0], V_INT, call->pos, what)->i : 0;
    const value *how = a.v[1] ? need_type(c, a.v[1], V_STR, call->pos, what) : NULL;
    const bool common = !how || name_is(how->s.p, how->s.n, "common");
    if (!common && !name_is(how->s.p, how->s.n, "floor") && !name_is(how->s.p, how->s.n, "ceil"))
        FAIL(c, call->pos, "%s: the method must be common, ceil or floor", what);
    if (!val_is_number(v))
        FAIL(c, call->pos, "%s of a %s", what, val_type_name(v));
    if (precision < 0 || precision > 300)
        FAIL(c, call->pos, "%s: a precision from 0 to 300 expected", what);
    if (common && v->t != V_FLOAT) /* round(int, n) is the int */
        return val_int(&c->a, &c->f, v->t == V_INT ? v->i : v->b);
    const double x = val_as_double(v);
    if (isnan(x) || isinf(x))
        return val_float(&c->a, &c->f, x);
    if (!common) {
        const double scale = pow(10, (double)precision);
        return val_float(&c->a, &c->f,
                         (how->s.p[0] == 'f' ? floor(x * scale) : ceil(x * scale)) / scale);
    }
    char text[400];
    snprintf(text, sizeof(text), "%.*f", (int)precision, x);
    return val_float(&c->a, &c->f, strtod(text, NULL));
}

static value *abs_filter(ctx *c, value *v, const char *what, size_t pos)
{
    if (v->t == V_FLOAT)
        return val_float(&c->a, &c->f, fabs(v->f));
    const int64_t i = v->t == V_BOOL ? v->b : need_type(c, v, V_INT, pos, what)->i;
    if (i == INT64_MIN)
        FAIL(c, pos, "an integer overflow");
    return val_int(&c->a, &c->f, i < 0 ? -i : i);
}

/* Python's str.splitlines() boundaries: the length of the one at s[i], or 0 */
static size_t line_break(const char *s, size_t n, size_t i)
{
    const unsigned char ch = (unsigned char)s[i];
    if (ch == '\r')
        return i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
    if (ch == '\n' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e))
        return 1;
    if (ch == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] == 0x85)
        return 2;
    if (ch == 0xe2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
        ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9))
        return 3;
    return 0;
}

/* |indent(width=4, first=False, blank=False) as jinja2 3 does it: each
 * line after the first (the first too with first) gains the indent, empty
 * lines only with blank; lines joined by '\n' */
static value *indent(ctx *c, value *v, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "width", "first", "blank", NULL };
    call_args a = get_args(c, call, first, what, 0, 3, names);
    value *s = to_str(c, v), *by = a.v[0] ? a.v[0] : val_int(&c->a, &c->f, 4);
    if (by->t != V_STR) {
        const int64_t width = need_type(c, by, V_INT, call->pos, what)->i;
        if (width > 1024)
            FAIL(c, call->pos, "%s: a width over 1024", what);
        sbuf spaces = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &spaces, "", 0);
        for (int64_t i = 0; i < width; i++)
            sb_add(&c->a, &c->f, &spaces, " ", 1);
        by = str_of(c, spaces.p, spaces.n);
    }
    const bool at_first = a.v[1] && val_truthy(a.v[1]), blank = a.v[2] && val_truthy(a.v[2]);
    sbuf b = { .limit = JINJA_MAX_MEMORY }, text = { .limit = JINJA_MAX_MEMORY };
    sb_add(&c->a, &c->f, &b, "", 0);
    sb_add(&c->a, &c->f, &text, s->s.p, s->s.n);
    sb_add(&c->a, &c->f, &text, "\n", 1); /* jinja2's: a last line break is kept */
    size_t start = 0, line = 0;
    while (start < text.n) { /* each line of text.splitlines() */
        size_t end = start, brk = 0;
        while (end < text.n && !(brk = line_break(text.p, text.n, end)))
            end++;
        if (line)
            sb_add(&c->a, &c->f, &b, "\n", 1);
        if (line ? blank || end > start : at_first)
            sb_add(&c->a, &c->f, &b, by->s.p, by->s.n);
        sb_add(&c->a, &c->f, &b, text.p + start, end - start);
        count_step(c, call->pos);
        start = end + brk;
        line++;
    }
    return str_of(c, b.p, b.n);
}

/* |wordcount: the runs of word characters (letters, digits, '_'; any
 * character beyond ASCII counts as a letter) */
static value *wordcount(ctx *c, value *v)
{
    const value *s = to_str(c, v);
    jinja_spend(&c->f, s->s.n + 1);
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s->s.n; i++) {
        const unsigned char ch = (unsigned char)s->s.p[i];
        const bool word = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') ||
                          ((ch | 32) >= 'a' && (ch | 32) <= 'z');
        words += word && !in_word;
        in_word = word;
    }
    return val_int(&c->a, &c->f, words);
}

static value *default_filter(ctx *c, value *v, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "default_value", "boolean", NULL };
    call_args a = get_args(c, call, first, what, 0, 2, names);
    const bool use = v->t == V_UNDEF || (a.v[1] && val_truthy(a.v[1]) && !val_truthy(v));
    return use ? (a.v[0] ? a.v[0] : str_of(c, "", 0)) : v;
}

value *apply_filter(ctx *c, const char *name, size_t n, value *v, const node *call, size_t first)
{
    char what[64];
    snprintf(what, sizeof(what), "|%.*s", (int)(n < 40 ? n : 40), name);
    value *r = seq_filter(c, name, n, v, call, first, what);
    if (r)
        return r;
    if (name_is(name, n, "default") || name_is(name, n, "d"))
        return default_filter(c, v, call, first, what);
    if (name_is(name, n, "tojson"))
        return tojson(c, v, call, first, what);
    if (name_is(name, n, "int"))
        return to_int(c, v, call, first, what);
    if (name_is(name, n, "float"))
        return to_float(c, v, call, first, what);
    if (name_is(name, n, "round"))
        return round_filter(c, v, call, first, what);
    if (name_is(name, n, "indent"))
        return indent(c, v, call, first, what);
    /* the string filters: the methods of the same names (trim: strip) */
    static const char *const string_filters[] = { "trim", "lower", "upper", "capitalize",
                                                  "replace" };
    for (size_t k = 0; k < sizeof(string_filters) / sizeof(string_filters[0]); k++)
        if (name_is(name, n, string_filters[k]))
            return str_method(c, call, first, to_str(c, v), name, n, what);
    get_args(c, call, first, what, 0, 0, no_names);
    if (name_is(name, n, "length") || name_is(name, n, "count"))
        return length(c, v, call->pos);
    if (name_is(name, n, "safe"))
        return v;
    if (name_is(name, n, "string"))
        return to_str(c, v);
    if (name_is(name, n, "title"))
        return change_case(c, to_str(c, v), CASE_JINJA_TITLE);
    if (name_is(name, n, "abs"))
        return abs_filter(c, v, what, call->pos);
    if (name_is(name, n, "wordcount"))
        return wordcount(c, v);
    FAIL(c, call->pos, "the filter %s is not supported", what);
}

value *filter_expr(ctx *c, const node *n)
{
    return apply_filter(c, n->s, n->n, eval_expr(c, n->a), n, 0);
}
