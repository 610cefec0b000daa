/* prefixcl tune: the main job. Prefix-tunes a model folder on a text or
 * JSONL file and writes a PEFT adapter, the gains, the loss curve, the
 * pictures and a checkpoint; with no --model it runs the self-contained
 * demonstration (a GPT-2 small shape with seeded random weights, the
 * byte-level tokenizer and corpus of data/demo). A thin command over the
 * library's job (prefixcl/tune.h): options, the device, the demonstration
 * model (tune_demo.c), progress, the pictures (tune_plot.c). Ctrl-C or
 * SIGTERM stops at the next step boundary with a checkpoint that --resume
 * continues. Under `mpirun -n R` every rank tunes on its share of each
 * batch, the gradients summed in rank order (prefixcl/dist.h); rank 0 prints
 * and writes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chart.h"
#include "common/cli.h"
#include "common/data_dir.h"
#include "commands.h"
#include "common/tool_util.h"
#include "train/tune_demo.h"
#include "plot/tune_plot.h"

/* The demonstration: small enough for about two minutes on PoCL with two
 * cores (GPT-2 small forward and backward per step, kernels cached). */
#define DEMO_STEPS  40
#define DEMO_BATCH  8
#define DEMO_LENGTH 32
#define DEMO_LAYERS 12

static const cli_doc doc = {
    "prefixcl tune [--model DIR --data FILE] [--eval FILE] [--out DIR] [options]", NULL, NULL
};

typedef struct progress {
    bool tty, quiet;
    size_t every;
    const pfx_tune_config *cfg;
    bool demo;
    bool started;             /* the run's first line printed */
    bool built;               /* the kernel building said */
    double peak_gflops;       /* the FMA peak of one device (0: no MFU) */
    double flops;             /* of a token (frozen weights: 4 N + 12 L T d), from the first step */
    double tokens_per_s, mfu; /* the last step's */
} progress;

/* Before the first step's line: what runs, with the length the job fitted
 * to the model (a default --max-length capped said once on stderr, rank 0). */
static void start(progress *p, const pfx_tune_step *s)
{
    const pfx_tune_config *c = p->cfg;
    p->started = true;
    if (pfx_dist_rank() == 0 && c->max_length == 0 && s->max_length < PFX_TUNE_DEFAULT_MAX_LENGTH)
        fprintf(stderr,
                "prefixcl tune: --max-length %d (the default) capped at %zu: the model has %zu "
                "positions (%s/config.json) and the prefix takes %zu (--prefix-len)\n",
                PFX_TUNE_DEFAULT_MAX_LENGTH, s->max_length, s->max_length + c->prefix_len,
                c->model_dir, c->prefix_len);
    if (!p->quiet)
        printf("prefixcl tune: %s, data %s, prefix %zu (%s), batch %zu x %zu tokens, seed %llu%s\n",
               p->demo ? "demonstration model (GPT-2 small shape, seeded random weights)"
                       : c->model_dir,
               c->data_path, c->prefix_len, c->hidden ? "encoder" : "direct", c->batch,
               s->max_length, (unsigned long long)c->seed, c->resume ? ", resuming" : "");
}

static void on_step(const pfx_tune_step *s, void *user)
{
    progress *p = user;
    if (!p->started)
        start(p, s);
    if (p->quiet)
        return;
    tool_say_builds(stdout, p->tty, s->build_s, &p->built);
    if (p->flops == 0.0) {
        pfx_model_shape shape;
        if (pfx_model_get_shape(pfx_context_model(s->ctx), &shape) == PFX_SUCCESS)
            p->flops = pfx_model_train_flops(&shape, s->max_length + p->cfg->prefix_len, false);
    }
    p->tokens_per_s = s->tokens_per_s;
    p->mfu = tool_mfu(s->tokens_per_s, p->flops, p->peak_gflops, pfx_dist_size());
    if (p->tty) {
        char bar[CLI_BAR_MAX + 1];
        cli_bar(bar, (double)s->step / (double)s->steps, 24);
        fprintf(stdout,
                "\r[%s] step %zu/%zu  epoch %llu  loss %.4f  lr %.2e  |g| %.3e  %.0f tok/s  MFU "
                "%.1f%%  %.0f s left%s ",
                bar, s->step, s->steps, (unsigned long long)s->epoch, s->loss, (double)s->lr,
                (double)s->grad_norm, s->tokens_per_s, p->mfu, s->eta_s,
                s->skipped ? "  (skipped)" : "");
        if (isfinite(s->eval_loss))
            fprintf(stdout, "\n  eval %.4f (perplexity %.1f)", s->eval_loss, exp(s->eval_loss));
        if (s->step == s->steps || isfinite(s->eval_loss))
            fputc('\n', stdout);
    } else if (s->step == 1 || s->step % p->every == 0 || s->step == s->steps ||
               isfinite(s->eval_loss)) {
        char eval[64] = "";
        if (isfinite(s->eval_loss))
            snprintf(eval, sizeof(eval), " eval_loss %.6f", s->eval_loss);
        fprintf(stdout,
                "step %zu/%zu epoch %llu loss %.6f lr %.4e grad_norm %.4e tokens/s %.0f mfu %.2f%% "
                "eta_s %.0f%s%s\n",
                s->step, s->steps, (unsigned long long)s->epoch, s->loss, (double)s->lr,
                (double)s->grad_norm, s->tokens_per_s, p->mfu, s->eta_s, eval,
                s->skipped ? " skipped" : "");
    }
    fflush(stdout);
}

/* Every file the run may write in OUT checked (and OUT made) before any
 * work, so that a run never trains to fail at its end. */
static bool check_outputs(const pfx_tune_config *c, bool demo)
{
    const char *names[10] = {
        "adapter_config.json", "adapter_model.safetensors", "loss.csv", "loss.png",
        "attention.png",       PFX_TUNE_CHECKPOINT
    };
    size_t n = 6;
    if (c->gain_mode != PFX_GAIN_OFF) {
        names[n++] = PFX_TUNE_GAINS;
        names[n++] = "gains.png";
    }
    if (demo) { /* the demonstration model's folder (tune_demo.c) */
        names[n++] = "demo-model/";
        names[n++] = "demo-model/config.json";
    }
    return cli_check_output_dir("tune", "--out", c->out_dir, names, n);
}

/* What the run printed last, from the result on rank 0. */
static void report(const pfx_tune_config *c, const pfx_tune_result *r, pfx_runtime *rt, bool demo,
                   bool pictures, const progress *p)
{
    const pfx_model_shape *s = &r->shape;
    printf("device: %s (%s)\n", pfx_runtime_device(rt)->device_name,
           pfx_runtime_device(rt)->platform_name);
    printf("model: %s, %zu layers, %zu heads (%zu kv), head size %zu, vocabulary %zu, %zu "
           "parameters (frozen)\n",
           s->model_type, s->layers, s->heads, s->kv_heads, s->head_dim, s->vocab, s->parameters);
    printf(
        "trainable: %zu prefix parameters (%s) + %zu gains; %zu values per prefix position baked\n",
        r->counts.trainable, c->hidden ? "encoder MLP" : "direct", r->gain_params,
        r->counts.baked_per_position);
    printf("data: %zu training examples, evaluation %zu examples (%zu tokens)\n", r->train_examples,
           r->eval_examples, r->eval_tokens);
    tool_print_example_rule(stdout, &r->rule);
    if (r->stopped) {
        printf(
            "stopped after step %zu of %zu: %s/%s holds it; run again with --resume to continue\n",
            r->steps_done, r->steps, c->out_dir, PFX_TUNE_CHECKPOINT);
        return;
    }
    printf("time: %.1f s for steps %zu..%zu", r->seconds, r->first_step + 1, r->steps_done);
    if (p->tokens_per_s > 0)
        printf(": %.0f tokens/s", p->tokens_per_s);
    if (p->peak_gflops > 0 && p->flops > 0)
        printf(", MFU %.2f%% of %d x %.1f GFLOP/s (4 N + 12 L T d = %.4g FLOPs a token: the "
               "weights frozen)",
               p->mfu, pfx_dist_size(), p->peak_gflops, p->flops);
    printf("\n");
    printf("evaluation loss: before %.6f (perplexity %.2f), after %.6f (perplexity %.2f)\n",
           r->eval_before, exp(r->eval_before), r->eval_after, exp(r->eval_after));
    printf("attention mass on the prefix per layer (mean of the heads), before -> after:\n");
    for (size_t l = 0; l < s->layers; l++) {
        double b = 0, a = 0;
        for (size_t h = 0; h < s->heads; h++) {
            b += r->mass_before[l * s->heads + h] / (double)s->heads;
            a += r->mass_after[l * s->heads + h] / (double)s->heads;
        }
        printf("  layer %2zu: %.4f -> %.4f\n", l, b, a);
    }
    if (pictures)
        printf("wrote %s/: adapter_config.json + adapter_model.safetensors (PEFT prefix tuning), "
               "loss.csv, loss.png, "
               "attention.png%s, %s\n",
               c->out_dir, r->gains ? ", gains.png" : "", PFX_TUNE_CHECKPOINT);
    else
        printf("wrote %s/: adapter_config.json + adapter_model.safetensors (PEFT prefix tuning), "
               "loss.csv, %s; %s\n",
               c->out_dir, PFX_TUNE_CHECKPOINT, chart_strerror(CHART_UNAVAILABLE));
    if (demo)
        printf("the demonstration model is in %s/demo-model/ (config.json, model.safetensors, "
               "tokenizer.json); try:\n"
               "  prefixcl generate --model %s/demo-model --adapter %s --prompt \"The river\"\n",
               c->out_dir, c->out_dir, c->out_dir);
    if (r->gains)
        printf("note: the learned gains are in %s/%s (prefixcl's own file); PEFT consumers of the "
               "adapter do not "
               "see them and attend without gains\n",
               c->out_dir, PFX_TUNE_GAINS);
}

int cmd_tune(int argc, char **argv)
{
    pfx_tune_config c;
    pfx_tune_default_config(&c);
    c.out_dir = "tune-out";
    char demo_dir[4000]; /* room for "/train.txt" in demo_train */
    tool_data_dir("demo", demo_dir, sizeof(demo_dir));
    const char *device = NULL;
    bool quiet = false, resume = false, no_eos = false, recompute = false;
    size_t num_virtual = 0;
    float peak = 0.0f;
    size_t gain_ramp = c.gain_ramp_steps, warmup = c.warmup_steps;
    int gain = 0, storage = 0;
    /* the options whose default the demonstration changes, at their places in the table */
    enum { O_PREFIX = 5, O_VIRTUAL = 6, O_STEPS = 9, O_BATCH = 10, O_LENGTH = 11 };
    const cli_option opts[] = {
        { "--model", CLI_TEXT, &c.model_dir, 0, 0, NULL, NULL, "DIR",
          "Hugging Face folder (config.json, safetensors, tokenizer); none: the demonstration "
          "(GPT-2 small shape, random weights, data/demo's tokenizer and corpus, " CLI_STR(
              DEMO_STEPS) " steps of " CLI_STR(DEMO_BATCH) " x " CLI_STR(DEMO_LENGTH) " tokens)",
          NULL },
        { "--data", CLI_TEXT, &c.data_path, 0, 0, NULL, NULL, "FILE",
          "training text (one example a line) or JSONL (text, or prompt + completion: loss on "
          "the completion only)",
          NULL },
        { "--eval", CLI_TEXT, &c.eval_path, 0, 0, NULL, NULL, "FILE", "evaluation set",
          "a tenth of --data held back" },
        { "--out", CLI_TEXT, &c.out_dir, 0, 0, NULL, NULL, "DIR", "output folder", "./tune-out" },
        { "--device", CLI_TEXT, &device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
        [O_PREFIX] = { "--prefix-len", CLI_SIZE, &c.prefix_len, 1, 4096, NULL, NULL, "N",
                       "prefix positions", "20" },
        [O_VIRTUAL] = { "--num-virtual-tokens", CLI_SIZE, &num_virtual, 1, 4096, NULL, NULL, "N",
                        "PEFT's name for --prefix-len", NULL },
        { "--hidden", CLI_SIZE, &c.hidden, 0, 65536, NULL, NULL, "N",
          "prefix encoder hidden size; 0: direct prefixes", "512" },
        { "--epochs", CLI_SIZE, &c.epochs, 1, 100000, NULL, NULL, "N",
          "passes over the data, unless --steps", "1" },
        [O_STEPS] = { "--steps", CLI_SIZE, &c.steps, 1, 10000000, NULL, NULL, "N",
                      "optimizer steps", NULL },
        [O_BATCH] = { "--batch", CLI_SIZE, &c.batch, 1, 4096, NULL, NULL, "N", "examples a batch",
                      "8" },
        [O_LENGTH] = { "--max-length", CLI_SIZE, &c.max_length, 2, 1 << 20, NULL, NULL, "N",
                       "tokens kept per example, at most the model's positions less --prefix-len "
                       "(as eval)",
                       CLI_STR(PFX_TUNE_DEFAULT_MAX_LENGTH) },
        { "--no-eos", CLI_FLAG, &no_eos, 0, 0, NULL, NULL, NULL,
          "no EOS after each example (eval takes it too; PEFT's examples and TRL append one)",
          NULL },
        { "--accumulate", CLI_SIZE, &c.accumulate, 1, 65536, NULL, NULL, "N",
          "batches a step, their gradients averaged (as pretrain)", "1" },
        { "--lr", CLI_FLOAT, &c.lr, 0, 10, NULL, NULL, "X", "prefix learning rate", "0.01" },
        { "--gain", CLI_CHOICE, &gain, 0, 0, cli_gain_modes, NULL, "MODE", "per-head gains",
          "off" },
        { "--gain-lr", CLI_FLOAT, &c.gain_lr, 0, 10, NULL, NULL, "X", "gain learning rate",
          "half of --lr" },
        { "--gain-ramp", CLI_SIZE, &gain_ramp, 0, 10000000, NULL, NULL, "N",
          "steps over which the gains ramp in from 0 (fewer than pretrain's 100: a tuning run "
          "is hundreds of steps, and the prefixes it trains beside them start from scratch)",
          "20" },
        { "--weight-decay", CLI_FLOAT, &c.weight_decay, 0, 1e6, NULL, NULL, "X",
          "on the prefix parameters", "0" },
        { "--clip", CLI_FLOAT, &c.max_grad_norm, 0, 1e6, NULL, NULL, "X",
          "gradient-norm clipping, 0: off", "1" },
        { "--warmup", CLI_SIZE, &warmup, 0, 10000000, NULL, NULL, "N",
          "learning-rate warm-up steps (at most the steps, as pretrain), then cosine decay to a "
          "tenth (fewer than pretrain's 100: a tuning run is short, and its prefixes alone "
          "train)",
          "10" },
        { "--seed", CLI_U64, &c.seed, 0, 1.9e19, NULL, NULL, "S",
          "seed of the prefixes, the data order, the dropout masks", "1" },
        { "--dropout", CLI_FLOAT, &c.dropout, 0, 0.999, NULL, NULL, "X",
          "p of every dropout of the base model while tuning (GPT-2: embeddings, attention, "
          "residual; Llama family: attention)",
          "config.json's" },
        { "--storage", CLI_CHOICE, &storage, 0, 0, tool_storages, NULL, "T", "frozen weights",
          "f32" },
        { "--checkpoint-every", CLI_SIZE, &c.checkpoint_every, 1, 10000000, NULL, NULL, "N",
          "also write the checkpoint every N steps", NULL },
        { "--eval-every", CLI_SIZE, &c.eval_every, 1, 10000000, NULL, NULL, "N",
          "also evaluate every N steps (loss.csv's eval_loss)", "before and after" },
        { "--recompute", CLI_FLAG, &recompute, 0, 0, NULL, NULL, NULL,
          "recompute each block in the backward (less memory, the same values)", NULL },
        { "--resume", CLI_FLAG, &resume, 0, 0, NULL, NULL, NULL,
          "continue from OUT/" PFX_TUNE_CHECKPOINT " (same options)", NULL },
        { "--peak-gflops", CLI_FLOAT, &peak, 0, 1e9, NULL, NULL, "X",
          "the device's float32 FMA peak for the MFU (prefixcl bench's peak.fma)",
          "measured at the start, about 0.25 s" },
        { "--quiet", CLI_FLAG, &quiet, 0, 0, NULL, NULL, NULL, "no progress output", NULL },
    };
    bool given[sizeof(opts) / sizeof(opts[0])];
    const int parsed =
        cli_parse("tune", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), given, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    const bool steps_set = given[O_STEPS], batch_set = given[O_BATCH], length_set = given[O_LENGTH];
    if (given[O_VIRTUAL] && given[O_PREFIX] && num_virtual != c.prefix_len) {
        fprintf(stderr,
                "prefixcl tune: --num-virtual-tokens %zu and --prefix-len %zu name one "
                "length: give one of them\n",
                num_virtual, c.prefix_len);
        return 2;
    }
    if (given[O_VIRTUAL])
        c.prefix_len = num_virtual;
    c.no_eos = no_eos;
    c.recompute = recompute;
    c.gain_mode = (pfx_gain_mode)gain;
    c.storage = (pfx_dtype)storage; /* tool_storages is in pfx_dtype order */
    c.resume = resume;
    c.gain_ramp_steps = (uint32_t)gain_ramp;
    c.warmup_steps = (uint32_t)warmup;
    if (c.model_dir && !c.data_path) {
        fprintf(stderr, "prefixcl tune: --model needs --data\n\n");
        return cli_help(stderr, &doc, opts, sizeof(opts) / sizeof(opts[0]));
    }
    const bool demo = !c.model_dir;
    static char demo_train[4096], demo_eval[4096];
    if (demo) {
        snprintf(demo_train, sizeof(demo_train), "%s/train.txt", demo_dir);
        snprintf(demo_eval, sizeof(demo_eval), "%s/eval.txt", demo_dir);
        if (!c.data_path) {
            c.data_path = demo_train;
            if (!c.eval_path)
                c.eval_path = demo_eval;
        }
        if (!steps_set)
            c.steps = DEMO_STEPS;
        if (!batch_set)
            c.batch = DEMO_BATCH;
        if (!length_set)
            c.max_length = DEMO_LENGTH;
    }
    if (!demo && !length_set)
        c.max_length = 0; /* the job fits PFX_TUNE_DEFAULT_MAX_LENGTH to the model */

    /* rank 0 alone prints (dist.h); plain lines under mpirun, which gives
     * the ranks a pty whatever its own stdout is */
    const bool lead = pfx_dist_rank() == 0;
    progress prog = { .tty = isatty(STDOUT_FILENO) != 0 && pfx_dist_size() == 1,
                      .quiet = quiet || !lead,
                      .every = 10,
                      .cfg = &c,
                      .demo = demo };
    if (!check_outputs(&c, demo))
        return 1;
    char devbuf[32], demo_model[4200];
    const char *dev = NULL; /* this rank's (dist.h) */
    if (tool_dist_failed("tune", pfx_dist_device(device, devbuf, sizeof(devbuf), &dev)))
        return 1;
    pfx_runtime *rt = tool_runtime("tune", dev);
    if (!rt)
        return 1;
    if (demo && tune_demo_write(rt, demo_dir, c.out_dir, DEMO_LAYERS, c.storage, c.seed, demo_model,
                                sizeof(demo_model))) {
        pfx_runtime_destroy(&rt);
        return 1;
    }
    if (demo)
        c.model_dir = demo_model;
    if (!prog.quiet)
        prog.peak_gflops = tool_fma_peak("tune", rt, (double)peak);
    pfx_dist_hooks(&c.dist);
    char agreed[8192];
    snprintf(agreed, sizeof(agreed),
             "%s|%s|%s|%s|%zu|%zu|%zu|%zu|%zu|%zu|%a|%a|%d|%u|%a|%a|%u|%llu|%d|%zu|%d|%d|%zu|%zu",
             c.model_dir, c.data_path, c.eval_path ? c.eval_path : "", c.out_dir, c.prefix_len,
             c.hidden, c.epochs, c.steps, c.batch, c.max_length, (double)c.lr, (double)c.gain_lr,
             gain, (unsigned)c.gain_ramp_steps, (double)c.weight_decay, (double)c.max_grad_norm,
             (unsigned)c.warmup_steps, (unsigned long long)c.seed, storage, c.checkpoint_every,
             (int)resume, (int)no_eos, c.accumulate, c.eval_every);
    if (tool_dist_failed("tune", pfx_dist_agree("tuning options", agreed))) {
        pfx_runtime_destroy(&rt);
        return 1;
    }
    /* SIGINT or SIGTERM: stop at the next step boundary, checkpoint saved */
    cli_stop_catch();
    c.stop_flag = &cli_stop;
    pfx_tune_result r;
    const pfx_status st = pfx_tune_run(rt, &c, on_step, &prog, &r);
    cli_stop_release();
    bool pictures = false;
    /* a bad option, also one found against the model: 2, as the parser's */
    int rc = st == PFX_ERROR_INVALID_ARGUMENT ? 2 : st != PFX_SUCCESS;
    static const cli_field_option flags[] = {
        { "max_length", "--max-length" },
        { "prefix_len", "--prefix-len" },
        { "batch", "--batch" },
        { "steps", "--steps" },
        { "epochs", "--epochs" },
        { "eval_path", "--eval" },
        { "data_path", "--data" },
        { "gain_lr", "--gain-lr" },
        { "lr", "--lr" },
        { "hidden", "--hidden" },
    };
    if (st != PFX_SUCCESS)
        cli_job_error("tune", st, pfx_last_error(rt), flags, sizeof(flags) / sizeof(flags[0]));
    else if (lead)
        rc = tune_plot_all(c.out_dir, &r, &pictures);
    if (rc || !lead) {
        /* a stop is agreed by every rank (dist_any): each exits as rank 0 */
        const bool stopped = r.stopped;
        pfx_tune_result_free(&r);
        pfx_runtime_destroy(&rt);
        return rc ? rc : stopped && pfx_dist_any(cli_stop != 0) ? cli_stop_status() : 0;
    }
    if (prog.tty && !quiet && r.stopped)
        fputc('\n', stdout);
    report(&c, &r, rt, demo, pictures, &prog);
    const bool stopped = r.stopped;
    pfx_tune_result_free(&r);
    pfx_runtime_destroy(&rt);
    return stopped && pfx_dist_any(cli_stop != 0) ? cli_stop_status() : 0;
}
