/* The picture under every chart (chart_pic.h). */
#include "chart_pic.h"

#include <cairo-svg.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "prefixcl/io.h"

#define FONT "DejaVu Sans"

const char *chart_strerror(int code)
{
    switch (code) {
    case CHART_OK: return "no error";
    case CHART_ERR_IO: return "cannot write the picture";
    case CHART_ERR_ARG: return "nothing to draw";
    case CHART_UNAVAILABLE: return "no picture drawn: prefixcl was built without cairo";
    default: return "unknown chart error";
    }
}

static bool ends_with_svg(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && path[n - 4] == '.' && tolower((unsigned char)path[n - 3]) == 's' &&
           tolower((unsigned char)path[n - 2]) == 'v' && tolower((unsigned char)path[n - 1]) == 'g';
}

static void set_font(cairo_t *cr, double size)
{
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

cairo_t *chart_measure_context(void)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *cr = cairo_create(s);
    cairo_surface_destroy(s); /* the context keeps it */
    return cr;
}

void chart_measure_free(cairo_t *cr)
{
    cairo_destroy(cr);
}

double chart_text_width(cairo_t *cr, const char *text, double size)
{
    set_font(cr, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, text, &e);
    return e.x_advance;
}

const char *chart_fit(cairo_t *cr, const char *text, double size, double max_w, char *out,
                      size_t cap)
{
    if (chart_text_width(cr, text, size) <= max_w || cap < 4)
        return text;
    size_t n = strlen(text);
    if (n > cap - 4)
        n = cap - 4;
    while (n > 0) {
        /* do not cut inside a UTF-8 sequence */
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--;
        snprintf(out, cap, "%.*s...", (int)n, text);
        if (chart_text_width(cr, out, size) <= max_w)
            return out;
        n--;
    }
    snprintf(out, cap, "...");
    return out;
}

/* Cairo's SVG output, kept in memory. */
static cairo_status_t collect_svg(void *closure, const unsigned char *data, unsigned int length)
{
    chart_pic *pic = closure;
    if (pic->svg_len + length > pic->svg_cap) {
        size_t cap = pic->svg_cap ? 2 * pic->svg_cap : 65536;
        while (cap < pic->svg_len + length)
            cap *= 2;
        unsigned char *t = realloc(pic->svg_text, cap);
        if (!t)
            return CAIRO_STATUS_NO_MEMORY;
        pic->svg_text = t;
        pic->svg_cap = cap;
    }
    memcpy(pic->svg_text + pic->svg_len, data, length);
    pic->svg_len += length;
    return CAIRO_STATUS_SUCCESS;
}

static cairo_status_t write_stream(void *closure, const unsigned char *data, unsigned int length)
{
    return fwrite(data, 1, length, closure) == length ? CAIRO_STATUS_SUCCESS
                                                      : CAIRO_STATUS_WRITE_ERROR;
}

int chart_pic_open(chart_pic *pic, const char *path, double width, double height, const char *title)
{
    memset(pic, 0, sizeof(*pic));
    pic->svg = ends_with_svg(path);
    pic->width = ceil(width);
    pic->height = ceil(height);
    if (pic->svg)
        pic->surface =
            cairo_svg_surface_create_for_stream(collect_svg, pic, pic->width, pic->height);
    else
        pic->surface =
            cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)pic->width, (int)pic->height);
    if (cairo_surface_status(pic->surface) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(pic->surface);
        pic->surface = NULL;
        return CHART_ERR_IO;
    }
    pic->cr = cairo_create(pic->surface);
    pic->title = title ? strdup(title) : NULL;
    cairo_set_source_rgb(pic->cr, 1, 1, 1);
    cairo_paint(pic->cr);
    return CHART_OK;
}

static void free_pic(chart_pic *pic)
{
    if (pic->cr)
        cairo_destroy(pic->cr);
    if (pic->surface)
        cairo_surface_destroy(pic->surface);
    for (size_t i = 0; i < pic->label_count; i++)
        free(pic->labels[i].text);
    free(pic->labels);
    free(pic->title);
    free(pic->svg_text);
    memset(pic, 0, sizeof(*pic));
}

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            /* control characters are not allowed in XML 1.0 */
            fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
        }
    }
}

/* Cairo's SVG with the title and the invisible label layer before its
 * closing tag. */
static bool write_svg(const chart_pic *pic, FILE *f)
{
    const unsigned char *t = pic->svg_text;
    size_t end = pic->svg_len;
    static const char close_tag[] = "</svg>";
    const size_t n = sizeof(close_tag) - 1;
    while (end >= n && memcmp(t + end - n, close_tag, n) != 0)
        end--;
    if (end < n)
        return false;
    end -= n;
    fwrite(t, 1, end, f);
    if (pic->title) {
        fputs("<title>", f);
        put_escaped(f, pic->title);
        fputs("</title>\n", f);
    }
    fputs("<g id=\"labels\" fill-opacity=\"0\" font-family=\"" FONT "\">\n", f);
    for (size_t i = 0; i < pic->label_count; i++) {
        const chart_label *l = &pic->labels[i];
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\"", l->x, l->y, l->size);
        if (l->angle != 0)
            fprintf(f, " transform=\"rotate(%.1f %.2f %.2f)\"", l->angle, l->x, l->y);
        fputs(">", f);
        put_escaped(f, l->text);
        fputs("</text>\n", f);
    }
    fputs("</g>\n</svg>\n", f);
    return true;
}

int chart_pic_close(chart_pic *pic, const char *path)
{
    int rc = pic->failed || cairo_status(pic->cr) != CAIRO_STATUS_SUCCESS ? CHART_ERR_IO : CHART_OK;
    if (pic->svg) {
        cairo_destroy(pic->cr);
        pic->cr = NULL;
        cairo_surface_finish(pic->surface); /* the rest of the SVG reaches collect_svg */
        if (cairo_surface_status(pic->surface) != CAIRO_STATUS_SUCCESS)
            rc = CHART_ERR_IO;
    }
    pfx_output_file *out = NULL;
    if (rc == CHART_OK && pfx_output_open(path, &out) != PFX_SUCCESS)
        rc = CHART_ERR_IO;
    if (rc == CHART_OK) {
        FILE *f = pfx_output_stream(out);
        bool ok = pic->svg ? write_svg(pic, f)
                           : cairo_surface_write_to_png_stream(pic->surface, write_stream, f) ==
                                 CAIRO_STATUS_SUCCESS;
        if (!ok) {
            pfx_output_discard(&out);
            rc = CHART_ERR_IO;
        } else if (pfx_output_commit(&out) != PFX_SUCCESS) {
            rc = CHART_ERR_IO;
        }
    }
    free_pic(pic);
    return rc;
}

static void remember(chart_pic *pic, const char *text, double x, double y, double size,
                     double angle)
{
    if (!pic->svg || !*text)
        return;
    if (pic->label_count == pic->label_cap) {
        size_t cap = pic->label_cap ? 2 * pic->label_cap : 64;
        chart_label *l = realloc(pic->labels, cap * sizeof(*l));
        if (!l) {
            pic->failed = true;
            return;
        }
        pic->labels = l;
        pic->label_cap = cap;
    }
    char *copy = strdup(text);
    if (!copy) {
        pic->failed = true;
        return;
    }
    pic->labels[pic->label_count++] = (chart_label){ x, y, size, angle, copy };
}

void chart_text(chart_pic *pic, const char *text, double x, double y, double size, double ha,
                double va, double angle, chart_rgb colour)
{
    cairo_t *cr = pic->cr;
    set_font(cr, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, text, &e);
    const double cap = 0.73 * size; /* DejaVu Sans capital height */
    double dx = -ha * e.x_advance, dy = -va * cap + cap;
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, angle * M_PI / 180.0);
    cairo_move_to(cr, dx, dy);
    chart_set_colour(cr, colour);
    cairo_show_text(cr, text);
    cairo_restore(cr);
    /* the baseline origin in picture coordinates */
    double a = angle * M_PI / 180.0;
    remember(pic, text, x + dx * cos(a) - dy * sin(a), y + dx * sin(a) + dy * cos(a), size, angle);
}

chart_rgb chart_series_colour(size_t i)
{
    static const chart_rgb palette[] = {
        { 0.122, 0.467, 0.706 }, { 1.000, 0.498, 0.055 }, { 0.173, 0.627, 0.173 },
        { 0.839, 0.153, 0.157 }, { 0.580, 0.404, 0.741 }, { 0.549, 0.337, 0.294 },
        { 0.890, 0.467, 0.761 }, { 0.498, 0.498, 0.498 }, { 0.737, 0.741, 0.133 },
        { 0.090, 0.745, 0.812 },
    };
    return palette[i % (sizeof(palette) / sizeof(palette[0]))];
}

void chart_set_colour(cairo_t *cr, chart_rgb c)
{
    cairo_set_source_rgb(cr, c.r, c.g, c.b);
}

size_t chart_nice_ticks(double *lo, double *hi, size_t target, double *step)
{
    if (!(*hi > *lo)) {
        double pad = *lo != 0 ? fabs(*lo) * 0.5 : 1.0;
        *lo -= pad;
        *hi += pad;
    }
    double raw = (*hi - *lo) / (double)(target ? target : 5);
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    *step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
    *lo = floor(*lo / *step + 1e-9) * *step;
    *hi = ceil(*hi / *step - 1e-9) * *step;
    return (size_t)lround((*hi - *lo) / *step) + 1;
}

void chart_format_tick(double v, double step, char *out, size_t cap)
{
    if (fabs(v) < step * 1e-6)
        v = 0;
    double a = fabs(v);
    if (a != 0 && (a >= 1e6 || a < 1e-3)) {
        snprintf(out, cap, "%.3g", v);
        return;
    }
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (decimals > 6)
        decimals = 6;
    /* 2.5, 0.25 steps need one more digit */
    if (fabs(step * pow(10.0, decimals) - lround(step * pow(10.0, decimals))) > 1e-6)
        decimals++;
    snprintf(out, cap, "%.*f", decimals, v);
}
