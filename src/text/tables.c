/* The tokenizer's tables: a growable byte buffer, the string -> id map of the
 * vocabulary and the (id, id) -> merge map, both open addressing. */
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"

bool pfx_buf_reserve(pfx_buf *b, size_t extra)
{
    if (b->cap - b->len > extra)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len <= extra) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p)
        return false;
    b->data = p;
    b->cap = cap;
    return true;
}

bool pfx_buf_add(pfx_buf *b, const void *data, size_t n)
{
    if (!pfx_buf_reserve(b, n))
        return false;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0; /* reserve keeps one byte spare */
    return true;
}

void pfx_buf_free(pfx_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static bool strmap_grow(pfx_strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint32_t *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return false;
    for (size_t e = 0; e < m->count; e++) {
        size_t i = hash_bytes(m->keys.data + m->entries[e].off, m->entries[e].len) & (cap - 1);
        while (slots[i])
            i = (i + 1) & (cap - 1);
        slots[i] = (uint32_t)(e + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

static size_t strmap_find(const pfx_strmap *m, const char *key, size_t len, bool *found)
{
    size_t i = hash_bytes(key, len) & (m->cap - 1);
    while (m->slots[i]) {
        const struct pfx_strmap_entry *e = &m->entries[m->slots[i] - 1];
        if (e->len == len && memcmp(m->keys.data + e->off, key, len) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & (m->cap - 1);
    }
    *found = false;
    return i;
}

bool pfx_strmap_put(pfx_strmap *m, const char *key, size_t len, int32_t value)
{
    if ((m->count + 1) * 2 > m->cap && !strmap_grow(m))
        return false;
    if (m->count >= UINT32_MAX - 1)
        return false;
    bool found;
    size_t i = strmap_find(m, key, len, &found);
    if (found) {
        m->entries[m->slots[i] - 1].value = value;
        return true;
    }
    if (m->count == m->entries_cap) {
        size_t cap = m->entries_cap ? m->entries_cap * 2 : 256;
        void *p = realloc(m->entries, cap * sizeof(*m->entries));
        if (!p)
            return false;
        m->entries = p;
        m->entries_cap = cap;
    }
    size_t off = m->keys.len;
    if (len >= UINT32_MAX - off || !pfx_buf_add(&m->keys, key, len) ||
        !pfx_buf_add(&m->keys, "", 1))
        return false;
    m->entries[m->count] = (struct pfx_strmap_entry){ (uint32_t)off, (uint32_t)len, value };
    m->slots[i] = (uint32_t)(++m->count);
    return true;
}

int32_t pfx_strmap_get(const pfx_strmap *m, const char *key, size_t len)
{
    if (!m->cap)
        return -1;
    bool found;
    size_t i = strmap_find(m, key, len, &found);
    return found ? m->entries[m->slots[i] - 1].value : -1;
}

const char *pfx_strmap_key(const pfx_strmap *m, size_t entry, size_t *len)
{
    *len = m->entries[entry].len;
    return m->keys.data + m->entries[entry].off;
}

void pfx_strmap_free(pfx_strmap *m)
{
    free(m->slots);
    free(m->entries);
    pfx_buf_free(&m->keys);
    memset(m, 0, sizeof(*m));
}

static uint64_t pair_key(int32_t a, int32_t b)
{
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

static size_t pair_hash(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

bool pfx_pairmap_put(pfx_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
    if ((m->count + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        struct pfx_pair_slot *slots = malloc(cap * sizeof(*slots));
        if (!slots)
            return false;
        for (size_t i = 0; i < cap; i++)
            slots[i].id = -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (m->slots[i].id < 0)
                continue;
            size_t j = pair_hash(m->slots[i].key, cap);
            while (slots[j].id >= 0)
                j = (j + 1) & (cap - 1);
            slots[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    uint64_t k = pair_key(a, b);
    size_t j = pair_hash(k, m->cap);
    while (m->slots[j].id >= 0 && m->slots[j].key != k)
        j = (j + 1) & (m->cap - 1);
    if (m->slots[j].id < 0)
        m->count++;
    /* A repeated pair keeps its last rank, as HF's map of merges does. */
    m->slots[j] = (struct pfx_pair_slot){ k, rank, id };
    return true;
}

const struct pfx_pair_slot *pfx_pairmap_get(const pfx_pairmap *m, int32_t a, int32_t b)
{
    if (!m->cap)
        return NULL;
    uint64_t k = pair_key(a, b);
    size_t j = pair_hash(k, m->cap);
    while (m->slots[j].id >= 0) {
        if (m->slots[j].key == k)
            return &m->slots[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void pfx_pairmap_free(pfx_pairmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}
