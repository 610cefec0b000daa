/* The pictures of `prefixcl pretrain` (pretrain_plot.h). */
#include "pretrain_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chart.h"
#include "common/tool_util.h"
#include "loss_plot.h"
#include "tune_plot.h"

static int plot_loss(const char *path, const pfx_pretrain_result *r)
{
    const size_t n = r->steps_done;
    double *ex = malloc((n + 1) * sizeof(double)), *ey = malloc((n + 1) * sizeof(double));
    int rc = CHART_ERR_IO;
    if (ex && ey) {
        size_t evals = 0;
        for (size_t s = 0; s <= n; s++)
            if (isfinite(r->eval_losses[s])) {
                ex[evals] = (double)s;
                ey[evals++] = r->eval_losses[s];
            }
        const chart_series eval = {
            .x = ex, .y = ey, .count = evals, .line = true, .points = true
        };
        char sub[200];
        snprintf(sub, sizeof(sub), "%s, %zu layers, %zu heads, %zu of %zu steps, %zu tokens a step",
                 r->shape.model_type, r->shape.layers, r->shape.heads, n, r->steps,
                 r->tokens_per_step);
        rc = loss_plot(path, "prefixcl pretrain: token loss", sub, r->losses, r->grad_norms, n,
                       &eval);
    }
    free(ex);
    free(ey);
    return rc;
}

/* Rows: every stride-th step, at most about 120 (round step numbers down
 * the side), and the last; columns: layer-major heads ("L0H0", "L0H1",
 * ...), as wide as the picture. */
static int plot_gain_steps(const char *path, const pfx_pretrain_result *r)
{
    const size_t LH = r->shape.layers * r->shape.heads, n = r->steps_done + 1;
    const size_t stride = (n + 119) / 120;
    const size_t rows = (n - 1) / stride + 1 + ((n - 1) % stride != 0);
    float *v = malloc(rows * LH * sizeof(float));
    char(*names)[48] = malloc((rows + LH) * sizeof(*names));
    const char **labels = malloc((rows + LH) * sizeof(char *));
    int rc = CHART_ERR_IO;
    if (v && names && labels) {
        for (size_t i = 0; i < rows; i++) {
            const size_t s = i + 1 < rows ? i * stride : n - 1;
            for (size_t k = 0; k < LH; k++)
                v[i * LH + k] = r->gains[s * LH + k];
            snprintf(names[i], sizeof(names[i]), "%zu", s);
            labels[i] = names[i];
        }
        for (size_t k = 0; k < LH; k++) {
            snprintf(names[rows + k], sizeof(names[0]), "L%zuH%zu", k / r->shape.heads,
                     k % r->shape.heads);
            labels[rows + k] = names[rows + k];
        }
        chart_heatmap_spec spec = {
            .title = "gain per layer (L) and head (H) over the steps",
            .values = v,
            .rows = rows,
            .cols = LH,
            .row_labels = labels,
            .col_labels = labels + rows,
            .row_axis = "step",
            .col_axis = "layer and head",
            .diverging = true,
            .fill = true,
            .scale_label = "gain parameter g",
        };
        rc = chart_heatmap(path, &spec);
    }
    free(v);
    free(names);
    free(labels);
    return rc;
}

static char *in_dir(const char *dir, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

int pretrain_plot_all(const char *dir, const pfx_pretrain_result *r, bool gains)
{
    char path[4200];
    int rc = plot_loss(in_dir(dir, "loss.png", path, sizeof(path)), r);
    if (rc == CHART_OK && gains)
        rc = tune_plot_gains(in_dir(dir, "gains.png", path, sizeof(path)),
                             r->gains + r->steps_done * r->shape.layers * r->shape.heads,
                             r->shape.layers, r->shape.heads);
    if (rc == CHART_OK && gains)
        rc = plot_gain_steps(in_dir(dir, "gains_steps.png", path, sizeof(path)), r);
    if (!gains && (!tool_remove_stale("pretrain", dir, "gains.png") ||
                   !tool_remove_stale("pretrain", dir, "gains_steps.png")))
        rc = rc == CHART_OK ? CHART_ERR_IO : rc;
    return rc;
}
