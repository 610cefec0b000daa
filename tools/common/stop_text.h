/* Stop strings, as transformers' stop_strings, llama.cpp and the OpenAI
 * API take them: generated text ends before the first of them, and the
 * text shown while tokens still come holds back what may begin one. Shared
 * by `prefixcl generate --stop` and the server's "stop". */
#ifndef PFX_TOOLS_STOP_TEXT_H
#define PFX_TOOLS_STOP_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Cuts *len (text's length) before the earliest occurrence of any of the n
 * stop strings; true when one occurs. */
bool stop_text_cut(const char *text, size_t *len, const char *const *stops, size_t n);

/* The bytes a shown text holds back: the longest stop string less one. */
size_t stop_text_hold(const char *const *stops, size_t n);

/* Bytes of text[0, len) that may be shown before the request ends: not the
 * last `hold` (they may begin a stop string), not a trailing U+FFFD (the
 * next token may complete its character), not half a character. */
size_t stop_text_sendable(const char *text, size_t len, size_t hold);

#endif
