/* BPE of one pre-tokenized word, as HF tokenizers' Word::merge_all does it:
 * symbols in a linked list, candidate merges in a min-heap by (rank,
 * position); a popped merge that no longer matches its pair is skipped. Also
 * the byte-level table and UTF-8 helpers. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"

/* ---- GPT-2's byte <-> unicode table ---- */
static char byte_utf8[256][3];
static unsigned char byte_utf8_len[256];
static int16_t cp_byte[324];
static pthread_once_t byte_once = PTHREAD_ONCE_INIT;

static void byte_level_build(void)
{
    /* Printable bytes map to themselves, the other 68 to 256, 257, ... */
    unsigned next = 256;
    for (unsigned cp = 0; cp < 324; cp++)
        cp_byte[cp] = -1;
    for (unsigned b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        unsigned cp = keep ? b : next++;
        cp_byte[cp] = (int16_t)b;
        if (cp < 0x80) {
            byte_utf8[b][0] = (char)cp;
            byte_utf8_len[b] = 1;
        } else {
            byte_utf8[b][0] = (char)(0xc0 | (cp >> 6));
            byte_utf8[b][1] = (char)(0x80 | (cp & 0x3f));
            byte_utf8_len[b] = 2;
        }
    }
}

void pfx_byte_level_init(void)
{
    pthread_once(&byte_once, byte_level_build);
}

const char *pfx_byte_to_utf8(unsigned char b, size_t *len)
{
    *len = byte_utf8_len[b];
    return byte_utf8[b];
}

int pfx_byte_from_codepoint(uint32_t cp)
{
    return cp < 324 ? cp_byte[cp] : -1;
}

bool pfx_is_white_space(uint32_t cp)
{
    /* Unicode's White_Space property (Rust's char::is_whitespace). */
    return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

/* ---- BPE ---- */
struct pfx_bpe_symbol {
    int32_t id;
    int32_t prev, next; /* -1: none */
    uint32_t len;       /* bytes; 0 once merged into its left neighbour */
};

struct pfx_bpe_merge {
    uint32_t rank;
    uint32_t pos;
    int32_t id;
};

bool pfx_ids_add(pfx_encode_scratch *sc, int32_t id)
{
    if (sc->id_count == sc->id_cap) {
        size_t cap = sc->id_cap ? sc->id_cap * 2 : 256;
        int32_t *p = realloc(sc->ids, cap * sizeof(*p));
        if (!p)
            return false;
        sc->ids = p;
        sc->id_cap = cap;
    }
    sc->ids[sc->id_count++] = id;
    return true;
}

static bool merge_less(const struct pfx_bpe_merge *a, const struct pfx_bpe_merge *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static bool heap_push(pfx_encode_scratch *sc, size_t *n, struct pfx_bpe_merge m)
{
    if (*n == sc->heap_cap) {
        size_t cap = sc->heap_cap ? sc->heap_cap * 2 : 64;
        void *p = realloc(sc->heap, cap * sizeof(*sc->heap));
        if (!p)
            return false;
        sc->heap = p;
        sc->heap_cap = cap;
    }
    struct pfx_bpe_merge *h = sc->heap;
    size_t i = (*n)++;
    while (i > 0 && merge_less(&m, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = m;
    return true;
}

static struct pfx_bpe_merge heap_pop(struct pfx_bpe_merge *h, size_t *n)
{
    struct pfx_bpe_merge top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && merge_less(&h[c + 1], &h[c]))
            c++;
        if (!merge_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

static bool sym_add(pfx_encode_scratch *sc, size_t *n, int32_t id, size_t len)
{
    if (*n == sc->sym_cap) {
        size_t cap = sc->sym_cap ? sc->sym_cap * 2 : 64;
        void *p = realloc(sc->sym, cap * sizeof(*sc->sym));
        if (!p)
            return false;
        sc->sym = p;
        sc->sym_cap = cap;
    }
    sc->sym[*n] = (struct pfx_bpe_symbol){ id, (int32_t)*n - 1, (int32_t)*n + 1, (uint32_t)len };
    (*n)++;
    return true;
}

static bool push_pair(const pfx_tokenizer *tok, pfx_encode_scratch *sc, size_t *heap_n, size_t pos,
                      int32_t a, int32_t b)
{
    const struct pfx_pair_slot *m = pfx_pairmap_get(&tok->merges, a, b);
    return !m || heap_push(sc, heap_n, (struct pfx_bpe_merge){ m->rank, (uint32_t)pos, m->id });
}

pfx_status pfx_bpe_word(const pfx_tokenizer *tok, pfx_encode_scratch *sc, const char *word,
                        size_t len)
{
    if (len == 0)
        return PFX_SUCCESS;
    if (len > INT32_MAX / 2)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_RANGE, "tokenizer: a word of %zu bytes", len);
    if (tok->ignore_merges) {
        int32_t id = pfx_strmap_get(&tok->vocab, word, len);
        if (id >= 0)
            return pfx_ids_add(sc, id) ? PFX_SUCCESS
                                       : pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "tokenizer: ids");
    }
    /* Initial symbols: one per character; unknown characters through byte
     * fallback, else the (fused) unk token, else dropped, as HF does. */
    size_t n = 0;
    int32_t unk_len = 0; /* pending unk bytes, 0: none */
    const unsigned char *s = (const unsigned char *)word;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t cl = pfx_utf8_next(s + i, len - i, &cp);
        int32_t id = pfx_strmap_get(&tok->vocab, word + i, cl);
        bool ok = true;
        if (id >= 0) {
            if (unk_len)
                ok = sym_add(sc, &n, tok->unk_id, (size_t)unk_len);
            unk_len = 0;
            ok = ok && sym_add(sc, &n, id, cl);
        } else {
            bool fell_back = false;
            if (tok->byte_fallback) {
                fell_back = true;
                for (size_t k = 0; k < cl; k++)
                    fell_back = fell_back && tok->byte_ids[s[i + k]] >= 0;
                for (size_t k = 0; fell_back && k < cl; k++)
                    ok = ok && sym_add(sc, &n, tok->byte_ids[s[i + k]], 1);
            }
            if (!fell_back && tok->unk_id >= 0) {
                if (unk_len && !tok->fuse_unk) {
                    ok = sym_add(sc, &n, tok->unk_id, (size_t)unk_len);
                    unk_len = 0;
                }
                unk_len += (int32_t)cl;
            }
        }
        if (!ok)
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "tokenizer: BPE symbols");
        i += cl;
    }
    if (unk_len && !sym_add(sc, &n, tok->unk_id, (size_t)unk_len))
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "tokenizer: BPE symbols");
    if (n == 0)
        return PFX_SUCCESS;
    sc->sym[n - 1].next = -1;

    struct pfx_bpe_symbol *sym = sc->sym;
    size_t heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (!push_pair(tok, sc, &heap_n, i, sym[i].id, sym[i + 1].id))
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "tokenizer: BPE queue");
    while (heap_n) {
        struct pfx_bpe_merge top = heap_pop(sc->heap, &heap_n);
        struct pfx_bpe_symbol *cur = &sym[top.pos];
        if (cur->len == 0 || cur->next < 0)
            continue;
        struct pfx_bpe_symbol right = sym[cur->next];
        const struct pfx_pair_slot *m = pfx_pairmap_get(&tok->merges, cur->id, right.id);
        if (!m || m->id != top.id)
            continue; /* expired: one side changed since it was queued */
        sym[cur->next].len = 0;
        cur->id = top.id;
        cur->len += right.len;
        cur->next = right.next;
        if (right.next >= 0)
            sym[right.next].prev = (int32_t)top.pos;
        bool ok = true;
        if (cur->prev >= 0)
            ok = push_pair(tok, sc, &heap_n, (size_t)cur->prev, sym[cur->prev].id, cur->id);
        if (ok && cur->next >= 0)
            ok = push_pair(tok, sc, &heap_n, top.pos, cur->id, sym[cur->next].id);
        if (!ok)
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "tokenizer: BPE queue");
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next)
        if (!pfx_ids_add(sc, sym[i].id))
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "tokenizer: ids");
    return PFX_SUCCESS;
}
