/* The loss picture of tune and pretrain (loss_plot.h). */
#include "loss_plot.h"

#include <stdlib.h>

int loss_plot(const char *path, const char *title, const char *subtitle, const double *losses,
              const float *grad_norms, size_t n, const chart_series *eval)
{
    double *gn = malloc((n ? n : 1) * sizeof(double));
    if (!gn)
        return CHART_ERR_IO;
    for (size_t i = 0; i < n; i++)
        gn[i] = grad_norms[i];
    chart_series s[3] = {
        { .name = "training loss", .y = losses, .count = n, .line = true },
        { .name = "gradient norm (before clipping)",
          .y = gn,
          .count = n,
          .line = true,
          .right = true },
    };
    const bool evals = eval && eval->count;
    if (evals) {
        s[2] = *eval;
        s[2].name = "evaluation loss";
    }
    chart_line_spec spec = {
        .title = title,
        .subtitle = subtitle,
        .x = { .label = "step" },
        .y = { .label = "mean token loss (nats)" },
        .y2 = { .label = "gradient norm", .log = true },
        .series = s,
        .series_count = evals ? 3 : 2,
    };
    const int rc = chart_lines(path, &spec, 1);
    free(gn);
    return rc;
}
