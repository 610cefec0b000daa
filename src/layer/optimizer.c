/*
 * AdamW with parameter groups, global gradient-norm clipping and a NaN/Inf
 * guard (cl/optimizer.cl); the formulas are in include/prefixcl/optimizer.h.
 *
 * Per step: one pfx_opt_sumsq launch per gradient (its work-group partials
 * land at a fixed offset of one partial buffer), one pfx_opt_finalize (norm,
 * scale, skip flag into a 3-float status buffer), one pfx_adamw_update per
 * parameter (reads the status buffer, so clipping and skipping need no host
 * round trip), then one blocking 12-byte read of the status for the report
 * and the step counts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "registry.h"
#include "work_groups.h"
#include "optimizer_internal.h"

#define OPT_PROGRAM       "optimizer"
#define OPT_MAX_GROUPS    256 /* work-groups of one sum-of-squares launch */
#define OPT_UPDATE_WG     64
#define OPT_UPDATE_GROUPS 4096 /* grid-stride loop covers the rest */

/* Options of cl/optimizer.cl (registered in registry.c; no tunables). */
#define STATUS_BYTES (3 * sizeof(float))

/* ---- schedules ---- */

static double linear_warmup(uint64_t x, uint64_t n)
{
    if (n == 0 || x >= n)
        return 1.0;
    return (double)x / (double)n;
}

static double cosine(uint64_t x, uint64_t n, double floor)
{
    double progress = n == 0 ? 1.0 : (x >= n ? 1.0 : (double)x / (double)n);
    return floor + (1.0 - floor) * 0.5 * (1.0 + cos(M_PI * progress));
}

float pfx_schedule_linear_warmup(uint64_t x, uint64_t n)
{
    return (float)linear_warmup(x, n);
}

float pfx_schedule_cosine(uint64_t x, uint64_t n, float floor)
{
    return (float)cosine(x, n, floor);
}

/* Factor of the update numbered t (1-based). */
static double lr_factor_at(const pfx_optimizer_params *p, uint64_t t)
{
    if (p->decay == PFX_LR_COSINE && t > p->warmup_steps)
        return cosine(t - p->warmup_steps, p->decay_steps, p->min_lr_ratio);
    return linear_warmup(t, p->warmup_steps);
}

/* The same for a group with its own decay_fraction. */
static double group_factor_at(const pfx_optimizer_params *p, const pfx_optimizer_group_params *g,
                              uint64_t t)
{
    if (!(g->decay_fraction > 0.0f && g->decay_fraction < 1.0f))
        return lr_factor_at(p, t);
    pfx_optimizer_params q = *p;
    const double n = floor((double)p->decay_steps * (double)g->decay_fraction + 0.5);
    q.decay_steps = n < 1.0 ? 1u : (uint32_t)n;
    return lr_factor_at(&q, t);
}

float pfx_optimizer_lr_factor(const pfx_optimizer *opt)
{
    return opt ? (float)lr_factor_at(&opt->params, opt->step + 1) : 0.0f;
}

float pfx_optimizer_gain_ramp(const pfx_optimizer *opt)
{
    return opt ? (float)linear_warmup(opt->step, opt->params.gain_ramp_steps) : 0.0f;
}

uint64_t pfx_optimizer_step_count(const pfx_optimizer *opt)
{
    return opt ? opt->step : 0;
}

/* ---- create / destroy ---- */

pfx_status pfx_optimizer_create(pfx_runtime *rt, const pfx_optimizer_params *params,
                                pfx_optimizer **out)
{
    if (out)
        *out = NULL;
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_create: rt is NULL");
    if (!out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_create: out is NULL");
    pfx_optimizer_params p;
    memset(&p, 0, sizeof(p));
    if (params)
        p = *params;
    if (!isfinite(p.max_grad_norm))
        return pfx_error(rt, PFX_ERROR_NOT_FINITE,
                         "optimizer_create: max_grad_norm (%g) is not finite",
                         (double)p.max_grad_norm);
    if (p.max_grad_norm < 0.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_create: max_grad_norm (%g) must be >= 0 (0 = no clipping)",
                         (double)p.max_grad_norm);
    if (p.decay != PFX_LR_CONSTANT && p.decay != PFX_LR_COSINE)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "optimizer_create: decay (%d) is unknown",
                         (int)p.decay);
    if (p.decay == PFX_LR_COSINE) {
        if (p.decay_steps == 0)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "optimizer_create: decay_steps must be >= 1 with PFX_LR_COSINE");
        if (!isfinite(p.min_lr_ratio))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE,
                             "optimizer_create: min_lr_ratio (%g) is not finite",
                             (double)p.min_lr_ratio);
        if (p.min_lr_ratio < 0.0f || p.min_lr_ratio > 1.0f)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "optimizer_create: min_lr_ratio (%g) must be in [0, 1]",
                             (double)p.min_lr_ratio);
    }

    pfx_optimizer *opt = calloc(1, sizeof(*opt));
    if (!opt)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "optimizer_create: host allocation failed");
    opt->rt = rt;
    opt->params = p;
    pfx_status st = pfx_buffer_create(rt, STATUS_BYTES, NULL, &opt->status);
    if (st != PFX_SUCCESS) {
        free(opt);
        return st;
    }
    *out = opt;
    return PFX_SUCCESS;
}

void pfx_optimizer_destroy(pfx_optimizer **popt)
{
    if (!popt || !*popt)
        return;
    pfx_optimizer *opt = *popt;
    pfx_runtime *rt = opt->rt;
    /* Nothing of ours may still be in flight when the buffers go. */
    clFinish(rt->queue);
    for (size_t i = 0; i < opt->count; i++) {
        pfx_tensor_destroy(&opt->items[i].m);
        pfx_tensor_destroy(&opt->items[i].v);
        free(opt->items[i].name);
    }
    pfx_buffer_release(rt, opt->partial, opt->partial_cap * sizeof(float));
    pfx_buffer_release(rt, opt->status, STATUS_BYTES);
    free(opt->items);
    free(opt->groups);
    free(opt);
    *popt = NULL;
}

/* ---- groups and parameters ---- */

pfx_status pfx_optimizer_add_group(pfx_optimizer *opt, const pfx_optimizer_group_params *params,
                                   unsigned *group_id)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_add_group: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (!params)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_add_group: params is NULL");
    if (!group_id)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_add_group: group_id is NULL");
    const struct {
        const char *name;
        float value;
    } finite[] = { { "lr", params->lr },
                   { "beta1", params->beta1 },
                   { "beta2", params->beta2 },
                   { "eps", params->eps },
                   { "weight_decay", params->weight_decay },
                   { "decay_fraction", params->decay_fraction } };
    for (size_t i = 0; i < sizeof(finite) / sizeof(finite[0]); i++)
        if (!isfinite(finite[i].value))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE, "optimizer_add_group: %s (%g) is not finite",
                             finite[i].name, (double)finite[i].value);
    if (params->lr < 0.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_group: lr (%g) must be >= 0", (double)params->lr);
    if (params->decay_fraction < 0.0f || params->decay_fraction > 1.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_group: decay_fraction (%g) must be in [0, 1]",
                         (double)params->decay_fraction);
    if (params->beta1 < 0.0f || params->beta1 >= 1.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_group: beta1 (%g) must be in [0, 1)",
                         (double)params->beta1);
    if (params->beta2 < 0.0f || params->beta2 >= 1.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_group: beta2 (%g) must be in [0, 1)",
                         (double)params->beta2);
    if (!(params->eps > 0.0f))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_group: eps (%g) must be > 0", (double)params->eps);
    if (params->weight_decay < 0.0f)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_group: weight_decay (%g) must be >= 0",
                         (double)params->weight_decay);
    pfx_optimizer_group_params *groups =
        realloc(opt->groups, (opt->group_count + 1) * sizeof(*groups));
    if (!groups)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY,
                         "optimizer_add_group: host allocation failed");
    opt->groups = groups;
    groups[opt->group_count] = *params;
    *group_id = (unsigned)opt->group_count++;
    return PFX_SUCCESS;
}

static bool tensor_registered(const pfx_optimizer *opt, const pfx_tensor *t, const char **as,
                              const char **name)
{
    for (size_t i = 0; i < opt->count; i++) {
        const opt_param *it = &opt->items[i];
        if (it->param == t || it->param->mem == t->mem) {
            *as = "parameter";
            *name = it->name;
            return true;
        }
        if (it->grad == t || it->grad->mem == t->mem) {
            *as = "gradient";
            *name = it->name;
            return true;
        }
    }
    return false;
}

static bool same_shape(const pfx_tensor *a, const pfx_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (unsigned i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

pfx_status opt_alloc_moments(opt_param *it)
{
    pfx_runtime *rt = it->param->rt;
    const pfx_tensor *p = it->param;
    pfx_status st = pfx_tensor_create(rt, PFX_DTYPE_F32, p->ndim, p->shape, &it->m);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, p->ndim, p->shape, &it->v);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_fill(it->m, 0.0f);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_fill(it->v, 0.0f);
    return st;
}

static size_t sumsq_groups(size_t numel)
{
    size_t g = pfx_ceil_div(numel, PFX_OPT_WG);
    return g > OPT_MAX_GROUPS ? OPT_MAX_GROUPS : g;
}

pfx_status pfx_optimizer_add_param(pfx_optimizer *opt, unsigned group_id, pfx_tensor *param,
                                   pfx_tensor *grad, const char *name)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_add_param: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (!param)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_add_param: param is NULL");
    if (!grad)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_add_param: grad is NULL");
    if (!name)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_add_param: name is NULL");
    size_t name_len = strlen(name);
    if (name_len == 0 || name_len >= OPT_NAME_MAX)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_param: name must have 1 to %d bytes (has %zu)",
                         OPT_NAME_MAX - 1, name_len);
    /* The name goes into the state file's JSON header, which must be UTF-8. */
    if (!pfx_utf8_valid((const unsigned char *)name, name_len))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_param: name is not valid UTF-8");
    if (group_id >= opt->group_count)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_add_param '%s': group_id %u is unknown (%zu groups)", name,
                         group_id, opt->group_count);
    if (param->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "optimizer_add_param '%s': param belongs to another runtime", name);
    if (grad->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "optimizer_add_param '%s': grad belongs to another runtime", name);
    if (param->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                         "optimizer_add_param '%s': param must be float32", name);
    if (grad->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                         "optimizer_add_param '%s': grad must be float32", name);
    if (!same_shape(param, grad)) {
        char ps[96], gs[96];
        pfx_shape_text(ps, sizeof(ps), param->ndim, param->shape);
        pfx_shape_text(gs, sizeof(gs), grad->ndim, grad->shape);
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "optimizer_add_param '%s': grad shape %s differs from param shape %s",
                         name, gs, ps);
    }
    if (param == grad || param->mem == grad->mem)
        return pfx_error(rt, PFX_ERROR_ALIASING, "optimizer_add_param '%s': param is also its grad",
                         name);
    const char *as, *other;
    if (tensor_registered(opt, param, &as, &other))
        return pfx_error(
            rt, PFX_ERROR_ALIASING,
            "optimizer_add_param '%s': param is already registered (as the %s of '%s')", name, as,
            other);
    if (tensor_registered(opt, grad, &as, &other))
        return pfx_error(rt, PFX_ERROR_ALIASING,
                         "optimizer_add_param '%s': grad is already registered (as the %s of '%s')",
                         name, as, other);
    for (size_t i = 0; i < opt->count; i++)
        if (strcmp(opt->items[i].name, name) == 0)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "optimizer_add_param: name '%s' is already registered", name);
    size_t groups = sumsq_groups(param->numel);
    if (opt->partial_total + groups > UINT32_MAX)
        return pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW,
                         "optimizer_add_param '%s': too many parameters", name);

    if (opt->count == opt->cap) {
        size_t cap = opt->cap ? opt->cap * 2 : 8;
        opt_param *items = realloc(opt->items, cap * sizeof(*items));
        if (!items)
            return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY,
                             "optimizer_add_param: host allocation failed");
        opt->items = items;
        opt->cap = cap;
    }
    opt_param it;
    memset(&it, 0, sizeof(it));
    it.param = param;
    it.grad = grad;
    it.group = group_id;
    it.bytes = param->bytes;
    it.partial_offset = (cl_uint)opt->partial_total;
    it.partial_groups = groups;
    it.name = malloc(name_len + 1);
    if (!it.name)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY,
                         "optimizer_add_param: host allocation failed");
    memcpy(it.name, name, name_len + 1);
    pfx_status st = opt->defer_moments ? PFX_SUCCESS : opt_alloc_moments(&it);
    if (st != PFX_SUCCESS) {
        clFinish(rt->queue);
        pfx_tensor_destroy(&it.m);
        pfx_tensor_destroy(&it.v);
        free(it.name);
        return st;
    }
    opt->items[opt->count++] = it;
    opt->partial_total += groups;
    return PFX_SUCCESS;
}

/* ---- the step ---- */

static pfx_status ensure_partial(pfx_optimizer *opt)
{
    if (opt->partial_cap >= opt->partial_total)
        return PFX_SUCCESS;
    pfx_runtime *rt = opt->rt;
    clFinish(rt->queue); /* the old buffer may still be read by a kernel */
    pfx_buffer_release(rt, opt->partial, opt->partial_cap * sizeof(float));
    opt->partial = NULL;
    opt->partial_cap = 0;
    pfx_status st = pfx_buffer_create(rt, opt->partial_total * sizeof(float), NULL, &opt->partial);
    if (st == PFX_SUCCESS)
        opt->partial_cap = opt->partial_total;
    return st;
}

pfx_status pfx_optimizer_step(pfx_optimizer *opt, pfx_optimizer_report *report)
{
    if (report)
        memset(report, 0, sizeof(*report));
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_step: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (opt->count == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_step: no parameter is registered");
    pfx_status st = ensure_partial(opt);
    if (st != PFX_SUCCESS)
        return st;

    cl_kernel k_sumsq, k_final, k_update;
    const char *options = PFX_OPT_OPTIONS;
    if ((st = pfx_kernel_get(rt, OPT_PROGRAM, options, "pfx_opt_sumsq", &k_sumsq)) != PFX_SUCCESS ||
        (st = pfx_kernel_get(rt, OPT_PROGRAM, options, "pfx_opt_finalize", &k_final)) !=
            PFX_SUCCESS ||
        (st = pfx_kernel_get(rt, OPT_PROGRAM, options, "pfx_adamw_update", &k_update)) !=
            PFX_SUCCESS)
        return st;

    /* 1. Per-gradient partial sums of squares (sharded: this process's
     * gradients, then the others' partials from them). */
    for (size_t i = 0; i < opt->count; i++) {
        const opt_param *it = &opt->items[i];
        if (!opt_owns(opt, i))
            continue;
        cl_ulong n = it->grad->numel;
        size_t local = PFX_OPT_WG, global = it->partial_groups * PFX_OPT_WG;
        pfx_arg args[] = { PFX_ARG(n), PFX_ARG(it->grad->mem), PFX_ARG(opt->partial),
                           PFX_ARG(it->partial_offset) };
        if ((st = pfx_launch(rt, k_sumsq, "optimizer_step: gradient sum of squares", 1, &global,
                             &local, 4, args)) != PFX_SUCCESS)
            return st;
    }
    if (opt->sharded && (st = opt_share_partials(opt)) != PFX_SUCCESS)
        return st;
    /* 2. Norm, clipping scale, skip flag. */
    {
        cl_uint count = (cl_uint)opt->partial_total;
        float max_norm = opt->params.max_grad_norm;
        size_t one = 1;
        pfx_arg args[] = { PFX_ARG(count), PFX_ARG(opt->partial), PFX_ARG(max_norm),
                           PFX_ARG(opt->status) };
        if ((st = pfx_launch(rt, k_final, "optimizer_step: gradient norm", 1, &one, &one, 4,
                             args)) != PFX_SUCCESS)
            return st;
    }
    /* 3. The updates (no-ops on the device when the step is skipped). */
    const double factor = lr_factor_at(&opt->params, opt->step + 1);
    for (size_t i = opt->sharded ? opt->own_first : 0;
         i < (opt->sharded ? opt->own_end : opt->count); i++) {
        const opt_param *it = &opt->items[i];
        const pfx_optimizer_group_params *g = &opt->groups[it->group];
        const double t = (double)(it->step + 1);
        const double lr = (double)g->lr * group_factor_at(&opt->params, g, opt->step + 1);
        const double bc1 = 1.0 - pow((double)g->beta1, t);
        const double bc2 = 1.0 - pow((double)g->beta2, t);
        cl_ulong n = it->param->numel;
        float beta1 = g->beta1, beta2 = g->beta2, eps = g->eps;
        float decay = (float)(1.0 - lr * (double)g->weight_decay);
        float step_size = (float)(lr / bc1);
        float inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
        /* a work-item per 8 elements (the kernel's step) */
        size_t local = OPT_UPDATE_WG,
               groups = pfx_ceil_div(pfx_ceil_div(it->param->numel, 8), local);
        if (groups > OPT_UPDATE_GROUPS)
            groups = OPT_UPDATE_GROUPS;
        size_t global = groups * local;
        pfx_arg args[] = { PFX_ARG(n),          PFX_ARG(it->param->mem), PFX_ARG(it->grad->mem),
                           PFX_ARG(it->m->mem), PFX_ARG(it->v->mem),     PFX_ARG(opt->status),
                           PFX_ARG(beta1),      PFX_ARG(beta2),          PFX_ARG(eps),
                           PFX_ARG(decay),      PFX_ARG(step_size),      PFX_ARG(inv_sqrt_bc2) };
        if ((st = pfx_launch(rt, k_update, "optimizer_step: AdamW update", 1, &global, &local,
                             sizeof(args) / sizeof(args[0]), args)) != PFX_SUCCESS)
            return st;
    }
    /* 4. The one blocking read: norm, scale, skip. */
    float status[3];
    cl_int err = clEnqueueReadBuffer(rt->queue, opt->status, CL_TRUE, 0, STATUS_BYTES, status, 0,
                                     NULL, NULL);
    if (err != CL_SUCCESS)
        return pfx_cl_error(rt, err, "optimizer_step: reading the gradient norm");
    const bool skipped = status[2] != 0.0f;
    if (!skipped) {
        opt->step++;
        for (size_t i = 0; i < opt->count; i++)
            opt->items[i].step++;
        /* every process skips alike: the norm is the same bits on each */
        if (opt->sharded && (st = opt->coll->params(opt->coll->user, opt)) != PFX_SUCCESS)
            return st;
    }
    if (report) {
        report->grad_norm = status[0];
        report->clip_scale = status[1];
        report->lr_factor = (float)factor;
        report->skipped = skipped;
        report->step = opt->step;
    }
    return PFX_SUCCESS;
}

/* ---- state ---- */

size_t pfx_optimizer_param_count(const pfx_optimizer *opt)
{
    return opt ? opt->count : 0;
}

pfx_status pfx_optimizer_get_param(const pfx_optimizer *opt, size_t index,
                                   pfx_optimizer_param_info *info)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_get_param: opt is NULL");
    if (!info)
        return pfx_error(opt->rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_get_param: info is NULL");
    if (index >= opt->count)
        return pfx_error(opt->rt, PFX_ERROR_OUT_OF_RANGE,
                         "optimizer_get_param: index %zu beyond %zu parameters", index, opt->count);
    const opt_param *it = &opt->items[index];
    info->name = it->name;
    info->group = it->group;
    info->numel = it->param->numel;
    info->step = it->step;
    return PFX_SUCCESS;
}

pfx_status pfx_optimizer_param_tensors(pfx_optimizer *opt, size_t index, pfx_tensor **param,
                                       pfx_tensor **grad)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_param_tensors: opt is NULL");
    if (index >= opt->count)
        return pfx_error(opt->rt, PFX_ERROR_OUT_OF_RANGE,
                         "optimizer_param_tensors: index %zu beyond %zu parameters", index,
                         opt->count);
    if (param)
        *param = opt->items[index].param;
    if (grad)
        *grad = opt->items[index].grad;
    return PFX_SUCCESS;
}

pfx_status pfx_optimizer_find_param(const pfx_optimizer *opt, const char *name, size_t *index)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_find_param: opt is NULL");
    if (!name)
        return pfx_error(opt->rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_find_param: name is NULL");
    if (!index)
        return pfx_error(opt->rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_find_param: index is NULL");
    for (size_t i = 0; i < opt->count; i++)
        if (strcmp(opt->items[i].name, name) == 0) {
            *index = i;
            return PFX_SUCCESS;
        }
    return pfx_error(opt->rt, PFX_ERROR_INVALID_ARGUMENT,
                     "optimizer_find_param: no parameter named '%s'", name);
}

pfx_status pfx_optimizer_state_size(const pfx_optimizer *opt, size_t *floats)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_state_size: opt is NULL");
    if (!floats)
        return pfx_error(opt->rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_state_size: floats is NULL");
    size_t total = 0;
    for (size_t i = 0; i < opt->count; i++) {
        size_t two;
        if (!opt->items[i].m) /* another process holds it (sharded) */
            continue;
        if (pfx_mul_overflows(opt->items[i].param->numel, 2, &two) ||
            __builtin_add_overflow(total, two, &total))
            return pfx_error(opt->rt, PFX_ERROR_SIZE_OVERFLOW,
                             "optimizer_state_size: overflows size_t");
    }
    *floats = total;
    return PFX_SUCCESS;
}

pfx_status pfx_optimizer_export_param(pfx_optimizer *opt, size_t index, uint64_t *step, float *m,
                                      float *v)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_export_param: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (index >= opt->count)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "optimizer_export_param: index %zu beyond %zu parameters", index,
                         opt->count);
    const opt_param *it = &opt->items[index];
    if ((m || v) && !it->m)
        return opt_not_held(opt, "optimizer_export_param", index);
    if (step)
        *step = it->step;
    pfx_status st = PFX_SUCCESS;
    if (m)
        st = pfx_tensor_read(it->m, 0, it->m->numel, m);
    if (st == PFX_SUCCESS && v)
        st = pfx_tensor_read(it->v, 0, it->v->numel, v);
    return st;
}

pfx_status pfx_optimizer_import_param(pfx_optimizer *opt, size_t index, uint64_t step,
                                      const float *m, const float *v)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_import_param: opt is NULL");
    pfx_runtime *rt = opt->rt;
    if (!m)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_import_param: m is NULL");
    if (!v)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "optimizer_import_param: v is NULL");
    if (index >= opt->count)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "optimizer_import_param: index %zu beyond %zu parameters", index,
                         opt->count);
    opt_param *it = &opt->items[index];
    if (!it->m)
        return opt_not_held(opt, "optimizer_import_param", index);
    if (step > PFX_OPTIMIZER_MAX_STEP)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_import_param '%s': step %llu cannot advance (at most %llu)",
                         it->name, (unsigned long long)step,
                         (unsigned long long)PFX_OPTIMIZER_MAX_STEP);
    size_t n = it->param->numel;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(m[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE,
                             "optimizer_import_param '%s': m[%zu] (%g) is not finite", it->name, i,
                             (double)m[i]);
        if (!isfinite(v[i]))
            return pfx_error(rt, PFX_ERROR_NOT_FINITE,
                             "optimizer_import_param '%s': v[%zu] (%g) is not finite", it->name, i,
                             (double)v[i]);
        if (v[i] < 0.0f)
            return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                             "optimizer_import_param '%s': v[%zu] (%g) is negative", it->name, i,
                             (double)v[i]);
    }
    pfx_status st = pfx_tensor_write(it->m, 0, n, m);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_write(it->v, 0, n, v);
    if (st != PFX_SUCCESS)
        return st;
    it->step = step;
    return PFX_SUCCESS;
}

pfx_status pfx_optimizer_set_step_count(pfx_optimizer *opt, uint64_t step)
{
    if (!opt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "optimizer_set_step_count: opt is NULL");
    if (step > PFX_OPTIMIZER_MAX_STEP)
        return pfx_error(opt->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "optimizer_set_step_count: step %llu cannot advance (at most %llu)",
                         (unsigned long long)step, (unsigned long long)PFX_OPTIMIZER_MAX_STEP);
    opt->step = step;
    return PFX_SUCCESS;
}
