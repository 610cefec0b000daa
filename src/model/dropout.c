/* The model's dropout sites in a training pass (prefixcl/model.h,
 * pfx_model_dropout): which probability a site has and the stream of its
 * mask, keyed by (seed, step, micro-batch, layer, site). */
#include <math.h>

#include "block.h"

float pfx_model_drop(const pfx_context *cx, size_t l, pfx_dropout_site site, pfx_dropout_stream *s)
{
    const pfx_model_dropout *d = cx->drop;
    if (!d)
        return 0.0f;
    const float p = site == PFX_DROP_EMBED ? d->embd : site == PFX_DROP_ATTN ? d->attn : d->resid;
    if (p > 0.0f) {
        s->seed = d->seed;
        s->step = d->step;
        s->tag = pfx_dropout_tag(d->micro_batch, l, site);
        s->first_item = d->first_item;
    }
    return p;
}

pfx_status pfx_model_drop_rows(pfx_context *cx, size_t l, pfx_dropout_site site, size_t R,
                               const pfx_tensor *x, const pfx_tensor *base, const pfx_tensor *out)
{
    pfx_dropout_stream s;
    const float p = pfx_model_drop(cx, l, site, &s);
    if (p == 0.0f)
        return PFX_SUCCESS;
    const size_t C = cx->model->cfg.shape.hidden;
    const pfx_mat bm = base ? PFX_MAT(base, R, C) : PFX_MAT(x, R, C);
    return pfx_op_dropout(cx->rt, p, &s, cx->drop_tokens, PFX_MAT(x, R, C), base ? &bm : NULL,
                          PFX_MAT(out, R, C));
}

pfx_status pfx_model_check_dropout(pfx_context *cx, const char *fn, const pfx_model_dropout *d)
{
    if (!d)
        return PFX_SUCCESS;
    const struct {
        const char *name;
        float p;
    } f[] = { { "embd", d->embd }, { "attn", d->attn }, { "resid", d->resid } };
    for (size_t i = 0; i < 3; i++)
        if (!pfx_dropout_valid(f[i].p))
            return pfx_error(cx->rt, PFX_ERROR_INVALID_ARGUMENT,
                             "%s: grads.dropout.%s (%g) is not in [0, 1)", fn, f[i].name,
                             (double)f[i].p);
    if (d->micro_batch >= PFX_DROPOUT_MAX_MICRO)
        return pfx_error(cx->rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: grads.dropout.micro_batch (%u) is not below %u", fn,
                         (unsigned)d->micro_batch, PFX_DROPOUT_MAX_MICRO);
    if (cx->model->cfg.shape.layers > PFX_DROPOUT_MAX_LAYERS)
        return pfx_error(cx->rt, PFX_ERROR_UNSUPPORTED,
                         "%s: dropout keys at most %u layers; the model has %zu", fn,
                         PFX_DROPOUT_MAX_LAYERS, cx->model->cfg.shape.layers);
    return PFX_SUCCESS;
}
