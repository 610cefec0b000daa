/* Dropout masks on the host side (cl/common.cl draws them): the threshold
 * and scale of a probability, the stream as kernel words, the tag of a
 * model site, and the elementwise op of the embeddings and residual
 * branches. Internal to the library. */
#ifndef PFX_OPS_DROPOUT_H
#define PFX_OPS_DROPOUT_H

#include "model_ops.h"

/* What a model's mask is for (the low bits of the tag). */
typedef enum pfx_dropout_site {
    PFX_DROP_EMBED = 0,    /* the embeddings (GPT-2: wte + wpe) */
    PFX_DROP_ATTN = 1,     /* the attention probabilities */
    PFX_DROP_ATTN_OUT = 2, /* the attention output projection, before the residual add */
    PFX_DROP_MLP_OUT = 3,  /* the MLP output, before the residual add */
} pfx_dropout_site;

#define PFX_DROPOUT_MAX_LAYERS 16384u
#define PFX_DROPOUT_MAX_MICRO  65536u

/* The tag of (micro-batch, layer, site): micro << 16 | layer << 2 | site. */
static inline uint32_t pfx_dropout_tag(uint32_t micro, size_t layer, pfx_dropout_site site)
{
    return micro << 16 | (uint32_t)layer << 2 | (uint32_t)site;
}

/* floor(p 2^32): an element is kept when its word is at least this. */
uint32_t pfx_dropout_threshold(float p);
/* 1/(1-p) as float, the kept elements' factor. */
float pfx_dropout_scale(float p);
/* p is a probability dropout takes: finite, in [0, 1). */
bool pfx_dropout_valid(float p);
/* The stream as the kernels take it: (seed low, seed high, step, tag). */
cl_uint4 pfx_dropout_words(const pfx_dropout_stream *s);

/* out = base + dropout(x) (base NULL: 0) over [R, C] F32 views, R = items
 * x tokens rows: row r is element row first_item x tokens + r of the
 * stream, column c its col. out may be the same view as x or base. */
pfx_status pfx_op_dropout(pfx_runtime *rt, float p, const pfx_dropout_stream *s, size_t tokens,
                          pfx_mat x, const pfx_mat *base, pfx_mat out);

#endif
