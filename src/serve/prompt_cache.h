/* The scheduler's prompt cache: the keys and values of prompts already
 * prefilled, kept per adapter (a prefix adapter changes every row) under a
 * budget of bytes, the least recently used entry evicted first. A new
 * prompt that starts with a kept one copies those rows into its slot and
 * prefills only the rest. Used by the worker alone. */
#ifndef PFX_SERVE_PROMPT_CACHE_H
#define PFX_SERVE_PROMPT_CACHE_H

#include "serve_internal.h"

typedef struct prompt_cache prompt_cache;

/* Rows kept in `dtype`, the KV cache's (a cache of another dtype neither
 * saves nor restores). NULL when budget is 0 (no cache) or out of host
 * memory. */
prompt_cache *prompt_cache_create(pfx_model *model, pfx_dtype dtype, size_t budget);
void prompt_cache_destroy(prompt_cache **pc);
/* Forgets every entry (the bank changed). */
void prompt_cache_clear(prompt_cache *pc);

/* Copies into the (empty) slot the rows of the longest kept prefix of
 * prompt[0, len - 1) under adapter; returns their number (0: none). */
size_t prompt_cache_restore(prompt_cache *pc, pfx_kv_cache *cache, size_t slot, int32_t adapter,
                            const int32_t *prompt, size_t len);
/* Keeps the rows [0, len) of the slot, just prefilled with prompt. */
void prompt_cache_save(prompt_cache *pc, const pfx_kv_cache *cache, size_t slot, int32_t adapter,
                       const int32_t *prompt, size_t len);

#endif
