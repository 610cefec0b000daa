/* prefixcl experiment gain: options, then the work in order (exp.h). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/cli.h"
#include "common/data_dir.h"
#include "commands/commands.h"
#include "exp.h"
#include "common/tool_util.h"
#include "saved.h"

/* The defaults fit the whole experiment (5 arms x 3 seeds, the measures) in
 * about an hour on a 2-core CPU with PoCL, at a size where the models learn:
 * 4 layers of 128 (4 heads of 32), blocks of 64, 16 blocks a step, 1000
 * steps an arm at lr 3e-3. Measured there alone (2026-12-06): 5470 tokens/s,
 * 0.19 s a step; one arm of 1500 such steps reached validation perplexity
 * 108 against the validation set's unigram perplexity of about 1000 (the
 * earlier default, 4 layers of 256 for 400 steps at 1e-3, stopped near 248). */
#define DEF_LAYERS 4
#define DEF_HIDDEN 128
#define DEF_HEADS  4
#define DEF_BLOCK  64
#define DEF_BATCH  16
#define DEF_STEPS  1000
#define DEF_LR     3e-3f
/* The classification: 100 steps of 8 examples with a prefix of 10, scored
 * on 300 held-out glosses: 20 s an arm and seed there at the default size
 * (15 CPU seconds; other jobs on the cores, README.md). */
#define DEF_CLS_STEPS  300
#define DEF_CLS_PREFIX 10
#define DEF_CLS_TEST   300

static const cli_doc doc = {
    "prefixcl experiment gain --corpus DIR --out DIR [--tokenizer DIR] [options]",
    "  Trains the same GPT-2-family model in several arms (same seed, data order and steps) and\n"
    "  measures what a learnable attention gain per head does: validation perplexity, generation\n"
    "  tokens/s, which heads' gains settle, a linear probe of the final hidden states and a\n"
    "  classification by prefix tuning of each final model; writes\n"
    "  OUT/report.md (against the published claims), OUT/results.json and pictures.\n",
    NULL
};

static int refuse(const char *msg, const cli_option *opts, size_t n)
{
    fprintf(stderr, "prefixcl experiment gain: %s\n\n", msg);
    return cli_help(stderr, &doc, opts, n);
}

/* --arms: names separated by commas, each once; selected after linear. */
static bool parse_arms(const char *text, bool *arm, char *why, size_t cap)
{
    for (int a = 0; a < ARM_COUNT; a++)
        arm[a] = false;
    const char *p = text;
    while (true) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        int hit = -1;
        for (int a = 0; a < ARM_COUNT; a++)
            if (strlen(exp_arm_names[a]) == len && !strncmp(p, exp_arm_names[a], len))
                hit = a;
        if (hit < 0) {
            snprintf(why, cap,
                     "--arms: unknown arm '%.*s' (baseline, linear, tanh, dim, selected, "
                     "uniform or decay)",
                     (int)len, p);
            return false;
        }
        if (arm[hit]) {
            snprintf(why, cap, "--arms: '%s' twice", exp_arm_names[hit]);
            return false;
        }
        arm[hit] = true;
        if (!end)
            break;
        p = end + 1;
    }
    if (arm[ARM_SELECTED] && !arm[ARM_LINEAR]) {
        snprintf(
            why, cap,
            "--arms: the selected arm needs the linear arm (its heads come from the linear arm's "
            "early gains)");
        return false;
    }
    return true;
}

static char *join_args(int argc, char **argv)
{
    size_t n = strlen("prefixcl") + 1;
    for (int i = 0; i < argc; i++)
        n += strlen(argv[i]) + 3;
    char *s = malloc(n);
    if (!s)
        return NULL;
    strcpy(s, "prefixcl"); /* argv[0] is the command's name */
    for (int i = 0; i < argc; i++) {
        const bool quote = !argv[i][0] || strpbrk(argv[i], " \t'\"");
        strcat(s, quote ? " '" : " ");
        strcat(s, argv[i]);
        if (quote)
            strcat(s, "'");
    }
    return s;
}

/* Whether path opens as a regular file (else pfx_last_error(NULL) says why). */
static bool readable(const char *path)
{
    FILE *f;
    if (pfx_input_open(path, &f) != PFX_SUCCESS)
        return false;
    fclose(f);
    return true;
}

static void state_free(exp_state *s)
{
    for (size_t i = 0; s->runs && i < s->o.seeds * ARM_COUNT; i++) {
        exp_run *r = &s->runs[i];
        pfx_pretrain_result_free(&r->r);
        free(r->steps);
        free(r->gain);
        free(r->entropy);
        free(r->topk);
        free(r->heads);
        free(r->sign);
        free(r->gain_off_entropy);
    }
    free(s->runs);
    free(s->probe_ids);
    free(s->sentence);
    free(s->o.command_line);
    pfx_tokenizer_free(&s->tok);
    pfx_runtime_destroy(&s->rt);
}

/* --resume DIR: alone, then the options DIR/experiment.json saved, with
 * DIR as --out. */
static int experiment(int argc, char **argv, const char *resumed);

static int resume_from(int argc, char **argv, const char *dir)
{
    for (int i = 2; i < argc; i++)
        if (!strncmp(argv[i], "--", 2) && strcmp(argv[i], "--resume") &&
            strcmp(argv[i - 1], "--resume")) {
            fprintf(stderr,
                    "prefixcl experiment gain: --resume DIR takes no other option, and %s is one "
                    "(the experiment continues with the options it started with, kept in "
                    "DIR/experiment.json)\n",
                    argv[i]);
            return 2;
        }
    char path[4200], err[256];
    snprintf(path, sizeof(path), "%s/experiment.json", dir);
    size_t len = 0;
    char *text = saved_read(path, 1 << 20, &len);
    int n = 0;
    char **args = NULL;
    if (!text || saved_args_read(text, len, &n, &args, err, sizeof(err))) {
        fprintf(stderr, "prefixcl experiment gain: --resume %s: %s%s\n", dir,
                text ? "experiment.json: "
                     : "cannot read experiment.json (made when an experiment starts)",
                text ? err : "");
        free(text);
        return 2;
    }
    free(text);
    const int rc = n >= 2 ? experiment(n, args, dir) : 2;
    if (n < 2)
        fprintf(stderr, "prefixcl experiment gain: --resume %s: experiment.json holds no command\n",
                dir);
    saved_args_free(n, args);
    return rc;
}

/* The command line saved for --resume: --corpus, --tokenizer and --out as
 * absolute paths (a later sitting may start elsewhere). */
static int save_args(int argc, char **argv, const char *out)
{
    char **v = calloc((size_t)argc + 1, sizeof(char *)), *abs[3] = { NULL };
    int rc = -1, k = 0;
    if (!v)
        return -1;
    for (int i = 0; i < argc; i++) {
        v[i] = argv[i];
        if (i > 0 && k < 3 &&
            (!strcmp(argv[i - 1], "--corpus") || !strcmp(argv[i - 1], "--tokenizer") ||
             !strcmp(argv[i - 1], "--out")) &&
            (abs[k] = realpath(argv[i], NULL)))
            v[i] = abs[k++];
    }
    char path[4200];
    snprintf(path, sizeof(path), "%s/experiment.json", out);
    rc = exp_write_text(path, saved_args_text(argc, v));
    for (int i = 0; i < k; i++)
        free(abs[i]);
    free(v);
    return rc;
}

int cmd_experiment(int argc, char **argv)
{
    return experiment(argc, argv, NULL);
}

static int experiment(int argc, char **argv, const char *resumed)
{
    exp_state S = { 0 }, *s = &S;
    exp_options *o = &s->o;
    char wordnet[4096], wordnet_def[4200];
    snprintf(wordnet_def, sizeof(wordnet_def), "the committed tokenizer in %s",
             tool_data_dir("wordnet", wordnet, sizeof(wordnet)));
    *o = (exp_options){ .tokenizer = wordnet,
                        .layers = DEF_LAYERS,
                        .hidden = DEF_HIDDEN,
                        .heads = DEF_HEADS,
                        .block = DEF_BLOCK,
                        .batch = DEF_BATCH,
                        .steps = DEF_STEPS,
                        .seeds = 3,
                        .seed = 1,
                        .lr = DEF_LR,
                        .uniform_init = 0.05f,
                        .gain_lr_decay = 0.5f,
                        .top_k = 8,
                        .eval_blocks = 64,
                        .probe_docs = 3000,
                        .gen_tokens = 64,
                        .gen_reps = 5,
                        .cls_steps = DEF_CLS_STEPS,
                        .cls_prefix = DEF_CLS_PREFIX,
                        .cls_lr = 1e-2f,
                        .cls_test = DEF_CLS_TEST };
    const char *arms = "baseline,linear,tanh,dim,selected", *resume = NULL;
    size_t warmup = SIZE_MAX, measure = 0, eval_every = 0; /* SIZE_MAX, 0: from --steps */
    const cli_option opts[] = {
        { "--corpus", CLI_TEXT, &o->corpus, 0, 0, NULL, NULL, "DIR",
          "train.txt, valid.txt, valid_labels.tsv (tools/corpus/wordnet_corpus.py DIR)", NULL },
        { "--tokenizer", CLI_TEXT, &o->tokenizer, 0, 0, NULL, NULL, "DIR",
          "tokenizer.json's folder", wordnet_def },
        { "--out", CLI_TEXT, &o->out, 0, 0, NULL, NULL, "DIR", "output folder", NULL },
        { "--arms", CLI_TEXT, &arms, 0, 0, NULL, NULL, "LIST",
          "the arms, of baseline, linear, tanh, dim, selected, uniform, decay; selected needs "
          "linear",
          "baseline,linear,tanh,dim,selected" },
        { "--uniform-init", CLI_FLOAT, &o->uniform_init, 1e-6, 10, NULL, NULL, "A",
          "the uniform arm's gains start uniform in [-A, A]", "0.05" },
        { "--gain-lr-decay", CLI_FLOAT, &o->gain_lr_decay, 1e-3, 1, NULL, NULL, "X",
          "the decay arm's gain learning rate reaches the cosine's floor after this fraction "
          "of the decay steps",
          "0.5" },
        { "--device", CLI_TEXT, &o->device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
        { "--layers", CLI_SIZE, &o->layers, 1, 256, NULL, NULL, "N", "transformer layers",
          CLI_STR(DEF_LAYERS) },
        { "--hidden", CLI_SIZE, &o->hidden, 8, 1 << 16, NULL, NULL, "N", "width",
          CLI_STR(DEF_HIDDEN) },
        { "--heads", CLI_SIZE, &o->heads, 1, 1024, NULL, NULL, "N",
          "attention heads, dividing --hidden", CLI_STR(DEF_HEADS) },
        { "--block", CLI_SIZE, &o->block, 8, 1 << 16, NULL, NULL, "N",
          "tokens a row, also the model's positions", CLI_STR(DEF_BLOCK) },
        { "--batch", CLI_SIZE, &o->batch, 1, 4096, NULL, NULL, "N", "rows a step",
          CLI_STR(DEF_BATCH) },
        { "--steps", CLI_SIZE, &o->steps, 5, 1e9, NULL, NULL, "N", "optimizer steps of every arm",
          CLI_STR(DEF_STEPS) },
        { "--lr", CLI_FLOAT, &o->lr, 1e-9, 10, NULL, NULL, "X",
          "the weights' learning rate; the gains' is half",
          "3e-3: the recipe's 1e-4 is for long runs of large models" },
        { "--warmup", CLI_SIZE, &warmup, 0, 1e9, NULL, NULL, "N",
          "learning-rate warm-up and gain ramp steps", "steps / 10" },
        { "--seed", CLI_U64, &o->seed, 0, 1.9e19, NULL, NULL, "S", "initialization and data order",
          "1" },
        { "--seeds", CLI_SIZE, &o->seeds, 1, 30, NULL, NULL, "N",
          "repeat every arm with seeds S .. S+N-1: means, 95% intervals and the verdicts (one "
          "seed: figures only)",
          "3" },
        { "--top-k", CLI_SIZE, &o->top_k, 1, 1 << 16, NULL, NULL, "K",
          "the top-k attention mass measured per head", "8" },
        { "--measure-every", CLI_SIZE, &measure, 1, 1e9, NULL, NULL, "K",
          "per-head measures every K steps", "steps / 20" },
        { "--eval-every", CLI_SIZE, &eval_every, 1, 1e9, NULL, NULL, "N",
          "validation loss every N steps", "steps / 10" },
        { "--eval-blocks", CLI_SIZE, &o->eval_blocks, 1, 1e9, NULL, NULL, "N",
          "validation blocks an evaluation reads", "64" },
        { "--probe-docs", CLI_SIZE, &o->probe_docs, 0, 1e9, NULL, NULL, "N",
          "validation documents the probe reads, 0: all", "3000" },
        { "--classify-steps", CLI_SIZE, &o->cls_steps, 0, 1e9, NULL, NULL, "N",
          "the classification's prefix-tuning steps (8 glosses each) of every final model; 0: no "
          "classification",
          CLI_STR(DEF_CLS_STEPS) },
        { "--classify-prefix", CLI_SIZE, &o->cls_prefix, 1, 1 << 16, NULL, NULL, "P",
          "the classification's prefix length", CLI_STR(DEF_CLS_PREFIX) },
        { "--classify-lr", CLI_FLOAT, &o->cls_lr, 1e-9, 10, NULL, NULL, "X",
          "the classification's tuning learning rate", "1e-2" },
        { "--classify-test", CLI_SIZE, &o->cls_test, 0, 1e9, NULL, NULL, "N",
          "held-out glosses the classification scores, 0: all", CLI_STR(DEF_CLS_TEST) },
        { "--gen-tokens", CLI_SIZE, &o->gen_tokens, 1, 1 << 16, NULL, NULL, "N",
          "new tokens a timed generation", "64" },
        { "--gen-reps", CLI_SIZE, &o->gen_reps, 1, 1000, NULL, NULL, "N",
          "timed generations per model and arm", "5" },
        { "--quiet", CLI_FLAG, &o->quiet, 0, 0, NULL, NULL, NULL, "no progress output", NULL },
        { "--resume", CLI_TEXT, &resume, 0, 0, NULL, NULL, "DIR",
          "continue the experiment in DIR where it stopped (each arm and seed from its "
          "checkpoint, finished ones kept), with the options it started with; no other option",
          NULL },
    };
    const size_t nopts = sizeof(opts) / sizeof(opts[0]);
    if (argc < 2 || strcmp(argv[1], "gain")) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            return cli_help(stdout, &doc, opts, nopts);
        }
        fprintf(stderr, "prefixcl experiment: %s (the one experiment: gain)\n\n",
                argc < 2 ? "which experiment?" : "unknown experiment");
        return cli_help(stderr, &doc, opts, nopts);
    }
    const int parsed = cli_parse("experiment gain", argc - 1, argv + 1, opts, nopts, NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (resume && resumed) {
        fprintf(stderr, "prefixcl experiment gain: --resume %s: experiment.json holds --resume\n",
                resumed);
        return 2;
    }
    if (resume)
        return resume_from(argc, argv, resume);
    if (resumed) {
        o->out = resumed;
        s->resume = true;
    }
    char why[600];
    if (!o->corpus)
        return refuse(
            "--corpus DIR is needed (python3 tools/corpus/wordnet_corpus.py DIR makes one)", opts,
            nopts);
    if (!o->out)
        return refuse("--out DIR is needed", opts, nopts);
    if (!parse_arms(arms, o->arm, why, sizeof(why)))
        return refuse(why, opts, nopts);
    if (o->hidden % o->heads) {
        snprintf(why, sizeof(why), "--heads %zu does not divide --hidden %zu", o->heads, o->hidden);
        return refuse(why, opts, nopts);
    }
    if (o->cls_steps && o->cls_prefix + 8 > o->block) {
        snprintf(why, sizeof(why),
                 "--classify-prefix %zu leaves fewer than 8 of --block %zu positions for a gloss "
                 "and its label",
                 o->cls_prefix, o->block);
        return refuse(why, opts, nopts);
    }
    if (o->top_k > o->block) {
        snprintf(why, sizeof(why), "--top-k %zu exceeds --block %zu", o->top_k, o->block);
        return refuse(why, opts, nopts);
    }
    o->warmup = warmup != SIZE_MAX ? warmup : o->steps / 10;
    o->measure_every = measure ? measure : (o->steps / 20 ? o->steps / 20 : 1);
    o->eval_every = eval_every ? eval_every : (o->steps / 10 ? o->steps / 10 : 1);
    if (o->measure_every > o->steps || o->eval_every > o->steps) {
        snprintf(why, sizeof(why), "%s %zu exceeds --steps %zu",
                 o->measure_every > o->steps ? "--measure-every" : "--eval-every",
                 o->measure_every > o->steps ? o->measure_every : o->eval_every, o->steps);
        return refuse(why, opts, nopts);
    }
    /* the folders as absolute paths in every sitting: the arms' checkpoints
     * record the paths, and --resume starts from experiment.json's absolute
     * ones (save_args), perhaps elsewhere */
    char corpus_abs[PATH_MAX], tokenizer_abs[PATH_MAX], out_abs[PATH_MAX];
    if (realpath(o->corpus, corpus_abs))
        o->corpus = corpus_abs;
    if (realpath(o->tokenizer, tokenizer_abs))
        o->tokenizer = tokenizer_abs;
    snprintf(s->train_path, sizeof(s->train_path), "%s/train.txt", o->corpus);
    snprintf(s->valid_path, sizeof(s->valid_path), "%s/valid.txt", o->corpus);
    snprintf(s->labels_path, sizeof(s->labels_path), "%s/valid_labels.tsv", o->corpus);
    const char *files[3] = { s->train_path, s->valid_path, s->labels_path };
    for (int i = 0; i < 3; i++)
        if (!readable(files[i])) {
            fprintf(stderr,
                    "prefixcl experiment gain: --corpus %s: %s (make the corpus with python3 "
                    "tools/corpus/wordnet_corpus.py DIR)\n",
                    o->corpus, pfx_last_error(NULL));
            return 2;
        }
    static const char *const outputs[] = { "report.md",   "results.json",     "valid_loss.png",
                                           "entropy.png", "gains_linear.png", "attention_maps.png",
                                           "model/",      "experiment.json",  "classify/" };
    if (!cli_check_output_dir("experiment gain", "--out", o->out, outputs,
                              sizeof(outputs) / sizeof(outputs[0])))
        return 2;
    if (realpath(o->out, out_abs))
        o->out = out_abs;
    if (!resumed && save_args(argc, argv, o->out))
        return 1;
    if (pfx_tokenizer_load(o->tokenizer, &s->tok) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: --tokenizer %s: %s\n", o->tokenizer,
                pfx_last_error(NULL));
        return 2;
    }
    if (pfx_tokenizer_special_id(s->tok, PFX_TOKEN_EOS) < 0) {
        fprintf(stderr, "prefixcl experiment gain: --tokenizer %s has no end-of-text token\n",
                o->tokenizer);
        pfx_tokenizer_free(&s->tok);
        return 2;
    }
    o->command_line = join_args(argc, argv);
    const double t0 = tool_now_s();
    const time_t now = time(NULL);
    strftime(s->date, sizeof(s->date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    int rc = 1;
    s->runs = calloc(o->seeds * ARM_COUNT, sizeof(exp_run));
    if (!s->runs || !o->command_line || !(s->rt = tool_runtime("experiment gain", o->device)) ||
        exp_prepare(s) || exp_unigram(s))
        goto out;
    if (!o->quiet)
        printf("prefixcl experiment gain: %zu layers x %zu heads, %zu wide, blocks of %zu, %zu x "
               "%zu steps an arm, "
               "device %s\n",
               o->layers, o->heads, o->hidden, o->block, o->batch, o->steps,
               pfx_runtime_device(s->rt)->device_name);
    cli_stop_catch();
    const char *phase = "training";
    bool ok = true;
    for (size_t k = 0; k < o->seeds && ok; k++)
        for (exp_arm_kind a = 0; a < ARM_COUNT && ok; a++)
            if (o->arm[a])
                ok = exp_run_arm(s, k, a) == 0;
    double t1 = tool_now_s();
    if (ok) {
        phase = "the generation speed";
        ok = exp_speed(s) == 0;
    }
    s->seconds_speed = tool_now_s() - t1;
    t1 = tool_now_s();
    if (ok) {
        phase = "the probe";
        ok = exp_probe_all(s) == 0;
    }
    s->seconds_probe = tool_now_s() - t1;
    t1 = tool_now_s();
    if (ok) {
        phase = "the classification";
        ok = exp_classify_all(s) == 0;
    }
    s->seconds_classify = tool_now_s() - t1;
    cli_stop_release();
    if (!ok) {
        if (cli_stop) {
            fprintf(stderr,
                    "prefixcl experiment gain: stopped during %s; prefixcl experiment gain "
                    "--resume %s continues (finished arms kept)\n",
                    phase, o->out);
            rc = cli_stop_status();
        }
        goto out;
    }
    char note[128];
    const int pics = exp_plot_all(s, note, sizeof(note));
    s->seconds_total = tool_now_s() - t0;
    if (exp_report_write(s))
        goto out;
    printf("wrote %s/report.md, results.json, %d picture%s%s%s, and a folder per arm\n", o->out,
           pics, pics == 1 ? "" : "s", note[0] ? "; pictures: " : "", note);
    printf("time: %.0f s\n", s->seconds_total);
    rc = 0;
out:
    state_free(s);
    return rc;
}
