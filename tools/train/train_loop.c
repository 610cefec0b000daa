/* The training job of `prefixcl train` (train_loop.h). */
#include "train_loop.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/tool_util.h"

#define MAX_LAYERS 64

void train_default_config(train_config *c)
{
    *c = (train_config){
        .steps = 300,
        .layers = 3,
        .seed = 1,
        .batch = 4,
        .tokens = 24,
        .model_dim = 64,
        .heads = 4,
        .kv_heads = 2,
        .head_dim = 16,
        .prefix_len = 8,
        .embed_dim = 32,
        .hidden_dim = 64,
        .lr = 1e-2f,
        .max_grad_norm = 1.0f,
        .warmup_steps = 10,
        .gain_ramp_steps = 50,
        .weight_scale = 1.7f,
        .teacher_prefix_scale = 1.0f,
        .teacher_gain_scale = 1.0f,
    };
}

void train_fit_schedules(train_config *c)
{
    if (c->gain_ramp_steps > c->steps / 4)
        c->gain_ramp_steps = (uint32_t)(c->steps / 4);
    if (c->warmup_steps > c->steps / 10)
        c->warmup_steps = (uint32_t)(c->steps / 10);
}

void train_result_free(train_result *r)
{
    if (!r)
        return;
    free(r->losses);
    free(r->grad_norms);
    free(r->layer_stats);
    free(r->lrs);
    free(r->eval_steps);
    free(r->eval_losses);
    free(r->gains);
    free(r->teacher_gains);
    memset(r, 0, sizeof(*r));
}

typedef struct job {
    pfx_runtime *rt;
    size_t L;
    pfx_layer *layer[MAX_LAYERS];
    /* teacher */
    pfx_tensor *t_pk[MAX_LAYERS], *t_pv[MAX_LAYERS];
    float *t_gain[MAX_LAYERS];
    pfx_tensor *t_act[MAX_LAYERS + 1];
    /* student */
    pfx_encoder *enc;
    pfx_tensor *s_pk[MAX_LAYERS], *s_pv[MAX_LAYERS], *dpk[MAX_LAYERS], *dpv[MAX_LAYERS];
    pfx_tensor *gain[MAX_LAYERS], *dgain[MAX_LAYERS];
    float *s_gain[MAX_LAYERS];
    pfx_tensor *s_act[MAX_LAYERS + 1];
    pfx_tensor *enc_grad[PFX_ENCODER_PARAM_COUNT];
    pfx_tensor *dy, *scratch[2];
    pfx_tensor *stat[3]; /* entropy, top-k, prefix mass [H] */
    pfx_optimizer *opt;
    float *x_host, *x_eval;
} job;

static void job_free(job *j)
{
    pfx_optimizer_destroy(&j->opt);
    for (size_t l = 0; l < MAX_LAYERS; l++) {
        pfx_layer_destroy(&j->layer[l]);
        pfx_tensor_destroy(&j->t_pk[l]);
        pfx_tensor_destroy(&j->t_pv[l]);
        pfx_tensor_destroy(&j->s_pk[l]);
        pfx_tensor_destroy(&j->s_pv[l]);
        pfx_tensor_destroy(&j->dpk[l]);
        pfx_tensor_destroy(&j->dpv[l]);
        pfx_tensor_destroy(&j->gain[l]);
        pfx_tensor_destroy(&j->dgain[l]);
        free(j->t_gain[l]);
        free(j->s_gain[l]);
    }
    for (size_t l = 0; l <= MAX_LAYERS; l++) {
        pfx_tensor_destroy(&j->t_act[l]);
        pfx_tensor_destroy(&j->s_act[l]);
    }
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        pfx_tensor_destroy(&j->enc_grad[i]);
    for (int i = 0; i < 3; i++)
        pfx_tensor_destroy(&j->stat[i]);
    pfx_tensor_destroy(&j->dy);
    pfx_tensor_destroy(&j->scratch[0]);
    pfx_tensor_destroy(&j->scratch[1]);
    pfx_encoder_destroy(&j->enc);
    free(j->x_host);
    free(j->x_eval);
    pfx_runtime_destroy(&j->rt);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        pfx_status st_ = (call);                                                                   \
        if (st_ != PFX_SUCCESS) {                                                                  \
            fprintf(stderr, "prefixcl train: %s: %s (%s)\n", #call, pfx_status_string(st_),        \
                    pfx_last_error(j->rt));                                                        \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static int make_dir(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "prefixcl train: cannot create %s: %s\n", path, strerror(errno));
    return -1;
}

/* Mean over heads of an [H] tensor. */
static double head_mean(const pfx_tensor *t, size_t H)
{
    float v[256];
    if (H > 256 || pfx_tensor_read(t, 0, H, v) != PFX_SUCCESS)
        return NAN;
    double s = 0.0;
    for (size_t h = 0; h < H; h++)
        s += v[h];
    return s / (double)H;
}

int train_run(const char *device, const train_config *c, const char *out_dir, train_step_fn on_step,
              void *user, train_result *res)
{
    memset(res, 0, sizeof(*res));
    job jj, *j = &jj;
    memset(j, 0, sizeof(*j));
    const double t0 = tool_now_s();
    const size_t L = c->layers, B = c->batch, N = c->tokens, C = c->model_dim, H = c->heads;
    const size_t Hkv = c->kv_heads, D = c->head_dim, P = c->prefix_len;
    if (L == 0 || L > MAX_LAYERS || H > 256 || c->steps == 0 || B == 0) {
        fprintf(stderr, "prefixcl train: layers must be 1..%d, steps and batch >= 1\n", MAX_LAYERS);
        return 1;
    }
    /* data parallel (dist.h): this rank's rows [b0, b0 + Bl) of each batch */
    size_t b0, Bl;
    pfx_dist_shard(B, &b0, &Bl);
    if (Bl == 0) {
        fprintf(stderr,
                "prefixcl train: rank %d: batch %zu has fewer sequences than the %d ranks\n",
                pfx_dist_rank(), B, pfx_dist_size());
        return 1;
    }
    {
        char text[512];
        snprintf(text, sizeof(text),
                 "steps %zu layers %zu seed %llu batch %zu tokens %zu C %zu H %zu Hkv %zu D %zu "
                 "P %zu E %zu M %zu lr %a clip %a warmup %u ramp %u scales %a %a %a eval %zu",
                 c->steps, L, (unsigned long long)c->seed, B, N, C, H, Hkv, D, P, c->embed_dim,
                 c->hidden_dim, (double)c->lr, (double)c->max_grad_norm, c->warmup_steps,
                 c->gain_ramp_steps, (double)c->weight_scale, (double)c->teacher_prefix_scale,
                 (double)c->teacher_gain_scale, c->eval_every);
        if (tool_dist_failed("train", pfx_dist_agree("training configuration", text)))
            return 1;
    }
    const bool lead = pfx_dist_rank() == 0;
    char devbuf[32];
    if (tool_dist_failed("train", pfx_dist_device(device, devbuf, sizeof(devbuf), &device)))
        return 1;
    j->L = L;
    if (!(j->rt = tool_runtime("train", device)))
        return 1;
    const pfx_device_info *info = pfx_runtime_device(j->rt);
    snprintf(res->device, sizeof(res->device), "%s (%s)", info->device_name, info->platform_name);
    res->losses = calloc(c->steps, sizeof(double));
    res->grad_norms = calloc(c->steps, sizeof(float));
    res->layer_stats = calloc(L, sizeof(train_layer_stats));
    res->lrs = calloc(c->steps, sizeof(float));
    const size_t evals = c->eval_every ? c->steps / c->eval_every : 0;
    res->eval_steps = calloc(evals ? evals : 1, sizeof(size_t));
    res->eval_losses = calloc(evals ? evals : 1, sizeof(double));
    res->gains = calloc(L * H, sizeof(float));
    res->teacher_gains = calloc(L * H, sizeof(float));
    j->x_host = malloc(B * N * C * sizeof(float));
    j->x_eval = malloc(B * N * C * sizeof(float));
    if (!res->losses || !res->grad_norms || !res->layer_stats || !res->lrs || !res->eval_steps ||
        !res->eval_losses || !res->gains || !res->teacher_gains || !j->x_host || !j->x_eval) {
        fprintf(stderr, "prefixcl train: out of host memory\n");
        goto fail;
    }

    /* the frozen stack */
    pfx_layer_params lp = { .model_dim = C,
                            .heads = H,
                            .kv_heads = Hkv,
                            .head_dim = D,
                            .prefix_len = P,
                            .max_batch = Bl,
                            .max_tokens = N,
                            .bias = true,
                            .causal = true,
                            .residual = true,
                            .gain_mode = PFX_GAIN_TANH };
    uint64_t rng = c->seed * UINT64_C(0x9E3779B97F4A7C15) + 12345;
    for (size_t l = 0; l < L; l++) {
        CHECK(pfx_layer_create(j->rt, &lp, &j->layer[l]));
        CHECK(pfx_layer_init_random(j->layer[l], c->seed * 1000 + l, c->weight_scale));
    }
    /* the teacher: hidden random prefixes and gains */
    const size_t pshape[3] = { Hkv, P, D }, gshape[1] = { H }, act[3] = { Bl, N, C };
    for (size_t l = 0; l < L; l++) {
        CHECK(tool_random_tensor(j->rt, 3, pshape, &rng, c->teacher_prefix_scale, &j->t_pk[l]));
        CHECK(tool_random_tensor(j->rt, 3, pshape, &rng, c->teacher_prefix_scale, &j->t_pv[l]));
        j->t_gain[l] = malloc(H * sizeof(float));
        j->s_gain[l] = calloc(H, sizeof(float));
        if (!j->t_gain[l] || !j->s_gain[l])
            goto fail;
        for (size_t h = 0; h < H; h++)
            res->teacher_gains[l * H + h] = j->t_gain[l][h] =
                tool_uniform(&rng, c->teacher_gain_scale);
    }
    for (size_t l = 0; l <= L; l++) {
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, act, &j->s_act[l]));
        if (l > 0)
            CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, act, &j->t_act[l]));
    }
    CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, act, &j->dy));
    CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, act, &j->scratch[0]));
    CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, act, &j->scratch[1]));
    for (int i = 0; i < 3; i++)
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 1, gshape, &j->stat[i]));

    /* the student: encoder MLP -> prefixes, gains from 0 */
    pfx_encoder_params ep = { .layers = L,
                              .kv_heads = Hkv,
                              .head_dim = D,
                              .prefix_len = P,
                              .embed_dim = c->embed_dim,
                              .hidden_dim = c->hidden_dim };
    CHECK(pfx_encoder_create(j->rt, &ep, &j->enc));
    CHECK(pfx_encoder_init_random(j->enc, c->seed + 77, 1.0f));
    CHECK(pfx_encoder_counts(j->enc, &res->counts));
    res->gain_params = L * H;
    for (size_t l = 0; l < L; l++) {
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->s_pk[l]));
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->s_pv[l]));
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->dpk[l]));
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->dpv[l]));
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 1, gshape, &j->gain[l]));
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, 1, gshape, &j->dgain[l]));
        CHECK(pfx_tensor_fill(j->gain[l], 0.0f));
    }
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++) {
        pfx_tensor *p = pfx_encoder_tensor(j->enc, (pfx_encoder_param)i);
        size_t shape[2] = { pfx_tensor_dim(p, 0), pfx_tensor_dim(p, 1) };
        CHECK(pfx_tensor_create(j->rt, PFX_DTYPE_F32, pfx_tensor_ndim(p), shape, &j->enc_grad[i]));
    }

    /* AdamW: the encoder at lr, the gains at lr / 2 without decay */
    pfx_optimizer_params op = { .max_grad_norm = c->max_grad_norm,
                                .warmup_steps = c->warmup_steps,
                                .decay = PFX_LR_COSINE,
                                .decay_steps = c->steps > c->warmup_steps
                                                   ? (uint32_t)(c->steps - c->warmup_steps)
                                                   : 1,
                                .min_lr_ratio = 0.1f,
                                .gain_ramp_steps = c->gain_ramp_steps };
    CHECK(pfx_optimizer_create(j->rt, &op, &j->opt));
    pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
    gp.lr = c->lr;
    gp.weight_decay = 0.0f;
    pfx_optimizer_group_params gg = gp;
    gg.lr = c->lr / 2;
    unsigned g_prefix, g_gain;
    CHECK(pfx_optimizer_add_group(j->opt, &gp, &g_prefix));
    CHECK(pfx_optimizer_add_group(j->opt, &gg, &g_gain));
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        CHECK(pfx_optimizer_add_param(
            j->opt, g_prefix, pfx_encoder_tensor(j->enc, (pfx_encoder_param)i), j->enc_grad[i],
            pfx_encoder_param_name((pfx_encoder_param)i)));
    for (size_t l = 0; l < L; l++) {
        char name[64];
        snprintf(name, sizeof(name), "layers.%zu.gain", l);
        CHECK(pfx_optimizer_add_param(j->opt, g_gain, j->gain[l], j->dgain[l], name));
    }

    pfx_layer_prefix tpre[MAX_LAYERS], spre[MAX_LAYERS];
    pfx_layer_grads grads[MAX_LAYERS];
    memset(grads, 0, sizeof(grads));
    for (size_t l = 0; l < L; l++) {
        tpre[l] = (pfx_layer_prefix){ j->t_pk[l], j->t_pv[l], j->t_gain[l], 1.0f, NULL };
        grads[l] = (pfx_layer_grads){ .dprefix_k = j->dpk[l],
                                      .dprefix_v = j->dpv[l],
                                      .dgain = j->dgain[l] };
    }
    j->t_act[0] = j->s_act[0]; /* one input for both stacks */
    pfx_encoder_grads eg = { j->enc_grad[0], j->enc_grad[1], j->enc_grad[2],
                             j->enc_grad[3], j->enc_grad[4], false };
    uint64_t data_rng = c->seed * UINT64_C(0xD1B54A32D192ED03) + 99;
    uint64_t eval_rng = c->seed * UINT64_C(0xD1B54A32D192ED03) + 7777; /* the held-out batch */
    for (size_t i = 0; i < B * N * C; i++)
        j->x_eval[i] = tool_uniform(&eval_rng, 1.0f);
    res->setup_seconds = tool_now_s() - t0;
    const double t1 = tool_now_s();
    for (size_t s = 0; s < c->steps; s++) {
        const float ramp = pfx_optimizer_gain_ramp(j->opt);
        CHECK(pfx_encoder_forward(j->enc, j->s_pk, j->s_pv));
        /* gains stay on the device: no read back inside a step */
        for (size_t l = 0; l < L; l++)
            spre[l] = (pfx_layer_prefix){ j->s_pk[l], j->s_pv[l], NULL, ramp, j->gain[l] };
        if (c->eval_every && (s + 1) % c->eval_every == 0) {
            /* the parameters this step trains from, on the held-out batch
             * (this rank's rows of it; rank 0 gets the global mean) */
            double eval_loss, eval_count = (double)(Bl * N * C);
            CHECK(pfx_tensor_write(j->s_act[0], 0, Bl * N * C, j->x_eval + b0 * N * C));
            CHECK(pfx_stack_forward(j->layer, L, tpre, j->t_act));
            CHECK(pfx_stack_forward(j->layer, L, spre, j->s_act));
            CHECK(pfx_mse_loss(j->s_act[L], j->t_act[L], j->dy, &eval_loss));
            CHECK(pfx_dist_mean(&eval_count, &eval_loss));
            res->eval_steps[res->eval_count] = s + 1;
            res->eval_losses[res->eval_count++] = eval_loss;
        }
        /* every rank draws the whole global batch and keeps its rows */
        for (size_t i = 0; i < B * N * C; i++)
            j->x_host[i] = tool_uniform(&data_rng, 1.0f);
        CHECK(pfx_tensor_write(j->s_act[0], 0, Bl * N * C, j->x_host + b0 * N * C));
        CHECK(pfx_stack_forward(j->layer, L, tpre, j->t_act));
        CHECK(pfx_stack_forward(j->layer, L, spre, j->s_act));
        double loss;
        CHECK(pfx_mse_loss(j->s_act[L], j->t_act[L], j->dy, &loss));
        CHECK(pfx_stack_backward(j->layer, L, spre, j->s_act, j->dy, grads, NULL, j->scratch));
        CHECK(pfx_encoder_backward(j->enc, (const pfx_tensor *const *)j->dpk,
                                   (const pfx_tensor *const *)j->dpv, &eg));
        /* the MSE is a mean over this rank's Bl x N x C elements: the global
         * gradient weighs each rank by its share (dist.h) */
        double count = (double)(Bl * N * C);
        CHECK(pfx_dist_reduce_grads(j->opt, &count, &loss));
        pfx_optimizer_report rep;
        CHECK(pfx_optimizer_step(j->opt, &rep));
        CHECK(pfx_dist_check_params(j->opt, s + 1));
        res->losses[s] = loss;
        res->grad_norms[s] = rep.grad_norm;
        res->lrs[s] = c->lr * rep.lr_factor;
        res->steps_done = s + 1;
        if (s == 0)
            res->first_step_seconds = tool_now_s() - t1;
        if (on_step && lead) {
            double el = tool_now_s() - t1;
            train_step_info si = { .step = s + 1,
                                   .loss = loss,
                                   .grad_norm = rep.grad_norm,
                                   .lr_factor = rep.lr_factor,
                                   .gain_ramp = ramp,
                                   .skipped = rep.skipped,
                                   .elapsed_s = el,
                                   .tokens_per_s = el > 0 ? (double)(B * N * (s + 1)) / el : 0 };
            on_step(&si, user);
        }
        /* every rank stops at the same step when any was asked to */
        if (pfx_dist_any(c->stop_flag && *c->stop_flag) && s + 1 < c->steps) {
            res->stopped = true;
            break;
        }
    }
    res->train_seconds = tool_now_s() - t1;
    res->first_loss = res->losses[0];
    const size_t done = res->steps_done;
    size_t tail = done < 10 ? done : 10;
    for (size_t s = done - tail; s < done; s++)
        res->final_loss += res->losses[s] / (double)tail;

    if (!lead) {
        /* rank 0 alone analyses and writes the outputs */
        j->t_act[0] = NULL;
        job_free(j);
        return 0;
    }
    /* bake, then analyse one more batch (rank 0's rows of it) with the
     * baked prefixes */
    CHECK(pfx_encoder_bake(j->enc));
    for (size_t i = 0; i < B * N * C; i++)
        j->x_host[i] = tool_uniform(&data_rng, 1.0f);
    CHECK(pfx_tensor_write(j->s_act[0], 0, Bl * N * C, j->x_host + b0 * N * C));
    pfx_tensor *baked_k[MAX_LAYERS], *baked_v[MAX_LAYERS];
    for (size_t l = 0; l < L; l++) {
        baked_k[l] = pfx_encoder_prefix_k(j->enc, l);
        baked_v[l] = pfx_encoder_prefix_v(j->enc, l);
        CHECK(pfx_tensor_read(j->gain[l], 0, H, j->s_gain[l]));
        spre[l] = (pfx_layer_prefix){ baked_k[l], baked_v[l], j->s_gain[l], 1.0f, NULL };
    }
    for (size_t l = 0; l < L; l++) {
        /* teacher, layer by layer (stats of each layer's own forward) */
        CHECK(pfx_layer_forward(j->layer[l], j->t_act[l], &tpre[l], j->t_act[l + 1]));
        CHECK(pfx_layer_attention_stats(j->layer[l], &tpre[l], 1, j->stat[0], NULL, j->stat[2]));
        res->layer_stats[l].teacher_entropy = head_mean(j->stat[0], H);
        res->layer_stats[l].teacher_prefix_mass = head_mean(j->stat[2], H);
    }
    for (size_t l = 0; l < L; l++) {
        CHECK(pfx_layer_forward(j->layer[l], j->s_act[l], &spre[l], j->s_act[l + 1]));
        CHECK(pfx_layer_attention_stats(j->layer[l], &spre[l], 1, j->stat[0], NULL, j->stat[2]));
        res->layer_stats[l].entropy = head_mean(j->stat[0], H);
        res->layer_stats[l].prefix_mass = head_mean(j->stat[2], H);
        memcpy(res->gains + l * H, j->s_gain[l], H * sizeof(float));
    }

    /* save: per-layer prefixes and gains (safetensors), and a PEFT folder */
    if (make_dir(out_dir))
        goto fail;
    {
        size_t count = 3 * L;
        pfx_named_tensor *items = calloc(count, sizeof(*items));
        char(*names)[64] = calloc(count, sizeof(*names));
        if (!items || !names) {
            free(items);
            free(names);
            goto fail;
        }
        for (size_t l = 0; l < L; l++) {
            snprintf(names[3 * l], 64, "layers.%zu.prefix_k", l);
            snprintf(names[3 * l + 1], 64, "layers.%zu.prefix_v", l);
            snprintf(names[3 * l + 2], 64, "layers.%zu.gain", l);
            items[3 * l] = (pfx_named_tensor){ .name = names[3 * l], .tensor = baked_k[l] };
            items[3 * l + 1] = (pfx_named_tensor){ .name = names[3 * l + 1], .tensor = baked_v[l] };
            items[3 * l + 2] = (pfx_named_tensor){ .name = names[3 * l + 2], .tensor = j->gain[l] };
        }
        char layers_s[32], heads_s[32], seed_s[32];
        snprintf(layers_s, sizeof(layers_s), "%zu", L);
        snprintf(heads_s, sizeof(heads_s), "%zu", H);
        snprintf(seed_s, sizeof(seed_s), "%llu", (unsigned long long)c->seed);
        pfx_st_metadata meta[] = { { "format", "prefixcl-prefixes-1" },
                                   { "gain_mode", "tanh" },
                                   { "num_layers", layers_s },
                                   { "num_attention_heads", heads_s },
                                   { "seed", seed_s } };
        char path[4096];
        snprintf(path, sizeof(path), "%s/prefixes.safetensors", out_dir);
        pfx_status st =
            pfx_safetensors_save(j->rt, path, items, count, meta, sizeof(meta) / sizeof(meta[0]));
        free(items);
        free(names);
        if (st != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl train: saving %s: %s\n", path, pfx_last_error(j->rt));
            goto fail;
        }
        snprintf(path, sizeof(path), "%s/peft", out_dir);
        pfx_peft_save_params pp;
        pfx_peft_default_save_params(&pp);
        pp.base_model_name_or_path = "prefixcl-train-frozen-stack";
        CHECK(pfx_peft_save_prefixes(j->rt, path, baked_k, baked_v, L, &pp));
    }
    j->t_act[0] = NULL; /* shared with s_act[0] */
    job_free(j);
    return 0;
fail:
    j->t_act[0] = NULL;
    job_free(j);
    return 1;
}
