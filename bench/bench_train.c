/*
 * One full-training step of GPT-2 small (124M parameters, random weights
 * from its config.json; with --model DIR the model and weights of a Hugging
 * Face folder): forward, loss, backward to every weight (and the gains with
 * --gain), global clipping at 1.0 and AdamW (weight decay 0.01) over all of
 * them. The batch is random ids, or with --data the first B blocks of T
 * tokens of llm.c-layout token shards (what bench/peer_train_llmc.py gives
 * the three trainers it compares). Median wall ms of the model's part and of
 * the whole step after warm-up steps, process CPU ms beside them, and the device
 * memory the step holds (pfx_runtime_memory peak: weights, gradients, two
 * moments, the workspace and the activations).
 *
 * Each part of the step (forward+loss+backward, the optimizer, the whole
 * step) with its tokens/s and model FLOPs utilization: 6 N + 12 L T d FLOPs
 * a token (pfx_model_train_flops) over the device's FMA peak as prefixcl
 * bench measures it (pfx_peak_fma_gflops, or --peak-gflops).
 *
 * With --profile, one more step runs with every product, attention call and
 * loss chunk bracketed by pfx_runtime_finish, and says where the model's time
 * goes, each FLOP-bound part with its GFLOP/s and share of the peak.
 *
 * usage: bench_train [--device SEL] [--model DIR] [--data PATTERN] [--batch 8]
 *                    [--tokens 128] [--steps 3] [--warmup 1] [--gain] [--recompute]
 *                    [--profile] [--peak-gflops X] [--json PATH]
 * The JSON holds each measured step's wall ms (step_ms_each) and the first
 * step's loss (first_loss: the weights as loaded).
 * The step is the one bench/peer_train_torch.py times with PyTorch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefixcl/prefixcl.h"
#include "tool_util.h"

#define CHECK(call) TOOL_CHECK_EXIT(rt, call)

#define MAX_STEPS 64

/* The batch: the first B blocks of T tokens of the shards, refused (naming
 * the shard) before the device opens when they are not that many or hold
 * an id past the vocabulary. */
static bool read_batch(const char *pattern, size_t B, size_t N, size_t vocab, int32_t *ids)
{
    pfx_blocks *blocks = NULL;
    bool ok = pfx_blocks_open_shards(pattern, PFX_SHARD_LLMC, N, &blocks) == PFX_SUCCESS &&
              pfx_blocks_set_vocab(blocks, vocab) == PFX_SUCCESS;
    if (ok && pfx_blocks_count(blocks) < B) {
        fprintf(stderr, "--data %s: %zu blocks of %zu tokens, the batch needs %zu\n", pattern,
                pfx_blocks_count(blocks), N, B);
        pfx_blocks_free(&blocks);
        return false;
    }
    for (size_t b = 0; ok && b < B; b++)
        ok = pfx_blocks_read(blocks, b, ids + b * N) == PFX_SUCCESS;
    if (!ok)
        fprintf(stderr, "--data %s: %s\n", pattern, pfx_last_error(NULL));
    pfx_blocks_free(&blocks);
    return ok;
}

int main(int argc, char **argv)
{
    tool_openblas_settings(argv);
    const char *device = NULL, *json = NULL, *model_dir = NULL, *data = NULL;
    size_t B = 8, N = 128;
    int steps = 3, warmup = 1;
    bool gain = false, profile = false, recompute = false;
    double peak = 0.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_dir = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            B = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            N = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gain"))
            gain = true;
        else if (!strcmp(argv[i], "--profile"))
            profile = true;
        else if (!strcmp(argv[i], "--recompute"))
            recompute = true;
        else if (!strcmp(argv[i], "--peak-gflops") && i + 1 < argc)
            peak = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--device SEL] [--model DIR] [--data PATTERN] [--batch B] "
                    "[--tokens N] [--steps S] [--warmup W] [--gain] [--recompute] [--profile] "
                    "[--peak-gflops X] [--json PATH]\n",
                    argv[0]);
            return 2;
        }
    }
    if (B < 1 || N < 2 || N > 1024 || steps < 1 || steps > MAX_STEPS || warmup < 0) {
        fprintf(stderr, "bad sizes: B >= 1, 2 <= N <= 1024, 1 <= steps <= %d\n", MAX_STEPS);
        return 2;
    }
    /* the folder's shape and the shards' batch checked before the device opens */
    size_t vocab = 50257;
    if (model_dir) {
        pfx_model_shape sh;
        if (pfx_model_read_config(model_dir, &sh) != PFX_SUCCESS) {
            fprintf(stderr, "--model %s: %s\n", model_dir, pfx_last_error(NULL));
            return 2;
        }
        vocab = sh.vocab;
    }
    int32_t *ids = malloc(B * N * sizeof(int32_t));
    if (!ids)
        return 1;
    if (data && !read_batch(data, B, N, vocab, ids)) {
        free(ids);
        return 2;
    }
    pfx_runtime *rt = tool_runtime("bench_train", device);
    if (!rt)
        return 1;
    pfx_model *model = NULL;
    pfx_context_params cp = { .max_batch = B, .max_tokens = N, .recompute = recompute };
    pfx_context *ctx = NULL;
    if (model_dir)
        CHECK(pfx_model_load(rt, model_dir, NULL, &model));
    else
        CHECK(tool_gpt2_small_random(rt, NULL, 1234, &model));
    CHECK(pfx_context_create(model, &cp, &ctx));
    pfx_model_shape shape;
    CHECK(pfx_model_get_shape(model, &shape));
    const size_t W = pfx_model_weight_count(model), L = shape.layers, H = shape.heads;

    /* every weight and (with --gain) a gain per layer and head, AdamW in two groups */
    pfx_optimizer *opt = NULL;
    pfx_optimizer_params op = { .max_grad_norm = 1.0f };
    CHECK(pfx_optimizer_create(rt, &op, &opt));
    pfx_optimizer_group_params wg = PFX_OPTIMIZER_GROUP_DEFAULTS, gg = PFX_OPTIMIZER_GROUP_DEFAULTS;
    wg.lr = 1e-4f;
    gg.lr = 5e-5f;
    gg.weight_decay = 0.0f;
    unsigned g_w, g_g;
    CHECK(pfx_optimizer_add_group(opt, &wg, &g_w));
    CHECK(pfx_optimizer_add_group(opt, &gg, &g_g));
    pfx_tensor **dw = calloc(W, sizeof(*dw)), **gt = calloc(L, sizeof(*gt)),
               **dg = calloc(L, sizeof(*dg));
    float *gains = calloc(L * H, sizeof(float));
    if (!dw || !gt || !dg || !gains)
        return 1;
    for (size_t i = 0; i < W; i++) {
        pfx_model_weight_info info;
        pfx_tensor *w = NULL;
        CHECK(pfx_model_get_weight(model, i, &info));
        CHECK(pfx_model_weight_tensor(model, i, &w));
        CHECK(pfx_tensor_create(rt, PFX_DTYPE_F32, info.ndim, info.shape, &dw[i]));
        CHECK(pfx_optimizer_add_param(opt, g_w, w, dw[i], info.name));
    }
    const size_t hs[1] = { H };
    for (size_t l = 0; gain && l < L; l++) {
        char name[32];
        snprintf(name, sizeof(name), "gains.%zu", l);
        CHECK(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hs, &gt[l]));
        CHECK(pfx_tensor_fill(gt[l], 0.0f));
        CHECK(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, hs, &dg[l]));
        CHECK(pfx_optimizer_add_param(opt, g_g, gt[l], dg[l], name));
    }

    uint64_t s = 42;
    for (size_t i = 0; !data && i < B * N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % shape.vocab);
    }
    pfx_model_batch batch = { B, N, ids, NULL, NULL };
    pfx_model_prefix pre = { .gain_mode = gain ? PFX_GAIN_LINEAR : PFX_GAIN_OFF,
                             .gains = gain ? gains : NULL,
                             .gain_ramp = 1.0f };
    pfx_model_grads mg = { .gains = gain ? dg : NULL, .weights = dw };

    double wall_model[MAX_STEPS], wall_opt[MAX_STEPS], wall_step[MAX_STEPS], cpu_step[MAX_STEPS],
        loss = 0, first_loss = 0;
    for (int it = -warmup; it < steps; it++) {
        const double t0 = tool_now_s() * 1e3, c0 = tool_cpu_s() * 1e3;
        for (size_t l = 0; gain && l < L; l++)
            CHECK(pfx_tensor_read(gt[l], 0, H, gains + l * H));
        CHECK(pfx_model_backward(ctx, &batch, &pre, &mg, &loss));
        CHECK(pfx_runtime_finish(rt));
        const double t1 = tool_now_s() * 1e3;
        pfx_optimizer_report rep;
        CHECK(pfx_optimizer_step(opt, &rep));
        CHECK(pfx_runtime_finish(rt));
        const double t2 = tool_now_s() * 1e3, c2 = tool_cpu_s() * 1e3;
        if (it == -warmup)
            first_loss = loss;
        if (it >= 0) {
            wall_model[it] = t1 - t0;
            wall_opt[it] = t2 - t1;
            wall_step[it] = t2 - t0;
            cpu_step[it] = c2 - c0;
        }
        fprintf(stderr, "step %d: loss %.4f, |g| %.3f, %.0f ms\n", it, loss, (double)rep.grad_norm,
                t2 - t0);
    }
    static const char *const prof_names[PFX_MODEL_PART_COUNT] = {
        "block GEMMs", "LM head GEMMs", "attention forward", "attention backward", "fused loss"
    };
    double prof_total = 0, prof_ms[PFX_MODEL_PART_COUNT] = { 0 };
    if (profile) {
        CHECK(pfx_model_profile_enable(ctx, true));
        const double t0 = tool_now_s() * 1e3;
        CHECK(pfx_model_backward(ctx, &batch, &pre, &mg, &loss));
        CHECK(pfx_runtime_finish(rt));
        prof_total = tool_now_s() * 1e3 - t0;
        CHECK(pfx_model_profile_enable(ctx, false));
        CHECK(pfx_model_profile_read(ctx, prof_ms, PFX_MODEL_PART_COUNT));
    }
    if (!(peak > 0.0))
        CHECK(pfx_peak_fma_gflops(rt, 1.0, &peak));
    pfx_memory_stats mem;
    CHECK(pfx_runtime_memory(rt, &mem));
    const pfx_device_info *dev = pfx_runtime_device(rt);
    const double med_model = tool_median(wall_model, (size_t)steps),
                 med_step = tool_median(wall_step, (size_t)steps);
    const double med_cpu = tool_median(cpu_step, (size_t)steps),
                 med_opt = tool_median(wall_opt, (size_t)steps);
    /* the FLOPs of a token, and of the profiled parts (per token) */
    const double flops = pfx_model_train_flops(&shape, N, true);
    const double C = (double)shape.hidden, d = (double)(H * shape.head_dim),
                 kv = (double)(shape.kv_heads * shape.head_dim), I = (double)shape.intermediate;
    const double mlp = (strcmp(shape.model_type, "gpt2") ? 3.0 : 2.0) * C * I;
    const double part_flops[PFX_MODEL_PART_COUNT] = {
        [PFX_MODEL_PART_GEMM] = 6.0 * (double)L * (2.0 * C * d + 2.0 * C * kv + mlp),
        [PFX_MODEL_PART_HEAD] = 6.0 * (double)shape.vocab * C,
        [PFX_MODEL_PART_ATTN_FWD] = 4.0 * (double)L * (double)N * d,
        [PFX_MODEL_PART_ATTN_BWD] = 8.0 * (double)L * (double)N * d,
    };
    const double tok = (double)(B * N);
    printf("device: %s (%s)\n", dev->device_name, dev->platform_name);
    printf("test: %s full-training step, B=%zu N=%zu, %zu layers of %zu, %zu parameters%s, %s, "
           "AdamW + clipping, %s\n",
           model_dir ? model_dir : "GPT-2 small", B, N, shape.layers, shape.hidden,
           shape.parameters, gain ? " + gains" : "",
           recompute ? "blocks recomputed" : "activations kept", data ? data : "random ids");
    printf("FMA peak: %.1f GFLOP/s (prefixcl bench's peak.fma); %.4g FLOPs a token "
           "(6 N + 12 L T d)\n",
           peak, flops);
    printf("  %-28s %10.2f ms wall %10.0f tokens/s  MFU %5.1f %%\n", "forward+loss+backward",
           med_model, tok / (med_model / 1e3),
           100.0 * tok * flops / (med_model / 1e3) / (peak * 1e9));
    printf("  %-28s %10.2f ms wall %10.0f tokens/s\n", "optimizer (clip + AdamW)", med_opt,
           tok / (med_opt / 1e3));
    printf("  %-28s %10.2f ms wall %10.0f tokens/s  MFU %5.1f %%  %10.2f ms cpu\n", "step",
           med_step, tok / (med_step / 1e3), 100.0 * tok * flops / (med_step / 1e3) / (peak * 1e9),
           med_cpu);
    printf("  %-28s %10.2f MiB\n", "device memory peak", (double)mem.peak_bytes / 1048576.0);
    printf("  %-28s %10.4f\n", "loss", loss);
    if (profile) {
        double rest = prof_total;
        printf("profile: model forward+loss+backward %.2f ms wall, serialized\n", prof_total);
        for (int i = 0; i < PFX_MODEL_PART_COUNT; i++) {
            printf("  %-28s %10.2f ms %5.1f %%", prof_names[i], prof_ms[i],
                   100.0 * prof_ms[i] / prof_total);
            if (part_flops[i] > 0 && prof_ms[i] > 0) {
                const double gf = tok * part_flops[i] / (prof_ms[i] / 1e3) * 1e-9;
                printf("  %10.1f GFLOP/s %5.1f %% of the peak", gf, 100.0 * gf / peak);
            }
            printf("\n");
            rest -= prof_ms[i];
        }
        printf("  %-28s %10.2f ms %5.1f %%\n", "rest (norms, activations, copies)", rest,
               100.0 * rest / prof_total);
    }
    if (json) {
        FILE *out = fopen(json, "w");
        if (!out)
            return 1;
        fprintf(out,
                "{\"tool\": \"bench_train\", \"device\": \"%s\", \"batch\": %zu, \"tokens\": %zu, "
                "\"gain\": %s, "
                "\"steps\": %d, \"loss\": %.6f, \"peak_bytes\": %zu, \"model_ms\": %.3f, "
                "\"optimizer_ms\": %.3f, \"step_ms\": %.3f, \"tokens_per_s\": %.1f, "
                "\"peak_gflops\": %.2f, \"flops_per_token\": %.6g, \"mfu\": %.5f, "
                "\"parameters\": %zu, \"first_loss\": %.6f, \"step_ms_each\": [",
                dev->device_name, B, N, gain ? "true" : "false", steps, loss, mem.peak_bytes,
                med_model, med_opt, med_step, tok / (med_step / 1e3), peak, flops,
                tok * flops / (med_step / 1e3) / (peak * 1e9), shape.parameters, first_loss);
        for (int i = 0; i < steps; i++)
            fprintf(out, "%s%.3f", i ? ", " : "", wall_step[i]);
        fprintf(out, "]}\n");
        fclose(out);
    }
    for (size_t i = 0; i < W; i++)
        pfx_tensor_destroy(&dw[i]);
    for (size_t l = 0; l < L; l++) {
        pfx_tensor_destroy(&gt[l]);
        pfx_tensor_destroy(&dg[l]);
    }
    free(dw);
    free(gt);
    free(dg);
    free(gains);
    free(ids);
    pfx_optimizer_destroy(&opt);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&model);
    pfx_runtime_destroy(&rt);
    return 0;
}
