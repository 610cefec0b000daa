/* The pictures of `prefixcl tune` (through tools/chart/), drawn from the
 * job's result (prefixcl/tune.h) after it: the loss curve, the attention
 * mass on the prefix per layer (base and tuned), the learned gain per layer
 * and head. PNG, or SVG for a ".svg" name; each returns a chart.h code
 * (CHART_UNAVAILABLE without cairo, CHART_ERR_ARG when there is nothing
 * finite to draw). */
#ifndef PFX_TOOLS_TUNE_PLOT_H
#define PFX_TOOLS_TUNE_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "prefixcl/tune.h"

/* The token loss per step, the evaluation loss before and after as points,
 * and the gradient norm (before clipping) on a second (log) axis. */
int tune_plot_loss(const char *path, const pfx_tune_result *r);
/* before/after: [layers * heads]; one line each ("base", "tuned") over the
 * layers, the mean of the heads. */
int tune_plot_prefix_mass(const char *path, const float *before, const float *after, size_t layers,
                          size_t heads);
/* gains: [layers * heads], g of layer l head h at l * heads + h, as a layer x
 * head heat map with its colour bar. */
int tune_plot_gains(const char *path, const float *gains, size_t layers, size_t heads);

/* Every picture of a run into dir: loss.png when a step was done, and after
 * a run that was not stopped attention.png and, with a gain, gains.png
 * (without, an earlier run's gains.png is removed).
 * *pictures: whether they were drawn (false in a build without cairo). 0,
 * or 1 after printing why one could not be drawn. */
int tune_plot_all(const char *dir, const pfx_tune_result *r, bool *pictures);

#endif
