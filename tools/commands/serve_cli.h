/* What `prefixcl generate` and `serve` share: the runtime, the model folder,
 * its tokenizer (when the folder has one) and the adapter bank. */
#ifndef PFX_TOOLS_SERVE_CLI_H
#define PFX_TOOLS_SERVE_CLI_H

#include "prefixcl/prefixcl.h"
#include "prefixcl/tokenizer.h"

#define SERVE_MAX_ADAPTERS 8

typedef struct serve_ctx {
    pfx_runtime *rt;
    pfx_model *model;
    pfx_context *work; /* serve_context's (NULL until then) */
    pfx_model_shape shape;
    pfx_tokenizer *tok;     /* NULL when the folder has none */
    pfx_adapter_bank *bank; /* NULL without adapters */
    const char *adapter[SERVE_MAX_ADAPTERS];
    size_t adapters;
    size_t bank_capacity; /* entries of the bank (0: the adapters given) */
    size_t tokens;        /* tokens of a request (what fits beside the prefix) */
    pfx_dtype storage;    /* the weights on the device (--storage; 0: float32) */
} serve_ctx;

/* Runtime on `device` (NULL: default), the model of `dir`, its tokenizer
 * when present, and the adapters in one bank; ctx->tokens: `tokens`, fewer
 * when the bank's prefix needs the positions. Prints the error as "prefixcl
 * CMD: ..." and returns false on failure (ctx is then closed). */
bool serve_open(serve_ctx *ctx, const char *cmd, const char *device, const char *dir,
                size_t tokens);
/* ctx->work: a context of batch x ctx->tokens after the bank's prefix
 * (forward only: no activations kept); false (ctx closed) on failure. */
bool serve_context(serve_ctx *ctx, const char *cmd, size_t batch);
void serve_close(serve_ctx *ctx);

/* The stop tokens of a model without --stop: config.json's eos_token_id (as
 * transformers' generate) and the tokenizer's EOS, at most cap; returns
 * their number. */
size_t serve_default_stops(const serve_ctx *ctx, int32_t *stops, size_t cap);

#endif
