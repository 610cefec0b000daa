/*
 * One prefix-tuning step of a whole model: GPT-2 small's shape (config.json
 * alone, random weights) with a prefix encoder (prefix 20, hidden
 * 512): encoder forward, model forward + loss + backward to the prefixes,
 * encoder backward, AdamW on the encoder's parameters. Median wall ms per
 * phase and per step after warm-up steps, process CPU ms (every PoCL worker
 * thread) beside it, and the device memory the step holds (pfx_runtime_memory
 * peak).
 *
 * With --profile, one more step runs with every product, attention call and
 * loss chunk bracketed by pfx_runtime_finish, and says where the model's time
 * goes: the blocks' GEMMs, the LM head's GEMMs, attention forward and
 * backward, the fused loss, and the rest (norms, activations, RoPE, copies).
 *
 * usage: bench_model [--device SEL] [--batch 4] [--tokens 128] [--steps 3]
 *                    [--warmup 1] [--half] [--recompute] [--profile] [--json PATH]
 * --recompute: the context keeps only each block's input (its recompute).
 * The step is the one bench/peer_model_torch.py times with PyTorch + PEFT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prefixcl/prefixcl.h"
#include "tool_util.h"

#define L          12
#define HKV        12
#define D          64
#define PREFIX     20
#define ENC_HIDDEN 512

#define CHECK(call) TOOL_CHECK_EXIT(rt, call)

enum { PH_ENC_FWD, PH_MODEL, PH_ENC_BWD, PH_ADAMW, PH_STEP, PH_COUNT };
static const char *const phase_names[PH_COUNT] = { "encoder forward", "model forward+loss+backward",
                                                   "encoder backward", "AdamW", "step" };

int main(int argc, char **argv)
{
    tool_openblas_settings(argv);
    const char *device = NULL, *json = NULL;
    size_t B = 4, N = 128;
    int steps = 3, warmup = 1;
    bool half = false, profile = false, recompute = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            B = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            N = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--half"))
            half = true;
        else if (!strcmp(argv[i], "--profile"))
            profile = true;
        else if (!strcmp(argv[i], "--recompute"))
            recompute = true;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--device SEL] [--batch B] [--tokens N] [--steps S] [--warmup W] "
                    "[--half] [--recompute] [--profile] [--json PATH]\n",
                    argv[0]);
            return 2;
        }
    }
    if (B < 1 || N < 1 || N + PREFIX > 1024 || steps < 1 || warmup < 0) {
        fprintf(stderr, "bad sizes: B >= 1, 1 <= N <= %d, steps >= 1\n", 1024 - PREFIX);
        return 2;
    }
    pfx_runtime *rt = tool_runtime("bench_model", device);
    if (!rt)
        return 1;
    pfx_model *model = NULL;
    pfx_model_params mp = { .storage = half ? PFX_DTYPE_F16 : PFX_DTYPE_F32 };
    pfx_context_params cp = {
        .max_batch = B, .max_tokens = N, .max_prefix_len = PREFIX, .recompute = recompute
    };
    pfx_context *ctx = NULL;
    CHECK(tool_gpt2_small_random(rt, &mp, 1234, &model));
    CHECK(pfx_context_create(model, &cp, &ctx)); /* measured with the model, as before */
    pfx_memory_stats mem_model;
    CHECK(pfx_runtime_memory(rt, &mem_model));

    pfx_encoder *enc = NULL;
    pfx_encoder_params ep = { .layers = L,
                              .kv_heads = HKV,
                              .head_dim = D,
                              .prefix_len = PREFIX,
                              .embed_dim = ENC_HIDDEN,
                              .hidden_dim = ENC_HIDDEN };
    CHECK(pfx_encoder_create(rt, &ep, &enc));
    CHECK(pfx_encoder_init_random(enc, 99, 1.0f));
    pfx_tensor *kp[L], *vp[L], *dkp[L], *dvp[L];
    size_t pshape[3] = { HKV, PREFIX, D };
    for (int l = 0; l < L; l++) {
        CHECK(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &kp[l]));
        CHECK(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &vp[l]));
        CHECK(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &dkp[l]));
        CHECK(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, pshape, &dvp[l]));
    }
    pfx_tensor *grad[PFX_ENCODER_PARAM_COUNT];
    pfx_optimizer *opt = NULL;
    CHECK(pfx_optimizer_create(rt, NULL, &opt));
    unsigned group;
    pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
    CHECK(pfx_optimizer_add_group(opt, &gp, &group));
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++) {
        pfx_tensor *p = pfx_encoder_tensor(enc, (pfx_encoder_param)i);
        size_t shp[PFX_MAX_DIMS];
        for (unsigned k = 0; k < pfx_tensor_ndim(p); k++)
            shp[k] = pfx_tensor_dim(p, k);
        CHECK(pfx_tensor_create(rt, PFX_DTYPE_F32, pfx_tensor_ndim(p), shp, &grad[i]));
        CHECK(pfx_optimizer_add_param(opt, group, p, grad[i],
                                      pfx_encoder_param_name((pfx_encoder_param)i)));
    }
    pfx_encoder_grads eg = { grad[0], grad[1], grad[2], grad[3], grad[4], false };

    int32_t *ids = malloc(B * N * sizeof(int32_t));
    if (!ids)
        return 1;
    uint64_t s = 42;
    for (size_t i = 0; i < B * N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % 50257);
    }
    pfx_model_batch batch = { B, N, ids, NULL, NULL };
    pfx_model_prefix pre = { .prefix_len = PREFIX, .keys = kp, .values = vp };
    pfx_model_grads mg = { .keys = dkp, .values = dvp };

    double wall[PH_COUNT][64], cpu[PH_COUNT][64], loss = 0;
    if (steps > 64)
        steps = 64;
    for (int it = -warmup; it < steps; it++) {
        double t[PH_COUNT + 1], c[PH_COUNT + 1];
        t[0] = tool_now_s() * 1e3;
        c[0] = tool_cpu_s() * 1e3;
        CHECK(pfx_encoder_forward(enc, kp, vp));
        CHECK(pfx_runtime_finish(rt));
        t[1] = tool_now_s() * 1e3;
        c[1] = tool_cpu_s() * 1e3;
        CHECK(pfx_model_backward(ctx, &batch, &pre, &mg, &loss));
        CHECK(pfx_runtime_finish(rt));
        t[2] = tool_now_s() * 1e3;
        c[2] = tool_cpu_s() * 1e3;
        CHECK(pfx_encoder_backward(enc, (const pfx_tensor *const *)dkp,
                                   (const pfx_tensor *const *)dvp, &eg));
        CHECK(pfx_runtime_finish(rt));
        t[3] = tool_now_s() * 1e3;
        c[3] = tool_cpu_s() * 1e3;
        pfx_optimizer_report rep;
        CHECK(pfx_optimizer_step(opt, &rep));
        CHECK(pfx_runtime_finish(rt));
        t[4] = tool_now_s() * 1e3;
        c[4] = tool_cpu_s() * 1e3;
        if (it >= 0) {
            for (int ph = 0; ph < PH_STEP; ph++) {
                wall[ph][it] = t[ph + 1] - t[ph];
                cpu[ph][it] = c[ph + 1] - c[ph];
            }
            wall[PH_STEP][it] = t[4] - t[0];
            cpu[PH_STEP][it] = c[4] - c[0];
        }
        fprintf(stderr, "step %d: loss %.4f, %.0f ms\n", it, loss, t[4] - t[0]);
    }
    static const char *const prof_names[PFX_MODEL_PART_COUNT] = {
        "block GEMMs", "LM head GEMMs", "attention forward", "attention backward", "fused loss"
    };
    double prof_total = 0, prof_ms[PFX_MODEL_PART_COUNT] = { 0 };
    if (profile) {
        CHECK(pfx_model_profile_enable(ctx, true));
        double t0 = tool_now_s() * 1e3;
        CHECK(pfx_model_backward(ctx, &batch, &pre, &mg, &loss));
        CHECK(pfx_runtime_finish(rt));
        prof_total = tool_now_s() * 1e3 - t0;
        CHECK(pfx_model_profile_enable(ctx, false));
        CHECK(pfx_model_profile_read(ctx, prof_ms, PFX_MODEL_PART_COUNT));
    }
    pfx_memory_stats mem;
    CHECK(pfx_runtime_memory(rt, &mem));
    const pfx_device_info *dev = pfx_runtime_device(rt);
    printf("device: %s (%s)\n", dev->device_name, dev->platform_name);
    printf("test: GPT-2 small prefix-tuning step, B=%zu N=%zu P=%d, encoder hidden %d, %s weights, "
           "%s\n",
           B, N, PREFIX, ENC_HIDDEN, half ? "half" : "float32",
           recompute ? "blocks recomputed" : "activations kept");
    double med_wall[PH_COUNT], med_cpu[PH_COUNT];
    for (int ph = 0; ph < PH_COUNT; ph++) {
        med_wall[ph] = tool_median(wall[ph], (size_t)steps);
        med_cpu[ph] = tool_median(cpu[ph], (size_t)steps);
        printf("  %-28s %10.2f ms wall %10.2f ms cpu\n", phase_names[ph], med_wall[ph],
               med_cpu[ph]);
    }
    printf("  %-28s %10.2f MiB (weights and workspace %.2f MiB)\n", "device memory peak",
           (double)mem.peak_bytes / 1048576.0, (double)mem_model.live_bytes / 1048576.0);
    printf("  %-28s %10.4f\n", "loss", loss);
    if (profile) {
        double rest = prof_total;
        printf("profile: model forward+loss+backward %.2f ms wall, serialized\n", prof_total);
        for (int i = 0; i < PFX_MODEL_PART_COUNT; i++) {
            printf("  %-28s %10.2f ms %5.1f %%\n", prof_names[i], prof_ms[i],
                   100.0 * prof_ms[i] / prof_total);
            rest -= prof_ms[i];
        }
        printf("  %-28s %10.2f ms %5.1f %%\n", "rest", rest, 100.0 * rest / prof_total);
    }
    if (json) {
        FILE *out = fopen(json, "w");
        if (!out)
            return 1;
        fprintf(out,
                "{\"tool\": \"bench_model\", \"device\": \"%s\", \"batch\": %zu, \"tokens\": %zu, "
                "\"prefix\": %d, \"half\": %s, \"recompute\": %s, \"steps\": %d, \"loss\": %.6f, "
                "\"peak_bytes\": %zu, "
                "\"model_bytes\": %zu, \"phases\": {",
                dev->device_name, B, N, PREFIX, half ? "true" : "false",
                recompute ? "true" : "false", steps, loss, mem.peak_bytes, mem_model.live_bytes);
        for (int ph = 0; ph < PH_COUNT; ph++)
            fprintf(out, "%s\"%s\": {\"wall_ms\": %.3f, \"cpu_ms\": %.3f}", ph ? ", " : "",
                    phase_names[ph], med_wall[ph], med_cpu[ph]);
        fprintf(out, "}}\n");
        fclose(out);
    }
    free(ids);
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        pfx_tensor_destroy(&grad[i]);
    for (int l = 0; l < L; l++) {
        pfx_tensor_destroy(&kp[l]);
        pfx_tensor_destroy(&vp[l]);
        pfx_tensor_destroy(&dkp[l]);
        pfx_tensor_destroy(&dvp[l]);
    }
    pfx_optimizer_destroy(&opt);
    pfx_encoder_destroy(&enc);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&model);
    pfx_runtime_destroy(&rt);
    return 0;
}
