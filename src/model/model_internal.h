/* Internal interface of whole models (src/model): the parsed config.json
 * and the table of tensor names per family. Not installed. */
#ifndef PFX_MODEL_INTERNAL_H
#define PFX_MODEL_INTERNAL_H

#include "internal.h"
#include "model_ops.h"
#include "prefixcl/model.h"

typedef enum pfx_model_family {
    PFX_FAMILY_GPT2 = 0,  /* LayerNorm, Conv1D [in, out], learned positions */
    PFX_FAMILY_LLAMA = 1, /* RMSNorm, Linear [out, in], RoPE, SwiGLU */
} pfx_model_family;

typedef struct pfx_model_config {
    pfx_model_shape shape;
    pfx_model_family family;
    pfx_activation act; /* GPT-2's MLP activation (Llama: SiLU inside SwiGLU) */
    double norm_eps;
    bool qkv_bias;         /* q, k, v projections have biases (GPT-2, qwen2) */
    float attn_scale;      /* 0: 1/sqrt(D); GPT-2 with scale_attn_weights false: 1 */
    pfx_rope_params rope;  /* Llama family */
    size_t sliding_window; /* 0: none (every key visible) */
    double init_range; /* initializer_range (default 0.02): pfx_model_init's standard deviation */
    bool has_pad;      /* pad_token_id is an integer (the Llama family's padding_idx) */
    long long pad_token;
} pfx_model_config;

/* Parses and checks a config.json held in memory; `label` names it in
 * messages. PFX_ERROR_FORMAT (malformed, a missing or mistyped field),
 * PFX_ERROR_UNSUPPORTED (a model_type or field this library does not
 * compute), PFX_ERROR_INVALID_SHAPE (sizes that do not agree),
 * PFX_ERROR_SIZE_OVERFLOW (a parameter count past size_t). */
pfx_status pfx_model_config_parse(pfx_runtime *rt, const unsigned char *json, size_t size,
                                  const char *label, pfx_model_config *cfg);

/* Reads dir/config.json and parses it. */
pfx_status pfx_model_config_read(pfx_runtime *rt, const char *dir, pfx_model_config *cfg);
/* The same, keeping the file's bytes in *text (*size of them; the caller
 * frees it): what pfx_model_save writes back. */
pfx_status pfx_model_config_read_text(pfx_runtime *rt, const char *dir, pfx_model_config *cfg,
                                      unsigned char **text, size_t *size);

/* ---- the table of tensor names ---- */

/* What a checkpoint tensor is to the forward. */
typedef enum pfx_weight_role {
    PFX_W_EMBED = 0, /* [V, C] */
    PFX_W_POS,       /* [max positions, C] (GPT-2) */
    PFX_W_NORM_F,    /* [C] final norm weight */
    PFX_W_NORM_F_B,  /* [C] final norm bias (LayerNorm) */
    PFX_W_LM_HEAD,   /* [V, C] when not tied */
    /* per layer */
    PFX_W_NORM1,
    PFX_W_NORM1_B,
    PFX_W_NORM2,
    PFX_W_NORM2_B,
    PFX_W_QKV,
    PFX_W_QKV_B, /* fused: GPT-2 c_attn [C, 3C], [3C]; the Llama family's
                                      q | k | v rows [QD + 2 KVD, C] (and biases), stacked at load */
    PFX_W_Q,
    PFX_W_K,
    PFX_W_V, /* separate (Llama [out, in] checkpoints; released once fused) */
    PFX_W_Q_B,
    PFX_W_K_B,
    PFX_W_V_B,
    PFX_W_O,
    PFX_W_O_B,
    PFX_W_UP,
    PFX_W_UP_B, /* GPT-2 c_fc / Llama up_proj */
    PFX_W_GATE, /* Llama gate_proj */
    PFX_W_DOWN,
    PFX_W_DOWN_B, /* GPT-2 mlp.c_proj / Llama down_proj */
    PFX_W_ROLE_COUNT
} pfx_weight_role;
#define PFX_W_FIRST_LAYER_ROLE PFX_W_NORM1

/* One tensor a model of `cfg` holds: its checkpoint name, shape and role. */
typedef struct pfx_weight_spec {
    pfx_weight_role role;
    size_t layer; /* for per-layer roles */
    char name[96];
    unsigned ndim; /* 1 or 2 */
    size_t shape[2];
    const char *field[2]; /* the config.json field that sets each size */
} pfx_weight_spec;

/* How many tensors a model of `cfg` has: fixed + per_layer * layers. */
void pfx_weight_count(const pfx_model_config *cfg, size_t *fixed, size_t *per_layer);

/* The tensors of a model of `cfg`, in checkpoint order (embeddings, then
 * layer by layer, then the final norm and head); *count set. The caller
 * frees *specs. Names are those of save_pretrained (GPT-2 with
 * "transformer." when `gpt2_prefix`). */
pfx_status pfx_weight_specs(pfx_runtime *rt, const pfx_model_config *cfg, bool gpt2_prefix,
                            pfx_weight_spec **specs, size_t *count);

/* Names a checkpoint may hold that are no weights (causal-mask buffers of
 * old GPT-2 files, rotary inv_freq buffers): skipped. */
bool pfx_weight_name_ignored(const char *name);

/* ---- the loaded model ---- */

/* Workspace tensors (float32), rows R = max_batch * max_tokens. */
enum {
    WS_LN,  /* [R, C] norm output */
    WS_A,   /* [R, C] residual stream after the attention */
    WS_Q,   /* [R, H*D] */
    WS_K,   /* [R, Hkv*D] */
    WS_V,   /* [R, Hkv*D] */
    WS_O,   /* [R, H*D] attention output */
    WS_LSE, /* [B, H, N] */
    WS_MEAN1,
    WS_RSTD1,
    WS_MEAN2,
    WS_RSTD2,
    WS_MEANF,
    WS_RSTDF, /* [R] norm statistics */
    WS_M0,    /* [R, I] GPT-2 c_fc output / Llama gate */
    WS_M1,    /* [R, I] GPT-2 activation / Llama up */
    WS_M2,    /* [R, I] Llama SwiGLU output */
    WS_DH0,
    WS_DH1, /* [R, C] gradients of the residual stream, alternating */
    WS_DLN, /* [R, C] gradient at a norm output */
    WS_DA,  /* [R, C] */
    WS_DQ,
    WS_DK,
    WS_DV,
    WS_DO,
    WS_DM,      /* [R, I] */
    WS_LOGITS,  /* [chunk, V] */
    WS_ROWLOSS, /* [R] */
    WS_CONV,    /* half storage: float32 blocks of a weight for SGEMM */
    WS_QKV, /* [R, QD + 2 KVD] the fused projection's output (forward), its gradient (backward) */
    WS_COUNT
};

/* The per-part times of prefixcl/model.h's profile. */
typedef struct pfx_model_profile {
    bool on;
    double ms[PFX_MODEL_PART_COUNT];
} pfx_model_profile;

/* One trainable weight (weights_list.c): its name, role, block (SIZE_MAX:
 * global) and tensor (owned by tensors[] or fused_qkv[]). */
typedef struct pfx_model_weight_entry {
    char name[96];
    pfx_weight_role role;
    size_t layer;
    pfx_tensor *t;
} pfx_model_weight_entry;

struct pfx_model {
    pfx_runtime *rt;
    pfx_model_config cfg;
    pfx_model_params p;
    pfx_weight_spec *specs;
    size_t spec_count;
    pfx_tensor **tensors;   /* [spec_count], owned (Llama q, k, v: NULL once fused) */
    pfx_tensor **fused_qkv; /* [L][2] Llama family: q | k | v weights and biases, owned */
    const pfx_tensor *global[PFX_W_FIRST_LAYER_ROLE];
    const pfx_tensor **layer_w; /* [L][PFX_W_ROLE_COUNT - PFX_W_FIRST_LAYER_ROLE] */
    pfx_tensor *inv_freq;       /* [D/2] (Llama family) */
    unsigned char *config_text; /* config.json as read (pfx_model_save writes it back) */
    size_t config_size;
    pfx_model_weight_entry *weights; /* [weight_count]: model.h's weight list */
    size_t weight_count;
    size_t *weight_at; /* the entry of (layer, role), or SIZE_MAX */
    size_t contexts;   /* open contexts over the model */
    bool released;     /* pfx_model_destroy came while contexts were open: the last frees it */
    bool conv1d_held_linear; /* GPT-2 in Q8_0: Conv1D weights held [out, in] (model.c) */
};

/* Whether weight role r is held transposed from its checkpoint: GPT-2's
 * Conv1D [in, out] as [out, in] when the model is Q8_0, so that a block of
 * 32 lies along the reduction of its products, as llama.cpp holds it (the
 * few-row kernels read such blocks at three times the rate of blocks across
 * the outputs). */
static inline bool pfx_model_held_transposed(const pfx_model *m, pfx_weight_role r)
{
    return m->conv1d_held_linear &&
           (r == PFX_W_QKV || r == PFX_W_O || r == PFX_W_UP || r == PFX_W_DOWN);
}

/* The workspace of the calls (context.c): everything a call writes. */
struct pfx_context {
    pfx_model *model;
    pfx_runtime *rt; /* the model's */
    pfx_context_params p;
    size_t chunk_rows;
    pfx_tensor **hidden; /* L + 1 residual streams [R, C]: each block's input */
    pfx_tensor *ws[WS_COUNT];
    pfx_ids *ids;         /* [R] */
    pfx_ids *labels;      /* [R], shifted */
    pfx_ids *positions;   /* [R] position ids of a serving step (learned positions) */
    pfx_tensor **kept;    /* [L][PFX_KEPT_COUNT] without p.recompute */
    float *dim_scaled;    /* [H * D]: r G of the layer being run (block.c) */
    pfx_tensor *dim_grad; /* [H, D]: the attention's d/d(r G), made on first use */
    pfx_model_profile prof;
    const pfx_model_dropout *drop; /* the training pass's dropout, NULL otherwise (dropout.c) */
    size_t drop_tokens;            /* that pass's N: rows are items of N tokens */
};

/* Frees the model itself (pfx_model_destroy, or the last context's destroy
 * after it). */
void pfx_model_free(pfx_model *m);

/* Shared by loading (model.c) and drawing (model_draw.c): the arguments of
 * a constructor (fn names it in messages), params checked into *p, the
 * configuration against the device's limits, the model without weights,
 * the Llama family's q, k, v stacked, [rows, cols] host values written
 * transposed into t. */
pfx_status pfx_model_begin(pfx_runtime *rt, const char *fn, const char *dir, pfx_model **out);
pfx_status pfx_model_check_params(pfx_runtime *rt, const pfx_model_params *in, pfx_model_params *p);
pfx_status pfx_model_check_fits(pfx_runtime *rt, const char *dir, const pfx_model_config *cfg,
                                const pfx_model_params *p);
pfx_status pfx_model_create_empty(pfx_runtime *rt, const pfx_model_config *cfg,
                                  const pfx_model_params *p, bool gpt2_prefix,
                                  pfx_weight_spec *specs, size_t spec_count, pfx_model **out);
pfx_status pfx_model_fuse_qkv(pfx_model *m);
pfx_status pfx_model_write_transposed(pfx_runtime *rt, const float *src, size_t rows, size_t cols,
                                      pfx_tensor *t);

/* The config.json text pfx_model_save writes, replaced by `text` (size
 * bytes, malloc'ed: the model owns it from here on). */
void pfx_model_set_config_text(pfx_model *m, unsigned char *text, size_t size);

/* pfx_model_init with dir/config.json's text given (size bytes) instead of
 * read: the model saves that text as its config.json. */
pfx_status pfx_model_init_text(pfx_runtime *rt, const char *dir, const unsigned char *text,
                               size_t size, const pfx_model_params *params, uint64_t seed,
                               pfx_model **out);

/* Builds weights and weight_at once the tensors are final (after the q, k,
 * v stacking). */
pfx_status pfx_model_weights_index(pfx_model *m);
/* Index of the weight of `role` in block `layer` (any layer for a global
 * role), or SIZE_MAX when the model has none. */
size_t pfx_model_weight_index(const pfx_model *m, size_t layer, pfx_weight_role role);

/* The activations a block's backward reads, kept per layer unless
 * the context's recompute: A, Q, K, V, O, LSE, the four norm statistics, M0 and
 * (Llama family) M1. */
#define PFX_KEPT_COUNT 12
static inline int pfx_model_kept_slot(const pfx_context *cx, int slot)
{
    static const int kept[WS_COUNT] = {
        [WS_LN] = -1,     [WS_A] = 0,        [WS_Q] = 1,      [WS_K] = 2,     [WS_V] = 3,
        [WS_O] = 4,       [WS_LSE] = 5,      [WS_MEAN1] = 6,  [WS_RSTD1] = 7, [WS_MEAN2] = 8,
        [WS_RSTD2] = 9,   [WS_MEANF] = -1,   [WS_RSTDF] = -1, [WS_M0] = 10,   [WS_M1] = 11,
        [WS_M2] = -1,     [WS_DH0] = -1,     [WS_DH1] = -1,   [WS_DLN] = -1,  [WS_DA] = -1,
        [WS_DQ] = -1,     [WS_DK] = -1,      [WS_DV] = -1,    [WS_DO] = -1,   [WS_DM] = -1,
        [WS_LOGITS] = -1, [WS_ROWLOSS] = -1, [WS_CONV] = -1,  [WS_QKV] = -1,
    };
    if (cx->p.recompute || (slot == WS_M1 && cx->model->cfg.family == PFX_FAMILY_GPT2))
        return -1; /* GPT-2's activation output is not read by the backward */
    return kept[slot];
}

/* Weight of `role` in layer `l` (NULL when the family has none). */
static inline const pfx_tensor *pfx_model_w(const pfx_model *m, size_t l, pfx_weight_role role)
{
    if (role < PFX_W_FIRST_LAYER_ROLE)
        return m->global[role];
    return m->layer_w[l * (PFX_W_ROLE_COUNT - PFX_W_FIRST_LAYER_ROLE) +
                      (role - PFX_W_FIRST_LAYER_ROLE)];
}

/* ---- block pieces (block.c, forward.c), shared with the serving step (serve_step.c) ----
 * Rows are the R = B * N rows of the workspace; hidden[l] is block l's input. */

/* Norm 1 of hidden[l] into WS_LN and the q, k, v projections (one product
 * into WS_QKV, split with the biases added, no RoPE) into WS_Q, WS_K, WS_V. */
pfx_status pfx_model_block_qkv(pfx_context *cx, size_t l, size_t R);
/* With the attention output in WS_O: the residual and output projection into
 * WS_A, norm 2 and the MLP; with `output` the block's result in hidden[l + 1]. */
pfx_status pfx_model_block_mlp(pfx_context *cx, size_t l, size_t R, bool output);
/* The final norm of hidden[L] into WS_LN. */
pfx_status pfx_model_final_norm(pfx_context *cx, size_t R);
/* logits rows [0, rows) = LM head of x rows [0, rows) (F32 [rows, C]). */
pfx_status pfx_model_head(pfx_context *cx, const pfx_tensor *x, size_t rows, pfx_tensor *logits);
/* Workspace tensor `slot` of block l (its own one while activations are
 * kept for the backward, else the shared one). */
pfx_tensor *pfx_model_ws(const pfx_context *cx, size_t l, int slot);

/* After the checks of every model call (pfx_model_forward's) and a layer in
 * range: the embeddings and the blocks before `layer`, then block `layer` and
 * `visit` with its attention problem (its description and Q, K, V, prefix as
 * attention.h reads them; valid during the call). With PFX_MODEL_EVERY_LAYER,
 * every block in turn, each visited after it runs (one forward pass). */
#define PFX_MODEL_EVERY_LAYER SIZE_MAX
typedef pfx_status (*pfx_model_attention_visit)(pfx_runtime *rt, size_t layer,
                                                const pfx_attention_desc *desc,
                                                const pfx_attention_inputs *in, void *arg);
pfx_status pfx_model_layer_attention(pfx_context *cx, const char *fn, const pfx_model_batch *batch,
                                     const pfx_model_prefix *prefix, size_t layer,
                                     pfx_model_attention_visit visit, void *arg);

#endif
