/* The results of `prefixcl generate` (gen_output.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "gen_output.h"
#include "common/tool_util.h"

const char *gen_stop_reason(const gen_output *g)
{
    return g->stopped ? "stop" : "length";
}

static void print_ids(FILE *out, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(out, i ? " %d" : "%d", (int)ids[i]);
}

void gen_print_block(FILE *out, const gen_output *g, bool first)
{
    if (!first)
        fputc('\n', out);
    fprintf(out, "=== prompt %zu: ", g->prompt);
    if (g->prompt_text) {
        tool_json_string(out, g->prompt_text); /* one line whatever the prompt holds */
    } else {
        fputs("ids ", out);
        print_ids(out, g->prompt_ids, g->prompt_len);
    }
    if (g->adapter)
        fprintf(out, " | adapter %s ===\n", g->adapter);
    else
        fputs(" | no adapter ===\n", out);
    if (g->text)
        fputs(g->text, out);
    else
        print_ids(out, g->ids, g->count);
    fprintf(out, "\n--- %zu token%s, stop: %s, %.1f tokens/s ---\n", g->count,
            g->count == 1 ? "" : "s", gen_stop_reason(g), g->tokens_per_s);
}

/* Bytes at s[0, n) (n >= 1) that an invalid UTF-8 sequence spans: its
 * maximal start of a well-formed sequence, at least one byte, as Python's
 * and Rust's lossy decoders (and so transformers' decode) count them. */
static size_t invalid_span(const unsigned char *s, size_t n)
{
    const unsigned char c = s[0];
    size_t want = c >= 0xC2 && c <= 0xDF   ? 2
                  : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xF0 && c <= 0xF4 ? 4
                                           : 1;
    unsigned char lo = c == 0xE0   ? 0xA0
                       : c == 0xF0 ? 0x90
                                   : 0x80,
                  hi = c == 0xED   ? 0x9F
                       : c == 0xF4 ? 0x8F
                                   : 0xBF;
    size_t k = 1;
    while (k < want && k < n && s[k] >= lo && s[k] <= hi) {
        k++;
        lo = 0x80;
        hi = 0xBF;
    }
    return k;
}

char *gen_valid_utf8(const char *s)
{
    const size_t len = strlen(s);
    char *out = malloc(3 * len + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t n =
            utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &c);
        if (n <= 0) {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += invalid_span((const unsigned char *)s + i, len - i);
        } else {
            memcpy(o, s + i, (size_t)n);
            o += n;
            i += (size_t)n;
        }
    }
    *o = '\0';
    return out;
}

static cJSON *id_array(const int32_t *ids, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *v = cJSON_CreateNumber(ids[i]);
        if (!v || !cJSON_AddItemToArray(a, v)) {
            cJSON_Delete(v);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* A string member, or null for NULL; false when out of memory. */
static bool add_text(cJSON *o, const char *key, const char *s)
{
    if (!s)
        return cJSON_AddNullToObject(o, key) != NULL;
    char *v = gen_valid_utf8(s);
    bool ok = v && cJSON_AddStringToObject(o, key, v);
    free(v);
    return ok;
}

bool gen_print_json(FILE *out, const gen_output *g)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *prompt_ids = id_array(g->prompt_ids, g->prompt_len), *ids = id_array(g->ids, g->count);
    bool ok = o && prompt_ids && ids && add_text(o, "prompt", g->prompt_text);
    if (ok && (ok = cJSON_AddItemToObject(o, "prompt_ids", prompt_ids)))
        prompt_ids = NULL; /* the object's now */
    ok = ok && add_text(o, "adapter", g->adapter);
    if (ok && (ok = cJSON_AddItemToObject(o, "ids", ids)))
        ids = NULL;
    ok = ok && add_text(o, "text", g->text) &&
         cJSON_AddStringToObject(o, "stop_reason", gen_stop_reason(g)) &&
         cJSON_AddNumberToObject(o, "tokens_per_s", round(g->tokens_per_s * 100.0) / 100.0);
    char *line = ok ? cJSON_PrintUnformatted(o) : NULL;
    if (line) {
        fputs(line, out);
        fputc('\n', out);
    }
    cJSON_free(line);
    cJSON_Delete(prompt_ids);
    cJSON_Delete(ids);
    cJSON_Delete(o);
    return line != NULL;
}
