/* The probability map of one head of one layer of a model's forward: the
 * blocks before the layer run, then pfx_gain_softmax_probs on that layer's
 * Q, K and prefix. For heat maps of short texts (the map is N x (P + N)). */
#include "model_internal.h"

typedef struct probs_job {
    size_t item, head;
    pfx_tensor *probs;
} probs_job;

static pfx_status probs_visit(pfx_runtime *rt, size_t layer, const pfx_attention_desc *desc,
                              const pfx_attention_inputs *in, void *arg)
{
    (void)layer;
    const probs_job *job = arg;
    return pfx_gain_softmax_probs(rt, desc, in, job->item, job->head, job->probs);
}

pfx_status pfx_model_attention_probs(pfx_context *ctx, const pfx_model_batch *batch,
                                     const pfx_model_prefix *prefix, size_t item, size_t layer,
                                     size_t head, pfx_tensor *probs)
{
    const pfx_model *model = pfx_context_model(ctx);
    static const char fn[] = "model_attention_probs";
    if (!model)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s: ctx is NULL", fn);
    pfx_runtime *rt = model->rt;
    const pfx_model_shape *s = &model->cfg.shape;
    if (!batch)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: batch is NULL", fn);
    if (item >= batch->batch)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: item %zu is not below batch.batch %zu",
                         fn, item, batch->batch);
    if (head >= s->heads)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: head %zu is not below the model's %zu heads", fn, head, s->heads);
    if (!probs)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: probs is NULL", fn);
    if (probs->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: probs belongs to another runtime",
                         fn);
    if (probs->dtype != PFX_DTYPE_F32)
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH, "%s: probs must be float32", fn);
    const size_t N = batch->tokens, P = prefix ? prefix->prefix_len : 0;
    if (probs->ndim != 2 || probs->shape[0] != N || probs->shape[1] != P + N)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: probs must be [N=%zu, P + N=%zu]", fn, N,
                         P + N);
    for (size_t l = 0; P && prefix->keys && prefix->values && l < s->layers; l++)
        if ((prefix->keys[l] && probs->mem == prefix->keys[l]->mem) ||
            (prefix->values[l] && probs->mem == prefix->values[l]->mem))
            return pfx_error(rt, PFX_ERROR_ALIASING, "%s: probs is also prefix %zu", fn, l);
    probs_job job = { item, head, probs };
    return pfx_model_layer_attention(ctx, fn, batch, prefix, layer, probs_visit, &job);
}
