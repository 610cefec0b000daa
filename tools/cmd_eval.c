/* prefixcl eval: causal-LM loss and perplexity of a data set on a model
 * folder, without and with a prefix adapter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "prefixcl/data.h"
#include "serve_cli.h"

static int usage(FILE *out)
{
    fprintf(out, "usage: prefixcl eval --model DIR [--adapter PATH] --data FILE [--max-length N] [--batch B]\n"
                 "                     [--device SEL]\n"
                 "  --data FILE      text (one example a line) or JSONL (text, or prompt + completion:\n"
                 "                   the completion's tokens are scored); needs the folder's tokenizer\n"
                 "  --max-length N   tokens kept per example (default 256, at most the model's positions)\n"
                 "  --batch B        examples per forward (default 4)\n"
                 "Prints the mean loss over the scored tokens and its perplexity, for the frozen model\n"
                 "and with the adapter.\n");
    return out == stdout ? 0 : 2;
}

/* Mean loss over every counted label of the data set (one pass). */
static bool dataset_loss(serve_ctx *ctx, pfx_dataset *ds, size_t batch, size_t max_length, bool adapter,
                         double *mean, size_t *counted)
{
    int32_t *ids = malloc(batch * max_length * sizeof(int32_t)), *labels = malloc(batch * max_length * sizeof(int32_t));
    int32_t *lens = malloc(batch * sizeof(int32_t)), *entry = calloc(batch, sizeof(int32_t));
    bool ok = ids && labels && lens && entry;
    pfx_data_position pos = { 0, 0 };
    double sum = 0.0;
    size_t total = 0;
    const size_t batches = pfx_dataset_batches_per_epoch(ds, batch);
    for (size_t k = 0; ok && k < batches; k++) {
        size_t rows = 0, width = 0;
        if (cli_stop) { /* SIGINT or SIGTERM: a part of the data set gives no result */
            fprintf(stderr, "prefixcl eval: stopped by signal %d after %zu of %zu batches\n", (int)cli_stop, k,
                    batches);
            ok = false;
            break;
        }
        if (pfx_dataset_next_batch(ds, &pos, batch, ids, lens, labels, &rows, &width) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl eval: %s\n", pfx_last_error(NULL));
            ok = false;
            break;
        }
        size_t count = 0;
        for (size_t b = 0; b < rows; b++)
            for (size_t t = 1; t < width; t++)
                count += labels[b * width + t] != PFX_LABEL_IGNORE;
        if (!rows || !count)
            continue;
        pfx_model_batch mb = { rows, width, ids, lens, labels };
        pfx_model_prefix pre;
        memset(&pre, 0, sizeof(pre));
        double loss = 0.0;
        if ((adapter && pfx_adapter_bank_prefix(ctx->bank, entry, rows, &pre) != PFX_SUCCESS) ||
            pfx_model_loss(ctx->model, &mb, adapter ? &pre : NULL, &loss) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl eval: %s\n", pfx_last_error(ctx->rt));
            ok = false;
            break;
        }
        sum += loss * (double)count;
        total += count;
    }
    free(ids);
    free(labels);
    free(lens);
    free(entry);
    if (ok && !total) {
        fprintf(stderr, "prefixcl eval: the data set scores no token\n");
        ok = false;
    }
    *mean = total ? sum / (double)total : 0.0;
    *counted = total;
    return ok;
}

int cmd_eval(int argc, char **argv)
{
    const char *model = NULL, *data = NULL, *device = NULL;
    uint64_t max_length = 256, batch = 4;
    serve_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int got = serve_option(argc, argv, &i, "eval", &a, &v);
        if (got <= 0)
            return usage(got ? stderr : stdout);
        if (!strcmp(a, "--model")) {
            model = v;
        } else if (!strcmp(a, "--data")) {
            data = v;
        } else if (!strcmp(a, "--device")) {
            device = v;
        } else if (!strcmp(a, "--adapter") && ctx.adapters == 0) {
            ctx.adapter[ctx.adapters++] = v;
        } else if (!(!strcmp(a, "--max-length") && cli_uint(v, 2, 1u << 20, &max_length)) &&
                   !(!strcmp(a, "--batch") && cli_uint(v, 1, 64, &batch))) {
            fprintf(stderr, "prefixcl eval: bad option or value: %s %s\n", a, v);
            return usage(stderr);
        }
    }
    if (!model || !data) {
        fprintf(stderr, "prefixcl eval: --model and --data are required\n");
        return usage(stderr);
    }
    pfx_model_shape shape;
    if (pfx_model_read_config(model, &shape) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl eval: %s\n", pfx_last_error(NULL));
        return 1;
    }
    const uint64_t asked = max_length;
    if (max_length > shape.max_positions)
        max_length = shape.max_positions;
    int status = 1;
    pfx_dataset *ds = NULL;
    cli_stop_catch();
    if (!serve_open(&ctx, "eval", device, model, batch, max_length)) {
        cli_stop_release();
        return 1;
    }
    if (!ctx.tok) {
        fprintf(stderr, "prefixcl eval: %s has no tokenizer (tokenizer.json or vocab.json + merges.txt)\n", model);
        goto out;
    }
    max_length = ctx.tokens;
    if (max_length < asked)
        fprintf(stderr, "prefixcl eval: --max-length %llu capped at %llu: the model has %zu positions (%s/config.json)%s\n",
                (unsigned long long)asked, (unsigned long long)max_length, shape.max_positions, model,
                ctx.bank ? " and the adapter's prefix takes the rest" : "");
    pfx_dataset_options opt;
    pfx_dataset_default_options(&opt);
    opt.max_length = max_length;
    opt.shuffle = false;
    if (pfx_dataset_load(data, ctx.tok, &opt, &ds) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl eval: %s\n", pfx_last_error(NULL));
        goto out;
    }
    double base = 0.0, tuned = 0.0;
    size_t counted = 0;
    if (!dataset_loss(&ctx, ds, batch, max_length, false, &base, &counted))
        goto out;
    printf("frozen model: loss %.6f, perplexity %.4f (%zu tokens scored)\n", base, exp(base), counted);
    if (ctx.bank) {
        if (!dataset_loss(&ctx, ds, batch, max_length, true, &tuned, &counted))
            goto out;
        printf("with %s: loss %.6f, perplexity %.4f\n", ctx.adapter[0], tuned, exp(tuned));
    }
    status = 0;
out:
    if (status && cli_stop)
        status = cli_stop_status();
    pfx_dataset_free(&ds);
    serve_close(&ctx);
    cli_stop_release();
    return status;
}
