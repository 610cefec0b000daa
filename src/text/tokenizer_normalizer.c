/* tokenizer.json's "normalizer": Unicode forms, Lowercase, StripAccents,
 * Strip, Prepend, Replace and Sequence. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer_parse.h"

/* ---- normalizer ---- */
pfx_status pfx_tok_parse_normalizer(pfx_tokenizer *tok, const cJSON *n, const char *label,
                                    int depth)
{
    static const char where[] = "normalizer";
    const char *type;
    pfx_status st = pfx_tok_component(tok, n, where, "normalizers", pfx_tok_parse_normalizer, label,
                                      depth, &type);
    if (st != PFX_SUCCESS || !type)
        return st;
    static const struct {
        const char *name;
        int options;
    } forms[] = {
        { "NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE },
        { "NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE },
        { "NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT },
        { "NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT },
    };
    int form = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(type, forms[k].name) == 0)
            form = k;
    bool prepend = strcmp(type, "Prepend") == 0;
    bool lower = strcmp(type, "Lowercase") == 0, accents = strcmp(type, "StripAccents") == 0;
    bool strip = strcmp(type, "Strip") == 0;
    if (form < 0 && !prepend && !lower && !accents && !strip && strcmp(type, "Replace") != 0)
        return pfx_error(
            NULL, PFX_ERROR_UNSUPPORTED,
            "%s: normalizer '%s' is not supported (only "
            "NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Prepend, Replace and "
            "Sequence)",
            label, type);
    if (!pfx_grow_one((void **)&tok->norms, &tok->norm_count, sizeof(*tok->norms)))
        return pfx_tok_oom(label);
    pfx_norm *nm = &tok->norms[tok->norm_count - 1];
    if (form >= 0) {
        nm->kind = PFX_NORM_UNICODE;
        nm->unicode_options = forms[form].options;
        return PFX_SUCCESS;
    }
    if (lower || accents) {
        nm->kind = lower ? PFX_NORM_LOWERCASE : PFX_NORM_STRIP_ACCENTS;
        return PFX_SUCCESS;
    }
    if (strip) {
        nm->kind = PFX_NORM_STRIP;
        if ((st = pfx_tok_get_bool(n, "strip_left", true, &nm->strip_left, label, where)) ||
            (st = pfx_tok_get_bool(n, "strip_right", true, &nm->strip_right, label, where)))
            return st;
        return PFX_SUCCESS;
    }
    nm->kind = prepend ? PFX_NORM_PREPEND : PFX_NORM_REPLACE;
    const char *text;
    if ((st = pfx_tok_get_string(n, prepend ? "prepend" : "content", true, &text, label, where)))
        return st;
    nm->text_len = strlen(text);
    if (!(nm->text = pfx_dup_bytes(text, nm->text_len)))
        return pfx_tok_oom(label);
    if (prepend)
        return PFX_SUCCESS;
    const char *pat;
    bool regex;
    if ((st = pfx_tok_get_pattern(n, &pat, &regex, label, where)))
        return st;
    if (regex) {
        if (!(nm->re = pfx_regex_compile(pat, strlen(pat), false, label, where)))
            return PFX_ERROR_FORMAT;
        return (nm->source = pfx_dup_bytes(pat, strlen(pat))) ? PFX_SUCCESS : pfx_tok_oom(label);
    }
    nm->pattern_len = strlen(pat);
    return (nm->pattern = pfx_dup_bytes(pat, nm->pattern_len)) ? PFX_SUCCESS : pfx_tok_oom(label);
}
