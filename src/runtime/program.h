/* Program build and on-disk binary cache internals (src/runtime/program.c). */
#ifndef PFX_RUNTIME_PROGRAM_H
#define PFX_RUNTIME_PROGRAM_H

#include "internal.h"

/* Chooses the cache folder: explicit, $PREFIXCL_CACHE_DIR, $XDG_CACHE_HOME/prefixcl,
 * ~/.cache/prefixcl; "" when disabled or no home is known. */
pfx_status pfx_cache_dir_resolve(const char *explicit_dir, bool disabled, char *out, size_t cap);

/* Releases every program and kernel the runtime holds. */
void pfx_programs_release(pfx_runtime *rt);

/* 64-bit FNV-1a, chained through `hash` (start with PFX_FNV_OFFSET). */
#define PFX_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t pfx_fnv1a(uint64_t hash, const void *data, size_t len);

#endif
