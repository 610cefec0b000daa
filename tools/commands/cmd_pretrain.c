/* prefixcl pretrain: full training of a model with or without attention
 * gains (prefixcl/pretrain.h): from a config alone (pre-training) or a
 * Hugging Face checkpoint (full fine-tuning). A thin command over the
 * library's job: options, progress, the pictures; Ctrl-C or SIGTERM stops
 * at the next step boundary with a checkpoint that --resume continues.
 * Under `mpirun -n R` every rank trains on its share of each batch, the
 * gradients summed in rank order (prefixcl/dist.h); rank 0 prints and writes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chart.h"
#include "common/cli.h"
#include "commands.h"
#include "plot/pretrain_plot.h"
#include "common/tool_util.h"

static const cli_doc doc = {
    "prefixcl pretrain (--config PATH | --model DIR) --data FILE|'PREFIX_*.bin'\n"
    "                  [--tokenizer DIR] [--eval FILE] [--out DIR] [options]",
    NULL, NULL
};

typedef struct progress {
    bool tty, quiet;
    size_t every;
    float lr;           /* the weights' (the schedule's factor times it) */
    bool built;         /* the kernel building said */
    size_t block;       /* T, the keys a query attends to at most */
    double peak_gflops; /* the FMA peak of one device (0: no MFU) */
    double rate;        /* the last step's training tokens/s (steady state) */
    double flops;       /* of a trained token (6 N + 12 L T d), from the first step */
    double mfu;         /* of the last step printed, percent */
} progress;

static void on_step(const pfx_pretrain_step *s, void *user)
{
    progress *p = user;
    p->rate = s->tokens_per_s;
    if (p->quiet)
        return;
    tool_say_builds(stdout, p->tty, s->build_s, &p->built);
    if (p->flops == 0.0) {
        pfx_model_shape shape;
        if (pfx_model_get_shape(pfx_context_model(s->ctx), &shape) == PFX_SUCCESS)
            p->flops = pfx_model_train_flops(&shape, p->block, true);
    }
    p->mfu = tool_mfu(s->tokens_per_s, p->flops, p->peak_gflops, pfx_dist_size());
    char eval[64] = "";
    if (isfinite(s->eval_loss))
        snprintf(eval, sizeof(eval), "  eval %.4f (ppl %.1f)", s->eval_loss, exp(s->eval_loss));
    if (p->tty) {
        char bar[CLI_BAR_MAX + 1];
        cli_bar(bar, (double)s->step / (double)s->steps, 24);
        fprintf(stdout,
                "\r[%s] step %zu/%zu  loss %.4f%s  lr %.2e  |g| %.3e  %.0f tok/s  MFU %.1f%%  "
                "%.0f s left%s ",
                bar, s->step, s->steps, s->loss, eval, (double)(p->lr * s->lr_factor),
                (double)s->grad_norm, s->tokens_per_s, p->mfu, s->eta_s,
                s->skipped ? "  (skipped)" : "");
        if (s->step == s->steps || *eval)
            fputc('\n', stdout);
    } else if (s->step == 1 || s->step % p->every == 0 || s->step == s->steps || *eval) {
        fprintf(stdout,
                "step %zu/%zu epoch %llu loss %.6f grad_norm %.4e lr %.4e lr_factor %.4f gain_ramp "
                "%.3f tokens/s %.0f mfu %.2f%% eta_s %.0f%s%s\n",
                s->step, s->steps, (unsigned long long)s->epoch, s->loss, (double)s->grad_norm,
                (double)(p->lr * s->lr_factor), (double)s->lr_factor, (double)s->gain_ramp,
                s->tokens_per_s, p->mfu, s->eta_s, eval, s->skipped ? " skipped" : "");
    }
    fflush(stdout);
}

/* Whether folder `dir` holds a tokenizer pfx_tokenizer_load reads. */
static bool has_tokenizer(const char *dir)
{
    char a[4200], b[4200];
    if (snprintf(a, sizeof(a), "%s/tokenizer.json", dir) >= (int)sizeof(a) ||
        snprintf(b, sizeof(b), "%s/vocab.json", dir) >= (int)sizeof(b))
        return false;
    return access(a, R_OK) == 0 || access(b, R_OK) == 0;
}

/* Without --tokenizer, the tokenizer beside the config (its folder, or the
 * folder of the file), or the missing tokenizer named with the option that
 * gives it. *tok points there for a file of another name than config.json,
 * which is read from the output folder (config_folder); otherwise the job
 * finds it itself (and a checkpoint's options stay those of such a run). */
static bool config_tokenizer(const char *config, char *buf, size_t cap, const char **tok)
{
    struct stat sb;
    if (stat(config, &sb) != 0 || !(S_ISDIR(sb.st_mode) || S_ISREG(sb.st_mode)))
        return true; /* config_folder names it or refuses it */
    const char *slash = strrchr(config, '/'), *base = slash ? slash + 1 : config;
    if (S_ISDIR(sb.st_mode))
        snprintf(buf, cap, "%s", config);
    else
        snprintf(buf, cap, "%.*s", slash ? (int)(slash - config) : 1, slash ? config : ".");
    if (has_tokenizer(buf)) {
        if (!S_ISDIR(sb.st_mode) && strcmp(base, "config.json"))
            *tok = buf;
        return true;
    }
    fprintf(stderr,
            "prefixcl pretrain: --config %s: no tokenizer in %s (tokenizer.json, or vocab.json + "
            "merges.txt): give its folder with --tokenizer DIR\n",
            config, buf);
    return false;
}

/* --config names a config.json or its folder: the folder the job reads. A
 * file of another name is copied into the output folder as config.json. */
static const char *config_folder(const char *path, const char *out, char *buf, size_t cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "prefixcl pretrain: --config %s: no such file or folder\n", path);
        return NULL;
    }
    if (S_ISDIR(sb.st_mode))
        return path;
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (!strcmp(base, "config.json")) {
        snprintf(buf, cap, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        return buf;
    }
    FILE *in;
    if (pfx_input_open(path, &in) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl pretrain: --config: %s\n", pfx_last_error(NULL));
        return NULL;
    }
    snprintf(buf, cap, "%s/config.json", out);
    pfx_output_file *f = NULL;
    if (pfx_output_open(buf, &f) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl pretrain: --config %s: cannot copy it to %s\n", path, buf);
        if (in)
            fclose(in);
        return NULL;
    }
    char chunk[1 << 14];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), in)) > 0)
        fwrite(chunk, 1, n, pfx_output_stream(f));
    fclose(in);
    if (pfx_output_commit(&f) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl pretrain: writing %s: %s\n", buf, pfx_last_error(NULL));
        return NULL;
    }
    snprintf(buf, cap, "%s", out);
    return buf;
}

int cmd_pretrain(int argc, char **argv)
{
    pfx_pretrain_config c;
    pfx_pretrain_default_config(&c);
    c.out_dir = "pretrain-out";
    const char *config = NULL, *device = NULL, *gain_heads = NULL, *gain_init = NULL;
    bool quiet = false, resume = false, no_decay = false, recompute = false, shard = false,
         no_shard = false;
    float peak = 0.0f;
    int gain = 0;
    size_t warmup = c.warmup_steps, ramp = c.gain_ramp_steps;
    static const char *const gains[] = { "off", "linear", "tanh", "dim", NULL };
    static const char *const data_formats[] = { "auto", "text", "shards", "raw-u16", NULL };
    int data_format = 0;
    const cli_option opts[] = {
        { "--config", CLI_TEXT, &config, 0, 0, NULL, NULL, "PATH",
          "config.json (or its folder): a new model, initialized as transformers does", NULL },
        { "--model", CLI_TEXT, &c.model_dir, 0, 0, NULL, NULL, "DIR",
          "a Hugging Face folder: full fine-tuning of its weights", NULL },
        { "--tokenizer", CLI_TEXT, &c.tokenizer_dir, 0, 0, NULL, NULL, "DIR",
          "tokenizer.json's folder", "the --config or --model folder" },
        { "--data", CLI_TEXT, &c.data_path, 0, 0, NULL, NULL, "FILE",
          "text (one document a line), JSONL with a text field, or token shards: a quoted "
          "pattern such as 'PREFIX_*.bin' (prefixcl tokenize --out), memory-mapped",
          NULL },
        { "--data-format", CLI_CHOICE, &data_format, 0, 0, data_formats, NULL, "F",
          "of --data and --eval: text (or JSONL), shards (llm.c's header, uint16 or uint32), "
          "raw-u16 (nanoGPT's headerless train.bin), or auto: shards for a pattern or a file "
          "with llm.c's magic, else text",
          "auto" },
        { "--eval", CLI_TEXT, &c.eval_path, 0, 0, NULL, NULL, "FILE", "evaluation text",
          "the last twentieth of the blocks held out" },
        { "--out", CLI_TEXT, &c.out_dir, 0, 0, NULL, NULL, "DIR", "output folder",
          "./pretrain-out" },
        { "--device", CLI_TEXT, &device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
        { "--block", CLI_SIZE, &c.block, 2, 1 << 20, NULL, NULL, "N", "tokens a row", "128" },
        { "--batch", CLI_SIZE, &c.batch, 1, 4096, NULL, NULL, "N", "rows a micro-batch", "8" },
        { "--accumulate", CLI_SIZE, &c.accumulate, 1, 65536, NULL, NULL, "N",
          "micro-batches a step", "1" },
        { "--steps", CLI_SIZE, &c.steps, 1, 1e9, NULL, NULL, "N", "optimizer steps",
          "--epochs over the data" },
        { "--epochs", CLI_SIZE, &c.epochs, 1, 1e6, NULL, NULL, "N", "passes over the data", "1" },
        { "--lr", CLI_FLOAT, &c.lr, 0, 10, NULL, NULL, "X", "the weights' learning rate", "1e-4" },
        { "--gain", CLI_CHOICE, &gain, 0, 0, gains, NULL, "MODE",
          "linear or tanh: a learnable gain per head; dim: one per head and dimension, "
          "q * (1 + r G)",
          "off" },
        { "--gain-lr", CLI_FLOAT, &c.gain_lr, 0, 10, NULL, NULL, "X", "the gains' learning rate",
          "5e-5" },
        { "--gain-ramp", CLI_SIZE, &ramp, 0, 1e9, NULL, NULL, "N",
          "steps over which the gains ramp in from 0 (more than tune's 20: pre-training runs "
          "thousands of steps, and the weights move under the gains)",
          "100" },
        { "--gain-init", CLI_TEXT, &gain_init, 0, 0, NULL, NULL, "SPEC",
          "the gains' start: zero (plain attention) or uniform:A (each uniform in [-A, A], "
          "from the seed)",
          "zero" },
        { "--gain-lr-decay", CLI_FLOAT, &c.gain_decay_fraction, 0, 1, NULL, NULL, "X",
          "the gains' learning rate reaches the cosine's floor after this fraction of the "
          "decay steps (0.5: twice as fast as the weights')",
          "1: with the weights" },
        { "--gain-heads", CLI_TEXT, &gain_heads, 0, 0, NULL, NULL, "LIST",
          "only these heads get a gain, the others keep 0: comma-separated LAYER.HEAD pairs "
          "counted from 0 (e.g. 0.1,2.3)",
          "every head" },
        { "--weight-decay", CLI_FLOAT, &c.weight_decay, 0, 1e3, NULL, NULL, "X",
          "on the weights, never the gains", "0.01" },
        { "--no-decay-norms", CLI_FLAG, &no_decay, 0, 0, NULL, NULL, NULL,
          "no decay on biases and norm weights either", NULL },
        { "--clip", CLI_FLOAT, &c.max_grad_norm, 0, 1e6, NULL, NULL, "X",
          "global gradient-norm clipping, 0: off", "1" },
        { "--warmup", CLI_SIZE, &warmup, 0, 1e9, NULL, NULL, "N",
          "learning-rate warm-up steps (at most the steps), then cosine decay to --min-lr-ratio "
          "(more than tune's 10: every weight trains, from random values with --config)",
          "100" },
        { "--min-lr-ratio", CLI_FLOAT, &c.min_lr_ratio, 0, 1, NULL, NULL, "X", "the cosine's floor",
          "0.1" },
        { "--freeze", CLI_TEXT, &c.freeze, 0, 0, NULL, NULL, "LIST",
          "comma-separated parts of weight names to keep frozen (each in some name)", NULL },
        { "--eval-every", CLI_SIZE, &c.eval_every, 1, 1e9, NULL, NULL, "N",
          "also evaluate every N steps", NULL },
        { "--eval-blocks", CLI_SIZE, &c.eval_blocks, 1, 1e9, NULL, NULL, "N",
          "blocks an evaluation reads", "all" },
        { "--checkpoint-every", CLI_SIZE, &c.checkpoint_every, 1, 1e9, NULL, NULL, "N",
          "also write the checkpoint every N steps", NULL },
        { "--recompute", CLI_FLAG, &recompute, 0, 0, NULL, NULL, NULL,
          "recompute each block in the backward (less memory)", NULL },
        { "--shard-optimizer", CLI_FLAG, &shard, 0, 0, NULL, NULL, NULL,
          "under mpirun, each rank keeps the AdamW state of its share of the weights "
          "(ZeRO stage 1; the same results)",
          "on with several ranks" },
        { "--no-shard-optimizer", CLI_FLAG, &no_shard, 0, 0, NULL, NULL, NULL,
          "every rank keeps the whole AdamW state", NULL },
        { "--seed", CLI_U64, &c.seed, 0, 1.9e19, NULL, NULL, "S",
          "the new model's weights, the data order and the dropout masks", "1" },
        { "--dropout", CLI_FLOAT, &c.dropout, 0, 0.999, NULL, NULL, "X",
          "p of every dropout of the model (GPT-2: embeddings, attention, residual; Llama "
          "family: attention)",
          "config.json's" },
        { "--resume", CLI_FLAG, &resume, 0, 0, NULL, NULL, NULL,
          "continue from OUT/" PFX_PRETRAIN_CHECKPOINT " (same options)", NULL },
        { "--peak-gflops", CLI_FLOAT, &peak, 0, 1e9, NULL, NULL, "X",
          "the device's float32 FMA peak for the MFU (prefixcl bench's peak.fma)",
          "measured at the start, about 0.25 s" },
        { "--quiet", CLI_FLAG, &quiet, 0, 0, NULL, NULL, NULL, "no progress output", NULL },
    };
    const int parsed =
        cli_parse("pretrain", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (!config == !c.model_dir) {
        fprintf(stderr, "prefixcl pretrain: give --config PATH (a new model) or --model DIR "
                        "(fine-tuning), one of "
                        "them\n\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    if (shard && no_shard) {
        fprintf(stderr, "prefixcl pretrain: --shard-optimizer and --no-shard-optimizer "
                        "exclude each other\n\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    if (!c.data_path) {
        fprintf(stderr, "prefixcl pretrain: --data FILE is needed\n\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    c.data_format = (pfx_pretrain_data)data_format;
    char init_why[128];
    if (gain_init && !cli_gain_init(gain_init, &c.gain_init, init_why, sizeof(init_why))) {
        fprintf(stderr, "prefixcl pretrain: --gain-init %s\n", init_why);
        return 2;
    }
    if (gain == 0 && (c.gain_init > 0.0f || c.gain_decay_fraction > 0.0f)) {
        fprintf(stderr, "prefixcl pretrain: %s needs a gain (--gain linear, tanh or dim)\n",
                c.gain_init > 0.0f ? "--gain-init" : "--gain-lr-decay");
        return 2;
    }
    c.gain_mode = gain == 3 ? PFX_GAIN_OFF : (pfx_gain_mode)gain;
    c.structured_gain = gain == 3;
    const bool any_gain = gain != 0;
    c.warmup_steps = (uint32_t)warmup;
    c.gain_ramp_steps = (uint32_t)ramp;
    c.no_decay_norms = no_decay;
    c.recompute = recompute;
    c.resume = resume;
    /* every output checked before the first step */
    static const char *const outputs[] = { "config.json",       "model.safetensors",
                                           "tokenizer.json",    "tokenizer_config.json",
                                           "gains.safetensors", "loss.csv",
                                           "loss.png",          "gains.png",
                                           "gains_steps.png",   PFX_PRETRAIN_CHECKPOINT };
    if (!cli_check_output_dir("pretrain", "--out", c.out_dir, outputs,
                              sizeof(outputs) / sizeof(outputs[0])))
        return 2;
    char tokbuf[4096];
    /* text needs the tokenizer; shards (a pattern or an explicit format) are
     * tokens already, and their output folder goes without one unless given */
    const bool text_data =
        c.data_format == PFX_PRETRAIN_DATA_TEXT ||
        (c.data_format == PFX_PRETRAIN_DATA_AUTO && !strpbrk(c.data_path, "*?[") &&
         !(strlen(c.data_path) > 4 && !strcmp(c.data_path + strlen(c.data_path) - 4, ".bin")));
    if (config && !c.tokenizer_dir && text_data &&
        !config_tokenizer(config, tokbuf, sizeof(tokbuf), &c.tokenizer_dir))
        return 2;
    /* the data files (not a shard pattern) refused before the device opens:
     * a FIFO or a folder must not wait for the kernels and the peak */
    const char *const data_files[][2] = { { "--data", c.data_path }, { "--eval", c.eval_path } };
    for (size_t i = 0; i < 2; i++) {
        const char *p = data_files[i][1];
        FILE *in = NULL;
        if (!p || strpbrk(p, "*?["))
            continue;
        if (pfx_input_open(p, &in) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl pretrain: %s: %s\n", data_files[i][0], pfx_last_error(NULL));
            return 2;
        }
        fclose(in);
    }
    char cfgbuf[4096];
    if (config && !(c.config_dir = config_folder(config, c.out_dir, cfgbuf, sizeof(cfgbuf))))
        return 2;
    /* the list as written; the job checks it against the model it loads */
    pfx_layer_head *heads = NULL;
    char why[160];
    if (gain_heads && !cli_heads(gain_heads, &heads, &c.gain_head_count, why, sizeof(why))) {
        fprintf(stderr, "prefixcl pretrain: --gain-heads %s: %s\n", gain_heads, why);
        return 2;
    }
    c.gain_heads = heads;
    char devbuf[32];
    const char *dev = NULL; /* this rank's (dist.h) */
    pfx_runtime *rt =
        tool_dist_failed("pretrain", pfx_dist_device(device, devbuf, sizeof(devbuf), &dev))
            ? NULL
            : tool_runtime("pretrain", dev);
    if (!rt) {
        free(heads);
        return 1;
    }
    const bool lead = pfx_dist_rank() == 0;
    pfx_dist_hooks(&c.dist);
    if (no_shard)
        c.dist.shard = NULL;
    char agreed[8192];
    snprintf(
        agreed, sizeof(agreed),
        "%s|%s|%s|%s|%s|%zu|%zu|%zu|%zu|%zu|%a|%a|%a|%d|%a|%zu|%a|%d|%zu|%s|%llu|%d|%s|%d|%a|%a|%d",
        config ? config : "", c.model_dir ? c.model_dir : "",
        c.tokenizer_dir ? c.tokenizer_dir : "", c.data_path, c.eval_path ? c.eval_path : "",
        c.block, c.batch, c.accumulate, c.steps, c.epochs, (double)c.lr, (double)c.gain_lr,
        (double)c.weight_decay, (int)no_decay, (double)c.max_grad_norm, warmup,
        (double)c.min_lr_ratio, gain, ramp, c.freeze ? c.freeze : "", (unsigned long long)c.seed,
        (int)resume, gain_heads ? gain_heads : "", data_format, (double)c.gain_init,
        (double)c.gain_decay_fraction, (int)no_shard);
    if (tool_dist_failed("pretrain", pfx_dist_agree("pretraining options", agreed))) {
        pfx_runtime_destroy(&rt);
        free(heads);
        return 1;
    }
    progress prog = { .tty = isatty(STDOUT_FILENO) != 0 && pfx_dist_size() == 1,
                      .quiet = quiet || !lead,
                      .every = 10,
                      .lr = c.lr,
                      .block = c.block };
    if (!prog.quiet)
        prog.peak_gflops = tool_fma_peak("pretrain", rt, (double)peak);
    if (!quiet)
        printf("prefixcl pretrain: %s %s, data %s, blocks of %zu, %zu x %zu rows a step, gain %s, "
               "seed %llu%s\n",
               c.model_dir ? "fine-tuning" : "a new model from",
               c.model_dir ? c.model_dir : c.config_dir, c.data_path, c.block, c.batch,
               c.accumulate, gains[gain], (unsigned long long)c.seed, c.resume ? ", resuming" : "");
    cli_stop_catch();
    c.stop_flag = &cli_stop;
    pfx_pretrain_result r;
    pfx_status st = pfx_pretrain_run(rt, &c, on_step, &prog, &r);
    cli_stop_release();
    if (st != PFX_SUCCESS || !lead) {
        if (st != PFX_SUCCESS)
            fprintf(stderr, "prefixcl pretrain: %s (%s)\n", pfx_status_string(st),
                    pfx_last_error(rt));
        const bool stopped = r.stopped;
        pfx_pretrain_result_free(&r);
        pfx_runtime_destroy(&rt);
        free(heads);
        /* a stop is agreed by every rank: each exits as rank 0 */
        /* a bad option, also one found against the model: 2, as the parser's */
        return st == PFX_ERROR_INVALID_ARGUMENT ? 2
               : st != PFX_SUCCESS              ? 1
               : stopped && cli_stop            ? cli_stop_status()
               : stopped                        ? PFX_DIST_EXIT_STOPPED
                                                : 0;
    }
    if (prog.tty && !prog.quiet && r.stopped) /* the summary on a line of its own */
        fputc('\n', stdout);
    const pfx_model_shape *s = &r.shape;
    printf("device: %s (%s)\n", pfx_runtime_device(rt)->device_name,
           pfx_runtime_device(rt)->platform_name);
    printf("model: %s, %zu layers, %zu heads (%zu kv), head size %zu, vocabulary %zu, %zu "
           "parameters\n",
           s->model_type, s->layers, s->heads, s->kv_heads, s->head_dim, s->vocab, s->parameters);
    printf("trained: %zu values: %zu weights%s\n", r.trained_values, r.trained_weights,
           c.structured_gain ? " and a gain per layer, head and dimension"
           : any_gain        ? " and a gain per layer and head"
                             : "");
    if (heads)
        printf("gains on %s only: the other heads keep gain 0\n", gain_heads);
    printf("data: %zu training blocks, %zu evaluation blocks of %zu tokens; %zu tokens a step\n",
           r.train_blocks, r.eval_blocks, c.block, r.tokens_per_step);
    if (*r.config_filled)
        printf("config.json: %s taken from the tokenizer (%s), which the config did not give\n",
               r.config_filled,
               c.tokenizer_dir ? c.tokenizer_dir
               : c.model_dir   ? c.model_dir
                               : c.config_dir);
    int rc = 0;
    if (r.stopped) {
        printf(
            "stopped after step %zu of %zu: %s/%s holds it; run again with --resume to continue\n",
            r.steps_done, r.steps, c.out_dir, PFX_PRETRAIN_CHECKPOINT);
        rc = cli_stop ? cli_stop_status() : pfx_dist_size() > 1 ? PFX_DIST_EXIT_STOPPED : 0;
    } else {
        const double rate = prog.rate;
        printf("time: %.1f s for steps %zu..%zu with evaluations; training alone %.0f tokens/s",
               r.seconds, r.first_step + 1, r.steps_done, rate);
        if (prog.peak_gflops > 0)
            printf(", MFU %.2f%% of %d x %.1f GFLOP/s (6 N + 12 L T d = %.4g FLOPs a token)",
                   tool_mfu(rate, pfx_model_train_flops(s, c.block, true), prog.peak_gflops,
                            pfx_dist_size()),
                   pfx_dist_size(), prog.peak_gflops, pfx_model_train_flops(s, c.block, true));
        printf("\n");
        if (r.first_step == 0)
            printf("evaluation loss: before %.6f (perplexity %.2f), ", r.eval_losses[0],
                   exp(r.eval_losses[0]));
        else
            printf("evaluation loss: ");
        printf("after %.6f (perplexity %.2f)\n", r.eval_losses[r.steps],
               exp(r.eval_losses[r.steps]));
        const int pics = pretrain_plot_all(c.out_dir, &r, any_gain);
        printf("wrote %s/: config.json + model.safetensors + the tokenizer (a Hugging Face "
               "folder)%s, loss.csv%s, %s\n",
               c.out_dir, any_gain ? ", gains.safetensors" : "",
               pics == 0 ? (any_gain ? ", loss.png, gains.png, gains_steps.png" : ", loss.png")
                         : "",
               PFX_PRETRAIN_CHECKPOINT);
        if (pics)
            printf("pictures: %s\n", chart_strerror(pics));
        if (any_gain)
            printf("note: transformers loads the folder without the gains (gains.safetensors is "
                   "prefixcl's own "
                   "file): it computes the model as if every gain were 0; prefixcl generate "
                   "--model %s --adapter "
                   "%s/gains.safetensors applies them\n",
                   c.out_dir, c.out_dir);
    }
    pfx_pretrain_result_free(&r);
    pfx_runtime_destroy(&rt);
    free(heads);
    return rc;
}
