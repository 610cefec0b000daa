/* Tensors: round trips at awkward sizes, half precision, bfloat16 rounding
 * and Q8_0 blocks against the double reference, fill, copy, and every bad
 * input with its status, its message and clean accounting. */
#include <float.h>
#include <math.h>

#include "pfx_test.h"
#include "reference/random.h"
#include "reference/storage_ref.h"

static void round_trip(pfx_runtime *rt, pfx_dtype dtype, size_t n)
{
    float *src = malloc(n * sizeof(float)), *dst = malloc(n * sizeof(float));
    assert_non_null(src);
    assert_non_null(dst);
    ref_rng rng;
    ref_rng_seed(&rng, 1000 + n);
    ref_rng_fill(&rng, src, n, -3.0f, 3.0f);
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, dtype, 1, &n, &t), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_numel(t), n);
    assert_int_equal(pfx_tensor_write(t, 0, n, src), PFX_SUCCESS);
    memset(dst, 0, n * sizeof(float));
    assert_int_equal(pfx_tensor_read(t, 0, n, dst), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        if (dtype == PFX_DTYPE_F32) {
            assert_memory_equal(&src[i], &dst[i], sizeof(float));
        } else if (dtype == PFX_DTYPE_BF16) {
            const float want = ref_round_bf16(src[i]);
            if (memcmp(&want, &dst[i], sizeof(float)))
                fail_msg("bfloat16 at %zu: %a -> %a, not %a", i, (double)src[i], (double)dst[i],
                         (double)want);
        } else if (fabsf(dst[i] - src[i]) > fabsf(src[i]) * 0x1p-11f + 0x1p-25f) {
            /* half keeps 11 significant bits: relative error <= 2^-11 */
            fail_msg("half round trip at %zu: %g -> %g", i, (double)src[i], (double)dst[i]);
        }
    }
    /* A partial write and read in the middle. */
    if (n > 2) {
        float mid[2] = { 1.5f, -2.25f }, back[2];
        assert_int_equal(pfx_tensor_write(t, n / 2, 2, mid), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(t, n / 2, 2, back), PFX_SUCCESS);
        assert_memory_equal(mid, back, sizeof(mid)); /* both exact in half too */
    }
    pfx_tensor_destroy(&t);
    assert_null(t);
    free(src);
    free(dst);
}

static void round_trips(pfx_runtime *rt, pfx_dtype dtype)
{
    const size_t sizes[] = { 1, 7, 1023, (1u << 20) + 3 };
    for (size_t i = 0; i < 4; i++)
        round_trip(rt, dtype, sizes[i]);
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

static void test_round_trip_f32(void **state)
{
    round_trips(*state, PFX_DTYPE_F32);
}

static void test_round_trip_f16(void **state)
{
    round_trips(*state, PFX_DTYPE_F16);
}

static void test_round_trip_bf16(void **state)
{
    round_trips(*state, PFX_DTYPE_BF16);
}

/* Ties to even, subnormals, overflow and NaN, each against the reference. */
static void test_bf16_rounding(void **state)
{
    pfx_runtime *rt = *state;
    const float in[] = { 0.0f,
                         -0.0f,
                         1.0f + 0x1p-8f,               /* tie: down to the even 1 */
                         1.0f + 3 * 0x1p-8f,           /* tie: up to the even 1 + 2^-6 */
                         -(1.0f + 0x1p-8f + 0x1p-20f), /* past the tie: away from 1 */
                         0x1p-133f,
                         0x1p-134f, /* tie with 0: to 0 */
                         3 * 0x1p-134f,
                         0x1.fep127f,
                         FLT_MAX, /* rounds to inf */
                         -FLT_MAX,
                         INFINITY,
                         NAN,
                         3.14159265f,
                         -2.71828183e-30f };
    const size_t n = sizeof(in) / sizeof(in[0]);
    float out[sizeof(in) / sizeof(in[0])];
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_BF16, 1, &n, &t), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(t, 0, n, in), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(t, 0, n, out), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        const float want = ref_round_bf16(in[i]);
        if (isnan(in[i]))
            assert_true(isnan(out[i]));
        else if (memcmp(&want, &out[i], sizeof(float)))
            fail_msg("bfloat16 of %a: %a, not %a", (double)in[i], (double)out[i], (double)want);
    }
    assert_true(out[2] == 1.0f && out[3] == 1.0f + 0x1p-6f && out[6] == 0.0f);
    assert_true(isinf(out[9]) && out[9] > 0 && isinf(out[10]) && out[10] < 0);
    pfx_tensor_destroy(&t);
}

static void test_half_special_values(void **state)
{
    pfx_runtime *rt = *state;
    const float in[] = { 0.0f, -0.0f, 65504.0f, 1e6f, -1e6f, 0x1p-24f, 0x1p-14f, INFINITY, NAN };
    const size_t n = sizeof(in) / sizeof(in[0]);
    float out[sizeof(in) / sizeof(in[0])];
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 1, &n, &t), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(t, 0, n, in), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(t, 0, n, out), PFX_SUCCESS);
    assert_true(out[0] == 0.0f && !signbit(out[0]));
    assert_true(out[1] == 0.0f && signbit(out[1]));
    assert_true(out[2] == 65504.0f);
    assert_true(isinf(out[3]) && out[3] > 0); /* overflow rounds to inf */
    assert_true(isinf(out[4]) && out[4] < 0);
    assert_true(out[5] == 0x1p-24f); /* smallest subnormal */
    assert_true(out[6] == 0x1p-14f); /* smallest normal */
    assert_true(isinf(out[7]));
    assert_true(isnan(out[8]));
    pfx_tensor_destroy(&t);
}

static void test_fill_and_copy(void **state)
{
    pfx_runtime *rt = *state;
    const size_t shape[3] = { 3, 5, 7 };
    const size_t n = 105;
    for (pfx_dtype dt = PFX_DTYPE_F32; dt <= PFX_DTYPE_BF16; dt++) {
        pfx_tensor *a = NULL, *b = NULL;
        assert_int_equal(pfx_tensor_create(rt, dt, 3, shape, &a), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, dt, 3, shape, &b), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_ndim(a), 3);
        assert_int_equal(pfx_tensor_dim(a, 2), 7);
        assert_int_equal(pfx_tensor_dim(a, 3), 0);
        assert_int_equal(pfx_tensor_dtype(a), dt);
        assert_ptr_equal(pfx_tensor_runtime(a), rt);
        assert_int_equal(pfx_tensor_fill(a, -1.25f), PFX_SUCCESS);
        float out[105];
        assert_int_equal(pfx_tensor_read(a, 0, n, out), PFX_SUCCESS);
        for (size_t i = 0; i < n; i++)
            assert_true(out[i] == -1.25f);
        float src[105];
        ref_rng rng;
        ref_rng_seed(&rng, 7);
        ref_rng_fill(&rng, src, n, -1.0f, 1.0f);
        assert_int_equal(pfx_tensor_write(a, 0, n, src), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_fill(b, 9.0f), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_copy(b, a), PFX_SUCCESS);
        float got_a[105], got_b[105];
        assert_int_equal(pfx_tensor_read(a, 0, n, got_a), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(b, 0, n, got_b), PFX_SUCCESS);
        assert_memory_equal(got_a, got_b, sizeof(got_a));
        pfx_tensor_destroy(&a);
        pfx_tensor_destroy(&b);
    }
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

static void test_accounting(void **state)
{
    pfx_runtime *rt = *state;
    const size_t shape[2] = { 10, 10 };
    pfx_tensor *a = NULL, *b = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shape, &a), PFX_SUCCESS);
    assert_int_equal(pfx_test_live_bytes(rt), 400);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 2, shape, &b), PFX_SUCCESS);
    pfx_memory_stats m;
    assert_int_equal(pfx_runtime_memory(rt, &m), PFX_SUCCESS);
    assert_int_equal(m.live_bytes, 600);
    assert_int_equal(m.live_buffers, 2);
    assert_true(m.peak_bytes >= 600);
    pfx_tensor_destroy(&a);
    pfx_tensor_destroy(&b);
    pfx_tensor_destroy(&b); /* NULL-safe */
    pfx_tensor_destroy(NULL);
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

static void test_bad_create(void **state)
{
    pfx_runtime *rt = *state;
    pfx_tensor *t = (pfx_tensor *)0x1;
    const size_t shape[4] = { 2, 3, 4, 5 };
    assert_status_names(NULL, pfx_tensor_create(NULL, PFX_DTYPE_F32, 1, shape, &t),
                        PFX_ERROR_NULL_ARGUMENT, "rt");
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, NULL),
                        PFX_ERROR_NULL_ARGUMENT, "out");
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 1, NULL, &t),
                        PFX_ERROR_NULL_ARGUMENT, "shape");
    assert_null(t);
    assert_status_names(rt, pfx_tensor_create(rt, (pfx_dtype)7, 1, shape, &t),
                        PFX_ERROR_INVALID_ARGUMENT, "dtype");
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 0, shape, &t),
                        PFX_ERROR_INVALID_SHAPE, "ndim");
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 5, shape, &t),
                        PFX_ERROR_INVALID_SHAPE, "ndim");
    const size_t zero[3] = { 4, 0, 2 };
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 3, zero, &t),
                        PFX_ERROR_INVALID_SHAPE, "shape[1]");
    const size_t huge[2] = { SIZE_MAX / 2, 3 };
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 2, huge, &t),
                        PFX_ERROR_SIZE_OVERFLOW, "shape[1]");
    const size_t bytes_overflow[1] = { SIZE_MAX / 3 };
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 1, bytes_overflow, &t),
                        PFX_ERROR_SIZE_OVERFLOW, "overflow");
    /* Fits in size_t but not on the device. */
    const size_t too_big[1] = { (size_t)1 << 60 };
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 1, too_big, &t),
                        PFX_ERROR_OUT_OF_MEMORY, "bytes");
    assert_null(t);
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

static void test_bad_transfers(void **state)
{
    pfx_runtime *rt = *state;
    const size_t n = 10;
    float host[11] = { 0 };
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &t), PFX_SUCCESS);
    assert_status_names(NULL, pfx_tensor_write(NULL, 0, 1, host), PFX_ERROR_NULL_ARGUMENT, "t");
    assert_status_names(rt, pfx_tensor_write(t, 0, 1, NULL), PFX_ERROR_NULL_ARGUMENT, "src");
    assert_status_names(rt, pfx_tensor_read(t, 0, 1, NULL), PFX_ERROR_NULL_ARGUMENT, "dst");
    assert_status_names(rt, pfx_tensor_write(t, 0, 11, host), PFX_ERROR_OUT_OF_RANGE,
                        "10 elements");
    assert_status_names(rt, pfx_tensor_read(t, 5, 6, host), PFX_ERROR_OUT_OF_RANGE, "10 elements");
    assert_status_names(rt, pfx_tensor_read(t, 11, 0, host), PFX_ERROR_OUT_OF_RANGE, "10 elements");
    assert_status_names(rt, pfx_tensor_read(t, SIZE_MAX, 2, host), PFX_ERROR_OUT_OF_RANGE,
                        "outside");
    assert_int_equal(pfx_tensor_read(t, 10, 0, host), PFX_SUCCESS); /* empty range at the end */
    assert_status_names(NULL, pfx_tensor_fill(NULL, 1.0f), PFX_ERROR_NULL_ARGUMENT, "t");

    pfx_tensor *other = NULL, *half = NULL, *small = NULL;
    const size_t m = 9;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 1, &n, &half), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &m, &small), PFX_SUCCESS);
    assert_status_names(rt, pfx_tensor_copy(t, NULL), PFX_ERROR_NULL_ARGUMENT, "src");
    assert_status_names(rt, pfx_tensor_copy(NULL, t), PFX_ERROR_NULL_ARGUMENT, "dst");
    assert_status_names(rt, pfx_tensor_copy(t, half), PFX_ERROR_DTYPE_MISMATCH, "dtype");
    assert_status_names(rt, pfx_tensor_copy(t, small), PFX_ERROR_INVALID_SHAPE, "elements");

    /* A tensor of another runtime. */
    pfx_runtime *rt2 = pfx_test_runtime();
    assert_int_equal(pfx_tensor_create(rt2, PFX_DTYPE_F32, 1, &n, &other), PFX_SUCCESS);
    assert_status_names(rt, pfx_tensor_copy(t, other), PFX_ERROR_RUNTIME_MISMATCH, "runtimes");
    pfx_tensor_destroy(&other);
    assert_int_equal(pfx_test_live_bytes(rt2), 0);
    pfx_runtime_destroy(&rt2);
    assert_null(rt2);
    pfx_runtime_destroy(&rt2); /* NULL-safe */
    pfx_runtime_destroy(NULL);

    pfx_tensor_destroy(&half);
    pfx_tensor_destroy(&small);
    pfx_tensor_destroy(&t);
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

/* Q8_0 blocks against the reference: values exact, each within half a step
 * of its input; partial reads; whole-block writes; the bytes. */
static void test_q8_0(void **state)
{
    pfx_runtime *rt = *state;
    const size_t shape[3] = { 3, 5, 96 }, n = 3 * 5 * 96;
    float src[1440], want[1440], got[1440];
    ref_rng rng;
    ref_rng_seed(&rng, 2417);
    ref_rng_fill(&rng, src, n, -3.0f, 3.0f);
    /* a block of zeros, one of tiny values, one spike, one whose scale is
     * below half's range but whose inverse overflows float */
    for (size_t i = 0; i < 32; i++)
        src[i] = 0.0f, src[32 + i] = 1e-9f * (float)i, src[64 + i] = i == 7 ? 500.0f : 0.01f,
        src[96 + i] = i == 3 ? 1e-40f : 0.0f;
    ref_q8_0(src, n, want);
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_Q8_0, 3, shape, &t), PFX_SUCCESS);
    assert_int_equal(pfx_test_live_bytes(rt), n / 32 * 34);
    assert_int_equal(pfx_tensor_write(t, 0, n, src), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(t, 0, n, got), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&want[i], &got[i], sizeof(float)))
            fail_msg("Q8_0 at %zu: %a -> %a, not %a", i, (double)src[i], (double)got[i],
                     (double)want[i]);
        double amax = 0.0;
        for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; j++)
            amax = fmax(amax, fabs((double)src[j]));
        /* half a step d = amax / 127, plus 127 times the scale's rounding to
         * half (relative 2^-11, absolute 2^-25 among subnormals) */
        const double d = amax / 127.0;
        assert_true(fabs((double)got[i] - src[i]) <= d * (0.5 + 127 * 0x1p-11) + 127 * 0x1p-25);
    }
    assert_true(got[64 + 7] > 499.0f && got[64 + 7] < 501.0f && got[0] == 0.0f);
    for (size_t i = 96; i < 128; i++)
        assert_true(got[i] == 0.0f);
    float mid[40];
    assert_int_equal(pfx_tensor_read(t, 77, 40, mid), PFX_SUCCESS); /* across blocks */
    assert_memory_equal(mid, want + 77, sizeof(mid));
    float block[32];
    for (int j = 0; j < 32; j++)
        block[j] = (float)(j - 16) / 4.0f;
    assert_int_equal(pfx_tensor_write(t, 1408, 32, block), PFX_SUCCESS); /* the last block */
    assert_int_equal(pfx_tensor_read(t, 1408, 32, got), PFX_SUCCESS);
    ref_q8_0(block, 32, want);
    assert_memory_equal(got, want, 32 * sizeof(float));
    assert_int_equal(pfx_tensor_read(t, 0, 32, got), PFX_SUCCESS); /* the first untouched */
    for (int j = 0; j < 32; j++)
        assert_true(got[j] == 0.0f);

    /* fill and copy */
    pfx_tensor *u = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_Q8_0, 3, shape, &u), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(u, -1.25f), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(u, 0, n, got), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++)
        assert_true(got[i] == ref_round_half(1.25f / 127.0f) * -127.0f);
    assert_int_equal(pfx_tensor_copy(u, t), PFX_SUCCESS);
    float a[1440];
    assert_int_equal(pfx_tensor_read(t, 0, n, a), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(u, 0, n, got), PFX_SUCCESS);
    assert_memory_equal(a, got, sizeof(a));
    pfx_tensor_destroy(&u);

    /* what Q8_0 refuses, nothing written */
    assert_status_names(rt, pfx_tensor_write(t, 16, 32, src), PFX_ERROR_INVALID_ARGUMENT,
                        "whole blocks");
    assert_status_names(rt, pfx_tensor_write(t, 0, 40, src), PFX_ERROR_INVALID_ARGUMENT,
                        "whole blocks");
    float bad[64];
    memcpy(bad, src, sizeof(bad));
    bad[45] = NAN;
    assert_status_names(rt, pfx_tensor_write(t, 0, 64, bad), PFX_ERROR_INVALID_ARGUMENT,
                        "32 .. 63");
    bad[45] = 1e9f; /* a scale past half's range */
    assert_status_names(rt, pfx_tensor_write(t, 0, 64, bad), PFX_ERROR_INVALID_ARGUMENT,
                        "do not fit");
    assert_status_names(rt, pfx_tensor_fill(t, INFINITY), PFX_ERROR_INVALID_ARGUMENT, "fit");
    assert_int_equal(pfx_tensor_read(t, 0, 64, got), PFX_SUCCESS);
    assert_memory_equal(got, a, 64 * sizeof(float));
    pfx_tensor_destroy(&t);
    const size_t odd[2] = { 32, 48 };
    assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_Q8_0, 2, odd, &t),
                        PFX_ERROR_INVALID_SHAPE, "shape[1] = 48");
    assert_null(t);
    assert_int_equal(pfx_test_live_bytes(rt), 0);

    size_t bytes = 0;
    assert_true(pfx_dtype_bytes(PFX_DTYPE_Q8_0, 64, &bytes) && bytes == 68);
    assert_false(pfx_dtype_bytes(PFX_DTYPE_Q8_0, 33, &bytes));
    assert_false(pfx_dtype_bytes(PFX_DTYPE_F32, SIZE_MAX / 2, &bytes));
    assert_true(pfx_dtype_bytes(PFX_DTYPE_BF16, 3, &bytes) && bytes == 6);
    assert_int_equal(pfx_dtype_size(PFX_DTYPE_Q8_0), 0);
    assert_string_equal(pfx_dtype_name(PFX_DTYPE_Q8_0), "Q8_0");
    assert_string_equal(pfx_dtype_name((pfx_dtype)9), "unknown");
}

static void test_axpby(void **state)
{
    pfx_runtime *rt = *state;
    const size_t n = 1031;
    float x[1031], y[1031], got[1031];
    ref_rng rng;
    ref_rng_seed(&rng, 99);
    ref_rng_fill(&rng, x, n, -2.0f, 2.0f);
    ref_rng_fill(&rng, y, n, -2.0f, 2.0f);
    pfx_tensor *tx = NULL, *ty = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &tx), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &ty), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(tx, 0, n, x), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(ty, 0, n, y), PFX_SUCCESS);
    assert_int_equal(pfx_axpby(ty, 0.5f, tx, 2.0f), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(ty, 0, n, got), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(got[i], 0.5f * x[i] + 2.0f * y[i], 1e-6);
    assert_status_names(rt, pfx_axpby(ty, NAN, tx, 1.0f), PFX_ERROR_NOT_FINITE, "alpha");
    assert_status_names(rt, pfx_axpby(ty, 1.0f, NULL, 1.0f), PFX_ERROR_NULL_ARGUMENT, "x");
    pfx_tensor *tq = NULL; /* Q8_0 is no axpby operand: refused before anything is read */
    const size_t nq = 1024;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_Q8_0, 1, &nq, &tq), PFX_SUCCESS);
    pfx_tensor *tf = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &nq, &tf), PFX_SUCCESS);
    assert_status_names(rt, pfx_axpby(tq, 1.0f, tf, 0.0f), PFX_ERROR_DTYPE_MISMATCH, "y is Q8_0");
    assert_status_names(rt, pfx_axpby(tf, 1.0f, tq, 0.0f), PFX_ERROR_DTYPE_MISMATCH, "x is Q8_0");
    pfx_tensor_destroy(&tq);
    pfx_tensor_destroy(&tf);
    pfx_tensor_destroy(&tx);
    pfx_tensor_destroy(&ty);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_f32),
        cmocka_unit_test(test_round_trip_f16),
        cmocka_unit_test(test_round_trip_bf16),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_half_special_values),
        cmocka_unit_test(test_fill_and_copy),
        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_bad_create),
        cmocka_unit_test(test_bad_transfers),
        cmocka_unit_test(test_axpby),
        cmocka_unit_test(test_q8_0),
    };
    return cmocka_run_group_tests_name("tensors", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
