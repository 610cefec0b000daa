/* Token shards written from a text or JSONL file (data.h,
 * pfx_shards_write): the pre-training job's tokens, in llm.c's layout. */
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

/* One shard: the header, then `count` tokens of the stream from example
 * *e, offset *at within it (both advanced). */
static pfx_status write_shard(const char *path, const pfx_dataset *ds, size_t *e, size_t *at,
                              size_t count, unsigned width)
{
    pfx_output_file *f = NULL;
    pfx_status st = pfx_output_open(path, &f);
    if (st != PFX_SUCCESS)
        return st;
    uint8_t head[PFX_SHARD_HEADER_BYTES] = { 0 };
    put32(head, width == 2 ? PFX_SHARD_MAGIC : PFX_SHARD_MAGIC_U32);
    put32(head + 4, width == 2 ? 1 : 7);
    put32(head + 8, (uint32_t)count);
    FILE *out = pfx_output_stream(f);
    fwrite(head, 1, sizeof(head), out);
    uint8_t buf[1 << 14];
    size_t fill = 0;
    while (st == PFX_SUCCESS && count > 0) {
        const int32_t *ids, *labels;
        size_t len;
        if ((st = pfx_dataset_example(ds, *e, &ids, &labels, &len)))
            break;
        const size_t take = len - *at < count ? len - *at : count;
        for (size_t i = 0; i < take; i++) {
            const uint32_t v = (uint32_t)ids[*at + i];
            for (unsigned k = 0; k < width; k++)
                buf[fill++] = (uint8_t)(v >> (8 * k));
            if (fill + 4 > sizeof(buf)) {
                fwrite(buf, 1, fill, out);
                fill = 0;
            }
        }
        count -= take;
        if ((*at += take) == len) {
            ++*e;
            *at = 0;
        }
    }
    fwrite(buf, 1, fill, out);
    if (st != PFX_SUCCESS) {
        pfx_output_discard(&f);
        return st;
    }
    return pfx_output_commit(&f);
}

pfx_status pfx_shards_write(const char *path, const pfx_tokenizer *tok, const char *prefix,
                            size_t shard_tokens, pfx_shard_write_info *info)
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
    if (!shard_tokens)
        shard_tokens = PFX_SHARD_DEFAULT_TOKENS;
    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length = (size_t)1 << 24; /* documents whole, as the pre-training job reads them */
    o.append_eos = true;
    o.shuffle = false;
    pfx_dataset *ds = NULL;
    pfx_status st = pfx_dataset_load(path, tok, &o, &ds);
    if (st != PFX_SUCCESS)
        return st;
    pfx_dataset_info di;
    pfx_dataset_get_info(ds, &di);
    const unsigned width = pfx_tokenizer_vocab_size(tok) <= 65536 ? 2 : 4;
    const size_t shards = di.tokens ? (di.tokens + shard_tokens - 1) / shard_tokens : 1;
    size_t e = 0, at = 0;
    for (size_t i = 0; st == PFX_SUCCESS && i < shards; i++) {
        char *name = shard_name(prefix, i);
        const size_t left = di.tokens - i * shard_tokens;
        st = name ? write_shard(name, ds, &e, &at, left < shard_tokens ? left : shard_tokens, width)
                  : pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_shards_write: host memory");
        free(name);
    }
    size_t stale = 0; /* numbered on from the last one written: an earlier run's */
    while (st == PFX_SUCCESS) {
        char *name = shard_name(prefix, shards + stale);
        const bool there = name && access(name, F_OK) == 0;
        free(name);
        if (!there)
            break;
        stale++;
    }
    if (st == PFX_SUCCESS && info)
        *info = (pfx_shard_write_info){ .shards = shards,
                                        .tokens = di.tokens,
                                        .documents = di.examples,
                                        .token_bytes = width,
                                        .stale = stale };
    pfx_dataset_free(&ds);
    return st;
}
