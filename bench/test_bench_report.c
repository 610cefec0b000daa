/* prefixcl bench's outputs without a device: a run written as JSON and read
 * back (what --compare loads), the JSON reader's rejections, CSV quoting, the
 * comparison table and the bar chart (its pictures are checked in detail by
 * tests/test_chart.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "benchmark/bench.h"
#include "benchmark/bench_json.h"
#include "chart.h"

static void make_run(bench_run *run)
{
    memset(run, 0, sizeof(*run));
    snprintf(run->date, sizeof(run->date), "2026-11-29T12:00:00+0000");
    run->quick = true;
    run->device_count = 1;
    bench_device *d = &run->devices[0];
    snprintf(d->selector, sizeof(d->selector), "0:0");
    snprintf(d->info.device_name, sizeof(d->info.device_name), "Test \"device\" \\ one");
    snprintf(d->info.platform_name, sizeof(d->info.platform_name), "Platform, with comma");
    snprintf(d->timer, sizeof(d->timer), "events");
    d->count = 3;
    bench_result *r = d->tests;
    snprintf(r[0].id, sizeof(r[0].id), "peak.fma");
    snprintf(r[0].group, sizeof(r[0].group), "Ceilings");
    r[0].ok = true, r[0].runs = 7, r[0].ms = 1.5, r[0].ms_min = 1.25, r[0].ms_max = 2.0;
    r[0].gflops = 100.0, r[0].gbs = -1, r[0].ceiling = BENCH_CEIL_FMA, r[0].share = 100.0;
    snprintf(r[1].id, sizeof(r[1].id), "attn_fwd.d");
    snprintf(r[1].label, sizeof(r[1].label), "(d) decode");
    r[1].ok = true, r[1].runs = 3, r[1].ms = 10.0, r[1].ms_min = 9, r[1].ms_max = 11;
    r[1].gflops = 5.0, r[1].gbs = 2.5, r[1].ceiling = BENCH_CEIL_COPY, r[1].share = 12.5;
    snprintf(r[2].id, sizeof(r[2].id), "layer.step");
    snprintf(r[2].reason, sizeof(r[2].reason), "no layer API yet");
    r[2].gflops = r[2].gbs = r[2].share = -1;
}

static char *temp_path(const char *suffix)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/pfx-bench-report-%d%s",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), suffix);
    return path;
}

static void test_json_round_trip(void **state)
{
    (void)state;
    static bench_run run, back;
    make_run(&run);
    const char *path = temp_path(".json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(bench_write_json(f, &run), 0);
    fclose(f);
    char err[256] = "";
    assert_int_equal(bench_load_json(path, &back, err, sizeof(err)), 0);
    unlink(path);
    assert_string_equal(back.date, run.date);
    assert_true(back.quick);
    assert_int_equal(back.device_count, 1);
    const bench_device *d = &back.devices[0];
    assert_string_equal(d->info.device_name, run.devices[0].info.device_name);
    assert_string_equal(d->info.platform_name, run.devices[0].info.platform_name);
    assert_int_equal(d->count, 3);
    assert_true(d->tests[0].ok);
    assert_int_equal(d->tests[0].runs, 7);
    assert_true(d->tests[0].gflops == 100.0 && d->tests[0].gbs < 0);
    assert_int_equal(d->tests[1].ceiling, BENCH_CEIL_COPY);
    const char *unit;
    assert_true(bench_primary(&d->tests[1], &unit) == 2.5);
    assert_string_equal(unit, "GB/s");
    assert_true(bench_primary(&d->tests[0], &unit) == 100.0);
    assert_string_equal(unit, "GFLOP/s");
    assert_false(d->tests[2].ok);
    assert_string_equal(d->tests[2].reason, "no layer API yet");

    /* the comparison prints a change for each figure: +25 % here */
    back.devices[0].tests[0].gflops = 80.0;
    const char *out = temp_path(".txt");
    f = fopen(out, "w+");
    assert_non_null(f);
    bench_print_compare(f, &run, &back, "saved.json");
    rewind(f);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(out);
    assert_non_null(strstr(text, "+25.00"));
    assert_non_null(strstr(text, "skipped"));
}

static void expect_rejected(const char *text, const char *message)
{
    const char *path = temp_path(".bad.json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    static bench_run run;
    char err[256] = "";
    assert_int_equal(bench_load_json(path, &run, err, sizeof(err)), -1);
    unlink(path);
    if (!strstr(err, message))
        fail_msg("'%s': message '%s' lacks '%s'", text, err, message);
}

static void test_rejections(void **state)
{
    (void)state;
    expect_rejected("", "unexpected end");
    expect_rejected("{\"tool\": \"prefixcl bench\", \"devices\": [", "not valid JSON");
    expect_rejected("{\"tool\": \"prefixcl bench\"} trailing", "after the end");
    expect_rejected("{\"tool\": \"other\", \"devices\": []}", "not \"prefixcl bench\"");
    expect_rejected("{\"tool\": \"prefixcl bench\", \"devices\": []}", "empty");
    expect_rejected("{\"tool\": \"prefixcl bench\", \"devices\": [{\"tests\": []}]}",
                    "missing \"name\"");
    expect_rejected("{\"tool\": \"prefixcl bench\", \"devices\": [{\"name\": \"x\", \"tests\": "
                    "[{\"id\": \"a\", \"status\": \"ok\"}]}]}",
                    "missing \"median_ms\"");
    expect_rejected("{\"tool\": \"prefixcl bench\", \"devices\": [{\"name\": \"x\", \"tests\": "
                    "[{\"id\": \"a\", \"status\": \"ok\", \"median_ms\": -1}]}]}",
                    "non-negative");
    expect_rejected("{\"tool\": \"prefixcl bench\", \"devices\": [{\"name\": \"x\", \"tests\": "
                    "[{\"id\": \"a\", \"status\": \"maybe\"}]}]}",
                    "not \"ok\" or \"skipped\"");
    expect_rejected(
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]"
        "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "nested too deeply");
}

static void test_json_reader(void **state)
{
    (void)state;
    char err[128];
    cJSON *v =
        bench_json_parse(" {\"a\\u00e9\\n\": [1, -2.5e3, true, null, \"x\"]} ", err, sizeof(err));
    assert_non_null(v);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(v, "a\xc3\xa9\n");
    assert_true(cJSON_IsArray(a));
    assert_int_equal(cJSON_GetArraySize(a), 5);
    assert_true(cJSON_GetArrayItem(a, 1)->valuedouble == -2500.0);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(a, 3)));
    cJSON_Delete(v);
    assert_null(bench_json_parse("{\"a\" 1}", err, sizeof(err)));
    assert_non_null(strstr(err, "line 1, column 6"));
    assert_null(bench_json_parse("[01x]", err, sizeof(err)));
    /* the rule of every JSON reader: no \u0000, no key twice at any depth */
    assert_null(bench_json_parse("{\"a\": \"x\\u0000y\"}", err, sizeof(err)));
    assert_non_null(strstr(err, "\\u0000"));
    v = bench_json_parse("{\"a\": \"x\\\\u0000y\"}", err, sizeof(err)); /* a backslash, then text */
    assert_non_null(v);
    cJSON_Delete(v);
    assert_null(bench_json_parse("{\"a\": [{\"c\": 1, \"c\": 2}]}", err, sizeof(err)));
    assert_non_null(strstr(err, "'c' appears twice"));
    assert_null(bench_json_parse("{\"a\": 1, \"a\": 1}", err, sizeof(err)));
    assert_non_null(strstr(err, "'a' appears twice"));
}

static void test_csv_and_plot(void **state)
{
    (void)state;
    static bench_run run;
    make_run(&run);
    const char *path = temp_path(".csv");
    FILE *f = fopen(path, "w+");
    assert_non_null(f);
    assert_int_equal(bench_write_csv(f, &run), 0);
    rewind(f);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    assert_non_null(strstr(text, "\"Test \"\"device\"\" \\ one\""));
    assert_non_null(strstr(text, "skipped,,,,,,,,,\"no layer API yet\""));
    int lines = 0;
    for (char *c = text; *c; c++)
        lines += *c == '\n';
    assert_int_equal(lines, 4);

    const char *png = temp_path(".png");
    int rc = bench_plot(png, &run, NULL);
    if (rc == CHART_UNAVAILABLE) /* a build without cairo draws nothing */
        return;
    assert_int_equal(rc, CHART_OK);
    f = fopen(png, "rb");
    assert_non_null(f);
    unsigned char sig[8];
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    unlink(png);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_json_reader),
        cmocka_unit_test(test_csv_and_plot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
