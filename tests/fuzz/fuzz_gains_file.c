/* libFuzzer harness for the reader of the training jobs' gains file
 * (io.h, src/io/gains_file.c: what pfx_adapter_bank_add and attn-map read
 * from gains.safetensors, the one layout and the legacy per-layer form):
 * every input is parsed as safetensors and, when it parses, read for a
 * model of 2 layers, 3 heads and head size 4 (the corpus's shape); it must
 * be refused cleanly or give a ramp in [0, 1] and finite values in every
 * slot its metadata announces. Also linked into the normal build by
 * run_corpus.c, which replays tests/fuzz/corpus/gains_file/. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gains_file.h"

enum { L = 2, H = 3, D = 4 };

static pfx_status read_gains(const uint8_t *data, size_t size, const char *label,
                             pfx_gains_values *v)
{
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_safetensors_open_memory(data, size, label, &f);
    if (st == PFX_SUCCESS)
        st = pfx_gains_file_read(f, label, L, H, D, v);
    pfx_safetensors_close(&f);
    return st;
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    float g[L * H], dg[L * H * D];
    pfx_gains_values v = { .gains = g, .dim_gains = dg };
    return read_gains(data, size, label, &v) == PFX_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    float g[L * H], dg[L * H * D];
    pfx_gains_values v = { .gains = g, .dim_gains = dg };
    if (read_gains(data, size, "fuzz", &v) != PFX_SUCCESS)
        return 0;
    if (v.gain_mode != PFX_GAIN_OFF && v.gain_mode != PFX_GAIN_LINEAR &&
        v.gain_mode != PFX_GAIN_TANH)
        abort();
    if (!(v.gain_ramp >= 0.0f && v.gain_ramp <= 1.0f))
        abort();
    for (size_t i = 0; v.gain_mode != PFX_GAIN_OFF && i < L * H; i++)
        if (!isfinite(g[i]))
            abort();
    for (size_t i = 0; v.structured && i < L * H * D; i++)
        if (!isfinite(dg[i]))
            abort();
    return 0;
}
