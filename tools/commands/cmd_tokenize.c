/* prefixcl tokenize: how a text tokenizes with a model folder's tokenizer
 * (the ids and their pieces, as transformers' convert_ids_to_tokens gives
 * them), its ids for --prompt-ids, the token count of a file, or a corpus
 * written as token shards for pretrain (data.h). No device. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common/cli.h"
#include "prefixcl/data.h"
#include "prefixcl/prefixcl.h"
#include "prefixcl/tokenizer.h"

/* The largest --file read (the tokenizer's input is held in memory). */
#define MAX_FILE_BYTES ((size_t)1 << 30)

static const cli_doc doc = {
    "prefixcl tokenize --model DIR (--text TEXT | --file FILE) [--ids | --count] [--no-special]\n"
    "prefixcl tokenize --model DIR --file FILE --out PREFIX [--shard-tokens N]",
    "By default one line per token: its id, a tab, its piece (\\n, \\t, \\r, \\\\ and other\n"
    "control bytes escaped). With --out, FILE (text, one document a line, or JSONL) is\n"
    "tokenized as pretrain reads it and written as PREFIX_000000.bin, ... in llm.c's layout\n"
    "(uint16 tokens, uint32 past a vocabulary of 65,536); pretrain --data 'PREFIX_*.bin'\n"
    "reads them.\n",
    NULL
};

/* The whole file, malloc'ed (NUL after the last byte). */
static char *read_all(const char *path, size_t *len)
{
    FILE *f;
    if (pfx_input_open(path, &f) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tokenize: --file: %s\n", pfx_last_error(NULL));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *more = cap < MAX_FILE_BYTES ? realloc(buf, 2 * cap + 1) : NULL;
            if (!more) {
                fprintf(stderr, "prefixcl tokenize: --file %s: more than %zu bytes%s\n", path, cap,
                        cap < MAX_FILE_BYTES ? " (out of host memory)" : "");
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        fprintf(stderr, "prefixcl tokenize: reading --file %s failed\n", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

/* A piece on one line: control bytes and the backslash escaped. */
static void print_piece(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '\\')
            fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

/* --out: the file as token shards. */
static int write_shards(const pfx_tokenizer *tok, const char *file, const char *prefix,
                        size_t shard_tokens)
{
    pfx_shard_write_info info;
    if (pfx_shards_write(file, tok, prefix, shard_tokens, &info) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tokenize: %s\n", pfx_last_error(NULL));
        return 1;
    }
    printf("wrote %zu shard%s %s_000000.bin%s: %zu tokens of %zu bytes, %zu documents\n",
           info.shards, info.shards == 1 ? "" : "s", prefix, info.shards > 1 ? " .." : "",
           info.tokens, info.token_bytes, info.documents);
    if (info.stale)
        fprintf(stderr,
                "prefixcl tokenize: warning: %zu shard%s numbered from %s_%06zu.bin on come from "
                "an earlier run: remove them, or the pattern '%s_*.bin' reads them too\n",
                info.stale, info.stale == 1 ? "" : "s", prefix, info.shards, prefix);
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *file = NULL;
    const char *prefix = NULL;
    size_t shard_tokens = PFX_SHARD_DEFAULT_TOKENS;
    bool ids_only = false, count_only = false, no_special = false;
    const cli_option opts[] = {
        { "--model", CLI_TEXT, &model, 0, 0, NULL, NULL, "DIR",
          "a folder with tokenizer.json (or vocab.json + merges.txt)", NULL },
        { "--text", CLI_TEXT, &text, 0, 0, NULL, NULL, "TEXT", "the text to tokenize", NULL },
        { "--file", CLI_TEXT, &file, 0, 0, NULL, NULL, "FILE", "a file's bytes, whole", NULL },
        { "--ids", CLI_FLAG, &ids_only, 0, 0, NULL, NULL, NULL,
          "the ids on one line (for generate --prompt-ids)", NULL },
        { "--count", CLI_FLAG, &count_only, 0, 0, NULL, NULL, NULL, "the number of tokens alone",
          NULL },
        { "--no-special", CLI_FLAG, &no_special, 0, 0, NULL, NULL, NULL,
          "without the tokens the tokenizer adds around a text (BOS ...)", NULL },
        { "--out", CLI_TEXT, &prefix, 0, 0, NULL, NULL, "PREFIX",
          "write --file as token shards PREFIX_000000.bin, ... (llm.c's layout)", NULL },
        { "--shard-tokens", CLI_SIZE, &shard_tokens, 1, PFX_SHARD_MAX_TOKENS, NULL, NULL, "N",
          "tokens a shard with --out", "100000000" },
    };
    const int parsed =
        cli_parse("tokenize", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    const bool special = !no_special;
    if (!model || !text == !file || (ids_only && count_only)) {
        fprintf(stderr, "prefixcl tokenize: --model and one of --text or --file are required%s\n\n",
                ids_only && count_only ? "; --ids and --count exclude each other" : "");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    if (prefix && (!file || ids_only || count_only || no_special)) {
        fprintf(stderr, "prefixcl tokenize: --out takes --file, and none of --ids, --count, "
                        "--no-special\n\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    pfx_tokenizer *tok = NULL;
    if (pfx_tokenizer_load(model, &tok) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tokenize: --model %s: %s\n", model, pfx_last_error(NULL));
        return 1;
    }
    if (prefix) {
        const int rc = write_shards(tok, file, prefix, shard_tokens);
        pfx_tokenizer_free(&tok);
        return rc;
    }
    size_t len = text ? strlen(text) : 0;
    char *bytes = file ? read_all(file, &len) : NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int status = 1;
    if ((file && !bytes) ||
        pfx_tokenizer_encode(tok, file ? bytes : text, len, special ? PFX_ENCODE_ADD_SPECIAL : 0u,
                             &ids, &n) != PFX_SUCCESS) {
        if (!file || bytes)
            fprintf(stderr, "prefixcl tokenize: %s\n", pfx_last_error(NULL));
        goto out;
    }
    if (count_only) {
        printf("%zu\n", n);
    } else if (ids_only) {
        for (size_t i = 0; i < n; i++)
            printf(i ? " %d" : "%d", (int)ids[i]);
        putchar('\n');
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t plen = 0;
            const char *piece = pfx_tokenizer_id_to_token(tok, ids[i], &plen);
            printf("%d\t", (int)ids[i]);
            print_piece(piece ? piece : "", piece ? plen : 0);
            putchar('\n');
        }
    }
    status = 0;
out:
    free(ids);
    free(bytes);
    pfx_tokenizer_free(&tok);
    return status;
}
