/* Encode and decode, and the tokenizer's accessors. Encode: added tokens,
 * normalizers, pre-tokenizers, BPE per word, the post-processor's tokens.
 * Decode: the tokens' strings through the decoder chain, as HF does, but
 * bytes are returned as they are (no U+FFFD for invalid UTF-8). */
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"

PFX_API size_t pfx_tokenizer_vocab_size(const pfx_tokenizer *tok)
{
    return tok ? tok->vocab_size : 0;
}

PFX_API int32_t pfx_tokenizer_token_to_id(const pfx_tokenizer *tok, const char *token)
{
    if (!tok || !token)
        return -1;
    size_t n = strlen(token);
    for (size_t k = 0; k < tok->added_count; k++)
        if (tok->added[k].len == n && memcmp(tok->added[k].content, token, n) == 0)
            return tok->added[k].id;
    return pfx_strmap_get(&tok->vocab, token, n);
}

PFX_API const char *pfx_tokenizer_id_to_token(const pfx_tokenizer *tok, int32_t id, size_t *len)
{
    if (!tok || id < 0 || (size_t)id >= tok->vocab_size || !tok->id_token[id])
        return NULL;
    if (len)
        *len = tok->id_len[id];
    return tok->id_token[id];
}

PFX_API bool pfx_tokenizer_is_special(const pfx_tokenizer *tok, int32_t id)
{
    return tok && id >= 0 && (size_t)id < tok->vocab_size && tok->id_added[id] == 2;
}

PFX_API int32_t pfx_tokenizer_special_id(const pfx_tokenizer *tok, pfx_special_token which)
{
    if (!tok || (unsigned)which > PFX_TOKEN_UNK)
        return -1;
    return tok->special[which];
}

static void scratch_free(pfx_encode_scratch *sc)
{
    pfx_scratch_regex_free(sc);
    pfx_pieces_free(&sc->a);
    pfx_pieces_free(&sc->b);
    free(sc->sym);
    free(sc->heap);
    free(sc->ids);
}

/* Text to pieces: added tokens matched on the raw text, the normalizers,
 * the added tokens matched on normalized text, the pre-tokenizers. *pieces
 * points into sc. */
static pfx_status pieces_of(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const char *text,
                            size_t len, pfx_pieces **pieces)
{
    if (!pfx_scratch_regex_init(sc, len) || !pfx_pieces_add(&sc->a, text, len, -1, true))
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_tokenizer_encode: host memory");
    pfx_pieces *in = &sc->a, *out = &sc->b, *t;
    pfx_status st = pfx_split_added(tok, sc, in, false, false, out);
    for (size_t k = 0; st == PFX_SUCCESS && k <= tok->pretok_count; k++) {
        t = in;
        in = out;
        out = t;
        pfx_pieces_clear(out);
        st = k == 0 ? pfx_split_added(tok, sc, in, true, true, out)
                    : pfx_pretokenize(tok, &tok->pretoks[k - 1], sc, in, out);
    }
    *pieces = out;
    return st;
}

/* The ids of the first `count` pieces, appended to sc->ids. */
static pfx_status ids_of(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const pfx_pieces *pieces,
                         size_t count)
{
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; i < count && st == PFX_SUCCESS; i++) {
        const pfx_piece *p = &pieces->p[i];
        if (p->added >= 0)
            st = pfx_ids_add(sc, p->added) ? PFX_SUCCESS
                                           : pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY,
                                                       "pfx_tokenizer_encode: host memory");
        else
            st = pfx_bpe_word(tok, sc, pieces->text.data + p->off, p->len);
    }
    return st;
}

static pfx_status encode(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const char *text,
                         size_t len, unsigned flags)
{
    pfx_pieces *out;
    pfx_status st = pieces_of(tok, sc, text, len, &out);
    if (st != PFX_SUCCESS)
        return st;
    if (flags & PFX_ENCODE_ADD_SPECIAL)
        for (size_t i = 0; i < tok->prefix_count; i++)
            if (!pfx_ids_add(sc, tok->prefix_ids[i]))
                return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY,
                                 "pfx_tokenizer_encode: host memory");
    st = ids_of(tok, sc, out, out->count);
    if (st == PFX_SUCCESS && (flags & PFX_ENCODE_ADD_SPECIAL))
        for (size_t i = 0; i < tok->suffix_count; i++)
            if (!pfx_ids_add(sc, tok->suffix_ids[i]))
                return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY,
                                 "pfx_tokenizer_encode: host memory");
    return st;
}

/* Pieces held back at the cut of a head: the last one may be cut short and
 * the one before may have been split by a lookahead that saw the cut. */
#define HEAD_PIECES_HELD 2

pfx_status pfx_tokenizer_encode_head(const pfx_tokenizer *tok, const char *text, size_t len,
                                     size_t want, int32_t **ids, size_t *count)
{
    *ids = NULL;
    *count = 0;
    /* a first guess of bytes for `want` tokens, grown fourfold until the
     * complete pieces give them (or the whole text is read) */
    size_t bytes = want < ((size_t)1 << 40) ? 16 * want + 4096 : len;
    for (;;) {
        if (bytes >= len)
            return pfx_tokenizer_encode(tok, text, len, 0, ids, count);
        size_t cut = bytes;
        while (cut > 0 && ((unsigned char)text[cut] & 0xc0) == 0x80)
            cut--; /* a character boundary */
        pfx_encode_scratch sc = { 0 };
        pfx_pieces *out;
        pfx_status st = pieces_of(tok, &sc, text, cut, &out);
        bool enough = false;
        if (st == PFX_SUCCESS && out->count > HEAD_PIECES_HELD) {
            st = ids_of(tok, &sc, out, out->count - HEAD_PIECES_HELD);
            enough = st == PFX_SUCCESS && sc.id_count >= want;
        }
        if (enough) {
            *ids = sc.ids;
            *count = sc.id_count;
            sc.ids = NULL;
        }
        scratch_free(&sc);
        if (st != PFX_SUCCESS || enough)
            return st;
        bytes = bytes > len / 4 ? len : 4 * bytes;
    }
}

PFX_API pfx_status pfx_tokenizer_encode(const pfx_tokenizer *tok, const char *text, size_t len,
                                        unsigned flags, int32_t **ids, size_t *count)
{
    static const char fn[] = "pfx_tokenizer_encode";
    if (ids)
        *ids = NULL;
    if (count)
        *count = 0;
    if (!tok || !ids || !count || (!text && len))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !tok     ? "tok"
                         : !ids   ? "ids"
                         : !count ? "count"
                                  : "text");
    if (flags & ~PFX_ENCODE_ADD_SPECIAL)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", fn, flags);
    pfx_encode_scratch sc = { 0 };
    pfx_status st = encode(tok, &sc, text ? text : "", len, flags);
    if (st == PFX_SUCCESS && !sc.ids) { /* no ids: still a valid array */
        if (pfx_ids_add(&sc, 0))
            sc.id_count = 0;
        else
            st = pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    }
    if (st == PFX_SUCCESS) {
        *ids = sc.ids;
        *count = sc.id_count;
        sc.ids = NULL;
    }
    scratch_free(&sc);
    return st;
}

/* ---- decoders: each rewrites the list of token strings ---- */
static bool starts(const char *s, size_t n, const char *p, size_t pn)
{
    return n >= pn && memcmp(s, p, pn) == 0;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The two characters of <0xNN> as Rust's u8::from_str_radix(.., 16) reads
 * them (HF's ByteFallback): two hex digits, or '+' and one; else -1. */
static int hex_byte(const char *h)
{
    int a = hex_digit(h[0]), b = hex_digit(h[1]);
    if (h[0] == '+')
        return b;
    return a < 0 || b < 0 ? -1 : a * 16 + b;
}

static bool dec_step(const pfx_dec *d, const pfx_pieces *in, pfx_pieces *out)
{
    pfx_buf one = { 0 };
    bool ok = true;
    if (d->kind == PFX_DEC_BYTE_LEVEL || d->kind == PFX_DEC_FUSE) {
        for (size_t i = 0; i < in->count && ok; i++) {
            const unsigned char *s = (const unsigned char *)in->text.data + in->p[i].off;
            size_t n = in->p[i].len, start = one.len;
            bool mapped = d->kind == PFX_DEC_BYTE_LEVEL;
            for (size_t k = 0; k < n && mapped && ok;) {
                uint32_t cp;
                size_t cl = pfx_utf8_next(s + k, n - k, &cp);
                int b = cp == 0xffffffffu ? -1 : pfx_byte_from_codepoint(cp);
                if (b < 0)
                    mapped = false;
                else
                    ok = pfx_buf_add(&one, &(char){ (char)b }, 1);
                k += cl;
            }
            if (!mapped) { /* a token outside the table is kept as it is */
                one.len = start;
                ok = ok && pfx_buf_add(&one, s, n);
            }
        }
        ok = ok && pfx_pieces_add(out, one.data ? one.data : "", one.len, -1, false);
        pfx_buf_free(&one);
        return ok;
    }
    if (d->kind == PFX_DEC_BYTE_FALLBACK) {
        for (size_t i = 0; i <= in->count && ok; i++) {
            const char *s = i < in->count ? in->text.data + in->p[i].off : "";
            size_t n = i < in->count ? in->p[i].len : 0;
            int v;
            if (n == 6 && starts(s, n, "<0x", 3) && s[5] == '>' && (v = hex_byte(s + 3)) >= 0) {
                ok = pfx_buf_add(&one, &(char){ (char)v }, 1);
                continue;
            }
            if (one.len) {
                ok = pfx_pieces_add(out, one.data, one.len, -1, false);
                one.len = 0;
            }
            if (i < in->count)
                ok = ok && pfx_pieces_add(out, s, n, -1, false);
        }
        pfx_buf_free(&one);
        return ok;
    }
    for (size_t i = 0; i < in->count && ok; i++) {
        const char *s = in->text.data + in->p[i].off;
        size_t n = in->p[i].len;
        one.len = 0;
        if (d->kind == PFX_DEC_STRIP) {
            size_t b = 0, e = n;
            for (size_t k = 0; k < d->start && starts(s + b, e - b, d->content, d->content_len);
                 k++)
                b += d->content_len;
            for (size_t k = 0; k < d->stop && e - b >= d->content_len &&
                               memcmp(s + e - d->content_len, d->content, d->content_len) == 0;
                 k++)
                e -= d->content_len;
            ok = pfx_pieces_add(out, s + b, e - b, -1, false);
            continue;
        }
        const char *pat = d->kind == PFX_DEC_METASPACE ? d->repl : d->pattern;
        size_t pn = d->kind == PFX_DEC_METASPACE ? d->repl_len : d->pattern_len;
        /* Metaspace drops every replacement of the first token (HF does). */
        bool drop = d->kind == PFX_DEC_METASPACE && i == 0 && d->prepend != PFX_PREPEND_NEVER;
        const char *rep = d->kind == PFX_DEC_METASPACE ? " " : d->content;
        size_t rn = drop ? 0 : d->kind == PFX_DEC_METASPACE ? 1 : d->content_len;
        for (size_t k = 0; k < n && ok;) {
            if (pn && starts(s + k, n - k, pat, pn)) {
                ok = pfx_buf_add(&one, rep, rn);
                k += pn;
            } else {
                ok = pfx_buf_add(&one, s + k, 1);
                k++;
            }
        }
        ok = ok && pfx_pieces_add(out, one.data ? one.data : "", one.len, -1, false);
    }
    pfx_buf_free(&one);
    return ok;
}

PFX_API pfx_status pfx_tokenizer_decode(const pfx_tokenizer *tok, const int32_t *ids, size_t count,
                                        unsigned flags, char **text, size_t *len)
{
    static const char fn[] = "pfx_tokenizer_decode";
    if (text)
        *text = NULL;
    if (len)
        *len = 0;
    if (!tok || !text || !len || (!ids && count))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !tok    ? "tok"
                         : !text ? "text"
                         : !len  ? "len"
                                 : "ids");
    if (flags & ~PFX_DECODE_SKIP_SPECIAL)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", fn, flags);
    for (size_t i = 0; i < count; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= tok->vocab_size || !tok->id_token[ids[i]])
            return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE,
                             "%s: ids[%zu] = %d is not in the vocabulary "
                             "(%zu ids)",
                             fn, i, (int)ids[i], tok->vocab_size);
    pfx_pieces a = { 0 }, b = { 0 }, *in = &a, *out = &b, *t;
    bool ok = true;
    for (size_t i = 0; i < count && ok; i++) {
        if ((flags & PFX_DECODE_SKIP_SPECIAL) && tok->id_added[ids[i]] == 2)
            continue;
        ok = pfx_pieces_add(in, tok->id_token[ids[i]], tok->id_len[ids[i]], -1, false);
    }
    for (size_t k = 0; k < tok->dec_count && ok; k++) {
        pfx_pieces_clear(out);
        ok = dec_step(&tok->decs[k], in, out);
        t = in;
        in = out;
        out = t;
    }
    pfx_buf res = { 0 };
    for (size_t i = 0; i < in->count && ok; i++) {
        if (i && !tok->has_decoder)
            ok = pfx_buf_add(&res, " ", 1); /* no decoder: HF joins with spaces */
        ok = ok && pfx_buf_add(&res, in->text.data + in->p[i].off, in->p[i].len);
    }
    ok = ok && pfx_buf_add(&res, "", 0);
    pfx_pieces_free(&a);
    pfx_pieces_free(&b);
    if (!ok) {
        pfx_buf_free(&res);
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    }
    *text = res.data;
    *len = res.len;
    return PFX_SUCCESS;
}
