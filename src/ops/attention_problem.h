/*
 * One attention call, validated: dimensions, per-tensor strides for the
 * chosen layouts, storage types, and the per-head and per-item parameters
 * that the kernels read. Shared by the forward, the backward, the stats and
 * the probability map, so every entry point checks exactly the same things
 * before it enqueues anything.
 */
#ifndef PFX_OPS_ATTENTION_PROBLEM_H
#define PFX_OPS_ATTENTION_PROBLEM_H

#include "internal.h"

/* Element strides of a [B, heads, rows, D] view (the D stride is 1). */
typedef struct pfx_attn_strides {
    cl_ulong batch;
    cl_ulong head;
    cl_ulong row;
} pfx_attn_strides;

typedef struct pfx_attn_problem {
    size_t B, H, Hkv, N, M, P, D;
    size_t group;        /* H / Hkv: query heads per kv head */
    size_t bank_entries; /* T for a bank prefix, 0 for a shared prefix */
    bool causal;
    float scale; /* resolved (1/sqrt(D) by default) */

    pfx_layout q_layout, kv_layout, o_layout;
    pfx_attn_strides q, kv, o; /* Q/dQ, K/V/dK/dV, O/dO */
    pfx_attn_strides prefix;   /* batch = bank entry stride (0 when shared) */
    bool q_half, k_half, v_half, pk_half, pv_half;
    bool q_bf16, k_bf16, v_bf16, pk_bf16, pv_bf16; /* the forward's inputs only */

    /* Host copies of the kernel parameters (owned, see pfx_attn_problem_free):
     * head_scale[h] = c_h = scale * gamma(r g_h); dim_factor[h*D + d] = 1 + G_hd
     * (NULL: no structured gain); dscale_dgain[h] = d c_h / d g_h
     * = scale * r * gamma'(r g_h) (0 with gain off), so that
     * dg_h = dscale_dgain[h] * sum_{b,i,j} dz_ij s_ij with s_ij the unscaled
     * logit sum_d q_id (1 + G_hd) k~_jd: exact also where gamma is 0. */
    float *head_scale;
    float *dim_factor;
    float *dscale_dgain;
    /* Per-item gains (desc.item_*): head_scale [B * H] and dim_factor
     * [B * H * D] hold every item's parameters (item b's at b * H and
     * b * H * D); dscale_dgain stays that of the per-call gain (only the
     * forward takes per-item gains). */
    bool item_gains;
    /* item_meta = [q_len[B], kv_len[B], bank_index[B]] */
    cl_int *item_meta;
    /* desc.gain_tensor with a gain mode: head_scale and dscale_dgain are
     * then computed on the device when the parameters are uploaded. */
    const pfx_tensor *gain_dev;
    pfx_gain_mode gain_mode;
    float gain_ramp;
    /* desc.dropout and its stream (0: none) */
    float dropout;
    pfx_dropout_stream drop;
} pfx_attn_problem;

/* Dropout as the kernels take it: the stream's words, threshold, scale,
 * the first item and whether it is on (a kernel draws no mask when off). */
typedef struct pfx_attn_drop_args {
    cl_uint4 stream;
    cl_uint threshold;
    cl_float scale;
    cl_uint first_item;
    cl_int on;
} pfx_attn_drop_args;
pfx_attn_drop_args pfx_attn_drop_args_of(const pfx_attn_problem *p);

/* PFX_ERROR_UNSUPPORTED when the call asks for dropout (the statistics and
 * the probability map describe the undropped softmax). */
pfx_status pfx_attn_problem_no_dropout(pfx_runtime *rt, const char *op, const pfx_attn_problem *p);

/* Adds -DPFX_ATTN_DROPOUT=1 to a kernel's options when p drops: the GPU
 * path compiles its dropout in only then (cl/attention_fwd.cl). */
void pfx_attn_dropout_option(const pfx_attn_problem *p, char *options, size_t cap);

/* PFX_ERROR_UNSUPPORTED when the call has what only the forward computes:
 * an item with bank entry -1 (no prefix) or per-item gains;
 * PFX_ERROR_DTYPE_MISMATCH for a bfloat16 input (only the forward reads it). */
pfx_status pfx_attn_problem_forward_only(pfx_runtime *rt, const char *op,
                                         const pfx_attn_problem *p);

/* Validates desc and the input tensors; op names the entry point in messages.
 * On success the problem owns host memory: release it with pfx_attn_problem_free. */

pfx_status pfx_attn_problem_init(pfx_runtime *rt, const char *op, const pfx_attention_desc *desc,
                                 const pfx_attention_inputs *in, pfx_attn_problem *out);
void pfx_attn_problem_free(pfx_attn_problem *p);

/* Shape checks of the other tensors a call takes; name is the argument's name. */
typedef enum pfx_attn_role {
    PFX_ATTN_LIKE_Q,       /* [B,H,N,D] or [B,N,H,D] by q_layout */
    PFX_ATTN_LIKE_O,       /* same shape, by o_layout */
    PFX_ATTN_LIKE_KV,      /* [B,Hkv,M,D] or [B,M,Hkv,D] by kv_layout */
    PFX_ATTN_LIKE_PREFIX,  /* [Hkv,P,D] or [T,Hkv,P,D] as the inputs' prefix */
    PFX_ATTN_LSE,          /* [B,H,N] */
    PFX_ATTN_PER_HEAD,     /* [H] */
    PFX_ATTN_PER_HEAD_DIM, /* [H,D] */
} pfx_attn_role;

/* Checks runtime, shape and dtype (f32_only: float32 storage required). */
pfx_status pfx_attn_check_tensor(pfx_runtime *rt, const char *op, const pfx_attn_problem *p,
                                 const pfx_tensor *t, const char *name, pfx_attn_role role,
                                 bool f32_only);

/* PFX_ERROR_ALIASING when out is one of the inputs (or another output). */
pfx_status pfx_attn_check_alias(pfx_runtime *rt, const char *op, const pfx_tensor *out,
                                const char *name, const pfx_tensor *const *others,
                                const char *const *other_names, size_t count);

/* Uploads head_scale (+ dim_factor) as one float buffer and item_meta as an
 * int buffer; both are workspace released with pfx_attn_params_release. */
typedef struct pfx_attn_params {
    cl_mem head; /* float [H] c_h, then [H*D] (1 + G_hd) when structured; with
                    * per-item gains that block once per item */
    size_t head_bytes;
    cl_ulong head_item_stride; /* floats between items' blocks: 0 for one gain per call */
    cl_mem items;              /* int [3*B] */
    size_t items_bytes;
} pfx_attn_params;

pfx_status pfx_attn_params_upload(pfx_runtime *rt, const pfx_attn_problem *p, pfx_attn_params *out);
void pfx_attn_params_release(pfx_runtime *rt, pfx_attn_params *params);

/* The float [H] buffer of dscale_dgain for the backward: uploaded from the
 * host copy, or, with device gains, the one pfx_attn_params_upload wrote. */
pfx_status pfx_attn_dscale(pfx_runtime *rt, const pfx_attn_problem *p, size_t bytes, cl_mem *out);

#endif
