/*
 * Suite 'profile': prefixcl/profile.h. The kernel configurations listed to a
 * short and a full buffer, every vendor family present, one built on the
 * device and a made-up one refused; spans of device time around real work,
 * and every argument refused where it must be.
 */
#include "pfx_test.h"

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
    free(all);
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
    pfx_status st = pfx_span_end(&empty, &empty_ns);
    assert_null(empty);
    if (st == PFX_ERROR_UNSUPPORTED) {
        fprintf(stderr, "this device gives no marker times: %s\n", pfx_last_error(rt));
    } else {
        assert_int_equal(st, PFX_SUCCESS);
        assert_int_equal(pfx_span_begin(rt, &work), PFX_SUCCESS);
        for (int i = 0; i < 8; i++)
            assert_int_equal(pfx_axpby(y, 1.0f, x, 1.0f), PFX_SUCCESS);
        assert_int_equal(pfx_span_end(&work, &work_ns), PFX_SUCCESS);
        fprintf(stderr, "empty span %llu ns, 8 axpby of 1 Mi values %llu ns\n",
                (unsigned long long)empty_ns, (unsigned long long)work_ns);
        assert_true(work_ns > 0);
        assert_true(work_ns >= empty_ns);
    }
    /* the work happened: y = 2 + 9 * 0.5 */
    float v[3];
    assert_int_equal(pfx_tensor_read(y, n - 3, 3, v), PFX_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_true(v[i] == (st == PFX_SUCCESS ? 6.5f : 2.5f));

    /* arguments */
    assert_int_equal(pfx_span_begin(NULL, &work), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_span_begin(rt, NULL), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_span_end(NULL, &work_ns), PFX_ERROR_NULL_ARGUMENT);
    pfx_span *none = NULL;
    assert_int_equal(pfx_span_end(&none, &work_ns), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_span_begin(rt, &work), PFX_SUCCESS);
    assert_int_equal(pfx_span_end(&work, NULL), PFX_ERROR_NULL_ARGUMENT); /* still freed */
    assert_null(work);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_configs),
        cmocka_unit_test(test_span),
    };
    return cmocka_run_group_tests_name("profile", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
