/* The experiment's arms: the model's config and shape, the fixed validation batch,
 * one pfx_pretrain_run per arm with the per-head measures taken in its step
 * callback, and the trained gains read back (exp.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cli.h"
#include "exp.h"
#include "saved.h"
#include "settled.h"
#include "common/tool_util.h"

const char *const exp_arm_names[ARM_COUNT] = { "baseline", "linear",  "tanh", "dim",
                                               "selected", "uniform", "decay" };
const float exp_thresholds[EXP_THRESHOLDS] = { 0.01f, 0.05f, 0.1f };

/* out/model/config.json: a GPT-2 of the options' size over the tokenizer's
 * vocabulary, positions = the block, the end-of-text token as BOS and EOS. */
static int write_config(exp_state *s)
{
    const exp_options *o = &s->o;
    snprintf(s->config_dir, sizeof(s->config_dir), "%s/model", o->out);
    if (mkdir(s->config_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "prefixcl experiment gain: cannot make %s: %s\n", s->config_dir,
                strerror(errno));
        return -1;
    }
    const int32_t eos = pfx_tokenizer_special_id(s->tok, PFX_TOKEN_EOS);
    char path[4200];
    snprintf(path, sizeof(path), "%s/config.json", s->config_dir);
    pfx_output_file *f = NULL;
    if (pfx_output_open(path, &f) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: %s\n", pfx_last_error(NULL));
        return -1;
    }
    /* dropout 0 written out (GPT-2's config defaults to 0.1): an arm sees
     * under an epoch of the corpus, where dropout only slows learning */
    fprintf(pfx_output_stream(f),
            "{\"model_type\": \"gpt2\", \"n_layer\": %zu, \"n_head\": %zu, \"n_embd\": %zu, "
            "\"vocab_size\": %zu, "
            "\"n_positions\": %zu, \"bos_token_id\": %d, \"eos_token_id\": %d, "
            "\"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0, \"resid_pdrop\": 0.0}\n",
            o->layers, o->heads, o->hidden, pfx_tokenizer_vocab_size(s->tok), o->block, (int)eos,
            (int)eos);
    if (pfx_output_commit(&f) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: %s\n", pfx_last_error(NULL));
        return -1;
    }
    /* the shape as the library builds the model from that config (what every
     * arm's job trains) */
    pfx_model *model = NULL;
    if (pfx_model_init(s->rt, s->config_dir, NULL, 0, &model) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: the model of %s: %s\n", path,
                pfx_last_error(s->rt));
        return -1;
    }
    pfx_model_get_shape(model, &s->shape);
    pfx_model_destroy(&model);
    s->LH = s->shape.layers * s->shape.heads;
    return 0;
}

/* The measures' batch: the first `batch` blocks of valid.txt, tokenized as
 * the job tokenizes its evaluation data (documents joined with EOS). */
static int fixed_batch(exp_state *s)
{
    pfx_dataset_options dopt;
    pfx_dataset_default_options(&dopt);
    dopt.format = PFX_DATA_TEXT;
    dopt.append_eos = true;
    dopt.shuffle = false;
    dopt.max_length = 1u << 20;
    pfx_dataset *ds = NULL;
    pfx_blocks *blocks = NULL;
    int rc = -1;
    if (pfx_dataset_load(s->valid_path, s->tok, &dopt, &ds) != PFX_SUCCESS ||
        pfx_blocks_pack(ds, s->o.block, &blocks) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: %s: %s\n", s->valid_path, pfx_last_error(NULL));
        goto out;
    }
    s->probe_rows = pfx_blocks_count(blocks) < s->o.batch ? pfx_blocks_count(blocks) : s->o.batch;
    if (s->probe_rows == 0) {
        fprintf(stderr, "prefixcl experiment gain: %s fills no block of %zu tokens\n",
                s->valid_path, s->o.block);
        goto out;
    }
    s->probe_ids = malloc(s->probe_rows * s->o.block * sizeof(int32_t));
    if (!s->probe_ids)
        goto out;
    for (size_t i = 0; i < s->probe_rows; i++) {
        const int32_t *ids;
        pfx_blocks_get(blocks, i, &ids);
        memcpy(s->probe_ids + i * s->o.block, ids, s->o.block * sizeof(int32_t));
    }
    /* the heat maps' sentence: the first validation document, at most 24
     * tokens (a map wider than that has unreadable labels) */
    const int32_t *ids;
    const int32_t *labels;
    size_t len;
    if (pfx_dataset_example(ds, 0, &ids, &labels, &len) != PFX_SUCCESS)
        goto out;
    s->sentence_len = len > 24 ? 24 : len;
    if (s->sentence_len > s->o.block)
        s->sentence_len = s->o.block;
    s->sentence = malloc(s->sentence_len * sizeof(int32_t));
    if (!s->sentence)
        goto out;
    memcpy(s->sentence, ids, s->sentence_len * sizeof(int32_t));
    rc = 0;
out:
    pfx_blocks_free(&blocks);
    pfx_dataset_free(&ds);
    return rc;
}

int exp_prepare(exp_state *s)
{
    return write_config(s) || fixed_batch(s) ? -1 : 0;
}

typedef struct step_ctx {
    exp_state *s;
    exp_run *run;
    exp_arm_kind arm;
    size_t cap;
    pfx_status err;
    char err_text[512];
    bool tty;   /* a terminal: the progress bar of tune and pretrain */
    bool built; /* the kernel building said */
    double h;   /* the mean head entropy last measured (NAN before) */
} step_ctx;

/* Every step on a terminal, the bar tune and pretrain draw; elsewhere a
 * line at each measure (after it: `measured`). */
static void progress(step_ctx *c, const pfx_pretrain_step *st, bool measured)
{
    if (c->s->o.quiet)
        return;
    tool_say_builds(stdout, c->tty, st->build_s, &c->built);
    char h[48] = "";
    if (isfinite(c->h))
        snprintf(h, sizeof(h), "  mean head entropy %.3f", c->h);
    if (c->tty) {
        char bar[CLI_BAR_MAX + 1];
        cli_bar(bar, (double)st->step / (double)st->steps, 24);
        printf("\r[%s] %-8s step %zu/%zu  loss %.4f%s%s  %.0f tok/s  %.0f s left ", bar,
               exp_arm_names[c->arm], st->step, st->steps, st->loss,
               isfinite(st->eval_loss) ? " (eval)" : "", h, st->tokens_per_s, st->eta_s);
        if (st->step == st->steps)
            putchar('\n');
    } else if (measured) {
        printf("  %-8s step %5zu/%zu  loss %.4f%s%s  %.0f tok/s  %.0f s left\n",
               exp_arm_names[c->arm], st->step, st->steps, st->loss,
               isfinite(st->eval_loss) ? " (eval)" : "", h, st->tokens_per_s, st->eta_s);
    }
    fflush(stdout);
}

/* After every K-th step (and the last): the entropy and top-k mass of each
 * head on the fixed batch, with the gains of this step (step->prefix). */
static void on_step(const pfx_pretrain_step *st, void *user)
{
    step_ctx *c = user;
    exp_state *s = c->s;
    exp_run *run = c->run;
    const size_t K = s->o.measure_every;
    if (c->err != PFX_SUCCESS || (st->step % K != 0 && st->step != st->steps) || run->m >= c->cap) {
        if (c->err == PFX_SUCCESS)
            progress(c, st, false);
        return;
    }
    while (run->m && run->steps[run->m - 1] >= st->step)
        run->m--; /* measured before a stop past the checkpoint it resumed from */
    const size_t i = run->m;
    const pfx_model_batch b = { .batch = s->probe_rows, .tokens = s->o.block, .ids = s->probe_ids };
    c->err = pfx_model_head_stats(st->ctx, &b, st->prefix, (uint32_t)s->o.top_k, NULL,
                                  run->entropy + i * s->LH, run->topk + i * s->LH);
    if (c->err != PFX_SUCCESS) {
        snprintf(c->err_text, sizeof(c->err_text), "%s", pfx_last_error(s->rt));
        return;
    }
    run->steps[i] = st->step;
    run->m++;
    double h = 0.0;
    for (size_t k = 0; k < s->LH; k++)
        h += run->entropy[i * s->LH + k];
    c->h = h / (double)s->LH;
    progress(c, st, true);
}

/* The heads whose |g| in the linear arm after 20% of the steps is in the
 * top half (ties: the lower index first): those that moved most early. */
static void select_heads(exp_state *s, const exp_run *lin, uint8_t *heads)
{
    const size_t at =
        (s->o.steps + 2) / 5 ? (s->o.steps + 2) / 5 : 1; /* round(0.2 steps), at least 1 */
    const float *g = lin->r.gains + at * s->LH;
    s->selected_at = at;
    for (size_t h = 0; h < s->LH; h++) {
        size_t rank = 0; /* heads ahead of h */
        for (size_t k = 0; k < s->LH; k++)
            rank += fabsf(g[k]) > fabsf(g[h]) || (fabsf(g[k]) == fabsf(g[h]) && k < h);
        heads[h] = rank < s->LH / 2 ? 1 : 0;
    }
}

/* A resumed run: its checkpoint (then c->resume) and the measures saved
 * with it. 0, or -1 after saying why. */
static int resume_run(exp_state *s, exp_run *run, size_t cap, pfx_pretrain_config *c)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/" PFX_PRETRAIN_CHECKPOINT, run->dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0; /* not started: from the beginning */
    fclose(f);
    c->resume = true;
    snprintf(path, sizeof(path), "%s/measures.json", run->dir);
    size_t len = 0;
    char *text = saved_read(path, (size_t)1 << 30, &len), err[256];
    if (!text)
        return 0; /* stopped before the first measurement was saved */
    const int rc = saved_measures_read(text, len, s->LH, cap, s->o.steps, run->steps, run->entropy,
                                       run->topk, &run->m, err, sizeof(err));
    free(text);
    if (rc)
        fprintf(stderr, "prefixcl experiment gain: %s: %s\n", path, err);
    return rc;
}

/* measures.json beside the run's checkpoint. */
static int save_measures(const exp_state *s, const exp_run *run)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/measures.json", run->dir);
    char *text = saved_measures_text(run->steps, run->entropy, run->topk, run->m, s->LH);
    return exp_write_text(path, text);
}

int exp_write_text(const char *path, char *text)
{
    pfx_output_file *f = NULL;
    int rc = -1;
    if (text && pfx_output_open(path, &f) == PFX_SUCCESS) {
        fprintf(pfx_output_stream(f), "%s\n", text);
        rc = pfx_output_commit(&f) == PFX_SUCCESS ? 0 : -1;
    }
    if (rc)
        fprintf(stderr, "prefixcl experiment gain: writing %s: %s\n", path,
                text ? pfx_last_error(NULL) : "out of host memory");
    free(text);
    return rc;
}

int exp_run_arm(exp_state *s, size_t k, exp_arm_kind a)
{
    const exp_options *o = &s->o;
    exp_run *run = exp_run_at(s, k, a);
    run->seed = o->seed + k;
    if (o->seeds > 1)
        snprintf(run->dir, sizeof(run->dir), "%s/%s/seed-%llu", o->out, exp_arm_names[a],
                 (unsigned long long)run->seed);
    else
        snprintf(run->dir, sizeof(run->dir), "%s/%s", o->out, exp_arm_names[a]);
    /* the folders: out/ARM (and out/ARM/seed-S) */
    char parent[4200];
    snprintf(parent, sizeof(parent), "%s/%s", o->out, exp_arm_names[a]);
    if ((mkdir(parent, 0777) != 0 && errno != EEXIST) ||
        (mkdir(run->dir, 0777) != 0 && errno != EEXIST)) {
        fprintf(stderr, "prefixcl experiment gain: cannot make %s: %s\n", run->dir,
                strerror(errno));
        return -1;
    }
    const size_t cap = o->steps / o->measure_every + 2;
    run->steps = calloc(cap, sizeof(size_t));
    run->gain = calloc(cap * s->LH, sizeof(float));
    run->entropy = calloc(cap * s->LH, sizeof(float));
    run->topk = calloc(cap * s->LH, sizeof(float));
    run->sign = calloc(s->LH, sizeof(int8_t));
    if (!run->steps || !run->gain || !run->entropy || !run->topk || !run->sign)
        return -1;

    pfx_pretrain_config c;
    pfx_pretrain_default_config(&c);
    c.config_dir = s->config_dir;
    c.tokenizer_dir = o->tokenizer;
    c.data_path = s->train_path;
    c.eval_path = s->valid_path;
    c.out_dir = run->dir;
    c.block = o->block;
    c.batch = o->batch;
    c.steps = o->steps;
    c.lr = o->lr;
    c.gain_lr = o->lr / 2; /* the recipe's ratio (1e-4 and 5e-5) */
    c.warmup_steps = (uint32_t)o->warmup;
    c.gain_ramp_steps = (uint32_t)o->warmup;
    c.eval_every = o->eval_every;
    c.eval_blocks = o->eval_blocks;
    c.seed = run->seed;
    c.stop_flag = &cli_stop;
    c.gain_mode = a == ARM_TANH                       ? PFX_GAIN_TANH
                  : a == ARM_BASELINE || a == ARM_DIM ? PFX_GAIN_OFF
                                                      : PFX_GAIN_LINEAR;
    c.gain_init = a == ARM_UNIFORM ? o->uniform_init : 0.0f;
    c.gain_decay_fraction = a == ARM_DECAY ? o->gain_lr_decay : 0.0f;
    c.structured_gain = a == ARM_DIM;
    pfx_layer_head *list = NULL;
    if (a == ARM_SELECTED) {
        const exp_run *lin = exp_run_at(s, k, ARM_LINEAR);
        run->heads = calloc(s->LH, 1);
        if (!run->heads || !lin->done || !lin->r.gains) {
            fprintf(stderr,
                    "prefixcl experiment gain: the selected arm needs the linear arm's gains\n");
            return -1;
        }
        select_heads(s, lin, run->heads);
        /* the job's list of (layer, head) of the mask */
        if (!(list = calloc(s->LH, sizeof(*list))))
            return -1;
        for (size_t h = 0; h < s->LH; h++)
            if (run->heads[h])
                list[c.gain_head_count++] =
                    (pfx_layer_head){ h / s->shape.heads, h % s->shape.heads };
        c.gain_heads = list;
    }
    if (s->resume && resume_run(s, run, cap, &c)) {
        free(list);
        return -1;
    }
    step_ctx ctx = { .s = s,
                     .run = run,
                     .arm = a,
                     .cap = cap,
                     .err = PFX_SUCCESS,
                     .tty = isatty(STDOUT_FILENO) != 0,
                     .h = NAN };
    if (!o->quiet) {
        printf("arm %s (seed %llu): %s%s\n", exp_arm_names[a], (unsigned long long)run->seed,
               run->dir, c.resume ? " (resumed)" : "");
        fflush(stdout);
    }
    const double t0 = tool_now_s();
    pfx_status st = pfx_pretrain_run(s->rt, &c, on_step, &ctx, &run->r);
    free(list);
    run->seconds = tool_now_s() - t0;
    if (st == PFX_SUCCESS && ctx.err == PFX_SUCCESS && save_measures(s, run))
        return -1;
    if (st != PFX_SUCCESS || ctx.err != PFX_SUCCESS || run->r.stopped) {
        if (ctx.tty && !o->quiet) { /* the message on a line of its own, under the bar */
            putchar('\n');
            fflush(stdout);
        }
        if (run->r.stopped)
            fprintf(stderr, "prefixcl experiment gain: stopped during the %s arm\n",
                    exp_arm_names[a]);
        else
            fprintf(stderr, "prefixcl experiment gain: the %s arm: %s (%s)\n", exp_arm_names[a],
                    pfx_status_string(st != PFX_SUCCESS ? st : ctx.err),
                    st != PFX_SUCCESS ? pfx_last_error(s->rt) : ctx.err_text);
        return -1;
    }
    /* the gains at the measured steps, from the job's history of every step */
    for (size_t i = 0; i < run->m; i++)
        for (size_t h = 0; h < s->LH; h++)
            run->gain[i * s->LH + h] =
                run->r.gains ? run->r.gains[run->steps[i] * s->LH + h] : 0.0f;
    run->ppl = exp(run->r.eval_losses[run->r.steps]);
    exp_settle(s, run);
    run->done = true;
    return 0;
}

void exp_settle(exp_state *s, exp_run *run)
{
    int8_t *sign = malloc(s->LH ? s->LH : 1);
    for (size_t t = 0; t < EXP_THRESHOLDS; t++) {
        run->settled[t] =
            sign ? settled_heads(run->gain, run->steps, run->m, s->LH, s->o.steps,
                                 exp_thresholds[t], t == EXP_THR_MAIN ? run->sign : sign)
                 : -1;
    }
    free(sign);
}

int exp_gains_load(const exp_state *s, const exp_run *run, exp_arm_kind a, exp_gains *g)
{
    memset(g, 0, sizeof(*g));
    if (a == ARM_BASELINE)
        return 0;
    char path[4200];
    snprintf(path, sizeof(path), "%s/gains.safetensors", run->dir);
    pfx_safetensors *f = NULL;
    if (pfx_safetensors_open(path, &f) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: %s\n", pfx_last_error(NULL));
        return -1;
    }
    const size_t D = s->shape.head_dim;
    pfx_status st;
    if (a == ARM_DIM) {
        g->dim_gains = malloc(s->LH * D * sizeof(float));
        st = g->dim_gains ? pfx_safetensors_read_f32(f, "dim_gains", g->dim_gains, s->LH * D)
                          : PFX_ERROR_OUT_OF_MEMORY;
    } else {
        g->gains = malloc(s->LH * sizeof(float));
        st = g->gains ? pfx_safetensors_read_f32(f, "gains", g->gains, s->LH)
                      : PFX_ERROR_OUT_OF_MEMORY;
        g->prefix.gain_mode = a == ARM_TANH ? PFX_GAIN_TANH : PFX_GAIN_LINEAR;
    }
    pfx_safetensors_close(&f);
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: %s: %s\n", path, pfx_last_error(NULL));
        exp_gains_free(g);
        return -1;
    }
    g->prefix.gains = g->gains;
    g->prefix.dim_gains = g->dim_gains;
    g->prefix.gain_ramp = 1.0f;
    return 0;
}

void exp_gains_free(exp_gains *g)
{
    free(g->gains);
    free(g->dim_gains);
    memset(g, 0, sizeof(*g));
}

pfx_context *exp_model_load(exp_state *s, const exp_run *run, size_t batch)
{
    const pfx_context_params p = { .max_batch = batch, .max_tokens = s->o.block };
    pfx_model *m = NULL;
    pfx_context *ctx = NULL;
    if (pfx_model_load(s->rt, run->dir, NULL, &m) != PFX_SUCCESS ||
        pfx_context_create(m, &p, &ctx) != PFX_SUCCESS)
        fprintf(stderr, "prefixcl experiment gain: loading %s: %s\n", run->dir,
                pfx_last_error(s->rt));
    pfx_model_destroy(&m); /* released with the context */
    return ctx;
}
