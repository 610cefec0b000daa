/* Device discovery and the selector syntax. */
#include "pfx_test.h"
#include "device.h"

static void test_parse_good(void **state)
{
    (void)state;
    pfx_selector s;
    assert_true(pfx_selector_parse(NULL, &s));
    assert_int_equal(s.kind, PFX_SELECT_DEFAULT);
    assert_true(pfx_selector_parse("  ", &s));
    assert_int_equal(s.kind, PFX_SELECT_DEFAULT);
    assert_true(pfx_selector_parse("1:2", &s));
    assert_int_equal(s.kind, PFX_SELECT_INDEX);
    assert_int_equal(s.platform, 1);
    assert_int_equal(s.device, 2);
    assert_true(pfx_selector_parse(" 0:0 ", &s));
    assert_int_equal(s.kind, PFX_SELECT_INDEX);
    assert_true(pfx_selector_parse("GPU", &s));
    assert_int_equal(s.kind, PFX_SELECT_TYPE);
    assert_int_equal(s.type, PFX_DEVICE_GPU);
    assert_true(pfx_selector_parse("cpu", &s));
    assert_int_equal(s.type, PFX_DEVICE_CPU);
    assert_true(pfx_selector_parse("nvidia", &s));
    assert_int_equal(s.kind, PFX_SELECT_NAME);
    assert_string_equal(s.text, "nvidia");
    assert_true(pfx_selector_parse("gpus", &s)); /* a name, not the type */
    assert_int_equal(s.kind, PFX_SELECT_NAME);
}

static void test_parse_bad(void **state)
{
    (void)state;
    pfx_selector s;
    assert_false(pfx_selector_parse("1", &s));
    assert_false(pfx_selector_parse("1:", &s));
    assert_false(pfx_selector_parse("1:x", &s));
    assert_false(pfx_selector_parse("0:0:0", &s));
    char long_sel[400];
    memset(long_sel, 'a', sizeof(long_sel) - 1);
    long_sel[sizeof(long_sel) - 1] = '\0';
    assert_false(pfx_selector_parse(long_sel, &s));
}

static void test_matches(void **state)
{
    (void)state;
    pfx_device_info info = { .platform_index = 1, .device_index = 0, .type = PFX_DEVICE_GPU };
    strcpy(info.platform_name, "NVIDIA CUDA");
    strcpy(info.device_name, "NVIDIA H200");
    strcpy(info.vendor, "NVIDIA Corporation");
    pfx_selector s;
    pfx_selector_parse("h200", &s);
    assert_true(pfx_selector_matches(&s, &info));
    pfx_selector_parse("Cuda", &s);
    assert_true(pfx_selector_matches(&s, &info));
    pfx_selector_parse("pocl", &s);
    assert_false(pfx_selector_matches(&s, &info));
    pfx_selector_parse("1:0", &s);
    assert_true(pfx_selector_matches(&s, &info));
    pfx_selector_parse("0:1", &s);
    assert_false(pfx_selector_matches(&s, &info));
    pfx_selector_parse("gpu", &s);
    assert_true(pfx_selector_matches(&s, &info));
    pfx_selector_parse("cpu", &s);
    assert_false(pfx_selector_matches(&s, &info));
}

/* The rest needs a device: skipped as a whole when there is none. */
static void test_list_and_default(void **state)
{
    (void)state;
    size_t n = 0;
    assert_int_equal(pfx_device_count(&n), PFX_SUCCESS);
    assert_true(n > 0);
    pfx_device_info infos[16];
    size_t total = 0;
    assert_int_equal(pfx_device_list(infos, 16, &total), PFX_SUCCESS);
    assert_int_equal(total, n);
    for (size_t i = 0; i < n && i < 16; i++) {
        assert_true(infos[i].device_name[0] != '\0');
        assert_true(infos[i].compute_units > 0);
        assert_true(infos[i].max_work_group_size > 0);
        assert_true(infos[i].local_mem_bytes > 0);
    }
    pfx_device_info def;
    assert_int_equal(pfx_device_default(&def), PFX_SUCCESS);
    /* With no GPU the default is a CPU device. */
    bool any_gpu = false;
    for (size_t i = 0; i < n && i < 16; i++)
        any_gpu |= infos[i].type == PFX_DEVICE_GPU;
    assert_int_equal(def.type, any_gpu ? PFX_DEVICE_GPU : PFX_DEVICE_CPU);

    char sel[32];
    snprintf(sel, sizeof(sel), "%u:%u", def.platform_index, def.device_index);
    pfx_device_info by_index;
    assert_int_equal(pfx_device_select(sel, &by_index), PFX_SUCCESS);
    assert_string_equal(by_index.device_name, def.device_name);
}

static void test_no_match_lists_devices(void **state)
{
    (void)state;
    pfx_device_info info, def;
    assert_int_equal(pfx_device_default(&def), PFX_SUCCESS);
    assert_status_names(NULL, pfx_device_select("no-such-device-xyz", &info),
                        PFX_ERROR_DEVICE_NOT_FOUND, "no-such-device-xyz");
    assert_non_null(strstr(pfx_last_error(NULL), def.device_name));
    assert_status_names(NULL, pfx_device_select("99:0", &info), PFX_ERROR_DEVICE_NOT_FOUND, "99:0");
    assert_status_names(NULL, pfx_device_select("1:x", &info), PFX_ERROR_INVALID_ARGUMENT, "1:x");
    assert_status_names(NULL, pfx_device_select(NULL, NULL), PFX_ERROR_NULL_ARGUMENT, "info");

    pfx_runtime *rt = (pfx_runtime *)0x1;
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.device = "no-such-device-xyz";
    assert_status_names(NULL, pfx_runtime_create(&rt, &params), PFX_ERROR_DEVICE_NOT_FOUND,
                        "no-such-device-xyz");
    assert_null(rt);
}

static void test_environment_variable(void **state)
{
    (void)state;
    pfx_device_info def, info;
    assert_int_equal(pfx_device_default(&def), PFX_SUCCESS);
    char sel[32];
    snprintf(sel, sizeof(sel), "%u:%u", def.platform_index, def.device_index);
    setenv("PREFIXCL_DEVICE", sel, 1);
    assert_int_equal(pfx_device_select(NULL, &info), PFX_SUCCESS);
    assert_string_equal(info.device_name, def.device_name);
    setenv("PREFIXCL_DEVICE", "no-such-device-xyz", 1);
    assert_status_names(NULL, pfx_device_select(NULL, &info), PFX_ERROR_DEVICE_NOT_FOUND,
                        "no-such-device-xyz");
    pfx_runtime *rt = NULL;
    assert_status_names(NULL, pfx_runtime_create(&rt, NULL), PFX_ERROR_DEVICE_NOT_FOUND,
                        "no-such-device-xyz");
    /* An explicit selector wins over the variable. */
    assert_int_equal(pfx_device_select(sel, &info), PFX_SUCCESS);
    unsetenv("PREFIXCL_DEVICE");
    assert_int_equal(pfx_device_select(NULL, &info), PFX_SUCCESS);
}

/* pfx_device_matches: "P:D" names one record, "" the default's type, "cpu"
 * the CPU devices; bad input refused. */
static void test_device_matches(void **state)
{
    (void)state;
    size_t n = 0;
    assert_int_equal(pfx_device_list(NULL, 0, &n), PFX_SUCCESS);
    pfx_device_info *all = calloc(n, sizeof(*all));
    assert_non_null(all);
    assert_int_equal(pfx_device_list(all, n, &n), PFX_SUCCESS);
    pfx_device_info def;
    assert_int_equal(pfx_device_default(&def), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        char sel[32];
        snprintf(sel, sizeof(sel), "%u:%u", all[i].platform_index, all[i].device_index);
        for (size_t j = 0; j < n; j++) {
            bool m = !(i == j);
            assert_int_equal(pfx_device_matches(sel, &all[j], &m), PFX_SUCCESS);
            assert_true(m == (i == j));
        }
        bool m = false;
        assert_int_equal(pfx_device_matches("", &all[i], &m), PFX_SUCCESS);
        assert_true(m == (all[i].type == def.type));
        assert_int_equal(pfx_device_matches("cpu", &all[i], &m), PFX_SUCCESS);
        assert_true(m == (all[i].type == PFX_DEVICE_CPU));
    }
    bool m;
    assert_int_equal(pfx_device_matches("1:x", &all[0], &m), PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_device_matches("0:0", NULL, &m), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_device_matches("0:0", &all[0], NULL), PFX_ERROR_NULL_ARGUMENT);
    free(all);
}

int main(void)
{
    const struct CMUnitTest parsing[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_matches),
    };
    int failed = cmocka_run_group_tests_name("selector parsing", parsing, NULL, NULL);
    size_t n = 0;
    if (pfx_device_count(&n) != PFX_SUCCESS || n == 0) {
        fprintf(stderr, "no OpenCL device: device tests skipped\n");
        return failed ? failed : PFX_TEST_SKIP;
    }
    const struct CMUnitTest devices[] = {
        cmocka_unit_test(test_list_and_default),
        cmocka_unit_test(test_no_match_lists_devices),
        cmocka_unit_test(test_environment_variable),
        cmocka_unit_test(test_device_matches),
    };
    unsetenv("PREFIXCL_DEVICE");
    return failed + cmocka_run_group_tests_name("devices", devices, NULL, NULL);
}
