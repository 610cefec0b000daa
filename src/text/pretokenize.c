/* The encode pipeline before BPE, as HF tokenizers runs it: added tokens
 * split out first (leftmost-longest, with lstrip / rstrip / single_word),
 * the normalizers per remaining segment, then each pre-tokenizer splits the
 * pieces further (PCRE2 regexes, HF's five split behaviors). */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "text_internal.h"

/* GPT-2's regex, which the ByteLevel pre-tokenizer uses with use_regex. */
const char pfx_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

pcre2_code *pfx_regex_compile(const char *pattern, size_t len, bool literal, const char *label,
                              const char *what)
{
    int err;
    PCRE2_SIZE at;
    /* UCP does not combine with LITERAL, which needs no character classes. */
    /* USE_OFFSET_LIMIT: budget_match searches a window of start positions at a time. */
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_USE_OFFSET_LIMIT |
                    (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &err, &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s: regex error at offset %zu: %s", label, what,
                  (size_t)at, (const char *)msg);
        return NULL;
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter runs it otherwise */
    return re;
}

bool pfx_pieces_add(pfx_pieces *ps, const char *data, size_t len, int32_t added, bool first)
{
    if (ps->count == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 64;
        void *p = realloc(ps->p, cap * sizeof(*ps->p));
        if (!p)
            return false;
        ps->p = p;
        ps->cap = cap;
    }
    size_t off = ps->text.len;
    if (!pfx_buf_add(&ps->text, data, len))
        return false;
    ps->p[ps->count++] = (pfx_piece){ off, len, added, first };
    return true;
}

void pfx_pieces_clear(pfx_pieces *ps)
{
    ps->text.len = 0;
    ps->count = 0;
}

void pfx_pieces_free(pfx_pieces *ps)
{
    pfx_buf_free(&ps->text);
    free(ps->p);
    memset(ps, 0, sizeof(*ps));
}

static pfx_status oom(void)
{
    return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "tokenizer: host memory");
}

/* A failed match: a limit of PCRE2 reached (JIT stack, depth, heap). */
static pfx_status match_error(int rc, const char *source)
{
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                     "tokenizer: regex '%.200s' backtracks beyond the limits of "
                     "an encode: %s",
                     source, (const char *)msg);
}

/* The budget: units per byte of text and a floor for short texts. PCRE2's
 * JIT applies the match limit to each start position of a search on its own
 * (measured: (a|a)*b over 4 KiB of a's ran 9.5 s under a limit of 10^7 that
 * one position reaches in 30 ms), the interpreter to the whole call. So a
 * call searches a window of start positions (the offset limit) and is
 * charged its limit times the positions it may have tried, which bounds the
 * work either way; the limit starts small and grows eightfold after each
 * MATCHLIMIT, so a call is charged at most about nine times its work. */
#define REGEX_UNITS_PER_BYTE 4096u
#define REGEX_UNITS_FLOOR    ((uint64_t)1 << 22)
#define REGEX_FIRST_LIMIT    256u

void pfx_scratch_regex_budget(pfx_encode_scratch *sc, size_t len)
{
    sc->text_len = len;
    sc->regex_left = REGEX_UNITS_FLOOR + (uint64_t)REGEX_UNITS_PER_BYTE * len;
}

bool pfx_scratch_regex_init(pfx_encode_scratch *sc, size_t len)
{
    sc->md = pcre2_match_data_create(1, NULL);
    sc->mc = pcre2_match_context_create(NULL);
    pfx_scratch_regex_budget(sc, len);
    return sc->md && sc->mc;
}

void pfx_scratch_regex_free(pfx_encode_scratch *sc)
{
    pcre2_match_data_free(sc->md);
    pcre2_match_context_free(sc->mc);
    sc->md = NULL;
    sc->mc = NULL;
}

static pfx_status budget_spent(const char *source, const pfx_encode_scratch *sc)
{
    return pfx_error(
        NULL, PFX_ERROR_UNSUPPORTED,
        "tokenizer: regex '%.200s' backtracks beyond the limits of an encode: its match budget "
        "(%llu PCRE2 match-limit units for %zu bytes of text)",
        source,
        (unsigned long long)(REGEX_UNITS_FLOOR + (uint64_t)REGEX_UNITS_PER_BYTE * sc->text_len),
        sc->text_len);
}

/* The last start position of a window of at most `width` bytes from `at`:
 * a character boundary (or `at`), so that the next window starts on one. */
static size_t window_last(const char *s, size_t n, size_t at, uint64_t width)
{
    if (width > n - at)
        return n;
    size_t last = at + (size_t)width - 1;
    while (last > at && ((unsigned char)s[last] & 0xC0) == 0x80)
        last--;
    return last;
}

/* pcre2_match from `at` within the encode's budget: a match (its start and
 * end in sc->md), PCRE2_ERROR_NOMATCH, or an error with *st set. */
static int budget_match(const pcre2_code *re, const char *source, pfx_encode_scratch *sc,
                        const char *s, size_t n, size_t at, pfx_status *st)
{
    *st = PFX_SUCCESS;
    uint64_t limit = REGEX_FIRST_LIMIT;
    while (at <= n) {
        if (sc->regex_left < limit) {
            *st = budget_spent(source, sc);
            return PCRE2_ERROR_MATCHLIMIT;
        }
        const size_t last = window_last(s, n, at, sc->regex_left / limit);
        pcre2_set_match_limit(sc->mc, (uint32_t)limit);
        pcre2_set_offset_limit(sc->mc, last);
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, at, 0, sc->md, sc->mc);
        size_t tried = last - at + 1;
        if (rc >= 0) {
            const PCRE2_SIZE b = pcre2_get_ovector_pointer(sc->md)[0];
            tried = b > at && b <= last ? b - at + 1 : 1;
        }
        sc->regex_left -= limit * tried;
        if (rc == PCRE2_ERROR_MATCHLIMIT) {
            if (limit >= UINT32_MAX / 8) {
                *st = budget_spent(source, sc);
                return rc;
            }
            limit *= 8;
            continue;
        }
        if (rc != PCRE2_ERROR_NOMATCH || last >= n) {
            if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
                *st = match_error(rc, source);
            return rc;
        }
        /* no match starts in the window: search on from the next character */
        uint32_t cp;
        at = last + pfx_utf8_next((const unsigned char *)s + last, n - last, &cp);
    }
    return PCRE2_ERROR_NOMATCH;
}

/* ---- regex split with HF's behaviors ---- */
typedef struct span {
    size_t b, e;
    bool match;
} span;

typedef struct spans {
    span *s;
    size_t n, cap;
} spans;

static bool spans_add(spans *v, size_t b, size_t e, bool match)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 32;
        void *p = realloc(v->s, cap * sizeof(*v->s));
        if (!p)
            return false;
        v->s = p;
        v->cap = cap;
    }
    v->s[v->n++] = (span){ b, e, match };
    return true;
}

/* Matches one by one as onig's find_iter (which HF runs) yields them: an
 * empty match where the previous match ended is skipped and the search
 * moves one character on. */
typedef struct match_iter {
    size_t at, last_end;
    bool have_last;
} match_iter;

static pfx_status next_match(const pcre2_code *re, const char *source, pfx_encode_scratch *sc,
                             const char *s, size_t n, match_iter *it, bool *found, size_t *b,
                             size_t *e)
{
    *found = false;
    while (it->at <= n) {
        pfx_status st;
        int rc = budget_match(re, source, sc, s, n, it->at, &st);
        if (st != PFX_SUCCESS || rc == PCRE2_ERROR_NOMATCH)
            return st;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
        *b = ov[0];
        *e = ov[1];
        if (*b == *e && it->have_last && it->last_end == *e) {
            if (it->at >= n)
                return PFX_SUCCESS;
            uint32_t cp;
            it->at += pfx_utf8_next((const unsigned char *)s + it->at, n - it->at, &cp);
            continue;
        }
        it->at = it->last_end = *e;
        it->have_last = true;
        *found = true;
        return PFX_SUCCESS;
    }
    return PFX_SUCCESS;
}

/* Matches and the text between them, covering [0, n). */
static pfx_status find_matches(const pcre2_code *re, const char *source, pfx_encode_scratch *sc,
                               const char *s, size_t n, bool invert, spans *out)
{
    out->n = 0;
    size_t prev = 0, b, e;
    match_iter it = { 0 };
    for (;;) {
        bool found;
        pfx_status st = next_match(re, source, sc, s, n, &it, &found, &b, &e);
        if (st != PFX_SUCCESS)
            return st;
        if (!found)
            break;
        if (b > prev && !spans_add(out, prev, b, invert))
            return oom();
        if (!spans_add(out, b, e, !invert))
            return oom();
        prev = e;
    }
    if (prev < n && !spans_add(out, prev, n, invert))
        return oom();
    return PFX_SUCCESS;
}

/* HF's SplitDelimiterBehavior applied in place: the kept spans, merged. */
static void apply_behavior(spans *v, pfx_split_behavior behavior)
{
    size_t w = 0;
    bool prev_match = false;
    switch (behavior) {
    case PFX_SPLIT_ISOLATED: return;
    case PFX_SPLIT_REMOVED:
        for (size_t i = 0; i < v->n; i++)
            if (!v->s[i].match)
                v->s[w++] = v->s[i];
        v->n = w;
        return;
    case PFX_SPLIT_CONTIGUOUS:
    case PFX_SPLIT_MERGED_WITH_PREVIOUS:
        /* Contiguous: a span joins the previous one of the same kind;
         * MergedWithPrevious: a match joins the text before it. */
        for (size_t i = 0; i < v->n; i++) {
            bool m = v->s[i].match;
            bool join = behavior == PFX_SPLIT_CONTIGUOUS ? m == prev_match : m && !prev_match;
            if (w && join)
                v->s[w - 1].e = v->s[i].e;
            else
                v->s[w++] = v->s[i];
            prev_match = m;
        }
        v->n = w;
        return;
    case PFX_SPLIT_MERGED_WITH_NEXT:
        /* From the end: a match joins the piece after it. */
        w = v->n;
        for (size_t k = v->n; k-- > 0;) {
            if (w < v->n && v->s[k].match && !prev_match)
                v->s[w].b = v->s[k].b;
            else
                v->s[--w] = v->s[k];
            prev_match = v->s[k].match;
        }
        memmove(v->s, v->s + w, (v->n - w) * sizeof(*v->s));
        v->n -= w;
        return;
    }
}

static pfx_status split_piece(const pfx_pretok *pt, pfx_encode_scratch *sc, const char *s, size_t n,
                              bool first, bool invert, pfx_split_behavior behavior, pfx_pieces *out,
                              spans *v)
{
    pfx_status st = find_matches(pt->re, pt->source, sc, s, n, invert, v);
    if (st != PFX_SUCCESS)
        return st;
    apply_behavior(v, behavior);
    for (size_t i = 0; i < v->n; i++)
        if (v->s[i].e > v->s[i].b &&
            !pfx_pieces_add(out, s + v->s[i].b, v->s[i].e - v->s[i].b, -1, first && v->s[i].b == 0))
            return oom();
    return PFX_SUCCESS;
}

/* ---- normalizers ---- */
static pfx_status replace_all(const pfx_norm *nm, pfx_encode_scratch *sc, const pfx_buf *in,
                              pfx_buf *out)
{
    out->len = 0;
    size_t at = 0, b, e;
    match_iter it = { 0 };
    for (;;) {
        bool found = false;
        if (nm->re) {
            pfx_status st =
                next_match(nm->re, nm->source, sc, in->data, in->len, &it, &found, &b, &e);
            if (st != PFX_SUCCESS)
                return st;
        } else if (nm->pattern_len) { /* an empty string pattern matches nothing, as in HF */
            const char *hit = memmem(in->data + at, in->len - at, nm->pattern, nm->pattern_len);
            found = hit != NULL;
            b = found ? (size_t)(hit - in->data) : 0;
            e = b + nm->pattern_len;
        }
        if (!found)
            break;
        if (!pfx_buf_add(out, in->data + at, b - at) || !pfx_buf_add(out, nm->text, nm->text_len))
            return oom();
        at = e;
    }
    if (!pfx_buf_add(out, in->data + at, in->len - at))
        return oom();
    return PFX_SUCCESS;
}

/* NFC / NFD / NFKC / NFKD through utf8proc, run by run of valid UTF-8;
 * invalid bytes pass through unchanged. */
static pfx_status unicode_form(const pfx_norm *nm, const pfx_buf *in, pfx_buf *out)
{
    out->len = 0;
    const unsigned char *s = (const unsigned char *)in->data;
    for (size_t at = 0; at < in->len;) {
        size_t end = at;
        uint32_t cp;
        while (end < in->len) {
            size_t cl = pfx_utf8_next(s + end, in->len - end, &cp);
            if (cp == 0xffffffffu)
                break;
            end += cl;
        }
        if (end > at) {
            utf8proc_uint8_t *mapped = NULL;
            utf8proc_ssize_t n = utf8proc_map(s + at, (utf8proc_ssize_t)(end - at), &mapped,
                                              (utf8proc_option_t)nm->unicode_options);
            bool ok = n >= 0 && pfx_buf_add(out, mapped, (size_t)n);
            free(mapped);
            if (!ok)
                return n == UTF8PROC_ERROR_NOMEM || n >= 0
                           ? oom()
                           : pfx_error(NULL, PFX_ERROR_FORMAT, "tokenizer: normalizer: %s",
                                       utf8proc_errmsg(n));
            at = end;
        }
        if (at < in->len) { /* one invalid byte */
            if (!pfx_buf_add(out, s + at, 1))
                return oom();
            at++;
        }
    }
    return PFX_SUCCESS;
}

/* Lowercase (Rust's char::to_lowercase: the simple mapping, and U+0130 to
 * "i" U+0307), StripAccents (drops marks: Mn, Mc, Me) and Strip (White_Space
 * at either end); invalid bytes pass through unchanged. */
static pfx_status per_character(const pfx_norm *nm, const pfx_buf *in, pfx_buf *out)
{
    out->len = 0;
    const unsigned char *s = (const unsigned char *)in->data;
    size_t b = 0, e = in->len;
    uint32_t cp;
    if (nm->kind == PFX_NORM_STRIP) {
        while (nm->strip_left && b < e) {
            size_t cl = pfx_utf8_next(s + b, e - b, &cp);
            if (!pfx_is_white_space(cp))
                break;
            b += cl;
        }
        while (nm->strip_right && e > b) {
            size_t c = e - 1;
            while (c > b && e - c < 4 && (s[c] & 0xc0) == 0x80)
                c--;
            if (pfx_utf8_next(s + c, e - c, &cp) != e - c || !pfx_is_white_space(cp))
                break;
            e = c;
        }
        return pfx_buf_add(out, s + b, e - b) ? PFX_SUCCESS : oom();
    }
    for (size_t i = 0; i < in->len;) {
        size_t cl = pfx_utf8_next(s + i, in->len - i, &cp);
        bool ok = true;
        if (cp == 0xffffffffu) {
            ok = pfx_buf_add(out, s + i, 1);
        } else if (nm->kind == PFX_NORM_STRIP_ACCENTS) {
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
            if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_MC &&
                cat != UTF8PROC_CATEGORY_ME)
                ok = pfx_buf_add(out, s + i, cl);
        } else if (cp == 0x130) {
            ok = pfx_buf_add(out, "i\xcc\x87", 3);
        } else {
            utf8proc_uint8_t u[4];
            utf8proc_ssize_t n = utf8proc_encode_char(utf8proc_tolower((utf8proc_int32_t)cp), u);
            ok = pfx_buf_add(out, u, (size_t)n);
        }
        if (!ok)
            return oom();
        i += cl;
    }
    return PFX_SUCCESS;
}

pfx_status pfx_normalize(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const char *s, size_t n,
                         pfx_buf *cur)
{
    cur->len = 0;
    if (!pfx_buf_add(cur, s, n))
        return oom();
    pfx_buf tmp = { 0 };
    pfx_status st = PFX_SUCCESS;
    for (size_t k = 0; k < tok->norm_count && st == PFX_SUCCESS; k++) {
        const pfx_norm *nm = &tok->norms[k];
        tmp.len = 0;
        if (nm->kind == PFX_NORM_PREPEND) {
            if (cur->len == 0)
                continue;
            if (!pfx_buf_add(&tmp, nm->text, nm->text_len) ||
                !pfx_buf_add(&tmp, cur->data, cur->len))
                st = oom();
        } else if (nm->kind == PFX_NORM_UNICODE) {
            st = unicode_form(nm, cur, &tmp);
        } else if (nm->kind != PFX_NORM_REPLACE) {
            st = per_character(nm, cur, &tmp);
        } else {
            st = replace_all(nm, sc, cur, &tmp);
        }
        if (st == PFX_SUCCESS) {
            pfx_buf swap = *cur;
            *cur = tmp;
            tmp = swap;
        }
    }
    pfx_buf_free(&tmp);
    return st;
}

/* ---- added tokens ---- */
/* Whether the character at s (of the n bytes left) is a word character. Only
 * that character goes to PCRE2: it checks the UTF-8 of its whole subject
 * per call, and the rest of the text made every test cost its length. */
static bool is_word_char(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const char *s, size_t n)
{
    uint32_t cp;
    size_t len = pfx_utf8_next((const unsigned char *)s, n, &cp);
    return pcre2_match(tok->word_re, (PCRE2_SPTR)s, len ? len : 1, 0, PCRE2_ANCHORED, sc->md,
                       NULL) >= 0;
}

/* Start of the last character of [s, s+n). */
static size_t last_char(const char *s, size_t n)
{
    size_t i = n - 1;
    while (i > 0 && n - i < 4 && ((unsigned char)s[i] & 0xc0) == 0x80)
        i--;
    uint32_t cp;
    return pfx_utf8_next((const unsigned char *)s + i, n - i, &cp) == n - i ? i : n - 1;
}

/* Leftmost-longest added token in [from, n) of s; its index or -1. */
static long find_added(const pfx_tokenizer *tok, bool normalized, const char *s, size_t n,
                       size_t from, size_t *at)
{
    const uint32_t *bucket = tok->added_bucket[normalized];
    if (bucket[256] == bucket[0])
        return -1; /* no token of this kind */
    for (size_t i = from; i < n; i++) {
        unsigned c = (unsigned char)s[i];
        for (uint32_t k = bucket[c]; k < bucket[c + 1]; k++) {
            const pfx_added *a = &tok->added[tok->added_order[k]];
            if (a->pattern_len <= n - i && memcmp(a->pattern, s + i, a->pattern_len) == 0) {
                *at = i;
                return (long)tok->added_order[k]; /* the longest: buckets are longest first */
            }
        }
    }
    return -1;
}

static pfx_status split_added_one(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const char *s,
                                  size_t n, bool first, bool normalized, pfx_pieces *out)
{
    size_t start_offset = 0, from = 0, at;
    long k;
    while (from < n && (k = find_added(tok, normalized, s, n, from, &at)) >= 0) {
        const pfx_added *a = &tok->added[k];
        size_t b = at, e = at + a->pattern_len;
        from = e;
        if (a->single_word) {
            bool left_ok =
                b == 0 || !is_word_char(tok, sc, s + last_char(s, b), b - last_char(s, b));
            bool right_ok = e == n || !is_word_char(tok, sc, s + e, n - e);
            if (!left_ok || !right_ok)
                continue;
        }
        if (a->lstrip) {
            size_t nb = b;
            while (nb > start_offset) {
                size_t c = last_char(s, nb);
                uint32_t cp;
                pfx_utf8_next((const unsigned char *)s + c, nb - c, &cp);
                if (!pfx_is_white_space(cp))
                    break;
                nb = c;
            }
            b = nb;
        }
        if (a->rstrip) {
            while (e < n) {
                uint32_t cp;
                size_t cl = pfx_utf8_next((const unsigned char *)s + e, n - e, &cp);
                if (!pfx_is_white_space(cp))
                    break;
                e += cl;
            }
            from = e;
        }
        if (b > start_offset && !pfx_pieces_add(out, s + start_offset, b - start_offset, -1,
                                                first && start_offset == 0))
            return oom();
        if (!pfx_pieces_add(out, s + b, e - b, a->id, false))
            return oom();
        start_offset = e;
    }
    if (start_offset < n &&
        !pfx_pieces_add(out, s + start_offset, n - start_offset, -1, first && start_offset == 0))
        return oom();
    return PFX_SUCCESS;
}

pfx_status pfx_split_added(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const pfx_pieces *in,
                           bool normalized, bool normalize_first, pfx_pieces *out)
{
    pfx_buf norm = { 0 };
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; i < in->count && st == PFX_SUCCESS; i++) {
        const pfx_piece *p = &in->p[i];
        const char *s = in->text.data + p->off;
        if (p->added >= 0) {
            if (!pfx_pieces_add(out, s, p->len, p->added, false))
                st = oom();
            continue;
        }
        size_t n = p->len;
        if (normalize_first && tok->norm_count) {
            st = pfx_normalize(tok, sc, s, n, &norm);
            s = norm.data;
            n = norm.len;
        }
        if (st == PFX_SUCCESS && n)
            st = split_added_one(tok, sc, s, n, p->first, normalized, out);
    }
    pfx_buf_free(&norm);
    return st;
}

/* ---- pre-tokenizers ---- */
static pfx_status byte_level(const pfx_pretok *pt, pfx_encode_scratch *sc, const pfx_piece *p,
                             const char *s, pfx_pieces *out, spans *v, pfx_buf *tmp)
{
    tmp->len = 0;
    if (pt->add_prefix_space && (p->len == 0 || s[0] != ' ') && !pfx_buf_add(tmp, " ", 1))
        return oom();
    if (!pfx_buf_add(tmp, s, p->len))
        return oom();
    size_t first_new = out->count;
    pfx_status st;
    if (pt->re) {
        st = split_piece(pt, sc, tmp->data, tmp->len, p->first, false, PFX_SPLIT_ISOLATED, out, v);
    } else {
        st = pfx_pieces_add(out, tmp->data, tmp->len, -1, p->first) ? PFX_SUCCESS : oom();
    }
    if (st != PFX_SUCCESS)
        return st;
    /* Every byte of the new pieces through the table, rewritten at the end. */
    for (size_t k = first_new; k < out->count; k++) {
        pfx_piece *q = &out->p[k];
        size_t off = out->text.len;
        for (size_t i = 0; i < q->len; i++) {
            size_t cl;
            const char *u = pfx_byte_to_utf8((unsigned char)out->text.data[q->off + i], &cl);
            if (!pfx_buf_add(&out->text, u, cl))
                return oom();
        }
        q->len = out->text.len - off;
        q->off = off;
    }
    return PFX_SUCCESS;
}

static pfx_status metaspace(const pfx_pretok *pt, const pfx_piece *p, const char *s,
                            pfx_pieces *out, pfx_buf *tmp)
{
    tmp->len = 0;
    for (size_t i = 0; i < p->len; i++) {
        bool ok =
            s[i] == ' ' ? pfx_buf_add(tmp, pt->repl, pt->repl_len) : pfx_buf_add(tmp, s + i, 1);
        if (!ok)
            return oom();
    }
    bool starts = tmp->len >= pt->repl_len && memcmp(tmp->data, pt->repl, pt->repl_len) == 0;
    if (!starts &&
        (pt->prepend == PFX_PREPEND_ALWAYS || (pt->prepend == PFX_PREPEND_FIRST && p->first))) {
        pfx_buf pre = { 0 };
        bool ok =
            pfx_buf_add(&pre, pt->repl, pt->repl_len) && pfx_buf_add(&pre, tmp->data, tmp->len);
        pfx_buf_free(tmp);
        *tmp = pre;
        if (!ok)
            return oom();
    }
    if (!pt->split)
        return pfx_pieces_add(out, tmp->data, tmp->len, -1, p->first) ? PFX_SUCCESS : oom();
    /* Split with MergedWithNext: each piece starts at a replacement. */
    size_t b = 0;
    for (size_t i = 1; i + pt->repl_len <= tmp->len; i++) {
        if (memcmp(tmp->data + i, pt->repl, pt->repl_len) != 0)
            continue;
        if (!pfx_pieces_add(out, tmp->data + b, i - b, -1, p->first && b == 0))
            return oom();
        b = i;
    }
    if (b < tmp->len && !pfx_pieces_add(out, tmp->data + b, tmp->len - b, -1, p->first && b == 0))
        return oom();
    return PFX_SUCCESS;
}

pfx_status pfx_pretokenize(const pfx_tokenizer *tok, const pfx_pretok *pt, pfx_encode_scratch *sc,
                           const pfx_pieces *in, pfx_pieces *out)
{
    (void)tok;
    spans v = { 0 };
    pfx_buf tmp = { 0 };
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; i < in->count && st == PFX_SUCCESS; i++) {
        const pfx_piece *p = &in->p[i];
        const char *s = in->text.data + p->off;
        if (p->added >= 0) {
            st = pfx_pieces_add(out, s, p->len, p->added, false) ? PFX_SUCCESS : oom();
        } else if (pt->kind == PFX_PRE_BYTE_LEVEL) {
            st = byte_level(pt, sc, p, s, out, &v, &tmp);
        } else if (pt->kind == PFX_PRE_METASPACE) {
            st = metaspace(pt, p, s, out, &tmp);
        } else if (!pt->re) { /* an empty string pattern matches nothing, as in HF */
            st = pfx_pieces_add(out, s, p->len, -1, p->first) ? PFX_SUCCESS : oom();
        } else {
            st = split_piece(pt, sc, s, p->len, p->first, pt->invert, pt->behavior, out, &v);
        }
    }
    free(v.s);
    pfx_buf_free(&tmp);
    return st;
}
