/* The experiment's report (exp.h): out/report.md for a reader, in the shape
 * of the claims it checks with their figures beside the measured ones, and
 * out/results.json with the same figures for a program. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exp.h"
#include "settled.h"
#include "common/tool_util.h"

/* The claims checked, as published: validation perplexity and generation
 * tokens/s without gains, with gains, with gains on selected heads; the
 * share of heads whose gain settles. */
static const double claim_ppl[ARM_COUNT] = { 4.21, 4.08, NAN, NAN, 4.02, NAN, NAN };
static const double claim_tok[ARM_COUNT] = { 1250, 1220, NAN, NAN, 1280, NAN, NAN };
/* classification accuracy, percent */
static const double claim_cls[ARM_COUNT] = { 89.3, 90.7, NAN, NAN, 91.2, NAN, NAN };
#define CLAIM_SETTLED_LO 0.60
#define CLAIM_SETTLED_HI 0.70

typedef struct stat {
    double mean, ci; /* ci: half-width of the 95% interval; NAN for one value */
    size_t n;
} stat;

static stat stat_of(const double *x, size_t n)
{
    stat s = { NAN, NAN, n };
    if (n == 0)
        return s;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    s.mean = sum / (double)n;
    if (n > 1) {
        double q = 0.0;
        for (size_t i = 0; i < n; i++)
            q += (x[i] - s.mean) * (x[i] - s.mean);
        s.ci = verdict_t975(n - 1) * sqrt(q / (double)(n - 1)) / sqrt((double)n);
    }
    return s;
}

typedef enum measure { M_PPL, M_PROBE, M_SETTLED, M_CLS } measure;

/* A measure of arm a over the seeds (the settled share: of the trained
 * heads; skipped where the window was too short; the classification
 * accuracy in percent, of the runs classified). */
static stat arm_stat(exp_state *s, exp_arm_kind a, measure m)
{
    double x[64] = { 0 };
    size_t n = 0;
    for (size_t k = 0; k < s->o.seeds && n < 64; k++) {
        const exp_run *run = exp_run_at(s, k, a);
        if (!run->done)
            continue;
        if (m == M_PPL)
            x[n++] = run->ppl;
        else if (m == M_PROBE)
            x[n++] = run->probe_acc;
        else if (m == M_CLS) {
            if (run->cls_done)
                x[n++] = 100.0 * run->cls_acc;
        } else if (run->settled[EXP_THR_MAIN] >= 0) {
            const size_t trained = exp_trained_heads(s, run);
            x[n++] = trained ? (double)run->settled[EXP_THR_MAIN] / (double)trained : 0.0;
        }
    }
    return stat_of(x, n);
}

static void fmt_stat(char *buf, size_t cap, stat v, const char *fmt)
{
    char a[32], b[32];
    if (!isfinite(v.mean)) {
        snprintf(buf, cap, "n/a");
        return;
    }
    snprintf(a, sizeof(a), fmt, v.mean);
    if (isfinite(v.ci)) {
        snprintf(b, sizeof(b), fmt, v.ci);
        snprintf(buf, cap, "%s ± %s", a, b);
    } else
        snprintf(buf, cap, "%s", a);
}

/* Of the heads settled with sign `sign`: how many have a final entropy
 * below (sign +1) or above (-1) `ref`'s, the same head. */
static size_t entropy_agree(const exp_state *s, const exp_run *run, const float *ref, int sign,
                            size_t *count)
{
    size_t agree = 0;
    *count = 0;
    const float *e = run->entropy + (run->m - 1) * s->LH;
    for (size_t h = 0; h < s->LH; h++)
        if (run->sign[h] == sign) {
            (*count)++;
            agree += sign > 0 ? e[h] < ref[h] : e[h] > ref[h];
        }
    return agree;
}

/* The median step since which the heads settled at threshold t have held
 * their sign beyond it; NAN when none settled. */
static double median_since(const exp_state *s, const exp_run *run, size_t t)
{
    int8_t *sign = malloc(s->LH);
    double *x = malloc(s->LH * sizeof(double)), med = NAN;
    size_t n = 0;
    if (sign && x &&
        settled_heads(run->gain, run->steps, run->m, s->LH, s->o.steps, exp_thresholds[t], sign) >
            0) {
        for (size_t h = 0; h < s->LH; h++)
            if (sign[h])
                x[n++] = (double)settled_since(run->gain, run->steps, run->m, s->LH, h,
                                               exp_thresholds[t]);
        med = tool_median(x, n);
    }
    free(sign);
    free(x);
    return med;
}

static void head_list(FILE *f, const exp_state *s, const exp_run *run, int sign)
{
    const float *g = run->r.gains + run->r.steps_done * s->LH;
    bool any = false;
    for (size_t h = 0; h < s->LH; h++)
        if (run->sign[h] == sign) {
            fprintf(f, "%sL%zuH%zu (%+.3f)", any ? ", " : "", h / s->shape.heads,
                    h % s->shape.heads, (double)g[h]);
            any = true;
        }
    if (!any)
        fprintf(f, "none");
}

/* Arm a's classification accuracy against the baseline's, paired by seed:
 * "+1.2 ± 0.8, above" (points). */
static void cls_against_baseline(exp_state *s, exp_arm_kind a, char *buf, size_t cap)
{
    double ma, mb;
    const verdict v = exp_cls_verdict(s, a, ARM_BASELINE, &ma, &mb);
    switch (v.kind) {
    case VERDICT_AGREES: snprintf(buf, cap, "%+.1f ± %.1f: above", v.mean, v.half); break;
    case VERDICT_DISAGREES: snprintf(buf, cap, "%+.1f ± %.1f: below", v.mean, v.half); break;
    case VERDICT_INCONCLUSIVE:
        snprintf(buf, cap, "%+.1f ± %.1f: inconclusive", v.mean, v.half);
        break;
    case VERDICT_ONE_SEED: snprintf(buf, cap, "%+.1f: one seed, no verdict", v.mean); break;
    default: snprintf(buf, cap, "n/a"); break;
    }
}

static void write_md(exp_state *s, FILE *f)
{
    const exp_options *o = &s->o;
    const pfx_device_info *dev = pfx_runtime_device(s->rt);
    const exp_run *base0 = exp_run_at(s, 0, ARM_BASELINE);
    const exp_run *any0 = NULL;
    for (exp_arm_kind a = 0; a < ARM_COUNT && !any0; a++)
        if (exp_run_at(s, 0, a)->done)
            any0 = exp_run_at(s, 0, a);
    fprintf(f, "# The attention-gain experiment\n\n");
    fprintf(f, "```\n%s\n```\n\n", o->command_line);
    fprintf(f, "- date: %s\n", s->date);
    fprintf(f, "- device: %s (%s, %s)\n", dev->device_name, dev->platform_name,
            tool_device_type(dev->type));
    fprintf(f,
            "- model: GPT-2 family, %zu layers, %zu heads of %zu, %zu wide, vocabulary %zu (the "
            "tokenizer's), "
            "%zu positions, %zu parameters\n",
            s->shape.layers, s->shape.heads, s->shape.head_dim, s->shape.hidden, s->shape.vocab,
            s->shape.max_positions, s->shape.parameters);
    if (any0)
        fprintf(f,
                "- training: %zu steps of %zu blocks x %zu tokens (%zu tokens a step, %zu tokens "
                "an arm), "
                "%zu training blocks available; weights lr %g, gains lr %g (half), weight decay "
                "0.01 (never on "
                "the gains), clipping 1.0, warm-up and gain ramp %zu steps then cosine to 0.1; "
                "seed%s %llu%s\n",
                o->steps, o->batch, o->block, any0->r.tokens_per_step,
                o->steps * any0->r.tokens_per_step, any0->r.train_blocks, (double)o->lr,
                (double)o->lr / 2, o->warmup, o->seeds > 1 ? "s" : "", (unsigned long long)o->seed,
                o->seeds > 1 ? "" : "");
    if (o->seeds > 1)
        fprintf(f,
                "- seeds: %llu .. %llu (%zu runs of every arm): figures are means ± the half-width "
                "of their "
                "95%% interval (Student's t)\n",
                (unsigned long long)o->seed, (unsigned long long)(o->seed + o->seeds - 1),
                o->seeds);
    if (any0)
        fprintf(f,
                "- validation: the first %zu of valid.txt's %zu blocks at every evaluation (every "
                "%zu steps and at "
                "the end)\n",
                o->eval_blocks < any0->r.eval_blocks ? o->eval_blocks : any0->r.eval_blocks,
                any0->r.eval_blocks, o->eval_every);
    double train = 0.0;
    for (size_t i = 0; i < o->seeds * ARM_COUNT; i++)
        train += s->runs[i].done ? s->runs[i].seconds : 0.0;
    fprintf(f,
            "- unigram perplexity of those validation tokens: %.1f (each of the %zu tokens "
            "predicted by its frequency in the training blocks, add-one smoothed over the "
            "vocabulary: the floor a model that learned nothing reaches)\n",
            s->unigram_ppl, s->unigram_tokens);
    fprintf(f,
            "- time: %.0f s in all: training and its measures %.0f s, generation speed %.0f s, "
            "probe %.0f s, classification %.0f s\n\n",
            s->seconds_total, train, s->seconds_speed, s->seconds_probe, s->seconds_classify);

    fprintf(f, "## Results against the claims\n\n");
    fprintf(f,
            "| arm | validation perplexity (unigram %.1f) | tokens/s | heads settled (thr 0.05) | "
            "probe accuracy | classification accuracy %% | classification against baseline, "
            "paired | claimed perplexity | claimed tokens/s | claimed classification %% "
            "|\n|---|---|---|---|---|---|---|---|---|---|\n",
            s->unigram_ppl);
    for (exp_arm_kind a = 0; a < ARM_COUNT; a++) {
        const exp_run *r0 = exp_run_at(s, 0, a);
        if (!r0->done)
            continue;
        char ppl[96], probe[96], settled[160] = "n/a (no gain)", tok[96] = "n/a", cp[16] = "—",
                                 ct[16] = "—", cls[96], cc[16] = "—", vs[160] = "—";
        fmt_stat(ppl, sizeof(ppl), arm_stat(s, a, M_PPL), "%.3f");
        fmt_stat(probe, sizeof(probe), arm_stat(s, a, M_PROBE), "%.3f");
        fmt_stat(cls, sizeof(cls), arm_stat(s, a, M_CLS), "%.1f");
        if (a != ARM_BASELINE && o->cls_steps)
            cls_against_baseline(s, a, vs, sizeof(vs));
        if (a != ARM_BASELINE) {
            if (o->seeds > 1) {
                char pct[96];
                stat st = arm_stat(s, a, M_SETTLED);
                st.mean *= 100;
                st.ci *= 100;
                fmt_stat(pct, sizeof(pct), st, "%.0f");
                snprintf(settled, sizeof(settled), "%s %% of %zu", pct, exp_trained_heads(s, r0));
            } else if (r0->settled[EXP_THR_MAIN] < 0)
                snprintf(settled, sizeof(settled), "window too short");
            else
                snprintf(settled, sizeof(settled), "%d of %zu (%.0f %%)", r0->settled[EXP_THR_MAIN],
                         exp_trained_heads(s, r0),
                         100.0 * r0->settled[EXP_THR_MAIN] / (double)exp_trained_heads(s, r0));
        }
        if (r0->speed[EXP_WALL].tok_s > 0)
            snprintf(tok, sizeof(tok), a == ARM_BASELINE ? "%.1f" : "%.1f (baseline %.1f)",
                     r0->speed[EXP_WALL].tok_s, r0->speed[EXP_WALL].base_tok_s);
        if (isfinite(claim_ppl[a]))
            snprintf(cp, sizeof(cp), "%.2f", claim_ppl[a]);
        if (isfinite(claim_tok[a]))
            snprintf(ct, sizeof(ct), "%.0f", claim_tok[a]);
        if (isfinite(claim_cls[a]))
            snprintf(cc, sizeof(cc), "%.1f", claim_cls[a]);
        fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", exp_arm_names[a], ppl,
                tok, settled, probe, cls, vs, cp, ct, cc);
    }
    fprintf(
        f,
        "\nThe claimed figures come from another model, corpus and machine: compare the directions "
        "and "
        "ratios, not the values. Tokens/s here: greedy decoding at batch 1 of %zu new tokens after "
        "a "
        "%zu-token validation prompt, new tokens over the whole call's wall time, median of %zu "
        "repetitions interleaved with the baseline's (seed %llu's models)%s. On a CPU device "
        "shared with "
        "other work the timings are noisy.\n\n",
        exp_gen_tokens(s), s->sentence_len, o->gen_reps, (unsigned long long)o->seed,
        base0->done ? "" : "; no baseline arm, so no speed comparison");
    if (s->probe_classes)
        fprintf(
            f,
            "Probe: multinomial logistic regression (L2 1e-3, standardized features) on the mean "
            "final "
            "hidden state of each validation document, predicting its WordNet lexicographer file "
            "(%zu "
            "classes); %zu documents at even indices train it, %zu at odd indices test it. Always "
            "answering the most frequent class scores %.3f.\n\n",
            s->probe_classes, s->probe_train, s->probe_test, any0->probe_majority);
    if (s->cls_classes)
        fprintf(f,
                "Classification: each final model (a gain arm's with its gains folded into its "
                "query projections: the same function) prefix-tuned by the tune job's supervised "
                "mode, %zu steps of 8 examples, prefix length %zu, learning rate %g, the run's "
                "seed, the same for every arm; prompt the gloss (at most its first %zu tokens) and "
                "\"\\nlexicographer file:\", completion \" LEXNAME\" (the loss on it alone). %zu "
                "glosses of valid_labels.tsv at even indices tune, %zu at odd indices are held "
                "out. Each held-out gloss is answered with the label whose completion the model "
                "with its prefix finds likeliest (the sum of its tokens' log-probabilities after "
                "the prompt), of all %zu: ranking the labels measures the choice alone, where "
                "greedy decoding would also count misspelt labels as wrong. Always answering the "
                "tuning glosses' most frequent label scores %.1f %%. The paired column: the mean "
                "difference from the baseline over the seeds, in points, with its 95%% interval "
                "and verdict (the rule of the claims below).\n\n",
                o->cls_steps, o->cls_prefix, (double)o->cls_lr, s->cls_doc_tokens, s->cls_train,
                s->cls_test, s->cls_classes, 100.0 * s->cls_majority);

    if (base0->done && base0->speed[EXP_WALL].tok_s > 0) {
        fprintf(
            f,
            "### Generation speed by both clocks (seed %llu's models; a gain arm's also with "
            "its gains folded into its query projections)\n\n| arm | tokens/s | baseline paired | "
            "ratio (range over "
            "pairs) | tokens per CPU second | baseline paired | ratio (range) "
            "|\n|---|---|---|---|---|---|---|\n",
            (unsigned long long)o->seed);
        for (exp_arm_kind a = 0; a < ARM_COUNT; a++) {
            const exp_run *r0 = exp_run_at(s, 0, a);
            if (!r0->done || !(r0->speed[EXP_WALL].tok_s > 0))
                continue;
            for (int folded = 0; folded < 2; folded++) {
                const exp_speed_figs *sp = folded ? r0->folded : r0->speed;
                if (!(sp[EXP_WALL].tok_s > 0))
                    continue;
                fprintf(f, "| %s%s", exp_arm_names[a], folded ? ", gains folded" : "");
                for (int c = 0; c < EXP_CLOCKS; c++) {
                    const exp_speed_figs *q = &sp[c];
                    fprintf(f, " | %.1f | %.1f | %.3f (%.3f .. %.3f)", q->tok_s, q->base_tok_s,
                            q->ratio_med, q->ratio_lo, q->ratio_hi);
                }
                fprintf(f, " |\n");
            }
        }
        fprintf(f,
                "\nCPU seconds are the whole process's (the device's worker threads on a CPU "
                "device): with other "
                "jobs on the same cores they count the work and not the waiting. The speed claims "
                "below are "
                "judged by %s.\n\n",
                exp_judge_clock(s) == EXP_CPU ? "tokens per CPU second (a CPU device)"
                                              : "wall-clock tokens/s");
    }

    fprintf(f, "## Settled heads\n\n");
    fprintf(
        f,
        "A head has *settled* when its gain satisfies |g| >= threshold at every measured step of "
        "the last "
        "20%% of training (the measured steps s with 5 s >= 4 x %zu; measured every %zu steps and "
        "at the "
        "last) with no change of sign; at least %d measurements must fall in that window. For the "
        "dim "
        "arm, g is the mean of the head's G over its dimensions. A settled g > 0 sharpens the head "
        "(logits scaled by 1 + g > 1), g < 0 spreads it.\n\n",
        o->steps, o->measure_every, SETTLED_MIN_POINTS);
    fprintf(f,
            "| arm (seed %llu) | thr 0.01 | thr 0.05 | thr 0.1 | sharpen (thr 0.05, final g) | "
            "spread | entropy "
            "vs baseline agrees | entropy vs own gains off agrees | held since, median step (thr "
            "0.01 / 0.05) "
            "|\n|---|---|---|---|---|---|---|---|---|\n",
            (unsigned long long)o->seed);
    for (exp_arm_kind a = ARM_LINEAR; a < ARM_COUNT; a++) {
        const exp_run *r0 = exp_run_at(s, 0, a);
        if (!r0->done)
            continue;
        fprintf(f, "| %s", exp_arm_names[a]);
        for (size_t t = 0; t < EXP_THRESHOLDS; t++)
            if (r0->settled[t] < 0)
                fprintf(f, " | n/a");
            else
                fprintf(f, " | %d of %zu", r0->settled[t], exp_trained_heads(s, r0));
        fprintf(f, " | ");
        head_list(f, s, r0, 1);
        fprintf(f, " | ");
        head_list(f, s, r0, -1);
        size_t np, nn;
        if (base0->done && base0->m) {
            const float *ref = base0->entropy + (base0->m - 1) * s->LH;
            const size_t ap = entropy_agree(s, r0, ref, 1, &np),
                         an = entropy_agree(s, r0, ref, -1, &nn);
            fprintf(f, " | %zu of %zu", ap + an, np + nn);
        } else
            fprintf(f, " | n/a");
        if (r0->gain_off_entropy) {
            const size_t ap = entropy_agree(s, r0, r0->gain_off_entropy, 1, &np),
                         an = entropy_agree(s, r0, r0->gain_off_entropy, -1, &nn);
            fprintf(f, " | %zu of %zu", ap + an, np + nn);
        } else
            fprintf(f, " | n/a");
        const double since[2] = { median_since(s, r0, 0), median_since(s, r0, EXP_THR_MAIN) };
        for (int t = 0; t < 2; t++)
            if (isfinite(since[t]))
                fprintf(f, "%s%.0f", t ? " / " : " | ", since[t]);
            else
                fprintf(f, "%s—", t ? " / " : " | ");
        fprintf(f, " |\n");
    }
    fprintf(f,
            "\n*Held since*: the measured step from which a settled head's gain stayed beyond the "
            "threshold "
            "with its final sign (settled_since), the median over the heads settled at that "
            "threshold, of "
            "%zu steps: how quickly the gains split.\n",
            o->steps);
    fprintf(f,
            "\nThe cross-checks count the settled heads whose final attention entropy on %zu "
            "validation blocks "
            "moved the way their sign says (lower for a sharpening head, higher for a spreading "
            "one): against "
            "the same head of the baseline model (trained apart from the same initialization, so "
            "heads may "
            "have drifted apart), and against the same weights with every gain set to 0 (the "
            "gains' own "
            "effect).\n\n",
            s->probe_rows);
    if (exp_run_at(s, 0, ARM_SELECTED)->done) {
        const exp_run *sel = exp_run_at(s, 0, ARM_SELECTED);
        fprintf(f,
                "**Selection rule of the selected arm**: the heads whose |g| in the linear arm "
                "after step %zu "
                "(20%% of the steps, rounded) is in the top half (%zu of %zu; ties to the lower "
                "index): the "
                "heads whose gain moved most early, taken from the linear arm's own history (no "
                "extra run). "
                "Only they train a gain; the others stay at 0. Seed %llu selected: ",
                s->selected_at, exp_trained_heads(s, sel), s->LH, (unsigned long long)o->seed);
        bool first = true;
        for (size_t h = 0; h < s->LH; h++)
            if (sel->heads[h]) {
                fprintf(f, "%sL%zuH%zu", first ? "" : ", ", h / s->shape.heads, h % s->shape.heads);
                first = false;
            }
        fprintf(f, ".\n\n");
    }

    exp_claims_write(s, f);
    fprintf(f, "\n## Pictures\n\n");
    fprintf(f, "![validation loss](valid_loss.png)\n\n");
    for (exp_arm_kind a = ARM_LINEAR; a < ARM_COUNT; a++)
        if (exp_run_at(s, 0, a)->done)
            fprintf(f, "![gains of the %s arm](gains_%s.png)\n\n", exp_arm_names[a],
                    exp_arm_names[a]);
    fprintf(f, "![attention entropy per head](entropy.png)\n\n");
    if (s->heat_note[0])
        fprintf(f,
                "Attention maps: %s, baseline model beside the gain model, on the validation "
                "sentence's first "
                "%zu tokens.\n\n![attention maps](attention_maps.png)\n\n",
                s->heat_note, s->sentence_len);
    fprintf(f, "## Corpus and files\n\n");
    fprintf(f,
            "Corpus: the glosses of WordNet 3.0 (Princeton University, WordNet 3.0 license; Debian "
            "package "
            "wordnet-base), from tools/corpus/wordnet_corpus.py: %s. Tokenizer: %s. Each arm's "
            "folder holds "
            "its model (config.json + model.safetensors), gains.safetensors, loss.csv; "
            "results.json holds "
            "every figure of this report.\n",
            o->corpus, o->tokenizer);
}

static cJSON *num_array(const double *x, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, isfinite(x[i]) ? cJSON_CreateNumber(x[i]) : cJSON_CreateNull());
    return a;
}

static cJSON *add_num(cJSON *o, const char *name, double v)
{
    return isfinite(v) ? cJSON_AddNumberToObject(o, name, v) : cJSON_AddNullToObject(o, name);
}

static cJSON *run_json(exp_state *s, const exp_run *run, exp_arm_kind a)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "seed", (double)run->seed);
    cJSON_AddStringToObject(o, "dir", run->dir);
    add_num(o, "validation_loss", run->r.eval_losses[run->r.steps]);
    add_num(o, "validation_perplexity", run->ppl);
    cJSON *curve = cJSON_AddArrayToObject(o, "validation_curve");
    for (size_t t = 0; t <= run->r.steps; t++)
        if (isfinite(run->r.eval_losses[t])) {
            const double pt[2] = { (double)t, run->r.eval_losses[t] };
            cJSON_AddItemToArray(curve, num_array(pt, 2));
        }
    add_num(o, "train_seconds", run->seconds);
    static const char *const clock_names[EXP_CLOCKS] = { "wall", "cpu" };
    for (int c = 0; c < 2 * EXP_CLOCKS; c++) {
        static const char *const keys[4] = { "speed_wall", "speed_cpu", "speed_folded_wall",
                                             "speed_folded_cpu" };
        const exp_speed_figs *q = c < EXP_CLOCKS ? &run->speed[c] : &run->folded[c - EXP_CLOCKS];
        if (!(q->tok_s > 0))
            continue;
        cJSON *sp = cJSON_AddObjectToObject(o, keys[c]);
        cJSON_AddStringToObject(sp, "clock", clock_names[c % EXP_CLOCKS]);
        add_num(sp, "tokens_per_s", q->tok_s);
        add_num(sp, "baseline_tokens_per_s", q->base_tok_s);
        const double r3[3] = { q->ratio_lo, q->ratio_med, q->ratio_hi };
        cJSON_AddItemToObject(sp, "ratio_min_median_max", num_array(r3, 3));
    }
    add_num(o, "probe_accuracy", run->probe_acc);
    add_num(o, "probe_majority_accuracy", run->probe_majority);
    if (run->cls_done) {
        add_num(o, "classification_accuracy", run->cls_acc);
        cJSON_AddNumberToObject(o, "classification_correct", (double)run->cls_correct);
        add_num(o, "classification_loss_before", run->cls_loss_before);
        add_num(o, "classification_loss_after", run->cls_loss_after);
        add_num(o, "classification_loss_scored", run->cls_scored_loss);
        add_num(o, "classification_seconds", run->cls_seconds);
    }
    cJSON *meas = cJSON_AddObjectToObject(o, "per_head");
    double *steps = malloc((run->m ? run->m : 1) * sizeof(double)),
           *row = malloc(s->LH * sizeof(double));
    for (size_t i = 0; steps && i < run->m; i++)
        steps[i] = (double)run->steps[i];
    cJSON_AddItemToObject(meas, "steps", num_array(steps, steps ? run->m : 0));
    const char *names[3] = { "gain", "entropy", "top_k_mass" };
    const float *src[3] = { run->gain, run->entropy, run->topk };
    for (int q = 0; q < 3 && row; q++) {
        cJSON *rows = cJSON_AddArrayToObject(meas, names[q]);
        for (size_t i = 0; i < run->m; i++) {
            for (size_t h = 0; h < s->LH; h++)
                row[h] = src[q][i * s->LH + h];
            cJSON_AddItemToArray(rows, num_array(row, s->LH));
        }
    }
    if (run->gain_off_entropy && row) {
        for (size_t h = 0; h < s->LH; h++)
            row[h] = run->gain_off_entropy[h];
        cJSON_AddItemToObject(meas, "entropy_gains_off", num_array(row, s->LH));
    }
    if (a != ARM_BASELINE) {
        cJSON *st = cJSON_AddObjectToObject(o, "settled");
        for (size_t t = 0; t < EXP_THRESHOLDS; t++) {
            char key[16];
            snprintf(key, sizeof(key), "%g", (double)exp_thresholds[t]);
            if (run->settled[t] < 0)
                cJSON_AddNullToObject(st, key);
            else
                cJSON_AddNumberToObject(st, key, run->settled[t]);
        }
        cJSON *since = cJSON_AddObjectToObject(o, "held_since_median_step");
        for (size_t t = 0; t < EXP_THRESHOLDS; t++) {
            char key[16];
            snprintf(key, sizeof(key), "%g", (double)exp_thresholds[t]);
            add_num(since, key, median_since(s, run, t));
        }
        cJSON_AddNumberToObject(o, "trained_heads", (double)exp_trained_heads(s, run));
        for (size_t h = 0; row && h < s->LH; h++)
            row[h] = run->sign[h];
        cJSON_AddItemToObject(o, "settled_sign_thr_0.05", num_array(row, row ? s->LH : 0));
    }
    if (run->heads) {
        for (size_t h = 0; row && h < s->LH; h++)
            row[h] = run->heads[h];
        cJSON_AddItemToObject(o, "selected_heads", num_array(row, row ? s->LH : 0));
    }
    free(steps);
    free(row);
    return o;
}

static char *json_text(exp_state *s)
{
    const exp_options *o = &s->o;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "command", o->command_line);
    cJSON_AddStringToObject(root, "date", s->date);
    cJSON_AddStringToObject(root, "device", pfx_runtime_device(s->rt)->device_name);
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddNumberToObject(m, "layers", (double)s->shape.layers);
    cJSON_AddNumberToObject(m, "heads", (double)s->shape.heads);
    cJSON_AddNumberToObject(m, "hidden", (double)s->shape.hidden);
    cJSON_AddNumberToObject(m, "vocab", (double)s->shape.vocab);
    cJSON_AddNumberToObject(m, "block", (double)o->block);
    cJSON_AddNumberToObject(m, "parameters", (double)s->shape.parameters);
    cJSON *t = cJSON_AddObjectToObject(root, "training");
    cJSON_AddNumberToObject(t, "steps", (double)o->steps);
    cJSON_AddNumberToObject(t, "batch", (double)o->batch);
    cJSON_AddNumberToObject(t, "tokens_per_step", (double)(o->batch * o->block));
    cJSON_AddNumberToObject(t, "lr", o->lr);
    cJSON_AddNumberToObject(t, "gain_lr", o->lr / 2);
    cJSON_AddNumberToObject(t, "uniform_arm_gain_init", o->uniform_init);
    cJSON_AddNumberToObject(t, "decay_arm_gain_lr_decay", o->gain_lr_decay);
    cJSON_AddNumberToObject(t, "warmup", (double)o->warmup);
    cJSON_AddNumberToObject(t, "seed", (double)o->seed);
    cJSON_AddNumberToObject(t, "seeds", (double)o->seeds);
    cJSON_AddNumberToObject(root, "measure_every", (double)o->measure_every);
    cJSON_AddNumberToObject(root, "top_k", (double)o->top_k);
    cJSON_AddNumberToObject(root, "seconds", s->seconds_total);
    cJSON_AddNumberToObject(root, "seconds_generation", s->seconds_speed);
    cJSON_AddNumberToObject(root, "seconds_probe", s->seconds_probe);
    cJSON_AddNumberToObject(root, "seconds_classification", s->seconds_classify);
    cJSON_AddStringToObject(
        root, "settled_definition",
        "|g| >= threshold at every measured step s with 5 s >= 4 steps, one sign, at least 2 "
        "measurements");
    cJSON_AddStringToObject(
        root, "selection_rule",
        "heads whose |g| in the linear arm after round(0.2 steps) is in the top half");
    if (exp_run_at(s, 0, ARM_SELECTED)->done)
        cJSON_AddNumberToObject(root, "selection_step", (double)s->selected_at);
    cJSON *probe = cJSON_AddObjectToObject(root, "probe");
    cJSON_AddNumberToObject(probe, "train_documents", (double)s->probe_train);
    cJSON_AddNumberToObject(probe, "test_documents", (double)s->probe_test);
    cJSON_AddNumberToObject(probe, "classes", (double)s->probe_classes);
    add_num(root, "unigram_perplexity", s->unigram_ppl);
    cJSON_AddNumberToObject(root, "unigram_tokens", (double)s->unigram_tokens);
    if (s->cls_classes) {
        cJSON *c = cJSON_AddObjectToObject(root, "classification");
        cJSON_AddNumberToObject(c, "steps", (double)o->cls_steps);
        cJSON_AddNumberToObject(c, "batch", 8);
        cJSON_AddNumberToObject(c, "prefix_len", (double)o->cls_prefix);
        cJSON_AddNumberToObject(c, "lr", o->cls_lr);
        cJSON_AddNumberToObject(c, "tuning_examples", (double)s->cls_train);
        cJSON_AddNumberToObject(c, "held_out_examples", (double)s->cls_test);
        cJSON_AddNumberToObject(c, "labels", (double)s->cls_classes);
        add_num(c, "majority_accuracy", s->cls_majority);
        cJSON_AddStringToObject(c, "answer",
                                "the label whose completion has the largest log-likelihood");
    }
    cJSON *arms = cJSON_AddObjectToObject(root, "arms");
    for (exp_arm_kind a = 0; a < ARM_COUNT; a++) {
        if (!exp_run_at(s, 0, a)->done)
            continue;
        cJSON *arm = cJSON_AddObjectToObject(arms, exp_arm_names[a]);
        const stat p = arm_stat(s, a, M_PPL), q = arm_stat(s, a, M_PROBE);
        add_num(arm, "validation_perplexity_mean", p.mean);
        add_num(arm, "validation_perplexity_ci95", p.ci);
        add_num(arm, "probe_accuracy_mean", q.mean);
        add_num(arm, "probe_accuracy_ci95", q.ci);
        const stat c = arm_stat(s, a, M_CLS);
        add_num(arm, "classification_accuracy_percent_mean", c.mean);
        add_num(arm, "classification_accuracy_percent_ci95", c.ci);
        if (a != ARM_BASELINE && s->cls_classes) {
            double ma, mb;
            const verdict v = exp_cls_verdict(s, a, ARM_BASELINE, &ma, &mb);
            add_num(arm, "classification_minus_baseline_mean", v.mean);
            add_num(arm, "classification_minus_baseline_ci95", v.half);
            cJSON_AddNumberToObject(arm, "classification_minus_baseline_seeds", (double)v.n);
            cJSON_AddStringToObject(arm, "classification_above_baseline", verdict_name(v.kind));
        }
        add_num(arm, "claimed_classification_percent", claim_cls[a]);
        if (a != ARM_BASELINE) {
            double ma, mb;
            const verdict v = exp_ppl_verdict(s, a, ARM_BASELINE, &ma, &mb);
            add_num(arm, "perplexity_minus_baseline_mean", v.mean);
            add_num(arm, "perplexity_minus_baseline_ci95", v.half);
            cJSON_AddNumberToObject(arm, "perplexity_minus_baseline_seeds", (double)v.n);
            cJSON_AddStringToObject(arm, "perplexity_below_baseline", verdict_name(v.kind));
        }
        add_num(arm, "claimed_perplexity", claim_ppl[a]);
        add_num(arm, "claimed_tokens_per_s", claim_tok[a]);
        cJSON *runs = cJSON_AddArrayToObject(arm, "runs");
        for (size_t k = 0; k < o->seeds; k++)
            if (exp_run_at(s, k, a)->done)
                cJSON_AddItemToArray(runs, run_json(s, exp_run_at(s, k, a), a));
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

int exp_report_write(exp_state *s)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/report.md", s->o.out);
    pfx_output_file *f = NULL;
    if (pfx_output_open(path, &f) != PFX_SUCCESS)
        goto fail;
    write_md(s, pfx_output_stream(f));
    if (pfx_output_commit(&f) != PFX_SUCCESS)
        goto fail;
    char *text = json_text(s);
    snprintf(path, sizeof(path), "%s/results.json", s->o.out);
    if (!text || pfx_output_open(path, &f) != PFX_SUCCESS) {
        free(text);
        goto fail;
    }
    fprintf(pfx_output_stream(f), "%s\n", text);
    free(text);
    if (pfx_output_commit(&f) != PFX_SUCCESS)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "prefixcl experiment gain: writing %s: %s\n", path, pfx_last_error(NULL));
    return -1;
}
