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
    "prefixcl pretrain (--config PATH | --model DIR) --data FILE [--tokenizer DIR] [--eval FILE]\n"
    "                  [--out DIR] [options]",
    NULL, NULL
};

typedef struct progress {
    bool tty, quiet;
    size_t every;
} progress;

static void on_step(const pfx_pretrain_step *s, void *user)
{
    const progress *p = user;
    if (p->quiet)
        return;
    char eval[64] = "";
    if (isfinite(s->eval_loss))
        snprintf(eval, sizeof(eval), "  eval %.4f (ppl %.1f)", s->eval_loss, exp(s->eval_loss));
    if (p->tty) {
        char bar[CLI_BAR_MAX + 1];
        cli_bar(bar, (double)s->step / (double)s->steps, 24);
        fprintf(stdout, "\r[%s] step %zu/%zu  loss %.4f%s  |g| %.3e  %.0f tok/s  %.0f s left%s ",
                bar, s->step, s->steps, s->loss, eval, (double)s->grad_norm, s->tokens_per_s,
                s->eta_s, s->skipped ? "  (skipped)" : "");
        if (s->step == s->steps || *eval)
            fputc('\n', stdout);
    } else if (s->step == 1 || s->step % p->every == 0 || s->step == s->steps || *eval) {
        fprintf(stdout,
                "step %zu/%zu epoch %llu loss %.6f grad_norm %.4e lr_factor %.4f gain_ramp %.3f "
                "tokens/s %.0f "
                "eta_s %.0f%s%s\n",
                s->step, s->steps, (unsigned long long)s->epoch, s->loss, (double)s->grad_norm,
                (double)s->lr_factor, (double)s->gain_ramp, s->tokens_per_s, s->eta_s, eval,
                s->skipped ? " skipped" : "");
    }
    fflush(stdout);
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
    const char *config = NULL, *device = NULL, *gain_heads = NULL;
    bool quiet = false, resume = false, no_decay = false, recompute = false;
    int gain = 0;
    size_t warmup = c.warmup_steps, ramp = c.gain_ramp_steps;
    static const char *const gains[] = { "off", "linear", "tanh", "dim", NULL };
    const cli_option opts[] = {
        { "--config", CLI_TEXT, &config, 0, 0, NULL, NULL, "PATH",
          "config.json (or its folder): a new model, initialized as transformers does", NULL },
        { "--model", CLI_TEXT, &c.model_dir, 0, 0, NULL, NULL, "DIR",
          "a Hugging Face folder: full fine-tuning of its weights", NULL },
        { "--tokenizer", CLI_TEXT, &c.tokenizer_dir, 0, 0, NULL, NULL, "DIR",
          "tokenizer.json's folder", "the --config or --model folder" },
        { "--data", CLI_TEXT, &c.data_path, 0, 0, NULL, NULL, "FILE",
          "text (one document a line) or JSONL with a text field", NULL },
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
          "steps over which the gains ramp in", "100" },
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
          "learning-rate warm-up steps, then cosine decay", "100" },
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
        { "--seed", CLI_U64, &c.seed, 0, 1.9e19, NULL, NULL, "S",
          "the new model's weights, the data order and the dropout masks", "1" },
        { "--dropout", CLI_FLOAT, &c.dropout, 0, 0.999, NULL, NULL, "X",
          "p of every dropout of the model (GPT-2: embeddings, attention, residual; Llama "
          "family: attention)",
          "config.json's" },
        { "--resume", CLI_FLAG, &resume, 0, 0, NULL, NULL, NULL,
          "continue from OUT/" PFX_PRETRAIN_CHECKPOINT " (same options)", NULL },
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
    if (!c.data_path) {
        fprintf(stderr, "prefixcl pretrain: --data FILE is needed\n\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
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
                                           "gains.safetensors", "loss.csv",
                                           "loss.png",          "gains.png",
                                           "gains_steps.png",   PFX_PRETRAIN_CHECKPOINT };
    if (!cli_check_output_dir("pretrain", "--out", c.out_dir, outputs,
                              sizeof(outputs) / sizeof(outputs[0])))
        return 2;
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
    char agreed[8192];
    snprintf(agreed, sizeof(agreed),
             "%s|%s|%s|%s|%s|%zu|%zu|%zu|%zu|%zu|%a|%a|%a|%d|%a|%zu|%a|%d|%zu|%s|%llu|%d|%s",
             config ? config : "", c.model_dir ? c.model_dir : "",
             c.tokenizer_dir ? c.tokenizer_dir : "", c.data_path, c.eval_path ? c.eval_path : "",
             c.block, c.batch, c.accumulate, c.steps, c.epochs, (double)c.lr, (double)c.gain_lr,
             (double)c.weight_decay, (int)no_decay, (double)c.max_grad_norm, warmup,
             (double)c.min_lr_ratio, gain, ramp, c.freeze ? c.freeze : "",
             (unsigned long long)c.seed, (int)resume, gain_heads ? gain_heads : "");
    if (tool_dist_failed("pretrain", pfx_dist_agree("pretraining options", agreed))) {
        pfx_runtime_destroy(&rt);
        free(heads);
        return 1;
    }
    progress prog = { .tty = isatty(STDOUT_FILENO) != 0 && pfx_dist_size() == 1,
                      .quiet = quiet || !lead,
                      .every = 10 };
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
    int rc = 0;
    if (r.stopped) {
        printf(
            "stopped after step %zu of %zu: %s/%s holds it; run again with --resume to continue\n",
            r.steps_done, r.steps, c.out_dir, PFX_PRETRAIN_CHECKPOINT);
        rc = cli_stop ? cli_stop_status() : pfx_dist_size() > 1 ? PFX_DIST_EXIT_STOPPED : 0;
    } else {
        printf("time: %.1f s for steps %zu..%zu\n", r.seconds, r.first_step + 1, r.steps_done);
        if (r.first_step == 0)
            printf("evaluation loss: before %.6f (perplexity %.2f), ", r.eval_losses[0],
                   exp(r.eval_losses[0]));
        else
            printf("evaluation loss: ");
        printf("after %.6f (perplexity %.2f)\n", r.eval_losses[r.steps],
               exp(r.eval_losses[r.steps]));
        const int pics = pretrain_plot_all(c.out_dir, &r, any_gain);
        printf("wrote %s/: config.json + model.safetensors (a Hugging Face folder)%s, loss.csv%s, "
               "%s\n",
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
