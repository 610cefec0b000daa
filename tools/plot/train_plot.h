/* The pictures of `prefixcl train` (through tools/chart/): the loss curve,
 * the attention per layer and the learned gains. PNG, or SVG for a ".svg"
 * name; each returns a chart.h code (CHART_UNAVAILABLE without cairo). */
#ifndef PFX_TOOLS_TRAIN_PLOT_H
#define PFX_TOOLS_TRAIN_PLOT_H

#include "train/train_loop.h"

/* The training loss per step (log scale) and the held-out evaluations as
 * points; the learning rate and the gradient norm on a second (log) axis. */
int train_plot_loss(const char *path, const train_config *cfg, const train_result *r);
/* Two panels over the layers: the attention mass on the prefix, and the
 * attention entropy, one line per stack (teacher, student). */
int train_plot_attention(const char *path, const train_config *cfg, const train_result *r);
/* The learned and the hidden gain parameters as layer x head heat maps on
 * one colour scale. */
int train_plot_gains(const char *path, const train_config *cfg, const train_result *r);

#endif
