/* Per-head attention statistics of a whole model (model.h): one forward
 * pass, each layer's attention problem handed to pfx_attention_stats right
 * after its block runs, the [H] results read into the caller's [L * H]
 * arrays. For reports; the map itself is never stored. */
#include "model_internal.h"

typedef struct stats_job {
    unsigned top_k;
    size_t H;
    pfx_tensor *mass, *ent, *top; /* [H] each, NULL for an output not asked */
    float *prefix_mass, *entropy, *top_k_mass;
} stats_job;

static pfx_status stats_visit(pfx_runtime *rt, size_t layer, const pfx_attention_desc *desc,
                              const pfx_attention_inputs *in, void *arg)
{
    stats_job *j = arg;
    pfx_tensor **const dev[3] = { &j->mass, &j->ent, &j->top };
    float *const host[3] = { j->prefix_mass, j->entropy, j->top_k_mass };
    pfx_status st = PFX_SUCCESS;
    /* made here, once every argument has passed its checks */
    for (int i = 0; i < 3 && st == PFX_SUCCESS; i++)
        if (host[i] && !*dev[i])
            st = pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &j->H, dev[i]);
    if (st == PFX_SUCCESS)
        st = pfx_attention_stats(rt, desc, in, j->top_k, j->ent, j->top, j->mass);
    for (int i = 0; i < 3 && st == PFX_SUCCESS; i++)
        if (host[i])
            st = pfx_tensor_read(*dev[i], 0, j->H, host[i] + layer * j->H);
    return st;
}

/* pfx_model_head_stats under the name `fn` (that of the public call). */
static pfx_status head_stats(const char *fn, pfx_context *ctx, const pfx_model_batch *batch,
                             const pfx_model_prefix *prefix, uint32_t top_k, float *prefix_mass,
                             float *entropy, float *top_k_mass)
{
    const pfx_model *model = pfx_context_model(ctx);
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: ctx is NULL", fn);
    pfx_runtime *rt = model->rt;
    if (top_k < 1 || top_k > PFX_ATTENTION_TOPK_MAX)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: top_k (%u) is not in [1, %d]", fn,
                         (unsigned)top_k, PFX_ATTENTION_TOPK_MAX);
    if (!prefix_mass && !entropy && !top_k_mass)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                         "%s: prefix_mass, entropy and top_k_mass are all NULL", fn);
    stats_job j = { (unsigned)top_k, model->cfg.shape.heads, NULL, NULL, NULL, prefix_mass, entropy,
                    top_k_mass };
    pfx_status st =
        pfx_model_layer_attention(ctx, fn, batch, prefix, PFX_MODEL_EVERY_LAYER, stats_visit, &j);
    pfx_tensor_destroy(&j.mass);
    pfx_tensor_destroy(&j.ent);
    pfx_tensor_destroy(&j.top);
    return st;
}

pfx_status pfx_model_head_stats(pfx_context *ctx, const pfx_model_batch *batch,
                                const pfx_model_prefix *prefix, uint32_t top_k, float *prefix_mass,
                                float *entropy, float *top_k_mass)
{
    return head_stats("model_head_stats", ctx, batch, prefix, top_k, prefix_mass, entropy,
                      top_k_mass);
}

pfx_status pfx_model_attention_stats(pfx_context *ctx, const pfx_model_batch *batch,
                                     const pfx_model_prefix *prefix, float *prefix_mass,
                                     float *entropy)
{
    const pfx_model *model = pfx_context_model(ctx);
    if (model && !prefix_mass && !entropy)
        return pfx_error(model->rt, PFX_ERROR_NULL_ARGUMENT,
                         "model_attention_stats: prefix_mass and entropy are "
                         "both NULL");
    return head_stats("model_attention_stats", ctx, batch, prefix, 1, prefix_mass, entropy, NULL);
}
