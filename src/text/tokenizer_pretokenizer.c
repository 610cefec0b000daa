/* tokenizer.json's "pre_tokenizer": ByteLevel, Split, Digits, Metaspace,
 * Whitespace, WhitespaceSplit, Punctuation and Sequence, the fixed
 * splitters as PCRE2 regexes. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parse.h"

/* ---- pre-tokenizer ---- */
static pfx_status parse_behavior(const cJSON *p, pfx_split_behavior *out, const char *label,
                                 const char *where)
{
    static const char *names[] = { "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                   "Contiguous" };
    const char *s;
    pfx_status st = pfx_tok_get_string(p, "behavior", true, &s, label, where);
    if (st != PFX_SUCCESS)
        return st;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (pfx_split_behavior)i;
            return PFX_SUCCESS;
        }
    return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: %s.behavior '%s' is not a split behavior", label,
                     where, s);
}

pfx_status pfx_tok_parse_pretok(pfx_tokenizer *tok, const cJSON *p, const char *label, int depth)
{
    static const char where[] = "pre_tokenizer";
    const char *type;
    pfx_status st = pfx_tok_component(tok, p, where, "pretokenizers", pfx_tok_parse_pretok, label,
                                      depth, &type);
    if (st != PFX_SUCCESS || !type)
        return st;
    pfx_pretok pt = { 0 };
    const char *src = ""; /* the regex's pattern */
    if (strcmp(type, "ByteLevel") == 0) {
        bool use_regex = true;
        pt.kind = PFX_PRE_BYTE_LEVEL;
        if ((st = pfx_tok_get_bool(p, "add_prefix_space", true, &pt.add_prefix_space, label,
                                   where)) ||
            (st = pfx_tok_get_bool(p, "use_regex", true, &use_regex, label, where)))
            return st;
        src = pfx_gpt2_pattern;
        if (use_regex && !(pt.re = pfx_regex_compile(pfx_gpt2_pattern, PCRE2_ZERO_TERMINATED, false,
                                                     label, where)))
            return PFX_ERROR_FORMAT;
    } else if (strcmp(type, "Split") == 0) {
        const char *pat;
        bool regex;
        pt.kind = PFX_PRE_SPLIT;
        if ((st = pfx_tok_get_pattern(p, &pat, &regex, label, where)) ||
            (st = parse_behavior(p, &pt.behavior, label, where)) ||
            (st = pfx_tok_get_bool(p, "invert", false, &pt.invert, label, where)))
            return st;
        src = pat;
        if ((regex || *pat) && !(pt.re = pfx_regex_compile(pat, strlen(pat), !regex, label, where)))
            return PFX_ERROR_FORMAT;
    } else if (strcmp(type, "Digits") == 0) {
        bool single = false;
        pt.kind = PFX_PRE_SPLIT;
        pt.behavior = PFX_SPLIT_ISOLATED;
        if ((st = pfx_tok_get_bool(p, "individual_digits", false, &single, label, where)))
            return st;
        /* Rust's char::is_numeric: the categories Nd, Nl, No. */
        const char *pat = single ? "\\p{N}" : "\\p{N}+";
        src = pat;
        if (!(pt.re = pfx_regex_compile(pat, PCRE2_ZERO_TERMINATED, false, label, where)))
            return PFX_ERROR_FORMAT;
    } else if (strcmp(type, "Whitespace") == 0 || strcmp(type, "WhitespaceSplit") == 0 ||
               strcmp(type, "Punctuation") == 0) {
        /* HF's fixed splitters as regexes: \w+|[^\w\s]+ kept (Whitespace),
         * runs of White_Space removed (WhitespaceSplit), punctuation split
         * off by a behavior (Punctuation: Unicode P* and ASCII punctuation). */
#define PFX_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"
#define PFX_SPACE                                                                                  \
    "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}"             \
    "\\x{202f}\\x{205f}\\x{3000}"
        const char *pat;
        pt.kind = PFX_PRE_SPLIT;
        if (type[0] == 'P') {
            pat = "[\\p{P}!-/:-@\\[-`{-~]";
            pt.behavior = PFX_SPLIT_ISOLATED;
            if (cJSON_GetObjectItemCaseSensitive(p, "behavior") &&
                (st = parse_behavior(p, &pt.behavior, label, where)))
                return st;
        } else if (strcmp(type, "Whitespace") == 0) {
            pat = "[" PFX_WORD "]+|[^" PFX_WORD PFX_SPACE "]+";
            pt.behavior = PFX_SPLIT_REMOVED;
            pt.invert = true;
        } else {
            pat = "[" PFX_SPACE "]+";
            pt.behavior = PFX_SPLIT_REMOVED;
        }
#undef PFX_WORD
#undef PFX_SPACE
        src = pat;
        if (!(pt.re = pfx_regex_compile(pat, PCRE2_ZERO_TERMINATED, false, label, where)))
            return PFX_ERROR_FORMAT;
    } else if (strcmp(type, "Metaspace") == 0) {
        pt.kind = PFX_PRE_METASPACE;
        if ((st = pfx_tok_get_char(p, "replacement", pt.repl, &pt.repl_len, label, where)) ||
            (st = pfx_tok_get_prepend_scheme(p, &pt.prepend, label, where)) ||
            (st = pfx_tok_get_bool(p, "split", true, &pt.split, label, where)))
            return st;
    } else {
        return pfx_error(
            NULL, PFX_ERROR_UNSUPPORTED,
            "%s: pre-tokenizer '%s' is not supported (only "
            "ByteLevel, Split, Digits, Metaspace, Whitespace, WhitespaceSplit, Punctuation and "
            "Sequence)",
            label, type);
    }
    if ((pt.re && !(pt.source = pfx_dup_bytes(src, strlen(src)))) ||
        !pfx_grow_one((void **)&tok->pretoks, &tok->pretok_count, sizeof(*tok->pretoks))) {
        pcre2_code_free(pt.re);
        free(pt.source);
        return pfx_tok_oom(label);
    }
    tok->pretoks[tok->pretok_count - 1] = pt;
    return PFX_SUCCESS;
}
