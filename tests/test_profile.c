/*
 * Suite 'profile': prefixcl/profile.h and prefixcl/matmul.h. The kernel
 * configurations listed to a short and a full buffer, every vendor family
 * present, one built on the device and a made-up one refused; the runtime's
 * own configurations; the kernel tuning override in effect; spans of device
 * time around real work; the peak kernels with their events (the copy's
 * output checked); pfx_matmul against the double reference at awkward sizes;
 * every argument refused where it must be. Run once per GEMM backend.
 */
#include <math.h>

#include "pfx_test.h"
#include "reference/matmul_ref.h"
#include "reference/random.h"
#include "tolerances.h"

static void test_kernel_configs(void **state)
{
    pfx_runtime *rt = *state;
    size_t total = 0, again = 0;
    assert_int_equal(pfx_kernel_configs(NULL, 0, &total), PFX_SUCCESS);
    assert_true(total > 5);
    pfx_kernel_config *all = calloc(total, sizeof(*all));
    assert_int_equal(pfx_kernel_configs(all, total, &again), PFX_SUCCESS);
    assert_int_equal(again, total);
    /* a short buffer: the first entries, and the full count */
    pfx_kernel_config two[2];
    assert_int_equal(pfx_kernel_configs(two, 2, &again), PFX_SUCCESS);
    assert_int_equal(again, total);
    assert_memory_equal(two, all, sizeof(two));
    static const char *const vendors[] = { "nvidia", "amd", "intel", "cpu", "other" };
    for (size_t v = 0; v < 5; v++) {
        size_t elementwise = 0;
        for (size_t i = 0; i < total; i++)
            elementwise +=
                !strcmp(all[i].vendor, vendors[v]) && !strcmp(all[i].program, "elementwise");
        if (elementwise != 1)
            fail_msg("vendor %s: %zu elementwise configurations", vendors[v], elementwise);
    }
    /* the elementwise program builds here; a made-up one is refused */
    pfx_kernel_config c = { .program = "elementwise", .vendor = "cpu", .options = "" };
    assert_int_equal(pfx_kernel_config_build(rt, &c), PFX_SUCCESS);
    snprintf(c.program, sizeof(c.program), "no_such_program");
    assert_int_equal(pfx_kernel_config_build(rt, &c), PFX_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(pfx_last_error(rt), "no_such_program"));
    memset(c.program, 'x', sizeof(c.program)); /* no terminating NUL */
    assert_int_equal(pfx_kernel_config_build(rt, &c), PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_kernel_config_build(NULL, &c), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_kernel_config_build(rt, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_kernel_configs(NULL, 0, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_kernel_configs(NULL, 3, &again), PFX_ERROR_NULL_ARGUMENT);
    /* each family's entries name its database entry and local memory */
    for (size_t i = 0; i < total; i++) {
        size_t len = strlen(all[i].vendor);
        if (strncmp(all[i].tuning_entry, all[i].vendor, len) || all[i].tuning_entry[len] != '/' ||
            all[i].local_mem_bytes < 16384)
            fail_msg("%s %s: entry '%s', %llu bytes", all[i].program, all[i].vendor,
                     all[i].tuning_entry, (unsigned long long)all[i].local_mem_bytes);
    }
    free(all);
}

/* What this runtime builds: its device's entry, both attention programs,
 * every configuration one that builds here. */
static void test_runtime_kernel_configs(void **state)
{
    pfx_runtime *rt = *state;
    size_t total = 0, again = 0;
    assert_int_equal(pfx_runtime_kernel_configs(rt, NULL, 0, &total), PFX_SUCCESS);
    assert_true(total > 5);
    pfx_kernel_config *all = calloc(total, sizeof(*all));
    assert_int_equal(pfx_runtime_kernel_configs(rt, all, total, &again), PFX_SUCCESS);
    assert_int_equal(again, total);
    size_t fwd = 0, bwd = 0;
    for (size_t i = 0; i < total; i++) {
        assert_string_equal(all[i].vendor, "device");
        assert_string_equal(all[i].tuning_entry, all[0].tuning_entry);
        assert_int_equal(all[i].local_mem_bytes, pfx_runtime_device(rt)->local_mem_bytes);
        fwd += !strcmp(all[i].program, "attention_fwd");
        bwd += !strcmp(all[i].program, "attention_bwd");
    }
    assert_true(fwd > 0 && bwd > 0);
    assert_non_null(strchr(all[0].tuning_entry, '/'));
    pfx_kernel_config one;
    assert_int_equal(pfx_runtime_kernel_configs(rt, &one, 1, &again), PFX_SUCCESS);
    assert_int_equal(again, total);
    assert_memory_equal(&one, all, sizeof(one));
    assert_int_equal(pfx_kernel_config_build(rt, &all[total - 1]), PFX_SUCCESS);
    assert_int_equal(pfx_runtime_kernel_configs(NULL, NULL, 0, &again), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_runtime_kernel_configs(rt, NULL, 0, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_runtime_kernel_configs(rt, NULL, 2, &again), PFX_ERROR_NULL_ARGUMENT);
    free(all);
}

/* The override a runtime would apply: from $PREFIXCL_TUNING, normalized; a
 * malformed one refused. */
static void test_kernel_tuning_override(void **state)
{
    (void)state;
    assert_null(getenv("PREFIXCL_TUNING")); /* the suite runs without one */
    pfx_kernel_tuning_override o;
    setenv("PREFIXCL_TUNING", "attention_fwd BLOCK_M=4", 1);
    assert_int_equal(pfx_kernel_tuning_override_get(&o), PFX_SUCCESS);
    assert_true(o.present);
    assert_string_equal(o.source, "$PREFIXCL_TUNING");
    assert_string_equal(o.text, "attention_fwd -DPFX_ATTN_BLOCK_M=4");
    setenv("PREFIXCL_TUNING", "attention_fwd NO_SUCH_FIELD=4", 1);
    assert_int_equal(pfx_kernel_tuning_override_get(&o), PFX_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(pfx_last_error(NULL), "NO_SUCH_FIELD"));
    unsetenv("PREFIXCL_TUNING");
    assert_int_equal(pfx_kernel_tuning_override_get(NULL), PFX_ERROR_NULL_ARGUMENT);
}

/* Launch statistics: counts what ran while on, nothing while off; a host
 * product is counted apart when the runtime's products run on the host. */
static void test_launch_stats(void **state)
{
    pfx_runtime *rt = *state;
    const size_t n = 1 << 16;
    size_t shape[1] = { n }, sq[2] = { 96, 96 };
    pfx_tensor *x = NULL, *y = NULL, *a = NULL, *c = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &x), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &y), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, sq, &a), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, sq, &c), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(x, 0.5f), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(y, 2.0f), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(a, 0.25f), PFX_SUCCESS);
    assert_int_equal(pfx_matmul(rt, a, a, c), PFX_SUCCESS); /* builds before counting */

    pfx_launch_stats s;
    assert_int_equal(pfx_launch_stats_read(NULL, &s), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_launch_stats_read(rt, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_launch_stats_enable(NULL, true), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_launch_stats_read(rt, &s), PFX_ERROR_INVALID_ARGUMENT); /* off */
    assert_non_null(strstr(pfx_last_error(rt), "off"));

    assert_int_equal(pfx_launch_stats_enable(rt, true), PFX_SUCCESS);
    for (int i = 0; i < 5; i++)
        assert_int_equal(pfx_axpby(y, 1.0f, x, 1.0f), PFX_SUCCESS);
    assert_int_equal(pfx_matmul(rt, a, a, c), PFX_SUCCESS);
    pfx_status st = pfx_launch_stats_read(rt, &s);
    if (st == PFX_ERROR_UNSUPPORTED) {
        fprintf(stderr, "this device gives no kernel times: %s\n", pfx_last_error(rt));
    } else {
        assert_int_equal(st, PFX_SUCCESS);
        const bool host = pfx_runtime_gemm_backend(rt) == PFX_GEMM_HOST;
        /* five axpby kernels; CLBlast's kernels are not counted */
        assert_int_equal(s.kernels, 5);
        assert_true(s.device_ns > 0 && s.enqueue_ns > 0);
        assert_int_equal(s.host_gemms, host ? 1 : 0);
        assert_true(host ? s.host_gemm_ns > 0 : s.host_gemm_ns == 0);
        /* switching on again clears; off drops them */
        assert_int_equal(pfx_launch_stats_enable(rt, true), PFX_SUCCESS);
        assert_int_equal(pfx_launch_stats_read(rt, &s), PFX_SUCCESS);
        assert_int_equal(s.kernels, 0);
        assert_int_equal(s.device_ns, 0);
    }
    assert_int_equal(pfx_launch_stats_enable(rt, false), PFX_SUCCESS);
    assert_int_equal(pfx_axpby(y, 1.0f, x, 1.0f), PFX_SUCCESS);
    assert_int_equal(pfx_launch_stats_read(rt, &s), PFX_ERROR_INVALID_ARGUMENT);
    float v[1];
    assert_int_equal(pfx_tensor_read(y, 0, 1, v), PFX_SUCCESS);
    assert_true(v[0] == 5.0f); /* 2 + 6 * 0.5: the counted launches ran */
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y);
    pfx_tensor_destroy(&a);
    pfx_tensor_destroy(&c);
}

static void test_span(void **state)
{
    pfx_runtime *rt = *state;
    const size_t n = 1 << 20;
    size_t shape[1] = { n };
    pfx_tensor *x = NULL, *y = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &x), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &y), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(x, 0.5f), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(y, 2.0f), PFX_SUCCESS);
    assert_int_equal(pfx_axpby(y, 1.0f, x, 1.0f), PFX_SUCCESS); /* built before timing */
    assert_int_equal(pfx_runtime_finish(rt), PFX_SUCCESS);

    pfx_span *empty = NULL, *work = NULL;
    uint64_t empty_ns = 0, work_ns = 0;
    assert_int_equal(pfx_span_begin(rt, &empty), PFX_SUCCESS);
    assert_int_equal(pfx_span_time_ns(empty, &empty_ns), PFX_ERROR_INVALID_ARGUMENT); /* open */
    assert_int_equal(pfx_span_end(empty), PFX_SUCCESS);
    assert_int_equal(pfx_span_end(empty), PFX_ERROR_INVALID_ARGUMENT); /* twice */
    pfx_status st = pfx_span_time_ns(empty, &empty_ns);
    pfx_span_release(&empty);
    assert_null(empty);
    pfx_span_release(&empty); /* NULL-safe */
    if (st == PFX_ERROR_UNSUPPORTED) {
        fprintf(stderr, "this device gives no marker times: %s\n", pfx_last_error(rt));
    } else {
        assert_int_equal(st, PFX_SUCCESS);
        assert_int_equal(pfx_span_begin(rt, &work), PFX_SUCCESS);
        for (int i = 0; i < 8; i++)
            assert_int_equal(pfx_axpby(y, 1.0f, x, 1.0f), PFX_SUCCESS);
        assert_int_equal(pfx_span_end(work), PFX_SUCCESS);
        assert_int_equal(pfx_span_time_ns(work, &work_ns), PFX_SUCCESS);
        pfx_span_release(&work);
        fprintf(stderr, "empty span %llu ns, 8 axpby of 1 Mi values %llu ns\n",
                (unsigned long long)empty_ns, (unsigned long long)work_ns);
        /* no comparison of the two: on a loaded host an empty span can
         * take longer than real work, and timing is for benchmarks */
        assert_true(work_ns > 0);
    }
    /* the work happened: y = 2 + 9 * 0.5 */
    float v[3];
    assert_int_equal(pfx_tensor_read(y, n - 3, 3, v), PFX_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_true(v[i] == (st == PFX_SUCCESS ? 6.5f : 2.5f));

    /* arguments; a span released without an end */
    assert_int_equal(pfx_span_begin(NULL, &work), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_span_begin(rt, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_span_end(NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_span_time_ns(NULL, &work_ns), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_span_begin(rt, &work), PFX_SUCCESS);
    assert_int_equal(pfx_span_time_ns(work, NULL), PFX_ERROR_NULL_ARGUMENT);
    pfx_span_release(&work);
    assert_null(work);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y);
}

static void test_peak_kernels(void **state)
{
    pfx_runtime *rt = *state;
    const pfx_device_info *info = pfx_runtime_device(rt);
    size_t local = 64 <= info->max_work_group_size ? 64 : info->max_work_group_size;
    const size_t global = 16 * local;
    size_t shape[1] = { 4 * global };
    pfx_tensor *in = NULL, *out = NULL, *small = NULL, *half = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &in), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &out), PFX_SUCCESS);
    size_t one[1] = { global - 1 };
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, one, &small), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F16, 1, shape, &half), PFX_SUCCESS);
    float *h = malloc(4 * global * sizeof(float)), *back = malloc(4 * global * sizeof(float));
    ref_rng rng;
    ref_rng_seed(&rng, 91);
    ref_rng_fill(&rng, h, 4 * global, -3.0f, 3.0f);
    assert_int_equal(pfx_tensor_write(in, 0, 4 * global, h), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_fill(out, 0.0f), PFX_SUCCESS);

    /* the copy moves every value; its event has a time */
    pfx_event *ev = NULL;
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_COPY, global, local, in, out, &ev), PFX_SUCCESS);
    uint64_t ns = 0;
    pfx_status st = pfx_event_time_ns(ev, &ns);
    assert_true(st == PFX_SUCCESS || st == PFX_ERROR_UNSUPPORTED);
    pfx_event_release(&ev);
    assert_null(ev);
    pfx_event_release(&ev); /* NULL-safe */
    assert_int_equal(pfx_tensor_read(out, 0, 4 * global, back), PFX_SUCCESS);
    assert_memory_equal(back, h, 4 * global * sizeof(float));

    /* every FMA kernel this device has writes one value per work-item (chains
     * may overflow to inf: only that they were written counts) */
    /* the many-chain kernels: CPU devices other than Mesa's rusticl (registry.h) */
    const bool ilp = info->type == PFX_DEVICE_CPU && !strcasestr(info->platform_name, "rusticl");
    for (int k = PFX_PEAK_FMA_F1; k <= PFX_PEAK_FMA_ILP_F16; k++) {
        assert_true(pfx_peak_flops_per_item((pfx_peak_kernel)k) >= 4096);
        assert_int_equal(pfx_tensor_fill(out, NAN), PFX_SUCCESS);
        st = pfx_peak_enqueue(rt, (pfx_peak_kernel)k, global, local, NULL, out, NULL);
        if (k >= PFX_PEAK_FMA_ILP_F4 && !ilp) {
            assert_int_equal(st, PFX_ERROR_UNSUPPORTED);
            continue;
        }
        assert_int_equal(st, PFX_SUCCESS);
        assert_int_equal(pfx_tensor_read(out, 0, global + 1, back), PFX_SUCCESS);
        for (size_t i = 0; i < global; i++)
            assert_false(isnan(back[i]));
        assert_true(isnan(back[global])); /* one value per work-item, no more */
    }
    assert_true(pfx_peak_flops_per_item(PFX_PEAK_COPY) == 0);
    assert_true(pfx_peak_flops_per_item(PFX_PEAK_KERNEL_COUNT) == 0);

    /* arguments */
    assert_int_equal(pfx_peak_enqueue(NULL, PFX_PEAK_FMA_F1, global, local, NULL, out, NULL),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_FMA_F1, global, local, NULL, NULL, NULL),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_COPY, global, local, NULL, out, NULL),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_FMA_F1, global, local, in, out, NULL),
                     PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_KERNEL_COUNT, global, local, NULL, out, NULL),
                     PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_FMA_F1, global + 1, local, NULL, out, NULL),
                     PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_FMA_F1, global, 0, NULL, out, NULL),
                     PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_FMA_F1, global, local, NULL, small, NULL),
                     PFX_ERROR_OUT_OF_RANGE);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_FMA_F1, global, local, NULL, half, NULL),
                     PFX_ERROR_OUT_OF_RANGE);
    assert_int_equal(pfx_peak_enqueue(rt, PFX_PEAK_COPY, global, local, in, in, NULL),
                     PFX_ERROR_ALIASING);
    assert_int_equal(pfx_event_time_ns(NULL, &ns), PFX_ERROR_NULL_ARGUMENT);
    free(h);
    free(back);
    pfx_tensor_destroy(&in);
    pfx_tensor_destroy(&out);
    pfx_tensor_destroy(&small);
    pfx_tensor_destroy(&half);
}

static pfx_tensor *matrix(pfx_runtime *rt, pfx_dtype dtype, size_t rows, size_t cols,
                          const float *values)
{
    size_t shape[2] = { rows, cols };
    pfx_tensor *t = NULL;
    assert_int_equal(pfx_tensor_create(rt, dtype, 2, shape, &t), PFX_SUCCESS);
    if (values)
        assert_int_equal(pfx_tensor_write(t, 0, rows * cols, values), PFX_SUCCESS);
    return t;
}

static void test_matmul(void **state)
{
    pfx_runtime *rt = *state;
    static const size_t sizes[][3] = { { 1, 1, 1 },
                                       { 7, 13, 5 },
                                       { 33, 17, 29 },
                                       { 64, 3, 71 },
                                       { 1, 37, 53 } /* one row: matrix-vector on the host */ };
    ref_rng rng;
    ref_rng_seed(&rng, 4242);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        const size_t m = sizes[s][0], k = sizes[s][1], n = sizes[s][2];
        float *a = malloc(m * k * sizeof(float)), *b = malloc(k * n * sizeof(float));
        float *got = malloc(m * n * sizeof(float));
        double *ref = malloc(m * n * sizeof(double));
        ref_rng_fill(&rng, a, m * k, -1.0f, 1.0f);
        ref_rng_fill(&rng, b, k * n, -1.0f, 1.0f);
        pfx_tensor *ta = matrix(rt, PFX_DTYPE_F32, m, k, a),
                   *tb = matrix(rt, PFX_DTYPE_F32, k, n, b);
        pfx_tensor *tc = matrix(rt, PFX_DTYPE_F32, m, n, NULL);
        assert_int_equal(pfx_tensor_fill(tc, 123.0f), PFX_SUCCESS); /* overwritten, not added */
        if (pfx_matmul(rt, ta, tb, tc) != PFX_SUCCESS)
            fail_msg("%zu x %zu x %zu: %s", m, k, n, pfx_last_error(rt));
        assert_int_equal(pfx_tensor_read(tc, 0, m * n, got), PFX_SUCCESS);
        ref_matmul(a, b, ref, m, k, n);
        for (size_t i = 0; i < m * n; i++)
            if (fabs(got[i] - ref[i]) > TOL_ENC_F32 * fmax(1.0, fabs(ref[i])))
                fail_msg("%zu x %zu x %zu: c[%zu] = %.9g, reference %.9g", m, k, n, i,
                         (double)got[i], ref[i]);
        free(a);
        free(b);
        free(got);
        free(ref);
        pfx_tensor_destroy(&ta);
        pfx_tensor_destroy(&tb);
        pfx_tensor_destroy(&tc);
    }
    /* arguments */
    pfx_tensor *a = matrix(rt, PFX_DTYPE_F32, 4, 3, NULL),
               *b = matrix(rt, PFX_DTYPE_F32, 3, 5, NULL);
    pfx_tensor *c = matrix(rt, PFX_DTYPE_F32, 4, 5, NULL),
               *wrong = matrix(rt, PFX_DTYPE_F32, 4, 4, NULL);
    pfx_tensor *h = matrix(rt, PFX_DTYPE_F16, 3, 5, NULL),
               *sq = matrix(rt, PFX_DTYPE_F32, 4, 4, NULL);
    size_t flat[1] = { 15 };
    pfx_tensor *v = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, flat, &v), PFX_SUCCESS);
    assert_int_equal(pfx_matmul(NULL, a, b, c), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_matmul(rt, NULL, b, c), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_matmul(rt, a, NULL, c), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_matmul(rt, a, b, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_matmul(rt, a, h, c), PFX_ERROR_DTYPE_MISMATCH);
    assert_int_equal(pfx_matmul(rt, a, v, c), PFX_ERROR_INVALID_SHAPE);
    assert_int_equal(pfx_matmul(rt, a, b, wrong), PFX_ERROR_INVALID_SHAPE);
    assert_non_null(strstr(pfx_last_error(rt), "do not agree"));
    assert_int_equal(pfx_matmul(rt, sq, sq, sq), PFX_ERROR_ALIASING);
    pfx_runtime *other = pfx_test_runtime();
    pfx_tensor *oc = matrix(other, PFX_DTYPE_F32, 4, 5, NULL);
    assert_int_equal(pfx_matmul(rt, a, b, oc), PFX_ERROR_RUNTIME_MISMATCH);
    pfx_tensor_destroy(&oc);
    pfx_runtime_destroy(&other);
    pfx_tensor_destroy(&a);
    pfx_tensor_destroy(&b);
    pfx_tensor_destroy(&c);
    pfx_tensor_destroy(&wrong);
    pfx_tensor_destroy(&h);
    pfx_tensor_destroy(&sq);
    pfx_tensor_destroy(&v);
}

/* The FMA ceiling of prefixcl bench as one call (positive, finite, its
 * arguments checked), and the FLOPs of a training token as nanoGPT counts
 * them for GPT-2 small: 6 N + 12 L T d. */
static void test_fma_peak_and_flops(void **state)
{
    pfx_runtime *rt = *state;
    double g = -1.0;
    assert_int_equal(pfx_peak_fma_gflops(rt, 0.05, &g), PFX_SUCCESS);
    assert_true(g > 0.0 && isfinite(g));
    assert_int_equal(pfx_peak_fma_gflops(NULL, 0.05, &g), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_peak_fma_gflops(rt, 0.05, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_status_names(rt, pfx_peak_fma_gflops(rt, 0.0, &g), PFX_ERROR_INVALID_ARGUMENT,
                        "seconds");
    assert_int_equal(pfx_peak_fma_gflops(rt, NAN, &g), PFX_ERROR_INVALID_ARGUMENT);
    pfx_model_shape s = { .layers = 12, .heads = 12, .head_dim = 64, .parameters = 124439808 };
    assert_true(pfx_model_train_flops(&s, 1024, true) == 6.0 * 124439808 + 12.0 * 12 * 1024 * 768);
    assert_true(pfx_model_train_flops(&s, 128, false) == 4.0 * 124439808 + 12.0 * 12 * 128 * 768);
    assert_true(pfx_model_train_flops(NULL, 128, true) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_configs),
        cmocka_unit_test(test_runtime_kernel_configs),
        cmocka_unit_test(test_kernel_tuning_override),
        cmocka_unit_test(test_span),
        cmocka_unit_test(test_launch_stats),
        cmocka_unit_test(test_peak_kernels),
        cmocka_unit_test(test_fma_peak_and_flops),
        cmocka_unit_test(test_matmul),
    };
    return cmocka_run_group_tests_name("profile", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
