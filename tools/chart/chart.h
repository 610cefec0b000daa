/*
 * The tools' pictures: line charts, bar charts and heat maps drawn with cairo
 * (anti-aliased lines, real text through fontconfig). The output name picks
 * the format: ".svg" (any case) writes SVG, anything else PNG. An SVG also
 * carries every label as invisible <text> over its glyphs (searchable, and
 * what the tests read), and the title as <title>.
 *
 * Every function returns CHART_OK, CHART_ERR_IO (cannot write the file, or
 * cairo failed: errno may say why), CHART_ERR_ARG (nothing to draw: no
 * series, no finite value, a zero-sized matrix) or, in a build without cairo
 * (-Dcairo=disabled), CHART_UNAVAILABLE without touching the file system.
 */
#ifndef PFX_TOOLS_CHART_H
#define PFX_TOOLS_CHART_H

#include <stdbool.h>
#include <stddef.h>

enum {
    CHART_OK = 0,
    CHART_ERR_IO = -1,
    CHART_ERR_ARG = -2,
    CHART_UNAVAILABLE = -3,
};

/* "cannot write", "nothing to draw", "built without cairo". */
const char *chart_strerror(int code);

/* ---- line charts ---------------------------------------------------- */

typedef struct chart_axis {
    const char *label; /* NULL: none */
    bool log;          /* log10 scale; values <= 0 are not drawn */
    double min, max;   /* min == max: from the data (padded to round ticks) */
} chart_axis;

typedef struct chart_series {
    const char *name; /* in the legend; NULL: not listed */
    const double *x;  /* NULL: 1, 2, ..., count */
    const double *y;  /* non-finite values break the line */
    size_t count;
    bool line;   /* a line through the points */
    bool points; /* a marker at each point */
    bool right;  /* against the second (right) y axis */
    /* 1 + the index of its colour and marker in the series cycle (the same
     * head the same colour in every panel); 0: its position in the list */
    size_t colour;
} chart_series;

typedef struct chart_line_spec {
    const char *title, *subtitle; /* subtitle may be NULL */
    chart_axis x, y, y2;          /* y2: used when a series has right set */
    /* When given, x_ticks[i] labels x = i + 1 (categories such as layers);
     * otherwise ticks are numbers. */
    const char *const *x_ticks;
    size_t x_tick_count;
    const chart_series *series;
    size_t series_count;
} chart_line_spec;

/* Panels stacked top to bottom in one picture, each 760 x 400 points. */
int chart_lines(const char *path, const chart_line_spec *panels, size_t count);

/* ---- bar charts ------------------------------------------------------- */

typedef struct chart_bar {
    double value;            /* bar length; NAN: no bar, text alone (e.g. "skipped") */
    const char *text;        /* printed on the bar (or after it when it does not fit) */
    double marker;           /* a tick across the bar at this value; NAN: none */
    const char *marker_text; /* printed after the marker; NULL: none */
} chart_bar;

typedef struct chart_bar_group {
    const char *label;     /* left of the group */
    const chart_bar *bars; /* series_count bars, in series order */
    const char *note;      /* right of the group (e.g. "+12.5 %"); NULL: none */
} chart_bar_group;

typedef struct chart_bar_spec {
    const char *title, *subtitle;
    const char *const *series_names; /* legend, series_count names */
    size_t series_count;
    const chart_bar_group *groups;
    size_t group_count;
    /* Each group has its own scale (its largest value or marker fills the
     * width): for groups in different units. Otherwise one scale, labelled
     * with axis_label below the bars. */
    bool scale_per_group;
    const char *axis_label;
} chart_bar_spec;

int chart_bars(const char *path, const chart_bar_spec *spec);

/* ---- heat maps -------------------------------------------------------- */

typedef struct chart_heatmap_spec {
    const char *title;   /* of the panel */
    const float *values; /* rows x cols, row-major; non-finite: drawn grey */
    size_t rows, cols;
    /* Strings for each row / column; NULL: indices. Labels are drawn where
     * they fit (every k-th otherwise: past 128 rows or columns, or numbers). */
    const char *const *row_labels, *const *col_labels;
    const char *row_axis, *col_axis; /* axis titles; NULL: none */
    /* The first marked_cols columns are set apart by a line and named by
     * marked_name above them (e.g. the prefix keys of an attention map). */
    size_t marked_cols;
    const char *marked_name;
    double vmin, vmax;       /* vmin == vmax: from the data */
    bool diverging;          /* blue-white-red around 0 (else dark-to-bright) */
    const char *scale_label; /* beside the colour bar */
    /* Cells as wide and as tall as the picture allows, each direction on its
     * own (a tall matrix of few columns then fills the width); otherwise
     * square cells, legible for every label up to 128 rows and columns. */
    bool fill;
} chart_heatmap_spec;

/* One heat map with its colour bar. */
int chart_heatmap(const char *path, const chart_heatmap_spec *spec);
/* count panels in a grid of `columns` columns under one title, sharing one
 * value range (the union of the panels', unless the first panel fixes it)
 * and one colour bar (the first panel's scale_label and diverging). */
int chart_heatmap_grid(const char *path, const char *title, const chart_heatmap_spec *panels,
                       size_t count, size_t columns);

#endif
