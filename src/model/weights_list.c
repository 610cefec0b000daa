/* A model's weight list: the tensors it holds, named, in checkpoint order,
 * with the Llama family's q, k and v projections as the one stacked tensor
 * the forward uses (model.h, "Weights"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define LAYER_ROLES (PFX_W_ROLE_COUNT - PFX_W_FIRST_LAYER_ROLE)

static pfx_weight_kind kind_of(pfx_weight_role r)
{
    switch (r) {
    case PFX_W_EMBED:
    case PFX_W_POS: return PFX_WEIGHT_EMBEDDING;
    case PFX_W_NORM1:
    case PFX_W_NORM2:
    case PFX_W_NORM_F: return PFX_WEIGHT_NORM;
    case PFX_W_NORM1_B:
    case PFX_W_NORM2_B:
    case PFX_W_NORM_F_B:
    case PFX_W_QKV_B:
    case PFX_W_Q_B:
    case PFX_W_K_B:
    case PFX_W_V_B:
    case PFX_W_O_B:
    case PFX_W_UP_B:
    case PFX_W_DOWN_B: return PFX_WEIGHT_BIAS;
    default: return PFX_WEIGHT_MATRIX;
    }
}

/* Slot of (layer, role) in weight_at: the globals after the L layers. */
static size_t slot_of(const pfx_model *m, size_t layer, pfx_weight_role role)
{
    return role < PFX_W_FIRST_LAYER_ROLE ? m->cfg.shape.layers * LAYER_ROLES + role
                                         : layer * LAYER_ROLES + (role - PFX_W_FIRST_LAYER_ROLE);
}

pfx_status pfx_model_weights_index(pfx_model *m)
{
    const size_t L = m->cfg.shape.layers, slots = L * LAYER_ROLES + PFX_W_FIRST_LAYER_ROLE;
    m->weights = calloc(m->spec_count, sizeof(*m->weights));
    m->weight_at = malloc(slots * sizeof(*m->weight_at));
    if (!m->weights || !m->weight_at)
        return pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    for (size_t i = 0; i < slots; i++)
        m->weight_at[i] = SIZE_MAX;
    size_t n = 0;
    for (size_t i = 0; i < m->spec_count; i++) {
        const pfx_weight_spec *s = &m->specs[i];
        pfx_model_weight_entry *e = &m->weights[n];
        e->role = s->role;
        e->layer = s->role < PFX_W_FIRST_LAYER_ROLE ? SIZE_MAX : s->layer;
        if (m->tensors[i]) {
            e->t = m->tensors[i];
            snprintf(e->name, sizeof(e->name), "%s", s->name);
        } else if (s->role == PFX_W_Q || s->role == PFX_W_Q_B) {
            /* stacked at load: the q entry stands for q | k | v */
            const bool bias = s->role == PFX_W_Q_B;
            e->role = bias ? PFX_W_QKV_B : PFX_W_QKV;
            e->t = m->fused_qkv[2 * s->layer + bias];
            snprintf(e->name, sizeof(e->name), "model.layers.%zu.self_attn.qkv_proj.%s", s->layer,
                     bias ? "bias" : "weight");
        } else {
            continue; /* k and v: inside the stacked tensor */
        }
        m->weight_at[slot_of(m, s->layer, e->role)] = n++;
    }
    m->weight_count = n;
    return PFX_SUCCESS;
}

size_t pfx_model_weight_index(const pfx_model *m, size_t layer, pfx_weight_role role)
{
    return m->weight_at[slot_of(m, layer, role)];
}

size_t pfx_model_weight_count(const pfx_model *model)
{
    return model ? model->weight_count : 0;
}

static pfx_status check_index(const pfx_model *model, const char *fn, size_t index, const void *out,
                              const char *out_name)
{
    if (!model || !out)
        return pfx_error(model ? model->rt : NULL, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", fn,
                         !model ? "model" : out_name);
    if (index >= model->weight_count)
        return pfx_error(model->rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: index %zu is not below the %zu weights", fn, index,
                         model->weight_count);
    return PFX_SUCCESS;
}

pfx_status pfx_model_get_weight(const pfx_model *model, size_t index, pfx_model_weight_info *info)
{
    pfx_status st = check_index(model, "model_get_weight", index, info, "info");
    if (st != PFX_SUCCESS)
        return st;
    const pfx_model_weight_entry *e = &model->weights[index];
    memset(info, 0, sizeof(*info));
    snprintf(info->name, sizeof(info->name), "%s", e->name);
    info->kind = kind_of(e->role);
    info->layer = e->layer;
    info->ndim = e->t->ndim;
    for (unsigned d = 0; d < e->t->ndim && d < 2; d++)
        info->shape[d] = e->t->shape[d];
    info->numel = e->t->numel;
    return PFX_SUCCESS;
}

pfx_status pfx_model_weight_tensor(pfx_model *model, size_t index, pfx_tensor **tensor)
{
    pfx_status st = check_index(model, "model_weight_tensor", index, tensor, "tensor");
    if (st == PFX_SUCCESS)
        *tensor = model->weights[index].t;
    return st;
}
