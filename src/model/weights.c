/* The tensor names of each family, as save_pretrained writes them: the one
 * place where the architectures differ in what they hold (llama.cpp's
 * approach); the forward reads roles, never names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* Symbolic sizes of the table, resolved against a config. */
typedef enum dim { D_NONE = 0, D_C, D_QD, D_KVD, D_QKV, D_I, D_V, D_POS } dim;
/* When an entry exists. */
typedef enum cond { ALWAYS = 0, IF_QKV_BIAS, IF_UNTIED } cond;

typedef struct arch_entry {
    pfx_weight_role role;
    const char *name; /* "%zu" is the layer for per-layer roles */
    dim d0, d1;
    cond when;
} arch_entry;

/* GPT-2 (modeling_gpt2.py): Conv1D weights [in, out]; c_attn fuses q | k | v
 * along the output axis. Names as in GPT2Model ("transformer." in front when
 * saved from GPT2LMHeadModel), lm_head only when not tied. */
static const arch_entry gpt2_table[] = {
    { PFX_W_EMBED, "wte.weight", D_V, D_C, ALWAYS },
    { PFX_W_POS, "wpe.weight", D_POS, D_C, ALWAYS },
    { PFX_W_NORM1, "h.%zu.ln_1.weight", D_C, D_NONE, ALWAYS },
    { PFX_W_NORM1_B, "h.%zu.ln_1.bias", D_C, D_NONE, ALWAYS },
    { PFX_W_QKV, "h.%zu.attn.c_attn.weight", D_C, D_QKV, ALWAYS },
    { PFX_W_QKV_B, "h.%zu.attn.c_attn.bias", D_QKV, D_NONE, ALWAYS },
    { PFX_W_O, "h.%zu.attn.c_proj.weight", D_QD, D_C, ALWAYS },
    { PFX_W_O_B, "h.%zu.attn.c_proj.bias", D_C, D_NONE, ALWAYS },
    { PFX_W_NORM2, "h.%zu.ln_2.weight", D_C, D_NONE, ALWAYS },
    { PFX_W_NORM2_B, "h.%zu.ln_2.bias", D_C, D_NONE, ALWAYS },
    { PFX_W_UP, "h.%zu.mlp.c_fc.weight", D_C, D_I, ALWAYS },
    { PFX_W_UP_B, "h.%zu.mlp.c_fc.bias", D_I, D_NONE, ALWAYS },
    { PFX_W_DOWN, "h.%zu.mlp.c_proj.weight", D_I, D_C, ALWAYS },
    { PFX_W_DOWN_B, "h.%zu.mlp.c_proj.bias", D_C, D_NONE, ALWAYS },
    { PFX_W_NORM_F, "ln_f.weight", D_C, D_NONE, ALWAYS },
    { PFX_W_NORM_F_B, "ln_f.bias", D_C, D_NONE, ALWAYS },
    { PFX_W_LM_HEAD, "lm_head.weight", D_V, D_C, IF_UNTIED },
};

/* Llama family (modeling_llama.py, qwen2, mistral): Linear weights [out, in]. */
static const arch_entry llama_table[] = {
    { PFX_W_EMBED, "model.embed_tokens.weight", D_V, D_C, ALWAYS },
    { PFX_W_NORM1, "model.layers.%zu.input_layernorm.weight", D_C, D_NONE, ALWAYS },
    { PFX_W_Q, "model.layers.%zu.self_attn.q_proj.weight", D_QD, D_C, ALWAYS },
    { PFX_W_Q_B, "model.layers.%zu.self_attn.q_proj.bias", D_QD, D_NONE, IF_QKV_BIAS },
    { PFX_W_K, "model.layers.%zu.self_attn.k_proj.weight", D_KVD, D_C, ALWAYS },
    { PFX_W_K_B, "model.layers.%zu.self_attn.k_proj.bias", D_KVD, D_NONE, IF_QKV_BIAS },
    { PFX_W_V, "model.layers.%zu.self_attn.v_proj.weight", D_KVD, D_C, ALWAYS },
    { PFX_W_V_B, "model.layers.%zu.self_attn.v_proj.bias", D_KVD, D_NONE, IF_QKV_BIAS },
    { PFX_W_O, "model.layers.%zu.self_attn.o_proj.weight", D_C, D_QD, ALWAYS },
    { PFX_W_NORM2, "model.layers.%zu.post_attention_layernorm.weight", D_C, D_NONE, ALWAYS },
    { PFX_W_GATE, "model.layers.%zu.mlp.gate_proj.weight", D_I, D_C, ALWAYS },
    { PFX_W_UP, "model.layers.%zu.mlp.up_proj.weight", D_I, D_C, ALWAYS },
    { PFX_W_DOWN, "model.layers.%zu.mlp.down_proj.weight", D_C, D_I, ALWAYS },
    { PFX_W_NORM_F, "model.norm.weight", D_C, D_NONE, ALWAYS },
    { PFX_W_LM_HEAD, "lm_head.weight", D_V, D_C, IF_UNTIED },
};

static size_t resolve(const pfx_model_config *cfg, dim d)
{
    const pfx_model_shape *s = &cfg->shape;
    switch (d) {
    case D_C: return s->hidden;
    case D_QD: return s->heads * s->head_dim;
    case D_KVD: return s->kv_heads * s->head_dim;
    case D_QKV: return (s->heads + 2 * s->kv_heads) * s->head_dim;
    case D_I: return s->intermediate;
    case D_V: return s->vocab;
    case D_POS: return s->max_positions;
    default: return 0;
    }
}

/* The config.json field that sets a size, as the family names it. */
static const char *field_of(const pfx_model_config *cfg, dim d)
{
    const bool gpt2 = cfg->family == PFX_FAMILY_GPT2;
    switch (d) {
    case D_C: return gpt2 ? "n_embd" : "hidden_size";
    case D_QD: return gpt2 ? "n_embd" : "num_attention_heads x head_dim";
    case D_KVD: return gpt2 ? "n_embd" : "num_key_value_heads x head_dim";
    case D_QKV:
        return gpt2 ? "3 x n_embd" : "(num_attention_heads + 2 num_key_value_heads) x head_dim";
    case D_I: return gpt2 ? "n_inner" : "intermediate_size";
    case D_V: return "vocab_size";
    case D_POS: return gpt2 ? "n_positions" : "max_position_embeddings";
    default: return "";
    }
}

static bool present(const pfx_model_config *cfg, cond when)
{
    switch (when) {
    case IF_QKV_BIAS: return cfg->qkv_bias;
    case IF_UNTIED: return !cfg->shape.tied_embeddings;
    default: return true;
    }
}

static const arch_entry *table_of(const pfx_model_config *cfg, size_t *n)
{
    const bool gpt2 = cfg->family == PFX_FAMILY_GPT2;
    *n = gpt2 ? sizeof(gpt2_table) / sizeof(gpt2_table[0])
              : sizeof(llama_table) / sizeof(llama_table[0]);
    return gpt2 ? gpt2_table : llama_table;
}

void pfx_weight_count(const pfx_model_config *cfg, size_t *fixed, size_t *per_layer)
{
    size_t n;
    const arch_entry *table = table_of(cfg, &n);
    *fixed = *per_layer = 0;
    for (size_t i = 0; i < n; i++)
        if (present(cfg, table[i].when))
            (*(table[i].role >= PFX_W_FIRST_LAYER_ROLE ? per_layer : fixed))++;
}

pfx_status pfx_weight_specs(pfx_runtime *rt, const pfx_model_config *cfg, bool gpt2_prefix,
                            pfx_weight_spec **specs, size_t *count)
{
    const bool gpt2 = cfg->family == PFX_FAMILY_GPT2;
    size_t n;
    const arch_entry *table = table_of(cfg, &n);
    const size_t L = cfg->shape.layers;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += table[i].role >= PFX_W_FIRST_LAYER_ROLE ? L : 1;
    pfx_weight_spec *out = calloc(cap, sizeof(*out));
    if (!out)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "model: host memory for %zu tensor names",
                         cap);
    size_t k = 0;
    /* checkpoint order: globals before the layers stay first, the final
     * norm and head last */
    for (int pass = 0; pass < 3; pass++) {
        for (size_t i = 0; i < n; i++) {
            const arch_entry *e = &table[i];
            bool per_layer = e->role >= PFX_W_FIRST_LAYER_ROLE;
            bool head =
                e->role == PFX_W_NORM_F || e->role == PFX_W_NORM_F_B || e->role == PFX_W_LM_HEAD;
            if ((per_layer ? 1 : head ? 2 : 0) != pass)
                continue;
            if (!present(cfg, e->when))
                continue;
            for (size_t l = 0; l < (per_layer ? L : 1); l++) {
                pfx_weight_spec *s = &out[k++];
                s->role = e->role;
                s->layer = l;
                const char *pre =
                    gpt2 && gpt2_prefix && e->role != PFX_W_LM_HEAD ? "transformer." : "";
                char local[80];
                snprintf(local, sizeof(local), e->name, l);
                snprintf(s->name, sizeof(s->name), "%s%s", pre, local);
                s->shape[0] = resolve(cfg, e->d0);
                s->shape[1] = resolve(cfg, e->d1);
                s->ndim = e->d1 == D_NONE ? 1 : 2;
                s->field[0] = field_of(cfg, e->d0);
                s->field[1] = field_of(cfg, e->d1);
            }
        }
    }
    *specs = out;
    *count = k;
    return PFX_SUCCESS;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

bool pfx_weight_name_ignored(const char *name)
{
    /* GPT-2's causal-mask buffers (files of transformers < 4.31), Llama's
     * rotary buffers: constants the forward computes itself */
    return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") ||
           ends_with(name, ".rotary_emb.inv_freq");
}
