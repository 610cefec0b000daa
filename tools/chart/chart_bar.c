/* Horizontal bar charts (chart.h): groups of one bar per series, text on
 * each bar, an optional marker per bar, a note per group. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chart.h"
#include "chart_pic.h"

#define FONT_SIZE 11.0
#define BAR_H     20.0
#define GROUP_GAP 14.0
#define BARS_W    560.0
#define INK       ((chart_rgb){ 0.1, 0.1, 0.1 })
#define GREY      ((chart_rgb){ 0.4, 0.4, 0.4 })
#define WHITE     ((chart_rgb){ 1, 1, 1 })

static double group_max(const chart_bar_spec *s, const chart_bar_group *g)
{
    double m = 0;
    for (size_t k = 0; k < s->series_count; k++) {
        if (isfinite(g->bars[k].value))
            m = fmax(m, g->bars[k].value);
        if (isfinite(g->bars[k].marker))
            m = fmax(m, g->bars[k].marker);
    }
    return m;
}

/* Light text on dark bars, dark on light. */
static chart_rgb on_colour(chart_rgb c)
{
    return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b < 0.6 ? WHITE : INK;
}

/* A bar, its text inside when it fits (else after it), a marker line with
 * its text after the line, or after the bar when the line lies on the bar. */
static void draw_bar(chart_pic *pic, const chart_bar *b, size_t k, double x0, double y,
                     double per_unit, double right_edge)
{
    cairo_t *cr = pic->cr;
    double mid = y + BAR_H / 2;
    double w = isfinite(b->value) && b->value > 0 ? b->value * per_unit : 0;
    double end = x0 + w;
    double mx = isfinite(b->marker) ? x0 + b->marker * per_unit : NAN;
    double tw = b->text ? chart_text_width(cr, b->text, FONT_SIZE) : 0;
    double mtw = b->marker_text ? chart_text_width(cr, b->marker_text, FONT_SIZE) : 0;
    if (isfinite(b->value)) {
        chart_set_colour(cr, chart_series_colour(k));
        cairo_rectangle(cr, x0, y + 2, fmax(w, 1.5), BAR_H - 4);
        cairo_fill(cr);
    }
    if (isfinite(mx)) {
        chart_set_colour(cr, INK);
        cairo_set_line_width(cr, 2);
        cairo_move_to(cr, mx, y);
        cairo_line_to(cr, mx, y + BAR_H);
        cairo_stroke(cr);
    }
    /* inside, unless the marker crosses the text */
    bool inside = b->text && isfinite(b->value) && tw + 10 <= w &&
                  !(isfinite(mx) && mx > end - tw - 10 && mx < end - 2);
    if (inside)
        chart_text(pic, b->text, end - 5, mid, FONT_SIZE, 1, 0.5, 0,
                   on_colour(chart_series_colour(k)));
    const bool marker_after = isfinite(mx) && mx >= end - 2;
    chart_rgb text_colour = isfinite(b->value) ? INK : GREY;
    if (marker_after) {
        if (b->marker_text)
            chart_text(pic, b->marker_text, mx + 4, mid, FONT_SIZE, 0, 0.5, 0, GREY);
        if (b->text && !inside) {
            /* before the marker when it fits there, else after its text */
            double tx = end + 5 + tw < mx - 3 ? end + 5 : mx + 4 + mtw + 10;
            chart_text(pic, b->text, fmin(tx, right_edge - tw), mid, FONT_SIZE, 0, 0.5, 0,
                       text_colour);
        }
        return;
    }
    double cursor = end + 5;
    if (b->text && !inside) {
        chart_text(pic, b->text, cursor, mid, FONT_SIZE, 0, 0.5, 0, text_colour);
        cursor += tw + 10;
    }
    if (b->marker_text && isfinite(mx)) /* the marker lies on the bar */
        chart_text(pic, b->marker_text, cursor, mid, FONT_SIZE, 0, 0.5, 0, GREY);
}

int chart_bars(const char *path, const chart_bar_spec *s)
{
    if (!path || !s || !s->groups || !s->group_count || !s->series_count)
        return CHART_ERR_ARG;
    double all_max = 0;
    for (size_t g = 0; g < s->group_count; g++) {
        if (!s->groups[g].bars)
            return CHART_ERR_ARG;
        all_max = fmax(all_max, group_max(s, &s->groups[g]));
    }
    cairo_t *m = chart_measure_context();
    double label_w = 0, note_w = 0, legend_w = 0;
    for (size_t g = 0; g < s->group_count; g++) {
        if (s->groups[g].label)
            label_w = fmax(label_w, chart_text_width(m, s->groups[g].label, FONT_SIZE));
        if (s->groups[g].note)
            note_w = fmax(note_w, chart_text_width(m, s->groups[g].note, FONT_SIZE));
    }
    for (size_t k = 0; k < s->series_count && s->series_names; k++)
        legend_w = fmax(legend_w, chart_text_width(m, s->series_names[k], FONT_SIZE));
    double title_w = s->title ? chart_text_width(m, s->title, 15) : 0;
    double sub_w = s->subtitle ? chart_text_width(m, s->subtitle, FONT_SIZE) : 0;
    chart_measure_free(m);

    const double margin = 16;
    /* room after the longest bar for its text and marker text */
    const double text_room = 300;
    double x0 = margin + label_w + 12;
    double right_edge = x0 + BARS_W + text_room;
    double width = fmax(right_edge + (note_w > 0 ? note_w + 24 : 0) + margin,
                        fmax(title_w, fmax(sub_w, legend_w + 40)) + 2 * margin);
    double legend_h = s->series_names ? 18.0 * (double)s->series_count + 6 : 0;
    double top = margin + 26 + (s->subtitle ? 20 : 0) + legend_h + 8;
    double group_h = BAR_H * (double)s->series_count + GROUP_GAP;
    double axis_h = s->scale_per_group ? 0 : 40;
    double height = top + group_h * (double)s->group_count + axis_h + margin;

    chart_pic pic;
    int rc = chart_pic_open(&pic, path, width, height, s->title);
    if (rc != CHART_OK)
        return rc;
    cairo_t *cr = pic.cr;
    double y = margin;
    if (s->title)
        chart_text(&pic, s->title, margin, y, 15, 0, 0, 0, INK);
    y += 26;
    if (s->subtitle) {
        chart_text(&pic, s->subtitle, margin, y, FONT_SIZE, 0, 0, 0, GREY);
        y += 20;
    }
    for (size_t k = 0; k < s->series_count && s->series_names; k++) {
        chart_set_colour(cr, chart_series_colour(k));
        cairo_rectangle(cr, margin, y + 2, 22, 12);
        cairo_fill(cr);
        chart_text(&pic, s->series_names[k], margin + 30, y + 8, FONT_SIZE, 0, 0.5, 0, INK);
        y += 18;
    }

    /* one scale: nice ticks from 0 */
    double lo = 0, hi = all_max > 0 ? all_max : 1, step = 1;
    if (!s->scale_per_group)
        chart_nice_ticks(&lo, &hi, 5, &step);
    double bottom = top + group_h * (double)s->group_count;
    if (!s->scale_per_group) {
        char buf[32];
        cairo_set_line_width(cr, 1);
        for (double t = 0; t <= hi + 1e-9 * hi; t += step) {
            double x = x0 + t / hi * BARS_W;
            cairo_set_source_rgb(cr, t == 0 ? 0.1 : 0.85, t == 0 ? 0.1 : 0.85, t == 0 ? 0.1 : 0.85);
            cairo_move_to(cr, x, top - 4);
            cairo_line_to(cr, x, bottom);
            cairo_stroke(cr);
            chart_format_tick(t, step, buf, sizeof(buf));
            chart_text(&pic, buf, x, bottom + 5, FONT_SIZE, 0.5, 0, 0, INK);
        }
        if (s->axis_label)
            chart_text(&pic, s->axis_label, x0 + BARS_W / 2, bottom + 24, FONT_SIZE, 0.5, 0, 0,
                       INK);
    }
    for (size_t g = 0; g < s->group_count; g++) {
        const chart_bar_group *grp = &s->groups[g];
        double gy = top + group_h * (double)g;
        double gmax = s->scale_per_group ? group_max(s, grp) : hi;
        double per_unit = gmax > 0 ? BARS_W / gmax : 0;
        double gmid = gy + BAR_H * (double)s->series_count / 2;
        if (grp->label)
            chart_text(&pic, grp->label, x0 - 10, gmid, FONT_SIZE, 1, 0.5, 0, INK);
        if (g > 0) {
            cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
            cairo_set_line_width(cr, 1);
            cairo_move_to(cr, margin, gy - GROUP_GAP / 2);
            cairo_line_to(cr, width - margin, gy - GROUP_GAP / 2);
            cairo_stroke(cr);
        }
        for (size_t k = 0; k < s->series_count; k++)
            draw_bar(&pic, &grp->bars[k], k, x0, gy + BAR_H * (double)k, per_unit, right_edge);
        if (grp->note)
            chart_text(&pic, grp->note, right_edge + 12, gmid, FONT_SIZE, 0, 0.5, 0, INK);
    }
    return chart_pic_close(&pic, path);
}
