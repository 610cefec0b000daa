/* safetensors: tensors of a parsed file into device tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors_internal.h"

static pfx_status find_for_load(pfx_runtime *rt, const pfx_safetensors *f, const char *name,
                                size_t *index)
{
    long i = pfx_safetensors_find(f, name);
    if (i < 0)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "no tensor named " NAME_FMT " in the file",
                         name);
    const st_entry *e = &f->entries[i];
    if (!pfx_st_is_float(e->dtype))
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                         "tensor " NAME_FMT " is %s, not a float type", name,
                         pfx_st_dtype_name(e->dtype));
    *index = (size_t)i;
    return PFX_SUCCESS;
}

static pfx_status upload(pfx_runtime *rt, const pfx_safetensors *f, size_t index, pfx_tensor *dst)
{
    const st_entry *e = &f->entries[index];
    float *host = malloc(e->numel * sizeof(float));
    if (!host)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "loading " NAME_FMT ": host memory", e->name);
    pfx_status st = pfx_st_read_f32_rt(rt, f, index, host, e->numel);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_write(dst, 0, e->numel, host);
    free(host);
    return st;
}

pfx_status pfx_safetensors_load_tensor(pfx_runtime *rt, const pfx_safetensors *f, const char *name,
                                       pfx_tensor *dst)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_load_tensor: rt is NULL");
    if (!f || !name || !dst)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_load_tensor: %s is NULL",
                         !f      ? "f"
                         : !name ? "name"
                                 : "dst");
    if (dst->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH,
                         "loading " NAME_FMT ": dst belongs to another runtime", name);
    size_t index = 0;
    pfx_status st = find_for_load(rt, f, name, &index);
    return st == PFX_SUCCESS ? pfx_st_load_index_rt(rt, f, index, dst) : st;
}

pfx_status pfx_st_load_index_rt(pfx_runtime *rt, const pfx_safetensors *f, size_t index,
                                pfx_tensor *dst)
{
    const st_entry *e = &f->entries[index];
    const char *name = e->name;
    if (!pfx_st_is_float(e->dtype))
        return pfx_error(rt, PFX_ERROR_DTYPE_MISMATCH,
                         "tensor " NAME_FMT " is %s, not a float type", name,
                         pfx_st_dtype_name(e->dtype));
    bool same = e->ndim == dst->ndim;
    for (unsigned i = 0; same && i < e->ndim; i++)
        same = e->shape[i] == dst->shape[i];
    if (e->ndim == 0 && dst->ndim == 1 && dst->shape[0] == 1)
        same = true;
    if (!same) {
        char a[160], b[160];
        pfx_shape_text(a, sizeof(a), e->ndim, e->shape);
        pfx_shape_text(b, sizeof(b), dst->ndim, dst->shape);
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "tensor " NAME_FMT " has shape %s in the file, dst has %s", name, a, b);
    }
    return upload(rt, f, index, dst);
}

pfx_status pfx_safetensors_create_tensor(pfx_runtime *rt, const pfx_safetensors *f,
                                         const char *name, pfx_dtype dtype, pfx_tensor **out)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_safetensors_create_tensor: rt is NULL");
    if (!f || !name || !out)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_safetensors_create_tensor: %s is NULL",
                         !f      ? "f"
                         : !name ? "name"
                                 : "out");
    *out = NULL;
    size_t index = 0;
    pfx_status st = find_for_load(rt, f, name, &index);
    if (st != PFX_SUCCESS)
        return st;
    const st_entry *e = &f->entries[index];
    if (e->ndim > PFX_MAX_DIMS || e->numel == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "tensor " NAME_FMT
                         ": %u dimensions and %zu elements; a device tensor has 1 to %d "
                         "dimensions and at least one element",
                         name, e->ndim, e->numel, PFX_MAX_DIMS);
    size_t one = 1;
    pfx_tensor *t = NULL;
    st = pfx_tensor_create(rt, dtype, e->ndim ? e->ndim : 1, e->ndim ? e->shape : &one, &t);
    if (st != PFX_SUCCESS)
        return st;
    st = upload(rt, f, index, t);
    if (st != PFX_SUCCESS) {
        pfx_tensor_destroy(&t);
        return st;
    }
    *out = t;
    return PFX_SUCCESS;
}
