/*
 * The host backend of the GEMM wrapper (see gemm.h): the host's CBLAS on the
 * device buffers mapped in place. Used only on CPU devices whose buffers are
 * host memory (pfx_gemm_host_usable), where a map returns the buffer's own
 * storage: no copy in either direction (tests/test_encoder.c checks that).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "gemm_rows.h"
#include "q8_0.h"

#if PFX_HAVE_CBLAS
#include <cblas.h>
#endif

bool pfx_gemm_host_built(void)
{
    return PFX_HAVE_CBLAS != 0;
}

bool pfx_gemm_host_usable(const pfx_device_info *info)
{
    /* CL_DEVICE_HOST_UNIFIED_MEMORY is deprecated since OpenCL 2.0: PoCL's CPU
     * devices qualify by name even where a driver stops reporting it. */
    return info->type == PFX_DEVICE_CPU &&
           (info->unified_memory || strstr(info->platform_name, "Portable Computing Language"));
}

/* Vector level of an OpenBLAS kernel set: 3 AVX-512, 2 AVX2 + FMA, else 1. */
static int core_level(const char *core)
{
    static const char *const avx512[] = { "SkylakeX", "Cooperlake", "SapphireRapids" };
    static const char *const avx2[] = { "Haswell", "Zen", "SkylakeX" };
    for (size_t i = 0; i < sizeof(avx512) / sizeof(avx512[0]); i++)
        if (!strcmp(core, avx512[i]))
            return 3;
    for (size_t i = 0; i < sizeof(avx2) / sizeof(avx2[0]); i++)
        if (!strcmp(core, avx2[i]))
            return 2;
    return 1;
}

const char *pfx_gemm_host_core_hint(void)
{
#if PFX_HAVE_OPENBLAS && defined(__x86_64__)
    if (getenv("OPENBLAS_CORETYPE"))
        return NULL;
    __builtin_cpu_init();
    int cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
                  ? 3
              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 2
                                                                                : 1;
    const char *core = openblas_get_corename();
    if (!core || core_level(core) >= cpu)
        return NULL;
    return cpu == 3 ? "SkylakeX" : "Haswell";
#else
    return NULL;
#endif
}

int pfx_gemm_host_threads(void)
{
#if PFX_HAVE_OPENBLAS
    return openblas_get_num_threads();
#else
    return 1;
#endif
}

void pfx_gemm_host_rows(const pfx_gemm_rows_args *g)
{
#if PFX_HAVE_CBLAS
    if (g->b_type == PFX_ROWS_F32 && g->m == 1 &&
        !pfx_gemm_rows_wanted(1, g->n, g->k, g->trans_b)) {
        /* as pfx_gemm_host: one row of a float32 B [n, k] on the host BLAS's sgemv */
        cblas_sgemv(CblasRowMajor, g->trans_b ? CblasNoTrans : CblasTrans,
                    (int)(g->trans_b ? g->n : g->k), (int)(g->trans_b ? g->k : g->n), g->alpha,
                    g->b, (int)g->ldb, g->a, 1, g->beta, g->c, 1);
        return;
    }
#endif
    pfx_gemm_rows(g, pfx_gemm_host_threads());
}

#if PFX_HAVE_CBLAS

/* The distinct buffers of one call, each mapped once (two overlapping
 * writable maps of one buffer would be undefined). */
typedef struct mapped {
    cl_mem mem;
    cl_map_flags flags;
    void *ptr;
} mapped;

static int add_buffer(mapped *set, int n, cl_mem mem, cl_map_flags flags)
{
    for (int i = 0; i < n; i++) {
        if (set[i].mem == mem) {
            set[i].flags |= flags;
            return n;
        }
    }
    set[n] = (mapped){ mem, flags, NULL };
    return n + 1;
}

static void *pointer_of(const mapped *set, int n, cl_mem mem)
{
    for (int i = 0; i < n; i++)
        if (set[i].mem == mem)
            return set[i].ptr;
    return NULL;
}

/* Returns the first error; every mapped buffer is unmapped regardless. */
static cl_int unmap_all(pfx_runtime *rt, mapped *set, int n)
{
    cl_int first = CL_SUCCESS;
    for (int i = 0; i < n; i++) {
        if (!set[i].ptr)
            continue;
        cl_int err = clEnqueueUnmapMemObject(rt->queue, set[i].mem, set[i].ptr, 0, NULL, NULL);
        if (first == CL_SUCCESS)
            first = err;
    }
    return first;
}

/* Maps the buffers of set, each whole. The maps are enqueued without
 * blocking, then one wait for the last: the in-order queue has then finished
 * everything before this call. (A blocking map each cost a round trip to the
 * device's threads: a third of a GPT-2 decode step on PoCL.) On an error
 * nothing stays mapped. */
static pfx_status map_all(pfx_runtime *rt, const char *what, mapped *set, int nset)
{
    cl_event last = NULL;
    for (int i = 0; i < nset; i++) {
        size_t bytes = 0;
        cl_event ev = NULL;
        cl_int err = clGetMemObjectInfo(set[i].mem, CL_MEM_SIZE, sizeof(bytes), &bytes, NULL);
        if (err == CL_SUCCESS)
            set[i].ptr = clEnqueueMapBuffer(rt->queue, set[i].mem, CL_FALSE, set[i].flags, 0, bytes,
                                            0, NULL, &ev, &err);
        if (err != CL_SUCCESS) {
            set[i].ptr = NULL;
            if (last) { /* the maps so far complete before they are unmapped */
                clWaitForEvents(1, &last);
                clReleaseEvent(last);
            }
            unmap_all(rt, set, nset);
            return pfx_cl_error(rt, err, what);
        }
        if (last)
            clReleaseEvent(last);
        last = ev;
    }
    cl_int werr = last ? clWaitForEvents(1, &last) : CL_SUCCESS;
    if (last)
        clReleaseEvent(last);
    if (werr != CL_SUCCESS) {
        unmap_all(rt, set, nset);
        return pfx_cl_error(rt, werr, what);
    }
    return PFX_SUCCESS;
}

/* Unmaps set (enqueued, not waited for: later commands on the queue follow)
 * and logs the products' host time since t0. */
static pfx_status unmap_and_log(pfx_runtime *rt, const char *what, mapped *set, int nset,
                                uint64_t t0)
{
    cl_int err = unmap_all(rt, set, nset);
    pfx_launch_log_host_gemm(rt, pfx_host_ns() - t0);
    return err == CL_SUCCESS ? PFX_SUCCESS : pfx_cl_error(rt, err, what);
}

static pfx_status check_int_sizes(pfx_runtime *rt, const char *what, const size_t dims[6])
{
    for (int i = 0; i < 6; i++)
        if (dims[i] > INT_MAX)
            return pfx_error(rt, PFX_ERROR_UNSUPPORTED,
                             "%s: the host BLAS takes sizes up to %d (got %zu)", what, INT_MAX,
                             dims[i]);
    return PFX_SUCCESS;
}

pfx_status pfx_gemm_host(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                         size_t n, size_t k, cl_mem a, size_t lda, cl_mem b, size_t ldb, cl_mem c,
                         size_t ldc, const pfx_gemm_item *items, size_t count)
{
    what = what ? what : "gemm";
    const size_t dims[6] = { m, n, k, lda, ldb, ldc };
    pfx_status st = check_int_sizes(rt, what, dims);
    if (st != PFX_SUCCESS)
        return st;
    const uint64_t t0 = pfx_host_ns();
    mapped set[3];
    int nset = add_buffer(set, 0, a, CL_MAP_READ);
    nset = add_buffer(set, nset, b, CL_MAP_READ);
    nset = add_buffer(set, nset, c, CL_MAP_READ | CL_MAP_WRITE);
    if ((st = map_all(rt, what, set, nset)) != PFX_SUCCESS)
        return st;
    const float *pa = pointer_of(set, nset, a), *pb = pointer_of(set, nset, b);
    float *pc = pointer_of(set, nset, c);
    /* a few rows: one pass over B for all of them where that measured faster */
    const bool few_rows =
        !trans_a && m <= PFX_GEMM_ROWS_MAX && pfx_gemm_rows_wanted(m, n, k, trans_b);
    for (size_t i = 0; i < count; i++) {
        const pfx_gemm_item *it = &items[i];
        if (few_rows) {
            pfx_gemm_rows(&(pfx_gemm_rows_args){ .trans_b = trans_b,
                                                 .m = m,
                                                 .n = n,
                                                 .k = k,
                                                 .alpha = it->alpha,
                                                 .beta = it->beta,
                                                 .a = pa + it->a,
                                                 .lda = lda,
                                                 .b = pb + it->b,
                                                 .ldb = ldb,
                                                 .c = pc + it->c,
                                                 .ldc = ldc },
                          pfx_gemm_host_threads());
            continue;
        }
        if (m == 1) {
            /* One row (a decode step): c = op(B)^T a as a matrix-vector
             * product. OpenBLAS 0.3.21's sgemm packs all of B even for one
             * row, which reads the weights about twice (2.3x slower on a
             * GPT-2 decode step). */
            cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans,
                        trans_b ? (int)n : (int)k, trans_b ? (int)k : (int)n, it->alpha, pb + it->b,
                        (int)ldb, pa + it->a, trans_a ? (int)lda : 1, it->beta, pc + it->c, 1);
            continue;
        }
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                    trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, it->alpha,
                    pa + it->a, (int)lda, pb + it->b, (int)ldb, it->beta, pc + it->c, (int)ldc);
    }
    return unmap_and_log(rt, what, set, nset, t0);
}

/* Many rows: output columns in blocks of nb, each block of w widened on the
 * host into the scratch ws (F16C / AVX-512 conversions, gemm_rows.h), then
 * the host BLAS's SGEMM on it. (The OpenCL widening kernel cost PoCL ten
 * times f32's whole prefill product time.) w: the weight's buffer, its
 * element [0, 0] at w_offset. */
static void widened_products(size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                             const void *w, size_t w_offset, size_t ldw, pfx_gemm_rows_type w_type,
                             bool trans_w, float beta, float *c, size_t ldc, float *ws,
                             size_t ws_floats)
{
    const size_t nb_max = ws_floats / k < n ? ws_floats / k : n;
    for (size_t n0 = 0; n0 < n; n0 += nb_max) {
        const size_t nb = n - n0 < nb_max ? n - n0 : nb_max;
        /* trans_w: rows n0.. of [n, k]; else columns n0.. of [k, n] */
        pfx_gemm_rows_widen(
            &(pfx_gemm_rows_widen_args){ .type = w_type,
                                         .rows = trans_w ? nb : k,
                                         .cols = trans_w ? k : nb,
                                         .src = w,
                                         .src_offset = w_offset + (trans_w ? n0 * ldw : n0),
                                         .ld_src = ldw,
                                         .dst = ws,
                                         .ld_dst = trans_w ? k : nb },
            pfx_gemm_host_threads());
        cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_w ? CblasTrans : CblasNoTrans, (int)m,
                    (int)nb, (int)k, alpha, a, (int)lda, ws, trans_w ? (int)k : (int)nb, beta,
                    c + n0, (int)ldc);
    }
}

pfx_status pfx_gemm_host_stored(pfx_runtime *rt, const char *what, size_t m, size_t n, size_t k,
                                float alpha, pfx_gemm_operand a, pfx_gemm_operand w,
                                pfx_gemm_rows_type w_type, bool trans_w, float beta,
                                pfx_gemm_operand c, cl_mem ws, size_t ws_floats)
{
    what = what ? what : "gemm";
    const bool few_rows = m <= PFX_GEMM_ROWS_MAX && pfx_gemm_rows_enabled();
    const size_t dims[6] = { m, n, k, a.ld, w.ld, c.ld };
    pfx_status st = check_int_sizes(rt, what, dims);
    if (st != PFX_SUCCESS)
        return st;
    const uint64_t t0 = pfx_host_ns();
    mapped set[4];
    int nset = add_buffer(set, 0, a.mem, CL_MAP_READ);
    nset = add_buffer(set, nset, w.mem, CL_MAP_READ);
    nset = add_buffer(set, nset, c.mem, CL_MAP_READ | CL_MAP_WRITE);
    if (!few_rows)
        nset = add_buffer(set, nset, ws, CL_MAP_WRITE);
    if ((st = map_all(rt, what, set, nset)) != PFX_SUCCESS)
        return st;
    const float *pa = pointer_of(set, nset, a.mem) + a.offset;
    const char *pw = pointer_of(set, nset, w.mem);
    /* the byte where element w.offset is (Q8_0: a block's start, gemm.c) */
    const size_t w_byte = w_type == PFX_ROWS_Q8_0  ? w.offset / PFX_Q8_0_BLOCK * PFX_Q8_0_BYTES
                          : w_type == PFX_ROWS_F32 ? w.offset * sizeof(float)
                                                   : w.offset * sizeof(uint16_t);
    float *pc = (float *)pointer_of(set, nset, c.mem) + c.offset;
    if (few_rows)
        pfx_gemm_rows(&(pfx_gemm_rows_args){ .trans_b = trans_w,
                                             .b_type = w_type,
                                             .m = m,
                                             .n = n,
                                             .k = k,
                                             .alpha = alpha,
                                             .beta = beta,
                                             .a = pa,
                                             .lda = a.ld,
                                             .b = pw + w_byte,
                                             .ldb = w.ld,
                                             .c = pc,
                                             .ldc = c.ld },
                      pfx_gemm_host_threads());
    else
        widened_products(m, n, k, alpha, pa, a.ld, pw, w.offset, w.ld, w_type, trans_w, beta, pc,
                         c.ld, pointer_of(set, nset, ws), ws_floats);
    return unmap_and_log(rt, what, set, nset, t0);
}

#else

pfx_status pfx_gemm_host(pfx_runtime *rt, const char *what, bool trans_a, bool trans_b, size_t m,
                         size_t n, size_t k, cl_mem a, size_t lda, cl_mem b, size_t ldb, cl_mem c,
                         size_t ldc, const pfx_gemm_item *items, size_t count)
{
    return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "%s: built without a host BLAS (CBLAS)",
                     what ? what : "gemm");
}

pfx_status pfx_gemm_host_stored(pfx_runtime *rt, const char *what, size_t m, size_t n, size_t k,
                                float alpha, pfx_gemm_operand a, pfx_gemm_operand w,
                                pfx_gemm_rows_type w_type, bool trans_w, float beta,
                                pfx_gemm_operand c, cl_mem ws, size_t ws_floats)
{
    return pfx_error(rt, PFX_ERROR_UNSUPPORTED, "%s: built without a host BLAS (CBLAS)",
                     what ? what : "gemm");
}

#endif
