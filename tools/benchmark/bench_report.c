/* prefixcl bench: the text report (clpeak style: device -> test -> value, units
 * in every header, two decimals), the side-by-side table, JSON, CSV and the
 * comparison against a saved JSON run. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "bench_json.h"
#include "common/tool_util.h"

static const char *ceiling_name(bench_ceiling c)
{
    return c == BENCH_CEIL_FMA ? "fma" : c == BENCH_CEIL_COPY ? "copy" : "none";
}

double bench_primary(const bench_result *r, const char **unit)
{
    if (!r->ok) {
        *unit = "";
        return -1.0;
    }
    if ((r->ceiling == BENCH_CEIL_COPY || r->gflops < 0) && r->gbs >= 0) {
        *unit = "GB/s";
        return r->gbs;
    }
    *unit = "GFLOP/s";
    return r->gflops;
}

static void num(char *out, size_t cap, double v)
{
    if (v < 0 || !isfinite(v))
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%.2f", v);
}

void bench_print_device(FILE *out, const bench_device *dev)
{
    const pfx_device_info *i = &dev->info;
    fprintf(out, "Platform: %s\n", i->platform_name);
    fprintf(out, "  Device: %s [%s]\n", i->device_name, dev->selector);
    fprintf(out, "    Driver version    : %s\n", i->driver_version);
    fprintf(out, "    Type              : %s, %u compute units, %u MHz\n",
            tool_device_type(i->type), i->compute_units, i->clock_mhz);
    fprintf(out, "    Global memory     : %.0f MiB (max allocation %.0f MiB)\n",
            (double)i->global_mem_bytes / 1048576.0, (double)i->max_alloc_bytes / 1048576.0);
    fprintf(out, "    Timer             : %s\n",
            !strcmp(dev->timer, "host") ? "host wall clock (the device gives no marker times)"
                                        : "device events (profiling queue), median of runs");
    if (dev->gemm[0])
        fprintf(out, "    Dense products    : %s (CLBlast tuning %s)\n", dev->gemm,
                dev->gemm_tuning);
    const char *group = "";
    for (size_t t = 0; t < dev->count; t++) {
        const bench_result *r = &dev->tests[t];
        if (strcmp(group, r->group)) {
            group = r->group;
            fprintf(out, "\n    %-22s %-42s %5s %11s %11s %11s %11s %10s %12s\n", group, "", "runs",
                    "median (ms)", "wall (ms)", "wall p90", "(GFLOP/s)", "(GB/s)", "(% ceiling)");
        }
        if (!r->ok) {
            fprintf(out, "      %-12s %-52s skipped: %s\n", r->id, r->label, r->reason);
            continue;
        }
        char ms[32], wall[32], p90[32], gf[32], gb[32], sh[32];
        num(ms, sizeof(ms), r->ms);
        num(wall, sizeof(wall), r->wall_ms);
        num(p90, sizeof(p90), r->wall_p90);
        num(gf, sizeof(gf), r->gflops);
        num(gb, sizeof(gb), r->gbs);
        if (r->share >= 0)
            snprintf(sh, sizeof(sh), "%.2f %-4s", r->share, ceiling_name(r->ceiling));
        else
            snprintf(sh, sizeof(sh), "-");
        fprintf(out, "      %-12s %-52s %5u %11s %11s %11s %11s %10s %12s\n", r->id, r->label,
                r->runs, ms, wall, p90, gf, gb, sh);
    }
    fprintf(out, "\n");
}

const bench_result *bench_find_test(const bench_device *dev, const char *id)
{
    for (size_t t = 0; t < dev->count; t++)
        if (!strcmp(dev->tests[t].id, id))
            return &dev->tests[t];
    return NULL;
}

void bench_print_side_by_side(FILE *out, const bench_run *run)
{
    fprintf(out, "Side by side (figure each test is judged by; ratio = device / device 1)\n");
    for (size_t d = 0; d < run->device_count; d++)
        fprintf(out, "  device %zu: [%s] %s (%s)\n", d + 1, run->devices[d].selector,
                run->devices[d].info.device_name, run->devices[d].info.platform_name);
    fprintf(out, "\n  %-12s %-8s", "test", "unit");
    for (size_t d = 0; d < run->device_count; d++)
        fprintf(out, " %11s%-2zu", "device ", d + 1);
    for (size_t d = 1; d < run->device_count; d++)
        fprintf(out, "  %7s%zu/1", "ratio ", d + 1);
    fprintf(out, "\n");
    /* Rows: the union of test ids, in the first device's order, then others'. */
    for (size_t d0 = 0; d0 < run->device_count; d0++) {
        for (size_t t = 0; t < run->devices[d0].count; t++) {
            const char *id = run->devices[d0].tests[t].id;
            bool seen = false;
            for (size_t e = 0; e < d0 && !seen; e++)
                seen = bench_find_test(&run->devices[e], id) != NULL;
            if (seen)
                continue;
            const char *unit = "";
            for (size_t d = 0; d < run->device_count && !unit[0]; d++) {
                const bench_result *r = bench_find_test(&run->devices[d], id);
                if (r)
                    bench_primary(r, &unit);
            }
            fprintf(out, "  %-12s %-8s", id, unit[0] ? unit : "-");
            double first = -1;
            for (size_t d = 0; d < run->device_count; d++) {
                const bench_result *r = bench_find_test(&run->devices[d], id);
                const char *u;
                double v = r ? bench_primary(r, &u) : -1;
                if (d == 0)
                    first = v;
                if (v >= 0)
                    fprintf(out, " %13.2f", v);
                else
                    fprintf(out, " %13s", r ? "skipped" : "-");
            }
            for (size_t d = 1; d < run->device_count; d++) {
                const bench_result *r = bench_find_test(&run->devices[d], id);
                const char *u;
                double v = r ? bench_primary(r, &u) : -1;
                if (v >= 0 && first > 0)
                    fprintf(out, "  %10.2fx", v / first);
                else
                    fprintf(out, "  %11s", "-");
            }
            fprintf(out, "\n");
        }
    }
    fprintf(out, "\n");
}

/* ---------------------------------------------------------------- JSON / CSV */

static void json_num(FILE *out, double v)
{
    if (v < 0 || !isfinite(v))
        fprintf(out, "null");
    else
        fprintf(out, "%.6g", v);
}

int bench_write_json(FILE *out, const bench_run *run)
{
    fprintf(out, "{\n  \"tool\": \"prefixcl bench\",\n  \"format\": 1,\n  \"date\": ");
    tool_json_string(out, run->date);
    fprintf(out, ",\n  \"quick\": %s,\n  \"devices\": [", run->quick ? "true" : "false");
    for (size_t d = 0; d < run->device_count; d++) {
        const bench_device *dev = &run->devices[d];
        const pfx_device_info *i = &dev->info;
        fprintf(out, "%s\n    {\n      \"selector\": ", d ? "," : "");
        tool_json_string(out, dev->selector);
        fprintf(out, ",\n      \"name\": ");
        tool_json_string(out, i->device_name);
        fprintf(out, ",\n      \"platform\": ");
        tool_json_string(out, i->platform_name);
        fprintf(out, ",\n      \"driver\": ");
        tool_json_string(out, i->driver_version);
        fprintf(out,
                ",\n      \"type\": \"%s\",\n      \"compute_units\": %u,\n"
                "      \"global_mem_bytes\": %llu,\n      \"timer\": ",
                tool_device_type(i->type), i->compute_units,
                (unsigned long long)i->global_mem_bytes);
        tool_json_string(out, dev->timer);
        fprintf(out, ",\n      \"gemm_backend\": ");
        tool_json_string(out, dev->gemm);
        fprintf(out, ",\n      \"gemm_tuning\": ");
        tool_json_string(out, dev->gemm_tuning);
        fprintf(out, ",\n      \"tests\": [");
        for (size_t t = 0; t < dev->count; t++) {
            const bench_result *r = &dev->tests[t];
            fprintf(out, "%s\n        {\"id\": ", t ? "," : "");
            tool_json_string(out, r->id);
            fprintf(out, ", \"group\": ");
            tool_json_string(out, r->group);
            fprintf(out, ", \"label\": ");
            tool_json_string(out, r->label);
            if (!r->ok) {
                fprintf(out, ", \"status\": \"skipped\", \"reason\": ");
                tool_json_string(out, r->reason);
                fprintf(out, "}");
                continue;
            }
            fprintf(out, ", \"status\": \"ok\", \"runs\": %u", r->runs);
            const struct {
                const char *key;
                double value;
            } nums[] = {
                { "median_ms", r->ms },         { "min_ms", r->ms_min },
                { "max_ms", r->ms_max },        { "wall_ms", r->wall_ms },
                { "wall_p10_ms", r->wall_p10 }, { "wall_p90_ms", r->wall_p90 },
                { "gflops", r->gflops },        { "gbs", r->gbs },
            };
            for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
                fprintf(out, ", \"%s\": ", nums[k].key);
                json_num(out, nums[k].value);
            }
            fprintf(out, ", \"ceiling\": \"%s\", \"share_pct\": ", ceiling_name(r->ceiling));
            json_num(out, r->share);
            fprintf(out, "}");
        }
        fprintf(out, "\n      ]\n    }");
    }
    fprintf(out, "\n  ]\n}\n");
    return ferror(out) ? -1 : 0;
}

static void csv_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void csv_num(FILE *out, double v)
{
    if (v >= 0 && isfinite(v))
        fprintf(out, "%.4f", v);
}

int bench_write_csv(FILE *out, const bench_run *run)
{
    fprintf(out, "date,selector,device,platform,test,group,label,status,runs,median_ms,min_ms,"
                 "max_ms,gflops,gbs,ceiling,share_pct,reason,wall_ms,wall_p10_ms,wall_p90_ms\n");
    for (size_t d = 0; d < run->device_count; d++) {
        const bench_device *dev = &run->devices[d];
        for (size_t t = 0; t < dev->count; t++) {
            const bench_result *r = &dev->tests[t];
            const char *fields[] = {
                run->date, dev->selector, dev->info.device_name, dev->info.platform_name, r->id,
                r->group,  r->label
            };
            for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
                csv_str(out, fields[f]);
                fputc(',', out);
            }
            fprintf(out, "%s,", r->ok ? "ok" : "skipped");
            if (r->ok)
                fprintf(out, "%u", r->runs);
            double nums[] = { r->ms, r->ms_min, r->ms_max, r->gflops, r->gbs };
            for (size_t f = 0; f < sizeof(nums) / sizeof(nums[0]); f++) {
                fputc(',', out);
                if (r->ok)
                    csv_num(out, nums[f]);
            }
            fprintf(out, ",%s,", r->ok ? ceiling_name(r->ceiling) : "");
            if (r->ok)
                csv_num(out, r->share);
            fputc(',', out);
            csv_str(out, r->ok ? "" : r->reason);
            const double walls[] = { r->wall_ms, r->wall_p10, r->wall_p90 };
            for (size_t f = 0; f < sizeof(walls) / sizeof(walls[0]); f++) {
                fputc(',', out);
                if (r->ok)
                    csv_num(out, walls[f]);
            }
            fputc('\n', out);
        }
    }
    return ferror(out) ? -1 : 0;
}

/* ---------------------------------------------------------------- loading */

static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f; /* only a regular file: a FIFO would block forever */
    if (pfx_input_open(path, &f) != PFX_SUCCESS) {
        snprintf(err, errlen, "%s", pfx_last_error(NULL));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap >= ((size_t)64 << 20)) {
                snprintf(err, errlen, "larger than 64 MiB: not a bench run");
                free(buf);
                fclose(f);
                return NULL;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        snprintf(err, errlen, "cannot read: %s", buf ? strerror(errno) : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (strlen(buf) != n) {
        snprintf(err, errlen, "contains a NUL byte: not a JSON text");
        free(buf);
        return NULL;
    }
    return buf;
}

static bool get_str(const cJSON *o, const char *key, char *dst, size_t cap, bool required,
                    char *err, size_t errlen, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (required)
            snprintf(err, errlen, "%s: missing \"%s\"", where, key);
        else
            dst[0] = 0;
        return !required;
    }
    if (!cJSON_IsString(v)) {
        snprintf(err, errlen, "%s: \"%s\" is not a string", where, key);
        return false;
    }
    snprintf(dst, cap, "%s", v->valuestring);
    return true;
}

/* A number >= 0, or null/absent (-1) when allowed. */
static bool get_num(const cJSON *o, const char *key, double *dst, bool required, char *err,
                    size_t errlen, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *dst = -1.0;
    if (!v || cJSON_IsNull(v)) {
        if (required)
            snprintf(err, errlen, "%s: missing \"%s\"", where, key);
        return !required;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || !isfinite(v->valuedouble)) {
        snprintf(err, errlen, "%s: \"%s\" is not a non-negative number", where, key);
        return false;
    }
    *dst = v->valuedouble;
    return true;
}

static bool load_run(const cJSON *root, bench_run *run, char *err, size_t errlen)
{
    memset(run, 0, sizeof(*run));
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "the top level is not an object");
        return false;
    }
    char tool[64];
    if (!get_str(root, "tool", tool, sizeof(tool), true, err, errlen, "top level"))
        return false;
    if (strcmp(tool, "prefixcl bench")) {
        snprintf(err, errlen, "\"tool\" is \"%s\", not \"prefixcl bench\"", tool);
        return false;
    }
    if (!get_str(root, "date", run->date, sizeof(run->date), false, err, errlen, "top level"))
        return false;
    run->quick = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "quick"));
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!cJSON_IsArray(devs) || cJSON_GetArraySize(devs) == 0) {
        snprintf(err, errlen, "\"devices\" is missing, not an array, or empty");
        return false;
    }
    if (cJSON_GetArraySize(devs) > BENCH_MAX_DEVICES) {
        snprintf(err, errlen, "more than %d devices", BENCH_MAX_DEVICES);
        return false;
    }
    /* at most BENCH_MAX_DEVICES x BENCH_MAX_TESTS items: indexing is cheap */
    for (int d = 0; d < cJSON_GetArraySize(devs); d++) {
        const cJSON *jd = cJSON_GetArrayItem(devs, d);
        bench_device *dev = &run->devices[d];
        char where[96];
        snprintf(where, sizeof(where), "devices[%d]", d);
        if (!cJSON_IsObject(jd)) {
            snprintf(err, errlen, "%s is not an object", where);
            return false;
        }
        if (!get_str(jd, "name", dev->info.device_name, sizeof(dev->info.device_name), true, err,
                     errlen, where) ||
            !get_str(jd, "platform", dev->info.platform_name, sizeof(dev->info.platform_name),
                     false, err, errlen, where) ||
            !get_str(jd, "selector", dev->selector, sizeof(dev->selector), false, err, errlen,
                     where) ||
            !get_str(jd, "timer", dev->timer, sizeof(dev->timer), false, err, errlen, where) ||
            !get_str(jd, "gemm_backend", dev->gemm, sizeof(dev->gemm), false, err, errlen, where) ||
            !get_str(jd, "gemm_tuning", dev->gemm_tuning, sizeof(dev->gemm_tuning), false, err,
                     errlen, where))
            return false;
        const cJSON *tests = cJSON_GetObjectItemCaseSensitive(jd, "tests");
        if (!cJSON_IsArray(tests)) {
            snprintf(err, errlen, "%s: \"tests\" is missing or not an array", where);
            return false;
        }
        if (cJSON_GetArraySize(tests) > BENCH_MAX_TESTS) {
            snprintf(err, errlen, "%s: more than %d tests", where, BENCH_MAX_TESTS);
            return false;
        }
        for (int t = 0; t < cJSON_GetArraySize(tests); t++) {
            const cJSON *jt = cJSON_GetArrayItem(tests, t);
            bench_result *r = &dev->tests[t];
            snprintf(where, sizeof(where), "devices[%d].tests[%d]", d, t);
            if (!cJSON_IsObject(jt)) {
                snprintf(err, errlen, "%s is not an object", where);
                return false;
            }
            char status[16];
            if (!get_str(jt, "id", r->id, sizeof(r->id), true, err, errlen, where) ||
                !get_str(jt, "group", r->group, sizeof(r->group), false, err, errlen, where) ||
                !get_str(jt, "label", r->label, sizeof(r->label), false, err, errlen, where) ||
                !get_str(jt, "status", status, sizeof(status), true, err, errlen, where))
                return false;
            if (!r->id[0]) {
                snprintf(err, errlen, "%s: empty \"id\"", where);
                return false;
            }
            r->gflops = r->gbs = r->share = -1;
            r->wall_ms = r->wall_p10 = r->wall_p90 = -1;
            if (!strcmp(status, "skipped")) {
                if (!get_str(jt, "reason", r->reason, sizeof(r->reason), false, err, errlen, where))
                    return false;
                continue;
            }
            if (strcmp(status, "ok")) {
                snprintf(err, errlen, "%s: \"status\" is \"%s\", not \"ok\" or \"skipped\"", where,
                         status);
                return false;
            }
            r->ok = true;
            double runs;
            char ceil[16];
            if (!get_num(jt, "median_ms", &r->ms, true, err, errlen, where) ||
                !get_num(jt, "runs", &runs, false, err, errlen, where) ||
                !get_num(jt, "min_ms", &r->ms_min, false, err, errlen, where) ||
                !get_num(jt, "max_ms", &r->ms_max, false, err, errlen, where) ||
                /* absent in runs saved before the wall time was measured */
                !get_num(jt, "wall_ms", &r->wall_ms, false, err, errlen, where) ||
                !get_num(jt, "wall_p10_ms", &r->wall_p10, false, err, errlen, where) ||
                !get_num(jt, "wall_p90_ms", &r->wall_p90, false, err, errlen, where) ||
                !get_num(jt, "gflops", &r->gflops, false, err, errlen, where) ||
                !get_num(jt, "gbs", &r->gbs, false, err, errlen, where) ||
                !get_num(jt, "share_pct", &r->share, false, err, errlen, where) ||
                !get_str(jt, "ceiling", ceil, sizeof(ceil), false, err, errlen, where))
                return false;
            if (r->ms <= 0) {
                snprintf(err, errlen, "%s: \"median_ms\" is not positive", where);
                return false;
            }
            r->runs = runs > 0 ? (unsigned)runs : 0;
            r->ceiling = !strcmp(ceil, "fma")    ? BENCH_CEIL_FMA
                         : !strcmp(ceil, "copy") ? BENCH_CEIL_COPY
                                                 : BENCH_CEIL_NONE;
        }
        dev->count = (size_t)cJSON_GetArraySize(tests);
        run->device_count++;
    }
    return true;
}

int bench_parse_json(const char *text, bench_run *run, char *err, size_t errlen)
{
    char perr[160];
    cJSON *root = bench_json_parse(text, perr, sizeof(perr));
    if (!root) {
        snprintf(err, errlen, "not valid JSON: %s", perr);
        return -1;
    }
    bool ok = load_run(root, run, err, errlen);
    cJSON_Delete(root);
    return ok ? 0 : -1;
}

int bench_load_json(const char *path, bench_run *run, char *err, size_t errlen)
{
    char *text = read_file(path, err, errlen);
    if (!text)
        return -1;
    int rc = bench_parse_json(text, run, err, errlen);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- compare */

const bench_device *bench_match_device(const bench_run *base, const bench_device *dev, size_t index,
                                       bool *by_position)
{
    *by_position = false;
    for (size_t d = 0; d < base->device_count; d++)
        if (!strcmp(base->devices[d].info.device_name, dev->info.device_name) &&
            (!base->devices[d].info.platform_name[0] ||
             !strcmp(base->devices[d].info.platform_name, dev->info.platform_name)))
            return &base->devices[d];
    if (index < base->device_count) {
        *by_position = true;
        return &base->devices[index];
    }
    return NULL;
}

void bench_print_compare(FILE *out, const bench_run *now, const bench_run *base, const char *path)
{
    fprintf(out, "Compared with %s (%s%s)\n", path, base->date[0] ? base->date : "no date",
            base->quick ? ", --quick" : "");
    for (size_t d = 0; d < now->device_count; d++) {
        const bench_device *dev = &now->devices[d];
        bool by_position;
        const bench_device *old = bench_match_device(base, dev, d, &by_position);
        fprintf(out, "  Device: %s [%s]\n", dev->info.device_name, dev->selector);
        if (!old) {
            fprintf(out, "    no device of that name in the saved run\n\n");
            continue;
        }
        if (by_position)
            fprintf(out,
                    "    (no device of that name in the saved run: compared with its "
                    "device %zu, %s)\n",
                    d + 1, old->info.device_name);
        fprintf(out, "    %-12s %-8s %12s %12s %10s %12s %12s %10s %12s %12s %10s\n", "test",
                "unit", "saved", "now", "change %", "saved ms", "now ms", "time %", "saved wall",
                "now wall", "wall %");
        for (size_t t = 0; t < dev->count; t++) {
            const bench_result *r = &dev->tests[t];
            const bench_result *o = bench_find_test(old, r->id);
            const char *unit, *ounit = "";
            double v = bench_primary(r, &unit);
            double ov = o ? bench_primary(o, &ounit) : -1;
            if (!r->ok) {
                fprintf(out, "    %-12s %-8s %12s %12s %10s\n", r->id, "-", o && o->ok ? "ok" : "-",
                        "skipped", "-");
                continue;
            }
            char now_wall[32];
            num(now_wall, sizeof(now_wall), r->wall_ms);
            if (!o || !o->ok || ov < 0 || strcmp(unit, ounit)) {
                fprintf(out, "    %-12s %-8s %12s %12.2f %10s %12s %12.2f %10s %12s %12s %10s\n",
                        r->id, unit,
                        !o       ? "absent"
                        : !o->ok ? "skipped"
                                 : "-",
                        v, "new", "-", r->ms, "-", "-", now_wall, "-");
                continue;
            }
            double change = ov > 0 ? 100.0 * (v / ov - 1.0) : 0.0;
            double tchange = 100.0 * (r->ms / o->ms - 1.0);
            /* a run saved before the wall time was measured has none: "-" */
            char old_wall[32], wchange[32] = "-";
            num(old_wall, sizeof(old_wall), o->wall_ms);
            if (o->wall_ms > 0 && r->wall_ms >= 0)
                snprintf(wchange, sizeof(wchange), "%+.2f",
                         100.0 * (r->wall_ms / o->wall_ms - 1.0));
            fprintf(out,
                    "    %-12s %-8s %12.2f %12.2f %+10.2f %12.2f %12.2f %+10.2f %12s %12s %10s\n",
                    r->id, unit, ov, v, change, o->ms, r->ms, tchange, old_wall, now_wall, wchange);
        }
        fprintf(out, "\n");
    }
}
