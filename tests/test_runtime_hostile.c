/* The runtime under hostile use: index selectors that would wrap, the strict
 * integer parser, allocations past the device's global memory, one runtime
 * entered from two threads, a FIFO in the kernel cache under an entry's name,
 * and messages that hold the detail without the status name. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "device.h"
#include "work_groups.h"

static char cache_dir[] = "/tmp/pfx-test-runtime-hostile-XXXXXX";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void test_selector_range(void **state)
{
    (void)state;
    pfx_selector s;
    assert_true(pfx_selector_parse("4294967295:4294967295", &s));
    assert_int_equal(s.platform, 4294967295u);
    assert_int_equal(s.device, 4294967295u);
    static const char *bad[] = { "4294967296:0", "0:4294967296", "18446744073709551616:0",
                                 "0:+1",         "0: 1",         "0:-0",
                                 "0x1:0",        "1:2 3" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (pfx_selector_parse(bad[i], &s))
            fail_msg("selector '%s' parsed as %u:%u", bad[i], s.platform, s.device);
    pfx_device_info info;
    assert_int_equal(pfx_device_select("4294967296:0", &info), PFX_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(pfx_last_error(NULL), "4294967296:0"));
    assert_true(strncmp(pfx_last_error(NULL), "PFX_", 4) != 0);
}

static void test_parse_uint(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(pfx_parse_uint("5", 10, &v), PFX_SUCCESS);
    assert_int_equal(v, 5);
    assert_int_equal(pfx_parse_uint("007", 10, &v), PFX_SUCCESS);
    assert_int_equal(v, 7);
    assert_int_equal(pfx_parse_uint("18446744073709551615", UINT64_MAX, &v), PFX_SUCCESS);
    assert_true(v == UINT64_MAX);
    static const char *bad[] = { "",     " 5",  "5 ",  "+5",  "-5",   " -5",
                                 "0x10", "1e3", "5\n", "\t5", "1,000" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 42;
        if (pfx_parse_uint(bad[i], UINT64_MAX, &v) != PFX_ERROR_INVALID_ARGUMENT)
            fail_msg("'%s' was not refused", bad[i]);
        assert_int_equal(v, 42);
    }
    assert_int_equal(pfx_parse_uint("11", 10, &v), PFX_ERROR_OUT_OF_RANGE);
    assert_int_equal(pfx_parse_uint("18446744073709551616", UINT64_MAX, &v),
                     PFX_ERROR_OUT_OF_RANGE);
    assert_int_equal(pfx_parse_uint("99999999999999999999999", UINT64_MAX, &v),
                     PFX_ERROR_OUT_OF_RANGE);
    assert_int_equal(v, 42);
    assert_int_equal(pfx_parse_uint(NULL, 1, &v), PFX_ERROR_NULL_ARGUMENT);
}

/* Allocations are counted against the device's global memory; the limit is
 * lowered here so that the test allocates little. */
static void test_overcommit(void **state)
{
    (void)state;
    for (int allow = 0; allow < 2; allow++) {
        pfx_runtime_params params;
        pfx_runtime_default_params(&params);
        params.allow_overcommit = allow;
        pfx_runtime *rt = NULL;
        assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
        const uint64_t limit = (uint64_t)1 << 20;
        rt->info.global_mem_bytes = limit;
        size_t shape[1] = { 150000 }; /* 600,000 bytes */
        pfx_tensor *a = NULL, *b = NULL, *c = NULL;
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &a), PFX_SUCCESS);
        if (!allow) {
            assert_status_names(rt, pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &b),
                                PFX_ERROR_OUT_OF_MEMORY, "allow_overcommit");
            assert_null(b);
            assert_int_equal(pfx_test_live_bytes(rt), 600000);
            /* what fits still fits */
            size_t small[1] = { (size_t)(limit - 600000) / 4 };
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, small, &c), PFX_SUCCESS);
        } else {
            assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &b), PFX_SUCCESS);
            assert_true(pfx_test_live_bytes(rt) > limit);
        }
        pfx_tensor_destroy(&a);
        pfx_tensor_destroy(&b);
        pfx_tensor_destroy(&c);
        assert_int_equal(pfx_test_live_bytes(rt), 0);
        pfx_runtime_destroy(&rt);
    }
}

/* ---------------------------------------------------------------- two threads */

typedef struct holder {
    pfx_runtime *rt;
    atomic_int phase; /* 1: inside, 2: may leave */
} holder;

static void *hold_runtime(void *arg)
{
    holder *h = arg;
    if (pfx_rt_enter(h->rt, "holder") != PFX_SUCCESS)
        return (void *)1;
    atomic_store(&h->phase, 1);
    while (atomic_load(&h->phase) != 2)
        usleep(1000);
    pfx_rt_leave(h->rt);
    return NULL;
}

typedef struct hammer {
    pfx_tensor *y, *x;
    int ok, busy, other;
} hammer;

static void *hammer_runtime(void *arg)
{
    hammer *w = arg;
    for (int i = 0; i < 300; i++) {
        pfx_status st = pfx_axpby(w->y, 0.5f, w->x, 0.5f);
        if (st == PFX_SUCCESS)
            w->ok++;
        else if (st == PFX_ERROR_BUSY)
            w->busy++;
        else
            w->other++;
    }
    return NULL;
}

static void test_two_threads(void **state)
{
    pfx_runtime *rt = *state;
    size_t shape[1] = { 4099 };
    pfx_tensor *x = NULL, *y1 = NULL, *y2 = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &x), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &y1), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &y2), PFX_SUCCESS);
    assert_int_equal(pfx_axpby(y1, 1.0f, x, 1.0f), PFX_SUCCESS); /* kernel built before the race */

    /* Deterministic: another thread is inside; this one is refused. */
    holder h = { .rt = rt };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_runtime, &h), 0);
    while (atomic_load(&h.phase) != 1)
        usleep(1000);
    pfx_tensor *z = NULL;
    assert_status_names(NULL, pfx_tensor_create(rt, PFX_DTYPE_F32, 1, shape, &z), PFX_ERROR_BUSY,
                        "another thread");
    assert_null(z);
    assert_status_names(NULL, pfx_axpby(y1, 1.0f, x, 1.0f), PFX_ERROR_BUSY, "another thread");
    atomic_store(&h.phase, 2);
    void *rc = NULL;
    assert_int_equal(pthread_join(t, &rc), 0);
    assert_null(rc);
    /* Handed back: this thread may use it again. */
    assert_int_equal(pfx_axpby(y1, 1.0f, x, 1.0f), PFX_SUCCESS);

    /* Racing launches: each either runs or is refused; nothing crashes. */
    hammer a = { .y = y1, .x = x }, b = { .y = y2, .x = x };
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, hammer_runtime, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, hammer_runtime, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    print_message("racing launches: %d + %d ran, %d + %d refused\n", a.ok, b.ok, a.busy, b.busy);
    assert_int_equal(a.other + b.other, 0);
    assert_int_equal(a.ok + a.busy, 300);
    assert_int_equal(pfx_runtime_finish(rt), PFX_SUCCESS);
    pfx_tensor_destroy(&x);
    pfx_tensor_destroy(&y1);
    pfx_tensor_destroy(&y2);
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

/* ---------------------------------------------------------------- kernel cache */

static bool find_cache_file(const char *dir, const char *prefix, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && n > 4 &&
            !strcmp(e->d_name + n - 4, ".bin")) {
            snprintf(out, cap, "%s/%s", dir, e->d_name);
            found = true;
        }
    }
    closedir(d);
    return found;
}

static void test_cache_fifo(void **state)
{
    (void)state;
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.cache_dir = cache_dir;
    pfx_runtime *rt = NULL;
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
    cl_kernel k;
    assert_int_equal(pfx_kernel_get(rt, "layer", PFX_LAYER_OPTIONS, "pfx_layer_mse", &k),
                     PFX_SUCCESS);
    pfx_runtime_destroy(&rt);
    char path[4096];
    assert_true(find_cache_file(cache_dir, "layer-", path, sizeof(path)));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0600), 0);

    alarm(120); /* a blocking open fails the test instead of hanging it */
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
    assert_int_equal(pfx_kernel_get(rt, "layer", PFX_LAYER_OPTIONS, "pfx_layer_mse", &k),
                     PFX_SUCCESS);
    pfx_cache_stats cs;
    assert_int_equal(pfx_runtime_cache_stats(rt, &cs), PFX_SUCCESS);
    assert_int_equal(cs.cache_rejects, 1);
    assert_int_equal(cs.cache_hits, 0);
    assert_int_equal(cs.programs_built, 1);
    pfx_runtime_destroy(&rt);
    alarm(0);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode)); /* rebuilt and written over the FIFO */
}

/* A cache folder that cannot be used (a regular file, a name over NAME_MAX):
 * the runtime is created, without its cache folder and override, and says
 * why; a folder without tuning.txt keeps its cache. */
static void test_cache_unusable(void **state)
{
    (void)state;
    char file[600], deep[1000];
    snprintf(file, sizeof(file), "%s/plain-file", cache_dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    snprintf(deep, sizeof(deep), "%s/%0300d", cache_dir, 0);
    const char *dirs[] = { file, deep };
    for (size_t i = 0; i < 2; i++) {
        pfx_runtime_params params;
        pfx_runtime_default_params(&params);
        params.cache_dir = dirs[i];
        pfx_runtime *rt = NULL;
        assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
        assert_string_equal(pfx_runtime_cache_dir(rt), "");
        assert_non_null(strstr(pfx_runtime_cache_note(rt), "kernel cache off"));
        assert_non_null(strstr(pfx_runtime_cache_note(rt), "tuning.txt"));
        assert_non_null(strstr(pfx_runtime_gemm_tuning(rt), "off"));
        pfx_runtime_destroy(&rt);
    }
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.cache_dir = cache_dir;
    pfx_runtime *rt = NULL;
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
    assert_string_equal(pfx_runtime_cache_dir(rt), cache_dir);
    assert_string_equal(pfx_runtime_cache_note(rt), "");
    pfx_runtime_destroy(&rt);
    assert_string_equal(pfx_runtime_cache_note(NULL), "");
}

int main(void)
{
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_selector_range),
        cmocka_unit_test(test_parse_uint),
    };
    const struct CMUnitTest device_tests[] = {
        cmocka_unit_test(test_overcommit),
        cmocka_unit_test(test_two_threads),
        cmocka_unit_test(test_cache_fifo),
        cmocka_unit_test(test_cache_unusable),
    };
    int failed = cmocka_run_group_tests_name("runtime_hostile_host", host_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("runtime_hostile_device", device_tests,
                                          pfx_test_group_setup, pfx_test_group_teardown);
    nftw(cache_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed;
}
