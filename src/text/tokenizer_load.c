/* Loading tokenizers: tokenizer.json (HF tokenizers' format), GPT-2's
 * vocab.json + merges.txt, and a model folder with its tokenizer_config.json.
 * Every field is checked; a malformed one is PFX_ERROR_FORMAT naming the
 * file and the field, a kind this library does not run PFX_ERROR_UNSUPPORTED
 * naming the kind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "tokenizer_parse.h"

/* Ids may leave holes, but not millions of them (an embedding table's rows). */
#define MAX_ID_SLACK ((size_t)1 << 20)

pfx_tokenizer *pfx_tokenizer_alloc(void)
{
    pfx_byte_level_init();
    pfx_tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok)
        return NULL;
    tok->unk_id = -1;
    for (int i = 0; i < 256; i++)
        tok->byte_ids[i] = -1;
    for (int i = 0; i < 4; i++)
        tok->special[i] = -1;
    return tok;
}

void pfx_tokenizer_free(pfx_tokenizer **ptok)
{
    if (!ptok || !*ptok)
        return;
    pfx_tokenizer *tok = *ptok;
    pfx_strmap_free(&tok->vocab);
    pfx_pairmap_free(&tok->merges);
    for (size_t i = 0; i < tok->norm_count; i++) {
        free(tok->norms[i].text);
        free(tok->norms[i].pattern);
        free(tok->norms[i].source);
        pcre2_code_free(tok->norms[i].re);
    }
    free(tok->norms);
    for (size_t i = 0; i < tok->pretok_count; i++) {
        pcre2_code_free(tok->pretoks[i].re);
        free(tok->pretoks[i].source);
    }
    free(tok->pretoks);
    for (size_t i = 0; i < tok->dec_count; i++) {
        free(tok->decs[i].pattern);
        free(tok->decs[i].content);
    }
    free(tok->decs);
    for (size_t i = 0; i < tok->added_count; i++) {
        if (tok->added[i].pattern != tok->added[i].content)
            free(tok->added[i].pattern);
        free(tok->added[i].content);
    }
    free(tok->added);
    free(tok->added_order);
    free(tok->prefix_ids);
    free(tok->suffix_ids);
    free(tok->id_token);
    free(tok->id_len);
    free(tok->id_added);
    pcre2_code_free(tok->word_re);
    free(tok);
    *ptok = NULL;
}

/* ---- tables once everything is in ---- */
/* What the bucket order compares, copied out so that the comparison needs
 * no context (qsort has no argument for it). */
typedef struct added_key {
    bool normalized;
    unsigned char first;
    size_t len;
    uint32_t index;
} added_key;

static int added_cmp(const void *pa, const void *pb)
{
    const added_key *a = pa, *b = pb;
    if (a->normalized != b->normalized)
        return a->normalized ? 1 : -1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index; /* the first added wins a tie */
}

/* The bucket index find_added scans; tokens with an empty pattern never match. */
static pfx_status index_added(pfx_tokenizer *tok, const char *label)
{
    tok->added_order = malloc((tok->added_count + 1) * sizeof(*tok->added_order));
    added_key *keys = malloc((tok->added_count + 1) * sizeof(*keys));
    if (!tok->added_order || !keys) {
        free(keys);
        return pfx_tok_oom(label);
    }
    size_t n = 0;
    for (size_t k = 0; k < tok->added_count; k++) {
        const pfx_added *a = &tok->added[k];
        if (a->pattern_len)
            keys[n++] = (added_key){ a->normalized, (unsigned char)a->pattern[0], a->pattern_len,
                                     (uint32_t)k };
    }
    qsort(keys, n, sizeof(*keys), added_cmp);
    for (size_t k = 0; k < n; k++)
        tok->added_order[k] = keys[k].index;
    free(keys);
    memset(tok->added_bucket, 0, sizeof(tok->added_bucket));
    for (size_t k = 0; k < n; k++) {
        const pfx_added *a = &tok->added[tok->added_order[k]];
        tok->added_bucket[a->normalized][(unsigned char)a->pattern[0] + 1]++;
    }
    /* Prefix sums; the normalized buckets start after the others. */
    uint32_t at = 0;
    for (int nz = 0; nz < 2; nz++) {
        for (int b = 0; b <= 256; b++) {
            uint32_t c = b < 256 ? tok->added_bucket[nz][b + 1] : 0;
            tok->added_bucket[nz][b] = at;
            at += c;
        }
    }
    return PFX_SUCCESS;
}

pfx_status pfx_tokenizer_finish(pfx_tokenizer *tok, const char *label)
{
    size_t max_id = 0, count = tok->vocab.count + tok->added_count;
    bool any = false;
    for (size_t e = 0; e < tok->vocab.count; e++) {
        any = true;
        if ((size_t)tok->vocab.entries[e].value > max_id)
            max_id = (size_t)tok->vocab.entries[e].value;
    }
    for (size_t k = 0; k < tok->added_count; k++) {
        any = true;
        if ((size_t)tok->added[k].id > max_id)
            max_id = (size_t)tok->added[k].id;
    }
    if (!any)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: the vocabulary is empty", label);
    if (max_id >= count + MAX_ID_SLACK)
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: id %zu is far beyond the %zu tokens (holes of "
                         "more than %zu ids)",
                         label, max_id, count, MAX_ID_SLACK);
    tok->vocab_size = max_id + 1;
    tok->id_token = calloc(tok->vocab_size, sizeof(*tok->id_token));
    tok->id_len = calloc(tok->vocab_size, sizeof(*tok->id_len));
    tok->id_added = calloc(tok->vocab_size, sizeof(*tok->id_added));
    if (!tok->id_token || !tok->id_len || !tok->id_added)
        return pfx_tok_oom(label);
    for (size_t e = 0; e < tok->vocab.count; e++) {
        int32_t id = tok->vocab.entries[e].value;
        if (tok->id_token[id])
            return pfx_error(NULL, PFX_ERROR_FORMAT,
                             "%s: the vocabulary gives id %d to both '%s' and "
                             "'%s'",
                             label, (int)id, tok->id_token[id],
                             pfx_strmap_key(&tok->vocab, e, &tok->id_len[id]));
        tok->id_token[id] = pfx_strmap_key(&tok->vocab, e, &tok->id_len[id]);
    }
    pfx_encode_scratch sc = { 0 };
    if (!pfx_scratch_regex_init(&sc, 0)) {
        pfx_scratch_regex_free(&sc);
        return pfx_tok_oom(label);
    }
    pfx_status st = PFX_SUCCESS;
    for (size_t k = 0; k < tok->added_count && st == PFX_SUCCESS; k++) {
        pfx_added *a = &tok->added[k];
        tok->id_added[a->id] = a->special ? 2 : 1;
        a->pattern = a->content;
        a->pattern_len = a->len;
        if (a->normalized && tok->norm_count) { /* matched as the normalizers rewrite it */
            pfx_buf nb = { 0 };
            pfx_scratch_regex_budget(&sc, a->len);
            st = pfx_normalize(tok, &sc, a->content, a->len, &nb);
            if (st == PFX_SUCCESS && !nb.data && !pfx_buf_add(&nb, "", 0))
                st = pfx_tok_oom(label);
            a->pattern = nb.data;
            a->pattern_len = nb.len;
            if (st != PFX_SUCCESS) {
                pfx_buf_free(&nb);
                a->pattern = a->content;
            }
        }
        /* HF's token string (id_to_token, decode) is the normalized content. */
        tok->id_token[a->id] = a->pattern;
        tok->id_len[a->id] = a->pattern_len;
    }
    pfx_scratch_regex_free(&sc);
    if (st != PFX_SUCCESS)
        return st;
    for (size_t i = 0; i < tok->prefix_count + tok->suffix_count; i++) {
        int32_t id =
            i < tok->prefix_count ? tok->prefix_ids[i] : tok->suffix_ids[i - tok->prefix_count];
        if ((size_t)id >= tok->vocab_size || !tok->id_token[id])
            return pfx_error(NULL, PFX_ERROR_FORMAT,
                             "%s: post_processor id %d is not a token of the "
                             "vocabulary",
                             label, (int)id);
    }
    if ((st = index_added(tok, label)))
        return st;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        tok->byte_ids[b] = pfx_strmap_get(&tok->vocab, name, 6);
    }
    /* regex-syntax's is_word_character (Unicode \w), which HF's single_word uses. */
    static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
    if (!(tok->word_re =
              pfx_regex_compile(word, PCRE2_ZERO_TERMINATED, false, label, "word class")))
        return PFX_ERROR_FORMAT;
    tok->special[PFX_TOKEN_UNK] = tok->unk_id;
    if (tok->prefix_count)
        tok->special[PFX_TOKEN_BOS] = tok->prefix_ids[0];
    tok->special[PFX_TOKEN_EOS] = pfx_tokenizer_token_to_id(tok, "<|endoftext|>");
    return PFX_SUCCESS;
}

/* ---- entry points ---- */
static pfx_status check_out(pfx_tokenizer **out, const char *fn)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    return PFX_SUCCESS;
}

/* The rule of every JSON reader (pfx_json_parse_object): no \u0000, no key
 * twice. */
static pfx_status parse_json(const unsigned char *data, size_t size, const char *label,
                             cJSON **root)
{
    if (!pfx_utf8_valid(data, size)) {
        *root = NULL;
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not UTF-8 text (or holds a NUL byte)", label);
    }
    return pfx_json_parse_object(NULL, label, data, size, root);
}

PFX_API pfx_status pfx_tokenizer_load_json_memory(const void *data, size_t size, const char *label,
                                                  pfx_tokenizer **out)
{
    pfx_status st = check_out(out, "pfx_tokenizer_load_json_memory");
    if (st != PFX_SUCCESS)
        return st;
    if (!data && size)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_tokenizer_load_json_memory: data is NULL");
    if (!label)
        label = "<memory>";
    const char *text = data ? data : "";
    if (!pfx_utf8_valid((const unsigned char *)text, size))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not UTF-8 text (or holds a NUL byte)", label);
    /* cJSON gets the text without model.vocab and model.merges (read from
     * the text itself): a tree of them would cost ten times the file */
    pfx_tok_streamed sv = { text, { 0, 0 }, { 0, 0 } };
    pfx_tokenizer_json_spans(text, size, &sv.vocab, &sv.merges);
    char *rest = NULL;
    size_t rest_len = size;
    if (sv.vocab.e || sv.merges.e) {
        if (!(rest = malloc(size + 1)))
            return pfx_tok_oom(label);
        const pfx_json_span *cut[2] = { &sv.vocab, &sv.merges };
        if (sv.merges.e && (!sv.vocab.e || sv.merges.b < sv.vocab.b)) {
            cut[0] = &sv.merges;
            cut[1] = &sv.vocab;
        }
        size_t from = 0;
        rest_len = 0;
        for (int k = 0; k < 2; k++) {
            if (!cut[k]->e)
                continue;
            memcpy(rest + rest_len, text + from, cut[k]->b - from);
            rest_len += cut[k]->b - from;
            memcpy(rest + rest_len, cut[k] == &sv.vocab ? "{}" : "[]", 2);
            rest_len += 2;
            from = cut[k]->e;
        }
        memcpy(rest + rest_len, text + from, size - from);
        rest_len += size - from;
    }
    cJSON *root;
    st = parse_json((const unsigned char *)(rest ? rest : text), rest_len, label, &root);
    free(rest);
    if (st != PFX_SUCCESS)
        return st;
    pfx_tokenizer *tok = pfx_tokenizer_alloc();
    if (!tok) {
        cJSON_Delete(root);
        return pfx_tok_oom(label);
    }
    const cJSON *trunc = cJSON_GetObjectItemCaseSensitive(root, "truncation");
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(root, "padding");
    if (!pfx_json_absent(trunc) || !pfx_json_absent(pad))
        st = pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                       "%s: truncation / padding inside tokenizer.json "
                       "are not supported (the data set truncates and pads)",
                       label);
    if (!st)
        st = pfx_tok_parse_model(tok, cJSON_GetObjectItemCaseSensitive(root, "model"), label, &sv);
    if (!st)
        st =
            pfx_tok_parse_added(tok, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), label);
    if (!st)
        st = pfx_tok_parse_normalizer(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"),
                                      label, 0);
    if (!st)
        st = pfx_tok_parse_pretok(tok, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"),
                                  label, 0);
    if (!st)
        st =
            pfx_tok_parse_decoder(tok, cJSON_GetObjectItemCaseSensitive(root, "decoder"), label, 0);
    if (!st)
        st = pfx_tok_parse_post(tok, cJSON_GetObjectItemCaseSensitive(root, "post_processor"),
                                label, 0);
    if (!st)
        st = pfx_tokenizer_finish(tok, label);
    cJSON_Delete(root);
    if (st != PFX_SUCCESS) {
        pfx_tokenizer_free(&tok);
        return st;
    }
    *out = tok;
    return PFX_SUCCESS;
}

PFX_API pfx_status pfx_tokenizer_load_json(const char *path, pfx_tokenizer **out)
{
    pfx_status st = check_out(out, "pfx_tokenizer_load_json");
    if (st != PFX_SUCCESS)
        return st;
    if (!path)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_tokenizer_load_json: path is NULL");
    unsigned char *buf;
    size_t n = 0;
    if ((st = pfx_read_file(NULL, path, PFX_TOKENIZER_MAX_FILE, &buf, &n)))
        return st;
    st = pfx_tokenizer_load_json_memory(buf, n, path, out);
    free(buf);
    return st;
}

pfx_status pfx_parse_merges_txt(pfx_tokenizer *tok, const char *data, size_t size,
                                const char *label)
{
    uint32_t rank = 0;
    size_t line = 0;
    for (size_t at = 0; at < size; line++) {
        const char *s = data + at, *nl = memchr(s, '\n', size - at);
        size_t len = nl ? (size_t)(nl - s) : size - at;
        at += len + (nl ? 1 : 0);
        if (len && s[len - 1] == '\r')
            len--;
        if (line == 0 && len >= 8 && memcmp(s, "#version", 8) == 0)
            continue;
        const char *sp = memchr(s, ' ', len);
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)) || sp == s || sp + 1 == s + len)
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: line %zu is not \"a b\"", label,
                             line + 1);
        pfx_status st = pfx_add_merge(tok, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp + 1 - s),
                                      rank++, label);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

PFX_API pfx_status pfx_tokenizer_load_vocab_merges_memory(const void *vocab, size_t vocab_size,
                                                          const void *merges, size_t merges_size,
                                                          const char *label, pfx_tokenizer **out)
{
    static const char fn[] = "pfx_tokenizer_load_vocab_merges_memory";
    pfx_status st = check_out(out, fn);
    if (st != PFX_SUCCESS)
        return st;
    if ((!vocab && vocab_size) || (!merges && merges_size))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         vocab ? "merges" : "vocab");
    if (!label)
        label = "<memory>";
    char vlabel[1024], mlabel[1024];
    snprintf(vlabel, sizeof(vlabel), "%s (vocab.json)", label);
    snprintf(mlabel, sizeof(mlabel), "%s (merges.txt)", label);
    if (!pfx_utf8_valid(merges ? merges : (const void *)"", merges_size))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not UTF-8 text (or holds a NUL byte)",
                         mlabel);
    const char *vtext = vocab ? vocab : "";
    if (!pfx_utf8_valid((const unsigned char *)vtext, vocab_size))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: not UTF-8 text (or holds a NUL byte)",
                         vlabel);
    pfx_tokenizer *tok = pfx_tokenizer_alloc();
    if (!tok)
        return pfx_tok_oom(label);
    st = pfx_stream_vocab_json(tok, vtext, vocab_size, vlabel); /* no tree: a tenth of the memory */
    if (!st)
        st = pfx_parse_merges_txt(tok, merges ? merges : "", merges_size, mlabel);
    /* GPT-2's setup: ByteLevel without a prefix space, GPT-2's regex. */
    pfx_pretok pt = { .kind = PFX_PRE_BYTE_LEVEL };
    if (!st && !(pt.re = pfx_regex_compile(pfx_gpt2_pattern, PCRE2_ZERO_TERMINATED, false, label,
                                           "GPT-2 regex")))
        st = PFX_ERROR_FORMAT;
    if (!st && (!(pt.source = pfx_dup_bytes(pfx_gpt2_pattern, strlen(pfx_gpt2_pattern))) ||
                !pfx_grow_one((void **)&tok->pretoks, &tok->pretok_count, sizeof(*tok->pretoks)))) {
        pcre2_code_free(pt.re);
        free(pt.source);
        st = pfx_tok_oom(label);
    }
    if (!st) {
        tok->pretoks[0] = pt;
        tok->has_decoder = true;
        if (!pfx_grow_one((void **)&tok->decs, &tok->dec_count, sizeof(*tok->decs)))
            st = pfx_tok_oom(label);
    }
    int32_t eot = pfx_strmap_get(&tok->vocab, "<|endoftext|>", 13);
    if (!st && eot >= 0)
        st = pfx_tok_add_token(tok, eot, "<|endoftext|>", true, false, label);
    if (!st)
        st = pfx_tokenizer_finish(tok, label);
    if (st != PFX_SUCCESS) {
        pfx_tokenizer_free(&tok);
        return st;
    }
    *out = tok;
    return PFX_SUCCESS;
}

PFX_API pfx_status pfx_tokenizer_load_vocab_merges(const char *vocab_path, const char *merges_path,
                                                   pfx_tokenizer **out)
{
    static const char fn[] = "pfx_tokenizer_load_vocab_merges";
    pfx_status st = check_out(out, fn);
    if (st != PFX_SUCCESS)
        return st;
    if (!vocab_path || !merges_path)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         vocab_path ? "merges_path" : "vocab_path");
    unsigned char *v = NULL, *m = NULL;
    size_t vn, mn;
    if ((st = pfx_read_file(NULL, vocab_path, PFX_TOKENIZER_MAX_FILE, &v, &vn)))
        return st;
    if ((st = pfx_read_file(NULL, merges_path, PFX_TOKENIZER_MAX_FILE, &m, &mn))) {
        free(v);
        return st;
    }
    /* Messages name the vocabulary's path; merges lines carry their number. */
    st = pfx_tokenizer_load_vocab_merges_memory(v, vn, m, mn, vocab_path, out);
    free(v);
    free(m);
    return st;
}

/* A token name of tokenizer_config.json: a string or {"content": string}. */
static const char *config_token(const cJSON *cfg, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(it))
        it = cJSON_GetObjectItemCaseSensitive(it, "content");
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static pfx_status read_config(pfx_tokenizer *tok, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return PFX_SUCCESS; /* optional */
    unsigned char *buf;
    size_t n = 0;
    pfx_status st = pfx_read_file(NULL, path, 64u << 20, &buf, &n);
    if (st != PFX_SUCCESS)
        return st;
    cJSON *cfg;
    st = parse_json(buf, n, path, &cfg);
    free(buf);
    if (st != PFX_SUCCESS)
        return st;
    static const char *keys[] = { "bos_token", "eos_token", "pad_token", "unk_token" };
    for (int k = 0; k < 4 && st == PFX_SUCCESS; k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, keys[k]);
        if (pfx_json_absent(it))
            continue;
        const char *name = config_token(cfg, keys[k]);
        if (!name)
            st = pfx_error(NULL, PFX_ERROR_FORMAT,
                           "%s: %s is neither a string nor {\"content\": "
                           "string}",
                           path, keys[k]);
        else /* a name the tokenizer lacks: -1, as for no name */
            tok->special[k] = pfx_tokenizer_token_to_id(tok, name);
    }
    cJSON_Delete(cfg);
    return st;
}

PFX_API pfx_status pfx_tokenizer_load(const char *dir, pfx_tokenizer **out)
{
    pfx_status st = check_out(out, "pfx_tokenizer_load");
    if (st != PFX_SUCCESS)
        return st;
    if (!dir)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_tokenizer_load: dir is NULL");
    size_t n = strlen(dir) + 32;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return pfx_tok_oom(dir);
    }
    struct stat sb;
    snprintf(a, n, "%s/tokenizer.json", dir);
    if (stat(a, &sb) == 0) {
        st = pfx_tokenizer_load_json(a, out);
    } else {
        snprintf(a, n, "%s/vocab.json", dir);
        snprintf(b, n, "%s/merges.txt", dir);
        if (stat(a, &sb) == 0 && stat(b, &sb) == 0)
            st = pfx_tokenizer_load_vocab_merges(a, b, out);
        else
            st = pfx_error(NULL, PFX_ERROR_IO,
                           "'%s' has neither tokenizer.json nor vocab.json + "
                           "merges.txt",
                           dir);
    }
    if (st == PFX_SUCCESS) {
        snprintf(a, n, "%s/tokenizer_config.json", dir);
        st = read_config(*out, a);
        if (st != PFX_SUCCESS)
            pfx_tokenizer_free(out);
    }
    free(a);
    free(b);
    return st;
}
