/* The lexer of the Jinja subset (jinja.h): text and tags into tokens.
 * Whitespace as transformers' environment has it: trim_blocks (a block tag
 * eats the newline after it) and lstrip_blocks (spaces before a block tag
 * at the start of a line are dropped), and the `-` / `+` markers. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lex.h"

static bool at_str(const parser *p, size_t at, const char *s)
{
    const size_t n = strlen(s);
    return at + n <= p->len && !memcmp(p->src + at, s, n);
}

void lex_fail(parser *p, size_t pos, const char *what)
{
    jinja_fail(p->f, JINJA_ERROR_SYNTAX, pos, "%s", what);
}

/* Whether a tag ({{, {%, {#) begins at `at`. */
static bool tag_start(const parser *p, size_t at)
{
    if (at + 1 >= p->len || p->src[at] != '{')
        return false;
    const char c = p->src[at + 1];
    return c == '{' || c == '%' || c == '#';
}

/* The text up to the next tag, whitespace control applied. */
static void lex_text(parser *p)
{
    size_t start = p->at, end = p->at;
    while (end < p->len && !tag_start(p, end))
        end++;
    if (p->strip_next)
        while (start < end && isspace((unsigned char)p->src[start]))
            start++;
    else if (p->trim_newline && start < end && p->src[start] == '\n')
        start++;
    else if (p->trim_newline && at_str(p, start, "\r\n") && start + 2 <= end)
        start += 2;
    p->strip_next = p->trim_newline = false;
    size_t stop = end;
    if (end < p->len) {
        const char kind = p->src[end + 1], mark = end + 2 < p->len ? p->src[end + 2] : 0;
        if (mark == '-') {
            while (stop > start && isspace((unsigned char)p->src[stop - 1]))
                stop--;
        } else if (mark != '+' && kind != '{') {
            size_t l = stop;
            while (l > start && (p->src[l - 1] == ' ' || p->src[l - 1] == '\t'))
                l--;
            /* only spaces between the line's start and the tag */
            if ((l > start && p->src[l - 1] == '\n') ||
                (l == start && (start == 0 || p->src[start - 1] == '\n')))
                stop = l;
        }
    }
    p->tok = (token){ T_TEXT, p->src + start, stop - start, start, 0, 0 };
    p->at = end;
}

/* A string literal from p->at (its quote), its escapes decoded as Python's. */
static void lex_string(parser *p)
{
    const size_t pos = p->at;
    const char q = p->src[p->at++];
    size_t end = p->at;
    while (end < p->len && p->src[end] != q)
        end += p->src[end] == '\\' ? 2 : 1;
    if (end >= p->len)
        lex_fail(p, pos, "an unterminated string");
    char *out = arena_alloc(p->a, p->f, end - p->at + 1);
    size_t n = 0;
    for (size_t i = p->at; i < end; i++) {
        const char c = p->src[i];
        if (c != '\\') {
            out[n++] = c;
            continue;
        }
        const char e = p->src[++i];
        const char *m = strchr("n\nt\tr\r\\\\''\"\"0\0a\ab\bf\fv\v", e);
        if (e && m && (m - "n\nt\tr\r\\\\''\"\"0\0a\ab\bf\fv\v") % 2 == 0) {
            out[n++] = m[1];
        } else if (e == 'x' || e == 'u') {
            const size_t digits = e == 'x' ? 2 : 4;
            unsigned cp = 0;
            for (size_t k = 0; k < digits; k++) {
                const char h = i + 1 + k < end ? p->src[i + 1 + k] : 0;
                if (!isxdigit((unsigned char)h))
                    lex_fail(p, i, "a bad \\x or \\u escape");
                cp =
                    cp * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0' : (h | 32) - 'a' + 10);
            }
            i += digits;
            if (cp < 0x80) {
                out[n++] = (char)cp;
            } else if (cp < 0x800) {
                out[n++] = (char)(0xc0 | cp >> 6);
                out[n++] = (char)(0x80 | (cp & 63));
            } else {
                out[n++] = (char)(0xe0 | cp >> 12);
                out[n++] = (char)(0x80 | (cp >> 6 & 63));
                out[n++] = (char)(0x80 | (cp & 63));
            }
        } else {
            out[n++] = '\\';
            out[n++] = e;
        }
    }
    p->at = end + 1;
    p->tok = (token){ T_STRING, out, n, pos, 0, 0 };
}

/* digits and '_' from at: where they end */
static size_t digits_end(const parser *p, size_t at)
{
    while (at < p->len && (isdigit((unsigned char)p->src[at]) || p->src[at] == '_'))
        at++;
    return at;
}

/* An integer, or a float as Jinja writes them (1.5, 1e-5, 2.5E+3), from p->at. */
static void lex_number(parser *p)
{
    const size_t pos = p->at;
    size_t e = digits_end(p, p->at);
    bool is_float = false;
    const bool after_dot = pos && p->src[pos - 1] == '.'; /* x.0.1 is x[0][1] */
    if (!after_dot && e + 1 < p->len && p->src[e] == '.' && isdigit((unsigned char)p->src[e + 1])) {
        e = digits_end(p, e + 1);
        is_float = true;
    }
    if (!after_dot && e < p->len && (p->src[e] | 32) == 'e') {
        size_t x = e + 1;
        if (x < p->len && (p->src[x] == '+' || p->src[x] == '-'))
            x++;
        if (x < p->len && isdigit((unsigned char)p->src[x])) {
            e = digits_end(p, x);
            is_float = true;
        }
    }
    char text[64];
    size_t n = 0;
    for (size_t i = pos; i < e; i++)
        if (p->src[i] != '_') {
            if (n + 1 >= sizeof(text))
                lex_fail(p, pos, "a number too long");
            text[n++] = p->src[i];
        }
    text[n] = 0;
    p->tok = (token){ is_float ? T_FLOAT : T_INT, p->src + pos, e - pos, pos, 0, 0 };
    if (is_float) {
        p->tok.d = strtod(text, NULL);
    } else {
        for (size_t i = 0; i < n; i++)
            if (__builtin_mul_overflow(p->tok.i, 10, &p->tok.i) ||
                __builtin_add_overflow(p->tok.i, text[i] - '0', &p->tok.i))
                lex_fail(p, pos, "an integer too large");
    }
    p->at = e;
}

void lex_next(parser *p)
{
    if (p->at >= p->len && !p->tag) {
        p->tok = (token){ T_EOF, NULL, 0, p->len, 0, 0 };
        return;
    }
    if (!p->tag) {
        if (!tag_start(p, p->at)) {
            lex_text(p);
            if (p->tok.n || p->at >= p->len)
                return;
            if (p->at >= p->len) {
                p->tok = (token){ T_EOF, NULL, 0, p->len, 0, 0 };
                return;
            }
        }
        const size_t pos = p->at;
        const char kind = p->src[p->at + 1];
        p->at += 2;
        if (p->at < p->len && (p->src[p->at] == '-' || p->src[p->at] == '+'))
            p->at++;
        if (kind == '#') {
            size_t e = p->at;
            while (e + 1 < p->len && !(p->src[e] == '#' && p->src[e + 1] == '}'))
                e++;
            if (e + 1 >= p->len)
                lex_fail(p, pos, "an unterminated comment");
            p->strip_next = p->src[e - 1] == '-' && e - 1 >= p->at;
            p->trim_newline = !(p->src[e - 1] == '+' && e - 1 >= p->at);
            p->at = e + 2;
            return lex_next(p);
        }
        p->strip_next = p->trim_newline = false;
        p->brackets = 0;
        p->tag = kind == '{' ? 1 : 2;
        p->tok = (token){ kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, NULL, 0, pos, 0, 0 };
        return;
    }
    while (p->at < p->len && isspace((unsigned char)p->src[p->at]))
        p->at++;
    const size_t pos = p->at;
    if (p->at >= p->len)
        lex_fail(p, p->len, p->tag == 1 ? "a {{ without its }}" : "a {% without its %}");
    const char *end = p->tag == 1 ? "}}" : "%}";
    const char c = p->src[p->at];
    if (p->brackets <= 0 && (c == '-' || c == '+') && at_str(p, p->at + 1, end)) {
        p->strip_next = c == '-';
        p->trim_newline = false;
        p->at += 3;
    } else if (p->brackets <= 0 && at_str(p, p->at, end)) {
        p->trim_newline = p->tag == 2;
        p->at += 2;
    } else {
        if (c == '\'' || c == '"')
            return lex_string(p);
        if (isalpha((unsigned char)c) || c == '_') {
            size_t e = p->at;
            while (e < p->len && (isalnum((unsigned char)p->src[e]) || p->src[e] == '_'))
                e++;
            p->tok = (token){ T_NAME, p->src + p->at, e - p->at, pos, 0, 0 };
            p->at = e;
            return;
        }
        if (isdigit((unsigned char)c))
            return lex_number(p);
        static const char *const ops[] = { "//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                           "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                           "]",  "{",  "}",  ".",  ",",  ":",  "|" };
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
            if (at_str(p, p->at, ops[i])) {
                p->tok = (token){ T_OP, ops[i], strlen(ops[i]), pos, 0, 0 };
                p->brackets += strchr("([{", ops[i][0]) ? 1 : strchr(")]}", ops[i][0]) ? -1 : 0;
                p->at += strlen(ops[i]);
                return;
            }
        jinja_fail(p->f, JINJA_ERROR_SYNTAX, pos, "an unexpected character '%c'", c);
    }
    p->tok = (token){ p->tag == 1 ? T_VAR_END : T_BLOCK_END, NULL, 0, pos, 0, 0 };
    p->tag = 0;
}
