/* The full-training job (prefixcl/pretrain.h): set-up and checks, the
 * steps, evaluation and the run. Data (pretrain_data.c), model and optimizer
 * (pretrain_setup.c), outputs (pretrain_out.c), checkpoint (pretrain_ckpt.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gains_file.h"
#include "io_internal.h"
#include "job.h"
#include "optimizer_internal.h"
#include "pretrain_internal.h"

void pfx_pretrain_default_config(pfx_pretrain_config *cfg)
{
    if (!cfg)
        return;
    *cfg = (pfx_pretrain_config){
        .block = 128,
        .batch = 8,
        .accumulate = 1,
        .epochs = 1,
        .lr = 1e-4f,
        .gain_lr = 5e-5f,
        .weight_decay = 0.01f,
        .max_grad_norm = 1.0f,
        .warmup_steps = 100,
        .min_lr_ratio = 0.1f,
        .gain_ramp_steps = 100,
        .seed = 1,
        .dropout = -1.0f,
    };
}

void pfx_pretrain_result_free(pfx_pretrain_result *r)
{
    if (!r)
        return;
    free(r->losses);
    free(r->grad_norms);
    free(r->lrs);
    free(r->eval_losses);
    free(r->gains);
    memset(r, 0, sizeof(*r));
}

static void job_free(pfx_pretrain_job *j)
{
    pfx_optimizer_destroy(&j->opt);
    pfx_job_destroy_tensors(j->dw, j->weight_count);
    pfx_job_destroy_tensors(j->gain, j->L);
    pfx_job_destroy_tensors(j->dgain, j->L);
    pfx_job_destroy_tensors(j->dim, j->L);
    pfx_job_destroy_tensors(j->ddim, j->L);
    free(j->dim_host);
    pfx_context_destroy(&j->ctx);
    pfx_context_destroy(&j->eval_ctx);
    pfx_model_destroy(&j->model);
    pfx_blocks_free(&j->train);
    pfx_blocks_free(&j->eval);
    pfx_tokenizer_free(&j->tok);
    free(j->gains_host);
    free(j->params);
    free(j->ids);
    free(j->gain_heads);
}

/* ---- options ---- */

static pfx_status bad(pfx_runtime *rt, const char *field, const char *why)
{
    return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "pretrain: config.%s %s", field, why);
}

static pfx_status check_config(pfx_runtime *rt, const pfx_pretrain_config *c)
{
    if (!c->model_dir == !c->config_dir)
        return bad(
            rt, c->model_dir ? "config_dir" : "model_dir",
            c->model_dir
                ? "is given with model_dir: fine-tune a checkpoint or start from a config, not both"
                : "is NULL: give model_dir (a checkpoint) or config_dir (a config.json)");
    if (!c->data_path)
        return bad(rt, "data_path", "is NULL");
    if (!c->out_dir || !*c->out_dir)
        return bad(rt, "out_dir", "is NULL or empty");
    if (c->block < 2)
        return bad(rt, "block", "must be at least 2 tokens");
    if (c->batch == 0)
        return bad(rt, "batch", "must be at least 1");
    if (c->accumulate == 0)
        return bad(rt, "accumulate", "must be at least 1");
    if (c->steps == 0 && c->epochs == 0)
        return bad(rt, "steps", "and config.epochs are both 0");
    const struct {
        const char *name;
        float v;
        bool unit;
    } f[] = {
        { "lr", c->lr, false },
        { "gain_lr", c->gain_lr, false },
        { "weight_decay", c->weight_decay, false },
        { "max_grad_norm", c->max_grad_norm, false },
        { "min_lr_ratio", c->min_lr_ratio, true },
        { "gain_init", c->gain_init, false },
        { "gain_decay_fraction", c->gain_decay_fraction, true },
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (!isfinite(f[i].v) || f[i].v < 0.0f || (f[i].unit && f[i].v > 1.0f))
            return bad(rt, f[i].name, f[i].unit ? "must be in [0, 1]" : "must be finite and >= 0");
    if (c->gain_mode != PFX_GAIN_OFF && c->gain_mode != PFX_GAIN_LINEAR &&
        c->gain_mode != PFX_GAIN_TANH)
        return bad(rt, "gain_mode", "is not OFF, LINEAR or TANH");
    if (c->gain_heads && c->gain_mode == PFX_GAIN_OFF && !c->structured_gain)
        return bad(rt, "gain_heads", "is given without a gain (gain_mode or structured_gain)");
    if (c->gain_heads && c->gain_head_count == 0)
        return bad(rt, "gain_heads",
                   "selects no head (gain_head_count 0): give at least one, or "
                   "NULL for every head");
    pfx_status st = pfx_job_check_dist(rt, "pretrain", &c->dist);
    if (st == PFX_SUCCESS)
        st = pfx_job_check_dropout(rt, "pretrain", c->dropout);
    if (st != PFX_SUCCESS)
        return st;
    return PFX_SUCCESS;
}

/* The options a checkpoint must agree with, one "key=value" a line
 * (floats exact, %a). */
static void describe(const pfx_pretrain_config *c, char *out, size_t cap)
{
    /* the fields added later, only when set: a checkpoint written without
     * them still resumes */
    char tail[128] = "";
    if (c->gain_init != 0.0f || (c->gain_decay_fraction > 0.0f && c->gain_decay_fraction < 1.0f))
        snprintf(tail, sizeof(tail), "gain_init=%a\ngain_decay_fraction=%a\n", (double)c->gain_init,
                 (double)(c->gain_decay_fraction < 1.0f ? c->gain_decay_fraction : 0.0f));
    snprintf(
        out, cap,
        "model_dir=%s\nconfig_dir=%s\ntokenizer_dir=%s\ndata_path=%s\neval_path=%s\nblock=%"
        "zu\nbatch=%zu\n"
        "accumulate=%zu\nsteps=%zu\nepochs=%zu\nlr=%a\ngain_lr=%a\nweight_decay=%a\nno_decay_norms="
        "%d\n"
        "max_grad_norm=%a\nwarmup_steps=%u\nmin_lr_ratio=%a\ngain_mode=%d\nstructured_gain=%d\n"
        "gain_ramp_steps=%u\nfreeze=%s\nseed=%llu\ndropout=%a\n%s",
        c->model_dir ? c->model_dir : "", c->config_dir ? c->config_dir : "",
        c->tokenizer_dir ? c->tokenizer_dir : "", c->data_path, c->eval_path ? c->eval_path : "",
        c->block, c->batch, c->accumulate, c->steps, c->epochs, (double)c->lr, (double)c->gain_lr,
        (double)c->weight_decay, (int)c->no_decay_norms, (double)c->max_grad_norm, c->warmup_steps,
        (double)c->min_lr_ratio, (int)c->gain_mode, (int)c->structured_gain, c->gain_ramp_steps,
        c->freeze ? c->freeze : "", (unsigned long long)c->seed, (double)c->dropout, tail);
    const size_t len = strlen(out);
    if (c->data_format != PFX_PRETRAIN_DATA_AUTO && len < cap) /* earlier checkpoints: AUTO */
        snprintf(out + len, cap - len, "data_format=%d\n", (int)c->data_format);
}

/* ---- steps ---- */

/* The gains' host copies from the device (what the next forward reads). */
pfx_status pfx_pretrain_read_gains(pfx_pretrain_job *j)
{
    pfx_status st = PFX_SUCCESS;
    for (size_t l = 0; st == PFX_SUCCESS && j->gain && l < j->L; l++)
        st = pfx_tensor_read(j->gain[l], 0, j->H, j->gains_host + l * j->H);
    for (size_t l = 0; st == PFX_SUCCESS && j->dim && l < j->L; l++)
        st = pfx_tensor_read(j->dim[l], 0, j->H * j->D, j->dim_host + l * j->H * j->D);
    return st;
}

/* Each head's gain for the trace (pfx_pretrain_result.gains): g, or the
 * mean of G over the head's dimensions. */
static pfx_status trace_gains(pfx_pretrain_job *j, float *out)
{
    pfx_status st = pfx_pretrain_read_gains(j);
    for (size_t i = 0; st == PFX_SUCCESS && i < j->L * j->H; i++) {
        double m = 0.0;
        for (size_t d = 0; !j->gain && d < j->D; d++)
            m += j->dim_host[i * j->D + d];
        out[i] = j->gain ? j->gains_host[i] : (float)(m / (double)j->D);
    }
    return st;
}

static pfx_model_prefix prefix_of(const pfx_pretrain_job *j, float ramp)
{
    pfx_model_prefix p = { .gain_mode = j->cfg->gain_mode,
                           .gains = j->gain ? j->gains_host : NULL,
                           .dim_gains = j->dim ? j->dim_host : NULL,
                           .gain_ramp = ramp };
    return p;
}

/* Mean token loss over (up to eval_blocks of) the evaluation blocks, with
 * the gains as they are and r of the next step. */
static pfx_status evaluate(pfx_pretrain_job *j, double *out)
{
    const pfx_pretrain_config *c = j->cfg;
    size_t n = pfx_blocks_count(j->eval);
    if (c->eval_blocks && c->eval_blocks < n)
        n = c->eval_blocks;
    pfx_status st = pfx_pretrain_read_gains(j);
    const pfx_model_prefix pre = prefix_of(j, pfx_optimizer_gain_ramp(j->opt));
    double sum = 0.0;
    for (size_t i = 0; st == PFX_SUCCESS && i < n; i += c->batch) {
        const size_t rows = n - i < c->batch ? n - i : c->batch;
        for (size_t k = 0; st == PFX_SUCCESS && k < rows; k++)
            if ((st = pfx_blocks_read(j->eval, i + k, j->ids + k * c->block)))
                return pfx_error(j->rt, st, "pretrain: the evaluation data: %s",
                                 pfx_last_error(NULL));
        pfx_model_batch b = { rows, c->block, j->ids, NULL, NULL };
        double loss = 0.0;
        st = pfx_model_loss(j->eval_ctx, &b, &pre, &loss);
        sum += loss * (double)rows; /* every block counts block - 1 labels */
    }
    if (st == PFX_SUCCESS)
        *out = sum / (double)n;
    return st;
}

/* Zeroes the gradients of the heads without a trained gain
 * (config.gain_heads), all D of a structured gain's, before clipping: they
 * add nothing to the global norm, and AdamW, their moments staying 0 and the
 * gains' group without decay, never moves those gains from 0. */
static pfx_status mask_gain_grads(pfx_pretrain_job *j)
{
    const uint8_t *mask = j->gain_heads;
    const size_t H = j->H, D = j->D;
    pfx_status st = PFX_SUCCESS;
    for (size_t l = 0; mask && l < j->L; l++)
        for (size_t h = 0, e; h < H && st == PFX_SUCCESS; h = e) {
            for (e = h; e < H && !mask[l * H + e]; e++)
                ; /* [h, e): a run of masked heads */
            if (e == h) {
                e++;
                continue;
            }
            if (j->dgain)
                st = pfx_tensor_zero_range(j->dgain[l], h, e - h);
            if (st == PFX_SUCCESS && j->ddim)
                st = pfx_tensor_zero_range(j->ddim[l], h * D, (e - h) * D);
        }
    return st;
}

/* One optimizer step: the micro-batches' forward and backward (this
 * process's rows of each), the gradients averaged (and reduced over the
 * processes), AdamW. */
static pfx_status step(pfx_pretrain_job *j, double *loss, pfx_optimizer_report *rep)
{
    const pfx_pretrain_config *c = j->cfg;
    const size_t ranks = c->dist.ranks > 1 ? c->dist.ranks : 1, rank = ranks > 1 ? c->dist.rank : 0;
    pfx_status st = pfx_pretrain_read_gains(j);
    const pfx_model_prefix pre = prefix_of(j, pfx_optimizer_gain_ramp(j->opt));
    double sum = 0.0, count = 0.0;
    size_t added = 0;
    for (size_t m = 0; st == PFX_SUCCESS && m < c->accumulate; m++) {
        size_t rows = 0;
        /* this process's rows alone */
        if ((st = pfx_blocks_next_rows(j->train, &j->pos, c->batch, c->seed, rank, ranks, j->ids,
                                       &rows)))
            return pfx_error(j->rt, st, "pretrain: the training data: %s", pfx_last_error(NULL));
        const size_t b0 = rows * rank / ranks, n = rows * (rank + 1) / ranks - b0;
        if (n == 0)
            continue;
        pfx_model_batch b = { n, c->block, j->ids + b0 * c->block, NULL, NULL };
        /* items numbered across the step's micro-batches: accumulation draws the masks of
         * one batch of batch x accumulate items */
        const pfx_model_dropout drop = pfx_job_dropout(
            j->model, c->dropout, c->seed, pfx_optimizer_step_count(j->opt), 0, m * c->batch + b0);
        pfx_model_grads g = { .gains = j->dgain,
                              .dim_gains = j->ddim,
                              .weights = j->dw,
                              .accumulate = added > 0,
                              .dropout = &drop };
        double l = 0.0;
        st = pfx_model_backward(j->ctx, &b, &pre, &g, &l);
        sum += l;
        count += (double)(n * (c->block - 1));
        added++;
    }
    /* the mean over the micro-batches (HF divides each one's loss); none: zero */
    for (size_t i = 0; st == PFX_SUCCESS && (added != 1) && i < j->param_count; i++) {
        pfx_tensor *grad = NULL;
        if ((st = pfx_optimizer_param_tensors(j->opt, i, NULL, &grad)) == PFX_SUCCESS)
            st = added ? pfx_axpby(grad, 0.0f, grad, 1.0f / (float)added)
                       : pfx_tensor_fill(grad, 0.0f);
    }
    *loss = added ? sum / (double)added : 0.0;
    if (st == PFX_SUCCESS && ranks > 1)
        st = c->dist.reduce(c->dist.user, j->opt, &count, loss);
    if (st == PFX_SUCCESS)
        st = mask_gain_grads(j);
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_step(j->opt, rep);
    return st;
}

/* ---- the run ---- */

static pfx_status result_alloc(pfx_pretrain_job *j, pfx_pretrain_result *r, size_t steps)
{
    r->steps = steps;
    r->losses = calloc(steps, sizeof(double));
    r->grad_norms = calloc(steps, sizeof(float));
    r->lrs = calloc(steps, sizeof(float));
    r->eval_losses = malloc((steps + 1) * sizeof(double));
    if (j->any_gain)
        r->gains = calloc((steps + 1) * j->L * j->H, sizeof(float));
    if (!r->losses || !r->grad_norms || !r->lrs || !r->eval_losses || (j->any_gain && !r->gains))
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory for %zu steps",
                         steps);
    for (size_t s = 0; s <= steps; s++)
        r->eval_losses[s] = NAN;
    return PFX_SUCCESS;
}

static size_t planned_steps(const pfx_pretrain_job *j)
{
    const pfx_pretrain_config *c = j->cfg;
    if (c->steps)
        return c->steps;
    const size_t batches = (pfx_blocks_count(j->train) + c->batch - 1) / c->batch;
    const size_t per_epoch = (batches + c->accumulate - 1) / c->accumulate;
    return c->epochs * (per_epoch ? per_epoch : 1);
}

static pfx_status train(pfx_pretrain_job *j, pfx_pretrain_step_fn on_step, void *user,
                        pfx_pretrain_result *r)
{
    const pfx_pretrain_config *c = j->cfg;
    pfx_status st = PFX_SUCCESS;
    const double t0 = pfx_host_seconds(), built0 = pfx_job_build_seconds(j->rt);
    double eval_s = 0.0; /* evaluations: not training work, out of the rate */
    size_t done_here = 0;
    for (size_t s = r->first_step; s < r->steps && st == PFX_SUCCESS; s++) {
        if (pfx_job_any(c->dist.ranks, c->dist.any, c->dist.user,
                        (c->stop_flag && *c->stop_flag) ||
                            (c->stop_after && done_here == c->stop_after))) {
            r->stopped = true;
            break;
        }
        double loss = 0.0;
        pfx_optimizer_report rep;
        if ((st = step(j, &loss, &rep)))
            break;
        if (c->dist.ranks > 1 && c->dist.check && (st = c->dist.check(c->dist.user, j->opt, s + 1)))
            break;
        r->losses[s] = loss;
        r->grad_norms[s] = rep.grad_norm;
        r->lrs[s] = c->lr * rep.lr_factor;
        r->steps_done = s + 1;
        done_here++;
        if (j->any_gain && (st = trace_gains(j, r->gains + (s + 1) * j->L * j->H)))
            break;
        if ((c->eval_every && (s + 1) % c->eval_every == 0) || s + 1 == r->steps) {
            const double e0 = pfx_host_seconds();
            st = evaluate(j, &r->eval_losses[s + 1]);
            eval_s += pfx_host_seconds() - e0;
            if (st)
                break;
        }
        /* steady-state training: the kernels' first builds and the
         * evaluations left out */
        const double built = pfx_job_build_seconds(j->rt) - built0,
                     elapsed = pfx_host_seconds() - t0 - built - eval_s;
        const float ramp = pfx_optimizer_gain_ramp(j->opt);
        const pfx_model_prefix pre =
            prefix_of(j, ramp); /* the host gains are this step's (trace_gains) */
        pfx_pretrain_step info = {
            .step = s + 1,
            .steps = r->steps,
            .epoch = j->pos.epoch + 1,
            .loss = loss,
            .grad_norm = rep.grad_norm,
            .skipped = rep.skipped,
            .lr_factor = rep.lr_factor,
            .gain_ramp = ramp,
            .eval_loss = r->eval_losses[s + 1],
            .build_s = built,
            .tokens_per_s =
                (double)(done_here * r->tokens_per_step) / (elapsed > 0 ? elapsed : 1e-9),
            .eta_s = (elapsed + eval_s) / (double)done_here * (double)(r->steps - s - 1),
            .ctx = j->eval_ctx,
            .prefix = &pre,
        };
        if (on_step)
            on_step(&info, user);
        if (c->checkpoint_every && (s + 1) % c->checkpoint_every == 0 && s + 1 < r->steps)
            st = pfx_pretrain_save(j, r, false);
    }
    r->seconds = pfx_host_seconds() - t0;
    return st;
}

pfx_status pfx_pretrain_run(pfx_runtime *rt, const pfx_pretrain_config *cfg,
                            pfx_pretrain_step_fn on_step, void *user, pfx_pretrain_result *result)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pretrain: rt is NULL");
    if (!cfg || !result)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pretrain: %s is NULL",
                         !cfg ? "cfg" : "result");
    memset(result, 0, sizeof(*result));
    pfx_status st = check_config(rt, cfg);
    if (st != PFX_SUCCESS)
        return st;
    pfx_pretrain_job j;
    memset(&j, 0, sizeof(j));
    j.cfg = cfg;
    j.rt = rt;
    describe(cfg, j.options, sizeof(j.options));
    if ((st = pfx_job_out_dir(rt, "pretrain", cfg->out_dir, true)) ||
        (st = pfx_pretrain_load_data(&j)) || (st = pfx_pretrain_build_model(&j, result)))
        goto out;
    const size_t steps = planned_steps(&j);
    if ((st = pfx_pretrain_build_optimizer(&j, steps)) || (st = result_alloc(&j, result, steps)))
        goto out;
    if (cfg->dist.ranks > 1 && cfg->dist.shard) {
        if ((st = cfg->dist.shard(cfg->dist.user, j.opt)))
            goto out;
        j.sharded = j.opt->sharded; /* one process: the hook shards nothing */
    }
    if ((st = opt_undefer(j.opt)))
        goto out;
    result->shape = j.shape;
    result->train_blocks = pfx_blocks_count(j.train);
    result->eval_blocks = pfx_blocks_count(j.eval);
    result->tokens_per_step = cfg->batch * cfg->accumulate * cfg->block;
    if (cfg->resume) {
        st = pfx_pretrain_resume(&j, result);
    } else {
        st = evaluate(&j, &result->eval_losses[0]);
        if (st == PFX_SUCCESS && j.any_gain) /* the start: 0, or config.gain_init's draw */
            st = trace_gains(&j, result->gains);
    }
    if (st == PFX_SUCCESS)
        st = train(&j, on_step, user, result);
    if (st == PFX_SUCCESS)
        st = pfx_pretrain_save(&j, result, !result->stopped);
out:
    job_free(&j);
    return st;
}
