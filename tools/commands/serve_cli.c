/* Shared setup of the serving commands (serve_cli.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "serve_cli.h"

static bool has_tokenizer(const char *dir)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    if (stat(path, &sb) == 0)
        return true;
    snprintf(path, sizeof(path), "%s/vocab.json", dir);
    return stat(path, &sb) == 0;
}

bool serve_open(serve_ctx *ctx, const char *cmd, const char *device, const char *dir, size_t tokens)
{
    pfx_runtime_params rp;
    pfx_runtime_default_params(&rp);
    rp.device = device;
    if (pfx_runtime_create(&ctx->rt, &rp) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl %s: %s\n", cmd, pfx_last_error(NULL));
        return false;
    }
    const pfx_model_params mp = { .storage = ctx->storage };
    if (pfx_model_load(ctx->rt, dir, &mp, &ctx->model) != PFX_SUCCESS ||
        pfx_model_get_shape(ctx->model, &ctx->shape) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl %s: %s\n", cmd, pfx_last_error(ctx->rt));
        serve_close(ctx);
        return false;
    }
    if (has_tokenizer(dir) && pfx_tokenizer_load(dir, &ctx->tok) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl %s: %s\n", cmd, pfx_last_error(NULL));
        serve_close(ctx);
        return false;
    }
    const size_t capacity = ctx->bank_capacity > ctx->adapters ? ctx->bank_capacity : ctx->adapters;
    if (capacity && pfx_adapter_bank_create(ctx->model, capacity, &ctx->bank) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl %s: %s\n", cmd, pfx_last_error(ctx->rt));
        serve_close(ctx);
        return false;
    }
    for (size_t i = 0; i < ctx->adapters; i++) {
        int32_t entry;
        if (pfx_adapter_bank_add(ctx->bank, ctx->adapter[i], &entry) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl %s: %s\n", cmd, pfx_last_error(ctx->rt));
            serve_close(ctx);
            return false;
        }
    }
    /* the adapters' prefix (the bank's) takes positions before the tokens */
    const size_t P = pfx_adapter_bank_prefix_len(ctx->bank), positions = ctx->shape.max_positions;
    if (P >= positions) {
        fprintf(stderr,
                "prefixcl %s: %s: a prefix of %zu leaves none of the model's %zu positions\n", cmd,
                ctx->adapter[0], P, positions);
        serve_close(ctx);
        return false;
    }
    ctx->tokens = tokens + P > positions ? positions - P : tokens;
    return true;
}

bool serve_context(serve_ctx *ctx, const char *cmd, size_t batch)
{
    const pfx_context_params cp = { .max_batch = batch,
                                    .max_tokens = ctx->tokens,
                                    .max_prefix_len = pfx_adapter_bank_prefix_len(ctx->bank),
                                    .recompute = true };
    if (pfx_context_create(ctx->model, &cp, &ctx->work) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl %s: %s\n", cmd, pfx_last_error(ctx->rt));
        serve_close(ctx);
        return false;
    }
    return true;
}

void serve_close(serve_ctx *ctx)
{
    pfx_adapter_bank_destroy(&ctx->bank);
    pfx_tokenizer_free(&ctx->tok);
    pfx_context_destroy(&ctx->work);
    pfx_model_destroy(&ctx->model);
    pfx_runtime_destroy(&ctx->rt);
}

size_t serve_default_stops(const serve_ctx *ctx, int32_t *stops, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < ctx->shape.eos_count && n < cap; i++)
        stops[n++] = ctx->shape.eos_ids[i];
    const int32_t eos = ctx->tok ? pfx_tokenizer_special_id(ctx->tok, PFX_TOKEN_EOS) : -1;
    bool listed = false;
    for (size_t i = 0; i < n; i++)
        listed |= stops[i] == eos;
    if (eos >= 0 && !listed && n < cap)
        stops[n++] = eos;
    return n;
}
