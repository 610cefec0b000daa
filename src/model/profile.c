/* Where a model's time goes (pfx_model_profile_*): each part bracketed by
 * pfx_runtime_finish and its wall time added to its part. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"

pfx_status pfx_model_profile_enable(pfx_context *ctx, bool on)
{
    const pfx_model *model = pfx_context_model(ctx);
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_model_profile_enable: ctx is NULL");
    if (on)
        memset(ctx->prof.ms, 0, sizeof(ctx->prof.ms));
    ctx->prof.on = on;
    return PFX_SUCCESS;
}

pfx_status pfx_model_profile_read(const pfx_context *ctx, double *ms, size_t count)
{
    const pfx_model *model = pfx_context_model(ctx);
    if (!model || !ms)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_model_profile_read: %s is NULL", !model ? "ctx" : "ms");
    if (count < PFX_MODEL_PART_COUNT)
        return pfx_error(model->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_model_profile_read: count %zu is below PFX_MODEL_PART_COUNT (%d)",
                         count, (int)PFX_MODEL_PART_COUNT);
    memcpy(ms, ctx->prof.ms, sizeof(ctx->prof.ms));
    return PFX_SUCCESS;
}

double pfx_model_prof_begin(pfx_context *cx)
{
    const pfx_model *m = cx->model;
    if (!cx->prof.on)
        return 0.0;
    pfx_runtime_finish(m->rt);
    return 1e-6 * (double)pfx_host_ns();
}

pfx_status pfx_model_prof_end(pfx_context *cx, pfx_model_part cat, double t0, pfx_status st)
{
    const pfx_model *m = cx->model;
    if (cx->prof.on) {
        pfx_runtime_finish(m->rt);
        cx->prof.ms[cat] += 1e-6 * (double)pfx_host_ns() - t0;
    }
    return st;
}

double pfx_model_train_flops(const pfx_model_shape *shape, size_t keys, bool weight_grads)
{
    if (!shape)
        return 0.0;
    const double n = (double)shape->parameters, d = (double)(shape->heads * shape->head_dim);
    return (weight_grads ? 6.0 : 4.0) * n + 12.0 * (double)shape->layers * (double)keys * d;
}
