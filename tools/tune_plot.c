/* The pictures of `prefixcl tune` (tune_plot.h): grayscale PNGs drawn with
 * tools/plot.h in the 5x7 font of train_plot.c. */
#include "tune_plot.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "plot.h"
#include "train_plot.h"

#define W 640
#define HGT 400
#define LEFT 60
#define RIGHT 20
#define TOP 40
#define BOTTOM 50

int tune_plot_loss(const char *path, const double *losses, size_t count)
{
    return train_plot_curve(path, losses, count, "token loss (log) vs step");
}

static void text(plot_canvas *c, long x, long y, const char *s, int scale)
{
    plot_text(c, x, y, s, SIZE_MAX, scale, 0, train_plot_glyph);
}

static plot_canvas canvas(size_t w, size_t h)
{
    plot_canvas c = { malloc(w * h), w, h };
    if (c.px)
        memset(c.px, 255, w * h);
    return c;
}

static int finish(const char *path, plot_canvas *c)
{
    int rc = image_write_png(path, c->px, c->w, c->h);
    free(c->px);
    return rc;
}

int tune_plot_prefix_mass(const char *path, const float *before, const float *after, size_t layers,
                          size_t heads)
{
    if (!layers || !heads)
        return -1;
    plot_canvas c = canvas(W, HGT);
    if (!c.px)
        return -1;
    const long x0 = LEFT, x1 = W - RIGHT, y0 = TOP, y1 = HGT - BOTTOM;
    char buf[32];
    for (int t = 0; t <= 4; t++) { /* y from 0 to 1 */
        long y = y1 - (long)lround(t / 4.0 * (double)(y1 - y0));
        for (long x = x0; x <= x1; x += 4)
            plot_put(&c, x, y, 200);
        snprintf(buf, sizeof(buf), "%.2f", t / 4.0);
        text(&c, x0 - 8 - 6 * (long)strlen(buf), y - 3, buf, 1);
    }
    const double slot = (double)(x1 - x0) / (double)layers;
    for (size_t l = 0; l < layers; l++) {
        double m[2] = { 0, 0 };
        for (size_t h = 0; h < heads; h++) {
            m[0] += before[l * heads + h] / (double)heads;
            m[1] += after[l * heads + h] / (double)heads;
        }
        for (int k = 0; k < 2; k++) {
            double v = isfinite(m[k]) ? fmin(fmax(m[k], 0.0), 1.0) : 0.0;
            long bw = (long)(slot * 0.35), bx = x0 + (long)(slot * (double)l + slot * 0.12) + k * bw;
            long bh = (long)lround(v * (double)(y1 - y0));
            plot_rect(&c, bx, y1 - bh, bw, bh, k ? 40 : 170);
        }
        snprintf(buf, sizeof(buf), "%zu", l);
        text(&c, x0 + (long)(slot * ((double)l + 0.5)) - 3 * (long)strlen(buf), y1 + 8, buf, 1);
    }
    plot_rect(&c, x0, y0, 2, y1 - y0, 0);
    plot_rect(&c, x0, y1, x1 - x0, 2, 0);
    text(&c, 8, 8, "attention mass on the prefix per layer", 2);
    text(&c, 8, 26, "grey: before, black: after (mean of the heads)", 1);
    text(&c, (x0 + x1) / 2 - 30, HGT - 22, "layer", 2);
    return finish(path, &c);
}

int tune_plot_gains(const char *path, const float *gains, size_t layers, size_t heads)
{
    if (!layers || !heads)
        return -1;
    double amax = 0;
    for (size_t i = 0; i < layers * heads; i++)
        if (isfinite(gains[i]))
            amax = fmax(amax, fabs(gains[i]));
    const size_t cell = heads * 24 > 520 ? (520 / heads ? 520 / heads : 1) : 24;
    const size_t rowh = layers * 24 > 300 ? (300 / layers ? 300 / layers : 1) : 24;
    const size_t w = LEFT + heads * cell + RIGHT + 40, h = TOP + 20 + layers * rowh + BOTTOM;
    plot_canvas c = canvas(w < 420 ? 420 : w, h);
    if (!c.px)
        return -1;
    char buf[48];
    for (size_t l = 0; l < layers; l++) {
        for (size_t hd = 0; hd < heads; hd++) {
            double g = gains[l * heads + hd];
            /* mid grey is 0, white the largest negative, black the largest positive */
            double v = amax > 0 && isfinite(g) ? g / amax : 0.0;
            uint8_t px = (uint8_t)lround(127.5 - 127.5 * v);
            plot_rect(&c, LEFT + (long)(hd * cell), TOP + 20 + (long)(l * rowh), (long)cell - 1, (long)rowh - 1,
                      px);
        }
        snprintf(buf, sizeof(buf), "%zu", l);
        text(&c, LEFT - 8 - 6 * (long)strlen(buf), TOP + 20 + (long)(l * rowh + rowh / 2) - 3, buf, 1);
    }
    for (size_t hd = 0; hd < heads; hd += heads > 16 ? 4 : 1) {
        snprintf(buf, sizeof(buf), "%zu", hd);
        text(&c, LEFT + (long)(hd * cell + cell / 2) - 3 * (long)strlen(buf), TOP + 22 + (long)(layers * rowh), buf,
             1);
    }
    text(&c, 8, 8, "gain per layer (rows) and head", 2);
    snprintf(buf, sizeof(buf), "black +%.3g, grey 0, white -%.3g", amax, amax);
    text(&c, 8, 28, buf, 1);
    return finish(path, &c);
}
