/* The experiment's pictures (exp.h), through tools/chart: every arm's
 * validation loss on one chart; each gain arm's gains of every layer and
 * head over the steps; each head's attention entropy, baseline against the
 * gain arms; the attention maps of the most sharpening and the most
 * spreading head on a validation sentence, baseline beside gain. Seed 0's
 * runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot/attn_plot.h"
#include "chart.h"
#include "exp.h"

static const char *path_in(const exp_state *s, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", s->o.out, name);
    return buf;
}

static int plot_valid(exp_state *s)
{
    chart_series ser[ARM_COUNT];
    double *xs[ARM_COUNT] = { 0 }, *ys[ARM_COUNT] = { 0 };
    size_t n = 0;
    int rc = CHART_OK;
    for (exp_arm_kind a = 0; a < ARM_COUNT; a++) {
        const exp_run *run = exp_run_at(s, 0, a);
        if (!run->done)
            continue;
        const size_t S = run->r.steps;
        xs[n] = malloc((S + 1) * sizeof(double));
        ys[n] = malloc((S + 1) * sizeof(double));
        if (!xs[n] || !ys[n]) {
            rc = CHART_ERR_IO;
            n++;
            break;
        }
        size_t k = 0;
        for (size_t t = 0; t <= S; t++)
            if (isfinite(run->r.eval_losses[t])) {
                xs[n][k] = (double)t;
                ys[n][k++] = run->r.eval_losses[t];
            }
        ser[n] = (chart_series){ .name = exp_arm_names[a],
                                 .x = xs[n],
                                 .y = ys[n],
                                 .count = k,
                                 .line = true,
                                 .points = true };
        n++;
    }
    if (rc == CHART_OK) {
        char sub[200], path[4200];
        snprintf(sub, sizeof(sub),
                 "%zu layers, %zu heads, %zu wide, %zu steps of %zu x %zu tokens, seed %llu",
                 s->shape.layers, s->shape.heads, s->shape.hidden, s->o.steps, s->o.batch,
                 s->o.block, (unsigned long long)s->o.seed);
        const chart_line_spec spec = { .title =
                                           "validation loss of every arm (perplexity = exp(loss))",
                                       .subtitle = sub,
                                       .x = { .label = "step" },
                                       .y = { .label = "validation token loss (nats)" },
                                       .series = ser,
                                       .series_count = n };
        rc = chart_lines(path_in(s, "valid_loss.png", path, sizeof(path)), &spec, 1);
    }
    for (size_t i = 0; i < ARM_COUNT; i++) {
        free(xs[i]);
        free(ys[i]);
    }
    return rc;
}

/* The grey of the series colours (chart_series_colour), for heads without
 * a gain. */
#define GREY_SERIES 7

/* Appends ", N" (or "N" first) to a list of head numbers in out[cap]. */
static void list_head(char *out, size_t cap, size_t h)
{
    const size_t len = strlen(out);
    if (len < cap)
        snprintf(out + len, cap - len, len ? ", %zu" : "%zu", h);
}

/* One panel a layer, one line a head: g over every step. The selected arm's
 * heads without a gain (g stays 0) share one line, named in the legend, so
 * that they do not look missing. */
static int plot_gains(exp_state *s, exp_arm_kind a)
{
    const exp_run *run = exp_run_at(s, 0, a);
    const size_t L = s->shape.layers, H = s->shape.heads, S = run->r.steps_done;
    chart_line_spec *panels = calloc(L, sizeof(*panels));
    chart_series *ser = calloc(L * H, sizeof(*ser));
    double *y = malloc(L * H * (S + 1) * sizeof(double)), *x = malloc((S + 1) * sizeof(double));
    char(*names)[32] = malloc(L * H * sizeof(*names)), (*titles)[160] = malloc(L * sizeof(*titles));
    char(*off)[200] = calloc(L, sizeof(*off));
    int rc = CHART_ERR_IO;
    if (panels && ser && y && x && names && titles && off && run->r.gains) {
        for (size_t t = 0; t <= S; t++)
            x[t] = (double)t;
        for (size_t l = 0; l < L; l++) {
            size_t n = 0, fixed = 0, first = 0; /* series; heads without a gain, the first */
            char heads[160] = "";               /* their numbers */
            for (size_t h = 0; h < H; h++) {
                const size_t k = l * H + h;
                for (size_t t = 0; t <= S; t++)
                    y[k * (S + 1) + t] = run->r.gains[t * s->LH + k];
                if (run->heads && !run->heads[k]) {
                    list_head(heads, sizeof(heads), h);
                    first = fixed++ ? first : k;
                    continue;
                }
                snprintf(names[k], sizeof(names[k]), "head %zu", h);
                ser[l * H + n++] = (chart_series){
                    .name = names[k],
                    .x = x,
                    .y = y + k * (S + 1),
                    .count = S + 1,
                    .line = true,
                    .colour = h + 1, /* head h's colour in every arm */
                };
            }
            if (fixed) { /* one line at g = 0 for them all */
                snprintf(off[l], sizeof(off[l]), "head%s %s: no gain (g = 0)", fixed > 1 ? "s" : "",
                         heads);
                ser[l * H + n++] = (chart_series){
                    .name = off[l],
                    .x = x,
                    .y = y + first * (S + 1),
                    .count = S + 1,
                    .line = true,
                    .colour = GREY_SERIES + 1,
                };
            }
            snprintf(titles[l], sizeof(titles[l]), "%s arm, layer %zu: %s over the steps",
                     exp_arm_names[a], l,
                     a == ARM_DIM ? "each head's mean of G over its dimensions"
                                  : "each head's gain g");
            panels[l] = (chart_line_spec){ .title = titles[l],
                                           .x = { .label = "step" },
                                           .y = { .label = a == ARM_DIM ? "mean G" : "g" },
                                           .series = ser + l * H,
                                           .series_count = n };
        }
        char name[64], path[4200];
        snprintf(name, sizeof(name), "gains_%s.png", exp_arm_names[a]);
        rc = chart_lines(path_in(s, name, path, sizeof(path)), panels, L);
    }
    free(panels);
    free(ser);
    free(y);
    free(x);
    free(names);
    free(titles);
    free(off);
    return rc;
}

/* The final entropy of every head on the fixed batch: the baseline and each
 * gain arm (categories "L0H0", ...). */
static int plot_entropy(exp_state *s)
{
    const size_t LH = s->LH;
    char(*ticks)[48] = malloc(LH * sizeof(*ticks));
    const char **tp = malloc(LH * sizeof(char *));
    double *y = malloc(ARM_COUNT * LH * sizeof(double));
    chart_series ser[ARM_COUNT];
    size_t n = 0;
    int rc = CHART_ERR_IO;
    if (ticks && tp && y) {
        for (size_t k = 0; k < LH; k++) {
            snprintf(ticks[k], sizeof(ticks[k]), "L%zuH%zu", k / s->shape.heads,
                     k % s->shape.heads);
            tp[k] = ticks[k];
        }
        for (exp_arm_kind a = 0; a < ARM_COUNT; a++) {
            const exp_run *run = exp_run_at(s, 0, a);
            if (!run->done || run->m == 0)
                continue;
            for (size_t k = 0; k < LH; k++)
                y[n * LH + k] = run->entropy[(run->m - 1) * LH + k];
            ser[n] = (chart_series){
                .name = exp_arm_names[a], .y = y + n * LH, .count = LH, .line = true, .points = true
            };
            n++;
        }
        char sub[200], path[4200];
        snprintf(sub, sizeof(sub), "the final models on %zu validation blocks of %zu tokens",
                 s->probe_rows, s->o.block);
        const chart_line_spec spec = {
            .title = "attention entropy per head (nats): baseline and gain arms",
            .subtitle = sub,
            .x = { .label = "layer and head" },
            .y = { .label = "mean row entropy (nats)" },
            .x_ticks = tp,
            .x_tick_count = LH,
            .series = ser,
            .series_count = n
        };
        rc = chart_lines(path_in(s, "entropy.png", path, sizeof(path)), &spec, 1);
    }
    free(ticks);
    free(tp);
    free(y);
    return rc;
}

/* The head to show: the largest (sign +1) or smallest (-1) final gain among
 * the heads settled with that sign, else among all heads. */
static size_t pick_head(const exp_state *s, const exp_run *run, int sign, bool *settled)
{
    const float *g = run->r.gains + run->r.steps_done * s->LH;
    size_t best = SIZE_MAX;
    for (int pass = 0; pass < 2 && best == SIZE_MAX; pass++)
        for (size_t k = 0; k < s->LH; k++) {
            if (pass == 0 && run->sign[k] != sign)
                continue;
            if (best == SIZE_MAX || (sign > 0 ? g[k] > g[best] : g[k] < g[best]))
                best = k;
        }
    *settled = run->sign[best] == sign;
    return best;
}

static int head_map(exp_state *s, pfx_context *ctx, const pfx_model_prefix *prefix, size_t k,
                    float *probs)
{
    const size_t N = s->sentence_len, shape[2] = { N, N };
    const pfx_model_batch b = { .batch = 1, .tokens = N, .ids = s->sentence };
    pfx_tensor *t = NULL;
    pfx_status st = pfx_tensor_create(s->rt, PFX_DTYPE_F32, 2, shape, &t);
    if (st == PFX_SUCCESS)
        st = pfx_model_attention_probs(ctx, &b, prefix, 0, k / s->shape.heads, k % s->shape.heads,
                                       t);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_read(t, 0, N * N, probs);
    pfx_tensor_destroy(&t);
    if (st != PFX_SUCCESS)
        fprintf(stderr, "prefixcl experiment gain: attention map: %s\n", pfx_last_error(s->rt));
    return st == PFX_SUCCESS ? 0 : -1;
}

/* A 2 x 2 grid: rows the most sharpening and the most spreading head of
 * the gain arm (linear, else the first gain arm run), columns the baseline
 * model and the gain arm's model with its gains. */
static int plot_maps(exp_state *s)
{
    exp_arm_kind ga = ARM_COUNT;
    for (exp_arm_kind a = ARM_LINEAR; a < ARM_COUNT && ga == ARM_COUNT; a++)
        if (exp_run_at(s, 0, a)->done && a != ARM_DIM)
            ga = a;
    exp_run *base = exp_run_at(s, 0, ARM_BASELINE),
            *gain = ga < ARM_COUNT ? exp_run_at(s, 0, ga) : NULL;
    if (!base->done || !gain || s->sentence_len < 2)
        return CHART_ERR_ARG;
    const size_t N = s->sentence_len;
    bool set_up, set_down;
    const size_t up = pick_head(s, gain, 1, &set_up), down = pick_head(s, gain, -1, &set_down);
    const float *g = gain->r.gains + gain->r.steps_done * s->LH;
    float *probs = malloc(4 * N * N * sizeof(float));
    char(*labels)[48] = malloc(N * sizeof(*labels));
    const char **lp = malloc(N * sizeof(char *));
    pfx_context *bm = exp_model_load(s, base, 1), *gm = exp_model_load(s, gain, 1);
    exp_gains gg = { 0 };
    int rc = CHART_ERR_IO;
    const pfx_model_prefix none = { 0 };
    if (!probs || !labels || !lp || !bm || !gm || exp_gains_load(s, gain, ga, &gg))
        goto out;
    if (head_map(s, bm, &none, up, probs) || head_map(s, gm, &gg.prefix, up, probs + N * N) ||
        head_map(s, bm, &none, down, probs + 2 * N * N) ||
        head_map(s, gm, &gg.prefix, down, probs + 3 * N * N))
        goto out;
    for (size_t i = 0; i < N; i++) {
        size_t len = 0;
        const char *p = pfx_tokenizer_id_to_token(s->tok, s->sentence[i], &len);
        snprintf(labels[i], sizeof(labels[i]), "%.*s", p ? (int)(len < 40 ? len : 40) : 1,
                 p ? p : "?");
        lp[i] = labels[i];
    }
    char titles[4][160];
    const size_t heads[2] = { up, down };
    for (int r = 0; r < 2; r++) {
        const size_t k = heads[r];
        snprintf(titles[2 * r], sizeof(titles[0]), "baseline, layer %zu head %zu",
                 k / s->shape.heads, k % s->shape.heads);
        snprintf(titles[2 * r + 1], sizeof(titles[0]), "%s, layer %zu head %zu, g = %+.3f (%s%s)",
                 exp_arm_names[ga], k / s->shape.heads, k % s->shape.heads, (double)g[k],
                 r == 0 ? "most sharpening" : "most spreading",
                 (r == 0 ? set_up : set_down) ? ", settled" : ", not settled");
    }
    attn_plot_map maps[4];
    for (int i = 0; i < 4; i++)
        maps[i] = (attn_plot_map){ .probs = probs + (size_t)i * N * N,
                                   .queries = N,
                                   .keys = N,
                                   .query_labels = lp,
                                   .key_labels = lp,
                                   .title = titles[i] };
    snprintf(
        s->heat_note, sizeof(s->heat_note),
        "layer %zu head %zu (g = %+.3f, %s) and layer %zu head %zu (g = %+.3f, %s) of the %s arm",
        up / s->shape.heads, up % s->shape.heads, (double)g[up],
        set_up ? "settled" : "largest g, not settled", down / s->shape.heads, down % s->shape.heads,
        (double)g[down], set_down ? "settled" : "smallest g, not settled", exp_arm_names[ga]);
    char path[4200];
    rc = attn_plot_grid(path_in(s, "attention_maps.png", path, sizeof(path)),
                        "attention on a validation sentence: baseline (left) and gain arm (right)",
                        maps, 4);
out:
    exp_gains_free(&gg);
    pfx_context_destroy(&bm);
    pfx_context_destroy(&gm);
    free(probs);
    free(labels);
    free(lp);
    return rc;
}

int exp_plot_all(exp_state *s, char *note, size_t cap)
{
    int written = 0, rc;
    note[0] = '\0';
#define TRY(call)                                                                                  \
    do {                                                                                           \
        rc = (call);                                                                               \
        if (rc == CHART_OK)                                                                        \
            written++;                                                                             \
        else if (!note[0])                                                                         \
            snprintf(note, cap, "%s", chart_strerror(rc));                                         \
    } while (0)
    TRY(plot_valid(s));
    for (exp_arm_kind a = ARM_LINEAR; a < ARM_COUNT; a++)
        if (exp_run_at(s, 0, a)->done)
            TRY(plot_gains(s, a));
    TRY(plot_entropy(s));
    if (exp_run_at(s, 0, ARM_BASELINE)->done)
        TRY(plot_maps(s));
#undef TRY
    return written;
}
