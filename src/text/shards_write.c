/* Token shards written from a text or JSONL file (data.h,
 * pfx_shards_write): the pre-training job's tokens, in llm.c's layout. The
 * file is read and tokenized a piece of whole lines at a time (64 MiB), the
 * shards written as the tokens come: memory does not grow with the file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text_internal.h"
#include "prefixcl/io.h"

/* "<prefix>_NNNNNN.bin" (malloc'ed). */
static char *shard_name(const char *prefix, size_t i)
{
    const size_t len = strlen(prefix) + 32;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s_%06zu.bin", prefix, i);
    return s;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The shard being written: opened at its first token, its count patched
 * into the header when it is full or the stream ends. */
typedef struct writer {
    const char *prefix;
    size_t shard_tokens, width;
    pfx_output_file *f;
    size_t shards, in_shard, tokens, documents;
    uint8_t buf[1 << 14];
    size_t fill;
} writer;

static pfx_status shard_close(writer *w)
{
    if (!w->f)
        return PFX_SUCCESS;
    FILE *out = pfx_output_stream(w->f);
    fwrite(w->buf, 1, w->fill, out);
    w->fill = 0;
    uint8_t count[4];
    put32(count, (uint32_t)w->in_shard);
    if (fflush(out) != 0 || fseek(out, 8, SEEK_SET) != 0 || fwrite(count, 1, 4, out) != 4) {
        pfx_output_discard(&w->f);
        return pfx_error(NULL, PFX_ERROR_IO, "pfx_shards_write: writing shard %zu of %s failed",
                         w->shards - 1, w->prefix);
    }
    return pfx_output_commit(&w->f);
}

static pfx_status shard_open(writer *w)
{
    char *name = shard_name(w->prefix, w->shards);
    if (!name)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_shards_write: host memory");
    pfx_status st = pfx_output_open(name, &w->f);
    free(name);
    if (st != PFX_SUCCESS)
        return st;
    uint8_t head[PFX_SHARD_HEADER_BYTES] = { 0 };
    put32(head, w->width == 2 ? PFX_SHARD_MAGIC : PFX_SHARD_MAGIC_U32);
    put32(head + 4, w->width == 2 ? 1 : 7);
    fwrite(head, 1, sizeof(head), pfx_output_stream(w->f));
    w->shards++;
    w->in_shard = 0;
    return PFX_SUCCESS;
}

/* Appends ids to the stream of shards. */
static pfx_status put_ids(writer *w, const int32_t *ids, size_t n)
{
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; i < n && st == PFX_SUCCESS; i++) {
        if (w->f && w->in_shard == w->shard_tokens)
            st = shard_close(w);
        if (st == PFX_SUCCESS && !w->f)
            st = shard_open(w);
        if (st != PFX_SUCCESS)
            break;
        for (size_t k = 0; k < w->width; k++)
            w->buf[w->fill++] = (uint8_t)((uint32_t)ids[i] >> (8 * k));
        if (w->fill + 4 > sizeof(w->buf)) {
            fwrite(w->buf, 1, w->fill, pfx_output_stream(w->f));
            w->fill = 0;
        }
        w->in_shard++;
        w->tokens++;
    }
    return st;
}

static bool ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

static bool all_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return false;
    return true;
}

/* One piece of whole lines: tokenized as a data set, its examples appended. */
static pfx_status put_lines(writer *w, const char *text, size_t n, const char *path, size_t from,
                            const pfx_tokenizer *tok, const pfx_dataset_options *o)
{
    if (all_blank(text, n))
        return PFX_SUCCESS;
    char label[1200];
    snprintf(label, sizeof(label), from ? "%s, bytes from %zu" : "%s", path, from);
    pfx_dataset *ds = NULL;
    pfx_status st = pfx_dataset_load_memory(text, n, label, tok, o, &ds);
    if (st == PFX_ERROR_FORMAT && strstr(pfx_last_error(NULL), ": no examples (")) {
        return PFX_SUCCESS; /* every line of this piece too short to teach: skipped, as whole */
    }
    pfx_dataset_info di;
    if (st == PFX_SUCCESS)
        st = pfx_dataset_get_info(ds, &di);
    for (size_t e = 0; st == PFX_SUCCESS && e < di.examples; e++) {
        const int32_t *ids, *labels;
        size_t len;
        if ((st = pfx_dataset_example(ds, e, &ids, &labels, &len)) == PFX_SUCCESS)
            st = put_ids(w, ids, len);
        w->documents++;
    }
    pfx_dataset_free(&ds);
    return st;
}

pfx_status pfx_shards_write_chunked(const char *path, const pfx_tokenizer *tok, const char *prefix,
                                    size_t shard_tokens, size_t chunk_bytes,
                                    pfx_shard_write_info *info)
{
    if (!path || !tok || !prefix)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_shards_write: %s is NULL",
                         !path  ? "path"
                         : !tok ? "tok"
                                : "prefix");
    if (!*prefix)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "pfx_shards_write: prefix is empty");
    if (shard_tokens > PFX_SHARD_MAX_TOKENS)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_shards_write: shard_tokens %zu is past llm.c's %u (an int32 count)",
                         shard_tokens, PFX_SHARD_MAX_TOKENS);
    if (pfx_tokenizer_special_id(tok, PFX_TOKEN_EOS) < 0)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_shards_write: the tokenizer names no end-of-text token to separate "
                         "the documents");
    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length = (size_t)1 << 24; /* documents whole, as the pre-training job reads them */
    o.append_eos = true;
    o.shuffle = false;
    o.format =
        ends_with(path, ".jsonl") || ends_with(path, ".json") ? PFX_DATA_JSONL : PFX_DATA_TEXT;
    FILE *in = fopen(path, "rb");
    if (!in)
        return pfx_error(NULL, PFX_ERROR_IO, "%s: cannot read it: %s", path, strerror(errno));
    writer *w = calloc(1, sizeof(*w));
    size_t cap = chunk_bytes ? chunk_bytes : 1, len = 0, from = 0;
    char *buf = malloc(cap);
    pfx_status st = w && buf
                        ? PFX_SUCCESS
                        : pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_shards_write: host memory");
    if (w) {
        w->prefix = prefix;
        w->shard_tokens = shard_tokens ? shard_tokens : PFX_SHARD_DEFAULT_TOKENS;
        w->width = pfx_tokenizer_vocab_size(tok) <= 65536 ? 2 : 4;
    }
    /* whole lines a piece: the text up to the last newline read, the rest
     * carried into the next piece (a piece grows for a longer line) */
    for (bool end = false; st == PFX_SUCCESS && !end;) {
        if (len == cap) {
            char *more = realloc(buf, 2 * cap);
            if (!more) {
                st = pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_shards_write: host memory");
                break;
            }
            buf = more;
            cap *= 2;
        }
        const size_t got = fread(buf + len, 1, cap - len, in);
        len += got;
        end = got == 0;
        if (end && ferror(in))
            st = pfx_error(NULL, PFX_ERROR_IO, "%s: reading it failed", path);
        size_t cut = len;
        while (!end && cut > 0 && buf[cut - 1] != '\n')
            cut--;
        if (st == PFX_SUCCESS && cut > 0) {
            st = put_lines(w, buf, cut, path, from, tok, &o);
            memmove(buf, buf + cut, len - cut);
            len -= cut;
            from += cut;
        }
    }
    fclose(in);
    if (st == PFX_SUCCESS && w->documents == 0)
        st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: no examples", path);
    if (st == PFX_SUCCESS)
        st = shard_close(w);
    else if (w && w->f)
        pfx_output_discard(&w->f);
    size_t stale = 0; /* numbered on from the last one written: an earlier run's */
    while (st == PFX_SUCCESS) {
        char *name = shard_name(prefix, w->shards + stale);
        const bool there = name && access(name, F_OK) == 0;
        free(name);
        if (!there)
            break;
        stale++;
    }
    if (st == PFX_SUCCESS && info)
        *info = (pfx_shard_write_info){ .shards = w->shards,
                                        .tokens = w->tokens,
                                        .documents = w->documents,
                                        .token_bytes = w->width,
                                        .stale = stale };
    free(buf);
    free(w);
    return st;
}

pfx_status pfx_shards_write(const char *path, const pfx_tokenizer *tok, const char *prefix,
                            size_t shard_tokens, pfx_shard_write_info *info)
{
    return pfx_shards_write_chunked(path, tok, prefix, shard_tokens, (size_t)64 << 20, info);
}
