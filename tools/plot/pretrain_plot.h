/* The pictures of `prefixcl pretrain` (pretrain_plot.c). */
#ifndef PFX_TOOLS_PRETRAIN_PLOT_H
#define PFX_TOOLS_PRETRAIN_PLOT_H

#include <stdbool.h>

#include "prefixcl/pretrain.h"

/* dir/loss.png (the training loss and gradient norm per step, the
 * evaluation loss where measured) and, with `gains`, dir/gains.png (the
 * final gain of each layer and head) and dir/gains_steps.png (every head's
 * gain over the steps); without, an earlier run's two gain pictures are
 * removed. CHART_OK or the first chart error (chart.h). */
int pretrain_plot_all(const char *dir, const pfx_pretrain_result *r, bool gains);

#endif
