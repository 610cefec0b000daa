/*
 * prefixcl bench --plot: a grayscale PNG bar chart (through tools/image.c).
 * One row per test, one horizontal bar per device: the test's share of that
 * device's own measured ceiling (FMA peak for compute, copy bandwidth for
 * memory-bound tests), 0-100 %, the value written after the bar. Labels in a
 * built-in 5x7 pixel font (upper case), drawn at twice the size.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "image.h"
#include "plot.h"

typedef struct glyph {
    char c;
    uint8_t rows[7]; /* bit 4 is the leftmost column */
} glyph;

static const glyph font[] = {
    { '0', { 0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E } },
    { '1', { 0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E } },
    { '2', { 0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F } },
    { '3', { 0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E } },
    { '4', { 0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02 } },
    { '5', { 0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E } },
    { '6', { 0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E } },
    { '7', { 0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08 } },
    { '8', { 0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E } },
    { '9', { 0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C } },
    { 'A', { 0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11 } },
    { 'B', { 0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E } },
    { 'C', { 0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E } },
    { 'D', { 0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C } },
    { 'E', { 0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F } },
    { 'F', { 0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10 } },
    { 'G', { 0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F } },
    { 'H', { 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11 } },
    { 'I', { 0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E } },
    { 'J', { 0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C } },
    { 'K', { 0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11 } },
    { 'L', { 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F } },
    { 'M', { 0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11 } },
    { 'N', { 0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11 } },
    { 'O', { 0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E } },
    { 'P', { 0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10 } },
    { 'Q', { 0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D } },
    { 'R', { 0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11 } },
    { 'S', { 0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E } },
    { 'T', { 0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04 } },
    { 'U', { 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E } },
    { 'V', { 0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04 } },
    { 'W', { 0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A } },
    { 'X', { 0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11 } },
    { 'Y', { 0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04 } },
    { 'Z', { 0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F } },
    { '.', { 0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C } },
    { '_', { 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F } },
    { '%', { 0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03 } },
    { '(', { 0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02 } },
    { ')', { 0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08 } },
    { ':', { 0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00 } },
    { '-', { 0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00 } },
    { '/', { 0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00 } },
    { '+', { 0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00 } },
    { '[', { 0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E } },
    { ']', { 0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E } },
    { ',', { 0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08 } },
    { '=', { 0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00 } },
    { '>', { 0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08 } },
    { '?', { 0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04 } },
};

#define SCALE 2
#define CHAR_W (6 * SCALE)
#define LINE_H (9 * SCALE)

typedef plot_canvas canvas;

static void rect(canvas *c, long x0, long y0, long w, long h, uint8_t v)
{
    plot_rect(c, x0, y0, w, h, v);
}

/* Upper case only: lower case is drawn as upper, a missing glyph as '?'. */
static const uint8_t *find_glyph(char ch)
{
    if (ch >= 'a' && ch <= 'z')
        ch = (char)(ch - 'a' + 'A');
    for (size_t i = 0; i < sizeof(font) / sizeof(font[0]); i++)
        if (font[i].c == ch)
            return font[i].rows;
    return ch == ' ' ? NULL : font[sizeof(font) / sizeof(font[0]) - 1].rows;
}

/* Draws text with its top-left corner at (x, y); at most max_chars. */
static void text(canvas *c, long x, long y, const char *s, size_t max_chars, uint8_t v)
{
    plot_text(c, x, y, s, max_chars, SCALE, v, find_glyph);
}

/* Device d's bar: a fill shade, hatched for the fourth and later devices. */
static void bar(canvas *c, long x, long y, long w, long h, size_t d)
{
    static const uint8_t shades[] = { 30, 110, 185, 70 };
    uint8_t shade = shades[d % 4];
    rect(c, x, y, w, h, shade);
    if (d >= 3)
        for (long yy = y; yy < y + h; yy++)
            for (long xx = x; xx < x + w; xx++)
                if (((xx + yy) / 3) % 2 == 0 && xx >= 0 && (size_t)xx < c->w)
                    c->px[(size_t)yy * c->w + (size_t)xx] = 230;
    /* outline, so light bars stay visible on white */
    rect(c, x, y, w, 1, 0);
    rect(c, x, y + h - 1, w, 1, 0);
    rect(c, x, y, 1, h, 0);
    rect(c, x + w - 1, y, 1, h, 0);
}

int bench_plot_png(const char *path, const bench_run *run)
{
    /* rows: the union of test ids in the first device's order */
    const char *ids[BENCH_MAX_TESTS * BENCH_MAX_DEVICES];
    size_t nids = 0;
    for (size_t d = 0; d < run->device_count; d++)
        for (size_t t = 0; t < run->devices[d].count; t++) {
            const char *id = run->devices[d].tests[t].id;
            bool seen = false;
            for (size_t i = 0; i < nids && !seen; i++)
                seen = !strcmp(ids[i], id);
            if (!seen)
                ids[nids++] = id;
        }
    const long margin = 16, label_w = 13 * CHAR_W, plot_w = 600, value_w = 10 * CHAR_W;
    const long bar_h = 8 * SCALE + 2, gap = 10; /* one text line per bar */
    const long nd = (long)run->device_count;
    const long title_h = LINE_H * 3;
    const long legend_h = LINE_H * (nd + 1);
    const long axis_h = LINE_H + 4;
    const long group_h = nd * bar_h + gap > LINE_H + gap ? nd * bar_h + gap : LINE_H + gap;
    canvas c;
    c.w = (size_t)(margin * 2 + label_w + plot_w + value_w);
    c.h = (size_t)(margin * 2 + title_h + legend_h + axis_h + (long)nids * group_h + LINE_H);
    c.px = malloc(c.w * c.h);
    if (!c.px)
        return -1;
    memset(c.px, 255, c.w * c.h);

    long y = margin;
    text(&c, margin, y, "prefixcl bench: share of the device ceiling (%)", 80, 0);
    y += LINE_H;
    char line[256];
    snprintf(line, sizeof(line), "%s%s", run->date, run->quick ? " --quick" : "");
    text(&c, margin, y, line, 80, 90);
    y += LINE_H;
    text(&c, margin, y, "compute: % of fma peak, memory-bound: % of copy bandwidth", 80, 90);
    y += LINE_H + LINE_H / 2;
    for (long d = 0; d < nd; d++) {
        bar(&c, margin, y + 1, 3 * SCALE * 4, 7 * SCALE, (size_t)d);
        snprintf(line, sizeof(line), "%ld [%s] %s", d + 1, run->devices[d].selector,
                 run->devices[d].info.device_name);
        text(&c, margin + 16 * SCALE, y, line, 70, 0);
        y += LINE_H;
    }
    y += LINE_H / 2;

    long x0 = margin + label_w;
    long plot_top = y + axis_h;
    long plot_bottom = plot_top + (long)nids * group_h;
    for (int p = 0; p <= 100; p += 25) {
        long gx = x0 + plot_w * p / 100;
        snprintf(line, sizeof(line), "%d", p);
        text(&c, gx - (long)strlen(line) * CHAR_W / 2, y, line, 8, 0);
        for (long gy = plot_top; gy < plot_bottom; gy++)
            if (p == 0 || gy % 4 < 2)
                rect(&c, gx, gy, 1, 1, p == 0 ? 0 : 170);
    }
    y = plot_top;
    for (size_t i = 0; i < nids; i++) {
        long gy = y + gap / 2;
        text(&c, margin, gy + (nd * bar_h - 7 * SCALE) / 2, ids[i], 12, 0);
        for (long d = 0; d < nd; d++) {
            const bench_result *r = NULL;
            for (size_t t = 0; t < run->devices[d].count; t++)
                if (!strcmp(run->devices[d].tests[t].id, ids[i]))
                    r = &run->devices[d].tests[t];
            long by = gy + d * bar_h;
            if (!r || !r->ok || r->share < 0) {
                text(&c, x0 + 4, by + (bar_h - 7 * SCALE) / 2 + 1,
                     !r ? "absent" : !r->ok ? "skipped" : "no ceiling", 12, 120);
                continue;
            }
            double share = r->share;
            long w = (long)((share > 100 ? 100 : share) * plot_w / 100.0 + 0.5);
            if (w < 2)
                w = 2;
            bar(&c, x0, by + 1, w, bar_h - 2, (size_t)d);
            snprintf(line, sizeof(line), share > 100 ? ">%.1f" : "%.1f", share);
            text(&c, x0 + w + 6, by + (bar_h - 7 * SCALE) / 2 + 1, line, 9, 0);
        }
        y += group_h;
    }
    int rc = image_write_png(path, c.px, c.w, c.h);
    free(c.px);
    return rc;
}
