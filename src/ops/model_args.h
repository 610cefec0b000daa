/*
 * Argument checks and launch helpers shared by the whole-model ops
 * (model_ops.h). Internal to src/ops.
 */
#ifndef PFX_OPS_MODEL_ARGS_H
#define PFX_OPS_MODEL_ARGS_H

#include "model_ops.h"

/* Element types a view may have. */
typedef enum pfx_mat_kind {
    PFX_MAT_F32 = 0,          /* activations, gradients, workspaces */
    PFX_MAT_WEIGHT = 1,       /* F32, F16 or BF16 storage */
    PFX_MAT_BLOCK_WEIGHT = 2, /* the same or Q8_0 (products, token embedding) */
} pfx_mat_kind;

/* Checks one view: its tensor non-NULL and of rt, the dtype per kind,
 * rows, cols >= 1, ld >= cols (ld is ignored for one row), and the last
 * element inside the tensor (overflow-checked). `op` and `name` make the
 * message ("layernorm: x ..."). */
pfx_status pfx_mat_check(pfx_runtime *rt, const char *op, const char *name, const pfx_mat *m,
                         pfx_mat_kind kind);

/* Rows and cols of b equal those of a. */
pfx_status pfx_mat_same_shape(pfx_runtime *rt, const char *op, const char *name_a, const pfx_mat *a,
                              const char *name_b, const pfx_mat *b);

/* A [n] vector view: n elements of one column or one row. */
pfx_status pfx_mat_check_vector(pfx_runtime *rt, const char *op, const char *name, const pfx_mat *m,
                                size_t n, pfx_mat_kind kind);

/* True when the element ranges of a and b (first to last element) share
 * storage. */
bool pfx_mat_overlap(const pfx_mat *a, const pfx_mat *b);
/* True when a and b are the same view (same storage, offset, shape, ld). */
bool pfx_mat_same(const pfx_mat *a, const pfx_mat *b);
/* PFX_ERROR_ALIASING unless out is the same view as in (when same_ok) or
 * does not overlap it. */
pfx_status pfx_mat_check_alias(pfx_runtime *rt, const char *op, const char *out_name,
                               const pfx_mat *out, const char *in_name, const pfx_mat *in,
                               bool same_ok);

/* Index step between consecutive elements of a vector view (1 for a column
 * of ld 1 or a row; ld for a column). */
size_t pfx_mat_vector_step(const pfx_mat *m);

/* Kernel arguments of a view: buffer, offset, ld and the storage code of
 * cl/common.cl's pfx_load (0 float, 1 half, 2 bfloat16) in `half`. */
typedef struct pfx_mat_args {
    cl_mem mem;
    cl_ulong offset, ld;
    cl_int half;
} pfx_mat_args;
pfx_mat_args pfx_mat_kernel_args(const pfx_mat *m);

/* The ids' entries [first, first + n) (n >= 1) are inside the buffer and
 * each is in [0, limit) (or PFX_LABEL_IGNORE when allow_ignore); *counted
 * (may be NULL) receives how many are not PFX_LABEL_IGNORE. */
pfx_status pfx_ids_check(pfx_runtime *rt, const char *op, const char *name, const pfx_ids *ids,
                         size_t first, size_t n, size_t limit, bool allow_ignore, size_t *counted);

#endif
