/* prefixcl: the command-line tool. One program, one subcommand per job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "commands.h"
#include "prefixcl/prefixcl.h"
#include "common/tool_util.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    { "devices", cmd_devices, "list every OpenCL device and mark the default [--json]" },
    { "tune", cmd_tune,
      "the main job: prefix-tune a model folder on a text file, write a PEFT adapter [--model DIR "
      "--data FILE]" },
    { "pretrain", cmd_pretrain,
      "train every weight (and per-head attention gains) from a config or a checkpoint [--config "
      "PATH --data FILE]" },
    { "experiment", cmd_experiment,
      "the attention-gain experiment: 5 arms, perplexity, tokens/s, settled heads, a probe [gain "
      "--corpus DIR --out DIR]" },
    { "export", cmd_export,
      "a model with its trained gains folded into the query projections, a plain HF folder "
      "[--fold-gains --model DIR --gains FILE --out DIR]" },
    { "train", cmd_train,
      "regression run: prefix-tune a frozen attention stack against a hidden teacher [--steps N]" },
    { "generate", cmd_generate,
      "text from a model folder with prefix adapters, batched, tokens/s [--model DIR --prompt "
      "TEXT]" },
#ifdef PFX_HAVE_SERVE
    { "serve", cmd_serve,
      "an OpenAI-compatible HTTP server, continuous batching, an adapter per request [--model "
      "DIR]" },
#endif
    { "eval", cmd_eval,
      "loss and perplexity of a data set, without and with an adapter [--model DIR --data FILE]" },
    { "tokenize", cmd_tokenize,
      "a text's token ids and pieces, or a file's token count [--model DIR --text TEXT]" },
    { "check", cmd_check, "run every operation against the C reference [--device SEL]" },
    { "attn-map", cmd_attn_map,
      "write one head's attention probabilities as a PNG/PGM heat map [--out FILE]" },
    { "bench", cmd_bench,
      "measure the device's ceilings, SGEMM, attention and the encoder [--all] [--quick]" },
    { "gemm-tune", cmd_gemm_tune,
      "tune CLBlast's GEMM kernels for a device and store the result [--time-limit S]" },
    { "kernel-configs", cmd_kernel_configs,
      "print every kernel program x vendor x options the runtime may build [--build]" },
};

static int usage(FILE *out)
{
    fprintf(out, "usage: prefixcl <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-15s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "  %-15s %s\n", "--version", "the library's version");
    fprintf(out, "\nThe device is chosen by --device SEL or $PREFIXCL_DEVICE: P:D, gpu, cpu,\n"
                 "or a name substring (nvidia, amd, intel, pocl, h200).\n");
    return 2;
}

int main(int argc, char **argv)
{
    tool_openblas_settings(argv);
    /* under mpirun: join the job (prefixcl/dist.h); otherwise nothing */
    if (pfx_dist_init(&argc, &argv) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl: %s\n", pfx_last_error(NULL));
        return 1;
    }
    if (argc < 2)
        return pfx_dist_finish(usage(stderr));
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return pfx_dist_finish(cli_finish_stdout(0));
    }
    if (!strcmp(argv[1], "--version")) {
        printf("prefixcl %s\n", pfx_version());
        return pfx_dist_finish(cli_finish_stdout(0));
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return pfx_dist_finish(cli_finish_stdout(commands[i].run(argc - 1, argv + 1)));
    fprintf(stderr, "prefixcl: unknown command '%s'\n\n", argv[1]);
    return pfx_dist_finish(usage(stderr));
}
