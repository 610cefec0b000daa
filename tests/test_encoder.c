/*
 * Suite 'encoder': the CLBlast GEMM wrapper (src/ops/gemm.h) and the prefix
 * encoder (include/prefixcl/encoder.h) against the double-precision reference
 * (tests/reference/encoder_ref.h), whose gradients are themselves checked by
 * central finite differences.
 */
#include <math.h>

#include "pfx_test.h"
#include "gemm.h"
#include "reference/encoder_ref.h"
#include "reference/random.h"
#include "reference/reference.h"
#include "tolerances.h"

/* ---- helpers ---- */

static pfx_tensor *tensor(pfx_runtime *rt, pfx_dtype dtype, unsigned ndim, size_t d0, size_t d1,
                          size_t d2)
{
    const size_t shape[3] = { d0, d1, d2 };
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, dtype, ndim, shape, &t), PFX_SUCCESS);
    return t;
}

static float *random_floats(ref_rng *rng, size_t n)
{
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    ref_rng_fill(rng, x, n, -1.0f, 1.0f);
    return x;
}

static float *read_all(const pfx_tensor *t)
{
    size_t n = pfx_tensor_numel(t);
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    assert_int_equal(pfx_tensor_read(t, 0, n, x), PFX_SUCCESS);
    return x;
}

static void expect_close(const char *what, const double *ref, const float *got, size_t n,
                         double tol)
{
    double err = rel_l2(ref, got, n);
    if (!(err <= tol))
        fail_msg("%s: relative L2 error %.3g > %.3g", what, err, tol);
}

static pfx_encoder_params params_of(const ref_encoder_dims *d)
{
    return (pfx_encoder_params){ .layers = d->layers,
                                 .kv_heads = d->kv_heads,
                                 .head_dim = d->head_dim,
                                 .prefix_len = d->prefix_len,
                                 .embed_dim = d->embed_dim,
                                 .hidden_dim = d->hidden_dim };
}

/* An encoder with random parameters uniform in [-1, 1] (host copies in host[5]). */
static pfx_encoder *random_encoder(pfx_runtime *rt, const ref_encoder_dims *d, uint64_t seed,
                                   float *host[5])
{
    pfx_encoder_params p = params_of(d);
    pfx_encoder *enc = NULL;
    assert_int_equal(pfx_encoder_create(rt, &p, &enc), PFX_SUCCESS);
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    for (int i = 0; i < 5; i++) {
        size_t n = ref_encoder_param_count(d, i);
        host[i] = random_floats(&rng, n);
        pfx_tensor *t = pfx_encoder_tensor(enc, (pfx_encoder_param)i);
        assert_non_null(t);
        assert_int_equal(pfx_tensor_numel(t), n);
        assert_int_equal(pfx_tensor_write(t, 0, n, host[i]), PFX_SUCCESS);
    }
    return enc;
}

static ref_encoder_params ref_params(float *host[5])
{
    return (ref_encoder_params){ host[0], host[1], host[2], host[3], host[4] };
}

static void free_host(float *host[5])
{
    for (int i = 0; i < 5; i++)
        free(host[i]);
}

/* 2L prefix tensors [Hkv, m, D]: t[l] = K, t[L + l] = V. */
static pfx_tensor **prefixes(pfx_runtime *rt, const ref_encoder_dims *d, pfx_dtype dtype)
{
    pfx_tensor **t = calloc(2 * d->layers, sizeof(*t));
    assert_non_null(t);
    for (size_t i = 0; i < 2 * d->layers; i++)
        t[i] = tensor(rt, dtype, 3, d->kv_heads, d->prefix_len, d->head_dim);
    return t;
}

static void free_prefixes(pfx_tensor **t, size_t layers)
{
    for (size_t i = 0; i < 2 * layers; i++)
        pfx_tensor_destroy(&t[i]);
    free(t);
}

/* Reads 2L prefixes into [L][Hkv][m][D] K and V host arrays. */
static void read_prefixes(pfx_tensor *const *t, const ref_encoder_dims *d, float *k, float *v)
{
    size_t n = ref_encoder_prefix_count(d);
    for (size_t l = 0; l < d->layers; l++) {
        assert_int_equal(pfx_tensor_read(t[l], 0, n, k + l * n), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(t[d->layers + l], 0, n, v + l * n), PFX_SUCCESS);
    }
}

/* ---- GEMM wrapper ---- */

/* C = alpha op(A) op(B) + beta C in double, row-major with leading dims. */
static void host_gemm(bool ta, bool tb, size_t m, size_t n, size_t k, double alpha, const float *a,
                      size_t lda, const float *b, size_t ldb, double beta, const float *c0,
                      double *c, size_t ldc)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t p = 0; p < k; p++)
                s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                     (tb ? b[j * ldb + p] : b[p * ldb + j]);
            c[i * ldc + j] = alpha * s + beta * c0[i * ldc + j];
        }
}

/* One product with offsets and padded leading dimensions, all transposes. */
static void gemm_case(pfx_runtime *rt, size_t m, size_t n, size_t k, uint64_t seed)
{
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        size_t a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_cols + 3;
        size_t b_rows = tb ? n : k, b_cols = tb ? k : n, ldb = b_cols + 1;
        size_t ldc = n + 2, off_a = 5, off_b = 7, off_c = 3;
        size_t na = off_a + a_rows * lda, nb = off_b + b_rows * ldb, nc = off_c + m * ldc;
        float *a = random_floats(&rng, na), *b = random_floats(&rng, nb),
              *c = random_floats(&rng, nc);
        pfx_tensor *ta_ = tensor(rt, PFX_DTYPE_F32, 1, na, 0, 0);
        pfx_tensor *tb_ = tensor(rt, PFX_DTYPE_F32, 1, nb, 0, 0);
        pfx_tensor *tc_ = tensor(rt, PFX_DTYPE_F32, 1, nc, 0, 0);
        assert_int_equal(pfx_tensor_write(ta_, 0, na, a), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_write(tb_, 0, nb, b), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_write(tc_, 0, nc, c), PFX_SUCCESS);
        pfx_status st =
            pfx_gemm(rt, "test", ta, tb, m, n, k, 0.75f, PFX_GEMM_OP(ta_->mem, off_a, lda),
                     PFX_GEMM_OP(tb_->mem, off_b, ldb), -0.5f, PFX_GEMM_OP(tc_->mem, off_c, ldc));
        if (st != PFX_SUCCESS)
            fail_msg("gemm: %s", pfx_last_error(rt));
        float *got = read_all(tc_);
        double *ref = malloc(m * ldc * sizeof(double));
        assert_non_null(ref);
        host_gemm(ta, tb, m, n, k, 0.75, a + off_a, lda, b + off_b, ldb, -0.5, c + off_c, ref, ldc);
        /* Padding columns keep their old values; compare the m x n block. */
        for (size_t i = 0; i < m; i++)
            for (size_t j = n; j < ldc; j++)
                ref[i * ldc + j] = c[off_c + i * ldc + j];
        expect_close("gemm", ref, got + off_c, m * ldc, TOL_ENC_F32);
        for (size_t i = 0; i < off_c; i++)
            assert_true(got[i] == c[i]); /* before the offset: untouched */
        free(ref);
        free(got);
        free(a);
        free(b);
        free(c);
        pfx_tensor_destroy(&ta_);
        pfx_tensor_destroy(&tb_);
        pfx_tensor_destroy(&tc_);
    }
}

static void test_gemm_shapes(void **state)
{
    pfx_runtime *rt = *state;
    gemm_case(rt, 7, 5, 13, 1);   /* no multiple of any tile */
    gemm_case(rt, 67, 45, 33, 2); /* past the direct-kernel sizes */
    gemm_case(rt, 1, 29, 11, 3);  /* a row vector times a matrix (bias reductions) */
}

static void test_gemm_batched(void **state)
{
    pfx_runtime *rt = *state;
    ref_rng rng;
    ref_rng_seed(&rng, 11);
    const size_t m = 6, n = 5, k = 9, batch = 3;
    /* Strided: A^T items (k x m) of stride 61, B (k x n) shared (stride 0). */
    const size_t sa = 61, sc = m * n + 4, na = batch * sa, nb = k * n + 16, nc = batch * sc;
    float *a = random_floats(&rng, na), *b = random_floats(&rng, nb), *c = random_floats(&rng, nc);
    pfx_tensor *ta = tensor(rt, PFX_DTYPE_F32, 1, na, 0, 0);
    pfx_tensor *tb = tensor(rt, PFX_DTYPE_F32, 1, nb, 0, 0);
    pfx_tensor *tc = tensor(rt, PFX_DTYPE_F32, 1, nc, 0, 0);
    assert_int_equal(pfx_tensor_write(ta, 0, na, a), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(tb, 0, nb, b), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(tc, 0, nc, c), PFX_SUCCESS);
    pfx_status st = pfx_gemm_strided_batched(
        rt, "test", true, false, m, n, k, 1.5f, PFX_GEMM_OPS(ta->mem, 0, m, sa),
        PFX_GEMM_OPS(tb->mem, 0, n, 0), 0.0f, PFX_GEMM_OPS(tc->mem, 0, n, sc), batch);
    if (st != PFX_SUCCESS)
        fail_msg("strided batched: %s", pfx_last_error(rt));
    float *got = read_all(tc);
    double ref[6 * 5];
    for (size_t i = 0; i < batch; i++) {
        host_gemm(true, false, m, n, k, 1.5, a + i * sa, m, b, n, 0.0, c + i * sc, ref, n);
        expect_close("strided batched", ref, got + i * sc, m * n, TOL_ENC_F32);
    }
    free(got);

    /* Batched with its own offsets, alpha and beta per item. */
    const size_t a_off[3] = { 0, 100, 7 }, b_off[3] = { 3, 0, 12 }, c_off[3] = { 64, 0, 31 };
    const float alphas[3] = { 1.0f, -2.0f, 0.5f }, betas[3] = { 0.0f, 1.0f, -1.0f };
    assert_int_equal(pfx_tensor_write(tc, 0, nc, c), PFX_SUCCESS);
    st = pfx_gemm_batched(rt, "test", false, true, m, n, k, alphas, ta->mem, a_off, k, tb->mem,
                          b_off, k, betas, tc->mem, c_off, n, batch);
    if (st != PFX_SUCCESS)
        fail_msg("batched: %s", pfx_last_error(rt));
    got = read_all(tc);
    for (size_t i = 0; i < batch; i++) {
        host_gemm(false, true, m, n, k, alphas[i], a + a_off[i], k, b + b_off[i], k, betas[i],
                  c + c_off[i], ref, n);
        expect_close("batched", ref, got + c_off[i], m * n, TOL_ENC_F32);
    }
    free(got);
    free(a);
    free(b);
    free(c);
    pfx_tensor_destroy(&ta);
    pfx_tensor_destroy(&tb);
    pfx_tensor_destroy(&tc);
}

static void test_gemm_errors(void **state)
{
    pfx_runtime *rt = *state;
    pfx_tensor *t = tensor(rt, PFX_DTYPE_F32, 1, 64, 0, 0);
    /* C needs 8 * 8 elements past offset 10: refused before either backend runs. */
    assert_status_names(rt,
                        pfx_gemm(rt, "gemm test", false, false, 8, 8, 4, 1.0f,
                                 PFX_GEMM_OP(t->mem, 0, 4), PFX_GEMM_OP(t->mem, 0, 8), 0.0f,
                                 PFX_GEMM_OP(t->mem, 10, 8)),
                        PFX_ERROR_OUT_OF_RANGE, "C of item 0");
    assert_non_null(strstr(pfx_last_error(rt), "gemm test"));
    /* Leading dimension of A smaller than its row. */
    assert_status_names(rt,
                        pfx_gemm(rt, "gemm test", false, false, 4, 4, 4, 1.0f,
                                 PFX_GEMM_OP(t->mem, 0, 2), PFX_GEMM_OP(t->mem, 0, 4), 0.0f,
                                 PFX_GEMM_OP(t->mem, 0, 4)),
                        PFX_ERROR_INVALID_SHAPE, "lda=2");
    /* B^T stored n x k: ldb must cover k. */
    assert_status_names(rt,
                        pfx_gemm(rt, "gemm test", false, true, 2, 3, 5, 1.0f,
                                 PFX_GEMM_OP(t->mem, 0, 5), PFX_GEMM_OP(t->mem, 0, 4), 0.0f,
                                 PFX_GEMM_OP(t->mem, 0, 3)),
                        PFX_ERROR_INVALID_SHAPE, "ldb=4");
    assert_status_names(rt,
                        pfx_gemm(rt, "gemm test", false, false, 4, 0, 4, 1.0f,
                                 PFX_GEMM_OP(t->mem, 0, 4), PFX_GEMM_OP(t->mem, 0, 4), 0.0f,
                                 PFX_GEMM_OP(t->mem, 0, 4)),
                        PFX_ERROR_INVALID_SHAPE, "n=0");
    assert_status_names(rt,
                        pfx_gemm(rt, "gemm test", false, false, 2, 2, 2, 1.0f,
                                 PFX_GEMM_OP(NULL, 0, 2), PFX_GEMM_OP(t->mem, 0, 2), 0.0f,
                                 PFX_GEMM_OP(t->mem, 0, 2)),
                        PFX_ERROR_NULL_ARGUMENT, "buffer of A");
    /* The third item of a strided batch runs past B. */
    assert_status_names(rt,
                        pfx_gemm_strided_batched(rt, "gemm test", false, false, 2, 2, 2, 1.0f,
                                                 PFX_GEMM_OPS(t->mem, 0, 2, 4),
                                                 PFX_GEMM_OPS(t->mem, 0, 2, 31), 0.0f,
                                                 PFX_GEMM_OPS(t->mem, 16, 2, 4), 3),
                        PFX_ERROR_OUT_OF_RANGE, "B of item 2");
    pfx_tensor_destroy(&t);
    /* The name table and the mapping of OpenCL-range codes. */
    assert_string_equal(pfx_clblast_status_name(-1017), "CLBlastInvalidDimension");
    assert_string_equal(pfx_clblast_status_name(-2046), "CLBlastInvalidLocalMemUsage");
    assert_string_equal(pfx_clblast_status_name(12345), "CLBlastUnknownStatus");
    assert_int_equal(pfx_clblast_error(rt, 0, "x"), PFX_SUCCESS);
    assert_status_names(rt, pfx_clblast_error(rt, -2041, "x"), PFX_ERROR_CLBLAST,
                        "CLBlastDatabaseError");
    assert_status_names(rt, pfx_clblast_error(rt, -4, "x"), PFX_ERROR_OUT_OF_MEMORY,
                        "CL_MEM_OBJECT_ALLOCATION_FAILURE");
    assert_status_names(rt, pfx_clblast_error(rt, -30, "x"), PFX_ERROR_OPENCL, "CL_INVALID_VALUE");
    assert_non_null(strstr(pfx_last_error(rt), "CLBlastInvalidValue"));
}

/* The backend this runtime runs: the one $PREFIXCL_GEMM asks for (the test
 * suite runs every GEMM test once per backend), else the device's default. */
static void test_gemm_backend(void **state)
{
    pfx_runtime *rt = *state;
    const pfx_device_info *info = pfx_runtime_device(rt);
    bool host_ok = pfx_gemm_host_built() && pfx_gemm_host_usable(info);
    const char *env = getenv("PREFIXCL_GEMM");
    pfx_gemm_backend want = env && !strcmp(env, "host")      ? PFX_GEMM_HOST
                            : env && !strcmp(env, "clblast") ? PFX_GEMM_CLBLAST
                            : host_ok                        ? PFX_GEMM_HOST
                                                             : PFX_GEMM_CLBLAST;
    print_message("gemm backend: %s\n", pfx_gemm_backend_name(pfx_runtime_gemm_backend(rt)));
    assert_int_equal(pfx_runtime_gemm_backend(rt), want);
    assert_string_equal(pfx_gemm_backend_name(PFX_GEMM_HOST), "host");
    assert_string_equal(pfx_gemm_backend_name((pfx_gemm_backend)9), "unknown");

    /* An explicit parameter beats the environment. */
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.device = info->device_name;
    params.gemm = PFX_GEMM_CLBLAST;
    pfx_runtime *other = NULL;
    assert_int_equal(pfx_runtime_create(&other, &params), PFX_SUCCESS);
    assert_int_equal(pfx_runtime_gemm_backend(other), PFX_GEMM_CLBLAST);
    pfx_runtime_destroy(&other);
    params.gemm = PFX_GEMM_HOST;
    if (host_ok) {
        assert_int_equal(pfx_runtime_create(&other, &params), PFX_SUCCESS);
        assert_int_equal(pfx_runtime_gemm_backend(other), PFX_GEMM_HOST);
        pfx_runtime_destroy(&other);
    } else {
        assert_status_names(NULL, pfx_runtime_create(&other, &params), PFX_ERROR_UNSUPPORTED,
                            "gemm backend host");
        assert_null(other);
    }
    params.gemm = (pfx_gemm_backend)7;
    assert_status_names(NULL, pfx_runtime_create(&other, &params), PFX_ERROR_INVALID_ARGUMENT,
                        "gemm backend 7");
    assert_null(other);

    /* A value of $PREFIXCL_GEMM that names no backend is refused. */
    char *saved = env ? strdup(env) : NULL;
    setenv("PREFIXCL_GEMM", "mkl", 1);
    params.gemm = PFX_GEMM_AUTO;
    assert_status_names(NULL, pfx_runtime_create(&other, &params), PFX_ERROR_INVALID_ARGUMENT,
                        "PREFIXCL_GEMM='mkl'");
    assert_null(other);
    if (saved)
        setenv("PREFIXCL_GEMM", saved, 1);
    else
        unsetenv("PREFIXCL_GEMM");
    free(saved);
}

/* The host backend works on the buffers themselves: a map returns the
 * buffer's storage (the same address every time, and a later device write
 * shows through it), so no product ever copies an operand. */
static void test_gemm_zero_copy(void **state)
{
    pfx_runtime *rt = *state;
    if (pfx_runtime_gemm_backend(rt) != PFX_GEMM_HOST) {
        print_message("backend %s: no host mapping to check\n",
                      pfx_gemm_backend_name(pfx_runtime_gemm_backend(rt)));
        return;
    }
    const size_t n = 1 << 20;
    pfx_tensor *t = tensor(rt, PFX_DTYPE_F32, 1, n, 0, 0);
    assert_int_equal(pfx_tensor_fill(t, 1.0f), PFX_SUCCESS);
    cl_int err = CL_SUCCESS;
    float *p1 = clEnqueueMapBuffer(rt->queue, t->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                   n * sizeof(float), 0, NULL, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_true(p1[n - 1] == 1.0f);
    assert_int_equal(clEnqueueUnmapMemObject(rt->queue, t->mem, p1, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(pfx_tensor_fill(t, 2.0f), PFX_SUCCESS);
    assert_int_equal(pfx_runtime_finish(rt), PFX_SUCCESS);
    /* Still allocated: reading the old address shows where the device wrote. */
    assert_true(p1[0] == 2.0f && p1[n - 1] == 2.0f);
    float *p2 = clEnqueueMapBuffer(rt->queue, t->mem, CL_TRUE, CL_MAP_READ, 4096, 4096, 0, NULL,
                                   NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_ptr_equal(p2, (char *)p1 + 4096);
    assert_int_equal(clEnqueueUnmapMemObject(rt->queue, t->mem, p2, 0, NULL, NULL), CL_SUCCESS);
    pfx_tensor_destroy(&t);
}

/* Queue order: a product sees what was enqueued before it and not what comes
 * after; beta = 0 never reads C (NaN stays out); A, B and C in one buffer. */
static void test_gemm_order(void **state)
{
    pfx_runtime *rt = *state;
    const size_t m = 5, n = 3, k = 4, oa = 0, ob = 32, oc = 64, oc2 = 96, total = 128;
    pfx_tensor *t = tensor(rt, PFX_DTYPE_F32, 1, total, 0, 0);
    float *host = malloc(total * sizeof(float));
    assert_non_null(host);
    for (size_t i = 0; i < total; i++)
        host[i] = NAN;
    assert_int_equal(pfx_tensor_write(t, 0, total, host), PFX_SUCCESS);
    ref_rng rng;
    ref_rng_seed(&rng, 29);
    float a[20], b[12], a2[20];
    ref_rng_fill(&rng, a, m * k, -1.0f, 1.0f);
    ref_rng_fill(&rng, b, k * n, -1.0f, 1.0f);
    ref_rng_fill(&rng, a2, m * k, -1.0f, 1.0f);
    assert_int_equal(pfx_tensor_write(t, ob, k * n, b), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(t, oa, m * k, a), PFX_SUCCESS);
    assert_int_equal(pfx_gemm(rt, "order 1", false, false, m, n, k, 1.0f,
                              PFX_GEMM_OP(t->mem, oa, k), PFX_GEMM_OP(t->mem, ob, n), 0.0f,
                              PFX_GEMM_OP(t->mem, oc, n)),
                     PFX_SUCCESS);
    /* A device copy (not a host write) replaces A after the first product. */
    pfx_tensor *src = tensor(rt, PFX_DTYPE_F32, 1, total, 0, 0);
    memcpy(host, a2, sizeof(a2));
    assert_int_equal(pfx_tensor_write(src, 0, total, host), PFX_SUCCESS);
    cl_int err = clEnqueueCopyBuffer(rt->queue, src->mem, t->mem, 0, oa * sizeof(float),
                                     m * k * sizeof(float), 0, NULL, NULL);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(pfx_gemm(rt, "order 2", false, false, m, n, k, 1.0f,
                              PFX_GEMM_OP(t->mem, oa, k), PFX_GEMM_OP(t->mem, ob, n), 0.0f,
                              PFX_GEMM_OP(t->mem, oc2, n)),
                     PFX_SUCCESS);
    float *got = read_all(t);
    double ref[15] = { 0 }; /* C held NaN: beta = 0 must not read it */
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            for (size_t p = 0; p < k; p++)
                ref[i * n + j] += (double)a[i * k + p] * b[p * n + j];
    expect_close("before the copy", ref, got + oc, m * n, TOL_ENC_F32);
    for (size_t i = 0; i < m * n; i++)
        ref[i] = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            for (size_t p = 0; p < k; p++)
                ref[i * n + j] += (double)a2[i * k + p] * b[p * n + j];
    expect_close("after the copy", ref, got + oc2, m * n, TOL_ENC_F32);
    free(got);
    free(host);
    pfx_tensor_destroy(&t);
    pfx_tensor_destroy(&src);
}

/* ---- counts ---- */

static void test_counts(void **state)
{
    pfx_encoder_params gpt2 = { .layers = 12,
                                .kv_heads = 12,
                                .head_dim = 64,
                                .prefix_len = 20,
                                .embed_dim = 512,
                                .hidden_dim = 512 };
    pfx_encoder_param_counts c;
    assert_int_equal(pfx_encoder_params_counts(&gpt2, &c), PFX_SUCCESS);
    assert_int_equal(c.trainable, 9728512);
    assert_int_equal(c.mlp, 9728512);
    assert_int_equal(c.baked_per_position, 18432);
    assert_int_equal(c.baked, 20 * 18432);
    gpt2.direct = true;
    assert_int_equal(pfx_encoder_params_counts(&gpt2, &c), PFX_SUCCESS);
    assert_int_equal(c.trainable, 20 * 18432);
    assert_int_equal(c.mlp, 0);
    assert_int_equal(c.baked_per_position, 18432);

    /* The same from an encoder object; its parameters are exactly that big. */
    pfx_runtime *rt = *state;
    gpt2.direct = false;
    size_t base = pfx_test_live_bytes(rt);
    pfx_encoder *enc = NULL;
    assert_int_equal(pfx_encoder_create(rt, &gpt2, &enc), PFX_SUCCESS);
    assert_int_equal(pfx_encoder_counts(enc, &c), PFX_SUCCESS);
    assert_int_equal(c.trainable, 9728512);
    assert_int_equal(c.baked_per_position, 18432);
    size_t held = 0;
    for (int i = 0; i < 5; i++)
        held += pfx_tensor_numel(pfx_encoder_tensor(enc, (pfx_encoder_param)i));
    assert_int_equal(held, 9728512);
    assert_true(pfx_test_live_bytes(rt) >= base + 9728512 * sizeof(float));
    pfx_encoder_destroy(&enc);
    assert_int_equal(pfx_test_live_bytes(rt), base);
    gpt2.direct = true;

    pfx_encoder_params bad = gpt2;
    bad.head_dim = 0;
    assert_status_names(NULL, pfx_encoder_params_counts(&bad, &c), PFX_ERROR_INVALID_SHAPE,
                        "params.head_dim");
    bad = gpt2;
    bad.direct = false;
    bad.hidden_dim = 0;
    assert_status_names(NULL, pfx_encoder_params_counts(&bad, &c), PFX_ERROR_INVALID_SHAPE,
                        "params.hidden_dim");
    bad = gpt2;
    bad.layers = SIZE_MAX / 4;
    assert_status_names(NULL, pfx_encoder_params_counts(&bad, &c), PFX_ERROR_SIZE_OVERFLOW,
                        "overflow");
    bad = gpt2;
    bad.direct = false;
    bad.hidden_dim = SIZE_MAX / 1000;
    assert_status_names(NULL, pfx_encoder_params_counts(&bad, &c), PFX_ERROR_SIZE_OVERFLOW,
                        "overflow");
    assert_status_names(NULL, pfx_encoder_params_counts(NULL, &c), PFX_ERROR_NULL_ARGUMENT,
                        "params");
    assert_status_names(NULL, pfx_encoder_params_counts(&gpt2, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "counts");
}

/* ---- the reference against finite differences ---- */

static void test_reference_fd(void **state)
{
    (void)state;
    const ref_encoder_dims d = {
        .layers = 2, .kv_heads = 2, .head_dim = 3, .prefix_len = 3, .embed_dim = 4, .hidden_dim = 5
    };
    ref_rng rng;
    ref_rng_seed(&rng, 77);
    float *host[5];
    for (int i = 0; i < 5; i++)
        host[i] = random_floats(&rng, ref_encoder_param_count(&d, i));
    size_t np = d.layers * ref_encoder_prefix_count(&d);
    float *dkp = random_floats(&rng, np), *dvp = random_floats(&rng, np);
    double *grad[5], *fd[5];
    for (int i = 0; i < 5; i++) {
        grad[i] = malloc(ref_encoder_param_count(&d, i) * sizeof(double));
        fd[i] = malloc(ref_encoder_param_count(&d, i) * sizeof(double));
    }
    ref_encoder_params p = ref_params(host);
    ref_encoder_backward(&d, &p, dkp, dvp, grad[0], grad[1], grad[2], grad[3], grad[4]);
    for (int i = 0; i < 5; i++) {
        for (size_t j = 0; j < ref_encoder_param_count(&d, i); j++) {
            float x = host[i][j];
            float up = x + (float)TOL_FD_STEP, down = x - (float)TOL_FD_STEP;
            host[i][j] = up;
            double lu = ref_encoder_loss(&d, &p, dkp, dvp);
            host[i][j] = down;
            double ld = ref_encoder_loss(&d, &p, dkp, dvp);
            host[i][j] = x;
            fd[i][j] = (lu - ld) / ((double)up - (double)down);
        }
        double err = rel_l2_d(grad[i], fd[i], ref_encoder_param_count(&d, i));
        if (!(err <= TOL_FD_REL))
            fail_msg("reference gradient %d vs finite differences: %.3g", i, err);
    }
    /* A NULL gradient array is zeros: only the K half contributes. */
    double full = ref_encoder_loss(&d, &p, dkp, NULL);
    assert_true(fabs(full) > 0);
    for (int i = 0; i < 5; i++) {
        free(grad[i]);
        free(fd[i]);
    }
    free(dkp);
    free(dvp);
    free_host(host);
}

/* ---- forward and backward against the reference ---- */

static void forward_case(pfx_runtime *rt, const ref_encoder_dims *d, pfx_dtype dtype, uint64_t seed)
{
    float *host[5];
    pfx_encoder *enc = random_encoder(rt, d, seed, host);
    pfx_tensor **t = prefixes(rt, d, dtype);
    pfx_status st = pfx_encoder_forward(enc, t, t + d->layers);
    if (st != PFX_SUCCESS)
        fail_msg("forward: %s", pfx_last_error(rt));
    size_t np = d->layers * ref_encoder_prefix_count(d);
    float *k = malloc(np * sizeof(float)), *v = malloc(np * sizeof(float));
    double *rk = malloc(np * sizeof(double)), *rv = malloc(np * sizeof(double));
    read_prefixes(t, d, k, v);
    ref_encoder_params p = ref_params(host);
    ref_encoder_forward(d, &p, rk, rv);
    double tol = dtype == PFX_DTYPE_F16 ? TOL_ENC_F16 : TOL_ENC_F32;
    expect_close("forward K", rk, k, np, tol);
    expect_close("forward V", rv, v, np, tol);
    free(k);
    free(v);
    free(rk);
    free(rv);
    free_prefixes(t, d->layers);
    free_host(host);
    pfx_encoder_destroy(&enc);
    assert_null(enc);
}

static const ref_encoder_dims small = {
    .layers = 3, .kv_heads = 2, .head_dim = 6, .prefix_len = 5, .embed_dim = 7, .hidden_dim = 9
};
static const ref_encoder_dims big = {
    .layers = 4, .kv_heads = 3, .head_dim = 32, .prefix_len = 20, .embed_dim = 64, .hidden_dim = 48
};

static void test_forward(void **state)
{
    pfx_runtime *rt = *state;
    forward_case(rt, &small, PFX_DTYPE_F32, 21);
    forward_case(rt, &big, PFX_DTYPE_F32, 22);
    forward_case(rt, &small, PFX_DTYPE_F16, 23);
}

/* Gradient tensors shaped like the parameters, filled with `init` (host copies). */
static void grad_tensors(pfx_runtime *rt, pfx_encoder *enc, ref_rng *rng, pfx_tensor *g[5],
                         float *init[5])
{
    for (int i = 0; i < 5; i++) {
        const pfx_tensor *p = pfx_encoder_tensor(enc, (pfx_encoder_param)i);
        g[i] = tensor(rt, PFX_DTYPE_F32, pfx_tensor_ndim(p), pfx_tensor_dim(p, 0),
                      pfx_tensor_dim(p, 1), 0);
        init[i] = random_floats(rng, pfx_tensor_numel(p));
        assert_int_equal(pfx_tensor_write(g[i], 0, pfx_tensor_numel(p), init[i]), PFX_SUCCESS);
    }
}

static void backward_case(pfx_runtime *rt, const ref_encoder_dims *d, uint64_t seed)
{
    float *host[5];
    pfx_encoder *enc = random_encoder(rt, d, seed, host);
    ref_rng rng;
    ref_rng_seed(&rng, seed + 1000);
    size_t n = ref_encoder_prefix_count(d), np = d->layers * n;
    float *dk = random_floats(&rng, np), *dv = random_floats(&rng, np);
    /* Layer 1's dV is absent (NULL = zeros). */
    memset(dv + n, 0, n * sizeof(float));
    pfx_tensor **dt = prefixes(rt, d, PFX_DTYPE_F32);
    for (size_t l = 0; l < d->layers; l++) {
        assert_int_equal(pfx_tensor_write(dt[l], 0, n, dk + l * n), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_write(dt[d->layers + l], 0, n, dv + l * n), PFX_SUCCESS);
    }
    const pfx_tensor *dkl[8], *dvl[8];
    for (size_t l = 0; l < d->layers; l++) {
        dkl[l] = dt[l];
        dvl[l] = l == 1 ? NULL : dt[d->layers + l];
    }
    /* Layer 0's dK in half storage; the reference sees the rounded values. */
    pfx_tensor *dk_half = tensor(rt, PFX_DTYPE_F16, 3, d->kv_heads, d->prefix_len, d->head_dim);
    assert_int_equal(pfx_tensor_write(dk_half, 0, n, dk), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(dk_half, 0, n, dk), PFX_SUCCESS);
    dkl[0] = dk_half;
    pfx_tensor *g[5];
    float *init[5];
    grad_tensors(rt, enc, &rng, g, init);
    double *ref[5];
    for (int i = 0; i < 5; i++)
        ref[i] = malloc(ref_encoder_param_count(d, i) * sizeof(double));
    ref_encoder_params p = ref_params(host);
    ref_encoder_backward(d, &p, dk, dv, ref[0], ref[1], ref[2], ref[3], ref[4]);
    static const char *names[5] = { "dE", "dW1", "db1", "dW2", "db2" };

    for (int accumulate = 1; accumulate >= 0; accumulate--) {
        pfx_encoder_grads grads = {
            .de = g[0], .dw1 = g[1], .db1 = g[2], .dw2 = g[3], .db2 = g[4], .accumulate = accumulate
        };
        pfx_status st = pfx_encoder_backward(enc, dkl, dvl, &grads);
        if (st != PFX_SUCCESS)
            fail_msg("backward: %s", pfx_last_error(rt));
        for (int i = 0; i < 5; i++) {
            size_t count = ref_encoder_param_count(d, i);
            double *want = malloc(count * sizeof(double));
            for (size_t j = 0; j < count; j++)
                want[j] = ref[i][j] + (accumulate ? init[i][j] : 0.0);
            float *got = read_all(g[i]);
            char what[64];
            snprintf(what, sizeof(what), "%s (%s)", names[i],
                     accumulate ? "accumulate" : "overwrite");
            expect_close(what, want, got, count, TOL_ENC_BWD_F32);
            free(got);
            free(want);
        }
    }

    /* Only some gradients: the others are left alone. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(pfx_tensor_fill(g[i], 7.0f), PFX_SUCCESS);
    pfx_encoder_grads some = { .de = g[0], .db2 = g[4] };
    assert_int_equal(pfx_encoder_backward(enc, dkl, dvl, &some), PFX_SUCCESS);
    float *got = read_all(g[0]);
    expect_close("dE alone", ref[0], got, ref_encoder_param_count(d, 0), TOL_ENC_BWD_F32);
    free(got);
    got = read_all(g[1]);
    for (size_t j = 0; j < ref_encoder_param_count(d, 1); j++)
        assert_true(got[j] == 7.0f);
    free(got);

    /* No gradient at all: every output is zero. */
    pfx_encoder_grads all = { .de = g[0], .dw1 = g[1], .db1 = g[2], .dw2 = g[3], .db2 = g[4] };
    assert_int_equal(pfx_encoder_backward(enc, NULL, NULL, &all), PFX_SUCCESS);
    for (int i = 0; i < 5; i++) {
        got = read_all(g[i]);
        for (size_t j = 0; j < ref_encoder_param_count(d, i); j++)
            assert_true(got[j] == 0.0f);
        free(got);
    }

    for (int i = 0; i < 5; i++) {
        free(ref[i]);
        free(init[i]);
        pfx_tensor_destroy(&g[i]);
    }
    pfx_tensor_destroy(&dk_half);
    free(dk);
    free(dv);
    free_prefixes(dt, d->layers);
    free_host(host);
    pfx_encoder_destroy(&enc);
}

static void test_backward(void **state)
{
    pfx_runtime *rt = *state;
    backward_case(rt, &small, 31);
    backward_case(rt, &big, 32);
}

/* Forward and backward twice: bit-identical. */
static void test_determinism(void **state)
{
    pfx_runtime *rt = *state;
    const ref_encoder_dims *d = &big;
    float *host[5];
    pfx_encoder *enc = random_encoder(rt, d, 41, host);
    pfx_tensor **t = prefixes(rt, d, PFX_DTYPE_F32);
    ref_rng rng;
    ref_rng_seed(&rng, 42);
    pfx_tensor *g[5];
    float *init[5];
    grad_tensors(rt, enc, &rng, g, init);
    size_t np = d->layers * ref_encoder_prefix_count(d);
    float *run[2][7];
    for (int r = 0; r < 2; r++) {
        assert_int_equal(pfx_encoder_forward(enc, t, t + d->layers), PFX_SUCCESS);
        run[r][0] = malloc(np * sizeof(float));
        run[r][1] = malloc(np * sizeof(float));
        read_prefixes(t, d, run[r][0], run[r][1]);
        /* the prefixes themselves as gradients */
        pfx_encoder_grads grads = {
            .de = g[0], .dw1 = g[1], .db1 = g[2], .dw2 = g[3], .db2 = g[4]
        };
        assert_int_equal(pfx_encoder_backward(enc, (const pfx_tensor *const *)t,
                                              (const pfx_tensor *const *)t + d->layers, &grads),
                         PFX_SUCCESS);
        for (int i = 0; i < 5; i++)
            run[r][2 + i] = read_all(g[i]);
    }
    assert_memory_equal(run[0][0], run[1][0], np * sizeof(float));
    assert_memory_equal(run[0][1], run[1][1], np * sizeof(float));
    for (int i = 0; i < 5; i++)
        assert_memory_equal(run[0][2 + i], run[1][2 + i],
                            ref_encoder_param_count(d, i) * sizeof(float));
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 7; i++)
            free(run[r][i]);
    for (int i = 0; i < 5; i++) {
        free(init[i]);
        pfx_tensor_destroy(&g[i]);
    }
    free_prefixes(t, d->layers);
    free_host(host);
    pfx_encoder_destroy(&enc);
}

/* ---- bake, direct mode, init ---- */

static void test_bake(void **state)
{
    pfx_runtime *rt = *state;
    const ref_encoder_dims *d = &small;
    size_t base = pfx_test_live_bytes(rt);
    float *host[5];
    pfx_encoder *enc = random_encoder(rt, d, 51, host);
    size_t with_mlp = pfx_test_live_bytes(rt);
    pfx_tensor **t = prefixes(rt, d, PFX_DTYPE_F32);
    assert_int_equal(pfx_encoder_forward(enc, t, t + d->layers), PFX_SUCCESS);
    size_t np = d->layers * ref_encoder_prefix_count(d);
    float *k = malloc(np * sizeof(float)), *v = malloc(np * sizeof(float));
    read_prefixes(t, d, k, v);

    assert_false(pfx_encoder_is_direct(enc));
    assert_null(pfx_encoder_prefix_k(enc, 0));
    assert_int_equal(pfx_encoder_bake(enc), PFX_SUCCESS);
    assert_true(pfx_encoder_is_direct(enc));
    for (int i = 0; i < 5; i++)
        assert_null(pfx_encoder_tensor(enc, (pfx_encoder_param)i));
    /* The encoder now holds exactly the 2L prefixes: the MLP and workspace are gone. */
    size_t prefix_bytes = 2 * np * sizeof(float);
    size_t tensors_bytes = 2 * np * sizeof(float); /* the test's own t[] */
    size_t after = pfx_test_live_bytes(rt);
    assert_int_equal(after, base + prefix_bytes + tensors_bytes);
    assert_true(after - tensors_bytes < with_mlp);
    pfx_encoder_param_counts c;
    assert_int_equal(pfx_encoder_counts(enc, &c), PFX_SUCCESS);
    assert_int_equal(c.trainable, 2 * np);
    assert_int_equal(c.mlp, 0);

    /* The held prefixes are the forward output, bit for bit. */
    size_t n = ref_encoder_prefix_count(d);
    float *x = malloc(n * sizeof(float));
    for (size_t l = 0; l < d->layers; l++) {
        assert_int_equal(pfx_tensor_read(pfx_encoder_prefix_k(enc, l), 0, n, x), PFX_SUCCESS);
        assert_memory_equal(x, k + l * n, n * sizeof(float));
        assert_int_equal(pfx_tensor_read(pfx_encoder_prefix_v(enc, l), 0, n, x), PFX_SUCCESS);
        assert_memory_equal(x, v + l * n, n * sizeof(float));
    }
    assert_null(pfx_encoder_prefix_k(enc, d->layers));
    /* Forward in direct mode copies them out. */
    for (size_t i = 0; i < 2 * d->layers; i++)
        assert_int_equal(pfx_tensor_fill(t[i], 0.0f), PFX_SUCCESS);
    assert_int_equal(pfx_encoder_forward(enc, t, t + d->layers), PFX_SUCCESS);
    float *k2 = malloc(np * sizeof(float)), *v2 = malloc(np * sizeof(float));
    read_prefixes(t, d, k2, v2);
    assert_memory_equal(k, k2, np * sizeof(float));
    assert_memory_equal(v, v2, np * sizeof(float));
    /* Baking twice is a no-op; backward has no MLP to differentiate. */
    assert_int_equal(pfx_encoder_bake(enc), PFX_SUCCESS);
    pfx_encoder_grads grads = { 0 };
    assert_status_names(rt, pfx_encoder_backward(enc, NULL, NULL, &grads), PFX_ERROR_UNSUPPORTED,
                        "direct mode");
    free(k);
    free(v);
    free(k2);
    free(v2);
    free(x);
    free_prefixes(t, d->layers);
    free_host(host);
    pfx_encoder_destroy(&enc);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static void test_direct(void **state)
{
    pfx_runtime *rt = *state;
    const ref_encoder_dims *d = &small;
    size_t base = pfx_test_live_bytes(rt);
    pfx_encoder_params p = { .layers = d->layers,
                             .kv_heads = d->kv_heads,
                             .head_dim = d->head_dim,
                             .prefix_len = d->prefix_len,
                             .direct = true,
                             .prefix_dtype = PFX_DTYPE_F16 };
    pfx_encoder *enc = NULL;
    assert_int_equal(pfx_encoder_create(rt, &p, &enc), PFX_SUCCESS);
    size_t n = ref_encoder_prefix_count(d), np = d->layers * n;
    assert_int_equal(pfx_test_live_bytes(rt), base + 2 * np * 2); /* half storage */
    assert_true(pfx_encoder_is_direct(enc));
    assert_null(pfx_encoder_tensor(enc, PFX_ENCODER_E));
    pfx_encoder_param_counts c;
    assert_int_equal(pfx_encoder_counts(enc, &c), PFX_SUCCESS);
    assert_int_equal(c.trainable, 2 * np);
    assert_int_equal(pfx_encoder_init_random(enc, 5, 0.25f), PFX_SUCCESS);
    /* Written by a "loader" through the accessor. */
    ref_rng rng;
    ref_rng_seed(&rng, 61);
    float *k0 = random_floats(&rng, n);
    assert_int_equal(pfx_tensor_write(pfx_encoder_prefix_k(enc, 0), 0, n, k0), PFX_SUCCESS);
    pfx_tensor **t = prefixes(rt, d, PFX_DTYPE_F32); /* f16 held -> f32 out */
    assert_int_equal(pfx_encoder_forward(enc, t, t + d->layers), PFX_SUCCESS);
    float *k = malloc(np * sizeof(float)), *v = malloc(np * sizeof(float));
    read_prefixes(t, d, k, v);
    for (size_t i = 0; i < n; i++)
        assert_true(fabsf(k[i] - k0[i]) <= 1e-3f * fabsf(k0[i]) + 1e-7f);
    for (size_t i = n; i < np; i++)
        assert_true(fabsf(k[i]) <= 0.25f);
    for (size_t i = 0; i < np; i++)
        assert_true(fabsf(v[i]) <= 0.25f);
    /* The held tensors themselves may be the destinations. */
    pfx_tensor *own[8];
    for (size_t l = 0; l < d->layers; l++) {
        own[l] = pfx_encoder_prefix_k(enc, l);
        own[d->layers + l] = pfx_encoder_prefix_v(enc, l);
    }
    assert_int_equal(pfx_encoder_forward(enc, own, own + d->layers), PFX_SUCCESS);
    free(k0);
    free(k);
    free(v);
    free_prefixes(t, d->layers);
    pfx_encoder_destroy(&enc);
    pfx_encoder_destroy(&enc); /* NULL-safe */
    pfx_encoder_destroy(NULL);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

static void test_init_random(void **state)
{
    pfx_runtime *rt = *state;
    const ref_encoder_dims *d = &small;
    pfx_encoder_params p = params_of(d);
    pfx_encoder *a = NULL, *b = NULL;
    assert_int_equal(pfx_encoder_create(rt, &p, &a), PFX_SUCCESS);
    assert_int_equal(pfx_encoder_create(rt, &p, &b), PFX_SUCCESS);
    assert_int_equal(pfx_encoder_init_random(a, 99, 2.0f), PFX_SUCCESS);
    assert_int_equal(pfx_encoder_init_random(b, 99, 2.0f), PFX_SUCCESS);
    const double bound[5] = { 2.0, 2.0 / sqrt(7.0), 2.0 / sqrt(7.0), 2.0 / sqrt(9.0),
                              2.0 / sqrt(9.0) };
    for (int i = 0; i < 5; i++) {
        float *x = read_all(pfx_encoder_tensor(a, (pfx_encoder_param)i));
        float *y = read_all(pfx_encoder_tensor(b, (pfx_encoder_param)i));
        size_t n = ref_encoder_param_count(d, i);
        assert_memory_equal(x, y, n * sizeof(float));
        double mx = 0;
        for (size_t j = 0; j < n; j++)
            mx = fmax(mx, fabs(x[j]));
        assert_true(mx <= bound[i] * (1 + 1e-6));
        assert_true(mx > 0.3 * bound[i]); /* spread over the range */
        free(x);
        free(y);
    }
    assert_int_equal(pfx_encoder_init_random(b, 100, 2.0f), PFX_SUCCESS);
    float *x = read_all(pfx_encoder_tensor(a, PFX_ENCODER_E));
    float *y = read_all(pfx_encoder_tensor(b, PFX_ENCODER_E));
    assert_true(memcmp(x, y, ref_encoder_param_count(d, 0) * sizeof(float)) != 0);
    free(x);
    free(y);
    assert_status_names(rt, pfx_encoder_init_random(a, 1, NAN), PFX_ERROR_NOT_FINITE, "scale");
    assert_status_names(rt, pfx_encoder_init_random(a, 1, -1.0f), PFX_ERROR_INVALID_ARGUMENT,
                        "scale");
    assert_string_equal(pfx_encoder_param_name(PFX_ENCODER_W2),
                        "prefix_encoder.transform.2.weight");
    assert_null(pfx_encoder_param_name((pfx_encoder_param)5));
    assert_null(pfx_encoder_tensor(a, (pfx_encoder_param)5));
    pfx_encoder_params q;
    assert_int_equal(pfx_encoder_get_params(a, &q), PFX_SUCCESS);
    assert_int_equal(q.hidden_dim, 9);
    assert_false(q.direct);
    pfx_encoder_destroy(&a);
    pfx_encoder_destroy(&b);
}

/* ---- bad inputs ---- */

static void test_bad_inputs(void **state)
{
    pfx_runtime *rt = *state;
    const ref_encoder_dims *d = &small;
    size_t base = pfx_test_live_bytes(rt);
    pfx_encoder_params p = params_of(d);
    pfx_encoder *enc = NULL;

    /* create */
    assert_status_names(NULL, pfx_encoder_create(NULL, &p, &enc), PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(rt, pfx_encoder_create(rt, NULL, &enc), PFX_ERROR_NULL_ARGUMENT, "params");
    assert_status_names(rt, pfx_encoder_create(rt, &p, NULL), PFX_ERROR_NULL_ARGUMENT, "out");
    pfx_encoder_params bad = p;
    bad.kv_heads = 0;
    assert_status_names(rt, pfx_encoder_create(rt, &bad, &enc), PFX_ERROR_INVALID_SHAPE,
                        "params.kv_heads");
    assert_null(enc);
    bad = p;
    bad.embed_dim = 0;
    assert_status_names(rt, pfx_encoder_create(rt, &bad, &enc), PFX_ERROR_INVALID_SHAPE,
                        "params.embed_dim");
    bad = p;
    bad.prefix_dtype = (pfx_dtype)7;
    assert_status_names(rt, pfx_encoder_create(rt, &bad, &enc), PFX_ERROR_INVALID_ARGUMENT,
                        "params.prefix_dtype");
    bad = p;
    bad.head_dim = SIZE_MAX / 2;
    assert_status_names(rt, pfx_encoder_create(rt, &bad, &enc), PFX_ERROR_SIZE_OVERFLOW,
                        "overflow");
    bad = p;
    bad.hidden_dim = (size_t)1 << 40; /* counts fine, far past the device */
    assert_int_equal(pfx_encoder_create(rt, &bad, &enc), PFX_ERROR_OUT_OF_MEMORY);
    assert_null(enc);
    assert_int_equal(pfx_test_live_bytes(rt), base); /* nothing leaked on failure */

    float *host[5];
    enc = random_encoder(rt, d, 71, host);
    pfx_tensor **t = prefixes(rt, d, PFX_DTYPE_F32);
    pfx_tensor *k[3] = { t[0], t[1], t[2] }, *v[3] = { t[3], t[4], t[5] };

    /* forward */
    assert_status_names(NULL, pfx_encoder_forward(NULL, k, v), PFX_ERROR_NULL_ARGUMENT, "enc");
    assert_status_names(rt, pfx_encoder_forward(enc, NULL, v), PFX_ERROR_NULL_ARGUMENT, "prefix_k");
    assert_status_names(rt, pfx_encoder_forward(enc, k, NULL), PFX_ERROR_NULL_ARGUMENT, "prefix_v");
    v[2] = NULL;
    assert_status_names(rt, pfx_encoder_forward(enc, k, v), PFX_ERROR_NULL_ARGUMENT, "prefix_v[2]");
    pfx_tensor *wrong = tensor(rt, PFX_DTYPE_F32, 3, d->kv_heads, d->prefix_len + 1, d->head_dim);
    v[2] = wrong;
    assert_status_names(rt, pfx_encoder_forward(enc, k, v), PFX_ERROR_INVALID_SHAPE, "prefix_v[2]");
    pfx_tensor *flat = tensor(rt, PFX_DTYPE_F32, 1, ref_encoder_prefix_count(d), 0, 0);
    k[1] = flat;
    v[2] = t[5];
    assert_status_names(rt, pfx_encoder_forward(enc, k, v), PFX_ERROR_INVALID_SHAPE, "prefix_k[1]");
    k[1] = t[5]; /* also v[2] */
    assert_status_names(rt, pfx_encoder_forward(enc, k, v), PFX_ERROR_ALIASING, "prefix_v[2]");
    k[1] = t[1];
    pfx_runtime *other = pfx_test_runtime();
    pfx_tensor *foreign = tensor(other, PFX_DTYPE_F32, 3, d->kv_heads, d->prefix_len, d->head_dim);
    k[0] = foreign;
    assert_status_names(rt, pfx_encoder_forward(enc, k, v), PFX_ERROR_RUNTIME_MISMATCH,
                        "prefix_k[0]");
    k[0] = t[0];

    /* backward */
    pfx_tensor *g[5];
    float *init[5];
    ref_rng rng;
    ref_rng_seed(&rng, 72);
    grad_tensors(rt, enc, &rng, g, init);
    pfx_encoder_grads grads = { .de = g[0], .dw1 = g[1], .db1 = g[2], .dw2 = g[3], .db2 = g[4] };
    const pfx_tensor *dk[3] = { t[0], t[1], t[2] }, *dv[3] = { t[3], t[4], t[5] };
    assert_status_names(rt, pfx_encoder_backward(enc, dk, dv, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "grads");
    dv[1] = wrong;
    assert_status_names(rt, pfx_encoder_backward(enc, dk, dv, &grads), PFX_ERROR_INVALID_SHAPE,
                        "dprefix_v[1]");
    dv[1] = foreign;
    assert_status_names(rt, pfx_encoder_backward(enc, dk, dv, &grads), PFX_ERROR_RUNTIME_MISMATCH,
                        "dprefix_v[1]");
    dv[1] = t[4];
    pfx_encoder_grads bg = grads;
    bg.dw1 = g[3]; /* W2's shape */
    assert_status_names(rt, pfx_encoder_backward(enc, dk, dv, &bg), PFX_ERROR_INVALID_SHAPE,
                        "grads->dw1");
    bg = grads;
    pfx_tensor *half = tensor(rt, PFX_DTYPE_F16, 1, d->hidden_dim, 0, 0);
    bg.db1 = half;
    assert_status_names(rt, pfx_encoder_backward(enc, dk, dv, &bg), PFX_ERROR_DTYPE_MISMATCH,
                        "grads->db1");
    bg = grads;
    bg.de = pfx_encoder_tensor(enc, PFX_ENCODER_E);
    assert_status_names(rt, pfx_encoder_backward(enc, dk, dv, &bg), PFX_ERROR_ALIASING,
                        "grads->de");
    pfx_tensor *gf = tensor(other, PFX_DTYPE_F32, 1, d->hidden_dim, 0, 0);
    bg = grads;
    bg.db1 = gf;
    assert_status_names(rt, pfx_encoder_backward(enc, dk, dv, &bg), PFX_ERROR_RUNTIME_MISMATCH,
                        "grads->db1");
    /* Nothing above was enqueued: the gradients still hold their init values. */
    for (int i = 0; i < 5; i++) {
        float *x = read_all(g[i]);
        assert_memory_equal(x, init[i], pfx_tensor_numel(g[i]) * sizeof(float));
        free(x);
    }
    for (int i = 0; i < 5; i++) {
        free(init[i]);
        pfx_tensor_destroy(&g[i]);
    }
    pfx_tensor_destroy(&half);
    pfx_tensor_destroy(&gf);
    pfx_tensor_destroy(&foreign);
    pfx_runtime_destroy(&other);
    pfx_tensor_destroy(&wrong);
    pfx_tensor_destroy(&flat);
    free_prefixes(t, d->layers);
    free_host(host);
    assert_status_names(NULL, pfx_encoder_bake(NULL), PFX_ERROR_NULL_ARGUMENT, "enc");
    pfx_encoder_param_counts c;
    assert_status_names(NULL, pfx_encoder_counts(NULL, &c), PFX_ERROR_NULL_ARGUMENT, "enc");
    pfx_encoder_destroy(&enc);
    assert_int_equal(pfx_test_live_bytes(rt), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),         cmocka_unit_test(test_reference_fd),
        cmocka_unit_test(test_gemm_shapes),    cmocka_unit_test(test_gemm_batched),
        cmocka_unit_test(test_gemm_errors),    cmocka_unit_test(test_gemm_backend),
        cmocka_unit_test(test_gemm_zero_copy), cmocka_unit_test(test_gemm_order),
        cmocka_unit_test(test_forward),        cmocka_unit_test(test_backward),
        cmocka_unit_test(test_determinism),    cmocka_unit_test(test_bake),
        cmocka_unit_test(test_direct),         cmocka_unit_test(test_init_random),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests_name("encoder", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
