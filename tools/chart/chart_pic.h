/*
 * The picture under every chart (chart_pic.c): a cairo surface that is PNG
 * or SVG by the output name, text in DejaVu Sans through fontconfig, every
 * label remembered so that an SVG carries it as invisible <text>. Shared by
 * chart_line.c, chart_bar.c and chart_heat.c only.
 */
#ifndef PFX_TOOLS_CHART_PIC_H
#define PFX_TOOLS_CHART_PIC_H

#include <cairo.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct chart_label {
    double x, y, size, angle; /* baseline origin, font size, degrees (clockwise) */
    char *text;
} chart_label;

typedef struct chart_pic {
    cairo_surface_t *surface;
    cairo_t *cr;
    bool svg;
    double width, height;
    char *title;
    chart_label *labels;
    size_t label_count, label_cap;
    unsigned char *svg_text; /* what cairo writes of an SVG, until the label layer joins it */
    size_t svg_len, svg_cap;
    bool failed; /* out of memory while recording */
} chart_pic;

typedef struct chart_rgb {
    double r, g, b;
} chart_rgb;

/* A context for measuring text before the picture's size is known. */
cairo_t *chart_measure_context(void);
void chart_measure_free(cairo_t *cr);

/* Width of text at this size (DejaVu Sans). */
double chart_text_width(cairo_t *cr, const char *text, double size);

/* 0, or CHART_ERR_IO when cairo cannot make a surface of this size. Nothing
 * is written before chart_pic_close. */
int chart_pic_open(chart_pic *pic, const char *path, double width, double height,
                   const char *title);
/* Writes the file (PNG, or SVG with its label layer), replacing it atomically
 * (pfx_output_open: an interrupted run leaves the old one whole), and frees
 * the picture, also on failure. CHART_OK or CHART_ERR_IO (the detail in
 * pfx_last_error(NULL) when the file could not be written). */
int chart_pic_close(chart_pic *pic, const char *path);

/* Text with its anchor at (x, y): ha 0 left, 0.5 centre, 1 right; va 0 top,
 * 0.5 middle, 1 bottom of the capital height. angle in degrees, clockwise,
 * about the anchor. */
void chart_text(chart_pic *pic, const char *text, double x, double y, double size, double ha,
                double va, double angle, chart_rgb colour);
/* A string no wider than max_w at this size: itself, or cut with "..." in
 * out (cap bytes). */
const char *chart_fit(cairo_t *cr, const char *text, double size, double max_w, char *out,
                      size_t cap);

/* Series colour i (a ten-colour cycle readable on white). */
chart_rgb chart_series_colour(size_t i);
void chart_set_colour(cairo_t *cr, chart_rgb c);

/* Round ticks over [lo, hi]: the step, and lo/hi widened to multiples of it.
 * Returns the number of ticks. */
size_t chart_nice_ticks(double *lo, double *hi, size_t target, double *step);
/* A tick value as short text ("0.25", "1e-05", "300"). */
void chart_format_tick(double v, double step, char *out, size_t cap);

#endif
