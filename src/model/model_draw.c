/* Models drawn from a seed for a config alone: random weights
 * (pfx_model_create_random) or transformers' initialization (pfx_model_init,
 * and pfx_model_init_text for a config.json held in memory). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "model_internal.h"

static bool is_norm_weight(pfx_weight_role r)
{
    return r == PFX_W_NORM1 || r == PFX_W_NORM2 || r == PFX_W_NORM_F;
}

static bool is_bias(pfx_weight_role r)
{
    return r == PFX_W_NORM1_B || r == PFX_W_NORM2_B || r == PFX_W_NORM_F_B || r == PFX_W_QKV_B ||
           r == PFX_W_Q_B || r == PFX_W_K_B || r == PFX_W_V_B || r == PFX_W_O_B ||
           r == PFX_W_UP_B || r == PFX_W_DOWN_B;
}

/* How a model's weights are drawn from a seed. */
typedef enum draw_kind {
    DRAW_UNIFORM = 0, /* pfx_model_create_random: uniform, standard deviation 0.02 */
    DRAW_HF_INIT = 1, /* pfx_model_init: transformers' _init_weights of the family */
} draw_kind;

/* A standard normal from two draws of the generator (Box-Muller in double). */
static double normal01(uint64_t *state)
{
    const double u1 = (double)((pfx_splitmix64(state) >> 11) + 1) * 0x1p-53; /* (0, 1] */
    const double u2 = (double)(pfx_splitmix64(state) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* GPT-2's residual projections (attention and MLP c_proj), scaled at init. */
static bool is_residual_proj(const pfx_model *m, pfx_weight_role r)
{
    return m->cfg.family == PFX_FAMILY_GPT2 && (r == PFX_W_O || r == PFX_W_DOWN);
}

/* Every weight of m (before the q, k, v stacking) drawn from `seed`. */
static pfx_status draw_weights(pfx_model *m, const char *fn, uint64_t seed, draw_kind kind)
{
    pfx_runtime *rt = m->rt;
    const pfx_model_shape *s = &m->cfg.shape;
    if (kind == DRAW_HF_INIT && m->cfg.family == PFX_FAMILY_LLAMA && m->cfg.has_pad &&
        (m->cfg.pad_token < 0 || (unsigned long long)m->cfg.pad_token >= s->vocab))
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: pad_token_id %lld is not a row of the %zu embeddings", fn,
                         m->cfg.pad_token, s->vocab);
    size_t largest = 0;
    for (size_t i = 0; i < m->spec_count; i++)
        largest = m->tensors[i]->numel > largest ? m->tensors[i]->numel : largest;
    float *host = malloc(largest * sizeof(float));
    if (!host)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", fn);
    uint64_t state = seed;
    const float a = 0.02f * sqrtf(3.0f); /* uniform with standard deviation 0.02 */
    const double sd = m->cfg.init_range, sd_proj = sd / sqrt(2.0 * (double)s->layers);
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; st == PFX_SUCCESS && i < m->spec_count; i++) {
        const pfx_weight_role r = m->specs[i].role;
        const size_t n = m->tensors[i]->numel;
        const double scale = is_residual_proj(m, r) ? sd_proj : sd;
        for (size_t j = 0; j < n; j++) {
            if (is_norm_weight(r))
                host[j] = 1.0f;
            else if (is_bias(r))
                host[j] = 0.0f;
            else if (kind == DRAW_UNIFORM)
                host[j] = a * (2.0f * (float)(pfx_splitmix64(&state) >> 40) * 0x1p-24f - 1.0f);
            else
                host[j] = (float)(scale * normal01(&state));
        }
        if (kind == DRAW_HF_INIT && r == PFX_W_EMBED && m->cfg.family == PFX_FAMILY_LLAMA &&
            m->cfg.has_pad)
            memset(host + (size_t)m->cfg.pad_token * s->hidden, 0, s->hidden * sizeof(float));
        const pfx_tensor *t = m->tensors[i];
        st = pfx_model_held_transposed(m, r)
                 ? pfx_model_write_transposed(rt, host, t->shape[1], t->shape[0], m->tensors[i])
                 : pfx_tensor_write(m->tensors[i], 0, n, host);
    }
    free(host);
    return st;
}

/* The text of dir/config.json, or `given` (size bytes) in its place. */
static pfx_status config_text(pfx_runtime *rt, const char *dir, const unsigned char *given,
                              size_t size, pfx_model_config *cfg, unsigned char **text,
                              size_t *text_size)
{
    if (!given)
        return pfx_model_config_read_text(rt, dir, cfg, text, text_size);
    char *label = pfx_join_path(dir, "config.json");
    *text = malloc(size ? size : 1);
    pfx_status st = label && *text ? pfx_model_config_parse(rt, given, size, label, cfg)
                                   : pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    free(label);
    if (st != PFX_SUCCESS) {
        free(*text);
        *text = NULL;
        return st;
    }
    memcpy(*text, given, size);
    *text_size = size;
    return PFX_SUCCESS;
}

static pfx_status create_drawn(pfx_runtime *rt, const char *fn, const char *dir,
                               const unsigned char *given, size_t given_size,
                               const pfx_model_params *params, uint64_t seed, draw_kind kind,
                               pfx_model **out)
{
    pfx_status st = pfx_model_begin(rt, fn, dir, out);
    pfx_model_config cfg;
    pfx_model_params p;
    pfx_model *m = NULL;
    unsigned char *text = NULL;
    size_t size = 0;
    if (st == PFX_SUCCESS)
        st = config_text(rt, dir, given, given_size, &cfg, &text, &size);
    if (st == PFX_SUCCESS)
        st = pfx_model_check_params(rt, params, &p);
    if (st == PFX_SUCCESS)
        st = pfx_model_check_fits(rt, dir, &cfg, &p);
    if (st == PFX_SUCCESS)
        st = pfx_model_create_empty(rt, &cfg, &p, true, NULL, 0, &m);
    if (st != PFX_SUCCESS) {
        free(text);
        return st;
    }
    m->config_text = text;
    m->config_size = size;
    st = draw_weights(m, fn, seed, kind);
    if (st == PFX_SUCCESS)
        st = pfx_model_fuse_qkv(m);
    if (st == PFX_SUCCESS)
        st = pfx_model_weights_index(m);
    if (st != PFX_SUCCESS) {
        pfx_model_destroy(&m);
        return st;
    }
    *out = m;
    return PFX_SUCCESS;
}

pfx_status pfx_model_create_random(pfx_runtime *rt, const char *dir, const pfx_model_params *params,
                                   uint64_t seed, pfx_model **out)
{
    return create_drawn(rt, "model_create_random", dir, NULL, 0, params, seed, DRAW_UNIFORM, out);
}

pfx_status pfx_model_init(pfx_runtime *rt, const char *dir, const pfx_model_params *params,
                          uint64_t seed, pfx_model **out)
{
    return create_drawn(rt, "model_init", dir, NULL, 0, params, seed, DRAW_HF_INIT, out);
}

pfx_status pfx_model_init_text(pfx_runtime *rt, const char *dir, const unsigned char *text,
                               size_t size, const pfx_model_params *params, uint64_t seed,
                               pfx_model **out)
{
    if (!text && rt)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "model_init: text is NULL");
    return create_drawn(rt, "model_init", dir, text, size, params, seed, DRAW_HF_INIT, out);
}
