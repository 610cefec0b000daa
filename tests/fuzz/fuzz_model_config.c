/* libFuzzer harness for the config.json reader of whole models
 * (src/model/config.c): every input goes through pfx_model_config_parse; a
 * config that parses must describe a consistent shape, and its table of
 * tensor names is built. Also linked into the normal build by run_corpus.c,
 * which replays tests/fuzz/corpus/model_config/. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz.h"
#include "model/model_internal.h"

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    pfx_model_config cfg;
    return pfx_model_config_parse(NULL, data, size, label, &cfg) == PFX_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfx_model_config cfg;
    if (pfx_model_config_parse(NULL, data, size, "fuzz", &cfg) != PFX_SUCCESS)
        return 0;
    const pfx_model_shape *s = &cfg.shape;
    if (!s->layers || !s->heads || !s->kv_heads || !s->head_dim || !s->hidden || !s->intermediate ||
        !s->vocab || !s->max_positions || s->heads % s->kv_heads || !s->parameters ||
        !s->model_type[0])
        abort();
    if (cfg.family == PFX_FAMILY_LLAMA && s->head_dim % 2)
        abort();
    /* the name table of a parsed config; skip absurd sizes (host memory) */
    if (s->layers > 4096)
        return 0;
    pfx_weight_spec *specs = NULL;
    size_t count = 0;
    if (pfx_weight_specs(NULL, &cfg, true, &specs, &count) != PFX_SUCCESS)
        return 0;
    for (size_t i = 0; i < count; i++)
        if (!specs[i].name[0] || !specs[i].shape[0] || (specs[i].ndim == 2 && !specs[i].shape[1]))
            abort();
    free(specs);
    return 0;
}
