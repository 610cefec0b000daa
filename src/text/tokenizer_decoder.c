/* tokenizer.json's "decoder": ByteLevel, ByteFallback, Fuse, Metaspace,
 * Replace, Strip and Sequence. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parse.h"

/* ---- decoder ---- */
pfx_status pfx_tok_parse_decoder(pfx_tokenizer *tok, const cJSON *d, const char *label, int depth)
{
    static const char where[] = "decoder";
    if (!pfx_json_absent(d))
        tok->has_decoder = true;
    const char *type;
    pfx_status st =
        pfx_tok_component(tok, d, where, "decoders", pfx_tok_parse_decoder, label, depth, &type);
    if (st != PFX_SUCCESS || !type)
        return st;
    pfx_dec dc = { 0 };
    const char *s;
    if (strcmp(type, "ByteLevel") == 0) {
        dc.kind = PFX_DEC_BYTE_LEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        dc.kind = PFX_DEC_BYTE_FALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        dc.kind = PFX_DEC_FUSE;
    } else if (strcmp(type, "Metaspace") == 0) {
        dc.kind = PFX_DEC_METASPACE;
        if ((st = pfx_tok_get_char(d, "replacement", dc.repl, &dc.repl_len, label, where)) ||
            (st = pfx_tok_get_prepend_scheme(d, &dc.prepend, label, where)))
            return st;
    } else if (strcmp(type, "Replace") == 0 || strcmp(type, "Strip") == 0) {
        bool strip = type[0] == 'S', regex = false;
        dc.kind = strip ? PFX_DEC_STRIP : PFX_DEC_REPLACE;
        if ((st = pfx_tok_get_string(d, "content", true, &s, label, where)))
            return st;
        dc.content_len = strlen(s);
        if (!(dc.content = pfx_dup_bytes(s, dc.content_len)))
            return pfx_tok_oom(label);
        if (strip) {
            uint64_t a, b;
            uint32_t cp;
            if (!pfx_json_uint(cJSON_GetObjectItemCaseSensitive(d, "start"), &a) ||
                !pfx_json_uint(cJSON_GetObjectItemCaseSensitive(d, "stop"), &b) ||
                pfx_utf8_next((const unsigned char *)s, dc.content_len, &cp) != dc.content_len) {
                free(dc.content);
                return pfx_error(NULL, PFX_ERROR_FORMAT,
                                 "%s: decoder Strip needs one character "
                                 "'content' and counts 'start', 'stop'",
                                 label);
            }
            dc.start = (size_t)a;
            dc.stop = (size_t)b;
        } else {
            st = pfx_tok_get_pattern(d, &s, &regex, label, where);
            if (st == PFX_SUCCESS && regex)
                st = pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                               "%s: decoder Replace with a regex pattern "
                               "is not supported",
                               label);
            dc.pattern_len = st == PFX_SUCCESS ? strlen(s) : 0;
            if (st == PFX_SUCCESS && !(dc.pattern = pfx_dup_bytes(s, dc.pattern_len)))
                st = pfx_tok_oom(label);
            if (st != PFX_SUCCESS) {
                free(dc.content);
                return st;
            }
        }
    } else {
        return pfx_error(NULL, PFX_ERROR_UNSUPPORTED,
                         "%s: decoder '%s' is not supported (only "
                         "ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence)",
                         label, type);
    }
    if (!pfx_grow_one((void **)&tok->decs, &tok->dec_count, sizeof(*tok->decs))) {
        free(dc.pattern);
        free(dc.content);
        return pfx_tok_oom(label);
    }
    tok->decs[tok->dec_count - 1] = dc;
    return PFX_SUCCESS;
}
