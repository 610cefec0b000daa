/* Jinja's filters over sequences (map, select, selectattr, unique, sort,
 * join...), as jinja2's default filters compute them. Where jinja2 gives a
 * generator these give the list it would yield. */
#include <string.h>

#include "render.h"

static const char *const no_names[] = { NULL };

/* jinja2's attribute getter: "a.b.0" reads .a, then .b, then [0] */
static value *attr_path(ctx *c, value *v, const value *path, size_t pos)
{
    jinja_spend(&c->f, path->s.n + 1);
    size_t start = 0;
    while (start <= path->s.n) {
        const char *dot = memchr(path->s.p + start, '.', path->s.n - start);
        const size_t end = dot ? (size_t)(dot - path->s.p) : path->s.n;
        const char *part = path->s.p + start;
        const size_t len = end - start;
        size_t digits = 0;
        while (digits < len && part[digits] >= '0' && part[digits] <= '9')
            digits++;
        if (len && digits == len && len < 10 && v->t == V_LIST) {
            size_t i = 0;
            for (size_t k = 0; k < len; k++)
                i = 10 * i + (size_t)(part[k] - '0');
            v = i < v->l.n ? v->l.v[i] : val_undef();
        } else {
            v = get_attr(c, v, part, len, pos, false);
        }
        start = end + 1;
    }
    return v;
}

/* the key of an item that unique, sort, min and max compare: the
 * attribute's, strings lowercased unless case_sensitive */
static value *sort_key(ctx *c, value *v, const value *attribute, bool case_sensitive, size_t pos)
{
    if (attribute)
        v = attr_path(c, v, attribute, pos);
    return v->t == V_STR && !case_sensitive ? change_case(c, v, CASE_LOWER) : v;
}

static value *list_of(ctx *c, value **items, size_t n)
{
    value *r = new_list(c, n);
    if (n)
        memcpy(r->l.v, items, n * sizeof(*items));
    r->l.n = n;
    return r;
}

/* map(attribute=name, default=d) or map(filter, args...) */
static value *map(ctx *c, value *seq, const node *call, size_t first, const char *what)
{
    bool by_attribute = false;
    for (size_t i = first; i < call->count; i++)
        by_attribute |= call->kw[i] && name_is(call->kw[i], call->kwn[i], "attribute");
    value *r = new_list(c, seq->l.n);
    if (by_attribute) {
        static const char *const names[] = { "attribute", "default", NULL };
        call_args a = get_args(c, call, first, what, 1, 2, names);
        const value *path = need_type(c, a.v[0], V_STR, call->pos, what);
        for (size_t i = 0; i < seq->l.n; i++) {
            value *v = attr_path(c, seq->l.v[i], path, call->pos);
            r->l.v[r->l.n++] = v->t == V_UNDEF && a.v[1] ? a.v[1] : v;
        }
        return r;
    }
    if (first >= call->count || call->kw[first])
        FAIL(c, call->pos, "%s: a filter's name or attribute= expected", what);
    const value *name = need_type(c, eval_expr(c, call->items[first]), V_STR, call->pos, what);
    for (size_t i = 0; i < seq->l.n; i++) {
        count_step(c, call->pos);
        r->l.v[r->l.n++] = apply_filter(c, name->s.p, name->s.n, seq->l.v[i], call, first + 1);
    }
    return r;
}

/* select/reject(test, args...) and selectattr/rejectattr(attribute, test, args...) */
static value *select(ctx *c, value *seq, const node *call, size_t first, const char *what,
                     bool keep, bool by_attribute)
{
    const value *path = NULL, *test_name = NULL;
    size_t arg = first;
    if (by_attribute) {
        if (arg >= call->count)
            FAIL(c, call->pos, "%s: an attribute expected", what);
        path = need_type(c, eval_expr(c, call->items[arg++]), V_STR, call->pos, what);
    }
    if (arg < call->count)
        test_name = need_type(c, eval_expr(c, call->items[arg++]), V_STR, call->pos, what);
    value *r = new_list(c, seq->l.n);
    for (size_t i = 0; i < seq->l.n; i++) {
        count_step(c, call->pos);
        value *v = path ? attr_path(c, seq->l.v[i], path, call->pos) : seq->l.v[i];
        const bool pass =
            test_name ? apply_test(c, test_name->s.p, test_name->s.n, v, call, arg) : val_truthy(v);
        if (pass == keep)
            r->l.v[r->l.n++] = seq->l.v[i];
    }
    return r;
}

static value *unique(ctx *c, value *seq, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "case_sensitive", "attribute", NULL };
    call_args a = get_args(c, call, first, what, 0, 2, names);
    const bool case_sensitive = a.v[0] && val_truthy(a.v[0]);
    const value *path = a.v[1] ? need_type(c, a.v[1], V_STR, call->pos, what) : NULL;
    value *r = new_list(c, seq->l.n), **keys = new_list(c, seq->l.n)->l.v;
    for (size_t i = 0; i < seq->l.n; i++) {
        value *key = sort_key(c, seq->l.v[i], path, case_sensitive, call->pos);
        bool seen = false;
        for (size_t k = 0; k < r->l.n && !seen; k++) {
            count_step(c, call->pos);
            seen = val_eq(&c->f, keys[k], key);
        }
        if (!seen) {
            keys[r->l.n] = key;
            r->l.v[r->l.n++] = seq->l.v[i];
        }
    }
    return r;
}

/* A stable insertion sort of items by keys (each comparison a step). */
static void sort_by(ctx *c, value **items, value **keys, size_t n, bool reverse, size_t pos)
{
    for (size_t i = 1; i < n; i++) {
        value *item = items[i], *key = keys[i];
        size_t k = i;
        for (; k > 0; k--) {
            count_step(c, pos);
            /* as Python compares jinja2's [key] lists: equal keys first */
            const int cmp =
                val_eq(&c->f, keys[k - 1], key) ? 0 : compare_values(c, keys[k - 1], key, pos, "<");
            if (reverse ? cmp >= 0 : cmp <= 0)
                break;
            items[k] = items[k - 1];
            keys[k] = keys[k - 1];
        }
        items[k] = item;
        keys[k] = key;
    }
}

/* sort(reverse=False, case_sensitive=False, attribute=None) */
static value *sort(ctx *c, value *seq, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "reverse", "case_sensitive", "attribute", NULL };
    call_args a = get_args(c, call, first, what, 0, 3, names);
    const value *path = a.v[2] ? need_type(c, a.v[2], V_STR, call->pos, what) : NULL;
    value *r = list_of(c, seq->l.v, seq->l.n), *keys = new_list(c, seq->l.n);
    for (size_t i = 0; i < seq->l.n; i++)
        keys->l.v[i] = sort_key(c, seq->l.v[i], path, a.v[1] && val_truthy(a.v[1]), call->pos);
    sort_by(c, r->l.v, keys->l.v, r->l.n, a.v[0] && val_truthy(a.v[0]), call->pos);
    return r;
}

/* dictsort(case_sensitive=False, by='key', reverse=False): the (key, value) pairs */
static value *dictsort(ctx *c, value *d, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "case_sensitive", "by", "reverse", NULL };
    call_args a = get_args(c, call, first, what, 0, 3, names);
    const value *by = a.v[1] ? need_type(c, a.v[1], V_STR, call->pos, what) : NULL;
    if (by && !name_is(by->s.p, by->s.n, "key") && !name_is(by->s.p, by->s.n, "value"))
        FAIL(c, call->pos, "%s: by must be 'key' or 'value'", what);
    value *r = dict_view(c, need_type(c, d, V_DICT, call->pos, what), 2),
          *keys = new_list(c, r->l.n);
    const size_t which = by && by->s.p[0] == 'v';
    for (size_t i = 0; i < r->l.n; i++)
        keys->l.v[i] =
            sort_key(c, r->l.v[i]->l.v[which], NULL, a.v[0] && val_truthy(a.v[0]), call->pos);
    sort_by(c, r->l.v, keys->l.v, r->l.n, a.v[2] && val_truthy(a.v[2]), call->pos);
    return r;
}

/* min/max(case_sensitive=False, attribute=None): undefined when empty */
static value *extreme(ctx *c, value *seq, const node *call, size_t first, const char *what,
                      bool max)
{
    static const char *const names[] = { "case_sensitive", "attribute", NULL };
    call_args a = get_args(c, call, first, what, 0, 2, names);
    const value *path = a.v[1] ? need_type(c, a.v[1], V_STR, call->pos, what) : NULL;
    value *best = val_undef(), *best_key = NULL;
    for (size_t i = 0; i < seq->l.n; i++) {
        value *key = sort_key(c, seq->l.v[i], path, a.v[0] && val_truthy(a.v[0]), call->pos);
        const int cmp = best_key ? compare_values(c, key, best_key, call->pos, "<") : 0;
        if (!best_key || (max ? cmp > 0 : cmp < 0)) {
            best = seq->l.v[i];
            best_key = key;
        }
    }
    return best;
}

/* sum(attribute=None, start=0) */
static value *sum(ctx *c, value *seq, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "attribute", "start", NULL };
    call_args a = get_args(c, call, first, what, 0, 2, names);
    const value *path = a.v[0] ? need_type(c, a.v[0], V_STR, call->pos, what) : NULL;
    value *total = a.v[1] ? a.v[1] : val_int(&c->a, &c->f, 0);
    const node plus = { .k = E_BIN, .pos = call->pos, .s = "+", .n = 1 };
    for (size_t i = 0; i < seq->l.n; i++)
        total = arith_op(c, &plus, total,
                         path ? attr_path(c, seq->l.v[i], path, call->pos) : seq->l.v[i]);
    return total;
}

/* join(d='', attribute=None) */
static value *join(ctx *c, value *seq, const node *call, size_t first, const char *what)
{
    static const char *const names[] = { "d", "attribute", NULL };
    call_args a = get_args(c, call, first, what, 0, 2, names);
    const value *sep = a.v[0] ? need_type(c, a.v[0], V_STR, call->pos, what) : NULL;
    const value *path = a.v[1] ? need_type(c, a.v[1], V_STR, call->pos, what) : NULL;
    sbuf b = { .limit = JINJA_MAX_MEMORY };
    sb_add(&c->a, &c->f, &b, "", 0);
    for (size_t i = 0; i < seq->l.n; i++) {
        if (i && sep)
            sb_add(&c->a, &c->f, &b, sep->s.p, sep->s.n);
        val_write(&c->a, &c->f, &b, path ? attr_path(c, seq->l.v[i], path, call->pos) : seq->l.v[i],
                  false);
    }
    return str_of(c, b.p, b.n);
}

value *seq_filter(ctx *c, const char *name, size_t n, value *v, const node *call, size_t first,
                  const char *what)
{
    if (name_is(name, n, "items")) {
        get_args(c, call, first, what, 0, 0, no_names);
        return dict_view(c,
                         v->t == V_UNDEF ? val_new(&c->a, &c->f, V_DICT)
                                         : need_type(c, v, V_DICT, call->pos, what),
                         2);
    }
    if (name_is(name, n, "dictsort"))
        return dictsort(c, v, call, first, what);
    static const char *const known[] = { "map",    "select", "reject", "selectattr", "rejectattr",
                                         "unique", "sort",   "min",    "max",        "sum",
                                         "join",   "first",  "last",   "list",       "reverse" };
    size_t k = 0;
    while (k < sizeof(known) / sizeof(known[0]) && !name_is(name, n, known[k]))
        k++;
    if (k == sizeof(known) / sizeof(known[0]))
        return NULL;
    if (name_is(name, n, "reverse") && v->t == V_STR) {
        get_args(c, call, first, what, 0, 0, no_names);
        size_t chars;
        const size_t *at = char_starts(c, v, &chars);
        sbuf b = { .limit = JINJA_MAX_MEMORY };
        sb_add(&c->a, &c->f, &b, "", 0);
        for (size_t i = chars; i-- > 0;)
            sb_add(&c->a, &c->f, &b, v->s.p + at[i], at[i + 1] - at[i]);
        return str_of(c, b.p, b.n);
    }
    value *seq = iterate_value(c, v, call->pos);
    switch (k) {
    case 0: return map(c, seq, call, first, what);
    case 1:
    case 2: return select(c, seq, call, first, what, k == 1, false);
    case 3:
    case 4: return select(c, seq, call, first, what, k == 3, true);
    case 5: return unique(c, seq, call, first, what);
    case 6: return sort(c, seq, call, first, what);
    case 7:
    case 8: return extreme(c, seq, call, first, what, k == 8);
    case 9: return sum(c, seq, call, first, what);
    case 10: return join(c, seq, call, first, what);
    default: break;
    }
    get_args(c, call, first, what, 0, 0, no_names);
    if (k == 13) /* list */
        return seq == v ? list_of(c, seq->l.v, seq->l.n) : seq;
    if (k == 14) { /* reverse */
        value *r = new_list(c, seq->l.n);
        for (size_t i = seq->l.n; i-- > 0;)
            r->l.v[r->l.n++] = seq->l.v[i];
        return r;
    }
    return !seq->l.n ? val_undef() : seq->l.v[k == 11 ? 0 : seq->l.n - 1]; /* first, last */
}
