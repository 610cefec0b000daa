/* The prefix-tuning job (prefixcl/tune.h): checks and set-up, the steps,
 * evaluation and prefix attention. The checkpoint is tune_ckpt.c's, the
 * outputs tune_out.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "internal.h"
#include "job.h"
#include "prefixcl/elementwise.h"
#include "tune_internal.h"

void pfx_tune_default_config(pfx_tune_config *c)
{
    if (!c)
        return;
    *c = (pfx_tune_config){
        .prefix_len = 20,
        .hidden = 512,
        .epochs = 1,
        .batch = 8,
        .accumulate = 1,
        .max_length = 0,
        .lr = 1e-2f,
        .gain_lr = -1.0f,
        .gain_mode = PFX_GAIN_OFF,
        .gain_ramp_steps = 20,
        .weight_decay = 0.0f,
        .max_grad_norm = 1.0f,
        .warmup_steps = 10,
        .seed = 1,
        .dropout = -1.0f,
        .storage = PFX_DTYPE_F32,
    };
}

void pfx_tune_result_free(pfx_tune_result *r)
{
    if (!r)
        return;
    free(r->losses);
    free(r->grad_norms);
    free(r->lrs);
    free(r->eval_losses);
    free(r->gains);
    free(r->mass_before);
    free(r->mass_after);
    memset(r, 0, sizeof(*r));
}

static void job_free(pfx_tune_job *j)
{
    pfx_optimizer_destroy(&j->opt);
    if (j->enc && pfx_encoder_is_direct(j->enc)) {
        free(j->pk); /* the encoder's own tensors */
        free(j->pv);
    } else {
        pfx_job_destroy_tensors(j->pk, j->L);
        pfx_job_destroy_tensors(j->pv, j->L);
    }
    pfx_job_destroy_tensors(j->dpk, j->L);
    pfx_job_destroy_tensors(j->dpv, j->L);
    pfx_job_destroy_tensors(j->gain, j->L);
    pfx_job_destroy_tensors(j->dgain, j->L);
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        pfx_tensor_destroy(&j->enc_grad[i]);
    pfx_encoder_destroy(&j->enc);
    pfx_dataset_free(&j->train);
    pfx_dataset_free(&j->eval);
    pfx_tokenizer_free(&j->tok);
    pfx_context_destroy(&j->ctx);
    pfx_model_destroy(&j->model);
    free(j->gains_host);
    free(j->ids);
    free(j->labels);
    free(j->lens);
}

/* ---- options ---- */

static pfx_status bad(pfx_runtime *rt, const char *field, const char *why)
{
    return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "tune: config.%s %s", field, why);
}

static pfx_status check_config(pfx_runtime *rt, const pfx_tune_config *c)
{
    if (!c->model_dir || !*c->model_dir)
        return bad(rt, "model_dir", "is NULL or empty: give the frozen model's folder");
    if (!c->data_path)
        return bad(rt, "data_path", "is NULL");
    if (!c->out_dir || !*c->out_dir)
        return bad(rt, "out_dir", "is NULL or empty");
    if (c->prefix_len == 0)
        return bad(rt, "prefix_len", "must be at least 1");
    if (c->batch == 0)
        return bad(rt, "batch", "must be at least 1");
    if (c->max_length == 1)
        return bad(rt, "max_length", "must be at least 2 tokens (0: fit the model)");
    if (c->steps == 0 && c->epochs == 0)
        return bad(rt, "steps", "and config.epochs are both 0");
    const struct {
        const char *name;
        float v;
    } f[] = {
        { "lr", c->lr },
        { "weight_decay", c->weight_decay },
        { "max_grad_norm", c->max_grad_norm },
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (!isfinite(f[i].v) || f[i].v < 0.0f)
            return bad(rt, f[i].name, "must be finite and >= 0");
    if (!isfinite(c->gain_lr))
        return bad(rt, "gain_lr", "must be finite (< 0: half of lr)");
    if (c->gain_mode != PFX_GAIN_OFF && c->gain_mode != PFX_GAIN_LINEAR &&
        c->gain_mode != PFX_GAIN_TANH)
        return bad(rt, "gain_mode", "is not OFF, LINEAR or TANH");
    if (c->storage != PFX_DTYPE_F32 && c->storage != PFX_DTYPE_F16 &&
        c->storage != PFX_DTYPE_BF16 && c->storage != PFX_DTYPE_Q8_0)
        return bad(rt, "storage", "is not F32, F16, BF16 or Q8_0");
    pfx_status st = pfx_job_check_dist(rt, "tune", &c->dist);
    if (st == PFX_SUCCESS)
        st = pfx_job_check_dropout(rt, "tune", c->dropout);
    if (st != PFX_SUCCESS)
        return st;
    return PFX_SUCCESS;
}

/* The options a checkpoint must agree with (everything that changes the
 * curve), one "key=value" a line, floats exact (%a). */
static void describe(pfx_tune_job *j, const char *model)
{
    const pfx_tune_config *c = j->cfg;
    snprintf(j->options, sizeof(j->options),
             "model=%s\ntokenizer=%s\ndata=%s\neval=%s\nprefix_len=%zu\nhidden=%zu\nsteps=%"
             "zu\nbatch=%zu\n"
             "max_length=%zu\nlr=%a\ngain_lr=%a\ngain_mode=%d\ngain_ramp=%u\nweight_decay=%a\nmax_"
             "grad_norm=%a\n"
             "warmup=%u\nseed=%llu\nstorage=%d\ndropout=%a\n",
             model, c->tokenizer_dir ? c->tokenizer_dir : "", c->data_path,
             c->eval_path ? c->eval_path : "(held back)", c->prefix_len, c->hidden, j->steps,
             c->batch, j->max_length, (double)c->lr,
             (double)(c->gain_lr >= 0 ? c->gain_lr : c->lr / 2), (int)c->gain_mode,
             (unsigned)c->gain_ramp_steps, (double)c->weight_decay, (double)c->max_grad_norm,
             (unsigned)c->warmup_steps, (unsigned long long)c->seed, (int)c->storage,
             (double)c->dropout);
    /* lines only away from the defaults: the checkpoints of earlier runs agree as before */
    size_t used = strlen(j->options);
    if (c->accumulate > 1)
        used += (size_t)snprintf(j->options + used, sizeof(j->options) - used, "accumulate=%zu\n",
                                 c->accumulate);
    if (c->eval_every && used < sizeof(j->options))
        used += (size_t)snprintf(j->options + used, sizeof(j->options) - used, "eval_every=%zu\n",
                                 c->eval_every);
    if (c->no_eos && used < sizeof(j->options))
        snprintf(j->options + used, sizeof(j->options) - used, "eos=none\n");
}

/* ---- model and data ---- */

/* A data set call's error (recorded for the thread) on the job's runtime. */
static pfx_status data_error(pfx_tune_job *j, pfx_status st)
{
    return st == PFX_SUCCESS ? st : pfx_error(j->rt, st, "tune: %s", pfx_last_error(NULL));
}

/* config.prefix_len and max_length against the loaded model's positions (the
 * prefix takes its own before the tokens); max_length 0 becomes the default
 * length, or what the prefix leaves when fewer. A length that does not fit
 * is the options' fault: named here, before the context would name its own
 * fields. */
static pfx_status fit_length(pfx_tune_job *j)
{
    const pfx_tune_config *c = j->cfg;
    const size_t positions = j->shape.max_positions;
    if (c->prefix_len + 2 > positions)
        return pfx_error(j->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "tune: config.prefix_len %zu leaves fewer than 2 of the model's %zu "
                         "positions for the tokens (%s/config.json): lower config.prefix_len",
                         c->prefix_len, positions, c->model_dir);
    const size_t room = positions - c->prefix_len;
    if (c->max_length > room)
        return pfx_error(j->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "tune: config.max_length %zu + config.prefix_len %zu exceed the model's "
                         "%zu positions (%s/config.json): lower config.max_length to %zu or less, "
                         "or config.prefix_len",
                         c->max_length, c->prefix_len, positions, c->model_dir, room);
    j->max_length = c->max_length                        ? c->max_length
                    : room < PFX_TUNE_DEFAULT_MAX_LENGTH ? room
                                                         : PFX_TUNE_DEFAULT_MAX_LENGTH;
    return PFX_SUCCESS;
}

static pfx_status load_model_and_data(pfx_tune_job *j, pfx_tune_result *r)
{
    const pfx_tune_config *c = j->cfg;
    pfx_model_params mp = { .storage = c->storage };
    pfx_status st = pfx_model_load(j->rt, c->model_dir, &mp, &j->model);
    if (st != PFX_SUCCESS)
        return st;
    pfx_model_get_shape(j->model, &j->shape);
    if ((st = fit_length(j)))
        return st;
    r->max_length = j->max_length;
    /* one workspace for the steps and the evaluations: they run the same
     * batches, and the evaluations never need more */
    pfx_context_params cp = { .max_batch = c->batch,
                              .max_tokens = j->max_length,
                              .recompute = c->recompute,
                              .max_prefix_len = c->prefix_len };
    if ((st = pfx_context_create(j->model, &cp, &j->ctx)))
        return st;
    const char *tok_dir = c->tokenizer_dir ? c->tokenizer_dir : c->model_dir;
    if ((st = pfx_tokenizer_load(tok_dir, &j->tok)))
        return pfx_error(j->rt, st, "tune: the tokenizer of %s: %s", tok_dir, pfx_last_error(NULL));
    char *abs = realpath(c->model_dir, NULL);
    snprintf(r->base_model, sizeof(r->base_model), "%s", abs ? abs : c->model_dir);
    free(abs);
    r->shape = j->shape;
    j->L = j->shape.layers;
    j->H = j->shape.heads;
    if (pfx_tokenizer_vocab_size(j->tok) > j->shape.vocab)
        return pfx_error(j->rt, PFX_ERROR_INVALID_SHAPE,
                         "tune: the tokenizer has %zu ids, the model's vocabulary %zu",
                         pfx_tokenizer_vocab_size(j->tok), j->shape.vocab);

    pfx_dataset_options o;
    if ((st = pfx_job_example_rule(j->rt, "tune", j->tok, j->max_length, c->no_eos, &o, &r->rule)))
        return st;
    o.shuffle = true;
    o.seed = c->seed;
    if ((st = data_error(j, pfx_dataset_load(c->data_path, j->tok, &o, &j->train))))
        return st;
    pfx_dataset_info di;
    pfx_dataset_get_info(j->train, &di);
    if (c->eval_path) {
        o.shuffle = false;
        if ((st = data_error(j, pfx_dataset_load(c->eval_path, j->tok, &o, &j->eval))))
            return st;
    } else {
        /* a held-back slice: a tenth, at least one example, at most 200 */
        size_t n = di.examples / 10 ? di.examples / 10 : 1;
        n = n > 200 ? 200 : n;
        if (di.examples < 2 || pfx_dataset_hold_out(j->train, n, &j->eval) != PFX_SUCCESS)
            return pfx_error(
                j->rt, PFX_ERROR_OUT_OF_RANGE,
                "tune: %s has %zu example(s): too few to hold some back; give an evaluation file "
                "(config.eval_path)",
                c->data_path, di.examples);
        pfx_dataset_get_info(j->train, &di);
    }
    r->train_examples = di.examples;
    pfx_dataset_info ei;
    pfx_dataset_get_info(j->eval, &ei);
    r->eval_examples = ei.examples;
    r->eval_tokens = ei.counted;
    const size_t per_epoch = pfx_dataset_batches_per_epoch(j->train, c->batch);
    j->steps = c->steps ? c->steps : c->epochs * ((per_epoch + j->accumulate - 1) / j->accumulate);
    if (j->steps == 0)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_RANGE, "tune: %s fills no batch", c->data_path);
    return PFX_SUCCESS;
}

/* ---- trainables ---- */

static pfx_status oom(pfx_runtime *rt)
{
    return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "tune: host memory");
}

/* Prefixes, gains, gradients and the optimizer. */
static pfx_status build_trainables(pfx_tune_job *j, pfx_tune_result *r)
{
    const pfx_tune_config *c = j->cfg;
    const size_t L = j->L, H = j->H;
    const bool direct = c->hidden == 0, gain = c->gain_mode != PFX_GAIN_OFF;
    pfx_encoder_params ep = { .layers = L,
                              .kv_heads = j->shape.kv_heads,
                              .head_dim = j->shape.head_dim,
                              .prefix_len = c->prefix_len,
                              .embed_dim = c->hidden,
                              .hidden_dim = c->hidden,
                              .direct = direct };
    pfx_status st;
    if ((st = pfx_encoder_create(j->rt, &ep, &j->enc)) ||
        (st = pfx_encoder_init_random(j->enc, c->seed + 77, 1.0f)) ||
        (st = pfx_encoder_counts(j->enc, &r->counts)))
        return st;
    j->pk = calloc(L, sizeof(*j->pk));
    j->pv = calloc(L, sizeof(*j->pv));
    j->dpk = calloc(L, sizeof(*j->dpk));
    j->dpv = calloc(L, sizeof(*j->dpv));
    j->gain = calloc(L, sizeof(*j->gain));
    j->dgain = calloc(L, sizeof(*j->dgain));
    j->gains_host = calloc(L * H, sizeof(float));
    j->ids = malloc(c->batch * j->max_length * sizeof(int32_t));
    j->labels = malloc(c->batch * j->max_length * sizeof(int32_t));
    j->lens = malloc(c->batch * sizeof(int32_t));
    if (!j->pk || !j->pv || !j->dpk || !j->dpv || !j->gain || !j->dgain || !j->gains_host ||
        !j->ids || !j->labels || !j->lens)
        return oom(j->rt);
    const size_t pshape[3] = { j->shape.kv_heads, c->prefix_len, j->shape.head_dim };
    for (size_t l = 0; l < L; l++) {
        if (direct) {
            j->pk[l] = pfx_encoder_prefix_k(j->enc, l);
            j->pv[l] = pfx_encoder_prefix_v(j->enc, l);
        } else if ((st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->pk[l])) ||
                   (st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->pv[l]))) {
            return st;
        }
        if ((st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->dpk[l])) ||
            (st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 3, pshape, &j->dpv[l])))
            return st;
        if (gain && ((st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 1, &H, &j->gain[l])) ||
                     (st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, 1, &H, &j->dgain[l])) ||
                     (st = pfx_tensor_fill(j->gain[l], 0.0f))))
            return st;
    }
    for (int i = 0; !direct && i < PFX_ENCODER_PARAM_COUNT; i++) {
        pfx_tensor *p = pfx_encoder_tensor(j->enc, (pfx_encoder_param)i);
        size_t shape[2] = { pfx_tensor_dim(p, 0), pfx_tensor_dim(p, 1) };
        if ((st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, pfx_tensor_ndim(p), shape,
                                    &j->enc_grad[i])))
            return st;
    }
    r->gain_params = gain ? L * H : 0;

    const uint32_t steps = j->steps > UINT32_MAX ? UINT32_MAX : (uint32_t)j->steps;
    /* pretrain's rule: a warm-up of more steps than the run spans the run */
    const uint32_t warm = c->warmup_steps < steps ? c->warmup_steps : steps;
    pfx_optimizer_params op = { .max_grad_norm = c->max_grad_norm,
                                .warmup_steps = warm,
                                .decay = PFX_LR_COSINE,
                                .decay_steps = steps > warm ? steps - warm : 1,
                                .min_lr_ratio = 0.1f,
                                .gain_ramp_steps = c->gain_ramp_steps };
    if ((st = pfx_optimizer_create(j->rt, &op, &j->opt)))
        return st;
    pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
    gp.lr = c->lr;
    gp.weight_decay = c->weight_decay;
    pfx_optimizer_group_params gg = gp;
    gg.lr = c->gain_lr >= 0 ? c->gain_lr : c->lr / 2;
    gg.weight_decay = 0.0f;
    unsigned g_prefix, g_gain;
    if ((st = pfx_optimizer_add_group(j->opt, &gp, &g_prefix)) ||
        (st = pfx_optimizer_add_group(j->opt, &gg, &g_gain)))
        return st;
    char name[64];
    for (int i = 0; !direct && i < PFX_ENCODER_PARAM_COUNT && st == PFX_SUCCESS; i++)
        st = pfx_optimizer_add_param(j->opt, g_prefix,
                                     pfx_encoder_tensor(j->enc, (pfx_encoder_param)i),
                                     j->enc_grad[i], pfx_encoder_param_name((pfx_encoder_param)i));
    for (size_t l = 0; direct && l < L && st == PFX_SUCCESS; l++) {
        snprintf(name, sizeof(name), "layers.%zu.prefix_k", l);
        if ((st = pfx_optimizer_add_param(j->opt, g_prefix, j->pk[l], j->dpk[l], name)))
            break;
        snprintf(name, sizeof(name), "layers.%zu.prefix_v", l);
        st = pfx_optimizer_add_param(j->opt, g_prefix, j->pv[l], j->dpv[l], name);
    }
    for (size_t l = 0; gain && l < L && st == PFX_SUCCESS; l++) {
        snprintf(name, sizeof(name), "layers.%zu.gain", l);
        st = pfx_optimizer_add_param(j->opt, g_gain, j->gain[l], j->dgain[l], name);
    }
    return st;
}

/* ---- steps ---- */

/* The prefixes of the current parameters into pk/pv (MLP mode) and the
 * gains to the host; the prefix description the model calls take. */
static pfx_status current_prefix(pfx_tune_job *j, float ramp, pfx_model_prefix *pre)
{
    pfx_status st = PFX_SUCCESS;
    if (!pfx_encoder_is_direct(j->enc))
        st = pfx_encoder_forward(j->enc, j->pk, j->pv);
    const bool gain = j->cfg->gain_mode != PFX_GAIN_OFF;
    for (size_t l = 0; gain && l < j->L && st == PFX_SUCCESS; l++)
        st = pfx_tensor_read(j->gain[l], 0, j->H, j->gains_host + l * j->H);
    *pre = (pfx_model_prefix){ .prefix_len = j->cfg->prefix_len,
                               .keys = j->pk,
                               .values = j->pv,
                               .gain_mode = j->cfg->gain_mode,
                               .gains = gain ? j->gains_host : NULL,
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
static pfx_status evaluate(pfx_tune_job *j, const pfx_model_prefix *pre, double *out)
{
    pfx_data_position pos = { 0, 0 };
    double sum = 0.0;
    size_t total = 0;
    while (pos.epoch == 0) {
        size_t rows, width;
        pfx_status st = data_error(j, pfx_dataset_next_batch(j->eval, &pos, j->cfg->batch, j->ids,
                                                             j->lens, j->labels, &rows, &width));
        if (st != PFX_SUCCESS)
            return st;
        if (rows == 0)
            break;
        size_t k = 0;
        for (size_t b = 0; b < rows; b++)
            k += counted_labels(j->labels + b * width, width);
        if (k == 0)
            continue;
        pfx_model_batch mb = {
            .batch = rows, .tokens = width, .ids = j->ids, .lens = j->lens, .labels = j->labels
        };
        double loss;
        if ((st = pfx_model_loss(j->ctx, &mb, pre, &loss)))
            return st;
        sum += loss * (double)k;
        total += k;
    }
    *out = total ? sum / (double)total : NAN;
    return PFX_SUCCESS;
}

/* Attention mass on the prefix per layer and head, on the first
 * evaluation batch. */
static pfx_status prefix_mass(pfx_tune_job *j, const pfx_model_prefix *pre, float **out)
{
    *out = malloc(j->L * j->H * sizeof(float));
    if (!*out)
        return oom(j->rt);
    pfx_data_position pos = { 0, 0 };
    size_t rows = 0, width = 0;
    pfx_status st = data_error(j, pfx_dataset_next_batch(j->eval, &pos, j->cfg->batch, j->ids,
                                                         j->lens, j->labels, &rows, &width));
    pfx_model_batch mb = {
        .batch = rows, .tokens = width, .ids = j->ids, .lens = j->lens, .labels = j->labels
    };
    return st ? st : pfx_model_attention_stats(j->ctx, &mb, pre, *out, NULL);
}

/* The next training batch; an epoch that ended exactly gives the next
 * one's first. *epoch: the epoch the batch belongs to (0-based). */
static pfx_status next_batch(pfx_tune_job *j, uint64_t *epoch, size_t *rows, size_t *width)
{
    const size_t batch = j->cfg->batch;
    *epoch = j->pos.epoch;
    pfx_status st =
        pfx_dataset_next_batch(j->train, &j->pos, batch, j->ids, j->lens, j->labels, rows, width);
    if (st == PFX_SUCCESS && *rows == 0) {
        *epoch = j->pos.epoch;
        st = pfx_dataset_next_batch(j->train, &j->pos, batch, j->ids, j->lens, j->labels, rows,
                                    width);
    }
    return data_error(j, st);
}

/* Each prefix gradient (and gain gradient) times `scale`; 0: zeroed. */
static pfx_status scale_grads(pfx_tune_job *j, float scale)
{
    pfx_status st = PFX_SUCCESS;
    for (size_t l = 0; st == PFX_SUCCESS && l < j->L; l++) {
        pfx_tensor *t[3] = { j->dpk[l], j->dpv[l], j->dgain[l] };
        for (int i = 0; st == PFX_SUCCESS && i < 3; i++)
            if (t[i])
                st = scale != 0.0f ? pfx_axpby(t[i], 0.0f, t[i], scale)
                                   : pfx_tensor_fill(t[i], 0.0f);
    }
    return st;
}

/* One step: `accumulate` batches, of each this process's rows forward and
 * backward into the prefixes' gradients (added after the first), their
 * mean (HF divides each batch's loss) through the encoder, the gradients
 * reduced over the processes (each weighted by the labels it scored: the
 * loss is a mean over them), AdamW. *epoch: the last batch's (0-based);
 * *tokens grows by the tokens of the batches. */
static pfx_status step(pfx_tune_job *j, uint64_t *epoch, size_t *tokens, double *loss,
                       pfx_optimizer_report *rep)
{
    const pfx_tune_config *c = j->cfg;
    pfx_model_prefix pre;
    pfx_status st = current_prefix(j, pfx_optimizer_gain_ramp(j->opt), &pre);
    double sum = 0.0, count = 0.0;
    size_t added = 0;
    for (size_t m = 0; st == PFX_SUCCESS && m < j->accumulate; m++) {
        size_t rows, width;
        if ((st = next_batch(j, epoch, &rows, &width)))
            break;
        for (size_t b = 0; b < rows; b++)
            *tokens += (size_t)j->lens[b];
        const size_t b0 = rows * j->rank / j->ranks, bl = rows * (j->rank + 1) / j->ranks - b0;
        size_t counted = 0;
        for (size_t b = b0; b < b0 + bl; b++)
            counted += counted_labels(j->labels + b * width, width);
        if (j->ranks > 1 && counted == 0)
            continue;
        const pfx_model_dropout drop =
            pfx_job_dropout(j->model, c->dropout, c->seed, pfx_optimizer_step_count(j->opt), m, b0);
        pfx_model_grads mg = { .keys = j->dpk,
                               .values = j->dpv,
                               .gains = c->gain_mode != PFX_GAIN_OFF ? j->dgain : NULL,
                               .accumulate = added > 0,
                               .dropout = &drop };
        pfx_model_batch mb = { .batch = bl,
                               .tokens = width,
                               .ids = j->ids + b0 * width,
                               .lens = j->lens + b0,
                               .labels = j->labels + b0 * width };
        double l = 0.0;
        st = pfx_model_backward(j->ctx, &mb, &pre, &mg, &l);
        sum += l;
        count += (double)counted;
        added++;
    }
    if (st == PFX_SUCCESS && added != 1)
        st = scale_grads(j, added ? 1.0f / (float)added : 0.0f);
    if (st == PFX_SUCCESS && !pfx_encoder_is_direct(j->enc)) {
        pfx_encoder_grads eg = { j->enc_grad[0], j->enc_grad[1], j->enc_grad[2],
                                 j->enc_grad[3], j->enc_grad[4], false };
        st = pfx_encoder_backward(j->enc, (const pfx_tensor *const *)j->dpk,
                                  (const pfx_tensor *const *)j->dpv, &eg);
    }
    *loss = added ? sum / (double)added : 0.0;
    if (st == PFX_SUCCESS && j->ranks > 1)
        st = c->dist.reduce(c->dist.user, j->opt, &count, loss);
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_step(j->opt, rep);
    return st;
}

/* The process that evaluates and writes: rank 0, or the only one. */
static bool lead(const pfx_tune_job *j)
{
    return j->rank == 0;
}

static pfx_status train(pfx_tune_job *j, pfx_tune_step_fn on_step, void *user, pfx_tune_result *r)
{
    const pfx_tune_config *c = j->cfg;
    char *ckpt = pfx_join_path(c->out_dir, PFX_TUNE_CHECKPOINT);
    if (!ckpt)
        return oom(j->rt);
    const double t0 = pfx_host_seconds(), built0 = pfx_job_build_seconds(j->rt);
    size_t tokens = 0;
    pfx_status st = PFX_SUCCESS;
    for (size_t s = r->steps_done; s < j->steps; s++) {
        uint64_t epoch = 0;
        double loss;
        pfx_optimizer_report rep;
        if ((st = step(j, &epoch, &tokens, &loss, &rep)))
            break;
        if (j->ranks > 1 && c->dist.check && (st = c->dist.check(c->dist.user, j->opt, s + 1)))
            break;
        r->losses[s] = loss;
        r->grad_norms[s] = rep.grad_norm;
        r->lrs[s] = c->lr * rep.lr_factor;
        r->steps_done = s + 1;
        const float ramp = pfx_optimizer_gain_ramp(j->opt);
        pfx_model_prefix pre;
        if ((on_step || (c->eval_every && (s + 1) % c->eval_every == 0)) &&
            (st = current_prefix(j, ramp, &pre)))
            break;
        /* the last step's evaluation is the result's eval_after (finish) */
        if (lead(j) && c->eval_every && (s + 1) % c->eval_every == 0 && s + 1 < j->steps &&
            (st = evaluate(j, &pre, &r->eval_losses[s + 1])))
            break;
        if (on_step) {
            /* steady-state work: the kernels' first builds left out */
            const double built = pfx_job_build_seconds(j->rt) - built0,
                         el = pfx_host_seconds() - t0 - built;
            const size_t here = s + 1 - r->first_step;
            pfx_tune_step info = { .step = s + 1,
                                   .steps = j->steps,
                                   .epoch = epoch + 1,
                                   .max_length = j->max_length,
                                   .loss = loss,
                                   .grad_norm = rep.grad_norm,
                                   .skipped = rep.skipped,
                                   .lr_factor = rep.lr_factor,
                                   .gain_ramp = ramp,
                                   .lr = r->lrs[s],
                                   .eval_loss = r->eval_losses[s + 1],
                                   .build_s = built,
                                   .tokens_per_s = el > 0 ? (double)tokens / el : 0.0,
                                   .eta_s = el / (double)here * (double)(j->steps - s - 1),
                                   .ctx = j->ctx,
                                   .prefix = &pre };
            on_step(&info, user);
        }
        /* every process stops at the same step when any was asked to */
        const bool stop = pfx_job_any(j->ranks, c->dist.any, c->dist.user,
                                      (c->stop_flag && *c->stop_flag) ||
                                          (c->stop_after && s + 1 >= c->stop_after));
        if (stop && s + 1 < j->steps) {
            r->stopped = true;
            break;
        }
        if (lead(j) && c->checkpoint_every && (s + 1) % c->checkpoint_every == 0 &&
            s + 1 < j->steps && (st = pfx_tune_ckpt_save(j, ckpt, r)))
            break;
    }
    r->seconds = pfx_host_seconds() - t0;
    if (st == PFX_SUCCESS && lead(j))
        st = pfx_tune_ckpt_save(j, ckpt, r);
    free(ckpt);
    return st;
}

static pfx_status result_alloc(pfx_tune_job *j, pfx_tune_result *r)
{
    r->steps = j->steps;
    r->losses = calloc(j->steps, sizeof(double));
    r->grad_norms = calloc(j->steps, sizeof(float));
    r->lrs = calloc(j->steps, sizeof(float));
    r->eval_losses = malloc((j->steps + 1) * sizeof(double));
    if (!r->losses || !r->grad_norms || !r->lrs || !r->eval_losses)
        return oom(j->rt);
    for (size_t s = 0; s <= j->steps; s++)
        r->eval_losses[s] = NAN;
    return PFX_SUCCESS;
}

/* After the last step: the evaluation, the attention on the prefix, the
 * gains, the outputs. */
static pfx_status finish(pfx_tune_job *j, pfx_tune_result *r)
{
    const float ramp = pfx_optimizer_gain_ramp(j->opt);
    pfx_model_prefix pre;
    pfx_status st;
    if ((st = current_prefix(j, ramp, &pre)) || (st = evaluate(j, &pre, &r->eval_after)) ||
        (st = prefix_mass(j, &pre, &r->mass_after)))
        return st;
    r->eval_losses[j->steps] = r->eval_after;
    if (j->cfg->gain_mode != PFX_GAIN_OFF) {
        if (!(r->gains = malloc(j->L * j->H * sizeof(float))))
            return oom(j->rt);
        memcpy(r->gains, j->gains_host, j->L * j->H * sizeof(float));
    }
    return pfx_tune_out_write(j, r, ramp);
}

pfx_status pfx_tune_run(pfx_runtime *rt, const pfx_tune_config *cfg, pfx_tune_step_fn on_step,
                        void *user, pfx_tune_result *result)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "tune: rt is NULL");
    if (!cfg || !result)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "tune: %s is NULL", !cfg ? "cfg" : "result");
    memset(result, 0, sizeof(*result));
    result->eval_before = result->eval_after = NAN;
    pfx_status st = check_config(rt, cfg);
    if (st != PFX_SUCCESS)
        return st;
    pfx_tune_job j;
    memset(&j, 0, sizeof(j));
    j.cfg = cfg;
    j.rt = rt;
    j.ranks = cfg->dist.ranks > 1 ? cfg->dist.ranks : 1;
    j.rank = j.ranks > 1 ? cfg->dist.rank : 0;
    j.accumulate = cfg->accumulate > 1 ? cfg->accumulate : 1;
    /* out_dir checked now, made only once everything else is */
    if ((st = pfx_job_out_dir(rt, "tune", cfg->out_dir, false)) ||
        (st = load_model_and_data(&j, result)) || (st = build_trainables(&j, result)) ||
        (st = result_alloc(&j, result)))
        goto out;
    describe(&j, result->base_model);
    if (cfg->resume) {
        char *path = pfx_join_path(cfg->out_dir, PFX_TUNE_CHECKPOINT);
        st = path ? pfx_tune_ckpt_load(&j, path, result) : oom(rt);
        free(path);
        if (st != PFX_SUCCESS)
            goto out;
        result->first_step = result->steps_done;
        result->eval_losses[0] = result->eval_before;
    } else if (lead(&j)) {
        /* before: the initial prefixes (gains 0: every factor 1) */
        pfx_model_prefix pre;
        if ((st = current_prefix(&j, 1.0f, &pre)) ||
            (st = evaluate(&j, &pre, &result->eval_before)) ||
            (st = prefix_mass(&j, &pre, &result->mass_before)))
            goto out;
        result->eval_losses[0] = result->eval_before;
    }
    if ((st = pfx_job_out_dir(rt, "tune", cfg->out_dir, true)) ||
        (st = train(&j, on_step, user, result)) || !lead(&j))
        goto out;
    st = result->stopped ? pfx_tune_out_curve(&j, result) : finish(&j, result);
out:
    job_free(&j);
    return st;
}
