/* The loss curve of `prefixcl train` as a PNG line plot (tools/image.h):
 * log10(loss) against the step, with axes, tick labels and a title drawn in
 * a built-in 5x7 pixel font. */
#ifndef PFX_TOOLS_TRAIN_PLOT_H
#define PFX_TOOLS_TRAIN_PLOT_H

#include <stddef.h>

/* 0 on success, -1 on an I/O error or no finite positive value. */
int train_plot_loss(const char *path, const double *losses, size_t count);

#endif
