/*
 * The tools' pictures (tools/chart/ and its users train_plot.c, tune_plot.c,
 * pretrain_plot.c, attn_plot.c, bench_plot.c), each drawn from small fixed data into the folder argv[1]
 * as PNG and SVG. The PNGs are read back with cairo: size, and pixels where
 * the layout puts known colours. tests/check_charts.py runs this program and
 * then parses the SVGs and looks for their labels. With argv[2] "none" (a
 * build without cairo) every chart must answer CHART_UNAVAILABLE and write
 * nothing.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "plot/attn_plot.h"
#include "benchmark/bench.h"
#include "chart.h"
#include "plot/loss_plot.h"
#include "plot/pretrain_plot.h"
#include "plot/train_plot.h"
#include "plot/tune_plot.h"

#if PFX_TEST_CAIRO
#include <cairo.h>
#endif

static const char *dir;
static bool with_cairo;

static const char *out(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return path;
}

static void expect(int rc, const char *name)
{
    if (with_cairo) {
        if (rc != CHART_OK)
            fail_msg("%s: %s", name, chart_strerror(rc));
    } else {
        assert_int_equal(rc, CHART_UNAVAILABLE);
        assert_int_equal(access(out(name), F_OK), -1); /* nothing written */
    }
}

#if PFX_TEST_CAIRO
/* Decodes the PNG; its size must match (0: at least 200 x 150). Returns the
 * number of distinct colours in it, so that a blank picture fails. */
static size_t check_png(const char *name, int width, int height)
{
    cairo_surface_t *s = cairo_image_surface_create_from_png(out(name));
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS)
        fail_msg("%s: %s", name, cairo_status_to_string(cairo_surface_status(s)));
    int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    if (width)
        assert_int_equal(w, width);
    else
        assert_true(w >= 200);
    if (height)
        assert_int_equal(h, height);
    else
        assert_true(h >= 150);
    const unsigned char *px = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    uint32_t seen[64];
    size_t n = 0;
    for (int y = 0; y < h && n < 64; y += 3)
        for (int x = 0; x < w && n < 64; x += 3) {
            uint32_t p;
            memcpy(&p, px + (size_t)y * (size_t)stride + 4 * (size_t)x, 4);
            p &= 0xFFFFFF;
            bool known = false;
            for (size_t i = 0; i < n && !known; i++)
                known = seen[i] == p;
            if (!known)
                seen[n++] = p;
        }
    cairo_surface_destroy(s);
    struct stat st;
    assert_int_equal(stat(out(name), &st), 0);
    /* compressed: far below 3 bytes a pixel */
    assert_true((double)st.st_size < 0.5 * (double)w * (double)h);
    return n;
}
#endif

#if PFX_TEST_CAIRO
/* How many pixels of exactly this colour the PNG has (the inside of a marker
 * or a bar keeps its colour through anti-aliasing). */
static size_t colour_count(const char *name, int r, int g, int b)
{
    cairo_surface_t *s = cairo_image_surface_create_from_png(out(name));
    assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    const unsigned char *px = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s), w = cairo_image_surface_get_width(s);
    int h = cairo_image_surface_get_height(s);
    size_t found = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const unsigned char *p = px + (size_t)y * (size_t)stride + 4 * (size_t)x;
            found += p[2] == r && p[1] == g && p[0] == b;
        }
    cairo_surface_destroy(s);
    return found;
}
#endif

/* ---- fixed data ---------------------------------------------------------- */

enum { STEPS = 40, LAYERS = 3, HEADS = 4 };

static void train_data(train_config *cfg, train_result *r)
{
    static double losses[STEPS], eval_losses[4];
    static float grad[STEPS], lrs[STEPS], gains[LAYERS * HEADS], tgains[LAYERS * HEADS];
    static size_t eval_steps[4] = { 10, 20, 30, 40 };
    static train_layer_stats stats[LAYERS] = { { 0.21, 1.9, 0.25, 2.1 },
                                               { 0.35, 1.6, 0.31, 1.7 },
                                               { 0.12, 2.3, 0.15, 2.2 } };
    for (int i = 0; i < STEPS; i++) {
        losses[i] = 2.0 * exp(-i / 9.0) + 0.004;
        grad[i] = (float)(3.0 * exp(-i / 15.0));
        lrs[i] = (float)(i < 4 ? 1e-2 * (i + 1) / 4 : 1e-2 * (0.55 + 0.45 * cos(i / 12.0)));
    }
    for (int i = 0; i < 4; i++)
        eval_losses[i] = 2.2 * exp(-(double)eval_steps[i] / 9.0) + 0.006;
    for (int i = 0; i < LAYERS * HEADS; i++) {
        tgains[i] = (float)sin(1.7 * i);
        gains[i] = 0.9f * tgains[i] + 0.05f;
    }
    memset(cfg, 0, sizeof(*cfg));
    cfg->layers = LAYERS, cfg->heads = HEADS, cfg->prefix_len = 8, cfg->batch = 4;
    cfg->tokens = 24, cfg->seed = 5, cfg->steps = STEPS;
    memset(r, 0, sizeof(*r));
    r->losses = losses, r->grad_norms = grad, r->lrs = lrs, r->steps_done = STEPS;
    r->eval_count = 4, r->eval_steps = eval_steps, r->eval_losses = eval_losses;
    r->gains = gains, r->teacher_gains = tgains, r->layer_stats = stats;
}

static void bench_data(bench_run *run, bench_run *base)
{
    memset(run, 0, sizeof(*run));
    snprintf(run->date, sizeof(run->date), "2026-12-01T09:00:00+0000");
    run->device_count = 1;
    bench_device *d = &run->devices[0];
    snprintf(d->selector, sizeof(d->selector), "0:0");
    snprintf(d->info.device_name, sizeof(d->info.device_name), "Chart Test Device");
    d->count = 4;
    bench_result *r = d->tests;
    snprintf(r[0].id, sizeof(r[0].id), "sgemm.1024");
    r[0].ok = true, r[0].ms = 17.8, r[0].gflops = 120.5, r[0].gbs = -1;
    r[0].ceiling = BENCH_CEIL_FMA, r[0].share = 30.1;
    snprintf(r[1].id, sizeof(r[1].id), "copy");
    r[1].ok = true, r[1].ms = 2.0, r[1].gflops = -1, r[1].gbs = 12.5;
    r[1].ceiling = BENCH_CEIL_COPY, r[1].share = 100.0;
    snprintf(r[2].id, sizeof(r[2].id), "layer.step");
    snprintf(r[2].reason, sizeof(r[2].reason), "not built");
    r[2].gflops = r[2].gbs = r[2].share = -1;
    /* above the measured ceiling: the marker lies on the bar */
    snprintf(r[3].id, sizeof(r[3].id), "sgemm.512");
    r[3].ok = true, r[3].ms = 1.97, r[3].gflops = 136.2, r[3].gbs = -1;
    r[3].ceiling = BENCH_CEIL_FMA, r[3].share = 275.9;
    *base = *run;
    base->devices[0].tests[0].gflops = 107.6;   /* now +12.0 % */
    base->devices[0].tests[1].gbs = 12.5 / 0.8; /* now -20.0 % */
    snprintf(base->date, sizeof(base->date), "2026-11-30T09:00:00+0000");
}

/* ---- the pictures -------------------------------------------------------- */

static void test_train_pictures(void **state)
{
    (void)state;
    train_config cfg;
    train_result r;
    train_data(&cfg, &r);
    expect(train_plot_loss(out("loss.png"), &cfg, &r), "loss.png");
    expect(train_plot_loss(out("loss.svg"), &cfg, &r), "loss.svg");
    expect(train_plot_attention(out("attention.png"), &cfg, &r), "attention.png");
    expect(train_plot_attention(out("attention.svg"), &cfg, &r), "attention.svg");
    expect(train_plot_gains(out("gains.png"), &cfg, &r), "gains.png");
    expect(train_plot_gains(out("gains.svg"), &cfg, &r), "gains.svg");
#if PFX_TEST_CAIRO
    assert_true(check_png("loss.png", 760, 400) > 6);
    /* the held-out points: the second series colour (orange), four markers
     * beside the legend's one (a marker has some 25 pixels of pure colour) */
    size_t orange = colour_count("loss.png", 255, 127, 14);
    if (orange < 3 * 25)
        fail_msg("loss.png: %zu orange pixels, not the legend's and four markers", orange);
    assert_true(check_png("attention.png", 760, 800) > 4); /* two panels */
    assert_true(check_png("gains.png", 0, 0) > 8);
#endif
    /* without held-out points the curve is still drawn */
    r.eval_count = 0;
    expect(train_plot_loss(out("loss-no-eval.png"), &cfg, &r), "loss-no-eval.png");
}

/* A finished tune run of 40 steps (the evaluation before and after) over
 * 3 layers x 4 heads, with its prefix masses and gains. */
static void tune_data(pfx_tune_result *r)
{
    static double losses[STEPS];
    static float grad[STEPS], before[LAYERS * HEADS], after[LAYERS * HEADS], gains[LAYERS * HEADS];
    for (int i = 0; i < STEPS; i++) {
        losses[i] = 5.0 + 2.8 * exp(-i / 11.0);
        grad[i] = (float)(4.0 * exp(-i / 20.0) + 0.2);
    }
    for (int i = 0; i < LAYERS * HEADS; i++) {
        before[i] = (float)(0.05 + 0.02 * (i % HEADS));
        after[i] = (float)(0.30 + 0.1 * (i / HEADS) + 0.01 * (i % HEADS));
        gains[i] = (float)(0.6 * cos(1.3 * i));
    }
    memset(r, 0, sizeof(*r));
    r->losses = losses, r->grad_norms = grad, r->steps = r->steps_done = STEPS;
    r->eval_before = 7.9, r->eval_after = 5.3;
    r->shape.layers = LAYERS, r->shape.heads = HEADS;
    r->gains = gains, r->mass_before = before, r->mass_after = after;
}

static void test_tune_pictures(void **state)
{
    (void)state;
    pfx_tune_result r;
    tune_data(&r);
    expect(tune_plot_loss(out("tune-loss.png"), &r), "tune-loss.png");
    expect(tune_plot_loss(out("tune-loss.svg"), &r), "tune-loss.svg");
    expect(tune_plot_prefix_mass(out("tune-attention.png"), r.mass_before, r.mass_after, LAYERS,
                                 HEADS),
           "tune-attention.png");
    expect(tune_plot_prefix_mass(out("tune-attention.svg"), r.mass_before, r.mass_after, LAYERS,
                                 HEADS),
           "tune-attention.svg");
    expect(tune_plot_gains(out("tune-gains.png"), r.gains, LAYERS, HEADS), "tune-gains.png");
    expect(tune_plot_gains(out("tune-gains.svg"), r.gains, LAYERS, HEADS), "tune-gains.svg");
#if PFX_TEST_CAIRO
    assert_true(check_png("tune-loss.png", 760, 400) > 6);
    /* the evaluation points: the third series colour (green), two markers
     * beside the legend's one */
    size_t green = colour_count("tune-loss.png", 44, 160, 44);
    if (green < 2 * 25)
        fail_msg("tune-loss.png: %zu green pixels, not the legend's and two markers", green);
    /* base and tuned: three markers each beside the legend's */
    assert_true(check_png("tune-attention.png", 760, 400) > 4);
    if (colour_count("tune-attention.png", 255, 127, 14) < 3 * 25)
        fail_msg("tune-attention.png: the tuned line's markers are missing");
    assert_true(check_png("tune-gains.png", 0, 0) > 8);
#endif
    /* a resumed run that stopped: no evaluation point, the curve still drawn */
    r.first_step = 10, r.stopped = true, r.steps_done = 20;
    expect(tune_plot_loss(out("tune-loss-stopped.png"), &r), "tune-loss-stopped.png");
    /* nothing to draw */
    if (with_cairo)
        assert_int_equal(tune_plot_gains(out("tune-none.png"), r.gains, 0, HEADS), CHART_ERR_ARG);
}

static const char *const tokens[] = { "The",
                                      "\xc4\xa0"
                                      "cat",
                                      "\xc4\xa0"
                                      "sat",
                                      "a<b&c", "." };

static float head_probs[5 * 8];

/* Rows of a causal map with 3 prefix keys: each sums to 1. */
static void attention_data(void)
{
    for (int i = 0; i < 5; i++) {
        double sum = 0;
        for (int j = 0; j < 8; j++) {
            bool visible = j < 3 || j - 3 <= i;
            head_probs[i * 8 + j] =
                visible ? (float)exp(-0.5 * (i - j + 3) * (i - j + 3) / 4.0) : 0.0f;
            sum += head_probs[i * 8 + j];
        }
        for (int j = 0; j < 8; j++)
            head_probs[i * 8 + j] = (float)(head_probs[i * 8 + j] / sum);
    }
}

static void test_attention_pictures(void **state)
{
    (void)state;
    attention_data();
    const char *keys[] = { "p0",
                           "p1",
                           "p2",
                           "The",
                           "\xc4\xa0"
                           "cat",
                           "\xc4\xa0"
                           "sat",
                           "a<b&c",
                           "." };
    attn_plot_map m = { .probs = head_probs,
                        .queries = 5,
                        .keys = 8,
                        .prefix_len = 3,
                        .query_labels = tokens,
                        .key_labels = keys,
                        .title = "layer 1, head 2, gain 1.25" };
    expect(attn_plot_head(out("attn-head.png"), &m), "attn-head.png");
    expect(attn_plot_head(out("attn-head.svg"), &m), "attn-head.svg");
    attn_plot_map grid[3] = { m, m, m };
    grid[0].title = "head 0";
    grid[1].title = "head 1";
    grid[2].title = "head 2";
    expect(attn_plot_grid(out("attn-grid.png"), "layer 1: all heads", grid, 3), "attn-grid.png");
    expect(attn_plot_grid(out("attn-grid.svg"), "layer 1: all heads", grid, 3), "attn-grid.svg");
#if PFX_TEST_CAIRO
    assert_true(check_png("attn-head.png", 0, 0) > 8);
    assert_true(check_png("attn-grid.png", 0, 0) > 8);
    /* the grid is two panels wide, two high: wider and taller than one head */
    cairo_surface_t *one = cairo_image_surface_create_from_png(out("attn-head.png"));
    cairo_surface_t *all = cairo_image_surface_create_from_png(out("attn-grid.png"));
    assert_true(cairo_image_surface_get_height(all) > cairo_image_surface_get_height(one));
    cairo_surface_destroy(one);
    cairo_surface_destroy(all);
#endif
}

static void test_bench_pictures(void **state)
{
    (void)state;
    static bench_run run, base;
    bench_data(&run, &base);
    expect(bench_plot(out("bench.png"), &run, NULL), "bench.png");
    expect(bench_plot(out("bench-compare.png"), &run, &base), "bench-compare.png");
    expect(bench_plot(out("bench-compare.svg"), &run, &base), "bench-compare.svg");
#if PFX_TEST_CAIRO
    check_png("bench.png", 0, 0);
    check_png("bench-compare.png", 0, 0);
    cairo_surface_t *one = cairo_image_surface_create_from_png(out("bench.png"));
    cairo_surface_t *two = cairo_image_surface_create_from_png(out("bench-compare.png"));
    /* with --compare each test has two bars: a taller picture */
    assert_true(cairo_image_surface_get_height(two) > cairo_image_surface_get_height(one));
    cairo_surface_destroy(one);
    cairo_surface_destroy(two);
#endif
}

/* ---- what a reader needs of each picture ---------------------------------- */

/* A gradient norm within one decade (0.6 to 2.4) and within a factor 1.3
 * (1.5 to 1.9) on the loss picture's log axis: several labelled ticks each
 * (check_charts.py reads them), not one or two decades. */
static void test_log_axis_ticks(void **state)
{
    (void)state;
    enum { N = 50 };
    static double losses[N];
    static float decade[N], narrow[N];
    for (int i = 0; i < N; i++) {
        losses[i] = 4.0 + exp(-i / 10.0);
        decade[i] = (float)(0.6 + 1.8 * exp(-i / 12.0));
        narrow[i] = (float)(1.5 + 0.4 * exp(-i / 12.0));
    }
    expect(loss_plot(out("grad-decade.svg"), "a gradient norm within a decade", NULL, losses,
                     decade, N, NULL),
           "grad-decade.svg");
    expect(loss_plot(out("grad-narrow.svg"), "a gradient norm within a factor 1.3", NULL, losses,
                     narrow, N, NULL),
           "grad-narrow.svg");
}

/* Lines near the top and the bottom across the whole width leave no corner
 * free: the legend goes below the plot, where it covers nothing
 * (check_charts.py: its entries under the x axis's label). */
static void test_legend_placement(void **state)
{
    (void)state;
    enum { N = 30 };
    double top[N], bottom[N], middle[N];
    for (int i = 0; i < N; i++) {
        top[i] = 0.95 + 0.02 * sin(i);
        bottom[i] = 0.05 + 0.02 * cos(i);
        middle[i] = 0.5 + 0.3 * sin(i / 3.0);
    }
    const chart_series s[3] = {
        { .name = "near the top", .y = top, .count = N, .line = true },
        { .name = "near the bottom", .y = bottom, .count = N, .line = true },
        { .name = "in the middle", .y = middle, .count = N, .line = true },
    };
    const chart_line_spec p = {
        .title = "no free corner", .x = { .label = "step" }, .series = s, .series_count = 3
    };
    expect(chart_lines(out("legend-below.svg"), &p, 1), "legend-below.svg");
    expect(chart_lines(out("legend-below.png"), &p, 1), "legend-below.png");
}

/* Twelve heads of 10 queries by 30 keys in one grid: every token labelled
 * (check_charts.py finds each label). */
static void test_attention_grid_labels(void **state)
{
    (void)state;
    enum { Q = 10, K = 30, HEADS12 = 12 };
    static float probs[Q * K];
    static char qn[Q][8], kn[K][8], titles[HEADS12][16];
    static const char *ql[Q], *kl[K];
    for (int i = 0; i < Q * K; i++)
        probs[i] = (float)((1 + (i % 7)) / 100.0);
    for (int i = 0; i < Q; i++)
        snprintf(qn[i], sizeof(qn[i]), "q%d", i), ql[i] = qn[i];
    for (int j = 0; j < K; j++)
        snprintf(kn[j], sizeof(kn[j]), "k%d", j), kl[j] = kn[j];
    attn_plot_map maps[HEADS12];
    for (int h = 0; h < HEADS12; h++) {
        snprintf(titles[h], sizeof(titles[h]), "head %d", h);
        maps[h] = (attn_plot_map){ .probs = probs,
                                   .queries = Q,
                                   .keys = K,
                                   .prefix_len = 4,
                                   .query_labels = ql,
                                   .key_labels = kl,
                                   .title = titles[h] };
    }
    expect(attn_plot_grid(out("attn-grid-12.svg"), "twelve heads, every token", maps, HEADS12),
           "attn-grid-12.svg");
}

/* pretrain's gains_steps.png (200 steps, 4 layers x 4 heads): the map
 * spans most of the picture's width, not a narrow strip. */
static void test_gain_steps_width(void **state)
{
    (void)state;
    enum { S = 200, L = 4, H = 4 };
    static double losses[S], evals[S + 1];
    static float grads[S], gains[(S + 1) * L * H];
    for (int i = 0; i < S; i++) {
        losses[i] = 6.0 - 2.0 * i / S;
        grads[i] = (float)(1.0 + exp(-i / 30.0));
    }
    for (int i = 0; i <= S; i++) {
        evals[i] = i % 50 == 0 ? 6.0 - 2.0 * i / S : NAN;
        for (int k = 0; k < L * H; k++)
            gains[i * L * H + k] = (float)((k % 2 ? 1 : -1) * (0.5 + (double)i / S));
    }
    pfx_pretrain_result r = { .steps = S,
                              .steps_done = S,
                              .losses = losses,
                              .grad_norms = grads,
                              .eval_losses = evals,
                              .gains = gains,
                              .tokens_per_step = 512 };
    snprintf(r.shape.model_type, sizeof(r.shape.model_type), "gpt2");
    r.shape.layers = L, r.shape.heads = H;
    char sub[4096];
    snprintf(sub, sizeof(sub), "%s/pretrain", dir);
    mkdir(sub, 0777);
    expect(pretrain_plot_all(sub, &r, true), "pretrain/loss.png");
#if PFX_TEST_CAIRO
    assert_true(check_png("pretrain/gains_steps.png", 0, 0) > 4);
    cairo_surface_t *img = cairo_image_surface_create_from_png(out("pretrain/gains_steps.png"));
    const unsigned char *px = cairo_image_surface_get_data(img);
    const int stride = cairo_image_surface_get_stride(img), w = cairo_image_surface_get_width(img),
              h = cairo_image_surface_get_height(img);
    int coloured = 0; /* columns with a saturated pixel (the map, the colour bar) */
    for (int x = 0; x < w; x++) {
        bool any = false;
        for (int y = 0; y < h && !any; y += 2) {
            const unsigned char *p = px + (size_t)y * (size_t)stride + 4 * (size_t)x;
            any = abs((int)p[2] - (int)p[0]) > 90;
        }
        coloured += any;
    }
    cairo_surface_destroy(img);
    if (coloured < 6 * w / 10)
        fail_msg("gains_steps.png: the map spans %d of %d pixels", coloured, w);
#endif
}

/* A heat map's cells carry the colour scale's ends: the minimum at the
 * bottom end of the colour bar, the maximum at the top. */
static void test_heatmap_colours(void **state)
{
    (void)state;
    float v[4] = { 0, 1, 1, 0 };
    chart_heatmap_spec s = { .title = "checker", .values = v, .rows = 2, .cols = 2 };
    expect(chart_heatmap(out("checker.png"), &s), "checker.png");
#if PFX_TEST_CAIRO
    cairo_surface_t *img = cairo_image_surface_create_from_png(out("checker.png"));
    assert_int_equal(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
    const unsigned char *px = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img), w = cairo_image_surface_get_width(img);
    int h = cairo_image_surface_get_height(img);
    /* viridis: the minimum is dark purple (blue > green), the maximum yellow
     * (red and green high, blue low); both must appear */
    bool dark = false, bright = false;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const unsigned char *p = px + (size_t)y * (size_t)stride + 4 * (size_t)x;
            int b = p[0], g = p[1], r = p[2];
            dark |= r > 0x38 && r < 0x50 && g < 0x08 && b > 0x48 && b < 0x5C;
            bright |= r > 0xF0 && g > 0xD8 && b < 0x40;
        }
    cairo_surface_destroy(img);
    assert_true(dark);
    assert_true(bright);
#endif
}

static void test_refusals(void **state)
{
    (void)state;
    if (!with_cairo) {
        assert_string_equal(chart_strerror(CHART_UNAVAILABLE),
                            "no picture drawn: prefixcl was built without cairo");
        return;
    }
    double y[3] = { NAN, NAN, NAN };
    chart_series s = { .name = "nothing", .y = y, .count = 3, .line = true };
    chart_line_spec p = { .title = "empty", .series = &s, .series_count = 1 };
    assert_int_equal(chart_lines(out("empty.png"), &p, 1), CHART_ERR_ARG);
    assert_int_equal(access(out("empty.png"), F_OK), -1);
    chart_heatmap_spec h = { .values = NULL, .rows = 2, .cols = 2 };
    assert_int_equal(chart_heatmap(out("empty-map.png"), &h), CHART_ERR_ARG);
    chart_bar_spec b = { .title = "no groups", .series_count = 1 };
    assert_int_equal(chart_bars(out("empty-bars.png"), &b), CHART_ERR_ARG);
    /* a folder that does not exist */
    float v[1] = { 1 };
    chart_heatmap_spec one = { .values = v, .rows = 1, .cols = 1 };
    assert_int_equal(chart_heatmap("/nonexistent-folder/x.png", &one), CHART_ERR_IO);
    assert_int_equal(chart_heatmap("/nonexistent-folder/x.svg", &one), CHART_ERR_IO);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_chart DIR cairo|none\n");
        return 2;
    }
    dir = argv[1];
    with_cairo = !strcmp(argv[2], "cairo");
    mkdir(dir, 0777);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_pictures),        cmocka_unit_test(test_tune_pictures),
        cmocka_unit_test(test_attention_pictures),    cmocka_unit_test(test_bench_pictures),
        cmocka_unit_test(test_heatmap_colours),       cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_log_axis_ticks),        cmocka_unit_test(test_legend_placement),
        cmocka_unit_test(test_attention_grid_labels), cmocka_unit_test(test_gain_steps_width),
    };
    return cmocka_run_group_tests_name("chart", tests, NULL, NULL);
}
