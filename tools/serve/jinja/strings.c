/* The methods of strings (strip, split, startswith, replace...) and of
 * dicts (items, keys, values, get) that chat templates call, as Python's
 * str and dict have them. */
#include <stdio.h>
#include <string.h>

#include "render.h"

bool is_space(char ch)
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
    jinja_spend(&c->f, 1 + lo + (s->s.n - hi)); /* the bytes read, as many at most as it holds */
    return str_of(c, s->s.p + lo, hi - lo);
}

value *change_case(ctx *c, value *s, letter_case how)
{
    value *r = str_of(c, s->s.p, s->s.n);
    char *p = (char *)r->s.p;
    bool word_start = true;
    for (size_t i = 0; i < r->s.n; i++) {
        const char ch = p[i];
        const bool alpha = (ch | 32) >= 'a' && (ch | 32) <= 'z';
        const bool up = how == CASE_UPPER || (how == CASE_CAPITALIZE && i == 0) ||
                        (how >= CASE_TITLE && word_start);
        if (alpha)
            p[i] = up ? (char)(ch & ~32) : (char)(ch | 32);
        if (how == CASE_JINJA_TITLE) /* jinja2's title: words begin after spaces and -({[< */
            word_start = is_space(ch) || (ch && strchr("-({[<", ch));
        else /* str.title(): after any character that is not a letter */
            word_start = !alpha && !(ch & 0x80);
    }
    return r;
}

static value *split(ctx *c, value *s, const value *sep, int64_t max, size_t pos)
{
    if (sep && !sep->s.n)
        FAIL(c, pos, "split: an empty separator");
    jinja_spend(&c->f, s->s.n + 1); /* one scan in all */
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
        count_step(c, pos);
        if (sep && start > s->s.n)
            break;
    }
    return r;
}

/* s.replace(from, to, count) (count < 0: all) */
static value *replace(ctx *c, value *s, value *from, value *to, int64_t count)
{
    sbuf b = { .limit = JINJA_MAX_MEMORY };
    sb_add(&c->a, &c->f, &b, "", 0);
    if (!from->s.n) { /* to before each character and at the end */
        size_t chars;
        const size_t *at = char_starts(c, s, &chars);
        for (size_t k = 0; k <= chars; k++) {
            if (count < 0 || (int64_t)k < count)
                sb_add(&c->a, &c->f, &b, to->s.p, to->s.n);
            if (k < chars)
                sb_add(&c->a, &c->f, &b, s->s.p + at[k], at[k + 1] - at[k]);
        }
        return str_of(c, b.p, b.n);
    }
    jinja_spend(&c->f, s->s.n + 1); /* one scan in all */
    size_t i = 0;
    for (int64_t done = 0; count < 0 || done < count; done++) {
        const char *hit = memmem(s->s.p + i, s->s.n - i, from->s.p, from->s.n);
        if (!hit)
            break;
        sb_add(&c->a, &c->f, &b, s->s.p + i, (size_t)(hit - s->s.p) - i);
        sb_add(&c->a, &c->f, &b, to->s.p, to->s.n);
        i = (size_t)(hit - s->s.p) + from->s.n;
    }
    sb_add(&c->a, &c->f, &b, s->s.p + i, s->s.n - i);
    return str_of(c, b.p, b.n);
}

value *dict_view(ctx *c, value *d, int which) /* 0: keys, 1: values, 2: items */
{
    value *r = new_list(c, d->d.n);
    r->l.n = d->d.n;
    for (size_t i = 0; i < d->d.n; i++) {
        if (which < 2) {
            r->l.v[i] = which ? d->d.v[i] : d->d.k[i];
            continue;
        }
        value *pair = new_list(c, 2);
        pair->l.tuple = true; /* items() gives (key, value) tuples */
        pair->l.v[0] = d->d.k[i];
        pair->l.v[1] = d->d.v[i];
        pair->l.n = 2;
        r->l.v[i] = pair;
    }
    return r;
}

/* Which of names (NULL-terminated) a method without arguments is: -1 for none. */
static int no_arg_method(ctx *c, const node *call, size_t first, const char *what, const char *name,
                         size_t n, const char *const *names)
{
    for (int k = 0; names[k]; k++)
        if (name_is(name, n, names[k])) {
            get_args(c, call, first, what, 0, 0, NULL);
            return k;
        }
    return -1;
}

/* The string methods (filters too: trim is strip); NULL for another name. */
value *str_method(ctx *c, const node *call, size_t first, value *obj, const char *name, size_t n,
                  const char *what)
{
    static const char *const none[] = { NULL }, *const chars_name[] = { "chars", NULL };
    const bool strips = name_is(name, n, "strip") || name_is(name, n, "lstrip") ||
                        name_is(name, n, "rstrip") || name_is(name, n, "trim");
    if (strips) {
        call_args a = get_args(c, call, first, what, 0, 1, chars_name);
        const value *chars =
            a.v[0] && a.v[0]->t != V_NONE ? need_type(c, a.v[0], V_STR, call->pos, what) : NULL;
        return strip(c, obj, chars, name[0] == 'l' ? 1 : name[0] == 'r' ? 2 : 3);
    }
    if (name_is(name, n, "startswith") || name_is(name, n, "endswith")) {
        call_args a = get_args(c, call, first, what, 1, 1, none);
        const value *x = need_type(c, a.v[0], V_STR, call->pos, what);
        jinja_spend(&c->f, x->s.n + 1);
        if (x->s.n > obj->s.n)
            return val_bool(false);
        const char *at = name[0] == 's' ? obj->s.p : obj->s.p + obj->s.n - x->s.n;
        return val_bool(!memcmp(at, x->s.p, x->s.n));
    }
    if (name_is(name, n, "split")) {
        static const char *const names[] = { "sep", "maxsplit", NULL };
        call_args a = get_args(c, call, first, what, 0, 2, names);
        const value *sep =
            a.v[0] && a.v[0]->t != V_NONE ? need_type(c, a.v[0], V_STR, call->pos, what) : NULL;
        return split(c, obj, sep, a.v[1] ? need_type(c, a.v[1], V_INT, call->pos, what)->i : -1,
                     call->pos);
    }
    static const char *const cases[] = { "lower", "upper", "capitalize", "title", NULL };
    const int k = no_arg_method(c, call, first, what, name, n, cases);
    if (k >= 0)
        return change_case(c, obj, k);
    if (name_is(name, n, "replace")) {
        static const char *const names[] = { "old", "new", "count", NULL };
        call_args a = get_args(c, call, first, what, 2, 3, names);
        const int64_t count =
            a.v[2] && a.v[2]->t != V_NONE ? need_type(c, a.v[2], V_INT, call->pos, what)->i : -1;
        return replace(c, obj, need_type(c, a.v[0], V_STR, call->pos, what),
                       need_type(c, a.v[1], V_STR, call->pos, what), count);
    }
    return NULL;
}

value *call_method(ctx *c, const node *call, value *obj, const char *name, size_t n)
{
    char what[64];
    snprintf(what, sizeof(what), ".%.*s()", (int)(n < 40 ? n : 40), name);
    value *r = obj->t == V_STR && !name_is(name, n, "trim")
                   ? str_method(c, call, 0, obj, name, n, what)
                   : NULL;
    if (r)
        return r;
    if (obj->t == V_DICT) {
        static const char *const views[] = { "keys", "values", "items", NULL };
        const int k = no_arg_method(c, call, 0, what, name, n, views);
        if (k >= 0)
            return dict_view(c, obj, k);
        if (name_is(name, n, "get")) {
            call_args a = get_args(c, call, 0, what, 1, 2, NULL);
            value *v = a.v[0]->t == V_STR ? dict_get(&c->f, obj, a.v[0]->s.p, a.v[0]->s.n) : NULL;
            return v ? v : a.v[1] ? a.v[1] : val_none();
        }
    }
    FAIL(c, call->pos, "the method %s of a %s is not supported", what, val_type_name(obj));
}
