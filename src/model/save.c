/* Writing a model's weights as the checkpoint pfx_model_load reads
 * (pfx_model_save_weights). */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* Where a Llama q, k or v part (weight or bias) lies in its layer's stacked
 * tensor: the stacked tensor and the byte offset. */
static const pfx_tensor *stacked_part(const pfx_model *m, const pfx_weight_spec *w, size_t *offset)
{
    const pfx_model_shape *s = &m->cfg.shape;
    const bool bias = w->role == PFX_W_Q_B || w->role == PFX_W_K_B || w->role == PFX_W_V_B;
    const pfx_weight_role part = bias ? (pfx_weight_role)(w->role - PFX_W_Q_B + PFX_W_Q) : w->role;
    if (!m->fused_qkv || (part != PFX_W_Q && part != PFX_W_K && part != PFX_W_V))
        return NULL;
    const pfx_tensor *t = m->fused_qkv[2 * w->layer + (bias ? 1 : 0)];
    if (!t)
        return NULL;
    const size_t qd = s->heads * s->head_dim, kvd = s->kv_heads * s->head_dim;
    const size_t rows = part == PFX_W_Q ? 0 : part == PFX_W_K ? qd : qd + kvd;
    const size_t cols = w->ndim == 2 ? w->shape[1] : 1;
    *offset = rows * cols * (t->bytes / t->numel);
    return t;
}

pfx_status pfx_model_save_weights(pfx_model *model, const char *path)
{
    if (!model || !path)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "model_save_weights: %s is NULL",
                         !model ? "model" : "path");
    pfx_runtime *rt = model->rt;
    const size_t n = model->spec_count;
    pfx_named_tensor *items = calloc(n, sizeof(*items));
    pfx_tensor **copies = calloc(n, sizeof(*copies));
    pfx_status st = items && copies ? PFX_SUCCESS
                                    : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model_save_weights: host memory");
    for (size_t i = 0; st == PFX_SUCCESS && i < n; i++) {
        const pfx_weight_spec *w = &model->specs[i];
        const pfx_tensor *t = model->tensors[i];
        if (!t) {
            /* released into the stacked q | k | v: copied back out */
            size_t offset = 0;
            const pfx_tensor *stack = stacked_part(model, w, &offset);
            if (!stack) {
                st = pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "model_save_weights: %s is not held", w->name);
                break;
            }
            if ((st = pfx_tensor_create(rt, stack->dtype, w->ndim, w->shape, &copies[i])))
                break;
            cl_int err = clEnqueueCopyBuffer(rt->queue, stack->mem, copies[i]->mem, offset, 0, copies[i]->bytes, 0,
                                             NULL, NULL);
            if (err != CL_SUCCESS) {
                st = pfx_cl_error(rt, err, "model_save_weights: a q, k, v part copied out of the stacked tensor");
                break;
            }
            t = copies[i];
        }
        items[i] = (pfx_named_tensor){ .name = w->name, .tensor = t };
    }
    const pfx_st_metadata meta = { "format", "pt" }; /* what save_pretrained writes */
    if (st == PFX_SUCCESS)
        st = pfx_safetensors_save(rt, path, items, n, &meta, 1);
    for (size_t i = 0; copies && i < n; i++)
        pfx_tensor_destroy(&copies[i]);
    free(copies);
    free(items);
    return st;
}
