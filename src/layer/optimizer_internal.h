/* The optimizer's state shared by the AdamW step (optimizer.c) and its state
 * files (optimizer_state.c). Not installed. */
#ifndef PFX_OPTIMIZER_INTERNAL_H
#define PFX_OPTIMIZER_INTERNAL_H

#include "internal.h"

#define OPT_NAME_MAX 128

typedef struct opt_param {
    pfx_tensor *param, *grad;
    unsigned group;
    char *name;
    pfx_tensor *m, *v; /* moments, the parameter's shape (accounted) */
    size_t bytes;      /* of m (and of v) */
    uint64_t step;
    cl_uint partial_offset; /* first slot of this gradient's partials */
    size_t partial_groups;  /* work-groups of its sum-of-squares launch */
} opt_param;

struct pfx_optimizer {
    pfx_runtime *rt;
    pfx_optimizer_params params;
    pfx_optimizer_group_params *groups;
    size_t group_count;
    opt_param *items;
    size_t count, cap;
    size_t partial_total; /* partial slots the registered gradients need */
    cl_mem partial;
    size_t partial_cap; /* slots allocated */
    cl_mem status;      /* 3 floats: norm, scale, skip */
    uint64_t step;
};

#endif
