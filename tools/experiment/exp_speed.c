/* Generation speed (exp.h): greedy decoding of a fixed validation prompt,
 * batch 1, the baseline's model without gains and each gain arm's model
 * with its trained gains (an adapter bank entry of prefix length 0 read
 * from its gains.safetensors), in one run with the repetitions interleaved
 * (baseline, arm, baseline, arm, ...) so that a change of the machine's
 * load falls on both; medians. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exp.h"
#include "tool_util.h"

typedef struct decoder {
    pfx_model *model;
    pfx_kv_cache *cache;
    pfx_adapter_bank *bank;
    int32_t entry;
} decoder;

static void decoder_free(decoder *d)
{
    pfx_adapter_bank_destroy(&d->bank);
    pfx_kv_cache_destroy(&d->cache);
    pfx_model_destroy(&d->model);
}

static int decoder_open(exp_state *s, const exp_run *run, exp_arm_kind a, decoder *d)
{
    memset(d, 0, sizeof(*d));
    d->entry = -1;
    if (!(d->model = exp_model_load(s, run, 1)))
        return -1;
    if (pfx_kv_cache_create(d->model, 1, s->o.block, &d->cache) != PFX_SUCCESS)
        goto fail;
    if (a != ARM_BASELINE) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/gains.safetensors", run->dir);
        if (pfx_adapter_bank_create(d->model, 1, &d->bank) != PFX_SUCCESS ||
            pfx_adapter_bank_add(d->bank, path, &d->entry) != PFX_SUCCESS)
            goto fail;
    }
    return 0;
fail:
    fprintf(stderr, "prefixcl experiment gain: the %s arm's decoder: %s\n", exp_arm_names[a], pfx_last_error(s->rt));
    decoder_free(d);
    return -1;
}

/* Tokens a second of one greedy generation (new tokens over the wall time
 * of the whole call, prefill included); < 0 on failure. */
static double generate_once(exp_state *s, decoder *d, size_t new_tokens, int32_t *out)
{
    pfx_request req = { .prompt = s->sentence, .prompt_len = s->sentence_len, .adapter = d->entry, .out = out };
    const pfx_sampling greedy = { .temperature = 0.0f, .max_new_tokens = new_tokens };
    const double t0 = tool_now_s();
    if (pfx_generate(d->model, d->cache, d->bank, &req, 1, &greedy, NULL, NULL, NULL) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: generating: %s\n", pfx_last_error(s->rt));
        return -1.0;
    }
    return (double)req.out_len / (tool_now_s() - t0);
}

size_t exp_gen_tokens(const exp_state *s)
{
    const size_t room = s->o.block - s->sentence_len;
    return s->o.gen_tokens < room ? s->o.gen_tokens : room;
}

int exp_speed(exp_state *s)
{
    exp_run *base = exp_run_at(s, 0, ARM_BASELINE);
    const size_t reps = s->o.gen_reps, n = exp_gen_tokens(s);
    if (!base->done || n == 0)
        return 0;
    decoder b;
    if (decoder_open(s, base, ARM_BASELINE, &b))
        return -1;
    int32_t *out = malloc(n * sizeof(int32_t));
    double *tb = malloc(reps * sizeof(double)), *ta = malloc(reps * sizeof(double));
    double *ratio = malloc(reps * sizeof(double)), *all_base = malloc(reps * ARM_COUNT * sizeof(double));
    size_t n_all = 0;
    int rc = out && tb && ta && ratio && all_base ? 0 : -1;
    /* a first call of each model compiles and sizes what it needs: untimed */
    if (rc == 0 && generate_once(s, &b, n, out) < 0)
        rc = -1;
    for (exp_arm_kind a = ARM_LINEAR; a < ARM_COUNT && rc == 0; a++) {
        exp_run *run = exp_run_at(s, 0, a);
        if (!run->done)
            continue;
        decoder d;
        if (decoder_open(s, run, a, &d)) {
            rc = -1;
            break;
        }
        if (generate_once(s, &d, n, out) < 0)
            rc = -1;
        for (size_t r = 0; r < reps && rc == 0; r++) {
            tb[r] = generate_once(s, &b, n, out);
            ta[r] = generate_once(s, &d, n, out);
            if (tb[r] < 0 || ta[r] < 0)
                rc = -1;
            else {
                ratio[r] = ta[r] / tb[r];
                all_base[n_all++] = tb[r];
            }
        }
        decoder_free(&d);
        if (rc)
            break;
        run->tok_s = tool_median(ta, reps);
        run->base_tok_s = tool_median(tb, reps);
        run->ratio_med = tool_median(ratio, reps); /* sorts: the ends are the range */
        run->ratio_lo = ratio[0];
        run->ratio_hi = ratio[reps - 1];
        if (!s->o.quiet)
            printf("  tokens/s: %-8s %.1f, baseline %.1f (ratio %.3f, %.3f .. %.3f over %zu pairs)\n",
                   exp_arm_names[a], run->tok_s, run->base_tok_s, run->ratio_med, run->ratio_lo, run->ratio_hi,
                   reps);
    }
    /* the baseline's own row: every repetition of it, all pairings */
    if (rc == 0 && n_all == 0) {
        for (size_t r = 0; r < reps && rc == 0; r++)
            if ((all_base[n_all++] = generate_once(s, &b, n, out)) < 0)
                rc = -1;
    }
    if (rc == 0) {
        base->tok_s = tool_median(all_base, n_all);
        base->base_tok_s = base->tok_s;
        base->ratio_lo = base->ratio_med = base->ratio_hi = 1.0;
    }
    decoder_free(&b);
    free(out);
    free(tb);
    free(ta);
    free(ratio);
    free(all_base);
    return rc;
}
