/* Attention maps as pictures (through tools/chart/): the probabilities of one
 * head over queries (rows) and keys (columns, the prefix keys first and
 * marked), with token strings on both axes and a colour bar; or all heads of
 * a layer in a grid on one colour scale. PNG, or SVG for a ".svg" name; each
 * returns a chart.h code (CHART_UNAVAILABLE without cairo). */
#ifndef PFX_TOOLS_ATTN_PLOT_H
#define PFX_TOOLS_ATTN_PLOT_H

#include <stddef.h>

typedef struct attn_plot_map {
    const float *probs;   /* queries x keys, row-major */
    size_t queries, keys; /* keys counts the prefix_len prefix keys first */
    size_t prefix_len;
    const char *const *query_labels; /* [queries]; NULL: indices */
    const char *const *key_labels;   /* [keys], the prefix's first; NULL: indices */
    const char *title;               /* e.g. "layer 3, head 2, gain 1.25" */
} attn_plot_map;

int attn_plot_head(const char *path, const attn_plot_map *map);
/* count maps (the heads of a layer) in a grid of near-square shape. */
int attn_plot_grid(const char *path, const char *title, const attn_plot_map *maps, size_t count);

#endif
