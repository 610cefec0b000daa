/* prefixcl eval: causal-LM loss and perplexity of a data set on a model
 * folder, without and with a prefix adapter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "commands.h"
#include "prefixcl/eval.h"
#include "serve_cli.h"
#include "common/tool_util.h"

static const cli_doc doc = {
    "prefixcl eval --model DIR [--adapter PATH] --data FILE [--max-length N] [--batch B]\n"
    "              [--storage T] [--device SEL]",
    NULL,
    "Prints the mean loss over the scored tokens and its perplexity, for the frozen model\n"
    "and with the adapter. Examples are built as tune builds them (the tokenizer's special\n"
    "tokens, EOS appended, the same length), so an adapter's loss here is the one tune\n"
    "reports; --no-eos scores the text alone, as model(**tokenizer(text), labels=...) does.\n"
};

int cmd_eval(int argc, char **argv)
{
    const char *device = NULL;
    pfx_eval_config cfg;
    pfx_eval_default_config(&cfg);
    size_t max_length = 0, batch = 4;
    bool no_eos = false;
    int storage = PFX_DTYPE_F32;
    const cli_option opts[] = {
        { "--model", CLI_TEXT, &cfg.model_dir, 0, 0, NULL, NULL, "DIR",
          "a Hugging Face folder (config.json, safetensors, tokenizer)", NULL },
        { "--adapter", CLI_TEXT, &cfg.adapter_path, 0, 0, NULL, NULL, "PATH",
          "a prefix adapter, as generate takes it", NULL },
        { "--data", CLI_TEXT, &cfg.data_path, 0, 0, NULL, NULL, "FILE",
          "text (one example a line) or JSONL (text, or prompt + completion: the completion's "
          "tokens are scored); needs the folder's tokenizer",
          NULL },
        { "--max-length", CLI_SIZE, &max_length, 2, 1 << 20, NULL, NULL, "N",
          "tokens kept per example, at most the model's positions less the adapter's prefix "
          "(as tune)",
          CLI_STR(PFX_DATA_DEFAULT_MAX_LENGTH) },
        { "--no-eos", CLI_FLAG, &no_eos, 0, 0, NULL, NULL, NULL,
          "no EOS after each example (give it to tune as well to compare)", NULL },
        { "--batch", CLI_SIZE, &batch, 1, 64, NULL, NULL, "B", "examples per forward", "4" },
        { "--storage", CLI_CHOICE, &storage, 0, 0, tool_storages, NULL, "T",
          "the weights on the device", "f32" },
        { "--device", CLI_TEXT, &device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
    };
    const int parsed =
        cli_parse("eval", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (!cfg.model_dir || !cfg.data_path) {
        fprintf(stderr, "prefixcl eval: --model and --data are required\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    cfg.storage = (pfx_dtype)storage; /* tool_storages is in pfx_dtype order */
    cfg.max_length = max_length;
    cfg.no_eos = no_eos;
    cfg.batch = batch;
    cfg.stop_flag = &cli_stop;
    pfx_runtime_params rp;
    pfx_runtime_default_params(&rp);
    rp.device = device;
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, &rp) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl eval: %s\n", pfx_last_error(NULL));
        return 1;
    }
    cli_stop_catch();
    pfx_eval_result r;
    int status = 1;
    if (pfx_eval_run(rt, &cfg, NULL, NULL, &r) != PFX_SUCCESS) {
        const char *msg = pfx_last_error(rt); /* the job's own begin "eval: " */
        fprintf(stderr, "prefixcl eval: %s\n", strncmp(msg, "eval: ", 6) ? msg : msg + 6);
        goto out;
    }
    const size_t asked = max_length ? max_length : PFX_DATA_DEFAULT_MAX_LENGTH;
    if (r.max_length < asked)
        fprintf(stderr,
                "prefixcl eval: --max-length %zu%s capped at %zu: the model has %zu positions "
                "(%s/config.json)%s\n",
                asked, max_length ? "" : " (the default)", r.max_length,
                r.max_length + r.prefix_len, cfg.model_dir,
                r.prefix_len ? " and the adapter's prefix takes the rest" : "");
    tool_print_example_rule(stdout, &r.rule);
    if (r.passes_done >= 1)
        printf("frozen model: loss %.6f, perplexity %.4f (%zu tokens scored)\n", r.loss,
               r.perplexity, r.tokens);
    if (r.passes_done >= 2)
        printf("with %s: loss %.6f, perplexity %.4f\n", cfg.adapter_path, r.adapter_loss,
               r.adapter_perplexity);
    if (r.stopped) /* SIGINT or SIGTERM: a part of the data set gives no result */
        fprintf(stderr, "prefixcl eval: stopped by signal %d after %zu of %zu batches\n",
                (int)cli_stop, r.batches_done, r.batches);
    else
        status = 0;
out:
    if (status && cli_stop)
        status = cli_stop_status();
    pfx_runtime_destroy(&rt);
    cli_stop_release();
    return status;
}
