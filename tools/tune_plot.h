/* The pictures of `prefixcl tune` (PNG, tools/image.h), kept in one file so
 * that the drawing layer can be swapped: the loss curve, the attention mass
 * on the prefix per layer (before and after), the learned gain per layer and
 * head. Each returns 0, or -1 when the file cannot be written or there is
 * nothing finite to draw. */
#ifndef PFX_TOOLS_TUNE_PLOT_H
#define PFX_TOOLS_TUNE_PLOT_H

#include <stddef.h>

int tune_plot_loss(const char *path, const double *losses, size_t count);
/* before/after: [layers * heads], averaged over heads per layer. */
int tune_plot_prefix_mass(const char *path, const float *before, const float *after, size_t layers,
                          size_t heads);
/* gains: [layers * heads], g of layer l head h at l * heads + h. */
int tune_plot_gains(const char *path, const float *gains, size_t layers, size_t heads);

#endif
