/* tokenizer.json's "post_processor": the ids put before and after a
 * sequence (TemplateProcessing, RobertaProcessing, BertProcessing,
 * ByteLevel, Sequence). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parse.h"

/* ---- post-processor: ids before and after the sequence ---- */
static bool ids_append(int32_t **arr, size_t *n, const int32_t *ids, size_t k, bool front)
{
    int32_t *p = realloc(*arr, (*n + k + 1) * sizeof(*p));
    if (!p)
        return false;
    if (k == 0) {
        *arr = p;
        return true;
    }
    if (front) {
        memmove(p + k, p, *n * sizeof(*p));
        memcpy(p, ids, k * sizeof(*p));
    } else {
        memcpy(p + *n, ids, k * sizeof(*p));
    }
    *arr = p;
    *n += k;
    return true;
}

/* [token, id] of RobertaProcessing / BertProcessing. */
static pfx_status pair_id(const cJSON *p, const char *key, int32_t *id, const char *label)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, key);
    uint64_t v;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2 || !cJSON_IsString(a->child) ||
        !pfx_json_uint(a->child->next, &v) || v > INT32_MAX)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor.%s is not [token, id]", label,
                         key);
    *id = (int32_t)v;
    return PFX_SUCCESS;
}

static pfx_status template_ids(const cJSON *specials, const char *name, int32_t **ids, size_t *n,
                               const char *label)
{
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(specials, name);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(sp, "ids");
    *ids = NULL;
    *n = 0;
    if (!cJSON_IsArray(arr))
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: post_processor.special_tokens has no ids for '%s'", label, name);
    *n = 0;
    *ids = malloc(((size_t)cJSON_GetArraySize(arr) + 1) * sizeof(**ids));
    if (!*ids)
        return pfx_tok_oom(label);
    for (const cJSON *c = arr->child; c; c = c->next) {
        uint64_t v;
        if (!pfx_json_uint(c, &v) || v > INT32_MAX) {
            free(*ids);
            *ids = NULL;
            return pfx_error(NULL, PFX_ERROR_FORMAT,
                             "%s: post_processor.special_tokens['%s'].ids "
                             "holds a bad id",
                             label, name);
        }
        (*ids)[(*n)++] = (int32_t)v;
    }
    return PFX_SUCCESS;
}

static pfx_status parse_template(pfx_tokenizer *tok, const cJSON *p, const char *label)
{
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
    if (!cJSON_IsArray(single) || !cJSON_IsObject(specials))
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: post_processor TemplateProcessing needs arrays "
                         "'single' and an object 'special_tokens'",
                         label);
    int32_t *pre = NULL, *post = NULL;
    size_t npre = 0, npost = 0;
    bool seen_a = false;
    pfx_status st = PFX_SUCCESS;
    for (const cJSON *it = single->child; it && st == PFX_SUCCESS; it = it->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp ? sp : sq, "id");
        if (!cJSON_IsString(id)) {
            st = pfx_error(NULL, PFX_ERROR_FORMAT,
                           "%s: post_processor.single holds an item that is "
                           "neither SpecialToken nor Sequence",
                           label);
        } else if (sq) {
            if (strcmp(id->valuestring, "A") != 0 || seen_a)
                st = pfx_error(NULL, PFX_ERROR_FORMAT,
                               "%s: post_processor.single must hold sequence "
                               "A once",
                               label);
            seen_a = true;
        } else {
            int32_t *ids;
            size_t n = 0;
            st = template_ids(specials, id->valuestring, &ids, &n, label);
            if (st == PFX_SUCCESS &&
                !ids_append(seen_a ? &post : &pre, seen_a ? &npost : &npre, ids, n, false))
                st = pfx_tok_oom(label);
            free(ids);
        }
    }
    if (st == PFX_SUCCESS && !seen_a)
        st =
            pfx_error(NULL, PFX_ERROR_FORMAT, "%s: post_processor.single has no sequence A", label);
    /* A later processor wraps what the earlier ones produced. */
    if (st == PFX_SUCCESS &&
        (!ids_append(&tok->prefix_ids, &tok->prefix_count, pre, npre, true) ||
         !ids_append(&tok->suffix_ids, &tok->suffix_count, post, npost, false)))
        st = pfx_tok_oom(label);
    free(pre);
    free(post);
    return st;
}

pfx_status pfx_tok_parse_post(pfx_tokenizer *tok, const cJSON *p, const char *label, int depth)
{
    static const char where[] = "post_processor";
    const char *type;
    pfx_status st =
        pfx_tok_component(tok, p, where, "processors", pfx_tok_parse_post, label, depth, &type);
    if (st != PFX_SUCCESS || !type)
        return st;
    if (strcmp(type, "ByteLevel") == 0)
        return PFX_SUCCESS; /* offsets only */
    if (strcmp(type, "TemplateProcessing") == 0)
        return parse_template(tok, p, label);
    if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        int32_t cls, sep;
        if ((st = pair_id(p, "cls", &cls, label)) || (st = pair_id(p, "sep", &sep, label)))
            return st;
        if (!ids_append(&tok->prefix_ids, &tok->prefix_count, &cls, 1, true) ||
            !ids_append(&tok->suffix_ids, &tok->suffix_count, &sep, 1, false))
            return pfx_tok_oom(label);
        return PFX_SUCCESS;
    }
    return pfx_error(
        NULL, PFX_ERROR_UNSUPPORTED,
        "%s: post-processor '%s' is not supported (only "
        "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing and Sequence)",
        label, type);
}
