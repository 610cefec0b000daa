/* libFuzzer harness for the PEFT adapter_config.json reader
 * (pfx_peft_read_config_memory): every input must be refused cleanly or give
 * a config within the documented bounds. Also linked into the normal build by
 * run_corpus.c, which replays tests/fuzz/corpus/peft_config/. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "prefixcl/io.h"

static void check(const pfx_peft_config *c)
{
    const size_t max = (size_t)1 << 31;
    if (c->num_virtual_tokens == 0 || c->num_layers == 0 || c->token_dim == 0 ||
        c->num_attention_heads == 0 || c->num_virtual_tokens > max || c->num_layers > max ||
        c->token_dim > max || c->num_attention_heads > max || c->encoder_hidden_size > max)
        abort();
    if (c->num_transformer_submodules != 1)
        abort();
    if (!memchr(c->task_type, 0, sizeof(c->task_type)) ||
        !memchr(c->base_model_name_or_path, 0, sizeof(c->base_model_name_or_path)))
        abort();
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    pfx_peft_config c;
    return pfx_peft_read_config_memory(data, size, label, &c) == PFX_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfx_peft_config c;
    memset(&c, 0xa5, sizeof(c));
    if (pfx_peft_read_config_memory(data, size, "fuzz", &c) == PFX_SUCCESS)
        check(&c);
    return 0;
}
