/* Where a model's time goes (pfx_model_profile_*): each part bracketed by
 * pfx_runtime_finish and its wall time added to its part. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"

pfx_status pfx_model_profile_enable(pfx_model *model, bool on)
{
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_model_profile_enable: model is NULL");
    if (on)
        memset(model->prof.ms, 0, sizeof(model->prof.ms));
    model->prof.on = on;
    return PFX_SUCCESS;
}

pfx_status pfx_model_profile_read(const pfx_model *model, double *ms, size_t count)
{
    if (!model || !ms)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_model_profile_read: %s is NULL", !model ? "model" : "ms");
    if (count < PFX_MODEL_PART_COUNT)
        return pfx_error(model->rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_model_profile_read: count %zu is below PFX_MODEL_PART_COUNT (%d)",
                         count, (int)PFX_MODEL_PART_COUNT);
    memcpy(ms, model->prof.ms, sizeof(model->prof.ms));
    return PFX_SUCCESS;
}

double pfx_model_prof_begin(pfx_model *m)
{
    if (!m->prof.on)
        return 0.0;
    pfx_runtime_finish(m->rt);
    return 1e-6 * (double)pfx_host_ns();
}

pfx_status pfx_model_prof_end(pfx_model *m, pfx_model_part cat, double t0, pfx_status st)
{
    if (m->prof.on) {
        pfx_runtime_finish(m->rt);
        m->prof.ms[cat] += 1e-6 * (double)pfx_host_ns() - t0;
    }
    return st;
}
