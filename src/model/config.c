/* config.json of a Hugging Face decoder-only model: the families this
 * library computes, every field that changes the math checked. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "model_internal.h"

#define CONFIG_MAX_BYTES ((size_t)1 << 22)

typedef struct parse_ctx {
    pfx_runtime *rt;
    const char *label;
    const cJSON *root;
} parse_ctx;

static const cJSON *get(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    return item && !cJSON_IsNull(item) ? item : NULL;
}

static pfx_status count(const parse_ctx *c, const char *key, bool required, size_t fallback,
                        size_t *out)
{
    return pfx_json_field_count(c->rt, c->label, c->root, key, required, fallback, out);
}

/* A boolean that defaults to `fallback` when absent or null. */
static pfx_status flag(const parse_ctx *c, const char *key, bool fallback, bool *out)
{
    if (!get(c->root, key)) {
        *out = fallback;
        return PFX_SUCCESS;
    }
    return pfx_json_field_bool(c->rt, c->label, c->root, key, out);
}

/* A finite positive number of `obj` (the root or a nested object `where`). */
static pfx_status number(const parse_ctx *c, const cJSON *obj, const char *where, const char *key,
                         bool required, double fallback, double *out)
{
    const cJSON *item = get(obj, key);
    if (!item) {
        if (required)
            return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: the field '%s%s' is missing", c->label,
                             where, key);
        *out = fallback;
        return PFX_SUCCESS;
    }
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble <= 0.0)
        return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: the field '%s%s' is not a positive number",
                         c->label, where, key);
    *out = item->valuedouble;
    return PFX_SUCCESS;
}

/* A dropout probability: a number in [0, 1), `fallback` when absent or null
 * (transformers' default for the family). */
static pfx_status probability(const parse_ctx *c, const char *key, double fallback, float *out)
{
    const cJSON *item = get(c->root, key);
    const double v = item ? item->valuedouble : fallback;
    if (item && (!cJSON_IsNumber(item) || !(v >= 0.0 && v < 1.0)))
        return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: the field '%s' is not a number in [0, 1)",
                         c->label, key);
    *out = (float)v;
    return PFX_SUCCESS;
}

/* A field that must be false (or absent) because it changes the math. */
static pfx_status refuse_true(const parse_ctx *c, const char *key)
{
    bool v;
    pfx_status st = flag(c, key, false, &v);
    if (st == PFX_SUCCESS && v)
        st = pfx_error(c->rt, PFX_ERROR_UNSUPPORTED, "%s: '%s' true is not supported", c->label,
                       key);
    return st;
}

static pfx_status parse_gpt2(const parse_ctx *c, pfx_model_config *cfg)
{
    pfx_model_shape *s = &cfg->shape;
    pfx_status st;
    size_t inner;
    bool scale_weights;
    if ((st = count(c, "n_embd", true, 0, &s->hidden)) ||
        (st = count(c, "n_layer", true, 0, &s->layers)) ||
        (st = count(c, "n_head", true, 0, &s->heads)) ||
        (st = count(c, "vocab_size", true, 0, &s->vocab)) ||
        (st = count(c, "n_positions", true, 0, &s->max_positions)) ||
        (st = count(c, "n_inner", false, 0, &inner)) ||
        (st = flag(c, "scale_attn_weights", true, &scale_weights)) ||
        (st = flag(c, "tie_word_embeddings", true, &s->tied_embeddings)) ||
        (st = refuse_true(c, "scale_attn_by_inverse_layer_idx")) ||
        (st = refuse_true(c, "reorder_and_upcast_attn")) ||
        (st = refuse_true(c, "add_cross_attention")) ||
        (st = number(c, c->root, "", "layer_norm_epsilon", false, 1e-5, &cfg->norm_eps)))
        return st;
    if (s->hidden % s->heads)
        return pfx_error(c->rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: n_embd %zu is not a multiple of n_head %zu", c->label, s->hidden,
                         s->heads);
    const cJSON *act = get(c->root, "activation_function");
    if (act && !cJSON_IsString(act))
        return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: 'activation_function' is not a string",
                         c->label);
    if ((st = pfx_activation_parse(c->rt, act ? act->valuestring : "gelu_new", &cfg->act)))
        return pfx_error(c->rt, st, "%s: activation_function '%.64s' is not supported", c->label,
                         act ? act->valuestring : "gelu_new");
    s->kv_heads = s->heads;
    s->head_dim = s->hidden / s->heads;
    s->intermediate = inner ? inner : 4 * s->hidden;
    cfg->qkv_bias = true;
    cfg->attn_scale = scale_weights ? 0.0f : 1.0f;
    return PFX_SUCCESS;
}

/* rope_parameters (transformers 5) or rope_scaling (4.x): type default or llama3. */
static pfx_status parse_rope(const parse_ctx *c, pfx_model_config *cfg)
{
    pfx_rope_params *r = &cfg->rope;
    const char *field = get(c->root, "rope_parameters") ? "rope_parameters" : "rope_scaling";
    const cJSON *rp = get(c->root, field);
    pfx_status st;
    if (rp && !cJSON_IsObject(rp))
        return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: '%s' is not an object", c->label, field);
    /* rope_theta: top level, or inside rope_parameters */
    double theta_top;
    if ((st = number(c, c->root, "", "rope_theta", false, 10000.0, &theta_top)))
        return st;
    r->theta = theta_top;
    r->type = PFX_ROPE_DEFAULT;
    if (!rp)
        return PFX_SUCCESS;
    char where[40];
    snprintf(where, sizeof(where), "%s.", field);
    if ((st = number(c, rp, where, "rope_theta", false, theta_top, &r->theta)))
        return st;
    const cJSON *type = get(rp, "rope_type");
    if (!type)
        type = get(rp, "type");
    if (type && !cJSON_IsString(type))
        return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: '%s.rope_type' is not a string", c->label,
                         field);
    const char *name = type ? type->valuestring : "default";
    if (strcmp(name, "default") == 0)
        return PFX_SUCCESS;
    if (strcmp(name, "llama3") != 0)
        return pfx_error(c->rt, PFX_ERROR_UNSUPPORTED,
                         "%s: %s type '%.64s' is not supported (default and llama3 are)", c->label,
                         field, name);
    r->type = PFX_ROPE_LLAMA3;
    if ((st = number(c, rp, where, "factor", true, 0, &r->factor)) ||
        (st = number(c, rp, where, "low_freq_factor", true, 0, &r->low_freq_factor)) ||
        (st = number(c, rp, where, "high_freq_factor", true, 0, &r->high_freq_factor)) ||
        (st = number(c, rp, where, "original_max_position_embeddings", true, 0,
                     &r->original_max_position_embeddings)))
        return st;
    if (!(r->high_freq_factor > r->low_freq_factor))
        return pfx_error(c->rt, PFX_ERROR_FORMAT,
                         "%s: %s.high_freq_factor must exceed low_freq_factor", c->label, field);
    return PFX_SUCCESS;
}

static pfx_status parse_llama(const parse_ctx *c, const char *type, pfx_model_config *cfg)
{
    pfx_model_shape *s = &cfg->shape;
    pfx_status st;
    if ((st = count(c, "hidden_size", true, 0, &s->hidden)) ||
        (st = count(c, "intermediate_size", true, 0, &s->intermediate)) ||
        (st = count(c, "num_hidden_layers", true, 0, &s->layers)) ||
        (st = count(c, "num_attention_heads", true, 0, &s->heads)) ||
        (st = count(c, "num_key_value_heads", false, s->heads, &s->kv_heads)) ||
        (st = count(c, "vocab_size", true, 0, &s->vocab)) ||
        (st = count(c, "max_position_embeddings", true, 0, &s->max_positions)) ||
        (st = flag(c, "tie_word_embeddings", false, &s->tied_embeddings)) ||
        (st = refuse_true(c, "mlp_bias")) ||
        (st = number(c, c->root, "", "rms_norm_eps", false, 1e-6, &cfg->norm_eps)) ||
        (st = parse_rope(c, cfg)))
        return st;
    if (s->hidden % s->heads && !get(c->root, "head_dim"))
        return pfx_error(
            c->rt, PFX_ERROR_INVALID_SHAPE,
            "%s: hidden_size %zu is not a multiple of num_attention_heads %zu (and no head_dim)",
            c->label, s->hidden, s->heads);
    if ((st = count(c, "head_dim", false, s->hidden / s->heads, &s->head_dim)))
        return st;
    if (s->heads % s->kv_heads)
        return pfx_error(c->rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: num_attention_heads %zu is not a multiple of num_key_value_heads %zu",
                         c->label, s->heads, s->kv_heads);
    if (s->head_dim % 2)
        return pfx_error(c->rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: head_dim %zu is odd (RoPE rotates pairs)", c->label, s->head_dim);
    const cJSON *act = get(c->root, "hidden_act");
    if (act && !cJSON_IsString(act))
        return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: 'hidden_act' is not a string", c->label);
    const char *act_name = act ? act->valuestring : "silu";
    if ((st = pfx_activation_parse(c->rt, act_name, &cfg->act)) || cfg->act != PFX_ACT_SILU)
        return pfx_error(c->rt, PFX_ERROR_UNSUPPORTED,
                         "%s: hidden_act '%.64s' is not supported (the SwiGLU MLP takes silu)",
                         c->label, act_name);
    cfg->rope.head_dim = s->head_dim;
    /* qwen2 always has q/k/v biases; llama's attention_bias would add an
     * o_proj bias as well, which is not computed */
    bool qwen2 = strcmp(type, "qwen2") == 0;
    if (!qwen2 && (st = refuse_true(c, "attention_bias")))
        return st;
    cfg->qkv_bias = qwen2;
    /* a sliding window: mistral's sliding_window, qwen2's when use_sliding_window */
    bool use_window = !qwen2;
    if (qwen2 && (st = flag(c, "use_sliding_window", false, &use_window)))
        return st;
    if (use_window && (st = count(c, "sliding_window", false, 0, &cfg->sliding_window)))
        return st;
    return PFX_SUCCESS;
}

/* eos_token_id: absent, null, an id or a list of ids (each in [0, 2^31),
 * at most PFX_MODEL_MAX_EOS). */
static pfx_status parse_eos(const parse_ctx *c, pfx_model_shape *s)
{
    const cJSON *item = get(c->root, "eos_token_id");
    s->eos_count = 0;
    if (!item)
        return PFX_SUCCESS;
    const bool list = cJSON_IsArray(item);
    const cJSON *e = list ? item->child : item;
    for (; e; e = list ? e->next : NULL) {
        uint64_t v;
        if (s->eos_count == PFX_MODEL_MAX_EOS || !pfx_json_uint(e, &v) || v > INT32_MAX)
            return pfx_error(
                c->rt, PFX_ERROR_FORMAT,
                "%s: the field 'eos_token_id' is not a token id or a list of at most %d ids",
                c->label, PFX_MODEL_MAX_EOS);
        s->eos_ids[s->eos_count++] = (int32_t)v;
    }
    return PFX_SUCCESS;
}

/* Frozen parameters as torch counts them (tied embeddings once). */
static bool count_parameters(const pfx_model_config *cfg, size_t *out)
{
    const pfx_model_shape *s = &cfg->shape;
    const size_t C = s->hidden, I = s->intermediate, V = s->vocab;
    size_t qd = 0, kvd = 0, t = 0, layer = 0, total = 0;
    bool o = false;
    o |= pfx_mul_overflows(s->heads, s->head_dim, &qd) ||
         pfx_mul_overflows(s->kv_heads, s->head_dim, &kvd);
    /* attention: q, o (qd x C each) and k, v (kvd x C each) */
    o |= pfx_mul_overflows(2 * (qd + kvd), C, &t) || __builtin_add_overflow(layer, t, &layer);
    o |= pfx_mul_overflows(cfg->family == PFX_FAMILY_GPT2 ? 2 : 3, I, &t) ||
         pfx_mul_overflows(t, C, &t) || __builtin_add_overflow(layer, t, &layer);
    t = 2 * C + (cfg->qkv_bias ? qd + 2 * kvd : 0);
    if (cfg->family == PFX_FAMILY_GPT2)
        t += C + 2 * C + I + C; /* attn c_proj, norm, c_fc and mlp c_proj biases */
    o |= __builtin_add_overflow(layer, t, &layer);
    o |= pfx_mul_overflows(layer, s->layers, &total);
    o |= pfx_mul_overflows(V, C, &t) ||
         __builtin_add_overflow(total, s->tied_embeddings ? t : 2 * t, &total);
    if (cfg->family == PFX_FAMILY_GPT2)
        o |= pfx_mul_overflows(s->max_positions, C, &t) ||
             __builtin_add_overflow(total, t + 2 * C, &total);
    else
        o |= __builtin_add_overflow(total, C, &total);
    *out = total;
    return !o;
}

pfx_status pfx_model_config_parse(pfx_runtime *rt, const unsigned char *json, size_t size,
                                  const char *label, pfx_model_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    if (!label)
        label = "<memory>";
    cJSON *root = NULL;
    pfx_status st = pfx_json_parse_object(rt, label, json, size, &root);
    if (st != PFX_SUCCESS)
        return st;
    parse_ctx c = { rt, label, root };
    pfx_model_config m;
    memset(&m, 0, sizeof(m));
    const cJSON *type = get(root, "model_type");
    if (!cJSON_IsString(type)) {
        st = pfx_error(rt, PFX_ERROR_FORMAT,
                       "%s: the field 'model_type' is missing or not a string", label);
        goto out;
    }
    const char *name = type->valuestring;
    bool is_encoder_decoder;
    if ((st = flag(&c, "is_encoder_decoder", false, &is_encoder_decoder)))
        goto out;
    if (is_encoder_decoder) {
        st = pfx_error(rt, PFX_ERROR_UNSUPPORTED, "%s: 'is_encoder_decoder' true is not supported",
                       label);
        goto out;
    }
    if (strcmp(name, "gpt2") == 0) {
        m.family = PFX_FAMILY_GPT2;
        st = parse_gpt2(&c, &m);
    } else if (strcmp(name, "llama") == 0 || strcmp(name, "qwen2") == 0 ||
               strcmp(name, "mistral") == 0) {
        m.family = PFX_FAMILY_LLAMA;
        st = parse_llama(&c, name, &m);
    } else {
        st = pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                       "%s: model_type '%.64s' is not supported (gpt2, llama, qwen2, mistral are)",
                       label, name);
    }
    if (st == PFX_SUCCESS)
        st = parse_eos(&c, &m.shape);
    if (st != PFX_SUCCESS)
        goto out;
    if ((st = number(&c, root, "", "initializer_range", false, 0.02, &m.init_range)))
        goto out;
    /* training dropout: GPT2Config's defaults 0.1, LlamaConfig's (and Qwen2's) 0 */
    if (m.family == PFX_FAMILY_GPT2 &&
        ((st = probability(&c, "embd_pdrop", 0.1, &m.shape.embd_pdrop)) ||
         (st = probability(&c, "attn_pdrop", 0.1, &m.shape.attn_pdrop)) ||
         (st = probability(&c, "resid_pdrop", 0.1, &m.shape.resid_pdrop))))
        goto out;
    if (m.family == PFX_FAMILY_LLAMA &&
        (st = probability(&c, "attention_dropout", 0.0, &m.shape.attn_pdrop)))
        goto out;
    /* read for initialization only (the forward never uses it): an integer
     * or nothing */
    const cJSON *pad = get(root, "pad_token_id");
    m.has_pad = cJSON_IsNumber(pad) && pad->valuedouble == floor(pad->valuedouble) &&
                fabs(pad->valuedouble) < 9e15;
    m.pad_token = m.has_pad ? (long long)pad->valuedouble : 0;
    snprintf(m.shape.model_type, sizeof(m.shape.model_type), "%s", name);
    if (!count_parameters(&m, &m.shape.parameters)) {
        st = pfx_error(rt, PFX_ERROR_SIZE_OVERFLOW, "%s: the parameter count overflows size_t",
                       label);
        goto out;
    }
    *cfg = m;
out:
    cJSON_Delete(root);
    return st;
}

pfx_status pfx_model_config_read_text(pfx_runtime *rt, const char *dir, pfx_model_config *cfg,
                                      unsigned char **text, size_t *size)
{
    char *path = pfx_join_path(dir, "config.json");
    if (!path)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory");
    unsigned char *buf = NULL;
    size_t n = 0;
    pfx_status st = pfx_read_file(rt, path, CONFIG_MAX_BYTES, &buf, &n);
    if (st == PFX_SUCCESS)
        st = pfx_model_config_parse(rt, buf, n, path, cfg);
    if (st == PFX_SUCCESS && text) {
        *text = buf;
        *size = n;
        buf = NULL;
    }
    free(buf);
    free(path);
    return st;
}

pfx_status pfx_model_config_read(pfx_runtime *rt, const char *dir, pfx_model_config *cfg)
{
    return pfx_model_config_read_text(rt, dir, cfg, NULL, NULL);
}

pfx_status pfx_model_read_config(const char *dir, pfx_model_shape *shape)
{
    if (!dir || !shape)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "model_read_config: %s is NULL",
                         !dir ? "dir" : "shape");
    pfx_model_config cfg;
    pfx_status st = pfx_model_config_read(NULL, dir, &cfg);
    if (st == PFX_SUCCESS)
        *shape = cfg.shape;
    return st;
}
