/* model.vocab and model.merges of a tokenizer.json read straight from the
 * text into the tokenizer's tables: they are nearly all of a large file, and
 * a cJSON tree of them costs about ten times the file (a node and a string
 * allocation per token and per merge). The rest of the file, without them,
 * goes to cJSON as before. */
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* End of the string starting at s[i] == '"', or 0 when unterminated. */
static size_t skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return 0;
}

/* End of the value at s[i] (nested brackets counted, strings skipped), or 0
 * for a value that is not closed. Syntax inside is left to the parsers. */
static size_t skip_value(const char *s, size_t n, size_t i)
{
    size_t depth = 0;
    do {
        if (i >= n)
            return 0;
        char c = s[i];
        if (c == '"') {
            if (!(i = skip_string(s, n, i)))
                return 0;
        } else if (c == '{' || c == '[') {
            depth++;
            i++;
        } else if (c == '}' || c == ']') {
            if (!depth)
                return 0;
            depth--;
            i++;
        } else if (!depth) { /* a number or literal: up to the next delimiter */
            while (i < n && !strchr(",}] \t\r\n", s[i]))
                i++;
            return i;
        } else {
            i++;
        }
    } while (depth);
    return i;
}

/* Walks the members of the object at s[i] == '{'; calls `member` with the
 * raw key (between its quotes) and the value's start. False when malformed. */
typedef void (*member_fn)(void *ctx, const char *key, size_t klen, const char *s, size_t n,
                          size_t at);

static bool walk_object(const char *s, size_t n, size_t i, member_fn member, void *ctx)
{
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}')
        return true;
    while (i < n && s[i] == '"') {
        size_t kend = skip_string(s, n, i);
        if (!kend)
            return false;
        size_t v = skip_ws(s, n, kend);
        if (v >= n || s[v] != ':')
            return false;
        v = skip_ws(s, n, v + 1);
        size_t e = skip_value(s, n, v);
        if (!e || e == v)
            return false;
        member(ctx, s + i + 1, kend - i - 2, s, n, v);
        i = skip_ws(s, n, e);
        if (i < n && s[i] == ',')
            i = skip_ws(s, n, i + 1);
        else
            return i < n && s[i] == '}';
    }
    return false;
}

typedef struct spans_ctx {
    pfx_json_span *vocab, *merges;
    bool in_model;
} spans_ctx;

static void model_member(void *ctx, const char *key, size_t klen, const char *s, size_t n,
                         size_t at)
{
    spans_ctx *c = ctx;
    pfx_json_span *want = klen == 5 && !memcmp(key, "vocab", 5)    ? c->vocab
                          : klen == 6 && !memcmp(key, "merges", 6) ? c->merges
                                                                   : NULL;
    if (want && !want->e && s[at] == (want == c->vocab ? '{' : '[')) /* the first, as cJSON takes */
        *want = (pfx_json_span){ at, skip_value(s, n, at) };
}

static void top_member(void *ctx, const char *key, size_t klen, const char *s, size_t n, size_t at)
{
    spans_ctx *c = ctx;
    if (klen == 5 && !memcmp(key, "model", 5) && !c->in_model) { /* the first, as cJSON takes */
        c->in_model = true;
        if (s[at] == '{' && !walk_object(s, n, at, model_member, c))
            c->vocab->e = c->merges->e = 0;
    }
}

void pfx_tokenizer_json_spans(const char *s, size_t n, pfx_json_span *vocab, pfx_json_span *merges)
{
    *vocab = *merges = (pfx_json_span){ 0, 0 };
    spans_ctx c = { vocab, merges, false };
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{' || !walk_object(s, n, i, top_member, &c))
        *vocab = *merges = (pfx_json_span){ 0, 0 }; /* cJSON reads it all and says what is wrong */
}

/* ---- the parsers ---- */

typedef struct reader {
    const char *s;
    size_t n, i;
    const char *label, *where;
    pfx_buf a, b; /* decoded strings */
} reader;

static pfx_status malformed(const reader *r)
{
    return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s is not valid JSON (at byte %zu of it)",
                     r->label, r->where, r->i);
}

static int hex4(const char *s)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Decodes the string at r->i into out (escapes resolved, UTF-16 pairs
 * joined); a "\u0000" is refused, as the other JSON readers do. */
static pfx_status read_string(reader *r, pfx_buf *out)
{
    out->len = 0;
    if (r->i >= r->n || r->s[r->i] != '"')
        return malformed(r);
    size_t i = r->i + 1;
    for (;;) {
        size_t run = i;
        while (i < r->n && r->s[i] != '"' && r->s[i] != '\\')
            i++;
        if (!pfx_buf_add(out, r->s + run, i - run))
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", r->label);
        if (i >= r->n)
            return malformed(r);
        if (r->s[i] == '"')
            break;
        if (++i >= r->n)
            return malformed(r);
        char e = r->s[i++], c[4];
        size_t len = 1;
        switch (e) {
        case '"':
        case '\\':
        case '/': c[0] = e; break;
        case 'b': c[0] = '\b'; break;
        case 'f': c[0] = '\f'; break;
        case 'n': c[0] = '\n'; break;
        case 'r': c[0] = '\r'; break;
        case 't': c[0] = '\t'; break;
        case 'u': {
            int u = i + 4 <= r->n ? hex4(r->s + i) : -1;
            i += 4;
            if (u >= 0xd800 && u < 0xdc00) { /* a high surrogate: its low one must follow */
                int lo = i + 6 <= r->n && r->s[i] == '\\' && r->s[i + 1] == 'u' ? hex4(r->s + i + 2)
                                                                                : -1;
                if (lo < 0xdc00 || lo > 0xdfff)
                    return malformed(r);
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            } else if (u < 0 || (u >= 0xdc00 && u <= 0xdfff)) {
                return malformed(r);
            }
            if (u == 0)
                return pfx_error(NULL, PFX_ERROR_FORMAT,
                                 "%s: a string holds the escape \\u0000 (NUL) in %s", r->label,
                                 r->where);
            if (u < 0x80) {
                c[0] = (char)u;
            } else if (u < 0x800) {
                c[0] = (char)(0xc0 | (u >> 6));
                c[1] = (char)(0x80 | (u & 0x3f));
                len = 2;
            } else if (u < 0x10000) {
                c[0] = (char)(0xe0 | (u >> 12));
                c[1] = (char)(0x80 | ((u >> 6) & 0x3f));
                c[2] = (char)(0x80 | (u & 0x3f));
                len = 3;
            } else {
                c[0] = (char)(0xf0 | (u >> 18));
                c[1] = (char)(0x80 | ((u >> 12) & 0x3f));
                c[2] = (char)(0x80 | ((u >> 6) & 0x3f));
                c[3] = (char)(0x80 | (u & 0x3f));
                len = 4;
            }
            break;
        }
        default: return malformed(r);
        }
        if (!pfx_buf_add(out, c, len))
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", r->label);
    }
    if (!out->data && !pfx_buf_add(out, "", 0))
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", r->label);
    r->i = skip_ws(r->s, r->n, i + 1);
    return PFX_SUCCESS;
}

/* A JSON number that is an id (an integer 0 .. 2^31-1, as pfx_json_uint
 * and the cJSON path take them: "5", "5.0", "5e0"). */
static bool read_id(reader *r, int32_t *id)
{
    size_t i = r->i, b = i;
    if (i < r->n && r->s[i] == '-')
        i++;
    while (i < r->n && ((r->s[i] >= '0' && r->s[i] <= '9') || r->s[i] == '.' || r->s[i] == 'e' ||
                        r->s[i] == 'E' || r->s[i] == '+' || r->s[i] == '-'))
        i++;
    char num[64];
    if (i == b || i - b >= sizeof(num))
        return false;
    memcpy(num, r->s + b, i - b);
    num[i - b] = 0;
    char *end;
    double v = strtod(num, &end);
    if (*end || !(v >= 0.0) || v > INT32_MAX || (double)(int32_t)v != v)
        return false;
    *id = (int32_t)v;
    r->i = skip_ws(r->s, r->n, i);
    return true;
}

/* After a member or element: ',' then more (true), or the closing bracket. */
static pfx_status next_item(reader *r, char close, bool *more)
{
    if (r->i < r->n && r->s[r->i] == ',') {
        r->i = skip_ws(r->s, r->n, r->i + 1);
        *more = true;
        return PFX_SUCCESS;
    }
    *more = false;
    return r->i < r->n && r->s[r->i] == close ? PFX_SUCCESS : malformed(r);
}

pfx_status pfx_stream_vocab(pfx_tokenizer *tok, const char *s, size_t n, const char *label,
                            const char *where)
{
    reader r = { s, n, skip_ws(s, n, 1), label, where, { 0 }, { 0 } };
    pfx_status st = PFX_SUCCESS;
    bool more = r.i < n && s[r.i] != '}';
    if (!more && r.i >= n)
        st = malformed(&r);
    while (more && st == PFX_SUCCESS) {
        int32_t id;
        if ((st = read_string(&r, &r.a)))
            break;
        if (r.i >= n || s[r.i] != ':') {
            st = malformed(&r);
            break;
        }
        r.i = skip_ws(s, n, r.i + 1);
        if (!read_id(&r, &id)) {
            st = pfx_error(NULL, PFX_ERROR_FORMAT,
                           "%s: %s['%.200s'] is not an id (an integer 0 .. 2^31-1)", label, where,
                           r.a.data);
            break;
        }
        /* the vocabulary is empty before its object: a hit is a key given twice (the rule of every JSON reader) */
        if (pfx_strmap_get(&tok->vocab, r.a.data, r.a.len) >= 0)
            st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: the field '%.64s' appears twice in %s",
                           label, r.a.data, where);
        else if (!pfx_strmap_put(&tok->vocab, r.a.data, r.a.len, id))
            st = pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", label);
        else
            st = next_item(&r, '}', &more);
    }
    pfx_buf_free(&r.a);
    return st;
}

pfx_status pfx_stream_merges(pfx_tokenizer *tok, const char *s, size_t n, const char *label)
{
    reader r = { s, n, skip_ws(s, n, 1), label, "model.merges", { 0 }, { 0 } };
    pfx_status st = PFX_SUCCESS;
    bool more = r.i < n && s[r.i] != ']';
    if (!more && r.i >= n)
        st = malformed(&r);
    for (uint32_t rank = 0; more && st == PFX_SUCCESS; rank++) {
        const char *a, *b;
        size_t alen, blen;
        if (r.i < n && s[r.i] == '"') { /* "a b", split at the first space */
            if ((st = read_string(&r, &r.a)))
                break;
            const char *sp = memchr(r.a.data, ' ', r.a.len);
            if (!sp) {
                st = pfx_error(NULL, PFX_ERROR_FORMAT,
                               "%s: model.merges[%u] '%.200s' is not \"a b\"", label, rank,
                               r.a.data);
                break;
            }
            a = r.a.data;
            alen = (size_t)(sp - a);
            b = sp + 1;
            blen = r.a.len - alen - 1;
        } else if (r.i < n && s[r.i] == '[') { /* ["a", "b"] */
            r.i = skip_ws(s, n, r.i + 1);
            bool two = r.i < n && s[r.i] == '"' && !(st = read_string(&r, &r.a)) && r.i < n &&
                       s[r.i] == ',';
            if (st)
                break;
            if (two) {
                r.i = skip_ws(s, n, r.i + 1);
                two = r.i < n && s[r.i] == '"' && !(st = read_string(&r, &r.b)) && r.i < n &&
                      s[r.i] == ']';
                if (st)
                    break;
            }
            if (!two) {
                st = pfx_error(NULL, PFX_ERROR_FORMAT,
                               "%s: model.merges[%u] is neither \"a b\" nor "
                               "[\"a\", \"b\"]",
                               label, rank);
                break;
            }
            r.i = skip_ws(s, n, r.i + 1);
            a = r.a.data;
            alen = r.a.len;
            b = r.b.data;
            blen = r.b.len;
        } else {
            st = pfx_error(NULL, PFX_ERROR_FORMAT,
                           "%s: model.merges[%u] is neither \"a b\" nor [\"a\", \"b\"]", label,
                           rank);
            break;
        }
        if (!(st = pfx_add_merge(tok, a, alen, b, blen, rank, label)))
            st = next_item(&r, ']', &more);
    }
    pfx_buf_free(&r.a);
    pfx_buf_free(&r.b);
    return st;
}

pfx_status pfx_stream_vocab_json(pfx_tokenizer *tok, const char *s, size_t n, const char *label)
{
    size_t b = skip_ws(s, n, 0), e = b < n && s[b] == '{' ? skip_value(s, n, b) : 0;
    if (!e || skip_ws(s, n, e) != n)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not a JSON object", label);
    return pfx_stream_vocab(tok, s + b, e - b, label, "the vocabulary");
}
