/* The full-training job's Hugging Face folder, complete as save_pretrained
 * of a model and its tokenizer leaves it: config.json given what the
 * tokenizer knows and the config does not say (vocab_size, bos, eos and pad
 * ids: without them transformers falls back to GPT-2's 50256 and never
 * stops), and the tokenizer's files beside the weights, so that
 * from_pretrained, AutoTokenizer and `prefixcl generate --model OUT` open
 * the folder alone. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io_internal.h"
#include "model_internal.h"
#include "pretrain_internal.h"

#define CONFIG_MAX_BYTES ((size_t)1 << 22)

/* The tokenizer files save_pretrained leaves (those the folder has). */
static const char *const tokenizer_files[] = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "merges.txt",     "added_tokens.json",     "tokenizer.model",         "chat_template.jinja",
};

const char *pfx_pretrain_tokenizer_dir(const pfx_pretrain_config *c)
{
    return c->tokenizer_dir ? c->tokenizer_dir : c->model_dir ? c->model_dir : c->config_dir;
}

/* The tokenizer's BOS, else its EOS: GPT-2's convention, where
 * <|endoftext|> begins a text as it ends one (its tokenizer names it as
 * both); -1 without either. */
static int32_t bos_id(const pfx_tokenizer *t)
{
    const int32_t bos = pfx_tokenizer_special_id(t, PFX_TOKEN_BOS);
    return bos >= 0 ? bos : pfx_tokenizer_special_id(t, PFX_TOKEN_EOS);
}

/* root[key] = value when the config lacks it (absent or null) and value is
 * an id (>= 0); what was set is appended to `said`. False: host memory. */
static bool fill(cJSON *root, const char *key, long long value, char *said, size_t cap)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (value < 0 || (item && !cJSON_IsNull(item)))
        return true;
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    if (!cJSON_AddNumberToObject(root, key, (double)value))
        return false;
    const size_t used = strlen(said);
    snprintf(said + used, cap - used, "%s%s %lld", used ? ", " : "", key, value);
    return true;
}

/* config.json's text completed from the tokenizer into *out (malloc'ed;
 * the text itself, byte for byte, when nothing is missing). */
static pfx_status complete(pfx_pretrain_job *j, const char *label, const unsigned char *text,
                           size_t size, unsigned char **out, size_t *out_size, char *said,
                           size_t cap)
{
    cJSON *root = NULL;
    pfx_status st = pfx_json_parse_object(j->rt, label, text, size, &root);
    if (st != PFX_SUCCESS)
        return st;
    const pfx_tokenizer *t = j->tok;
    said[0] = '\0';
    const int32_t bos = t ? bos_id(t) : -1;
    const bool ok =
        !t || (fill(root, "vocab_size", (long long)pfx_tokenizer_vocab_size(t), said, cap) &&
               fill(root, "bos_token_id", bos, said, cap) &&
               fill(root, "eos_token_id", pfx_tokenizer_special_id(t, PFX_TOKEN_EOS), said, cap) &&
               fill(root, "pad_token_id", pfx_tokenizer_special_id(t, PFX_TOKEN_PAD), said, cap));
    char *printed = ok && said[0] ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!ok || (said[0] && !printed))
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    *out_size = printed ? strlen(printed) : size;
    *out = malloc(*out_size + 1);
    if (*out)
        memcpy(*out, printed ? (const unsigned char *)printed : text, *out_size);
    free(printed);
    return *out ? PFX_SUCCESS : pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
}

pfx_status pfx_pretrain_open_model(pfx_pretrain_job *j, pfx_pretrain_result *r)
{
    const pfx_pretrain_config *c = j->cfg;
    const char *dir = c->model_dir ? c->model_dir : c->config_dir;
    char *label = pfx_join_path(dir, "config.json");
    unsigned char *text = NULL, *done = NULL;
    size_t size = 0, done_size = 0;
    pfx_status st = label ? pfx_read_file(j->rt, label, CONFIG_MAX_BYTES, &text, &size)
                          : pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    if (st == PFX_SUCCESS)
        st = complete(j, label, text, size, &done, &done_size, r->config_filled,
                      sizeof(r->config_filled));
    free(text);
    free(label);
    if (st == PFX_SUCCESS && c->model_dir) {
        st = pfx_model_load(j->rt, dir, NULL, &j->model);
        if (st == PFX_SUCCESS) {
            pfx_model_set_config_text(j->model, done, done_size);
            done = NULL;
        }
    } else if (st == PFX_SUCCESS) {
        st = pfx_model_init_text(j->rt, dir, done, done_size, NULL, c->seed, &j->model);
    }
    free(done);
    return st;
}

/* A minimal tokenizer_config.json for a folder whose tokenizer has none:
 * the fast tokenizer of tokenizer.json with its special tokens, which
 * AutoTokenizer reads whatever the model type. */
static pfx_status write_tokenizer_config(pfx_pretrain_job *j, const char *path)
{
    static const struct {
        const char *key;
        pfx_special_token which;
    } special[] = { { "bos_token", PFX_TOKEN_BOS },
                    { "eos_token", PFX_TOKEN_EOS },
                    { "pad_token", PFX_TOKEN_PAD },
                    { "unk_token", PFX_TOKEN_UNK } };
    cJSON *root = cJSON_CreateObject();
    bool ok = root && cJSON_AddStringToObject(root, "tokenizer_class", "PreTrainedTokenizerFast") &&
              cJSON_AddNumberToObject(root, "model_max_length", (double)j->shape.max_positions);
    for (size_t i = 0; ok && i < sizeof(special) / sizeof(special[0]); i++) {
        const int32_t id = special[i].which == PFX_TOKEN_BOS
                               ? bos_id(j->tok)
                               : pfx_tokenizer_special_id(j->tok, special[i].which);
        const char *token = pfx_tokenizer_id_to_token(j->tok, id, NULL);
        ok = !token || cJSON_AddStringToObject(root, special[i].key, token);
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    pfx_status st = pfx_write_file(j->rt, path, text, strlen(text));
    free(text);
    return st;
}

pfx_status pfx_pretrain_write_tokenizer(pfx_pretrain_job *j)
{
    const char *from = pfx_pretrain_tokenizer_dir(j->cfg), *to = j->cfg->out_dir;
    char *a = realpath(from, NULL), *b = realpath(to, NULL);
    const bool same = a && b && strcmp(a, b) == 0;
    free(a);
    free(b);
    if (same)
        return PFX_SUCCESS;
    pfx_status st = PFX_SUCCESS;
    bool has_json = false, has_config = false;
    for (size_t i = 0; st == PFX_SUCCESS && i < sizeof(tokenizer_files) / sizeof(*tokenizer_files);
         i++) {
        char *src = pfx_join_path(from, tokenizer_files[i]);
        char *dst = pfx_join_path(to, tokenizer_files[i]);
        unsigned char *bytes = NULL;
        size_t size = 0;
        if (!src || !dst)
            st = pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
        else if (access(src, F_OK) == 0 && (st = pfx_read_file(j->rt, src, PFX_TOKENIZER_MAX_FILE,
                                                               &bytes, &size)) == PFX_SUCCESS) {
            st = pfx_write_file(j->rt, dst, bytes, size);
            has_json |= i == 0;
            has_config |= i == 1;
        }
        free(bytes);
        free(src);
        free(dst);
    }
    if (st == PFX_SUCCESS && has_json && !has_config && j->tok) {
        char *path = pfx_join_path(to, "tokenizer_config.json");
        st = path ? write_tokenizer_config(j, path)
                  : pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
        free(path);
    }
    return st;
}
