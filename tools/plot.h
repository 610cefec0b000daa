/* Drawing primitives of the tools' PNG charts (bench --plot, train --plot):
 * an 8-bit grayscale canvas, clipped pixels and rectangles, and text in a
 * caller's 5x7 pixel font. */
#ifndef PFX_TOOLS_PLOT_H
#define PFX_TOOLS_PLOT_H

#include <stddef.h>
#include <stdint.h>

typedef struct plot_canvas {
    uint8_t *px; /* row-major, top row first */
    size_t w, h;
} plot_canvas;

/* The 7 rows of ch's glyph (bit 4 the leftmost column), NULL to skip it. */
typedef const uint8_t *(*plot_glyph_fn)(char ch);

/* One pixel; outside the canvas does nothing. */
void plot_put(plot_canvas *c, long x, long y, uint8_t v);
/* A w x h rectangle at (x0, y0), clipped to the canvas. */
void plot_rect(plot_canvas *c, long x0, long y0, long w, long h, uint8_t v);
/* Text with its top-left corner at (x, y), at most max_chars, each glyph
 * pixel a scale x scale block, 6 * scale apart. */
void plot_text(plot_canvas *c, long x, long y, const char *s, size_t max_chars, int scale,
               uint8_t v, plot_glyph_fn glyph);

#endif
