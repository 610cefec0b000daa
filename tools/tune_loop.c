/* The prefix-tuning job of `prefixcl tune` (tune_loop.h): set-up, the
 * training loop, evaluation and statistics. Outputs are tune_out.c's, the
 * checkpoint tune_ckpt.c's. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dist.h"
#include "tool_util.h"
#include "tune_job.h"
#include "tune_out.h"

void tune_default_config(tune_config *c)
{
    *c = (tune_config){
        .prefix_len = 20, .hidden = 512, .epochs = 1, .batch = 8, .max_length = 128,
        .lr = 1e-2f, .gain_lr = -1.0f, .gain_mode = PFX_GAIN_OFF, .gain_ramp_steps = 20,
        .weight_decay = 0.0f, .max_grad_norm = 1.0f, .warmup_steps = 10, .seed = 1,
        .storage = PFX_DTYPE_F32, .demo_layers = 12,
    };
}

void tune_result_free(tune_result *r)
{
    if (!r)
        return;
    free(r->losses);
    free(r->grad_norms);
    free(r->gains);
    free(r->mass_before);
    free(r->mass_after);
    memset(r, 0, sizeof(*r));
}

int tune_fail(const tune_job *j, pfx_status st, const char *what)
{
    if (st == PFX_SUCCESS)
        return 0;
    /* a call without the runtime (the data set's) leaves its detail with the thread */
    const char *detail = pfx_last_error(j && j->rt ? j->rt : NULL);
    if (!*detail)
        detail = pfx_last_error(NULL);
    fprintf(stderr, "prefixcl tune: %s: %s (%s)\n", what, pfx_status_string(st), *detail ? detail : "no detail");
    return 1;
}

static void destroy_all(pfx_tensor **t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        pfx_tensor_destroy(&t[i]);
    free(t);
}

static void job_free(tune_job *j)
{
    pfx_optimizer_destroy(&j->opt);
    if (j->enc && pfx_encoder_is_direct(j->enc)) {
        free(j->pk); /* the encoder's own tensors */
        free(j->pv);
    } else {
        destroy_all(j->pk, j->L);
        destroy_all(j->pv, j->L);
    }
    destroy_all(j->dpk, j->L);
    destroy_all(j->dpv, j->L);
    destroy_all(j->gain, j->L);
    destroy_all(j->dgain, j->L);
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        pfx_tensor_destroy(&j->enc_grad[i]);
    pfx_encoder_destroy(&j->enc);
    pfx_dataset_free(&j->train);
    pfx_dataset_free(&j->eval);
    pfx_tokenizer_free(&j->tok);
    pfx_model_destroy(&j->model);
    free(j->gains_host);
    free(j->params);
    free(j->ids);
    free(j->labels);
    free(j->lens);
    pfx_runtime_destroy(&j->rt);
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The demonstration model: GPT-2 small (12 layers of 768 wide, 12 heads)
 * over the demonstration tokenizer's vocabulary, as a config.json in
 * out_dir/demo-model/ (pfx_model_create_random reads it; the weights and the
 * tokenizer follow, tune_demo.c). */
static int write_demo_config(const tune_job *j, const char *dir, size_t vocab)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "prefixcl tune: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char *path = join(dir, "config.json");
    pfx_output_file *f = NULL;
    pfx_status st = path ? pfx_output_open(path, &f) : PFX_ERROR_OUT_OF_MEMORY;
    if (st == PFX_SUCCESS) {
        fprintf(pfx_output_stream(f),
                "{\n  \"model_type\": \"gpt2\",\n  \"n_layer\": %zu,\n  \"n_head\": 12,\n  \"n_embd\": 768,\n"
                "  \"n_positions\": 1024,\n  \"vocab_size\": %zu,\n  \"activation_function\": \"gelu_new\",\n"
                "  \"layer_norm_epsilon\": 1e-05\n}\n",
                j->cfg->demo_layers, vocab);
        st = pfx_output_commit(&f);
    }
    if (st != PFX_SUCCESS)
        fprintf(stderr, "prefixcl tune: writing %s: %s\n", path ? path : dir, pfx_last_error(NULL));
    free(path);
    return st != PFX_SUCCESS;
}

static int load_model_and_data(tune_job *j, tune_result *r)
{
    const tune_config *c = j->cfg;
    pfx_runtime_params rp;
    pfx_runtime_default_params(&rp);
    char devbuf[32];
    rp.device = dist_device(c->device, devbuf, sizeof(devbuf)); /* this rank's (dist.h) */
    if (!rp.device && dist_size() > 1)
        return 1;
    pfx_status st = pfx_runtime_create(&j->rt, &rp);
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tune: %s\n", pfx_last_error(NULL));
        return 1;
    }
    const pfx_device_info *info = pfx_runtime_device(j->rt);
    snprintf(r->device, sizeof(r->device), "%s (%s)", info->device_name, info->platform_name);
    const char *tok_dir = c->model_dir ? c->model_dir : c->demo_dir;
    if ((st = pfx_tokenizer_load(tok_dir, &j->tok)) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tune: the tokenizer of %s: %s\n", tok_dir, pfx_last_error(NULL));
        return 1;
    }
    pfx_model_params mp = { .storage = c->storage, .max_batch = c->batch, .max_tokens = c->max_length,
                            .max_prefix_len = c->prefix_len };
    if (c->model_dir) {
        st = pfx_model_load(j->rt, c->model_dir, &mp, &j->model);
        char *abs = realpath(c->model_dir, NULL);
        snprintf(r->base_model, sizeof(r->base_model), "%s", abs ? abs : c->model_dir);
        free(abs);
    } else {
        char *dir = join(c->out_dir, "demo-model");
        if (!dir || write_demo_config(j, dir, pfx_tokenizer_vocab_size(j->tok))) {
            free(dir);
            return 1;
        }
        st = pfx_model_create_random(j->rt, dir, &mp, c->seed, &j->model);
        if (st == PFX_SUCCESS && dist_rank() == 0 && tune_demo_write_model(j, dir)) {
            free(dir);
            return 1;
        }
        char *abs = realpath(dir, NULL);
        snprintf(r->base_model, sizeof(r->base_model), "%s", abs ? abs : dir);
        free(abs);
        free(dir);
    }
    if (tune_fail(j, st, c->model_dir ? c->model_dir : "the demonstration model"))
        return 1;
    pfx_model_get_shape(j->model, &j->shape);
    r->shape = j->shape;
    j->L = j->shape.layers;
    j->H = j->shape.heads;
    if (pfx_tokenizer_vocab_size(j->tok) > j->shape.vocab) {
        fprintf(stderr, "prefixcl tune: the tokenizer has %zu ids, the model's vocabulary %zu\n",
                pfx_tokenizer_vocab_size(j->tok), j->shape.vocab);
        return 1;
    }

    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length = c->max_length;
    o.append_eos = pfx_tokenizer_special_id(j->tok, PFX_TOKEN_EOS) >= 0;
    o.seed = c->seed;
    if (pfx_dataset_load(c->data_path, j->tok, &o, &j->train) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl tune: %s\n", pfx_last_error(NULL));
        return 1;
    }
    pfx_dataset_info di;
    pfx_dataset_get_info(j->train, &di);
    if (c->eval_path) {
        o.shuffle = false;
        if (pfx_dataset_load(c->eval_path, j->tok, &o, &j->eval) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl tune: %s\n", pfx_last_error(NULL));
            return 1;
        }
    } else {
        /* a held-back slice: a tenth, at least one example, at most 200 */
        size_t n = di.examples / 10 ? di.examples / 10 : 1;
        n = n > 200 ? 200 : n;
        if (di.examples < 2 || pfx_dataset_hold_out(j->train, n, &j->eval) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl tune: %s has %zu example(s): too few to hold some back; give --eval\n",
                    c->data_path, di.examples);
            return 1;
        }
        pfx_dataset_get_info(j->train, &di);
    }
    r->train_examples = di.examples;
    pfx_dataset_info ei;
    pfx_dataset_get_info(j->eval, &ei);
    r->eval_examples = ei.examples;
    r->eval_tokens = ei.counted;
    j->steps = c->steps ? c->steps : c->epochs * pfx_dataset_batches_per_epoch(j->train, c->batch);
    return 0;
}

/* Registers a parameter and remembers it for the checkpoint. */
static pfx_status add_param(tune_job *j, unsigned group, pfx_tensor *p, pfx_tensor *g, const char *name)
{
    pfx_status st = pfx_optimizer_add_param(j->opt, group, p, g, name);
    if (st == PFX_SUCCESS)
        j->params[j->param_count++] = p;
    return st;
}

/* Prefixes, gains, gradients and the optimizer. */
static int build_trainables(tune_job *j, tune_result *r)
{
    const tune_config *c = j->cfg;
    const size_t L = j->L, H = j->H;
    const bool direct = c->hidden == 0;
    pfx_encoder_params ep = { .layers = L, .kv_heads = j->shape.kv_heads, .head_dim = j->shape.head_dim,
                              .prefix_len = c->prefix_len, .embed_dim = c->hidden, .hidden_dim = c->hidden,
                              .direct = direct };
    pfx_status st;
    if ((st = pfx_encoder_create(j->rt, &ep, &j->enc)) || (st = pfx_encoder_init_random(j->enc, c->seed + 77, 1.0f)) ||
        (st = pfx_encoder_counts(j->enc, &r->counts)))
        return tune_fail(j, st, "the prefix encoder");
    j->pk = calloc(L, sizeof(*j->pk));
    j->pv = calloc(L, sizeof(*j->pv));
    j->dpk = calloc(L, sizeof(*j->dpk));
    j->dpv = calloc(L, sizeof(*j->dpv));
    j->gain = calloc(L, sizeof(*j->gain));
    j->dgain = calloc(L, sizeof(*j->dgain));
    j->gains_host = calloc(L * H, sizeof(float));
    j->params = calloc(PFX_ENCODER_PARAM_COUNT + 3 * L, sizeof(*j->params));
    j->ids = malloc(c->batch * c->max_length * sizeof(int32_t));
    j->labels = malloc(c->batch * c->max_length * sizeof(int32_t));
    j->lens = malloc(c->batch * sizeof(int32_t));
    if (!j->pk || !j->pv || !j->dpk || !j->dpv || !j->gain || !j->dgain || !j->gains_host || !j->params || !j->ids || !j->labels ||
        !j->lens) {
        fprintf(stderr, "prefixcl tune: out of host memory\n");
        return 1;
    }
    const size_t pshape[3] = { j->shape.kv_heads, c->prefix_len, j->shape.head_dim };
    for (size_t l = 0; l < L; l++) {
        if (direct) {
            j->pk[l] = pfx_encoder_prefix_k(j->enc, l);
            j->pv[l] = pfx_encoder_prefix_v(j->enc, l);
        } else if ((st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->pk[l])) ||
                   (st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->pv[l]))) {
            return tune_fail(j, st, "prefix tensors");
        }
        if ((st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->dpk[l])) ||
            (st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->dpv[l])))
            return tune_fail(j, st, "prefix gradients");
        if (c->gain_mode != PFX_GAIN_OFF &&
            ((st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 1, &H, &j->gain[l])) ||
             (st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 1, &H, &j->dgain[l])) ||
             (st = pfx_tensor_fill(j->gain[l], 0.0f))))
            return tune_fail(j, st, "gains");
    }
    if (!direct)
        for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++) {
            pfx_tensor *p = pfx_encoder_tensor(j->enc, (pfx_encoder_param)i);
            size_t shape[2] = { pfx_tensor_dim(p, 0), pfx_tensor_dim(p, 1) };
            if ((st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, pfx_tensor_ndim(p), shape, &j->enc_grad[i])))
                return tune_fail(j, st, "encoder gradients");
        }
    r->gain_params = c->gain_mode != PFX_GAIN_OFF ? L * H : 0;

    const uint32_t steps = j->steps > UINT32_MAX ? UINT32_MAX : (uint32_t)j->steps;
    const uint32_t warm = c->warmup_steps < steps ? c->warmup_steps : 0;
    pfx_optimizer_params op = { .max_grad_norm = c->max_grad_norm, .warmup_steps = warm, .decay = PFX_LR_COSINE,
                                .decay_steps = steps > warm ? steps - warm : 1, .min_lr_ratio = 0.1f,
                                .gain_ramp_steps = c->gain_ramp_steps };
    if ((st = pfx_optimizer_create(j->rt, &op, &j->opt)))
        return tune_fail(j, st, "the optimizer");
    pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
    gp.lr = c->lr;
    gp.weight_decay = c->weight_decay;
    pfx_optimizer_group_params gg = gp;
    gg.lr = c->gain_lr >= 0 ? c->gain_lr : c->lr / 2;
    gg.weight_decay = 0.0f;
    unsigned g_prefix, g_gain;
    if ((st = pfx_optimizer_add_group(j->opt, &gp, &g_prefix)) || (st = pfx_optimizer_add_group(j->opt, &gg, &g_gain)))
        return tune_fail(j, st, "the optimizer groups");
    char name[64];
    for (int i = 0; !direct && i < PFX_ENCODER_PARAM_COUNT; i++)
        if ((st = add_param(j, g_prefix, pfx_encoder_tensor(j->enc, (pfx_encoder_param)i),
                                          j->enc_grad[i], pfx_encoder_param_name((pfx_encoder_param)i))))
            return tune_fail(j, st, "the optimizer");
    for (size_t l = 0; direct && l < L; l++) {
        snprintf(name, sizeof(name), "layers.%zu.prefix_k", l);
        if ((st = add_param(j, g_prefix, j->pk[l], j->dpk[l], name)))
            return tune_fail(j, st, "the optimizer");
        snprintf(name, sizeof(name), "layers.%zu.prefix_v", l);
        if ((st = add_param(j, g_prefix, j->pv[l], j->dpv[l], name)))
            return tune_fail(j, st, "the optimizer");
    }
    for (size_t l = 0; c->gain_mode != PFX_GAIN_OFF && l < L; l++) {
        snprintf(name, sizeof(name), "layers.%zu.gain", l);
        if ((st = add_param(j, g_gain, j->gain[l], j->dgain[l], name)))
            return tune_fail(j, st, "the optimizer");
    }
    /* what a checkpoint must agree with (everything that changes the curve) */
    snprintf(j->config_text, sizeof(j->config_text),
             "model=%s data=%s eval=%s prefix_len=%zu hidden=%zu steps=%zu batch=%zu max_length=%zu lr=%a "
             "gain_lr=%a gain_mode=%d gain_ramp=%u weight_decay=%a max_grad_norm=%a warmup=%u seed=%llu "
             "storage=%d demo_layers=%zu",
             r->base_model, c->data_path, c->eval_path ? c->eval_path : "(held back)", c->prefix_len, c->hidden,
             j->steps, c->batch, c->max_length, (double)c->lr, (double)gg.lr, (int)c->gain_mode,
             (unsigned)c->gain_ramp_steps, (double)c->weight_decay, (double)c->max_grad_norm,
             (unsigned)c->warmup_steps, (unsigned long long)c->seed, (int)c->storage, c->model_dir ? 0 : c->demo_layers);
    return 0;
}

/* The prefixes of the current parameters into pk/pv (MLP mode) and the
 * gains to the host; the prefix description the model calls take. */
static pfx_status current_prefix(tune_job *j, float ramp, pfx_model_prefix *pre)
{
    pfx_status st = PFX_SUCCESS;
    if (!pfx_encoder_is_direct(j->enc))
        st = pfx_encoder_forward(j->enc, j->pk, j->pv);
    const bool gain = j->cfg->gain_mode != PFX_GAIN_OFF;
    for (size_t l = 0; gain && l < j->L && st == PFX_SUCCESS; l++)
        st = pfx_tensor_read(j->gain[l], 0, j->H, j->gains_host + l * j->H);
    *pre = (pfx_model_prefix){ .prefix_len = j->cfg->prefix_len, .keys = j->pk, .values = j->pv,
                               .gain_mode = j->cfg->gain_mode, .gains = gain ? j->gains_host : NULL,
                               .gain_ramp = ramp };
    return st;
}

/* Labels the model counts in one row: t >= 1, not -100. */
static size_t counted_labels(const int32_t *labels, size_t n)
{
    size_t k = 0;
    for (size_t t = 1; t < n; t++)
        k += labels[t] != PFX_LABEL_IGNORE;
    return k;
}

/* Mean token loss over the whole evaluation set (file order). */
static int evaluate(tune_job *j, const pfx_model_prefix *pre, double *out)
{
    pfx_data_position pos = { 0, 0 };
    double sum = 0.0;
    size_t total = 0;
    while (pos.epoch == 0) {
        size_t rows, width;
        pfx_status st = pfx_dataset_next_batch(j->eval, &pos, j->cfg->batch, j->ids, j->lens, j->labels, &rows,
                                               &width);
        if (tune_fail(NULL, st, "evaluation batch")) /* the data set's errors are the thread's */
            return 1;
        if (rows == 0)
            break;
        size_t k = 0;
        for (size_t b = 0; b < rows; b++)
            k += counted_labels(j->labels + b * width, width);
        if (k == 0)
            continue;
        pfx_model_batch mb = { .batch = rows, .tokens = width, .ids = j->ids, .lens = j->lens, .labels = j->labels };
        double loss;
        if (tune_fail(j, pfx_model_loss(j->model, &mb, pre, &loss), "evaluation loss"))
            return 1;
        sum += loss * (double)k;
        total += k;
    }
    *out = total ? sum / (double)total : NAN;
    return 0;
}

/* Attention mass on the prefix per layer and head, on the first
 * evaluation batch. */
static int prefix_mass(tune_job *j, const pfx_model_prefix *pre, float **out)
{
    *out = malloc(j->L * j->H * sizeof(float));
    if (!*out)
        return 1;
    pfx_data_position pos = { 0, 0 };
    size_t rows, width;
    if (tune_fail(NULL, pfx_dataset_next_batch(j->eval, &pos, j->cfg->batch, j->ids, j->lens, j->labels, &rows, &width),
                  "statistics batch"))
        return 1;
    pfx_model_batch mb = { .batch = rows, .tokens = width, .ids = j->ids, .lens = j->lens, .labels = j->labels };
    return tune_fail(j, pfx_model_attention_stats(j->model, &mb, pre, *out, NULL), "attention statistics");
}

static int train_steps(tune_job *j, tune_step_fn on_step, void *user, tune_result *r)
{
    const tune_config *c = j->cfg;
    const char *ckpt = NULL;
    char *ckpt_path = join(c->out_dir, TUNE_CHECKPOINT);
    if (!ckpt_path)
        return 1;
    ckpt = ckpt_path;
    pfx_encoder_grads eg = { j->enc_grad[0], j->enc_grad[1], j->enc_grad[2], j->enc_grad[3], j->enc_grad[4], false };
    pfx_model_grads mg = { .keys = j->dpk, .values = j->dpv, .gains = c->gain_mode != PFX_GAIN_OFF ? j->dgain : NULL };
    const double t0 = tool_now_s();
    size_t tokens = 0;
    int rc = 0;
    const bool lead = dist_rank() == 0; /* prints and writes the checkpoint */
    for (size_t s = r->steps_done; s < j->steps; s++) {
        size_t rows, width;
        uint64_t epoch = j->pos.epoch;
        pfx_status st = pfx_dataset_next_batch(j->train, &j->pos, c->batch, j->ids, j->lens, j->labels, &rows, &width);
        if ((rc = tune_fail(NULL, st, "training batch")))
            break;
        if (rows == 0) { /* an epoch ended exactly: take the next one's first batch */
            epoch = j->pos.epoch;
            st = pfx_dataset_next_batch(j->train, &j->pos, c->batch, j->ids, j->lens, j->labels, &rows, &width);
            if ((rc = tune_fail(NULL, st, "training batch")))
                break;
        }
        pfx_model_prefix pre;
        const float ramp = pfx_optimizer_gain_ramp(j->opt);
        if ((rc = tune_fail(j, current_prefix(j, ramp, &pre), "prefixes")))
            break;
        /* data parallel (dist.h): every rank reads the whole global batch and
         * keeps its rows; the loss is a mean over the rank's labelled tokens,
         * so the ranks are weighted by their counts of them */
        size_t b0 = 0, bl = rows;
        dist_shard(rows, &b0, &bl);
        size_t counted = 0;
        for (size_t b = b0; b < b0 + bl; b++)
            counted += counted_labels(j->labels + b * width, width);
        double loss = 0.0;
        if (dist_size() == 1 || counted > 0) {
            pfx_model_batch mb = { .batch = bl, .tokens = width, .ids = j->ids + b0 * width,
                                   .lens = j->lens + b0, .labels = j->labels + b0 * width };
            if ((rc = tune_fail(j, pfx_model_backward(j->model, &mb, &pre, &mg, &loss), "model backward")))
                break;
            if (!pfx_encoder_is_direct(j->enc) &&
                (rc = tune_fail(j, pfx_encoder_backward(j->enc, (const pfx_tensor *const *)j->dpk,
                                                        (const pfx_tensor *const *)j->dpv, &eg),
                                "encoder backward")))
                break;
        }
        double count = (double)counted;
        if ((rc = dist_reduce_grads(j->opt, &count, &loss) ? 1 : 0))
            break;
        pfx_optimizer_report rep;
        if ((rc = tune_fail(j, pfx_optimizer_step(j->opt, &rep), "optimizer step")))
            break;
        if ((rc = dist_check_params(j->opt, s + 1) ? 1 : 0))
            break;
        r->losses[s] = loss;
        r->grad_norms[s] = rep.grad_norm;
        r->steps_done = s + 1;
        for (size_t b = 0; b < rows; b++)
            tokens += (size_t)j->lens[b];
        const double el = tool_now_s() - t0;
        const size_t here = s + 1 - r->first_step;
        if (on_step && lead) {
            tune_step_info si = { .step = s + 1, .steps = j->steps, .epoch = epoch + 1, .loss = loss,
                                  .grad_norm = rep.grad_norm, .skipped = rep.skipped,
                                  .tokens_per_s = el > 0 ? (double)tokens / el : 0.0,
                                  .eta_s = el / (double)here * (double)(j->steps - s - 1) };
            on_step(&si, user);
        }
        /* every rank stops at the same step when any was asked to */
        const bool stop = dist_any((c->stop_flag && *c->stop_flag) || (c->stop_after && s + 1 >= c->stop_after));
        if (stop && s + 1 < j->steps) {
            r->stopped = true;
            break;
        }
        if (lead && c->checkpoint_every && (s + 1) % c->checkpoint_every == 0 && s + 1 < j->steps &&
            (rc = tune_ckpt_save(j, ckpt, r)))
            break;
    }
    r->seconds = tool_now_s() - t0;
    if (rc == 0 && lead)
        rc = tune_ckpt_save(j, ckpt, r);
    free(ckpt_path);
    return rc;
}

int tune_run(const tune_config *c, tune_step_fn on_step, void *user, tune_result *r)
{
    memset(r, 0, sizeof(*r));
    tune_job jj, *j = &jj;
    memset(j, 0, sizeof(*j));
    j->cfg = c;
    int rc = 1;
    if (tune_out_check(c))
        return 1;
    if (load_model_and_data(j, r) || build_trainables(j, r))
        goto out;
    dist_agree("tuning configuration", j->config_text);
    const bool lead = dist_rank() == 0; /* rank 0 alone evaluates and writes */
    r->steps = j->steps;
    r->losses = calloc(j->steps, sizeof(double));
    r->grad_norms = calloc(j->steps, sizeof(float));
    if (!r->losses || !r->grad_norms) {
        fprintf(stderr, "prefixcl tune: out of host memory\n");
        goto out;
    }
    pfx_model_prefix pre;
    if (c->resume) {
        char *path = join(c->out_dir, TUNE_CHECKPOINT);
        int bad = !path || tune_ckpt_load(j, path, r);
        free(path);
        if (bad)
            goto out;
        r->first_step = r->steps_done;
    } else if (lead) {
        /* before: the initial prefixes (gains 0: every factor 1) */
        if (tune_fail(j, current_prefix(j, 1.0f, &pre), "prefixes") || evaluate(j, &pre, &r->eval_before) ||
            prefix_mass(j, &pre, &r->mass_before))
            goto out;
    }
    if (train_steps(j, on_step, user, r))
        goto out;
    if (!lead) {
        rc = 0;
        goto out;
    }
    if (r->stopped) {
        rc = tune_out_curve(c->out_dir, r);
        goto out;
    }
    const float ramp = pfx_optimizer_gain_ramp(j->opt);
    if (tune_fail(j, current_prefix(j, ramp, &pre), "prefixes") || evaluate(j, &pre, &r->eval_after) ||
        prefix_mass(j, &pre, &r->mass_after))
        goto out;
    if (c->gain_mode != PFX_GAIN_OFF) {
        r->gains = malloc(j->L * j->H * sizeof(float));
        if (!r->gains)
            goto out;
        memcpy(r->gains, j->gains_host, j->L * j->H * sizeof(float));
    }
    rc = tune_out_write(j, r, ramp);
out:
    job_free(j);
    return rc;
}
