/* The loss picture of a training job (tune, pretrain): one set-up of its
 * axes and series for both, so their pictures read alike. */
#ifndef PFX_TOOLS_LOSS_PLOT_H
#define PFX_TOOLS_LOSS_PLOT_H

#include <stddef.h>

#include "chart.h"

/* The token loss per step (losses[n]) against "mean token loss (nats)", the
 * gradient norm before clipping (grad_norms[n]) on a second, log axis, and
 * the evaluation loss as `eval` draws it (its points and style; NULL or no
 * points: not drawn, nor in the legend). x is the step. A chart.h code. */
int loss_plot(const char *path, const char *title, const char *subtitle, const double *losses,
              const float *grad_norms, size_t n, const chart_series *eval);

#endif
