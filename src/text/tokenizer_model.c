/* tokenizer.json's "model" (BPE: vocabulary, merges, flags) and its
 * "added_tokens". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parse.h"

/* ---- model ---- */
pfx_status pfx_add_merge(pfx_tokenizer *tok, const char *a, size_t alen, const char *b, size_t blen,
                         uint32_t rank, const char *label)
{
    int32_t ia = pfx_strmap_get(&tok->vocab, a, alen), ib = pfx_strmap_get(&tok->vocab, b, blen);
    if (ia < 0 || ib < 0)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: merge %u: '%.*s' is not in the vocabulary",
                         label, rank, (int)(ia < 0 ? alen : blen), ia < 0 ? a : b);
    char stack[256];
    char *ab = alen + blen <= sizeof(stack) ? stack : malloc(alen + blen);
    if (!ab)
        return pfx_tok_oom(label);
    memcpy(ab, a, alen);
    memcpy(ab + alen, b, blen);
    int32_t id = pfx_strmap_get(&tok->vocab, ab, alen + blen);
    pfx_status st = PFX_SUCCESS;
    if (id < 0)
        st = pfx_error(NULL, PFX_ERROR_FORMAT,
                       "%s: merge %u: '%.*s' (the merged token) is not in "
                       "the vocabulary",
                       label, rank, (int)(alen + blen), ab);
    else if (!pfx_pairmap_put(&tok->merges, ia, ib, rank, id))
        st = pfx_tok_oom(label);
    if (ab != stack)
        free(ab);
    return st;
}

static pfx_status parse_vocab(pfx_tokenizer *tok, const cJSON *vocab, const char *label,
                              const char *where)
{
    if (!cJSON_IsObject(vocab))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s is not an object of token -> id", label,
                         where);
    for (const cJSON *it = vocab->child; it; it = it->next) {
        uint64_t id;
        if (!pfx_json_uint(it, &id) || id > INT32_MAX)
            return pfx_error(NULL, PFX_ERROR_FORMAT,
                             "%s: %s['%s'] is not an id (an integer 0 .. 2^31-1)", label, where,
                             it->string);
        if (!pfx_strmap_put(&tok->vocab, it->string, strlen(it->string), (int32_t)id))
            return pfx_tok_oom(label);
    }
    return PFX_SUCCESS;
}

static pfx_status parse_merges(pfx_tokenizer *tok, const cJSON *merges, const char *label)
{
    if (!cJSON_IsArray(merges))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: model.merges is not an array", label);
    uint32_t rank = 0;
    for (const cJSON *m = merges->child; m; m = m->next, rank++) {
        const char *a, *b;
        size_t alen, blen;
        if (cJSON_IsString(m)) { /* "a b", split at the first space */
            const char *sp = strchr(m->valuestring, ' ');
            if (!sp)
                return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: model.merges[%u] '%s' is not \"a b\"",
                                 label, rank, m->valuestring);
            a = m->valuestring;
            alen = (size_t)(sp - a);
            b = sp + 1;
            blen = strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            a = m->child->valuestring;
            b = m->child->next->valuestring;
            alen = strlen(a);
            blen = strlen(b);
        } else {
            return pfx_error(NULL, PFX_ERROR_FORMAT,
                             "%s: model.merges[%u] is neither \"a b\" nor "
                             "[\"a\", \"b\"]",
                             label, rank);
        }
        pfx_status st = pfx_add_merge(tok, a, alen, b, blen, rank, label);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

pfx_status pfx_tok_parse_model(pfx_tokenizer *tok, const cJSON *model, const char *label,
                               const pfx_tok_streamed *sv)
{
    if (!cJSON_IsObject(model))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: no object 'model'", label);
    const char *type;
    pfx_status st = pfx_tok_get_string(model, "type", false, &type, label, "model");
    if (st != PFX_SUCCESS)
        return st;
    if (type && strcmp(type, "BPE") != 0)
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "%s: tokenizer model '%s' is not supported "
                         "(only BPE)",
                         label, type);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (!pfx_json_absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0.0))
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "%s: model.dropout (BPE dropout is random; "
                         "only null or 0)",
                         label);
    const char *keys[] = { "continuing_subword_prefix", "end_of_word_suffix" };
    for (int k = 0; k < 2; k++) {
        const char *s;
        if ((st = pfx_tok_get_string(model, keys[k], false, &s, label, "model")) != PFX_SUCCESS)
            return st;
        if (s && *s)
            return pfx_error(NULL, PFX_ERROR_UNSUPPORTED, "%s: model.%s '%s' is not supported",
                             label, keys[k], s);
    }
    if ((st = pfx_tok_get_bool(model, "fuse_unk", false, &tok->fuse_unk, label, "model")) ||
        (st = pfx_tok_get_bool(model, "byte_fallback", false, &tok->byte_fallback, label,
                               "model")) ||
        (st = pfx_tok_get_bool(model, "ignore_merges", false, &tok->ignore_merges, label, "model")))
        return st;
    st = sv->vocab.e ? pfx_stream_vocab(tok, sv->text + sv->vocab.b, sv->vocab.e - sv->vocab.b,
                                        label, "model.vocab")
                     : parse_vocab(tok, cJSON_GetObjectItemCaseSensitive(model, "vocab"), label,
                                   "model.vocab");
    if (st != PFX_SUCCESS)
        return st;
    st = sv->merges.e
             ? pfx_stream_merges(tok, sv->text + sv->merges.b, sv->merges.e - sv->merges.b, label)
             : parse_merges(tok, cJSON_GetObjectItemCaseSensitive(model, "merges"), label);
    if (st != PFX_SUCCESS)
        return st;
    const char *unk;
    if ((st = pfx_tok_get_string(model, "unk_token", false, &unk, label, "model")))
        return st;
    if (unk) {
        tok->unk_id = pfx_strmap_get(&tok->vocab, unk, strlen(unk));
        if (tok->unk_id < 0)
            return pfx_error(NULL, PFX_ERROR_FORMAT,
                             "%s: model.unk_token '%s' is not in the vocabulary", label, unk);
    }
    return PFX_SUCCESS;
}

pfx_status pfx_tok_add_token(pfx_tokenizer *tok, int32_t id, const char *content, bool special,
                             bool normalized, const char *label)
{
    if (!pfx_grow_one((void **)&tok->added, &tok->added_count, sizeof(*tok->added)))
        return pfx_tok_oom(label);
    pfx_added *a = &tok->added[tok->added_count - 1];
    a->id = id;
    a->len = strlen(content);
    a->content = pfx_dup_bytes(content, a->len);
    a->special = special;
    a->normalized = normalized;
    return a->content ? PFX_SUCCESS : pfx_tok_oom(label);
}

pfx_status pfx_tok_parse_added(pfx_tokenizer *tok, const cJSON *arr, const char *label)
{
    if (pfx_json_absent(arr))
        return PFX_SUCCESS;
    if (!cJSON_IsArray(arr))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: added_tokens is not an array", label);
    int k = 0;
    for (const cJSON *t = arr->child; t; t = t->next, k++) {
        char where[64];
        snprintf(where, sizeof(where), "added_tokens[%d]", k);
        const char *content;
        uint64_t id;
        bool special = false, normalized = false;
        pfx_status st;
        if (!cJSON_IsObject(t))
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s is not an object", label, where);
        if (!pfx_json_uint(cJSON_GetObjectItemCaseSensitive(t, "id"), &id) || id > INT32_MAX)
            return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.id is not an id", label, where);
        if ((st = pfx_tok_get_string(t, "content", true, &content, label, where)) ||
            (st = pfx_tok_get_bool(t, "special", false, &special, label, where)) ||
            (st = pfx_tok_get_bool(t, "normalized", !special, &normalized, label, where)) ||
            (st = pfx_tok_add_token(tok, (int32_t)id, content, special, normalized, label)))
            return st;
        pfx_added *a = &tok->added[tok->added_count - 1];
        if ((st = pfx_tok_get_bool(t, "lstrip", false, &a->lstrip, label, where)) ||
            (st = pfx_tok_get_bool(t, "rstrip", false, &a->rstrip, label, where)) ||
            (st = pfx_tok_get_bool(t, "single_word", false, &a->single_word, label, where)))
            return st;
    }
    return PFX_SUCCESS;
}
