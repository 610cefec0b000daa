/* The residual stack of attention layers (include/prefixcl/layer.h):
 * acts[l + 1] = acts[l] + layer_l(acts[l]) forward, and the chained backward. */
#include "layer_internal.h"

/* Errors go to the stack's runtime (that of layers[0]); to the thread's only
 * when there is no layer to name one. */
static pfx_runtime *stack_runtime(pfx_layer *const *layers, size_t count)
{
    return layers && count && layers[0] ? layers[0]->rt : NULL;
}

static pfx_status check_layers(pfx_runtime *rt, const char *fn, pfx_layer *const *layers,
                               size_t count)
{
    if (count == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "%s: count is 0", fn);
    for (size_t l = 0; l < count; l++) {
        if (!layers[l])
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: layers[%zu] is NULL", fn, l);
        if (layers[l]->rt != rt)
            return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                             "%s: layers[%zu] belongs to another runtime than "
                             "layers[0]",
                             fn, l);
    }
    return PFX_SUCCESS;
}

pfx_status pfx_stack_forward(pfx_layer *const *layers, size_t count,
                             const pfx_layer_prefix *prefixes, pfx_tensor *const *acts)
{
    static const char fn[] = "stack_forward";
    pfx_runtime *rt = stack_runtime(layers, count);
    if (!layers || !prefixes || !acts)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !layers     ? "layers"
                         : !prefixes ? "prefixes"
                                     : "acts");
    pfx_status st = check_layers(rt, fn, layers, count);
    if (st != PFX_SUCCESS)
        return st;
    for (size_t l = 0; l <= count; l++) {
        if (!acts[l])
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: acts[%zu] is NULL", fn, l);
        for (size_t j = 0; j < l; j++)
            if (acts[j]->mem == acts[l]->mem)
                return pfx_error(rt, PFX_ERROR_ALIASING, "%s: acts[%zu] and acts[%zu] are the same",
                                 fn, j, l);
    }
    for (size_t l = 0; l < count; l++) {
        st = pfx_layer_forward(layers[l], acts[l], &prefixes[l], acts[l + 1]);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}

pfx_status pfx_stack_backward(pfx_layer *const *layers, size_t count,
                              const pfx_layer_prefix *prefixes, pfx_tensor *const *acts,
                              const pfx_tensor *dy, const pfx_layer_grads *grads, pfx_tensor *dx,
                              pfx_tensor *const *scratch)
{
    static const char fn[] = "stack_backward";
    pfx_runtime *rt = stack_runtime(layers, count);
    if (!layers || !prefixes || !acts || !grads || !dy)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !layers     ? "layers"
                         : !prefixes ? "prefixes"
                         : !acts     ? "acts"
                         : !grads    ? "grads"
                                     : "dy");
    pfx_status st = check_layers(rt, fn, layers, count);
    if (st != PFX_SUCCESS)
        return st;
    if (count > 1) {
        if (!scratch || !scratch[0] || !scratch[1])
            return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT,
                             "%s: scratch needs two tensors for %zu layers", fn, count);
        if (scratch[0]->mem == scratch[1]->mem || scratch[0]->mem == dy->mem ||
            scratch[1]->mem == dy->mem ||
            (dx && (dx->mem == scratch[0]->mem || dx->mem == scratch[1]->mem)))
            return pfx_error(rt, PFX_ERROR_ALIASING,
                             "%s: scratch tensors must be distinct from each other, dy and dx", fn);
        for (size_t l = 0; l <= count; l++)
            if (acts[l] && (acts[l]->mem == scratch[0]->mem || acts[l]->mem == scratch[1]->mem))
                return pfx_error(rt, PFX_ERROR_ALIASING, "%s: scratch is acts[%zu]", fn, l);
    }
    /* gradient of acts[l] (l >= 1) lives in scratch[l % 2]; of acts[0] in dx */
    for (size_t i = count; i-- > 0;) {
        pfx_layer_grads g = grads[i];
        const pfx_tensor *gy = i + 1 == count ? dy : scratch[(i + 1) % 2];
        g.dx = i == 0 ? dx : scratch[i % 2];
        st = pfx_layer_backward(layers[i], acts[i], &prefixes[i], gy, &g);
        if (st != PFX_SUCCESS)
            return st;
    }
    return PFX_SUCCESS;
}
