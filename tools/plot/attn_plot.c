/* Attention maps as pictures (attn_plot.h). */
#include "attn_plot.h"

#include <math.h>
#include <stdlib.h>

#include "chart.h"

static chart_heatmap_spec spec_of(const attn_plot_map *m)
{
    return (chart_heatmap_spec){ .title = m->title,
                                 .values = m->probs,
                                 .rows = m->queries,
                                 .cols = m->keys,
                                 .row_labels = m->query_labels,
                                 .col_labels = m->key_labels,
                                 .row_axis = "query",
                                 .col_axis = "key",
                                 .marked_cols = m->prefix_len,
                                 .marked_name = m->prefix_len ? "prefix" : NULL,
                                 .vmin = 0,
                                 .vmax = 0,
                                 .scale_label = "attention probability" };
}

int attn_plot_head(const char *path, const attn_plot_map *map)
{
    if (!map)
        return CHART_ERR_ARG;
    chart_heatmap_spec s = spec_of(map);
    return chart_heatmap(path, &s);
}

int attn_plot_grid(const char *path, const char *title, const attn_plot_map *maps, size_t count)
{
    if (!maps || !count)
        return CHART_ERR_ARG;
    chart_heatmap_spec *s = malloc(count * sizeof(*s));
    if (!s)
        return CHART_ERR_IO;
    for (size_t i = 0; i < count; i++)
        s[i] = spec_of(&maps[i]);
    size_t columns = (size_t)ceil(sqrt((double)count));
    int rc = chart_heatmap_grid(path, title, s, count, columns);
    free(s);
    return rc;
}
