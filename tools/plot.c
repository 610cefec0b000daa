/* Drawing primitives of the tools' PNG charts (plot.h). */
#include "plot.h"

void plot_put(plot_canvas *c, long x, long y, uint8_t v)
{
    if (x >= 0 && y >= 0 && (size_t)x < c->w && (size_t)y < c->h)
        c->px[(size_t)y * c->w + (size_t)x] = v;
}

void plot_rect(plot_canvas *c, long x0, long y0, long w, long h, uint8_t v)
{
    for (long y = y0; y < y0 + h; y++)
        for (long x = x0; x < x0 + w; x++)
            plot_put(c, x, y, v);
}

void plot_text(plot_canvas *c, long x, long y, const char *s, size_t max_chars, int scale,
               uint8_t v, plot_glyph_fn glyph)
{
    for (size_t i = 0; s[i] && i < max_chars; i++, x += 6 * scale) {
        const uint8_t *rows = glyph(s[i]);
        if (!rows)
            continue;
        for (int row = 0; row < 7; row++)
            for (int col = 0; col < 5; col++)
                if (rows[row] & (0x10 >> col))
                    plot_rect(c, x + col * scale, y + row * scale, scale, scale, v);
    }
}
