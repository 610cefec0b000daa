/* What each fuzz harness fuzz_<name>.c defines: libFuzzer's entry point, and
 * whether an input is accepted by the reader (run_corpus.c counts those and
 * prints why the others were refused). */
#ifndef PFX_FUZZ_H
#define PFX_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* True when the reader accepts the input; on false, pfx_last_error(NULL)
 * says why. label names the input in messages. */
bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label);

#endif
