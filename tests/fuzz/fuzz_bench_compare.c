/* libFuzzer harness for the reader of `prefixcl bench --compare` files
 * (tools/benchmark/bench_report.c on cJSON, tools/benchmark/bench_json.c): every input, cut at
 * its first NUL as the file reader refuses one, is parsed as a saved bench
 * run; it must be refused cleanly or give a run within the limits, every
 * measured test with a positive median and no NaN. Also linked into the
 * normal build by run_corpus.c, which replays tests/fuzz/corpus/bench_compare/. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "benchmark/bench.h"
#include "fuzz.h"

static bench_run run; /* large: not on the stack */

static int parse(const uint8_t *data, size_t size, char *err, size_t errlen)
{
    char *text = malloc(size + 1);
    if (!text)
        return -1;
    memcpy(text, data, size);
    text[size] = 0;
    int rc = bench_parse_json(text, &run, err, errlen);
    free(text);
    return rc;
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    char err[256] = "";
    if (parse(data, size, err, sizeof(err)) == 0)
        return true;
    fprintf(stderr, "  %s: %s\n", label, err);
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (parse(data, size, err, sizeof(err)) != 0)
        return 0;
    if (run.device_count < 1 || run.device_count > BENCH_MAX_DEVICES)
        abort();
    for (size_t d = 0; d < run.device_count; d++) {
        const bench_device *dev = &run.devices[d];
        if (dev->count > BENCH_MAX_TESTS)
            abort();
        for (size_t t = 0; t < dev->count; t++) {
            const bench_result *r = &dev->tests[t];
            if (!r->id[0] || (r->ok && !(r->ms > 0 && isfinite(r->ms))) || isnan(r->gflops) ||
                isnan(r->gbs))
                abort();
        }
    }
    return 0;
}
