/* The loss curve of `prefixcl train` as a PNG line plot (tools/image.h):
 * log10(loss) against the step, with axes, tick labels and a title drawn in
 * a built-in 5x7 pixel font. */
#ifndef PFX_TOOLS_TRAIN_PLOT_H
#define PFX_TOOLS_TRAIN_PLOT_H

#include <stddef.h>
#include <stdint.h>

/* 0 on success, -1 on an I/O error or no finite positive value. */
int train_plot_loss(const char *path, const double *losses, size_t count);
/* The same with another title. */
int train_plot_curve(const char *path, const double *losses, size_t count, const char *title);
/* The 5x7 font of these plots (digits, most lower-case letters, M S E and
 * some punctuation); NULL for a character it lacks. */
const uint8_t *train_plot_glyph(char ch);

#endif
