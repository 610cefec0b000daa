/* libFuzzer harness for the safetensors parser: every input goes through
 * pfx_safetensors_open_memory; a file that parses is walked completely
 * (info, data pointers, float conversion, metadata) so that any offset the
 * validator let through is actually read. Also linked into the normal build
 * by run_corpus.c, which replays tests/fuzz/corpus/safetensors/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "prefixcl/io.h"

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    pfx_safetensors *f = NULL;
    bool ok = pfx_safetensors_open_memory(data, size, label, &f) == PFX_SUCCESS;
    pfx_safetensors_close(&f);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfx_safetensors *f = NULL;
    if (pfx_safetensors_open_memory(data, size, "fuzz", &f) != PFX_SUCCESS) {
        if (f)
            abort(); /* a failed open leaves nothing behind */
        return 0;
    }
    size_t n = pfx_safetensors_count(f);
    volatile unsigned sink = 0;
    for (size_t i = 0; i < n; i++) {
        pfx_st_info info;
        if (pfx_safetensors_info(f, i, &info) != PFX_SUCCESS)
            abort();
        if (pfx_safetensors_find(f, info.name) < 0)
            abort();
        if (info.bytes != info.numel * pfx_st_dtype_size(info.dtype))
            abort();
        const unsigned char *p = pfx_safetensors_data(f, i);
        for (size_t k = 0; k < info.bytes; k++)
            sink += p[k];
        if (info.numel <= (1u << 20)) {
            float *dst = malloc((info.numel ? info.numel : 1) * sizeof(float));
            if (dst) {
                pfx_status st = pfx_safetensors_read_f32(f, info.name, dst, info.numel);
                bool is_float = info.dtype == PFX_ST_F32 || info.dtype == PFX_ST_F16 ||
                                info.dtype == PFX_ST_BF16 || info.dtype == PFX_ST_F64;
                if ((st == PFX_SUCCESS) != is_float)
                    abort();
                free(dst);
            }
        }
    }
    for (size_t i = 0; i < pfx_safetensors_metadata_count(f); i++) {
        const char *k, *v;
        if (pfx_safetensors_metadata(f, i, &k, &v) != PFX_SUCCESS)
            abort();
        if (pfx_safetensors_metadata_get(f, k) == NULL)
            abort();
        sink += (unsigned)strlen(v);
    }
    (void)sink;
    pfx_safetensors_close(&f);
    return 0;
}
