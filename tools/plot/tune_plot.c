/* The pictures of `prefixcl tune` (tune_plot.h). */
#include "tune_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chart.h"
#include "common/tool_util.h"
#include "loss_plot.h"

int tune_plot_loss(const char *path, const pfx_tune_result *r)
{
    const size_t n = r->steps_done;
    /* the evaluation set before the first step of the run and after its last
     * (a resumed or stopped run has not measured them: NAN, not drawn) */
    const bool after = n == r->steps && !r->stopped;
    const double eval_x[2] = { (double)r->first_step, (double)n };
    const double eval_y[2] = { r->first_step == 0 ? r->eval_before : NAN,
                               after ? r->eval_after : NAN };
    const bool evals = isfinite(eval_y[0]) || isfinite(eval_y[1]);
    const chart_series eval = { .x = eval_x, .y = eval_y, .count = evals ? 2 : 0, .points = true };
    char sub[200];
    snprintf(sub, sizeof(sub), "%zu layers, %zu heads, %zu of %zu steps", r->shape.layers,
             r->shape.heads, n, r->steps);
    return loss_plot(path, "prefixcl tune: token loss", sub, r->losses, r->grad_norms, n, &eval);
}

int tune_plot_prefix_mass(const char *path, const float *before, const float *after, size_t layers,
                          size_t heads)
{
    if (!layers || !heads)
        return CHART_ERR_ARG;
    double *v = malloc(2 * layers * sizeof(double));
    char(*names)[32] = malloc(layers * sizeof(*names));
    const char **ticks = malloc(layers * sizeof(char *));
    int rc = CHART_ERR_IO;
    if (v && names && ticks) {
        for (size_t l = 0; l < layers; l++) {
            double b = 0, a = 0;
            for (size_t h = 0; h < heads; h++) {
                b += before[l * heads + h] / (double)heads;
                a += after[l * heads + h] / (double)heads;
            }
            v[l] = b;
            v[layers + l] = a;
            snprintf(names[l], sizeof(names[l]), "%zu", l);
            ticks[l] = names[l];
        }
        chart_series s[] = {
            { .name = "base", .y = v, .count = layers, .line = true, .points = true },
            { .name = "tuned", .y = v + layers, .count = layers, .line = true, .points = true },
        };
        chart_line_spec spec = {
            .title = "attention mass on the prefix per layer",
            .subtitle = "mean of the heads, on the first evaluation batch",
            .x = { .label = "layer" },
            .y = { .label = "prefix mass", .min = 0, .max = 1 },
            .x_ticks = ticks,
            .x_tick_count = layers,
            .series = s,
            .series_count = 2,
        };
        rc = chart_lines(path, &spec, 1);
    }
    free(v);
    free(names);
    free(ticks);
    return rc;
}

int tune_plot_gains(const char *path, const float *gains, size_t layers, size_t heads)
{
    if (!layers || !heads)
        return CHART_ERR_ARG;
    char(*names)[32] = malloc((layers + heads) * sizeof(*names));
    const char **labels = malloc((layers + heads) * sizeof(char *));
    int rc = CHART_ERR_IO;
    if (names && labels) {
        for (size_t l = 0; l < layers; l++)
            snprintf(names[l], sizeof(names[l]), "%zu", l);
        for (size_t h = 0; h < heads; h++)
            snprintf(names[layers + h], sizeof(names[0]), "%zu", h);
        for (size_t i = 0; i < layers + heads; i++)
            labels[i] = names[i];
        chart_heatmap_spec spec = {
            .title = "learned gain per layer and head",
            .values = gains,
            .rows = layers,
            .cols = heads,
            .row_labels = labels,
            .col_labels = labels + layers,
            .row_axis = "layer",
            .col_axis = "head",
            .diverging = true,
            .scale_label = "gain parameter g",
        };
        rc = chart_heatmap(path, &spec);
    }
    free(names);
    free(labels);
    return rc;
}

/* A picture's chart.h code: 0 when drawn or when the build has no cairo
 * (*pictures false), else 1 after printing why. */
static int drawn(bool *pictures, const char *path, int code)
{
    if (code == CHART_UNAVAILABLE) {
        *pictures = false;
        return 0;
    }
    if (code == CHART_OK) {
        *pictures = true;
        return 0;
    }
    fprintf(stderr, "prefixcl tune: cannot draw %s: %s%s%s\n", path, chart_strerror(code),
            code == CHART_ERR_IO ? ": " : "", code == CHART_ERR_IO ? pfx_last_error(NULL) : "");
    return 1;
}

int tune_plot_all(const char *dir, const pfx_tune_result *r, bool *pictures)
{
    char path[4200];
    const size_t L = r->shape.layers, H = r->shape.heads;
    *pictures = false;
    snprintf(path, sizeof(path), "%s/loss.png", dir);
    if (r->steps_done && drawn(pictures, path, tune_plot_loss(path, r)))
        return 1;
    if (r->stopped)
        return 0;
    snprintf(path, sizeof(path), "%s/attention.png", dir);
    if (r->mass_before && r->mass_after &&
        drawn(pictures, path, tune_plot_prefix_mass(path, r->mass_before, r->mass_after, L, H)))
        return 1;
    snprintf(path, sizeof(path), "%s/gains.png", dir);
    if (r->gains && drawn(pictures, path, tune_plot_gains(path, r->gains, L, H)))
        return 1;
    return !r->gains && !tool_remove_stale("tune", dir, "gains.png");
}
