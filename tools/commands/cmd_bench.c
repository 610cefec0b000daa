/*
 * prefixcl bench [--device SEL ... | --all] [--quick] [--json FILE] [--csv FILE]
 *                [--compare FILE] [--plot FILE]
 *
 * One fixed suite (tools/benchmark/bench_suite.c) on each chosen device, reported as
 * clpeak reports: device -> test -> value, units in the headers, two decimals.
 * Everything the user gave is checked before the suite starts (options,
 * selectors, output paths, the --compare file); outputs go through the
 * library's atomic replacement (include/prefixcl/io.h, "Output files"), so a
 * failure leaves no partial file and a device node or FIFO is never replaced.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "benchmark/bench.h"
#include "chart.h"
#include "common/cli.h"
#include "commands.h"

static const cli_doc doc = { "prefixcl bench [--device SEL ... | --all] [--quick] [--json FILE]\n"
                             "               [--csv FILE] [--compare FILE] [--plot FILE.png|.svg]\n"
                             "               [--only IDS]",
                             NULL, NULL };

/* ---------------------------------------------------------------- output files */

typedef int (*writer_fn)(FILE *out, const bench_run *run);

/* Through the library's atomic replacement (include/prefixcl/io.h). */
static bool write_atomic(const char *option, const char *path, writer_fn writer,
                         const bench_run *run)
{
    pfx_output_file *out = NULL;
    bool ok = pfx_output_open(path, &out) == PFX_SUCCESS;
    if (ok && writer(pfx_output_stream(out), run) != 0) {
        pfx_output_discard(&out);
        fprintf(stderr, "prefixcl bench: %s %s: cannot write\n", option, path);
        return false;
    }
    if (ok)
        ok = pfx_output_commit(&out) == PFX_SUCCESS;
    if (!ok)
        fprintf(stderr, "prefixcl bench: %s %s: cannot write: %s\n", option, path,
                pfx_last_error(NULL));
    return ok;
}

/* The chart (tools/chart/) replaces the file atomically itself. Without cairo
 * nothing is drawn and that is said, not failed. */
static bool write_plot(const char *path, const bench_run *run, const bench_run *base)
{
    int rc = bench_plot(path, run, base);
    if (rc == CHART_UNAVAILABLE)
        printf("prefixcl bench: --plot %s: %s\n", path, chart_strerror(rc));
    else if (rc != CHART_OK)
        fprintf(stderr, "prefixcl bench: --plot %s: %s%s%s\n", path, chart_strerror(rc),
                rc == CHART_ERR_IO ? ": " : "", rc == CHART_ERR_IO ? pfx_last_error(NULL) : "");
    return rc == CHART_OK || rc == CHART_UNAVAILABLE;
}

/* ---------------------------------------------------------------- progress */

typedef struct progress {
    bool tty;
    size_t device, devices;
    const char *name;
} progress;

static void on_test(void *user, const char *test_id, size_t index, size_t total)
{
    progress *p = user;
    if (p->tty)
        fprintf(stderr, "\r\033[K[device %zu/%zu] %.40s: test %zu/%zu %s ...", p->device + 1,
                p->devices, p->name, index, total, test_id);
    else
        fprintf(stderr, "prefixcl bench: device %zu/%zu: test %zu/%zu %s\n", p->device + 1,
                p->devices, index, total, test_id);
    fflush(stderr);
}

static void progress_clear(const progress *p)
{
    if (p->tty) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

/* ---------------------------------------------------------------- devices */

static bool add_device(bench_run *run, const pfx_device_info *info)
{
    char sel[16];
    snprintf(sel, sizeof(sel), "%u:%u", info->platform_index, info->device_index);
    for (size_t d = 0; d < run->device_count; d++)
        if (!strcmp(run->devices[d].selector, sel))
            return true; /* the same device named twice: measured once */
    if (run->device_count >= BENCH_MAX_DEVICES) {
        fprintf(stderr, "prefixcl bench: at most %d devices\n", BENCH_MAX_DEVICES);
        return false;
    }
    bench_device *dev = &run->devices[run->device_count++];
    memset(dev, 0, sizeof(*dev));
    snprintf(dev->selector, sizeof(dev->selector), "%s", sel);
    dev->info = *info;
    return true;
}

static bool choose_devices(bench_run *run, const char **selectors, size_t nsel, bool all)
{
    if (all) {
        size_t count = 0;
        if (pfx_device_count(&count) != PFX_SUCCESS || count == 0) {
            fprintf(stderr, "prefixcl bench: no OpenCL device found\n");
            return false;
        }
        pfx_device_info *infos = calloc(count, sizeof(*infos));
        if (!infos || pfx_device_list(infos, count, &count) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl bench: listing devices: %s\n", pfx_last_error(NULL));
            free(infos);
            return false;
        }
        bool ok = true;
        for (size_t i = 0; i < count && ok; i++)
            ok = add_device(run, &infos[i]);
        free(infos);
        return ok;
    }
    if (nsel == 0) {
        pfx_device_info info;
        if (pfx_device_select(NULL, &info) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl bench: %s\n", pfx_last_error(NULL));
            return false;
        }
        return add_device(run, &info);
    }
    for (size_t i = 0; i < nsel; i++) {
        pfx_device_info info;
        if (!selectors[i][0]) {
            fprintf(stderr, "prefixcl bench: --device: empty selector\n");
            return false;
        }
        if (pfx_device_select(selectors[i], &info) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl bench: --device %s: %s\n", selectors[i],
                    pfx_last_error(NULL));
            return false;
        }
        if (!add_device(run, &info))
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------- command */

int cmd_bench(int argc, char **argv)
{
    const char *selectors[BENCH_MAX_DEVICES];
    bool all = false, quick = false;
    const char *json_path = NULL, *csv_path = NULL, *compare_path = NULL, *plot_path = NULL,
               *only = NULL;
    cli_list devices = { selectors, NULL, BENCH_MAX_DEVICES, 0, NULL };
    const cli_option opts[] = {
        { "--device", CLI_TEXTS, &devices, 0, 0, NULL, "a selector", "SEL",
          "a device to measure (repeatable): P:D, gpu, cpu, or a name substring",
          "$PREFIXCL_DEVICE, else the default device" },
        { "--all", CLI_FLAG, &all, 0, 0, NULL, NULL, NULL, "every OpenCL device", NULL },
        { "--quick", CLI_FLAG, &quick, 0, 0, NULL, NULL, NULL,
          "about 0.2 s of timed runs per test instead of 1 s", NULL },
        { "--json", CLI_TEXT, &json_path, 0, 0, NULL, "a file name", "FILE",
          "the run as JSON (input of --compare and bench/peer_torch.py)", NULL },
        { "--csv", CLI_TEXT, &csv_path, 0, 0, NULL, "a file name", "FILE",
          "the run as CSV, one row per device and test", NULL },
        { "--compare", CLI_TEXT, &compare_path, 0, 0, NULL, "a file name", "FILE",
          "each figure's change against a saved --json run", NULL },
        { "--plot", CLI_TEXT, &plot_path, 0, 0, NULL, "a file name", "FILE",
          "a bar chart (PNG, or SVG for a .svg name): each test's figure on its bar, the "
          "device's ceiling as a marker, with --compare the saved run beside it and the change "
          "in percent",
          NULL },
        { "--only", CLI_TEXT, &only, 0, 0, NULL, "a list of test ids", "IDS",
          "only the tests whose id starts with one of these comma-separated prefixes "
          "(sgemm,attn_fwd.a,layer.step)",
          NULL },
    };
    const int parsed =
        cli_parse("bench", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    const size_t nsel = devices.count;
    if (all && nsel) {
        fprintf(stderr, "prefixcl bench: --all and --device exclude each other\n");
        return 2;
    }

    /* Check everything before the first measurement. */
    static bench_run base;
    if (compare_path) {
        char err[512];
        if (bench_load_json(compare_path, &base, err, sizeof(err)) != 0) {
            fprintf(stderr, "prefixcl bench: --compare %s: %s\n", compare_path, err);
            return 2;
        }
    }
    const char *outs[][2] = { { "--json", json_path },
                              { "--csv", csv_path },
                              { "--plot", plot_path } };
    for (size_t i = 0; i < 3; i++) {
        if (!outs[i][1])
            continue;
        for (size_t j = 0; j < i; j++)
            if (outs[j][1] && !strcmp(outs[i][1], outs[j][1])) {
                fprintf(stderr, "prefixcl bench: %s and %s name the same file\n", outs[j][0],
                        outs[i][0]);
                return 2;
            }
        if (!cli_check_output("bench", outs[i][0], outs[i][1]))
            return 2;
    }
    static bench_run run;
    memset(&run, 0, sizeof(run));
    run.quick = quick;
    if (!choose_devices(&run, selectors, nsel, all))
        return 2;
    time_t now = time(NULL);
    strftime(run.date, sizeof(run.date), "%Y-%m-%dT%H:%M:%S%z", localtime(&now));

    progress prog = { .tty = isatty(STDERR_FILENO) != 0, .devices = run.device_count };
    int rc = 0;
    /* SIGINT or SIGTERM: the test under way ends, the rest are left out and
     * what was measured is reported and written */
    cli_stop_catch();
    for (size_t d = 0; d < run.device_count && !cli_stop; d++) {
        bench_device *dev = &run.devices[d];
        prog.device = d;
        prog.name = dev->info.device_name;
        pfx_runtime_params params;
        pfx_runtime_default_params(&params);
        params.device = dev->selector;
        pfx_runtime *rt = NULL;
        if (pfx_runtime_create(&rt, &params) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl bench: device %s (%s): %s\n", dev->selector,
                    dev->info.device_name, pfx_last_error(NULL));
            snprintf(dev->timer, sizeof(dev->timer), "none");
            rc = 1;
            continue;
        }
        dev->info = *pfx_runtime_device(rt);
        bench_suite_run(rt, quick, only, dev, on_test, &prog);
        pfx_runtime_destroy(&rt);
        progress_clear(&prog);
        bench_print_device(stdout, dev);
        fflush(stdout);
    }
    if (cli_stop)
        fprintf(
            stderr,
            "prefixcl bench: stopped by signal %d: the tests not run are left out of the results\n",
            (int)cli_stop);
    if (run.device_count > 1)
        bench_print_side_by_side(stdout, &run);
    if (compare_path)
        bench_print_compare(stdout, &run, &base, compare_path);
    if (json_path && !write_atomic("--json", json_path, bench_write_json, &run))
        rc = 1;
    if (csv_path && !write_atomic("--csv", csv_path, bench_write_csv, &run))
        rc = 1;
    if (plot_path && !write_plot(plot_path, &run, compare_path ? &base : NULL))
        rc = 1;
    if (!rc && cli_stop)
        rc = cli_stop_status();
    cli_stop_release();
    return rc;
}
