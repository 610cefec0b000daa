/*
 * prefixcl bench --plot: the run as a bar chart (tools/chart/). One group per
 * test, one bar per device: the figure the test is judged by (GFLOP/s or
 * GB/s) printed on the bar, each test on its own scale; a marker at the
 * device's measured ceiling in the same unit (FMA peak or copy bandwidth)
 * with the share beside it. With --compare the saved run's bar follows each
 * device's and the change in percent stands beside the group.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "chart.h"

typedef struct text {
    char s[96];
} text;

/* One bar of result r (NULL: the test is absent on that device). */
static chart_bar make_bar(const bench_result *r, text *label, text *mark)
{
    chart_bar b = { .value = NAN, .marker = NAN, .text = label->s };
    const char *unit;
    double v = r && r->ok ? bench_primary(r, &unit) : -1;
    if (!r) {
        snprintf(label->s, sizeof(label->s), "absent");
    } else if (!r->ok) {
        snprintf(label->s, sizeof(label->s), "skipped: %.70s", r->reason);
    } else if (v < 0) {
        snprintf(label->s, sizeof(label->s), "%.3f ms", r->ms);
    } else {
        b.value = v;
        snprintf(label->s, sizeof(label->s), "%.1f %s", v, unit);
        if (r->share > 0 && r->ceiling != BENCH_CEIL_NONE) {
            b.marker = v * 100.0 / r->share;
            snprintf(mark->s, sizeof(mark->s), "%.1f %% of %s", r->share,
                     r->ceiling == BENCH_CEIL_FMA ? "FMA peak" : "copy bandwidth");
            b.marker_text = mark->s;
        }
    }
    return b;
}

int bench_plot(const char *path, const bench_run *run, const bench_run *base)
{
    /* groups: the union of test ids in the devices' order */
    const char *ids[BENCH_MAX_TESTS * BENCH_MAX_DEVICES];
    size_t nids = 0;
    for (size_t d = 0; d < run->device_count; d++)
        for (size_t t = 0; t < run->devices[d].count; t++) {
            const char *id = run->devices[d].tests[t].id;
            bool seen = false;
            for (size_t i = 0; i < nids && !seen; i++)
                seen = !strcmp(ids[i], id);
            if (!seen)
                ids[nids++] = id;
        }
    if (!nids)
        return CHART_ERR_ARG;
    const size_t per_dev = base ? 2 : 1, ns = run->device_count * per_dev;
    const bench_device *old[BENCH_MAX_DEVICES] = { 0 };
    for (size_t d = 0; base && d < run->device_count; d++) {
        bool by_position;
        old[d] = bench_match_device(base, &run->devices[d], d, &by_position);
    }
    text *names = calloc(ns, sizeof(text));
    const char **name_ptr = calloc(ns, sizeof(char *));
    text *labels = calloc(ns * nids, sizeof(text)), *marks = calloc(ns * nids, sizeof(text));
    text *notes = calloc(nids, sizeof(text));
    chart_bar *bars = calloc(ns * nids, sizeof(chart_bar));
    chart_bar_group *groups = calloc(nids, sizeof(chart_bar_group));
    int rc = CHART_ERR_IO;
    if (!names || !name_ptr || !labels || !marks || !notes || !bars || !groups)
        goto done;
    for (size_t d = 0; d < run->device_count; d++) {
        const bench_device *dev = &run->devices[d];
        snprintf(names[d * per_dev].s, sizeof(text), "%zu [%s] %.60s%s", d + 1, dev->selector,
                 dev->info.device_name, base ? ": this run" : "");
        if (base)
            snprintf(names[d * per_dev + 1].s, sizeof(text), "%zu: saved run%s%.40s", d + 1,
                     old[d] ? " " : " (no such device)", old[d] ? base->date : "");
    }
    for (size_t k = 0; k < ns; k++)
        name_ptr[k] = names[k].s;
    for (size_t i = 0; i < nids; i++) {
        size_t used = 0;
        for (size_t d = 0; d < run->device_count; d++) {
            const bench_result *r = bench_find_test(&run->devices[d], ids[i]);
            size_t k = i * ns + d * per_dev;
            bars[k] = make_bar(r, &labels[k], &marks[k]);
            if (!base)
                continue;
            const bench_result *o = old[d] ? bench_find_test(old[d], ids[i]) : NULL;
            bars[k + 1] = make_bar(o, &labels[k + 1], &marks[k + 1]);
            const char *u1, *u2;
            double v = r && r->ok ? bench_primary(r, &u1) : -1;
            double ov = o && o->ok ? bench_primary(o, &u2) : -1;
            if (v >= 0 && ov > 0 && !strcmp(u1, u2) && used < sizeof(text) - 1)
                used += (size_t)snprintf(notes[i].s + used, sizeof(text) - used, "%s%+.1f %%",
                                         used ? ", " : "", 100.0 * (v / ov - 1.0));
        }
        groups[i] = (chart_bar_group){ .label = ids[i],
                                       .bars = &bars[i * ns],
                                       .note = notes[i].s[0] ? notes[i].s : NULL };
    }
    char subtitle[160];
    snprintf(subtitle, sizeof(subtitle),
             "%s%s: each test on its own scale; | marks the device's ceiling%s", run->date,
             run->quick ? " --quick" : "", base ? "; change against the saved run at right" : "");
    chart_bar_spec spec = { .title = "prefixcl bench: figure per test and device",
                            .subtitle = subtitle,
                            .series_names = name_ptr,
                            .series_count = ns,
                            .groups = groups,
                            .group_count = nids,
                            .scale_per_group = true };
    rc = chart_bars(path, &spec);
done:
    free(names);
    free(name_ptr);
    free(labels);
    free(marks);
    free(notes);
    free(bars);
    free(groups);
    return rc;
}
