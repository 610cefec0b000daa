/* The arena, the errors and the values of the Jinja subset (jinja_impl.h):
 * Python's str(), repr(), == and truth, and transformers' tojson. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jinja_impl.h"

struct arena_block {
    arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void jinja_fail(jfail *f, jinja_status st, size_t pos, const char *fmt, ...)
{
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < f->src_len; i++, col++)
        if (f->src[i] == '\n') {
            line++;
            col = 0;
        }
    int k = st == JINJA_ERROR_RAISED || !f->src || pos == JINJA_NO_POS
                ? 0
                : snprintf(f->why, f->cap, "line %zu:%zu: ", line, col);
    if (k < 0 || (size_t)k >= f->cap)
        k = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why + k, f->cap - (size_t)k, fmt, ap);
    va_end(ap);
    f->st = st;
    longjmp(f->jb, 1);
}

void jinja_spend(jfail *f, size_t units)
{
    f->work = units > JINJA_MAX_WORK - f->work ? JINJA_MAX_WORK + (size_t)1 : f->work + units;
    if (f->work > JINJA_MAX_WORK)
        jinja_fail(f, JINJA_ERROR_LIMIT, f->at,
                   "the template's work exceeds %u units (a byte scanned or compared 1, a "
                   "statement or loop turn %u)",
                   JINJA_MAX_WORK, JINJA_STEP_WORK);
}

void *arena_alloc(arena *a, jfail *f, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        const size_t cap = n > 65536 ? n : 65536;
        if (a->used + cap > JINJA_MAX_MEMORY)
            jinja_fail(f, JINJA_ERROR_LIMIT, 0, "the template needs more than %u MiB of memory",
                       JINJA_MAX_MEMORY >> 20);
        if (!(b = malloc(sizeof(*b) + cap)))
            jinja_fail(f, JINJA_ERROR_MEMORY, 0, "out of host memory");
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
        a->used += cap;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void arena_free(arena *a)
{
    while (a->head) {
        arena_block *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->used = 0;
}

static value undef_v = { .t = V_UNDEF }, none_v = { .t = V_NONE }, true_v = { .t = V_BOOL, .b = 1 },
             false_v = { .t = V_BOOL, .b = 0 };

value *val_undef(void)
{
    return &undef_v;
}

value *val_none(void)
{
    return &none_v;
}

value *val_bool(bool b)
{
    return b ? &true_v : &false_v;
}

value *val_new(arena *a, jfail *f, vtype t)
{
    value *v = arena_alloc(a, f, sizeof(*v));
    v->t = t;
    return v;
}

value *val_str(arena *a, jfail *f, const char *p, size_t n)
{
    value *v = val_new(a, f, V_STR);
    char *c = arena_alloc(a, f, n + 1);
    memcpy(c, p, n);
    v->s.p = c;
    v->s.n = n;
    return v;
}

value *val_int(arena *a, jfail *f, int64_t i)
{
    value *v = val_new(a, f, V_INT);
    v->i = i;
    return v;
}

value *val_float(arena *a, jfail *f, double d)
{
    value *v = val_new(a, f, V_FLOAT);
    v->f = d;
    return v;
}

void float_repr(double d, char out[32])
{
    if (isnan(d) || isinf(d)) {
        strcpy(out, isnan(d) ? "nan" : d < 0 ? "-inf" : "inf");
        return;
    }
    /* the fewest significant digits that read back as d */
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof(e), "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d)
            break;
    }
    const char *p = e + (e[0] == '-');
    char digits[24];
    int nd = 0;
    for (; *p != 'e'; p++)
        if (isdigit((unsigned char)*p))
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    const int exp = atoi(p + 1), point = exp + 1;
    char *o = out;
    if (e[0] == '-')
        *o++ = '-';
    if (point > -4 && point <= 16) { /* Python's repr: positional between 1e-4 and 1e16 */
        if (point <= 0) {
            o += sprintf(o, "0.%.*s%.*s", -point, "0000", nd, digits);
        } else if (point >= nd) {
            o += sprintf(o, "%.*s%.*s.0", nd, digits, point - nd, "0000000000000000");
        } else {
            o += sprintf(o, "%.*s.%.*s", point, digits, nd - point, digits + point);
        }
    } else {
        *o++ = digits[0];
        if (nd > 1)
            o += sprintf(o, ".%.*s", nd - 1, digits + 1);
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

/* The index of key in d's keys, or d->d.n; a unit per key read, and the
 * bytes of those of its length. */
static size_t key_index(jfail *f, const value *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->d.n; i++) {
        const bool same_length = d->d.k[i]->s.n == n;
        jinja_spend(f, 1 + (same_length ? n : 0));
        if (same_length && !memcmp(d->d.k[i]->s.p, key, n))
            return i;
    }
    return d->d.n;
}

value *dict_get(jfail *f, const value *d, const char *key, size_t n)
{
    const size_t i = key_index(f, d, key, n);
    return i < d->d.n ? d->d.v[i] : NULL;
}

void dict_set(arena *a, jfail *f, value *d, value *key, value *v)
{
    const size_t i = key_index(f, d, key->s.p, key->s.n);
    if (i < d->d.n) {
        d->d.v[i] = v;
        return;
    }
    if (d->d.n == d->d.cap) {
        const size_t cap = d->d.cap ? 2 * d->d.cap : 8;
        value **k = arena_alloc(a, f, cap * sizeof(*k)), **w = arena_alloc(a, f, cap * sizeof(*w));
        if (d->d.n) {
            memcpy(k, d->d.k, d->d.n * sizeof(*k));
            memcpy(w, d->d.v, d->d.n * sizeof(*w));
        }
        d->d.k = k;
        d->d.v = w;
        d->d.cap = cap;
    }
    d->d.k[d->d.n] = key;
    d->d.v[d->d.n++] = v;
}

value *val_from_json(arena *a, jfail *f, const void *cjson)
{
    const cJSON *j = cjson;
    if (!j || cJSON_IsNull(j))
        return val_none();
    if (cJSON_IsBool(j))
        return val_bool(cJSON_IsTrue(j));
    if (cJSON_IsString(j))
        return val_str(a, f, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsNumber(j)) {
        /* cJSON keeps no trace of a written "1.0": whole numbers read as integers */
        const double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 0x1p63)
            return val_int(a, f, (int64_t)d);
        return val_float(a, f, d);
    }
    if (cJSON_IsArray(j)) {
        value *v = val_new(a, f, V_LIST);
        v->l.n = (size_t)cJSON_GetArraySize(j);
        v->l.v = arena_alloc(a, f, (v->l.n + 1) * sizeof(value *));
        size_t i = 0;
        for (const cJSON *e = j->child; e; e = e->next)
            v->l.v[i++] = val_from_json(a, f, e);
        return v;
    }
    value *v = val_new(a, f, V_DICT);
    for (const cJSON *e = j->child; e; e = e->next)
        dict_set(a, f, v, val_str(a, f, e->string, strlen(e->string)), val_from_json(a, f, e));
    return v;
}

bool val_truthy(const value *v)
{
    switch (v->t) {
    case V_BOOL: return v->b;
    case V_INT: return v->i != 0;
    case V_FLOAT: return v->f != 0;
    case V_STR: return v->s.n != 0;
    case V_LIST: return v->l.n != 0;
    case V_DICT: return v->d.n != 0;
    case V_NS:
    case V_LOOP:
    case V_FUNC: return true;
    default: return false;
    }
}

bool val_is_number(const value *v)
{
    return v->t == V_INT || v->t == V_BOOL || v->t == V_FLOAT;
}

double val_as_double(const value *v)
{
    return v->t == V_FLOAT ? v->f : v->t == V_INT ? (double)v->i : v->b;
}

/* Lists and dicts nested deeper than this are neither written nor
 * compared (a template can nest them without end: the stack cannot). */
#define MAX_VALUE_DEPTH 1024

static bool eq_at(jfail *f, const value *a, const value *b, int depth)
{
    jinja_spend(f, 1 + (a->t == V_STR && b->t == V_STR && a->s.n == b->s.n ? a->s.n : 0));
    const bool an = a->t == V_INT || a->t == V_BOOL, bn = b->t == V_INT || b->t == V_BOOL;
    if (an && bn)
        return (a->t == V_INT ? a->i : a->b) == (b->t == V_INT ? b->i : b->b);
    if (val_is_number(a) && val_is_number(b))
        return val_as_double(a) == val_as_double(b);
    if (a->t != b->t)
        return false;
    switch (a->t) {
    case V_STR: return a->s.n == b->s.n && !memcmp(a->s.p, b->s.p, a->s.n);
    case V_LIST:
        if (a->l.n != b->l.n)
            return false;
        for (size_t i = 0; i < a->l.n; i++)
            if (depth >= MAX_VALUE_DEPTH || !eq_at(f, a->l.v[i], b->l.v[i], depth + 1))
                return false;
        return true;
    case V_DICT:
        if (a->d.n != b->d.n)
            return false;
        for (size_t i = 0; i < a->d.n; i++) {
            const value *w = dict_get(f, b, a->d.k[i]->s.p, a->d.k[i]->s.n);
            if (!w || depth >= MAX_VALUE_DEPTH || !eq_at(f, a->d.v[i], w, depth + 1))
                return false;
        }
        return true;
    case V_NS:
    case V_LOOP: return a == b;
    case V_FUNC:
        return a->fn.kind == b->fn.kind && a->fn.macro == b->fn.macro && a->fn.self == b->fn.self;
    default: return true; /* undefined, none */
    }
}

bool val_eq(jfail *f, const value *a, const value *b)
{
    return eq_at(f, a, b, 0);
}

const char *val_type_name(const value *v)
{
    static const char *const names[] = { "undefined", "none",   "bool",    "int",
                                         "float",     "string", "list",    "dict",
                                         "namespace", "loop",   "function" };
    return names[v->t];
}

void sb_add(arena *a, jfail *f, sbuf *b, const char *p, size_t n)
{
    if (n > b->limit - b->n) {
        if (b->heap)
            jinja_fail(f, JINJA_ERROR_LIMIT, 0, "the output exceeds %zu bytes", b->limit);
        jinja_fail(f, JINJA_ERROR_LIMIT, 0, "a string needs more than %zu MiB of memory",
                   b->limit >> 20);
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q;
        if (b->heap) {
            if (!(q = realloc(b->p, cap)))
                jinja_fail(f, JINJA_ERROR_MEMORY, 0, "out of host memory");
        } else {
            q = arena_alloc(a, f, cap);
            if (b->n)
                memcpy(q, b->p, b->n);
        }
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(arena *a, jfail *f, sbuf *b, const char *s)
{
    sb_add(a, f, b, s, strlen(s));
}

/* Python's repr() of a string. */
static void repr_str(arena *a, jfail *f, sbuf *b, const value *v)
{
    const bool dq = memchr(v->s.p, '\'', v->s.n) && !memchr(v->s.p, '"', v->s.n);
    const char q = dq ? '"' : '\'';
    sb_add(a, f, b, &q, 1);
    for (size_t i = 0; i < v->s.n; i++) {
        const unsigned char c = (unsigned char)v->s.p[i];
        char e[8];
        if (c == q || c == '\\')
            snprintf(e, sizeof(e), "\\%c", c);
        else if (c == '\n' || c == '\r' || c == '\t')
            snprintf(e, sizeof(e), "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
        else if (c < 0x20 || c == 0x7f)
            snprintf(e, sizeof(e), "\\x%02x", c);
        else
            e[0] = (char)c, e[1] = 0;
        sb_str(a, f, b, e);
    }
    sb_add(a, f, b, &q, 1);
}

static void write_at(arena *a, jfail *f, sbuf *b, const value *v, bool repr, int depth)
{
    if (depth > MAX_VALUE_DEPTH)
        jinja_fail(f, JINJA_ERROR_LIMIT, 0, "a value nested deeper than %d", MAX_VALUE_DEPTH);
    char num[32];
    switch (v->t) {
    case V_UNDEF:
        if (repr) /* in a list's or dict's str() */
            sb_str(a, f, b, "Undefined");
        break;
    case V_NONE: sb_str(a, f, b, "None"); break;
    case V_BOOL: sb_str(a, f, b, v->b ? "True" : "False"); break;
    case V_INT:
        snprintf(num, sizeof(num), "%" PRId64, v->i);
        sb_str(a, f, b, num);
        break;
    case V_FLOAT:
        float_repr(v->f, num);
        sb_str(a, f, b, num);
        break;
    case V_STR:
        if (repr)
            repr_str(a, f, b, v);
        else
            sb_add(a, f, b, v->s.p, v->s.n);
        break;
    case V_LIST:
        sb_str(a, f, b, v->l.tuple ? "(" : "[");
        for (size_t i = 0; i < v->l.n; i++) {
            if (i)
                sb_str(a, f, b, ", ");
            write_at(a, f, b, v->l.v[i], true, depth + 1);
        }
        sb_str(a, f, b, !v->l.tuple ? "]" : v->l.n == 1 ? ",)" : ")");
        break;
    case V_DICT:
        sb_str(a, f, b, "{");
        for (size_t i = 0; i < v->d.n; i++) {
            if (i)
                sb_str(a, f, b, ", ");
            repr_str(a, f, b, v->d.k[i]);
            sb_str(a, f, b, ": ");
            write_at(a, f, b, v->d.v[i], true, depth + 1);
        }
        sb_str(a, f, b, "}");
        break;
    default:
        sb_str(a, f, b,
               v->t == V_NS     ? "<Namespace>"
               : v->t == V_LOOP ? "<LoopContext>"
                                : "<function>");
    }
}

/* The code point of the UTF-8 sequence at s[*i] (*i moved past it); a
 * byte that begins none stands for itself. */
static unsigned utf8_next(const char *s, size_t n, size_t *i)
{
    const unsigned char c = (unsigned char)s[*i];
    const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (len == 1 || *i + len > n) {
        (*i)++;
        return c;
    }
    unsigned cp = c & (0x3f >> (len - 1));
    for (size_t k = 1; k < len; k++)
        cp = cp << 6 | ((unsigned char)s[*i + k] & 0x3f);
    *i += len;
    return cp;
}

/* json.dumps' ensure_ascii: \\uXXXX for each character beyond ASCII
 * (a surrogate pair beyond U+FFFF) */
static void json_ascii_escape(arena *a, jfail *f, sbuf *b, const value *v, size_t *i)
{
    unsigned cp = utf8_next(v->s.p, v->s.n, i);
    char e[16];
    if (cp > 0xffff) {
        cp -= 0x10000;
        snprintf(e, sizeof(e), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
        snprintf(e, sizeof(e), "\\u%04x", cp);
    }
    sb_str(a, f, b, e);
}

void val_write(arena *a, jfail *f, sbuf *b, const value *v, bool repr)
{
    write_at(a, f, b, v, repr, 0);
}

static void json_str(arena *a, jfail *f, sbuf *b, const value *v, bool ascii)
{
    sb_str(a, f, b, "\"");
    for (size_t i = 0; i < v->s.n; i++) {
        const unsigned char c = (unsigned char)v->s.p[i];
        char e[8];
        if (ascii && c >= 0x80) {
            json_ascii_escape(a, f, b, v, &i);
            i--;
            continue;
        }
        static const char short_esc[] = "\"\"\\\\\bb\ff\nn\rr\tt";
        const char *s = c ? memchr(short_esc, c, sizeof(short_esc) - 1) : NULL;
        if (s && (s - short_esc) % 2 == 0)
            snprintf(e, sizeof(e), "\\%c", s[1]);
        else if (c < 0x20)
            snprintf(e, sizeof(e), "\\u%04x", c);
        else
            e[0] = (char)c, e[1] = 0;
        sb_str(a, f, b, e);
    }
    sb_str(a, f, b, "\"");
}

static void json_newline(arena *a, jfail *f, sbuf *b, int indent, int level)
{
    sb_str(a, f, b, "\n");
    for (int i = 0; i < indent * level; i++)
        sb_str(a, f, b, " ");
}

/* The order json.dumps writes d's keys in: as inserted, or sorted. */
static size_t *key_order(arena *a, jfail *f, const value *d, bool sorted)
{
    size_t *order = arena_alloc(a, f, (d->d.n + 1) * sizeof(*order));
    for (size_t i = 0; i < d->d.n; i++) {
        size_t k = i;
        for (; sorted && k > 0; k--) {
            const value *x = d->d.k[order[k - 1]], *y = d->d.k[i];
            jinja_spend(f, 1 + (x->s.n < y->s.n ? x->s.n : y->s.n));
            const int cmp = memcmp(x->s.p, y->s.p, x->s.n < y->s.n ? x->s.n : y->s.n);
            if (cmp < 0 || (!cmp && x->s.n <= y->s.n))
                break;
            order[k] = order[k - 1];
        }
        order[k] = i;
    }
    return order;
}

void val_json(arena *a, jfail *f, sbuf *b, const value *v, const json_style *style, int level,
              size_t pos)
{
    if (level > JINJA_MAX_DEPTH)
        jinja_fail(f, JINJA_ERROR_LIMIT, pos, "tojson: nested deeper than %d", JINJA_MAX_DEPTH);
    const int indent = style->indent;
    switch (v->t) {
    case V_NONE: sb_str(a, f, b, "null"); return;
    case V_BOOL: sb_str(a, f, b, v->b ? "true" : "false"); return;
    case V_INT: val_write(a, f, b, v, false); return;
    case V_FLOAT: /* json.dumps: repr(), and JavaScript's names for what JSON lacks */
        if (isnan(v->f) || isinf(v->f))
            sb_str(a, f, b, isnan(v->f) ? "NaN" : v->f < 0 ? "-Infinity" : "Infinity");
        else
            val_write(a, f, b, v, false);
        return;
    case V_STR: json_str(a, f, b, v, style->ascii); return;
    case V_LIST:
    case V_DICT: {
        const bool list = v->t == V_LIST;
        const size_t n = list ? v->l.n : v->d.n;
        const size_t *order = list ? NULL : key_order(a, f, v, style->sort_keys);
        sb_str(a, f, b, list ? "[" : "{");
        for (size_t i = 0; i < n; i++) {
            if (i && style->item_sep)
                sb_add(a, f, b, style->item_sep->s.p, style->item_sep->s.n);
            else if (i)
                sb_str(a, f, b, indent < 0 ? ", " : ",");
            if (indent >= 0)
                json_newline(a, f, b, indent, level + 1);
            if (!list) {
                json_str(a, f, b, v->d.k[order[i]], style->ascii);
                if (style->key_sep)
                    sb_add(a, f, b, style->key_sep->s.p, style->key_sep->s.n);
                else
                    sb_str(a, f, b, ": ");
            }
            val_json(a, f, b, list ? v->l.v[i] : v->d.v[order[i]], style, level + 1, pos);
        }
        if (n && indent >= 0)
            json_newline(a, f, b, indent, level);
        sb_str(a, f, b, list ? "]" : "}");
        return;
    }
    default: jinja_fail(f, JINJA_ERROR_RENDER, pos, "tojson: a value of type %s", val_type_name(v));
    }
}
