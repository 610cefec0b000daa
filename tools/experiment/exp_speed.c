/* Generation speed (exp.h), of every seed's models: greedy decoding of a
 * fixed validation prompt, batch 1, the baseline's model without gains,
 * each gain arm's model with its trained gains (an adapter bank entry of
 * prefix length 0 read from its gains.safetensors) and the same model with
 * its gains folded into its query projections (pfx_model_fold_gains: no
 * gain arithmetic at all), in one run with the repetitions interleaved
 * (baseline, arm, folded, baseline, ...) so that a change of the machine's
 * load falls on all three; medians. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "exp.h"
#include "common/tool_util.h"

typedef struct decoder {
    pfx_context *ctx; /* keeps its model */
    pfx_kv_cache *cache;
    pfx_adapter_bank *bank;
    int32_t entry;
} decoder;

static void decoder_free(decoder *d)
{
    pfx_adapter_bank_destroy(&d->bank);
    pfx_kv_cache_destroy(&d->cache);
    pfx_context_destroy(&d->ctx);
}

/* The arm's model with its gains applied (an adapter bank entry), or with
 * `folded` its gains folded into its query projections and no gain at all. */
static int decoder_open(exp_state *s, const exp_run *run, exp_arm_kind a, bool folded, decoder *d)
{
    memset(d, 0, sizeof(*d));
    d->entry = -1;
    if (!(d->ctx = exp_model_load(s, run, 1)))
        return -1;
    if (pfx_kv_cache_create(pfx_context_model(d->ctx), 1, s->o.block, &d->cache) != PFX_SUCCESS)
        goto fail;
    if (folded) {
        exp_gains g;
        if (exp_gains_load(s, run, a, &g))
            goto fail;
        const pfx_status st = pfx_model_fold_gains(pfx_context_model(d->ctx), &g.prefix);
        exp_gains_free(&g);
        if (st != PFX_SUCCESS)
            goto fail;
    } else if (a != ARM_BASELINE) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/gains.safetensors", run->dir);
        if (pfx_adapter_bank_create(pfx_context_model(d->ctx), 1, &d->bank) != PFX_SUCCESS ||
            pfx_adapter_bank_add(d->bank, path, &d->entry) != PFX_SUCCESS)
            goto fail;
    }
    return 0;
fail:
    fprintf(stderr, "prefixcl experiment gain: the %s arm's decoder: %s\n", exp_arm_names[a],
            pfx_last_error(s->rt));
    decoder_free(d);
    return -1;
}

/* Tokens a second of one greedy generation by each clock (new tokens over
 * the whole call, prefill included); false on failure. */
static bool generate_once(exp_state *s, decoder *d, size_t new_tokens, int32_t *out,
                          double tok[EXP_CLOCKS])
{
    pfx_request req = {
        .prompt = s->sentence, .prompt_len = s->sentence_len, .adapter = d->entry, .out = out
    };
    const pfx_sampling greedy = { .temperature = 0.0f, .max_new_tokens = new_tokens };
    const double w0 = tool_now_s(), c0 = tool_cpu_s();
    if (pfx_generate(d->ctx, d->cache, d->bank, &req, 1, &greedy, NULL, NULL, NULL) !=
        PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: generating: %s\n", pfx_last_error(s->rt));
        return false;
    }
    tok[EXP_WALL] = (double)req.out_len / (tool_now_s() - w0);
    tok[EXP_CPU] = (double)req.out_len / (tool_cpu_s() - c0);
    return true;
}

/* The medians and the range of the paired ratios of `reps` pairs (ta and
 * tb unchanged; ratio and sorted are scratch of reps). */
static void summarize(const double *ta, const double *tb, double *ratio, double *sorted,
                      size_t reps, exp_speed_figs *f)
{
    for (size_t r = 0; r < reps; r++)
        ratio[r] = ta[r] / tb[r];
    memcpy(sorted, ta, reps * sizeof(double));
    f->tok_s = tool_median(sorted, reps); /* sorts */
    memcpy(sorted, tb, reps * sizeof(double));
    f->base_tok_s = tool_median(sorted, reps);
    f->ratio_med = tool_median(ratio, reps); /* sorts: the ends are the range */
    f->ratio_lo = ratio[0];
    f->ratio_hi = ratio[reps - 1];
}

size_t exp_gen_tokens(const exp_state *s)
{
    const size_t room = s->o.block - s->sentence_len;
    return s->o.gen_tokens < room ? s->o.gen_tokens : room;
}

/* The figures of seed index k's models. */
static int speed_of_seed(exp_state *s, size_t k)
{
    exp_run *base = exp_run_at(s, k, ARM_BASELINE);
    const size_t reps = s->o.gen_reps, n = exp_gen_tokens(s);
    if (!base->done || n == 0)
        return 0;
    decoder b;
    if (decoder_open(s, base, ARM_BASELINE, false, &b))
        return -1;
    int32_t *out = malloc(n * sizeof(int32_t));
    /* [clock][rep]: the arm's and the baseline's figures; every baseline one */
    double *ta = malloc(EXP_CLOCKS * reps * sizeof(double)),
           *tb = malloc(EXP_CLOCKS * reps * sizeof(double)),
           *tf = malloc(EXP_CLOCKS * reps * sizeof(double));
    double *ratio = malloc(reps * sizeof(double)), *sorted = malloc(reps * sizeof(double));
    double *all_base = malloc(EXP_CLOCKS * reps * ARM_COUNT * sizeof(double));
    size_t n_all = 0;
    double tok[EXP_CLOCKS];
    int rc = out && ta && tb && tf && ratio && sorted && all_base ? 0 : -1;
    /* a first call of each model compiles and sizes what it needs: untimed */
    if (rc == 0 && !generate_once(s, &b, n, out, tok))
        rc = -1;
    for (exp_arm_kind a = ARM_LINEAR; a < ARM_COUNT && rc == 0; a++) {
        exp_run *run = exp_run_at(s, k, a);
        if (!run->done)
            continue;
        decoder d, fd;
        if (decoder_open(s, run, a, false, &d)) {
            rc = -1;
            break;
        }
        if (decoder_open(s, run, a, true, &fd)) {
            decoder_free(&d);
            rc = -1;
            break;
        }
        if (!generate_once(s, &d, n, out, tok) || !generate_once(s, &fd, n, out, tok))
            rc = -1;
        for (size_t r = 0; r < reps && rc == 0; r++) {
            double tbr[EXP_CLOCKS], tar[EXP_CLOCKS], tfr[EXP_CLOCKS];
            if (cli_stop) {
                rc = -1;
                break;
            }
            if (!generate_once(s, &b, n, out, tbr) || !generate_once(s, &d, n, out, tar) ||
                !generate_once(s, &fd, n, out, tfr)) {
                rc = -1;
                break;
            }
            for (int c = 0; c < EXP_CLOCKS; c++) {
                tb[c * reps + r] = tbr[c];
                ta[c * reps + r] = tar[c];
                tf[c * reps + r] = tfr[c];
                all_base[c * reps * ARM_COUNT + n_all] = tbr[c];
            }
            n_all++;
        }
        decoder_free(&d);
        decoder_free(&fd);
        if (rc)
            break;
        for (int c = 0; c < EXP_CLOCKS; c++) {
            summarize(tf + c * reps, tb + c * reps, ratio, sorted, reps, &run->folded[c]);
            summarize(ta + c * reps, tb + c * reps, ratio, sorted, reps, &run->speed[c]);
        }
        if (!s->o.quiet)
            printf(
                "  tokens/s: seed %llu %-8s %.1f, baseline %.1f (ratio %.3f, %.3f .. %.3f over %zu "
                "pairs); per CPU second "
                "%.1f and %.1f (ratio %.3f, %.3f .. %.3f); gains folded %.1f per CPU second\n",
                (unsigned long long)run->seed, exp_arm_names[a], run->speed[EXP_WALL].tok_s,
                run->speed[EXP_WALL].base_tok_s, run->speed[EXP_WALL].ratio_med,
                run->speed[EXP_WALL].ratio_lo, run->speed[EXP_WALL].ratio_hi, reps,
                run->speed[EXP_CPU].tok_s, run->speed[EXP_CPU].base_tok_s,
                run->speed[EXP_CPU].ratio_med, run->speed[EXP_CPU].ratio_lo,
                run->speed[EXP_CPU].ratio_hi, run->folded[EXP_CPU].tok_s);
    }
    /* the baseline's own row: every repetition of it, all pairings (or its
     * own repetitions when it is the only arm) */
    for (size_t r = 0; rc == 0 && n_all == 0 && r < reps; r++) {
        if (!generate_once(s, &b, n, out, tok))
            rc = -1;
        for (int c = 0; c < EXP_CLOCKS && rc == 0; c++)
            all_base[c * reps * ARM_COUNT + r] = tok[c];
    }
    if (rc == 0) {
        const size_t count = n_all ? n_all : reps;
        for (int c = 0; c < EXP_CLOCKS; c++) {
            exp_speed_figs *f = &base->speed[c];
            f->tok_s = f->base_tok_s = tool_median(all_base + c * reps * ARM_COUNT, count);
            f->ratio_lo = f->ratio_med = f->ratio_hi = 1.0;
        }
    }
    decoder_free(&b);
    free(out);
    free(ta);
    free(tb);
    free(tf);
    free(ratio);
    free(sorted);
    free(all_base);
    return rc;
}

int exp_speed(exp_state *s)
{
    if (!s->o.quiet) {
        printf("generation speed\n");
        fflush(stdout);
    }
    for (size_t k = 0; k < s->o.seeds; k++)
        if (speed_of_seed(s, k))
            return -1;
    return 0;
}
