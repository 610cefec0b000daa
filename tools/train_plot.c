/* Loss curve plot (train_plot.h). */
#include "train_plot.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "plot.h"

#define W 640
#define HGT 400
#define LEFT 70
#define RIGHT 20
#define TOP 30
#define BOTTOM 50

/* 5x7 glyphs, one byte per row, bit 4 = leftmost column. */
static const struct { char c; uint8_t rows[7]; } font[] = {
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
    { '.', { 0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C } },
    { '-', { 0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00 } },
    { '+', { 0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00 } },
    { '(', { 0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02 } },
    { ')', { 0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08 } },
    { 'e', { 0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E } },
    { 'g', { 0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E } },
    { 'l', { 0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E } },
    { 'o', { 0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E } },
    { 'p', { 0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10 } },
    { 'r', { 0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10 } },
    { 's', { 0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E } },
    { 't', { 0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06 } },
    { 'v', { 0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04 } },
    { 'i', { 0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E } },
    { 'n', { 0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11 } },
    { 'a', { 0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F } },
    { 'M', { 0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11 } },
    { 'S', { 0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E } },
    { 'E', { 0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F } },
    { 'b', { 0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E } },
    { 'c', { 0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E } },
    { 'd', { 0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F } },
    { 'f', { 0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08 } },
    { 'h', { 0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11 } },
    { 'k', { 0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12 } },
    { 'm', { 0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11 } },
    { 'u', { 0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D } },
    { 'w', { 0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A } },
    { 'x', { 0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11 } },
    { 'y', { 0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E } },
    { ':', { 0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00 } },
    { ',', { 0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08 } },
};

static void put(uint8_t *img, long x, long y, uint8_t v)
{
    plot_put(&(plot_canvas){ img, W, HGT }, x, y, v);
}

/* A glyph the font lacks (and space) is skipped. */
const uint8_t *train_plot_glyph(char ch)
{
    for (size_t i = 0; i < sizeof(font) / sizeof(font[0]); i++)
        if (font[i].c == ch)
            return font[i].rows;
    return NULL;
}

/* Text at (x, y) top-left, scale 1 or 2. */
static void text(uint8_t *img, long x, long y, const char *s, int scale)
{
    plot_text(&(plot_canvas){ img, W, HGT }, x, y, s, SIZE_MAX, scale, 0, train_plot_glyph);
}

static void line(uint8_t *img, long x0, long y0, long x1, long y1, uint8_t v)
{
    long dx = labs(x1 - x0), dy = -labs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    long err = dx + dy;
    for (;;) {
        put(img, x0, y0, v);
        put(img, x0, y0 + 1, v); /* 2 pixels thick */
        if (x0 == x1 && y0 == y1)
            break;
        long e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

int train_plot_loss(const char *path, const double *losses, size_t count)
{
    return train_plot_curve(path, losses, count, "MSE loss (log) vs step");
}

int train_plot_curve(const char *path, const double *losses, size_t count, const char *title)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < count; i++)
        if (isfinite(losses[i]) && losses[i] > 0) {
            double v = log10(losses[i]);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    if (!isfinite(lo))
        return -1;
    lo = floor(lo);
    hi = ceil(hi);
    if (hi <= lo)
        hi = lo + 1;
    uint8_t *img = malloc((size_t)W * HGT);
    if (!img)
        return -1;
    memset(img, 255, (size_t)W * HGT);
    const long x0 = LEFT, x1 = W - RIGHT, y0 = TOP, y1 = HGT - BOTTOM;
    /* grid and y ticks: one per decade */
    char buf[32];
    for (double dec = lo; dec <= hi + 1e-9; dec += 1) {
        long y = y1 - (long)lround((dec - lo) / (hi - lo) * (double)(y1 - y0));
        for (long x = x0; x <= x1; x += 4)
            put(img, x, y, 200);
        snprintf(buf, sizeof(buf), "1e%d", (int)dec);
        text(img, x0 - 8 - 6 * (long)strlen(buf), y - 3, buf, 1);
    }
    /* x ticks: 5 intervals */
    for (int t = 0; t <= 5; t++) {
        size_t step = count > 1 ? (size_t)lround((double)(count - 1) * t / 5.0) : 0;
        long x = x0 + (count > 1 ? (long)lround((double)step / (double)(count - 1) *
                                                (double)(x1 - x0)) : 0);
        line(img, x, y1, x, y1 + 4, 0);
        snprintf(buf, sizeof(buf), "%zu", step + 1);
        text(img, x - 3 * (long)strlen(buf), y1 + 9, buf, 1);
    }
    /* axes */
    line(img, x0, y0, x0, y1, 0);
    line(img, x0, y1, x1, y1, 0);
    text(img, (x0 + x1) / 2 - 24, HGT - 22, "step", 2);
    text(img, 8, 8, title, 2);
    /* the curve */
    long px = -1, py = -1;
    for (size_t i = 0; i < count; i++) {
        if (!(isfinite(losses[i]) && losses[i] > 0))
            continue;
        long x = x0 + (count > 1 ? (long)lround((double)i / (double)(count - 1) *
                                                (double)(x1 - x0)) : 0);
        long y = y1 - (long)lround((log10(losses[i]) - lo) / (hi - lo) * (double)(y1 - y0));
        if (px >= 0)
            line(img, px, py, x, y, 40);
        px = x;
        py = y;
    }
    int rc = image_write_png(path, img, W, HGT);
    free(img);
    return rc;
}
