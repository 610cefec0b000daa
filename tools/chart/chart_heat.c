/* Heat maps (chart.h): a matrix with string labels on both axes, marked
 * leading columns, a colour bar; one panel or a grid of panels. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "chart_pic.h"

#define FONT_SIZE   10.0
#define TITLE_SIZE  13.0
#define LABEL_MAX_W 110.0
#define INK         ((chart_rgb){ 0.1, 0.1, 0.1 })
#define GREY        ((chart_rgb){ 0.4, 0.4, 0.4 })

typedef struct geom {
    double cw, ch;       /* pixels per matrix cell: width, height */
    double row_w, col_h; /* room for the row labels (left) and column labels (below) */
    double map_x, map_y; /* the map's corner, relative to the panel */
    double w, h;         /* the whole panel */
} geom;

typedef struct range {
    double lo, hi;
    bool diverging;
} range;

/* Viridis (sequential) and red-blue (diverging), linear between stops. */
static chart_rgb colour_at(double t, bool diverging)
{
    static const chart_rgb viridis[] = {
        { 0.267, 0.005, 0.329 }, { 0.283, 0.141, 0.458 }, { 0.254, 0.265, 0.530 },
        { 0.207, 0.372, 0.553 }, { 0.164, 0.471, 0.558 }, { 0.128, 0.567, 0.551 },
        { 0.135, 0.659, 0.518 }, { 0.478, 0.821, 0.318 }, { 0.993, 0.906, 0.144 },
    };
    static const chart_rgb rdbu[] = {
        { 0.129, 0.400, 0.675 }, { 0.573, 0.773, 0.871 }, { 0.969, 0.969, 0.969 },
        { 0.957, 0.647, 0.510 }, { 0.698, 0.094, 0.169 },
    };
    const chart_rgb *stops = diverging ? rdbu : viridis;
    size_t n = diverging ? 5 : 9;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double f = t * (double)(n - 1);
    size_t i = (size_t)f;
    if (i >= n - 1)
        return stops[n - 1];
    double u = f - (double)i;
    return (chart_rgb){ stops[i].r + u * (stops[i + 1].r - stops[i].r),
                        stops[i].g + u * (stops[i + 1].g - stops[i].g),
                        stops[i].b + u * (stops[i + 1].b - stops[i].b) };
}

static const char *label_of(const char *const *labels, size_t i, char *buf, size_t cap)
{
    if (labels && labels[i])
        return labels[i];
    snprintf(buf, cap, "%zu", i);
    return buf;
}

/* Every k-th label so that labels do not overlap. */
static size_t label_every(double cell)
{
    size_t k = 1;
    while (cell * (double)k < FONT_SIZE + 2)
        k++;
    return k;
}

static double widest_label(cairo_t *m, const char *const *labels, size_t n, size_t every)
{
    double w = 0;
    char buf[32], fit[64];
    for (size_t i = 0; i < n; i += every)
        w = fmax(w, chart_text_width(m,
                                     chart_fit(m, label_of(labels, i, buf, sizeof(buf)), FONT_SIZE,
                                               LABEL_MAX_W, fit, sizeof(fit)),
                                     FONT_SIZE));
    return w;
}

/* A matrix of at most this many rows and columns with labels gets cells
 * tall enough for every label (at most 128 x 12 pixels a side); a larger
 * one labels every k-th row and column. */
#define LABEL_ALL_MAX 128

static double clamp_cell(double c, double max)
{
    return c < 2 ? 2 : c > max ? max : c;
}

static geom measure(cairo_t *m, const chart_heatmap_spec *s, double target)
{
    geom g;
    size_t big = s->rows > s->cols ? s->rows : s->cols;
    if (s->fill) { /* each direction on its own */
        g.cw = clamp_cell(floor(target / (double)s->cols), 80);
        g.ch = clamp_cell(floor(target / (double)s->rows), 40);
    } else {
        g.cw = g.ch = clamp_cell(floor(target / (double)big), 40);
        /* labelled tokens: each one legible, where the map stays in reach */
        if ((s->row_labels || s->col_labels) && big <= LABEL_ALL_MAX && g.cw < FONT_SIZE + 2)
            g.cw = g.ch = FONT_SIZE + 2;
    }
    g.row_w = widest_label(m, s->row_labels, s->rows, label_every(g.ch)) + 6;
    g.col_h = widest_label(m, s->col_labels, s->cols, label_every(g.cw)) + 6;
    double axis = 18; /* an axis title beside the labels */
    g.map_x = (s->row_axis ? axis : 0) + g.row_w + 4;
    g.map_y = 24 + (s->marked_cols ? 16 : 0);
    double map_w = g.cw * (double)s->cols, map_h = g.ch * (double)s->rows;
    double title_w = s->title ? chart_text_width(m, s->title, TITLE_SIZE) : 0;
    g.w = fmax(g.map_x + map_w + 8, title_w + 8);
    g.h = g.map_y + map_h + 4 + g.col_h + (s->col_axis ? axis : 0) + 8;
    return g;
}

static void data_range(const chart_heatmap_spec *s, double *lo, double *hi)
{
    for (size_t i = 0; i < s->rows * s->cols; i++)
        if (isfinite(s->values[i])) {
            *lo = fmin(*lo, s->values[i]);
            *hi = fmax(*hi, s->values[i]);
        }
}

static range finish_range(double lo, double hi, bool diverging)
{
    if (diverging) {
        double a = fmax(fabs(lo), fabs(hi));
        if (!(a > 0))
            a = 1;
        return (range){ -a, a, true };
    }
    if (!(hi > lo)) {
        hi = lo + (lo != 0 ? fabs(lo) * 0.1 : 1);
    }
    return (range){ lo, hi, false };
}

/* The matrix's cells: an image scaled without smoothing (PNG), rectangles
 * (SVG, where viewers smooth scaled images). */
static void draw_cells(chart_pic *pic, const chart_heatmap_spec *s, const range *r, double x,
                       double y, double cw, double ch)
{
    cairo_t *cr = pic->cr;
    if (!pic->svg) {
        cairo_surface_t *img =
            cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)s->cols, (int)s->rows);
        if (cairo_surface_status(img) == CAIRO_STATUS_SUCCESS) {
            cairo_surface_flush(img);
            unsigned char *px = cairo_image_surface_get_data(img);
            int stride = cairo_image_surface_get_stride(img);
            for (size_t i = 0; i < s->rows; i++)
                for (size_t j = 0; j < s->cols; j++) {
                    float v = s->values[i * s->cols + j];
                    chart_rgb c = isfinite(v)
                                      ? colour_at((v - r->lo) / (r->hi - r->lo), r->diverging)
                                      : (chart_rgb){ 0.6, 0.6, 0.6 };
                    uint32_t p = (uint32_t)lround(c.r * 255) << 16 |
                                 (uint32_t)lround(c.g * 255) << 8 | (uint32_t)lround(c.b * 255);
                    memcpy(px + (size_t)stride * i + 4 * j, &p, 4);
                }
            cairo_surface_mark_dirty(img);
            cairo_save(cr);
            cairo_translate(cr, x, y);
            cairo_scale(cr, cw, ch);
            cairo_set_source_surface(cr, img, 0, 0);
            cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
            cairo_rectangle(cr, 0, 0, (double)s->cols, (double)s->rows);
            cairo_fill(cr);
            cairo_restore(cr);
        } else {
            pic->failed = true;
        }
        cairo_surface_destroy(img);
        return;
    }
    for (size_t i = 0; i < s->rows; i++)
        for (size_t j = 0; j < s->cols; j++) {
            float v = s->values[i * s->cols + j];
            chart_set_colour(cr, isfinite(v)
                                     ? colour_at((v - r->lo) / (r->hi - r->lo), r->diverging)
                                     : (chart_rgb){ 0.6, 0.6, 0.6 });
            /* a hair wider, so that no seams show between cells */
            cairo_rectangle(cr, x + cw * (double)j, y + ch * (double)i, cw + 0.3, ch + 0.3);
            cairo_fill(cr);
        }
}

static void draw_panel(chart_pic *pic, const chart_heatmap_spec *s, const geom *g, const range *r,
                       double ox, double oy)
{
    cairo_t *cr = pic->cr;
    double mx = ox + g->map_x, my = oy + g->map_y;
    double map_w = g->cw * (double)s->cols, map_h = g->ch * (double)s->rows;
    if (s->title)
        chart_text(pic, s->title, ox + 2, oy + 4, TITLE_SIZE, 0, 0, 0, INK);
    draw_cells(pic, s, r, mx, my, g->cw, g->ch);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, mx, my, map_w, map_h);
    cairo_stroke(cr);

    char buf[32], fit[64];
    for (size_t i = 0, every = label_every(g->ch); i < s->rows; i += every)
        chart_text(pic,
                   chart_fit(cr, label_of(s->row_labels, i, buf, sizeof(buf)), FONT_SIZE,
                             LABEL_MAX_W, fit, sizeof(fit)),
                   mx - 4, my + g->ch * ((double)i + 0.5), FONT_SIZE, 1, 0.5, 0, INK);
    for (size_t j = 0, every = label_every(g->cw); j < s->cols; j += every)
        chart_text(pic,
                   chart_fit(cr, label_of(s->col_labels, j, buf, sizeof(buf)), FONT_SIZE,
                             LABEL_MAX_W, fit, sizeof(fit)),
                   mx + g->cw * ((double)j + 0.5), my + map_h + 4, FONT_SIZE, 1, 0.5, -90,
                   j < s->marked_cols ? (chart_rgb){ 0.70, 0.10, 0.15 } : INK);
    if (s->row_axis)
        chart_text(pic, s->row_axis, ox + 2, my + map_h / 2, FONT_SIZE + 1, 0.5, 1, -90, INK);
    if (s->col_axis)
        chart_text(pic, s->col_axis, mx + map_w / 2, my + map_h + 4 + g->col_h + 2, FONT_SIZE + 1,
                   0.5, 0, 0, INK);
    if (s->marked_cols) {
        size_t n = s->marked_cols < s->cols ? s->marked_cols : s->cols;
        double x1 = mx + g->cw * (double)n;
        /* a bracket over the marked columns, a line where they end */
        cairo_set_source_rgb(cr, 0.70, 0.10, 0.15);
        cairo_set_line_width(cr, 1.5);
        cairo_move_to(cr, mx, my - 3);
        cairo_line_to(cr, mx, my - 8);
        cairo_line_to(cr, x1, my - 8);
        cairo_line_to(cr, x1, my - 3);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 1, 1, 1);
        cairo_set_line_width(cr, 2);
        cairo_move_to(cr, x1, my);
        cairo_line_to(cr, x1, my + map_h);
        cairo_stroke(cr);
        if (s->marked_name)
            chart_text(pic, s->marked_name, mx, my - 11, FONT_SIZE, 0, 1, 0,
                       (chart_rgb){ 0.70, 0.10, 0.15 });
    }
}

#define BAR_W 14.0

static double colour_bar_width(cairo_t *m, const chart_heatmap_spec *s)
{
    return 16 + BAR_W + 6 + chart_text_width(m, "-0.000", FONT_SIZE) + (s->scale_label ? 22 : 0) +
           8;
}

static void colour_bar(chart_pic *pic, const range *r, const char *label, double x, double y,
                       double h)
{
    cairo_t *cr = pic->cr;
    const int steps = 64;
    for (int i = 0; i < steps; i++) {
        chart_set_colour(cr, colour_at(1.0 - (i + 0.5) / steps, r->diverging));
        cairo_rectangle(cr, x, y + h * i / steps, BAR_W, h / steps + 0.5);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x, y, BAR_W, h);
    cairo_stroke(cr);
    double lo = r->lo, hi = r->hi, step;
    chart_nice_ticks(&lo, &hi, 5, &step);
    char buf[32];
    double tw = 0;
    for (double t = lo; t <= hi + 1e-9 * fabs(hi - lo); t += step) {
        if (t < r->lo - 1e-9 * (r->hi - r->lo) || t > r->hi + 1e-9 * (r->hi - r->lo))
            continue;
        double ty = y + h * (1.0 - (t - r->lo) / (r->hi - r->lo));
        cairo_move_to(cr, x + BAR_W, ty);
        cairo_line_to(cr, x + BAR_W + 3, ty);
        cairo_stroke(cr);
        chart_format_tick(t, step, buf, sizeof(buf));
        chart_text(pic, buf, x + BAR_W + 6, ty, FONT_SIZE, 0, 0.5, 0, INK);
        tw = fmax(tw, chart_text_width(cr, buf, FONT_SIZE));
    }
    if (label)
        chart_text(pic, label, x + BAR_W + 12 + tw, y + h / 2, FONT_SIZE + 1, 0.5, 1, 90, INK);
}

static bool valid(const chart_heatmap_spec *s)
{
    return s && s->values && s->rows && s->cols && s->rows <= 4096 && s->cols <= 4096;
}

int chart_heatmap_grid(const char *path, const char *title, const chart_heatmap_spec *panels,
                       size_t count, size_t columns)
{
    if (!path || !panels || !count || !columns)
        return CHART_ERR_ARG;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < count; i++) {
        if (!valid(&panels[i]))
            return CHART_ERR_ARG;
        data_range(&panels[i], &lo, &hi);
    }
    if (panels[0].vmax > panels[0].vmin) {
        lo = panels[0].vmin;
        hi = panels[0].vmax;
    } else if (!(lo <= hi)) {
        lo = 0;
        hi = 1; /* nothing finite: all grey */
    }
    range r = finish_range(lo, hi, panels[0].diverging);
    if (columns > count)
        columns = count;
    size_t rows = (count + columns - 1) / columns;

    cairo_t *m = chart_measure_context();
    double target = count == 1 ? 640 : fmax(120, 900 / (double)columns);
    geom cell = { 0 };
    geom *g = calloc(count, sizeof(geom));
    if (!g) {
        chart_measure_free(m);
        return CHART_ERR_IO;
    }
    for (size_t i = 0; i < count; i++) {
        g[i] = measure(m, &panels[i], target);
        cell.w = fmax(cell.w, g[i].w);
        cell.h = fmax(cell.h, g[i].h);
    }
    if (columns > 1)
        cell.w += 28; /* apart from the next panel's axis title */
    double bar_w = colour_bar_width(m, &panels[0]);
    double title_h = title ? 34 : 0;
    double width = 16 + cell.w * (double)columns + bar_w;
    if (title)
        width = fmax(width, chart_text_width(m, title, 15) + 32);
    double bar_h = fmax(100, g[0].ch * (double)panels[0].rows);
    double height =
        fmax(12 + title_h + cell.h * (double)rows + 8, 12 + title_h + g[0].map_y + bar_h + 24);
    chart_measure_free(m);

    chart_pic pic;
    int rc = chart_pic_open(&pic, path, width, height, title ? title : panels[0].title);
    if (rc != CHART_OK) {
        free(g);
        return rc;
    }
    if (title)
        chart_text(&pic, title, 16, 12, 15, 0, 0, 0, INK);
    for (size_t i = 0; i < count; i++)
        draw_panel(&pic, &panels[i], &g[i], &r, 16 + cell.w * (double)(i % columns),
                   12 + title_h + cell.h * (double)(i / columns));
    colour_bar(&pic, &r, panels[0].scale_label, 16 + cell.w * (double)columns + 16,
               12 + title_h + g[0].map_y, bar_h);
    free(g);
    return chart_pic_close(&pic, path);
}

int chart_heatmap(const char *path, const chart_heatmap_spec *spec)
{
    return chart_heatmap_grid(path, NULL, spec, 1, 1);
}
