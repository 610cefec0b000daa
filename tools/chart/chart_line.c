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

/* How a log axis is ticked, by how many decades its data spans: each
 * decade's 1 (wide ranges), its 1, 2 and 5 (one to two decades), every
 * whole mantissa 1..9 (a factor 2 to 10), or round linear steps (narrower),
 * so that a narrow range still has several labelled ticks. */
typedef enum log_ticks { LOG_DECADES, LOG_125, LOG_MANTISSAS, LOG_LINEAR } log_ticks;

typedef struct scale {
    bool log, used;
    double lo, hi, step; /* in log10 units when log (step: of LOG_DECADES) */
    log_ticks ticks;     /* when log */
    double lin_step;     /* LOG_LINEAR's step, in values */
} scale;

enum { MAX_TICKS = 64 };

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

static void decade_text(double e, char *out, size_t cap)
{
    if (e >= -3 && e <= 5)
        snprintf(out, cap, "%g", pow(10.0, e));
    else
        snprintf(out, cap, "1e%d", (int)e);
}

/* v > 0 rounded down (or up) to a tick of a LOG_125 or LOG_MANTISSAS axis. */
static double log_snap(double v, log_ticks ticks, bool up)
{
    static const double m125[] = { 1, 2, 5, 10 };
    const double e = pow(10.0, floor(log10(v) + 1e-12)), f = v / e;
    if (ticks == LOG_MANTISSAS)
        return (up ? ceil(f - 1e-9) : floor(f + 1e-9)) * e;
    double r = up ? 10 : 1;
    for (int i = 0; i < 4; i++) {
        if (up && m125[i] >= f - 1e-9) {
            r = m125[i];
            break;
        }
        if (!up && m125[i] <= f + 1e-9)
            r = m125[i];
    }
    return r * e;
}

/* The tick values of a scale, ascending (at most MAX_TICKS). */
static size_t tick_values(const scale *sc, double *out)
{
    size_t n = 0;
    const double eps = 1e-9 * fmax(fabs(sc->hi - sc->lo), 1e-300);
    if (!sc->log || sc->ticks == LOG_DECADES) {
        for (double t = sc->lo; t <= sc->hi + eps && n < MAX_TICKS; t += sc->step)
            out[n++] = sc->log ? pow(10.0, t) : t;
        return n;
    }
    const double lo = pow(10.0, sc->lo), hi = pow(10.0, sc->hi);
    if (sc->ticks == LOG_LINEAR) {
        for (double v = ceil(lo / sc->lin_step - 1e-9) * sc->lin_step;
             v <= hi * (1 + 1e-9) && n < MAX_TICKS; v += sc->lin_step)
            out[n++] = v;
        return n;
    }
    for (double e = floor(sc->lo + 1e-9); e <= sc->hi + 1e-9; e++)
        for (int m = 1; m <= 9 && n < MAX_TICKS; m++) {
            if (sc->ticks == LOG_125 && m != 1 && m != 2 && m != 5)
                continue;
            const double v = (double)m * pow(10.0, e);
            if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9))
                out[n++] = v;
        }
    return n;
}

/* A tick's text: a decade as "0.01" or "1e-05", others as short numbers. */
static void tick_text(const scale *sc, double v, char *out, size_t cap)
{
    if (!sc->log)
        chart_format_tick(v, sc->step, out, cap);
    else if (sc->ticks == LOG_DECADES)
        decade_text(round(log10(v)), out, cap);
    else if (sc->ticks == LOG_LINEAR)
        chart_format_tick(v, sc->lin_step, out, cap);
    else
        snprintf(out, cap, "%g", v);
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
        sc->ticks = ax->max > ax->min || hi >= 100 * lo ? LOG_DECADES
                    : hi >= 10 * lo                     ? LOG_125
                    : hi >= 2 * lo                      ? LOG_MANTISSAS
                                                        : LOG_LINEAR;
        sc->step = 1;
        if (sc->ticks == LOG_DECADES) {
            sc->lo = floor(log10(lo) + 1e-9);
            sc->hi = ceil(log10(hi) - 1e-9);
            if (sc->hi <= sc->lo)
                sc->hi = sc->lo + 1;
            sc->step = sc->hi - sc->lo > 8 ? ceil((sc->hi - sc->lo) / 8) : 1;
        } else if (sc->ticks == LOG_LINEAR) {
            double a = lo, b = hi;
            chart_nice_ticks(&a, &b, 5, &sc->lin_step);
            sc->lo = log10(a > 0 ? a : lo);
            sc->hi = log10(b);
        } else {
            sc->lo = log10(log_snap(lo, sc->ticks, false));
            sc->hi = log10(log_snap(hi, sc->ticks, true));
        }
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

/* Ticks of one y axis at x (left: labels to its left), grid lines for the
 * left axis only (on a log axis also light lines at the whole mantissas).
 * A label closer than a line's height to the one below it is left out. */
static void y_ticks(chart_pic *pic, const scale *sc, double x, double top, double bottom,
                    double gx0, double gx1, bool left)
{
    cairo_t *cr = pic->cr;
    char buf[32];
    double ticks[MAX_TICKS];
    const size_t n = tick_values(sc, ticks);
    if (sc->log && left && sc->step == 1)
        for (double e = floor(sc->lo + 1e-9); e < sc->hi; e++)
            for (int m = 2; m <= 9; m++) { /* minor grid */
                const double v = (double)m * pow(10.0, e), t = log10(v);
                if (t <= sc->lo || t >= sc->hi)
                    continue;
                double ym = place(sc, v, bottom, top);
                cairo_set_source_rgb(cr, 0.95, 0.95, 0.95);
                cairo_set_line_width(cr, 1);
                cairo_move_to(cr, gx0, ym);
                cairo_line_to(cr, gx1, ym);
                cairo_stroke(cr);
            }
    double last_y = INFINITY;
    for (size_t i = 0; i < n; i++) {
        double y = place(sc, ticks[i], bottom, top);
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
        if (last_y - y < TICK_FONT + 3)
            continue;
        tick_text(sc, ticks[i], buf, sizeof(buf));
        chart_text(pic, buf, left ? x - 7 : x + 7, y, TICK_FONT, left ? 1 : 0, 0.5, 0, INK);
        last_y = y;
    }
}

/* The colour (and marker) of series s at position k. */
static size_t colour_of(const chart_series *s, size_t k)
{
    return s->colour ? s->colour - 1 : k;
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
    k = colour_of(s, k);
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

/* The legend's entries: their count and the widest entry (its sample line
 * and text). */
static size_t legend_size(cairo_t *cr, const chart_line_spec *p, double *entry_w)
{
    char buf[160];
    size_t n = 0;
    *entry_w = 0;
    for (size_t k = 0; k < p->series_count; k++) {
        if (!p->series[k].name)
            continue;
        snprintf(buf, sizeof(buf), "%s%s", p->series[k].name, p->series[k].right ? " (right)" : "");
        *entry_w = fmax(*entry_w, chart_text_width(cr, buf, LABEL_FONT) + 44);
        n++;
    }
    return n;
}

enum { LEGEND_ROW = 18 };

/* Where the legend box (bw x bh) goes: the corner of the plot where it hides
 * the fewest points; returns how many it hides there. */
static size_t legend_corner(const chart_line_spec *p, const frame *f, double bw, double bh,
                            double *bx, double *by)
{
    size_t best = SIZE_MAX;
    const double xs[2] = { f->x1 - bw - 8, f->x0 + 8 }, ys[2] = { f->y0 + 8, f->y1 - bh - 8 };
    for (int c = 0; c < 4; c++) {
        size_t hidden = points_under(p, f, xs[c % 2], ys[c / 2], bw, bh);
        if (hidden < best) {
            best = hidden;
            *bx = xs[c % 2];
            *by = ys[c / 2];
        }
    }
    return best;
}

/* The legend box at (bx, by): its n entries of entry_w in `columns` columns. */
static void legend(chart_pic *pic, const chart_line_spec *p, double bx, double by, double entry_w,
                   size_t n, size_t columns)
{
    cairo_t *cr = pic->cr;
    char buf[160];
    const size_t rows = (n + columns - 1) / columns;
    const double bw = entry_w * (double)(n < columns ? n : columns),
                 bh = (double)rows * LEGEND_ROW + 8;
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
        const double ex = bx + entry_w * (double)(r % columns),
                     y = by + 4 + LEGEND_ROW * ((double)(r / columns) + 0.5);
        cairo_save(cr);
        chart_set_colour(cr, chart_series_colour(colour_of(s, k)));
        cairo_set_line_width(cr, 1.8);
        if (s->right) {
            static const double dash[] = { 6, 3 };
            cairo_set_dash(cr, dash, 2, 0);
        }
        if (s->line) {
            cairo_move_to(cr, ex + 6, y);
            cairo_line_to(cr, ex + 30, y);
            cairo_stroke(cr);
        }
        if (s->points)
            marker(cr, ex + 18, y, colour_of(s, k));
        cairo_restore(cr);
        snprintf(buf, sizeof(buf), "%s%s", s->name, s->right ? " (right)" : "");
        chart_text(pic, buf, ex + 36, y, LABEL_FONT, 0, 0.5, 0, INK);
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
    const double y0 = oy + (p->subtitle ? 58 : 42);
    double y1 = oy + PANEL_H - 52;
    /* The legend: in a corner of the plot where it hides no point, else
     * below the plot (which gives up its height), in as many columns as fit. */
    double entry_w, lx = 0, ly = 0;
    const size_t entries = legend_size(cr, p, &entry_w);
    size_t legend_columns = 1;
    if (entries) {
        const frame f = { x0, x1, y0, y1, &sx, &sy, right_ok ? &sy2 : &sy };
        if (legend_corner(p, &f, entry_w, (double)entries * LEGEND_ROW + 8, &lx, &ly) > 0) {
            legend_columns = (size_t)fmax(1, floor((x1 - x0) / entry_w));
            const size_t rows = (entries + legend_columns - 1) / legend_columns;
            y1 -= (double)rows * LEGEND_ROW + 8 + 6;
            lx = x0;
            ly = y1 + 44;
        }
    }
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
        double ticks[MAX_TICKS], last_right = -INFINITY;
        const size_t n = tick_values(&sx, ticks);
        for (size_t i = 0; i < n; i++) {
            double x = place(&sx, ticks[i], x0, x1);
            chart_set_colour(cr, INK);
            cairo_move_to(cr, x, y1);
            cairo_line_to(cr, x, y1 + 4);
            cairo_stroke(cr);
            tick_text(&sx, ticks[i], buf, sizeof(buf));
            const double w = chart_text_width(cr, buf, TICK_FONT);
            if (x - w / 2 < last_right + 6)
                continue; /* it would touch the label before it */
            chart_text(pic, buf, x, y1 + 8, TICK_FONT, 0.5, 0, 0, INK);
            last_right = x + w / 2;
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
    if (entries)
        legend(pic, p, lx, ly, entry_w, entries, legend_columns);
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
