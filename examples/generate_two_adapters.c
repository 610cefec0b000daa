/* Load a Hugging Face model folder and generate for one prompt with two PEFT
 * prefix adapters, both requests in one batch (one prefill, shared decode
 * steps), greedy.
 *
 *   generate_two_adapters MODEL_DIR ADAPTER_A ADAPTER_B
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefixcl/prefixcl.h"

static int fail(pfx_runtime *rt, const char *what, pfx_status st)
{
    fprintf(stderr, "%s: %s (%s)\n", what, pfx_status_string(st), pfx_last_error(rt));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL_DIR ADAPTER_A ADAPTER_B\n", argv[0]);
        return 2;
    }
    pfx_runtime *rt = NULL;
    pfx_status st = pfx_runtime_create(&rt, NULL); /* the default device ($PREFIXCL_DEVICE first) */
    if (st)
        return fail(NULL, "runtime", st);
    pfx_model *model = NULL;
    pfx_context *ctx = NULL;
    pfx_tokenizer *tok = NULL;
    pfx_adapter_bank *bank = NULL;
    pfx_kv_cache *cache = NULL;
    int32_t a = -1, b = -1; /* the adapters' entries in the bank: what a request names */
    if ((st = pfx_model_load(rt, argv[1], NULL, &model)) ||
        (st = pfx_tokenizer_load(argv[1], &tok)) ||
        (st = pfx_adapter_bank_create(model, 2, &bank)) ||
        (st = pfx_adapter_bank_add(bank, argv[2], &a)) ||
        (st = pfx_adapter_bank_add(bank, argv[3], &b)))
        return fail(rt, "setting up", st);
    /* the workspace: 2 requests of up to 32 tokens after the adapters' prefix */
    const size_t P = pfx_adapter_bank_prefix_len(bank);
    pfx_context_params cp = { .max_batch = 2, .max_tokens = 32, .max_prefix_len = P };
    if ((st = pfx_context_create(model, &cp, &ctx)) ||
        (st = pfx_kv_cache_create(model, 2, 32 + P, &cache)))
        return fail(rt, "setting up", st);

    const char *text = "The river";
    int32_t *prompt = NULL;
    size_t len = 0;
    if ((st = pfx_tokenizer_encode(tok, text, strlen(text), PFX_ENCODE_ADD_SPECIAL, &prompt, &len)))
        return fail(NULL, "encode", st);
    int32_t out[2][8]; /* the new tokens of each request */
    pfx_request req[2] = {
        { .prompt = prompt, .prompt_len = len, .adapter = a, .out = out[0] },
        { .prompt = prompt, .prompt_len = len, .adapter = b, .out = out[1] },
    };
    pfx_sampling greedy = { .temperature = 0.0f, .max_new_tokens = 8 }; /* temperature 0: argmax */
    if ((st = pfx_generate(ctx, cache, bank, req, 2, &greedy, NULL, NULL, NULL)))
        return fail(rt, "generate", st);
    for (int i = 0; i < 2; i++) {
        char *s = NULL;
        size_t n = 0;
        if ((st = pfx_tokenizer_decode(tok, req[i].out, req[i].out_len, 0, &s, &n)))
            return fail(NULL, "decode", st);
        printf("[%s] %s%s\n", argv[2 + i], text, s);
        free(s);
    }
    free(prompt);
    pfx_kv_cache_destroy(&cache);
    pfx_adapter_bank_destroy(&bank);
    pfx_tokenizer_free(&tok);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&model);
    pfx_runtime_destroy(&rt);
    return 0;
}
