/* Line charts (chart.h): one or two y axes, linear or log10, legend,
 * category ticks or numbers on x. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "chart.h"
#include "chart_pic.h"

#define PANEL_W    760.0
#define PANEL_H    400.0
#define TICK_FONT  11.0
#define LABEL_FONT 12.0
#define INK        ((chart_rgb){ 0.1, 0.1, 0.1 })
#define GREY       ((chart_rgb){ 0.4, 0.4, 0.4 })

typedef struct scale {
    bool log, used;
    double lo, hi, step; /* in log10 units when log */
} scale;

static bool usable(const chart_axis *ax, double v)
{
    return isfinite(v) && (!ax->log || v > 0);
}

static double series_x(const chart_series *s, size_t i)
{
    return s->x ? s->x[i] : (double)(i + 1);
}

/* The range of the data on one axis; false when it has no usable value. */
static bool data_range(const chart_line_spec *p, int which, const chart_axis *ax, double *lo,
                       double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t k = 0; k < p->series_count; k++) {
        const chart_series *s = &p->series[k];
        if (which != 0 && (which == 2) != s->right)
            continue;
        for (size_t i = 0; i < s->count; i++) {
            double v = which == 0 ? series_x(s, i) : s->y[i];
            if (which != 0 && !isfinite(series_x(s, i)))
                continue;
            if (!usable(ax, v))
                continue;
            *lo = fmin(*lo, v);
            *hi = fmax(*hi, v);
        }
    }
    return *lo <= *hi;
}

static bool make_scale(const chart_line_spec *p, int which, const chart_axis *ax, scale *sc)
{
    double lo, hi;
    sc->log = ax->log;
    if (ax->max > ax->min) {
        lo = ax->min;
        hi = ax->max;
    } else if (!data_range(p, which, ax, &lo, &hi)) {
        return false;
    }
    sc->used = true;
    if (ax->log) {
        if (lo <= 0)
            lo = hi / 10;
        sc->lo = floor(log10(lo) + 1e-9);
        sc->hi = ceil(log10(hi) - 1e-9);
        if (sc->hi <= sc->lo)
            sc->hi = sc->lo + 1;
        sc->step = sc->hi - sc->lo > 8 ? ceil((sc->hi - sc->lo) / 8) : 1;
    } else if (ax->max > ax->min) {
        sc->lo = lo;
        sc->hi = hi;
        double a = lo, b = hi;
        chart_nice_ticks(&a, &b, 6, &sc->step);
    } else {
        if (which != 0 && lo > 0 && lo < 0.3 * hi)
            lo = 0; /* start at zero when the data nearly does */
        sc->lo = lo;
        sc->hi = hi;
        chart_nice_ticks(&sc->lo, &sc->hi, 6, &sc->step);
    }
    return true;
}

/* Position along [a, b] (pixels) of value v. */
static double place(const scale *sc, double v, double a, double b)
{
    double t = sc->log ? log10(v) : v;
    return a + (t - sc->lo) / (sc->hi - sc->lo) * (b - a);
}

static void decade_text(double e, char *out, size_t cap)
{
    if (e >= -3 && e <= 5)
        snprintf(out, cap, "%g", pow(10.0, e));
    else
        snprintf(out, cap, "1e%d", (int)e);
}

/* Ticks of one y axis at x (left: labels to its left), grid lines for the
 * left axis only. */
static void y_ticks(chart_pic *pic, const scale *sc, double x, double top, double bottom,
                    double gx0, double gx1, bool left)
{
    cairo_t *cr = pic->cr;
    char buf[32];
    for (double t = sc->lo; t <= sc->hi + 1e-9 * fabs(sc->hi - sc->lo); t += sc->step) {
        double v = sc->log ? pow(10.0, t) : t;
        double y = place(sc, v, bottom, top);
        if (left) {
            cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
            cairo_set_line_width(cr, 1);
            cairo_move_to(cr, gx0, y);
            cairo_line_to(cr, gx1, y);
            cairo_stroke(cr);
        }
        chart_set_colour(cr, INK);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, left ? x - 4 : x + 4, y);
        cairo_stroke(cr);
        if (sc->log)
            decade_text(t, buf, sizeof(buf));
        else
            chart_format_tick(v, sc->step, buf, sizeof(buf));
        chart_text(pic, buf, left ? x - 7 : x + 7, y, TICK_FONT, left ? 1 : 0, 0.5, 0, INK);
        if (sc->log && left && sc->step == 1 && t < sc->hi)
            for (int m = 2; m <= 9; m++) { /* minor grid */
                double ym = place(sc, (double)m * v, bottom, top);
                cairo_set_source_rgb(cr, 0.95, 0.95, 0.95);
                cairo_move_to(cr, gx0, ym);
                cairo_line_to(cr, gx1, ym);
                cairo_stroke(cr);
            }
    }
}

static void marker(cairo_t *cr, double x, double y, size_t k)
{
    if (k % 2 == 0)
        cairo_arc(cr, x, y, 3.5, 0, 2 * M_PI);
    else
        cairo_rectangle(cr, x - 3.2, y - 3.2, 6.4, 6.4);
    cairo_fill(cr);
}

static void draw_series(chart_pic *pic, const chart_series *s, size_t k, const scale *sx,
                        const scale *sy, const chart_axis *ax_y, double x0, double x1, double y0,
                        double y1)
{
    cairo_t *cr = pic->cr;
    cairo_save(cr);
    cairo_rectangle(cr, x0 - 6, y0 - 6, x1 - x0 + 12, y1 - y0 + 12);
    cairo_clip(cr);
    chart_set_colour(cr, chart_series_colour(k));
    cairo_set_line_width(cr, 1.8);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    if (s->right) {
        static const double dash[] = { 6, 3 };
        cairo_set_dash(cr, dash, 2, 0);
    }
    if (s->line) {
        bool open = false;
        for (size_t i = 0; i < s->count; i++) {
            double xv = series_x(s, i), yv = s->y[i];
            if (!isfinite(xv) || !usable(ax_y, yv)) {
                open = false;
                continue;
            }
            double px = place(sx, xv, x0, x1), py = place(sy, yv, y1, y0);
            if (open)
                cairo_line_to(cr, px, py);
            else
                cairo_move_to(cr, px, py);
            open = true;
        }
        cairo_stroke(cr);
    }
    if (s->points)
        for (size_t i = 0; i < s->count; i++) {
            double xv = series_x(s, i), yv = s->y[i];
            if (isfinite(xv) && usable(ax_y, yv))
                marker(cr, place(sx, xv, x0, x1), place(sy, yv, y1, y0), k);
        }
    cairo_restore(cr);
}

/* The plot area and the scales the series are drawn with, for placing the
 * legend where it hides the fewest points. */
typedef struct frame {
    double x0, x1, y0, y1;
    const scale *sx, *sy, *sy2;
} frame;

static size_t points_under(const chart_line_spec *p, const frame *f, double bx, double by,
                           double bw, double bh)
{
    size_t n = 0;
    for (size_t k = 0; k < p->series_count; k++) {
        const chart_series *s = &p->series[k];
        const scale *sy = s->right ? f->sy2 : f->sy;
        const chart_axis *ax = s->right ? &p->y2 : &p->y;
        if (!sy->used)
            continue;
        double qx = NAN, qy = NAN; /* the previous point, for a line's segments */
        for (size_t i = 0; i < s->count; i++) {
            double xv = series_x(s, i), yv = s->y[i];
            if (!isfinite(xv) || !usable(ax, yv)) {
                qx = NAN;
                continue;
            }
            double px = place(f->sx, xv, f->x0, f->x1), py = place(sy, yv, f->y1, f->y0);
            int steps = s->line && isfinite(qx) ? 8 : 1; /* samples along the segment */
            for (int t = 1; t <= steps; t++) {
                double u = (double)t / steps;
                double x = steps > 1 ? qx + u * (px - qx) : px,
                       y = steps > 1 ? qy + u * (py - qy) : py;
                n += x >= bx && x <= bx + bw && y >= by && y <= by + bh;
            }
            qx = px;
            qy = py;
        }
    }
    return n;
}

static void legend(chart_pic *pic, const chart_line_spec *p, const frame *f)
{
    const double x1 = f->x1, y0 = f->y0;
    cairo_t *cr = pic->cr;
    double w = 0;
    size_t n = 0;
    char buf[160];
    for (size_t k = 0; k < p->series_count; k++) {
        if (!p->series[k].name)
            continue;
        snprintf(buf, sizeof(buf), "%s%s", p->series[k].name, p->series[k].right ? " (right)" : "");
        w = fmax(w, chart_text_width(cr, buf, LABEL_FONT));
        n++;
    }
    if (!n)
        return;
    const double row = 18, bw = w + 44, bh = (double)n * row + 8;
    /* the corner of the plot where the box hides the fewest points */
    double bx = x1 - bw - 8, by = y0 + 8;
    size_t best = SIZE_MAX;
    const double xs[2] = { x1 - bw - 8, f->x0 + 8 }, ys[2] = { y0 + 8, f->y1 - bh - 8 };
    for (int c = 0; c < 4; c++) {
        size_t hidden = points_under(p, f, xs[c % 2], ys[c / 2], bw, bh);
        if (hidden < best) {
            best = hidden;
            bx = xs[c % 2];
            by = ys[c / 2];
        }
    }
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, bx, by, bw, bh);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.75, 0.75, 0.75);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    size_t r = 0;
    for (size_t k = 0; k < p->series_count; k++) {
        const chart_series *s = &p->series[k];
        if (!s->name)
            continue;
        double y = by + 4 + row * ((double)r + 0.5);
        cairo_save(cr);
        chart_set_colour(cr, chart_series_colour(k));
        cairo_set_line_width(cr, 1.8);
        if (s->right) {
            static const double dash[] = { 6, 3 };
            cairo_set_dash(cr, dash, 2, 0);
        }
        if (s->line) {
            cairo_move_to(cr, bx + 6, y);
            cairo_line_to(cr, bx + 30, y);
            cairo_stroke(cr);
        }
        if (s->points)
            marker(cr, bx + 18, y, k);
        cairo_restore(cr);
        snprintf(buf, sizeof(buf), "%s%s", s->name, s->right ? " (right)" : "");
        chart_text(pic, buf, bx + 36, y, LABEL_FONT, 0, 0.5, 0, INK);
        r++;
    }
}

static void draw_panel(chart_pic *pic, const chart_line_spec *p, double ox, double oy)
{
    cairo_t *cr = pic->cr;
    scale sx = { 0 }, sy = { 0 }, sy2 = { 0 };
    bool any_right = false;
    for (size_t k = 0; k < p->series_count; k++)
        any_right |= p->series[k].right;
    if (p->x_ticks && p->x_tick_count) {
        sx = (scale){
            .log = false, .used = true, .lo = 0.5, .hi = (double)p->x_tick_count + 0.5, .step = 1
        };
    } else {
        make_scale(p, 0, &p->x, &sx); /* drawable() checked the ranges */
    }
    bool left_ok = make_scale(p, 1, &p->y, &sy);
    bool right_ok = any_right && make_scale(p, 2, &p->y2, &sy2);
    if (!left_ok)
        sy = sy2; /* only right-axis data: the grid follows it */

    const double x0 = ox + 78, x1 = ox + PANEL_W - (any_right ? 78 : 24);
    const double y0 = oy + (p->subtitle ? 58 : 42), y1 = oy + PANEL_H - 52;
    chart_text(pic, p->title ? p->title : "", ox + 16, oy + 14, 15, 0, 0, 0, INK);
    if (p->subtitle)
        chart_text(pic, p->subtitle, ox + 16, oy + 36, LABEL_FONT, 0, 0, 0, GREY);

    cairo_set_line_width(cr, 1);
    y_ticks(pic, &sy, x0, y0, y1, x0, x1, true);
    if (right_ok)
        y_ticks(pic, &sy2, x1, y0, y1, x0, x1, false);

    /* x ticks */
    char buf[64];
    chart_set_colour(cr, INK);
    if (p->x_ticks && p->x_tick_count) {
        double cell = (x1 - x0) / (double)p->x_tick_count;
        size_t every = 1;
        double widest = 0;
        for (size_t i = 0; i < p->x_tick_count; i++)
            widest = fmax(widest, chart_text_width(cr, p->x_ticks[i], TICK_FONT));
        while (widest + 6 > cell * (double)every && every < p->x_tick_count)
            every++;
        for (size_t i = 0; i < p->x_tick_count; i += every) {
            double x = place(&sx, (double)(i + 1), x0, x1);
            chart_set_colour(cr, INK);
            cairo_move_to(cr, x, y1);
            cairo_line_to(cr, x, y1 + 4);
            cairo_stroke(cr);
            chart_text(pic, p->x_ticks[i], x, y1 + 8, TICK_FONT, 0.5, 0, 0, INK);
        }
    } else {
        for (double t = sx.lo; t <= sx.hi + 1e-9 * fabs(sx.hi - sx.lo); t += sx.step) {
            double v = sx.log ? pow(10.0, t) : t;
            double x = place(&sx, v, x0, x1);
            chart_set_colour(cr, INK);
            cairo_move_to(cr, x, y1);
            cairo_line_to(cr, x, y1 + 4);
            cairo_stroke(cr);
            if (sx.log)
                decade_text(t, buf, sizeof(buf));
            else
                chart_format_tick(v, sx.step, buf, sizeof(buf));
            chart_text(pic, buf, x, y1 + 8, TICK_FONT, 0.5, 0, 0, INK);
        }
    }
    /* frame */
    chart_set_colour(cr, INK);
    cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
    cairo_stroke(cr);
    if (p->x.label)
        chart_text(pic, p->x.label, (x0 + x1) / 2, y1 + 28, LABEL_FONT, 0.5, 0, 0, INK);
    if (p->y.label)
        chart_text(pic, p->y.label, ox + 16, (y0 + y1) / 2, LABEL_FONT, 0.5, 1, -90, INK);
    if (right_ok && p->y2.label)
        chart_text(pic, p->y2.label, ox + PANEL_W - 14, (y0 + y1) / 2, LABEL_FONT, 0.5, 1, 90, INK);

    for (size_t k = 0; k < p->series_count; k++) {
        const chart_series *s = &p->series[k];
        if (s->right ? !right_ok : !left_ok)
            continue;
        draw_series(pic, s, k, &sx, s->right ? &sy2 : &sy, s->right ? &p->y2 : &p->y, x0, x1, y0,
                    y1);
    }
    frame f = { x0, x1, y0, y1, &sx, &sy, right_ok ? &sy2 : &sy };
    legend(pic, p, &f);
}

/* Whether a panel has an x range and data on at least one y axis. */
static bool drawable(const chart_line_spec *p)
{
    if (!p->series || !p->series_count)
        return false;
    scale sx, sy;
    bool any_right = false;
    for (size_t k = 0; k < p->series_count; k++)
        any_right |= p->series[k].right;
    if (!(p->x_ticks && p->x_tick_count) && !make_scale(p, 0, &p->x, &sx))
        return false;
    return make_scale(p, 1, &p->y, &sy) || (any_right && make_scale(p, 2, &p->y2, &sy));
}

int chart_lines(const char *path, const chart_line_spec *panels, size_t count)
{
    if (!path || !panels || !count)
        return CHART_ERR_ARG;
    for (size_t i = 0; i < count; i++)
        if (!drawable(&panels[i]))
            return CHART_ERR_ARG;
    chart_pic pic;
    int rc = chart_pic_open(&pic, path, PANEL_W, PANEL_H * (double)count, panels[0].title);
    for (size_t i = 0; i < count && rc == CHART_OK; i++)
        draw_panel(&pic, &panels[i], 0, PANEL_H * (double)i);
    return rc == CHART_OK ? chart_pic_close(&pic, path) : rc;
}
