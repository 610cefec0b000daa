/* What each fuzz harness fuzz_<name>.c defines: libFuzzer's entry point, and
 * whether an input is accepted by the reader (run_corpus.c counts those and
 * prints why the others were refused). */
#ifndef PFX_FUZZ_H
#define PFX_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* True when the reader accepts the input; on false, pfx_last_error(NULL)
 * says why. label names the input in messages. */
bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label);

/* The per-input time limit of the harnesses that grow small inputs into
 * large ones (many shards, long texts): work that grows faster than the
 * input aborts as a crash instead of passing as slowness. Generous for
 * sanitizer builds; linear work takes a small fraction of it. */
#define PFX_FUZZ_SECONDS 5.0

static inline double pfx_fuzz_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Aborts, naming what took too long, when `start` is PFX_FUZZ_SECONDS ago. */
static inline void pfx_fuzz_deadline(double start, const char *what)
{
    double s = pfx_fuzz_now() - start;
    if (s > PFX_FUZZ_SECONDS) {
        fprintf(stderr, "%s took %.2f s, more than the %.0f s an input may take\n", what, s,
                PFX_FUZZ_SECONDS);
        abort();
    }
}

#endif
