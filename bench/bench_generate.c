/*
 * Serving prefix adapters: GPT-2 small's shape (config.json alone, random
 * weights), one adapter per request (random prefixes of 20 positions in one
 * bank), prompts of N tokens, greedy generation of NEW tokens through the KV
 * cache. Prefill and decode tokens/s (medians over the runs after a warm-up
 * run) for each batch size, and the device memory of the bank and the cache.
 * --gains: every adapter also carries its own per-head tanh gains (each
 * request then attends with its own: per-item gains); --compare-one: the
 * decode step's median wall time of each batch against the same batch with
 * every request on adapter 0 (one gain vector per call), the two run
 * alternately (A B, B A, ...) so that the load of a shared machine falls on
 * both alike.
 *
 * --compare-host: on a CPU device, the decode step's median wall time and
 * host product time on the queue (PREFIXCL_HOST_STEP=off: kernels between
 * the host products) against the host step (the library's default there),
 * the two alternated run by run in one process (A B, B A, ...), so that a
 * shared machine's load falls on both alike, with the process CPU time per
 * step (over the whole generation: the prompt's share included), which a
 * loaded machine moves least.
 *
 * --model DIR: the weights of a Hugging Face GPT-2 small folder instead
 * (config.json + model.safetensors), so that another engine can run the very
 * same weights; --no-adapter: plain requests without prefixes, as an engine
 * without prefix adapters serves them.
 *
 * The streaming floor of a decode step: the bytes of the product weights it
 * reads once (every block's and the head's, in the storage) over the
 * machine's read bandwidth (read_bw.h, measured first on every core, the
 * model not yet loaded); each batch's decode step is printed as a multiple
 * of it.
 *
 * --kv-dtype f16 (or bf16): the KV cache stored as half (bfloat16), as
 * llama.cpp's default f16 cache, so that the two read the same cache bytes.
 *
 * usage: bench_generate [--device SEL] [--model DIR] [--batch 1,8] [--tokens 128] [--new 32]
 *                       [--runs 3] [--storage f32|f16|bf16|q8_0] [--kv-dtype f32|f16|bf16]
 *                       [--no-adapter] [--gains] [--compare-one] [--compare-host] [--json PATH]
 * bench/peer_generate_torch.py times the same with transformers + PEFT,
 * bench/peer_llama.py with llama.cpp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prefixcl/io.h"
#include "prefixcl/prefixcl.h"
#include "read_bw.h"
#include "tool_util.h"

#define L           12
#define HKV         12
#define D           64
#define PREFIX      20
#define MAX_BATCHES 8

#define CHECK(call) TOOL_CHECK_EXIT(rt, call)

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* A prefixcl prefixes file of random prefixes at `path`; with gains, random
 * per-head tanh gains in [-0.5, 0.5) too (GPT-2 small: heads = HKV). */
static void write_adapter(pfx_runtime *rt, const char *path, uint64_t seed, bool gains)
{
    const size_t n = HKV * PREFIX * D;
    float *data = malloc((2 * L * n + L * HKV) * sizeof(float));
    pfx_named_tensor items[3 * L];
    char names[3 * L][40];
    if (!data)
        exit(1);
    for (size_t i = 0; i < 2 * L * n + L * HKV; i++)
        data[i] = (float)((double)lcg(&seed) / (double)(1ull << 31) - 0.5);
    for (size_t l = 0; l < 2 * L; l++) {
        snprintf(names[l], sizeof(names[l]), "layers.%zu.prefix_%c", l / 2, l % 2 ? 'v' : 'k');
        items[l] = (pfx_named_tensor){ .name = names[l],
                                       .host = data + l * n,
                                       .ndim = 3,
                                       .shape = { HKV, PREFIX, D },
                                       .dtype = PFX_DTYPE_F32 };
    }
    for (size_t l = 0; gains && l < L; l++) {
        snprintf(names[2 * L + l], sizeof(names[0]), "layers.%zu.gain", l);
        items[2 * L + l] = (pfx_named_tensor){ .name = names[2 * L + l],
                                               .host = data + 2 * L * n + l * HKV,
                                               .ndim = 1,
                                               .shape = { HKV },
                                               .dtype = PFX_DTYPE_F32 };
    }
    pfx_st_metadata meta[] = { { "format", "prefixcl-prefixes-1" },
                               { "gain_mode", gains ? "tanh" : "off" } };
    CHECK(pfx_safetensors_save(NULL, path, items, gains ? 3 * L : 2 * L, meta, 2));
    free(data);
}

/* Per decode step, from one generation with the launch statistics on: the
 * totals read at the first token (after the prefill) and at the end, the
 * difference over new - 1 decode steps. (Two generations subtracted, a
 * prefill alone from a whole run, went negative under load.) */
typedef struct step_costs {
    double wall_ms, kernels, device_ms, enqueue_ms, host_gemms, host_gemm_ms;
} step_costs;

static double diff(uint64_t a, uint64_t b)
{
    return (double)b - (double)a;
}

static step_costs costs_of(const pfx_launch_stats *a, const pfx_launch_stats *b, double wall_s,
                           double steps)
{
    const double ms = 1e-6 / steps;
    return (step_costs){ wall_s * 1e3 / steps,
                         diff(a->kernels, b->kernels) / steps,
                         diff(a->device_ns, b->device_ns) * ms,
                         diff(a->enqueue_ns, b->enqueue_ns) * ms,
                         diff(a->host_gemms, b->host_gemms) / steps,
                         diff(a->host_gemm_ns, b->host_gemm_ns) * ms };
}

/* The statistics after the prefill: read at the first token of the run. */
typedef struct after_prefill {
    pfx_runtime *rt;
    bool read;
    pfx_status status;
    pfx_launch_stats stats;
} after_prefill;

static void on_first_token(void *user, size_t request, int32_t token)
{
    (void)request;
    (void)token;
    after_prefill *a = user;
    if (!a->read) {
        a->read = true;
        a->status = pfx_launch_stats_read(a->rt, &a->stats);
    }
}

static pfx_status decode_step_costs(pfx_runtime *rt, pfx_context *ctx, pfx_kv_cache *cache,
                                    const pfx_adapter_bank *bank, pfx_request *req, size_t B,
                                    size_t new, step_costs *prefill, step_costs *out)
{
    pfx_launch_stats end;
    pfx_generate_stats gs;
    const pfx_launch_stats none = { 0 };
    after_prefill first = { .rt = rt };
    const pfx_sampling s = { .max_new_tokens = new };
    pfx_status e;
    if ((e = pfx_launch_stats_enable(rt, true)) ||
        (e = pfx_generate(ctx, cache, bank, req, B, &s, on_first_token, &first, &gs)) ||
        (e = first.status) || (e = pfx_launch_stats_read(rt, &end)) ||
        (e = pfx_launch_stats_enable(rt, false)))
        return e;
    *prefill = costs_of(&none, &first.stats, gs.prefill_seconds, 1.0);
    *out = costs_of(&first.stats, &end, gs.decode_seconds, (double)(new - 1));
    return PFX_SUCCESS;
}

/* Median decode step wall time of the batch as given (step_ms[0]) and with
 * every request on adapter 0 (step_ms[1]), alternated run by run (in turns
 * A B then B A). */
static void compare_adapter0(pfx_runtime *rt, pfx_context *ctx, pfx_kv_cache *cache,
                             const pfx_adapter_bank *bank, const pfx_request *req, size_t B,
                             size_t new, int runs, double *step_ms)
{
    pfx_request *both[2] = { malloc(B * sizeof(*req)), malloc(B * sizeof(*req)) };
    double *ms[2] = { malloc((size_t)runs * sizeof(double)),
                      malloc((size_t)runs * sizeof(double)) };
    if (!both[0] || !both[1] || !ms[0] || !ms[1])
        exit(1);
    memcpy(both[0], req, B * sizeof(*req));
    memcpy(both[1], req, B * sizeof(*req));
    for (size_t r = 0; r < B; r++)
        both[1][r].adapter = 0;
    const pfx_sampling s = { .max_new_tokens = new };
    for (int run = -1; run < runs; run++) { /* run -1: warm-up */
        for (int k = 0; k < 2; k++) {
            const int i = (run & 1) ? 1 - k : k; /* A B, B A, ...: neither always second */
            pfx_generate_stats gs;
            CHECK(pfx_generate(ctx, cache, bank, both[i], B, &s, NULL, NULL, &gs));
            if (run >= 0)
                ms[i][run] = gs.decode_seconds * 1e3 / (double)(new - 1);
        }
    }
    for (int i = 0; i < 2; i++)
        step_ms[i] = tool_median(ms[i], (size_t)runs);
    printf("          decode step, median of %d alternated runs: %.2f ms with each request's "
           "adapter, %.2f ms with adapter 0 for all (%+.1f %%)\n",
           runs, step_ms[0], step_ms[1], 100.0 * (step_ms[0] / step_ms[1] - 1.0));
    for (int i = 0; i < 2; i++) {
        free(both[i]);
        free(ms[i]);
    }
}

/* Bytes of the weights one decode step reads once: every block's q, k, v,
 * attention output and MLP products, and the head (Q8_0: 34 bytes a block
 * of 32). Biases, norms and the embedding rows are left out (under 0.1 %). */
static double step_weight_bytes(const pfx_model_shape *s, pfx_dtype storage)
{
    const double C = (double)s->hidden, I = (double)s->intermediate;
    const double QD = (double)(s->heads * s->head_dim), KVD = (double)(s->kv_heads * s->head_dim);
    const double block = C * (QD + 2 * KVD) + QD * C + 2 * C * I;
    const double weights = (double)s->layers * block + (double)s->vocab * C;
    const double per = storage == PFX_DTYPE_F32    ? 4.0
                       : storage == PFX_DTYPE_Q8_0 ? 34.0 / 32.0
                                                   : 2.0;
    return weights * per;
}

/* The decode step's median wall and host product time per step, ms, with
 * the step on the queue (i = 0: PREFIXCL_HOST_STEP=off) and on the host
 * (i = 1), alternated run by run (A B, B A, ...). */
static void compare_host(pfx_runtime *rt, pfx_context *ctx, pfx_kv_cache *cache,
                         const pfx_adapter_bank *bank, pfx_request *req, size_t B, size_t new,
                         int runs, double floor_ms)
{
    double *ms[2] = { malloc((size_t)runs * sizeof(double)),
                      malloc((size_t)runs * sizeof(double)) },
           *gm[2] = { malloc((size_t)runs * sizeof(double)),
                      malloc((size_t)runs * sizeof(double)) },
           *cpu[2] = { malloc((size_t)runs * sizeof(double)),
                       malloc((size_t)runs * sizeof(double)) };
    if (!ms[0] || !ms[1] || !gm[0] || !gm[1] || !cpu[0] || !cpu[1])
        exit(1);
    for (int run = -1; run < runs; run++) { /* run -1: warm-up */
        for (int k = 0; k < 2; k++) {
            const int i = (run & 1) ? 1 - k : k; /* neither always second */
            setenv("PREFIXCL_HOST_STEP", i ? "on" : "off", 1);
            step_costs pc, c;
            const double c0 = tool_cpu_s();
            CHECK(decode_step_costs(rt, ctx, cache, bank, req, B, new, &pc, &c));
            if (run >= 0) {
                ms[i][run] = c.wall_ms;
                gm[i][run] = c.host_gemm_ms;
                cpu[i][run] = (tool_cpu_s() - c0) * 1e3 / (double)(new - 1);
            }
        }
    }
    unsetenv("PREFIXCL_HOST_STEP");
    double step[2], gemm[2], work[2];
    for (int i = 0; i < 2; i++) {
        step[i] = tool_median(ms[i], (size_t)runs);
        gemm[i] = tool_median(gm[i], (size_t)runs);
        work[i] = tool_median(cpu[i], (size_t)runs);
    }
    printf("          decode step, medians of %d alternated runs: on the queue %.2f ms (host "
           "products %.2f ms, %.2fx the floor; process CPU %.2f ms a step), on the host %.2f ms "
           "(host products %.2f ms, %.2fx the floor; CPU %.2f ms a step): %.2fx as fast\n",
           runs, step[0], gemm[0], step[0] / floor_ms, work[0], step[1], gemm[1],
           step[1] / floor_ms, work[1], step[0] / step[1]);
    for (int i = 0; i < 2; i++) {
        free(ms[i]);
        free(gm[i]);
        free(cpu[i]);
    }
}

/* Whether dir/config.json describes GPT-2 small's attention (the adapters
 * written here are shaped for it); says why not on stderr. */
static bool gpt2_small_folder(const char *dir, size_t *vocab)
{
    pfx_model_shape sh;
    pfx_status st = pfx_model_read_config(dir, &sh);
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "--model %s: %s (%s)\n", dir, pfx_status_string(st), pfx_last_error(NULL));
        return false;
    }
    if (sh.layers != L || sh.kv_heads != HKV || sh.head_dim != D || sh.vocab < 1) {
        fprintf(stderr,
                "--model %s: %zu layers, %zu kv heads of %zu, vocab %zu; this bench wants "
                "GPT-2 small's %d layers, %d heads of %d\n",
                dir, sh.layers, sh.kv_heads, sh.head_dim, sh.vocab, L, HKV, D);
        return false;
    }
    *vocab = sh.vocab;
    return true;
}

int main(int argc, char **argv)
{
    tool_openblas_settings(argv);
    const char *device = NULL, *json = NULL, *model_dir = NULL;
    size_t batches[MAX_BATCHES] = { 1, 8 }, nb = 2, N = 128, NEW = 32;
    int runs = 3;
    pfx_dtype storage = PFX_DTYPE_F32, kv_dtype = PFX_DTYPE_F32;
    bool gains = false, compare_one = false, compare_host_step = false, adapters = true;
    size_t vocab = 50257;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            device = argv[++i];
        } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            model_dir = argv[++i];
        } else if (!strcmp(argv[i], "--no-adapter")) {
            adapters = false;
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            nb = 0;
            for (char *t = strtok(argv[++i], ","); t && nb < MAX_BATCHES; t = strtok(NULL, ","))
                batches[nb++] = strtoul(t, NULL, 10);
        } else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            N = strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--new") && i + 1 < argc) {
            NEW = strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--gains")) {
            gains = true;
        } else if (!strcmp(argv[i], "--compare-one")) {
            compare_one = true;
        } else if (!strcmp(argv[i], "--compare-host")) {
            compare_host_step = true;
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json = argv[++i];
        } else if (!strcmp(argv[i], "--storage") && i + 1 < argc &&
                   tool_storage_parse(argv[i + 1], &storage)) {
            i++;
        } else if (!strcmp(argv[i], "--kv-dtype") && i + 1 < argc &&
                   tool_kv_dtype_parse(argv[i + 1], &kv_dtype)) {
            i++;
        } else {
            fprintf(stderr,
                    "usage: %s [--device SEL] [--model DIR] [--batch 1,8] [--tokens N] [--new NEW] "
                    "[--runs R] [--storage f32|f16|bf16|q8_0] [--kv-dtype f32|f16|bf16] "
                    "[--no-adapter] [--gains] [--compare-one] [--compare-host] [--json PATH]\n",
                    argv[0]);
            return 2;
        }
    }
    size_t maxb = 0;
    for (size_t i = 0; i < nb; i++)
        maxb = batches[i] > maxb ? batches[i] : maxb;
    if (!nb || !maxb || maxb > 64 || N < 1 || NEW < 2 || PREFIX + N + NEW > 1024 || runs < 1) {
        fprintf(stderr,
                "bad sizes: batches 1..64, N >= 1, NEW >= 2, %d + N + NEW <= 1024, runs >= 1\n",
                PREFIX);
        return 2;
    }
    if (!adapters && (gains || compare_one)) {
        fprintf(stderr, "--gains and --compare-one need the adapters (drop --no-adapter)\n");
        return 2;
    }
    if (model_dir && !gpt2_small_folder(model_dir, &vocab))
        return 2;
    /* two rounds, the better kept: one round read 15 GB/s where the machine
     * reads 26-28 (a neighbour's freed pages still being reclaimed) */
    read_bw bw, again;
    if (!read_bw_measure(0, 0, 7, &bw) || !read_bw_measure(0, 0, 7, &again)) {
        fprintf(stderr, "bench_generate: the read-bandwidth measurement found no memory\n");
        return 1;
    }
    if (again.gbs > bw.gbs)
        bw = again;
    pfx_runtime *rt = tool_runtime("bench_generate", device);
    if (!rt)
        return 1;
    pfx_model *model = NULL;
    pfx_model_params mp = { .storage = storage };
    pfx_context_params cp = { .max_batch = maxb,
                              .max_tokens = N,
                              .max_prefix_len = adapters ? PREFIX : 0,
                              .recompute = true };
    pfx_context *ctx = NULL;
    if (model_dir)
        CHECK(pfx_model_load(rt, model_dir, &mp, &model));
    else
        CHECK(tool_gpt2_small_random(rt, &mp, 1234, &model));
    CHECK(pfx_context_create(model, &cp, &ctx));
    pfx_adapter_bank *bank = NULL;
    if (adapters) {
        char dir[] = "/tmp/pfx-bench-generate-XXXXXX";
        if (!mkdtemp(dir))
            return 1;
        char path[sizeof(dir) + 32];
        CHECK(pfx_adapter_bank_create(model, maxb, &bank));
        snprintf(path, sizeof(path), "%s/prefixes.safetensors", dir);
        for (size_t a = 0; a < maxb; a++) {
            int32_t e;
            write_adapter(rt, path, 77 + a, gains);
            CHECK(pfx_adapter_bank_add(bank, path, &e));
        }
        unlink(path);
        rmdir(dir);
    }
    pfx_kv_cache *cache = NULL;
    CHECK(pfx_kv_cache_create_dtype(model, maxb, N + NEW, kv_dtype, &cache));
    pfx_memory_stats mem;
    CHECK(pfx_runtime_memory(rt, &mem));
    pfx_model_shape shape;
    CHECK(pfx_model_get_shape(model, &shape));
    const double weight_bytes = step_weight_bytes(&shape, storage);
    const double floor_ms = weight_bytes / bw.gbs / 1e6;

    int32_t *prompts = malloc(maxb * N * sizeof(int32_t)),
            *outs = malloc(maxb * NEW * sizeof(int32_t));
    pfx_request *req = malloc(maxb * sizeof(*req));
    double *pre = malloc((size_t)runs * sizeof(double)),
           *dec = malloc((size_t)runs * sizeof(double));
    if (!prompts || !outs || !req || !pre || !dec)
        return 1;
    uint64_t seed = 5;
    for (size_t i = 0; i < maxb * N; i++)
        prompts[i] = (int32_t)(lcg(&seed) % vocab);
    const pfx_sampling s = { .max_new_tokens = NEW };
    FILE *js = json ? fopen(json, "w") : NULL;
    if (js)
        fprintf(js,
                "{\"device\": \"%s\", \"tokens\": %zu, \"new\": %zu, \"prefix\": %d, "
                "\"storage\": \"%s\", \"kv_dtype\": \"%s\", \"gains\": %s, \"read_gbs\": %.3f, "
                "\"weight_bytes\": %.0f, \"floor_ms\": %.4f, \"results\": [",
                pfx_runtime_device(rt)->device_name, N, NEW, adapters ? PREFIX : 0,
                tool_storages[storage], tool_kv_dtypes[kv_dtype], gains ? "true" : "false", bw.gbs,
                weight_bytes, floor_ms);
    printf("GPT-2 small (%s, %s, KV cache %s), prefix %d (%s%s), prompt %zu, %zu new tokens, %s\n",
           model_dir ? model_dir : "random weights", tool_storages[storage],
           tool_kv_dtypes[kv_dtype], adapters ? PREFIX : 0,
           adapters ? "one adapter per request" : "no adapter",
           gains ? ", each adapter with its own tanh gains" : "", N, NEW,
           pfx_runtime_device(rt)->device_name);
    printf("bank %.1f MiB (%zu adapters, stored once), KV cache %.1f MiB, device memory %.1f MiB\n",
           bank ? pfx_adapter_bank_bytes(bank) / 1048576.0 : 0.0,
           bank ? pfx_adapter_bank_count(bank) : 0, pfx_kv_cache_bytes(cache) / 1048576.0,
           mem.live_bytes / 1048576.0);
    printf("streaming floor of a decode step: %.1f MB of %s weights / %.1f GB/s read (the best of "
           "%d passes over %.0f MB on %d threads) = %.2f ms\n",
           weight_bytes / 1e6, tool_storages[storage], bw.gbs, bw.passes, (double)bw.bytes / 1e6,
           bw.threads, floor_ms);
    for (size_t k = 0; k < nb; k++) {
        const size_t B = batches[k];
        for (size_t r = 0; r < B; r++)
            req[r] = (pfx_request){
                prompts + r * N, N, adapters ? (int32_t)r : -1, r, outs + r * NEW, 0, false
            };
        for (int run = -1; run < runs; run++) { /* run -1: warm-up (kernel builds) */
            pfx_generate_stats gs;
            CHECK(pfx_generate(ctx, cache, bank, req, B, &s, NULL, NULL, &gs));
            if (run >= 0) {
                pre[run] = gs.prefill_tokens / gs.prefill_seconds;
                dec[run] = gs.decode_tokens / gs.decode_seconds;
            }
        }
        double p = tool_median(pre, (size_t)runs), d = tool_median(dec, (size_t)runs);
        printf("batch %2zu: prefill %8.1f tokens/s, decode %8.1f tokens/s\n", B, p, d);
        step_costs pc, c;
        CHECK(decode_step_costs(rt, ctx, cache, bank, req, B, NEW, &pc, &c));
        const step_costs *both[2] = { &pc, &c };
        for (int i = 0; i < 2; i++)
            printf("          %-7s wall %7.2f ms; %4.0f kernels, %7.2f ms on the device, %6.2f ms "
                   "launching them on the host; %3.0f host-BLAS products, %7.2f ms\n",
                   i ? "decode:" : "prefill:", both[i]->wall_ms, both[i]->kernels,
                   both[i]->device_ms, both[i]->enqueue_ms, both[i]->host_gemms,
                   both[i]->host_gemm_ms);
        printf("          decode step %.2f ms (median of the runs) = %.2fx the streaming floor; "
               "host products %.0f %% of the step above\n",
               1e3 * (double)B / d, 1e3 * (double)B / d / floor_ms,
               c.wall_ms > 0 ? 100.0 * c.host_gemm_ms / c.wall_ms : 0.0);
        double step_ms[2] = { 0, 0 };
        if (compare_host_step)
            compare_host(rt, ctx, cache, bank, req, B, NEW, runs, floor_ms);
        if (compare_one)
            compare_adapter0(rt, ctx, cache, bank, req, B, NEW, runs, step_ms);
        if (js) {
            fprintf(
                js,
                "%s{\"batch\": %zu, \"prefill_tokens_per_s\": %.2f, \"decode_tokens_per_s\": %.2f, "
                "\"decode_floor_ratio\": %.3f, \"decode_step\": {\"wall_ms\": %.3f, \"kernels\": "
                "%.1f, \"device_ms\": %.3f, "
                "\"enqueue_ms\": %.3f, \"host_gemms\": %.1f, \"host_gemm_ms\": %.3f}",
                k ? ", " : "", B, p, d, 1e3 * (double)B / d / floor_ms, c.wall_ms, c.kernels,
                c.device_ms, c.enqueue_ms, c.host_gemms, c.host_gemm_ms);
            if (compare_one)
                fprintf(js, ", \"decode_step_ms\": %.3f, \"decode_step_ms_adapter0\": %.3f",
                        step_ms[0], step_ms[1]);
            fprintf(js, "}");
        }
    }
    if (js) {
        fprintf(js, "]}\n");
        fclose(js);
    }
    free(prompts);
    free(outs);
    free(req);
    free(pre);
    free(dec);
    pfx_kv_cache_destroy(&cache);
    pfx_adapter_bank_destroy(&bank);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&model);
    pfx_runtime_destroy(&rt);
    return 0;
}
