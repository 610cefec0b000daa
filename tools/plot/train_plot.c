/* The pictures of `prefixcl train` (train_plot.h). */
#include "train_plot.h"

#include <stdio.h>
#include <stdlib.h>

#include "chart.h"

int train_plot_loss(const char *path, const train_config *cfg, const train_result *r)
{
    const size_t n = r->steps_done;
    double *eval_x = malloc((r->eval_count ? r->eval_count : 1) * sizeof(double));
    double *lr = malloc((n ? n : 1) * sizeof(double)), *gn = malloc((n ? n : 1) * sizeof(double));
    int rc = CHART_ERR_IO;
    if (eval_x && lr && gn) {
        for (size_t i = 0; i < r->eval_count; i++)
            eval_x[i] = (double)r->eval_steps[i];
        for (size_t i = 0; i < n; i++) {
            lr[i] = r->lrs[i];
            gn[i] = r->grad_norms[i];
        }
        chart_series s[] = {
            { .name = "training loss", .y = r->losses, .count = n, .line = true },
            { .name = "held-out loss",
              .x = eval_x,
              .y = r->eval_losses,
              .count = r->eval_count,
              .points = true },
            { .name = "learning rate", .y = lr, .count = n, .line = true, .right = true },
            { .name = "gradient norm (before clipping)",
              .y = gn,
              .count = n,
              .line = true,
              .right = true },
        };
        char sub[200];
        snprintf(sub, sizeof(sub), "%zu layers, prefix %zu, batch %zu x %zu tokens, seed %llu",
                 cfg->layers, cfg->prefix_len, cfg->batch, cfg->tokens,
                 (unsigned long long)cfg->seed);
        chart_line_spec spec = {
            .title = "prefixcl train: loss (MSE against the teacher)",
            .subtitle = sub,
            .x = { .label = "step" },
            .y = { .label = "MSE loss", .log = true },
            .y2 = { .label = "learning rate, gradient norm", .log = true },
            .series = s,
            .series_count = r->eval_count ? 4 : 3,
        };
        if (!r->eval_count) { /* no held-out points: the legend stays short */
            s[1] = s[2];
            s[2] = s[3];
        }
        rc = chart_lines(path, &spec, 1);
    }
    free(eval_x);
    free(lr);
    free(gn);
    return rc;
}

int train_plot_attention(const char *path, const train_config *cfg, const train_result *r)
{
    const size_t L = cfg->layers;
    double *v = malloc(4 * L * sizeof(double));
    char(*names)[32] = malloc(L * sizeof(*names));
    const char **ticks = malloc(L * sizeof(char *));
    int rc = CHART_ERR_IO;
    if (v && names && ticks) {
        double *mass_t = v, *mass_s = v + L, *ent_t = v + 2 * L, *ent_s = v + 3 * L;
        for (size_t l = 0; l < L; l++) {
            mass_t[l] = r->layer_stats[l].teacher_prefix_mass;
            mass_s[l] = r->layer_stats[l].prefix_mass;
            ent_t[l] = r->layer_stats[l].teacher_entropy;
            ent_s[l] = r->layer_stats[l].entropy;
            snprintf(names[l], sizeof(names[l]), "layer %zu", l);
            ticks[l] = names[l];
        }
        chart_series mass[] = {
            { .name = "teacher", .y = mass_t, .count = L, .line = true, .points = true },
            { .name = "student (baked)", .y = mass_s, .count = L, .line = true, .points = true },
        };
        chart_series ent[] = {
            { .name = "teacher", .y = ent_t, .count = L, .line = true, .points = true },
            { .name = "student (baked)", .y = ent_s, .count = L, .line = true, .points = true },
        };
        chart_line_spec panels[] = {
            { .title = "attention mass on the prefix per layer (mean over heads)",
              .subtitle = "a fresh batch after training",
              .x = { .label = "layer" },
              .y = { .label = "prefix mass", .min = 0, .max = 1 },
              .x_ticks = ticks,
              .x_tick_count = L,
              .series = mass,
              .series_count = 2 },
            { .title = "attention entropy per layer (mean over heads)",
              .x = { .label = "layer" },
              .y = { .label = "entropy (nats)" },
              .x_ticks = ticks,
              .x_tick_count = L,
              .series = ent,
              .series_count = 2 },
        };
        rc = chart_lines(path, panels, 2);
    }
    free(v);
    free(names);
    free(ticks);
    return rc;
}

int train_plot_gains(const char *path, const train_config *cfg, const train_result *r)
{
    const size_t L = cfg->layers, H = cfg->heads;
    char(*names)[32] = malloc((L + H) * sizeof(*names));
    const char **labels = malloc((L + H) * sizeof(char *));
    int rc = CHART_ERR_IO;
    if (names && labels) {
        for (size_t l = 0; l < L; l++)
            snprintf(names[l], sizeof(names[l]), "layer %zu", l);
        for (size_t h = 0; h < H; h++)
            snprintf(names[L + h], sizeof(names[0]), "head %zu", h);
        for (size_t i = 0; i < L + H; i++)
            labels[i] = names[i];
        chart_heatmap_spec panels[2] = {
            { .title = "learned (student)",
              .values = r->gains,
              .rows = L,
              .cols = H,
              .row_labels = labels,
              .col_labels = labels + L,
              .row_axis = "layer",
              .col_axis = "head",
              .diverging = true,
              .scale_label = "gain parameter g" },
        };
        panels[1] = panels[0];
        panels[1].title = "hidden (teacher)";
        panels[1].values = r->teacher_gains;
        rc = chart_heatmap_grid(path, "gain per layer and head (tanh mode: gamma = 1 + tanh(g))",
                                panels, 2, 2);
    }
    free(names);
    free(labels);
    return rc;
}
