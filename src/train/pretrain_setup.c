/* The full-training job's model, gradients, gains and optimizer groups. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gains_file.h"
#include "io_internal.h"
#include "job.h"
#include "optimizer_internal.h"
#include "pretrain_internal.h"

/* ---- model, gradients, optimizer ---- */

/* The next comma-separated part of a freeze list at *p (moved past it);
 * false after the last. Empty parts are skipped. */
static bool next_part(const char **p, const char **part, size_t *n)
{
    while (*p && **p) {
        const char *end = strchr(*p, ',');
        *part = *p;
        *n = end ? (size_t)(end - *p) : strlen(*p);
        *p = end ? end + 1 : NULL;
        if (*n)
            return true;
    }
    return false;
}

static bool contains(const char *name, const char *part, size_t n)
{
    return memmem(name, strlen(name), part, n) != NULL;
}

/* Whether weight `name` contains a part of `freeze`. */
static bool frozen(const char *freeze, const char *name)
{
    const char *part;
    size_t n;
    for (const char *p = freeze; next_part(&p, &part, &n);)
        if (contains(name, part, n))
            return true;
    return false;
}

/* Every part of `freeze` must be in some weight's name: a part in none (a
 * typo) would train what was meant to stay frozen. The refusal names the
 * part and the first weights' names. */
static pfx_status check_freeze(pfx_pretrain_job *j, const char *freeze)
{
    const char *part;
    size_t n;
    for (const char *p = freeze; next_part(&p, &part, &n);) {
        pfx_model_weight_info info;
        bool found = false;
        for (size_t i = 0; i < j->weight_count && !found; i++) {
            pfx_model_get_weight(j->model, i, &info);
            found = contains(info.name, part, n);
        }
        if (found)
            continue;
        char names[512] = "";
        size_t len = 0;
        const size_t shown = j->weight_count < 4 ? j->weight_count : 4;
        for (size_t i = 0; i < shown && len < sizeof(names); i++) {
            pfx_model_get_weight(j->model, i, &info);
            len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
                                    info.name);
        }
        return pfx_error(j->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pretrain: config.freeze: '%.*s' is in no weight's name (the model's %zu "
                         "weights are named as %s%s)",
                         (int)(n < 200 ? n : 200), part, j->weight_count, names,
                         j->weight_count > shown ? ", ..." : "");
    }
    return PFX_SUCCESS;
}

/* The gains' start (config.gain_init): 0, or uniform in [-A, A] for the
 * trained heads (per head, all of a structured gain's D), from the seed
 * and `salt` (one stream per kind of gain); the others stay 0. */
static void initial_gains(const pfx_pretrain_job *j, size_t per_head, uint64_t salt, float *host)
{
    const float A = j->cfg->gain_init;
    uint64_t state = j->cfg->seed ^ salt;
    for (size_t i = 0; A > 0.0f && i < j->L * j->H; i++)
        for (size_t d = 0; d < per_head; d++) {
            const double u = (double)(pfx_splitmix64(&state) >> 11) * 0x1p-53; /* [0, 1) */
            host[i * per_head + d] =
                !j->gain_heads || j->gain_heads[i] ? (float)((2.0 * u - 1.0) * A) : 0.0f;
        }
}

/* L gains of `shape` at their start (initial_gains), their gradients and a
 * host copy. */
static pfx_status make_gains(pfx_pretrain_job *j, unsigned ndim, const size_t *shape,
                             pfx_tensor ***t, pfx_tensor ***dt, float **host)
{
    const size_t n = ndim == 1 ? shape[0] : shape[0] * shape[1];
    *t = calloc(j->L, sizeof(**t));
    *dt = calloc(j->L, sizeof(**dt));
    *host = calloc(j->L * n, sizeof(float));
    if (!*t || !*dt || !*host)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    initial_gains(j, ndim == 1 ? 1 : shape[1], ndim == 1 ? 0x6A1Du : 0xD16Au, *host);
    pfx_status st = PFX_SUCCESS;
    for (size_t l = 0; st == PFX_SUCCESS && l < j->L; l++)
        if (!(st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, ndim, shape, &(*t)[l])) &&
            !(st = pfx_tensor_write((*t)[l], 0, n, *host + l * n)))
            st = pfx_tensor_create(j->rt, PFX_DTYPE_F32, ndim, shape, &(*dt)[l]);
    return st;
}

/* config.gain_heads once L and H are known: at least one head selected;
 * every one is the same as none given (j->gain_heads stays NULL). The
 * selection of some heads joins the options a checkpoint must agree with:
 * per layer, the heads' bits as hex digits (head h at bit h % 4 of digit
 * h / 4), layers separated by '/'. */
static pfx_status select_heads(pfx_pretrain_job *j)
{
    const pfx_pretrain_config *c = j->cfg;
    const size_t LH = j->L * j->H, n = c->gain_heads ? c->gain_head_count : 0;
    uint8_t *mask = n ? calloc(LH, 1) : NULL;
    if (n && !mask)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    j->gain_heads = mask; /* the job's to free from here */
    for (size_t i = 0; i < n; i++) {
        const pfx_layer_head *e = &c->gain_heads[i];
        if (e->layer >= j->L || e->head >= j->H)
            return pfx_error(j->rt, PFX_ERROR_INVALID_ARGUMENT,
                             "pretrain: config.gain_heads[%zu] (layer %zu, head %zu): the %s is "
                             "not below the model's %zu %s",
                             i, e->layer, e->head, e->layer >= j->L ? "layer" : "head",
                             e->layer >= j->L ? j->L : j->H, e->layer >= j->L ? "layers" : "heads");
        if (mask[e->layer * j->H + e->head])
            return pfx_error(j->rt, PFX_ERROR_INVALID_ARGUMENT,
                             "pretrain: config.gain_heads[%zu] (layer %zu, head %zu) is given "
                             "twice",
                             i, e->layer, e->head);
        mask[e->layer * j->H + e->head] = 1;
    }
    j->gain_count = n ? n : LH;
    if (n == LH) { /* every head: the same as none given */
        free(j->gain_heads);
        j->gain_heads = NULL;
    }
    if (!j->gain_heads)
        return PFX_SUCCESS; /* no line: the options of a run without the field */
    const size_t used = strlen(j->options), digits = (j->H + 3) / 4;
    char *out = j->options + used;
    if (used + sizeof("gain_heads=\n") + j->L * (digits + 1) > sizeof(j->options))
        return pfx_error(j->rt, PFX_ERROR_SIZE_OVERFLOW,
                         "pretrain: config.gain_heads of %zu heads does not fit "
                         "the checkpoint's options",
                         LH);
    out += sprintf(out, "gain_heads=");
    for (size_t l = 0; l < j->L; l++) {
        for (size_t d = 0; d < digits; d++) {
            unsigned v = 0;
            for (size_t b = 0; b < 4 && 4 * d + b < j->H; b++)
                v |= (unsigned)(mask[l * j->H + 4 * d + b] != 0) << b;
            *out++ = "0123456789abcdef"[v];
        }
        if (l + 1 < j->L)
            *out++ = '/';
    }
    strcpy(out, "\n");
    return PFX_SUCCESS;
}

pfx_status pfx_pretrain_build_model(pfx_pretrain_job *j, pfx_pretrain_result *r)
{
    const pfx_pretrain_config *c = j->cfg;
    pfx_runtime *rt = j->rt;
    pfx_status st = pfx_pretrain_open_model(j, r);
    if (st != PFX_SUCCESS)
        return st;
    /* the steps keep activations (unless recompute); the evaluations, in
     * their own context, keep none */
    pfx_context_params train = { .max_batch = c->batch,
                                 .max_tokens = c->block,
                                 .recompute = c->recompute };
    pfx_context_params eval = { .max_batch = c->batch, .max_tokens = c->block, .recompute = true };
    if ((st = pfx_context_create(j->model, &train, &j->ctx)) ||
        (st = pfx_context_create(j->model, &eval, &j->eval_ctx)))
        return st;
    pfx_model_get_shape(j->model, &j->shape);
    if ((st = pfx_pretrain_check_ids(j, j->train, "training")) ||
        (st = pfx_pretrain_check_ids(j, j->eval, "evaluation")))
        return st;
    j->L = j->shape.layers;
    j->H = j->shape.heads;
    if ((st = select_heads(j)))
        return st;
    j->weight_count = pfx_model_weight_count(j->model);
    j->dw = calloc(j->weight_count, sizeof(*j->dw));
    j->params = calloc(j->weight_count + 2 * j->L, sizeof(*j->params));
    j->ids = malloc(c->batch * c->block * sizeof(int32_t));
    if (!j->dw || !j->params || !j->ids)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain: host memory");
    if ((st = check_freeze(j, c->freeze)))
        return st;
    const bool head = c->gain_mode != PFX_GAIN_OFF, dim = c->structured_gain;
    j->any_gain = head || dim;
    for (size_t i = 0; i < j->weight_count; i++) {
        pfx_model_weight_info info;
        pfx_model_get_weight(j->model, i, &info);
        if (frozen(c->freeze, info.name))
            continue;
        if ((st = pfx_tensor_create(rt, PFX_DTYPE_F32, info.ndim, info.shape, &j->dw[i])))
            return st;
        r->trained_weights++;
        r->trained_values += info.numel;
    }
    if (r->trained_weights == 0 && !j->any_gain)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pretrain: config.freeze leaves nothing to train (every weight frozen "
                         "and no gain)");
    j->D = j->shape.head_dim;
    const size_t hshape[1] = { j->H }, dshape[2] = { j->H, j->D };
    if (head && (st = make_gains(j, 1, hshape, &j->gain, &j->dgain, &j->gains_host)))
        return st;
    if (dim && (st = make_gains(j, 2, dshape, &j->dim, &j->ddim, &j->dim_host)))
        return st;
    r->trained_values += (head ? j->gain_count : 0) + (dim ? j->gain_count * j->D : 0);
    return PFX_SUCCESS;
}

pfx_status pfx_pretrain_build_optimizer(pfx_pretrain_job *j, size_t steps)
{
    const pfx_pretrain_config *c = j->cfg;
    const uint32_t warmup = c->warmup_steps < steps ? c->warmup_steps : (uint32_t)steps;
    pfx_optimizer_params op = { .max_grad_norm = c->max_grad_norm,
                                .warmup_steps = warmup,
                                .decay = PFX_LR_COSINE,
                                .decay_steps = steps > warmup ? (uint32_t)(steps - warmup) : 1,
                                .min_lr_ratio = c->min_lr_ratio,
                                .gain_ramp_steps = c->gain_ramp_steps };
    pfx_status st = pfx_optimizer_create(j->rt, &op, &j->opt);
    /* sharded (pfx_pretrain_run), each rank allocates its own moments only */
    if (st == PFX_SUCCESS && c->dist.ranks > 1 && c->dist.shard)
        j->opt->defer_moments = true;
    pfx_optimizer_group_params decay = PFX_OPTIMIZER_GROUP_DEFAULTS,
                               plain = PFX_OPTIMIZER_GROUP_DEFAULTS;
    decay.lr = c->lr;
    decay.weight_decay = c->weight_decay;
    plain.lr = c->lr;
    plain.weight_decay = 0.0f;
    pfx_optimizer_group_params gains = plain;
    gains.lr = c->gain_lr;
    gains.decay_fraction = c->gain_decay_fraction;
    unsigned g_decay = 0, g_plain = 0, g_gain = 0;
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_add_group(j->opt, &decay, &g_decay);
    if (st == PFX_SUCCESS && c->no_decay_norms)
        st = pfx_optimizer_add_group(j->opt, &plain, &g_plain);
    if (st == PFX_SUCCESS && j->any_gain)
        st = pfx_optimizer_add_group(j->opt, &gains, &g_gain);
    for (size_t i = 0; st == PFX_SUCCESS && i < j->weight_count; i++) {
        if (!j->dw[i])
            continue;
        pfx_model_weight_info info;
        pfx_tensor *w = NULL;
        pfx_model_get_weight(j->model, i, &info);
        pfx_model_weight_tensor(j->model, i, &w);
        const bool norm = info.kind == PFX_WEIGHT_BIAS || info.kind == PFX_WEIGHT_NORM;
        st = pfx_optimizer_add_param(j->opt, c->no_decay_norms && norm ? g_plain : g_decay, w,
                                     j->dw[i], info.name);
        j->params[j->param_count++] = w;
    }
    for (size_t l = 0; st == PFX_SUCCESS && j->gain && l < j->L; l++) {
        char name[32];
        snprintf(name, sizeof(name), "gains.%zu", l);
        st = pfx_optimizer_add_param(j->opt, g_gain, j->gain[l], j->dgain[l], name);
        j->params[j->param_count++] = j->gain[l];
    }
    for (size_t l = 0; st == PFX_SUCCESS && j->dim && l < j->L; l++) {
        char name[32];
        snprintf(name, sizeof(name), "dim_gains.%zu", l);
        st = pfx_optimizer_add_param(j->opt, g_gain, j->dim[l], j->ddim[l], name);
        j->params[j->param_count++] = j->dim[l];
    }
    return st;
}
