/* Argument checks and launch helpers of the whole-model ops (model_args.h). */
#include "model_args.h"

/* Index of the last element of a valid view (rows, cols >= 1). */
static bool mat_last(const pfx_mat *m, size_t *last)
{
    size_t span;
    if (m->rows > 1) {
        if (pfx_mul_overflows(m->rows - 1, m->ld, &span))
            return false;
    } else {
        span = 0;
    }
    return !__builtin_add_overflow(m->offset, span, &span) &&
           !__builtin_add_overflow(span, m->cols - 1, last);
}

pfx_status pfx_mat_check(pfx_runtime *rt, const char *op, const char *name, const pfx_mat *m,
                         pfx_mat_kind kind)
{
    if (!m || !m->t)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", op, name);
    if (m->t->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: %s belongs to another runtime", op,
                         name);
    const pfx_dtype dt = m->t->dtype;
    const bool weight16 = dt == PFX_DTYPE_F16 || dt == PFX_DTYPE_BF16;
    const bool blocks = dt == PFX_DTYPE_Q8_0;
    if (dt != PFX_DTYPE_F32 && !(kind != PFX_MAT_F32 && weight16) &&
        !(kind == PFX_MAT_BLOCK_WEIGHT && blocks))
        return pfx_error(
            rt, PFX_ERROR_DTYPE_MISMATCH, "%s: %s is %s; %s", op, name, pfx_dtype_name(dt),
            kind == PFX_MAT_BLOCK_WEIGHT ? "a weight here is float32, half, bfloat16 or Q8_0"
            : kind == PFX_MAT_WEIGHT
                ? "a weight here is float32, half or bfloat16 (Q8_0 is read by the "
                  "products and the token embedding alone)"
                : "activations are float32");
    if (m->rows == 0 || m->cols == 0)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s has %zu rows x %zu cols (>= 1 each)",
                         op, name, m->rows, m->cols);
    if (m->rows > 1 && m->ld < m->cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s row stride %zu < %zu cols", op, name,
                         m->ld, m->cols);
    size_t last;
    if (!mat_last(m, &last) || last >= m->t->numel)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: %s (%zu x %zu at offset %zu, row stride %zu) runs past its tensor of "
                         "%zu elements",
                         op, name, m->rows, m->cols, m->offset, m->ld, m->t->numel);
    return PFX_SUCCESS;
}

pfx_status pfx_mat_same_shape(pfx_runtime *rt, const char *op, const char *name_a, const pfx_mat *a,
                              const char *name_b, const pfx_mat *b)
{
    if (a->rows != b->rows || a->cols != b->cols)
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE, "%s: %s is %zu x %zu but %s is %zu x %zu", op,
                         name_b, b->rows, b->cols, name_a, a->rows, a->cols);
    return PFX_SUCCESS;
}

pfx_status pfx_mat_check_vector(pfx_runtime *rt, const char *op, const char *name, const pfx_mat *m,
                                size_t n, pfx_mat_kind kind)
{
    pfx_status st = pfx_mat_check(rt, op, name, m, kind);
    if (st != PFX_SUCCESS)
        return st;
    if (!((m->cols == 1 && m->rows == n) || (m->rows == 1 && m->cols == n)))
        return pfx_error(rt, PFX_ERROR_INVALID_SHAPE,
                         "%s: %s is %zu x %zu, expected a vector of %zu elements", op, name,
                         m->rows, m->cols, n);
    return PFX_SUCCESS;
}

size_t pfx_mat_vector_step(const pfx_mat *m)
{
    return m->cols == 1 && m->rows > 1 ? m->ld : 1;
}

bool pfx_mat_overlap(const pfx_mat *a, const pfx_mat *b)
{
    if (!a->t || !b->t || a->t->mem != b->t->mem)
        return false;
    size_t la, lb;
    if (!mat_last(a, &la) || !mat_last(b, &lb))
        return true;
    /* one buffer is one tensor: one element size */
    if (!(a->offset <= lb && b->offset <= la))
        return false; /* disjoint element ranges */
    /* interleaved views of one row stride (the gate and up halves of one
     * fused GEMM output): disjoint when their column windows, taken modulo
     * the stride, do not meet */
    const size_t lda = a->rows > 1 ? a->ld : 0, ldb = b->rows > 1 ? b->ld : 0;
    const size_t L = lda ? lda : ldb;
    if (L && (lda == 0 || lda == L) && (ldb == 0 || ldb == L) && a->cols <= L && b->cols <= L &&
        (a->rows == 1 || b->rows == 1 || lda == ldb)) {
        if (a->rows == 1 && a->offset % L + a->cols > L)
            return true; /* a single row across a stride boundary: keep it simple */
        if (b->rows == 1 && b->offset % L + b->cols > L)
            return true;
        const size_t ca = a->offset % L, cb = b->offset % L;
        return !((cb + L - ca) % L >= a->cols && (ca + L - cb) % L >= b->cols);
    }
    return true;
}

bool pfx_mat_same(const pfx_mat *a, const pfx_mat *b)
{
    return a->t && b->t && a->t->mem == b->t->mem && a->offset == b->offset && a->rows == b->rows &&
           a->cols == b->cols && (a->rows == 1 || a->ld == b->ld);
}

pfx_status pfx_mat_check_alias(pfx_runtime *rt, const char *op, const char *out_name,
                               const pfx_mat *out, const char *in_name, const pfx_mat *in,
                               bool same_ok)
{
    if (same_ok && pfx_mat_same(out, in))
        return PFX_SUCCESS;
    if (pfx_mat_overlap(out, in))
        return pfx_error(rt, PFX_ERROR_ALIASING, "%s: %s overlaps %s%s", op, out_name, in_name,
                         same_ok ? " (only the very same view is allowed)" : "");
    return PFX_SUCCESS;
}

pfx_mat_args pfx_mat_kernel_args(const pfx_mat *m)
{
    pfx_mat_args a = { m->t->mem, m->offset, m->rows > 1 ? m->ld : m->cols,
                       pfx_storage_code(m->t->dtype) };
    return a;
}

pfx_status pfx_ids_check(pfx_runtime *rt, const char *op, const char *name, const pfx_ids *ids,
                         size_t first, size_t n, size_t limit, bool allow_ignore, size_t *counted)
{
    if (!ids)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "%s: %s is NULL", op, name);
    if (ids->rt != rt)
        return pfx_error(rt, PFX_ERROR_RUNTIME_MISMATCH, "%s: %s belongs to another runtime", op,
                         name);
    if (first > ids->count || n > ids->count - first)
        return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE,
                         "%s: %s entries [%zu, %zu) run past its %zu entries", op, name, first,
                         first + n, ids->count);
    size_t c = 0;
    for (size_t i = first; i < first + n; i++) {
        const int32_t v = ids->host[i];
        if (allow_ignore && v == PFX_LABEL_IGNORE)
            continue;
        if (v < 0 || (size_t)v >= limit)
            return pfx_error(rt, PFX_ERROR_OUT_OF_RANGE, "%s: %s[%zu] = %d is outside [0, %zu)%s",
                             op, name, i, (int)v, limit, allow_ignore ? " and not -100" : "");
        c++;
    }
    if (counted)
        *counted = c;
    return PFX_SUCCESS;
}
