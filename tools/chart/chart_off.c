/* The charts of a build without cairo (-Dcairo=disabled): every picture is
 * refused with CHART_UNAVAILABLE, so that the tools say that none was drawn
 * and still write their CSV files. */
#include <stddef.h>

#include "chart.h"

const char *chart_strerror(int code)
{
    return code == CHART_UNAVAILABLE ? "no picture drawn: prefixcl was built without cairo"
                                     : "chart error";
}

int chart_lines(const char *path, const chart_line_spec *panels, size_t count)
{
    return CHART_UNAVAILABLE;
}

int chart_bars(const char *path, const chart_bar_spec *spec)
{
    return CHART_UNAVAILABLE;
}

int chart_heatmap(const char *path, const chart_heatmap_spec *spec)
{
    return CHART_UNAVAILABLE;
}

int chart_heatmap_grid(const char *path, const char *title, const chart_heatmap_spec *panels,
                       size_t count, size_t columns)
{
    return CHART_UNAVAILABLE;
}
