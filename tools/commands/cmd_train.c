/* prefixcl train: the main job. An end-to-end prefix-tuning run
 * (train_loop.h) with a progress bar (terminal) or plain lines; the loss
 * curve, the attention per layer and the gains as CSV and as pictures
 * (train_plot.h); baked prefixes saved as safetensors and as a PEFT folder;
 * and a summary: parameter counts, loss ratio, per-layer attention mass on
 * the prefix and entropy. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "commands.h"
#include "chart.h"
#include "common/tool_util.h"
#include "prefixcl/io.h"
#include "train/train_loop.h"
#include "plot/train_plot.h"

static const cli_doc doc = {
    "prefixcl train [--device SEL] [--steps N] [--layers L] [--batch B]\n"
    "               [--seed S] [--eval-every N] [--out DIR] [--svg] [--quiet]",
    NULL, NULL
};

typedef struct progress {
    bool tty, quiet;
    size_t steps, every;
} progress;

static void on_step(const train_step_info *s, void *user)
{
    progress *p = user;
    if (p->quiet)
        return;
    if (p->tty) {
        char bar[CLI_BAR_MAX + 1];
        cli_bar(bar, (double)s->step / (double)p->steps, 30);
        fprintf(stdout, "\r[%s] step %zu/%zu  loss %.4e  |g| %.3e  %.0f tok/s%s", bar, s->step,
                p->steps, s->loss, (double)s->grad_norm, s->tokens_per_s,
                s->skipped ? "  (skipped)" : "");
        if (s->step == p->steps)
            fputc('\n', stdout);
        fflush(stdout);
    } else if (s->step == 1 || s->step % p->every == 0 || s->step == p->steps) {
        fprintf(stdout,
                "step %zu/%zu loss %.4e grad_norm %.3e lr_factor %.3f gain_ramp %.2f "
                "tokens/s %.0f%s\n",
                s->step, p->steps, s->loss, (double)s->grad_norm, (double)s->lr_factor,
                (double)s->gain_ramp, s->tokens_per_s, s->skipped ? " skipped" : "");
        fflush(stdout);
    }
}

static void loss_csv(FILE *f, const train_config *cfg, const train_result *r)
{
    fprintf(f, "step,loss,grad_norm,lr,heldout_loss\n");
    for (size_t i = 0, e = 0; i < r->steps_done; i++) {
        fprintf(f, "%zu,%.9g,%.9g,%.9g,", i + 1, r->losses[i], (double)r->grad_norms[i],
                (double)r->lrs[i]);
        if (e < r->eval_count && r->eval_steps[e] == i + 1)
            fprintf(f, "%.9g", r->eval_losses[e++]);
        fputc('\n', f);
    }
}

static void attention_csv(FILE *f, const train_config *cfg, const train_result *r)
{
    fprintf(f, "layer,prefix_mass,teacher_prefix_mass,entropy,teacher_entropy\n");
    for (size_t l = 0; l < cfg->layers; l++)
        fprintf(f, "%zu,%.9g,%.9g,%.9g,%.9g\n", l, r->layer_stats[l].prefix_mass,
                r->layer_stats[l].teacher_prefix_mass, r->layer_stats[l].entropy,
                r->layer_stats[l].teacher_entropy);
}

static void gains_csv(FILE *f, const train_config *cfg, const train_result *r)
{
    fprintf(f, "layer,head,gain,teacher_gain\n");
    for (size_t l = 0; l < cfg->layers; l++)
        for (size_t h = 0; h < cfg->heads; h++)
            fprintf(f, "%zu,%zu,%.9g,%.9g\n", l, h, (double)r->gains[l * cfg->heads + h],
                    (double)r->teacher_gains[l * cfg->heads + h]);
}

typedef void (*csv_fn)(FILE *f, const train_config *cfg, const train_result *r);

/* Atomically (include/prefixcl/io.h, "Output files"): an interrupted run
 * leaves the previous file whole. */
static int write_csv(const char *path, csv_fn fn, const train_config *cfg, const train_result *r)
{
    pfx_output_file *out = NULL;
    if (pfx_output_open(path, &out) != PFX_SUCCESS)
        return -1;
    fn(pfx_output_stream(out), cfg, r);
    return pfx_output_commit(&out) == PFX_SUCCESS ? 0 : -1;
}

typedef int (*plot_fn)(const char *path, const train_config *cfg, const train_result *r);

int cmd_train(int argc, char **argv)
{
    const char *device = NULL, *out = "train-out";
    bool quiet = false, svg = false;
    train_config cfg;
    train_default_config(&cfg);
    const cli_option opts[] = {
        { "--device", CLI_TEXT, &device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the strongest GPU" },
        { "--steps", CLI_SIZE, &cfg.steps, 1, 100000, NULL, NULL, "N", "optimizer steps, 1..100000",
          "300" },
        { "--layers", CLI_SIZE, &cfg.layers, 1, 64, NULL, NULL, "L",
          "frozen attention layers, 1..64", "3" },
        { "--batch", CLI_SIZE, &cfg.batch, 1, 1024, NULL, NULL, "B",
          "sequences per step, 1..1024; under mpirun -n R the global batch, split across the R "
          "ranks (R <= B)",
          "4" },
        { "--seed", CLI_U64, &cfg.seed, 0, 1.9e19, NULL, NULL, "S",
          "seed of the weights, the teacher and the data", "1" },
        { "--eval-every", CLI_SIZE, &cfg.eval_every, 0, 100000, NULL, NULL, "N",
          "the loss on a held-out batch every N steps", "0: never" },
        { "--out", CLI_TEXT, &out, 0, 0, NULL, NULL, "DIR",
          "output folder: loss, attention and gains as .csv and .png, prefixes.safetensors, peft/",
          "./train-out" },
        { "--svg", CLI_FLAG, &svg, 0, 0, NULL, NULL, NULL, "pictures as SVG instead of PNG", NULL },
        { "--quiet", CLI_FLAG, &quiet, 0, 0, NULL, NULL, NULL,
          "no progress output, only the summary", NULL },
    };
    const int parsed =
        cli_parse("train", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    train_fit_schedules(&cfg);              /* warm-up and gain ramp shrink for short runs */
    const bool lead = pfx_dist_rank() == 0; /* rank 0 alone prints and writes */
    /* every output checked before the first step (train_loop.c writes the
     * prefixes and the PEFT folder, this file the rest) */
    const char *names[] = { "loss.csv",
                            "attention.csv",
                            "gains.csv",
                            svg ? "loss.svg" : "loss.png",
                            svg ? "attention.svg" : "attention.png",
                            svg ? "gains.svg" : "gains.png",
                            "prefixes.safetensors",
                            "peft/",
                            "peft/adapter_config.json",
                            "peft/adapter_model.safetensors" };
    if (lead &&
        !cli_check_output_dir("train", "--out", out, names, sizeof(names) / sizeof(names[0])))
        return 1;

    /* plain lines under mpirun: it gives the ranks a pty whatever its own
     * stdout is */
    progress prog = { .tty = isatty(STDOUT_FILENO) != 0 && pfx_dist_size() == 1,
                      .quiet = quiet,
                      .steps = cfg.steps,
                      .every = cfg.steps >= 10 ? cfg.steps / 10 : 1 };
    if (!quiet && lead) {
        printf("prefixcl train: %zu layers (C=%zu, H=%zu, Hkv=%zu, D=%zu), prefix %zu, "
               "batch %zu x %zu tokens, %zu steps, seed %llu\n",
               cfg.layers, cfg.model_dim, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.prefix_len,
               cfg.batch, cfg.tokens, cfg.steps, (unsigned long long)cfg.seed);
        if (pfx_dist_size() > 1)
            printf("data parallel: %d ranks, each on its own shard of every batch\n",
                   pfx_dist_size());
    }
    /* SIGINT or SIGTERM: stop after the step under way, keep what is trained */
    cli_stop_catch();
    cfg.stop_flag = &cli_stop;
    train_result r;
    int failed = train_run(device, &cfg, out, on_step, &prog, &r);
    cli_stop_release();
    if (failed) {
        train_result_free(&r);
        return 1;
    }
    /* a stop is agreed by every rank (dist_any): each exits as the one signalled */
    const int stop_rc = r.stopped && pfx_dist_any(cli_stop != 0) ? cli_stop_status() : 0;
    if (!lead) {
        train_result_free(&r);
        return stop_rc;
    }
    if (prog.tty && !quiet && r.stopped)
        fputc('\n', stdout);
    if (r.stopped)
        printf("stopped after step %zu of %zu (signal): the outputs below are of those steps\n",
               r.steps_done, cfg.steps);
    char path[4096];
    int rc = 0;
    static const struct {
        const char *name;
        csv_fn csv;
        plot_fn plot;
    } outputs[] = { { "loss", loss_csv, train_plot_loss },
                    { "attention", attention_csv, train_plot_attention },
                    { "gains", gains_csv, train_plot_gains } };
    const char *ext = svg ? "svg" : "png";
    bool drawn = true;
    for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s.csv", out, outputs[i].name);
        if (write_csv(path, outputs[i].csv, &cfg, &r)) {
            fprintf(stderr, "prefixcl train: cannot write %s: %s\n", path, pfx_last_error(NULL));
            rc = 1;
        }
        snprintf(path, sizeof(path), "%s/%s.%s", out, outputs[i].name, ext);
        int pc = outputs[i].plot(path, &cfg, &r);
        if (pc == CHART_UNAVAILABLE) {
            drawn = false;
        } else if (pc != CHART_OK) {
            fprintf(stderr, "prefixcl train: cannot draw %s: %s%s%s\n", path, chart_strerror(pc),
                    pc == CHART_ERR_IO ? ": " : "", pc == CHART_ERR_IO ? pfx_last_error(NULL) : "");
            rc = 1;
        }
    }
    double ratio = r.final_loss / r.first_loss;
    printf("device: %s\n", r.device);
    printf("time: %.1f s for %zu steps (step 1: %.1f s, kernel builds included; setup %.1f s)\n",
           r.train_seconds, r.steps_done, r.first_step_seconds, r.setup_seconds);
    printf("parameters: encoder %zu trainable + %zu gains; baked %zu per prefix position "
           "(%zu in all)\n",
           r.counts.trainable, r.gain_params, r.counts.baked_per_position, r.counts.baked);
    printf("loss: first %.4e, final %.4e (mean of the last %zu steps), final/first %.4f "
           "(%.1fx lower)\n",
           r.first_loss, r.final_loss, r.steps_done < 10 ? r.steps_done : (size_t)10, ratio,
           1.0 / ratio);
    if (pfx_dist_size() > 1)
        printf("layer statistics below: rank 0's shard of one more batch\n");
    for (size_t l = 0; l < cfg.layers; l++)
        printf("layer %zu: prefix mass %.4f (teacher %.4f), entropy %.4f (teacher %.4f)\n", l,
               r.layer_stats[l].prefix_mass, r.layer_stats[l].teacher_prefix_mass,
               r.layer_stats[l].entropy, r.layer_stats[l].teacher_entropy);
    for (size_t i = 0; i < r.eval_count; i++)
        printf("held-out loss at step %zu: %.4e\n", r.eval_steps[i], r.eval_losses[i]);
    if (drawn)
        printf("wrote %s/{loss,attention,gains}.{csv,%s}, %s/prefixes.safetensors, %s/peft/\n", out,
               ext, out, out);
    else
        printf("wrote %s/{loss,attention,gains}.csv, %s/prefixes.safetensors, %s/peft/; %s\n", out,
               out, out, chart_strerror(CHART_UNAVAILABLE));
    train_result_free(&r);
    return rc ? rc : stop_rc;
}
