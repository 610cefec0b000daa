/* Helpers the tool's commands share (tool_util.h). */
#include "tool_util.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

const char *const tool_storages[] = { "f32", "f16", "bf16", "q8_0", NULL };
const char *const tool_kv_dtypes[] = { "f32", "f16", "bf16", NULL };

/* The dtype of name in a list of names at their pfx_dtype's index. */
static bool dtype_named(const char *const *names, const char *name, pfx_dtype *out)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(name, names[i])) {
            *out = (pfx_dtype)i;
            return true;
        }
    return false;
}

bool tool_storage_parse(const char *name, pfx_dtype *out)
{
    return dtype_named(tool_storages, name, out);
}

bool tool_kv_dtype_parse(const char *name, pfx_dtype *out)
{
    return dtype_named(tool_kv_dtypes, name, out);
}

float tool_uniform(uint64_t *state, float amp)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return amp * (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

pfx_status tool_random_tensor(pfx_runtime *rt, unsigned ndim, const size_t *shape, uint64_t *rng,
                              float amp, pfx_tensor **out)
{
    *out = NULL;
    pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, ndim, shape, out);
    if (st != PFX_SUCCESS)
        return st;
    size_t n = pfx_tensor_numel(*out);
    float *h = malloc(n * sizeof(float));
    if (!h) {
        pfx_tensor_destroy(out);
        return PFX_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = tool_uniform(rng, amp);
    st = pfx_tensor_write(*out, 0, n, h);
    free(h);
    if (st != PFX_SUCCESS)
        pfx_tensor_destroy(out);
    return st;
}

pfx_runtime *tool_runtime(const char *command, const char *selector)
{
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.device = selector;
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, &params) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl %s: %s\n", command, pfx_last_error(NULL));
        return NULL;
    }
    return rt;
}

/* The cached peaks: one line a device, "GFLOPS<TAB>platform|device|driver". */
#define PEAK_FILE "fma_peak.txt"

static void peak_key(const pfx_runtime *rt, char *key, size_t cap)
{
    const pfx_device_info *d = pfx_runtime_device(rt);
    snprintf(key, cap, "%s|%s|%s", d->platform_name, d->device_name, d->driver_version);
}

/* The peak cached for the device, or 0: lines that do not parse are skipped
 * (the file is the cache's, but read as any outside file). */
static double cached_peak(const char *path, const char *key)
{
    FILE *f = NULL;
    if (pfx_input_open(path, &f) != PFX_SUCCESS)
        return 0.0;
    char line[512];
    double found = 0.0;
    while (fgets(line, sizeof(line), f)) {
        char *tab = strchr(line, '\t'), *end = NULL;
        if (!tab)
            continue;
        line[strcspn(line, "\n")] = '\0';
        const double g = strtod(line, &end);
        if (end == tab && g > 0.0 && g < 1e9 && !strcmp(tab + 1, key))
            found = g;
    }
    fclose(f);
    return found;
}

double tool_fma_peak(const char *command, pfx_runtime *rt, double given)
{
    if (given > 0.0)
        return given;
    const char *dir = pfx_runtime_cache_dir(rt);
    char path[4200] = "", key[400];
    peak_key(rt, key, sizeof(key));
    if (dir && *dir)
        snprintf(path, sizeof(path), "%s/%s", dir, PEAK_FILE);
    double g = path[0] ? cached_peak(path, key) : 0.0;
    if (g > 0.0)
        return g;
    if (pfx_peak_fma_gflops(rt, 0.25, &g) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl %s: no MFU: the FMA peak could not be measured (%s)\n", command,
                pfx_last_error(rt));
        return 0.0;
    }
    FILE *f = path[0] ? fopen(path, "a") : NULL; /* a line appended: the last one counts */
    if (f) {
        fprintf(f, "%.6g\t%s\n", g, key);
        fclose(f);
    }
    return g;
}

double tool_mfu(double tokens_per_s, double flops_per_token, double peak_gflops, size_t devices)
{
    if (!(peak_gflops > 0.0) || devices == 0)
        return 0.0;
    return 100.0 * tokens_per_s * flops_per_token / (peak_gflops * 1e9 * (double)devices);
}

double tool_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double tool_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int tool_write_map_csv(const char *path, const float *map, size_t rows, size_t P, size_t M,
                       char key_tag, char row_tag)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "query");
    for (size_t j = 0; j < P + M; j++)
        fprintf(f, ",%c%zu", j < P ? 'p' : key_tag, j < P ? j : j - P);
    fputc('\n', f);
    for (size_t i = 0; i < rows; i++) {
        fprintf(f, "%c%zu", row_tag, i);
        for (size_t j = 0; j < P + M; j++)
            fprintf(f, ",%.9g", (double)map[i * (P + M) + j]);
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

int tool_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tool_median(double *x, size_t n)
{
    qsort(x, n, sizeof(double), tool_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double tool_quantile(const double *sorted, size_t n, double q)
{
    const double at = q * (double)(n - 1);
    const size_t lo = (size_t)at;
    if (lo + 1 >= n)
        return sorted[n - 1];
    return sorted[lo] + (at - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

const char *tool_device_type(pfx_device_type type)
{
    switch (type) {
    case PFX_DEVICE_CPU: return "cpu";
    case PFX_DEVICE_GPU: return "gpu";
    case PFX_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

void tool_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(out, "\\u%04x", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

pfx_status tool_gpt2_small_random(pfx_runtime *rt, const pfx_model_params *params, uint64_t seed,
                                  pfx_model **out)
{
    static const char config[] =
        "{\"model_type\": \"gpt2\", \"activation_function\": \"gelu_new\", \"n_embd\": 768, "
        "\"n_head\": 12, \"n_inner\": null, \"n_layer\": 12, \"n_positions\": 1024, "
        "\"vocab_size\": 50257, \"layer_norm_epsilon\": 1e-05, \"tie_word_embeddings\": true}\n";
    if (out)
        *out = NULL;
    char dir[] = "/tmp/pfx-gpt2-small-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot create a folder under /tmp: %s\n", strerror(errno));
        return PFX_ERROR_IO;
    }
    char path[sizeof(dir) + 16];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    bool written = f && fputs(config, f) >= 0;
    if (f && fclose(f) != 0)
        written = false;
    pfx_status st = PFX_ERROR_IO;
    if (written)
        st = pfx_model_create_random(rt, dir, params, seed, out);
    else
        fprintf(stderr, "cannot write %s\n", path);
    unlink(path);
    rmdir(dir);
    return st;
}

void tool_openblas_settings(char **argv)
{
    int again = 0;
    const char *core = pfx_gemm_host_core_hint();
    if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0)
        again = 1;
    if (!getenv("OPENBLAS_THREAD_TIMEOUT") && setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0)
        again = 1;
    if (!getenv("OMP_WAIT_POLICY") && setenv("OMP_WAIT_POLICY", "passive", 1) == 0)
        again = 1;
    /* GNU OpenMP's threads spin about 0.1 ms after a parallel region, then
     * sleep (this count overrides the passive policy there): a decode step's
     * 49 back-to-back products find them awake instead of waking each by a
     * futex, while the default 3 ms of spinning would take the cores PoCL's
     * kernels need next */
    if (!getenv("GOMP_SPINCOUNT") && setenv("GOMP_SPINCOUNT", "10000", 1) == 0)
        again = 1;
    if (!again)
        return;
    /* The kernel names a process after the file it executes: the binary's
     * own path keeps "prefixcl" for ps, pgrep and the journal, where
     * /proc/self/exe would name it "exe". */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0 && (size_t)n < sizeof(self) - 1) {
        self[n] = '\0';
        execv(self, argv); /* returns only on failure: the file moved or deleted */
    }
    execv("/proc/self/exe", argv); /* returns only on failure: go on as is */
}

int tool_dist_failed(const char *command, pfx_status st)
{
    if (st == PFX_SUCCESS)
        return 0;
    fprintf(stderr, "prefixcl %s: %s\n", command, pfx_last_error(NULL));
    return 1;
}

bool tool_remove_stale(const char *command, const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (unlink(path) == 0 || errno == ENOENT)
        return true;
    fprintf(stderr, "prefixcl %s: cannot remove the stale %s: %s\n", command, path,
            strerror(errno));
    return false;
}

void tool_print_example_rule(FILE *out, const pfx_example_rule *r)
{
    fprintf(out, "examples: %zu special token%s a text (the tokenizer's post-processor), ",
            r->special, r->special == 1 ? "" : "s");
    if (r->eos_id >= 0)
        fprintf(out, "EOS (id %d) appended", (int)r->eos_id);
    else
        fputs("no EOS", out);
    fprintf(out, ", at most %zu tokens (--no-eos, --max-length)\n", r->max_length);
}

bool tool_say_builds(FILE *out, bool tty, double seconds, bool *said)
{
    if (*said || seconds < 0.05)
        return false;
    *said = true;
    if (tty)
        fputs("\r\033[K", out); /* the bar's line, cleared for the phase's */
    fprintf(out,
            "kernels: %.1f s building them on first use (cached for the next runs; not in the "
            "rates and the time left)\n",
            seconds);
    return true;
}
