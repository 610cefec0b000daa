/* The claims section of report.md (exp.h): each published claim beside the
 * figures measured and a verdict by the rule of verdict.h, on the paired
 * per-seed figures, saying the seeds and steps it rests on. */
#include <math.h>
#include <stdio.h>

#include "exp.h"
#include "verdict.h"

/* Seeds are at most 30 (--seeds). */
#define MAX_PAIRS 64

size_t exp_trained_heads(const exp_state *s, const exp_run *run)
{
    if (!run->heads)
        return s->LH;
    size_t n = 0;
    for (size_t h = 0; h < s->LH; h++)
        n += run->heads[h] != 0;
    return n;
}

/* "arm a below (sign -1) or above (+1) arm b" by perplexity or by
 * classification accuracy (percent), on the seeds that have both. */
static verdict arm_verdict(exp_state *s, exp_arm_kind a, exp_arm_kind b, bool cls, int sign,
                           double *mean_a, double *mean_b)
{
    double x[MAX_PAIRS], y[MAX_PAIRS];
    size_t n = 0;
    for (size_t k = 0; k < s->o.seeds && n < MAX_PAIRS; k++) {
        const exp_run *p = exp_run_at(s, k, a), *q = exp_run_at(s, k, b);
        if (cls ? p->cls_done && q->cls_done : p->done && q->done) {
            x[n] = cls ? 100.0 * p->cls_acc : p->ppl;
            y[n++] = cls ? 100.0 * q->cls_acc : q->ppl;
        }
    }
    *mean_a = *mean_b = NAN;
    for (size_t k = 0; k < n; k++) {
        *mean_a = (k ? *mean_a : 0.0) + x[k] / (double)n;
        *mean_b = (k ? *mean_b : 0.0) + y[k] / (double)n;
    }
    /* accuracies are shares of one held-out set: exact, no float32 noise */
    return verdict_paired(x, y, n, sign, cls ? 0.0 : VERDICT_F32_NOISE);
}

verdict exp_ppl_verdict(exp_state *s, exp_arm_kind a, exp_arm_kind b, double *mean_a,
                        double *mean_b)
{
    return arm_verdict(s, a, b, false, -1, mean_a, mean_b);
}

verdict exp_cls_verdict(exp_state *s, exp_arm_kind a, exp_arm_kind b, double *mean_a,
                        double *mean_b)
{
    return arm_verdict(s, a, b, true, 1, mean_a, mean_b);
}

/* The classification claims: gains raise the accuracy, selected heads
 * further. */
static void cls_claims(exp_state *s, FILE *f)
{
    static const char *const claim[2] = {
        "Training with a learnable gain per head raises classification accuracy (89.3 -> 90.7 %)",
        "Gains kept only on selected heads raise it further (91.2 %)"
    };
    static const exp_arm_kind arm[2][2] = { { ARM_LINEAR, ARM_BASELINE },
                                            { ARM_SELECTED, ARM_LINEAR } };
    for (int i = 0; i < 2; i++) {
        char why[512];
        double ma, mb;
        const verdict v = exp_cls_verdict(s, arm[i][0], arm[i][1], &ma, &mb);
        fprintf(f, "- *%s.* ", claim[i]);
        if (!s->o.cls_steps)
            fprintf(f, "Not measured: --classify-steps 0.\n");
        else if (v.kind == VERDICT_MISSING)
            fprintf(f, "Cannot be checked: no %s and %s arms classified together.\n",
                    exp_arm_names[arm[i][0]], exp_arm_names[arm[i][1]]);
        else
            fprintf(f,
                    "Measured %.1f %% (%s) against %.1f %% (%s), each final model prefix-tuned "
                    "%zu steps on the lexicographer files: the measurement %s.\n",
                    ma, exp_arm_names[arm[i][0]], mb, exp_arm_names[arm[i][1]], s->o.cls_steps,
                    verdict_text(&v, "%+.1f", s->o.steps, why, sizeof(why)));
    }
}

/* The clock the speed claims are judged by: CPU time on a CPU device
 * (where other jobs' contention would otherwise decide), else wall time. */
int exp_judge_clock(const exp_state *s)
{
    return pfx_runtime_device(s->rt)->type == PFX_DEVICE_CPU ? EXP_CPU : EXP_WALL;
}

/* Arm a's tokens/s against its seed's baseline, seed by seed, by `clock`
 * (`folded`: the arm's model with its gains folded in); the claim that a
 * is faster (sign +1) or slower (-1). *ratio: mean a over mean baseline. */
static verdict speed_verdict(exp_state *s, exp_arm_kind a, int clock, bool folded, int sign,
                             double *ratio)
{
    double x[MAX_PAIRS], y[MAX_PAIRS], sx = 0.0, sy = 0.0;
    size_t n = 0;
    for (size_t k = 0; k < s->o.seeds && n < MAX_PAIRS; k++) {
        const exp_run *run = exp_run_at(s, k, a);
        const exp_speed_figs *f = folded ? &run->folded[clock] : &run->speed[clock];
        if (run->done && f->tok_s > 0) {
            sx += x[n] = f->tok_s;
            sy += y[n++] = f->base_tok_s;
        }
    }
    *ratio = n ? sx / sy : NAN;
    return verdict_paired(x, y, n, sign, 0.0);
}

/* Arm a's model with its gains folded against the same model applying
 * them, seed by seed (the claim: folded is faster). */
static verdict fold_verdict(exp_state *s, exp_arm_kind a, int clock)
{
    double x[MAX_PAIRS], y[MAX_PAIRS];
    size_t n = 0;
    for (size_t k = 0; k < s->o.seeds && n < MAX_PAIRS; k++) {
        const exp_run *run = exp_run_at(s, k, a);
        if (run->done && run->folded[clock].tok_s > 0 && run->speed[clock].tok_s > 0) {
            x[n] = run->folded[clock].tok_s;
            y[n++] = run->speed[clock].tok_s;
        }
    }
    return verdict_paired(x, y, n, 1, 0.0);
}

/* Per seed: the fewer of the linear arm's heads settled positive and
 * negative (x), and the share of its heads settled (share); how many. */
static size_t settled_figures(exp_state *s, double *x, double *share)
{
    size_t n = 0;
    for (size_t k = 0; k < s->o.seeds && n < MAX_PAIRS; k++) {
        const exp_run *run = exp_run_at(s, k, ARM_LINEAR);
        if (!run->done || run->settled[EXP_THR_MAIN] < 0)
            continue;
        size_t up = 0, down = 0;
        for (size_t h = 0; h < s->LH; h++) {
            up += run->sign[h] > 0;
            down += run->sign[h] < 0;
        }
        x[n] = (double)(up < down ? up : down);
        share[n++] = (double)run->settled[EXP_THR_MAIN] / (double)exp_trained_heads(s, run);
    }
    return n;
}

void exp_claims_write(exp_state *s, FILE *f)
{
    const size_t steps = s->o.steps;
    char why[512];
    fprintf(f, "## The claims\n\n");
    fprintf(f,
            "Each verdict rests on the paired per-seed figures (the arms of a seed share the "
            "initialization and the data order): the mean difference and its 95%% interval "
            "(Student's t). A claim is *inconclusive* when the interval holds 0 or the difference "
            "is float32 noise (below %.1e of the figures); one seed gives figures and no "
            "verdict.\n\n",
            VERDICT_F32_NOISE);
    double ma, mb;
    verdict v = exp_ppl_verdict(s, ARM_LINEAR, ARM_BASELINE, &ma, &mb);
    fprintf(f,
            "- *Training with a learnable gain per head lowers validation perplexity (4.21 -> "
            "4.08).* Measured %.3f without and %.3f with (linear): the measurement %s.\n",
            mb, ma, verdict_text(&v, "%+.3f", steps, why, sizeof(why)));
    v = exp_ppl_verdict(s, ARM_SELECTED, ARM_LINEAR, &ma, &mb);
    fprintf(f,
            "- *Gains kept only on selected heads lower it further (4.02).* Measured %.3f "
            "(selected) against %.3f (linear): the measurement %s.\n",
            ma, mb, verdict_text(&v, "%+.3f", steps, why, sizeof(why)));
    cls_claims(s, f);
    const int jc = exp_judge_clock(s);
    const char *clock = jc == EXP_CPU ? "tokens per CPU second" : "wall-clock tokens/s";
    double ratio;
    v = speed_verdict(s, ARM_LINEAR, jc, false, -1, &ratio);
    fprintf(f,
            "- *Generation is slightly slower with gains (1220 vs 1250 tokens/s, ratio 0.976).* "
            "Measured ratio %.3f (%s, linear against baseline): the measurement %s.\n",
            ratio, clock, verdict_text(&v, "%+.1f", steps, why, sizeof(why)));
    v = speed_verdict(s, ARM_SELECTED, jc, false, 1, &ratio);
    fprintf(f,
            "- *Generation with gains on selected heads is faster than without gains (1280 vs "
            "1250, ratio 1.024).* Measured ratio %.3f (%s): the measurement %s. (The gain is a "
            "scale on each head's logits: it changes no work, so no speed-up is expected.)\n",
            ratio, clock, verdict_text(&v, "%+.1f", steps, why, sizeof(why)));
    v = speed_verdict(s, ARM_LINEAR, jc, true, 1, &ratio);
    const verdict vf = fold_verdict(s, ARM_LINEAR, jc);
    char why2[512];
    fprintf(f,
            "- *Gains can be fixed at inference* (the seed's question, no published figure): the "
            "linear arm's model with its gains folded into its query projections (no gain "
            "arithmetic; the gain model's logits, `prefixcl export --fold-gains`) generates at "
            "ratio %.3f of the baseline (%s). Folded is faster than the baseline: the "
            "measurement %s; folded is faster than the same model applying its gains: the "
            "measurement %s.\n",
            ratio, clock, verdict_text(&v, "%+.1f", steps, why, sizeof(why)),
            verdict_text(&vf, "%+.1f", steps, why2, sizeof(why2)));
    static const struct {
        exp_arm_kind arm;
        const char *idea;
    } ideas[2] = {
        { ARM_UNIFORM,
          "a uniform start of the gains instead of 0 (the uniform arm, --uniform-init)" },
        { ARM_DECAY,
          "a faster decay of the gains' learning rate (the decay arm, --gain-lr-decay)" },
    };
    for (int i = 0; i < 2; i++) {
        if (!exp_run_at(s, 0, ideas[i].arm)->done)
            continue;
        v = exp_ppl_verdict(s, ideas[i].arm, ARM_LINEAR, &ma, &mb);
        fprintf(f,
                "- *The seed's tuning idea: %s lowers perplexity* (no published figure). "
                "Measured %.3f (%s) against %.3f (linear): the measurement %s.\n",
                ideas[i].idea, ma, exp_arm_names[ideas[i].arm], mb,
                verdict_text(&v, "%+.3f", steps, why, sizeof(why)));
    }
    double split[MAX_PAIRS], share[MAX_PAIRS];
    const size_t n = settled_figures(s, split, share);
    if (n) {
        v = verdict_range(split, n, 0.5, INFINITY);
        fprintf(f,
                "- *The gains split: some heads sharpen (g > 0), some spread (g < 0).* The fewer "
                "of the linear arm's heads settled on either side (thr 0.05), at least one: the "
                "measurement %s.\n",
                verdict_text(&v, "%.2f", steps, why, sizeof(why)));
        v = verdict_range(share, n, 0.60, 0.70);
        fprintf(f,
                "- *About 60-70%% of heads settle on a stable gain, the rest stay near 0.* The "
                "share of the linear arm's heads settled (thr 0.05): the measurement %s.\n",
                verdict_text(&v, "%.2f", steps, why, sizeof(why)));
    } else
        fprintf(f, "- *The gains split; 60-70%% of heads settle.* Cannot be checked: %s.\n",
                exp_run_at(s, 0, ARM_LINEAR)->done
                    ? "the window of the last 20% holds too few measurements"
                    : "no linear arm");
}
