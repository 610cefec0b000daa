/* Program builds and the on-disk kernel cache: write, hit, corrupt, syntax
 * errors with the log, the cache folder, $PREFIXCL_KERNEL_DIR, and two
 * runtimes on two threads. */
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "program.h"
#include "reference/random.h"

typedef struct fixture {
    char dir[256];
} fixture;

static int setup(void **state)
{
    pfx_runtime_destroy(&(pfx_runtime *){ pfx_test_runtime() }); /* skip without a device */
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/prefixcl-cache-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    *state = f;
    return 0;
}

static void remove_dir(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
        remove(p);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

static int teardown(void **state)
{
    fixture *f = *state;
    remove_dir(f->dir);
    free(f);
    return 0;
}

static pfx_runtime *runtime_in(const char *dir)
{
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.cache_dir = dir;
    pfx_runtime *rt = NULL;
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
    assert_string_equal(pfx_runtime_cache_dir(rt), dir);
    return rt;
}

static pfx_cache_stats stats_of(pfx_runtime *rt)
{
    pfx_cache_stats s;
    assert_int_equal(pfx_runtime_cache_stats(rt, &s), PFX_SUCCESS);
    return s;
}

/* Runs axpby once and checks one element: the kernel really works. */
static void run_axpby(pfx_runtime *rt)
{
    const size_t n = 37;
    float x[37], y[37], got[37];
    ref_rng rng;
    ref_rng_seed(&rng, 5);
    ref_rng_fill(&rng, x, n, -1.0f, 1.0f);
    ref_rng_fill(&rng, y, n, -1.0f, 1.0f);
    pfx_tensor *tx = NULL, *ty = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &tx), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &ty), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(tx, 0, n, x), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_write(ty, 0, n, y), PFX_SUCCESS);
    assert_int_equal(pfx_axpby(ty, 3.0f, tx, -1.0f), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_read(ty, 0, n, got), PFX_SUCCESS);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(got[i], 3.0f * x[i] - y[i], 1e-6);
    pfx_tensor_destroy(&tx);
    pfx_tensor_destroy(&ty);
}

static size_t count_bin_files(const char *dir)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        n += len > 4 && !strcmp(e->d_name + len - 4, ".bin");
    }
    if (d)
        closedir(d);
    return n;
}

/* Applies damage to every cache file: 0 truncates, 1 flips a payload byte,
 * 2 empties it. */
static void damage_cache(const char *dir, int how)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".bin"))
            continue;
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        if (how == 0) {
            assert_int_equal(truncate(p, st.st_size / 2), 0);
        } else if (how == 1) {
            FILE *f = fopen(p, "r+b");
            assert_non_null(f);
            fseek(f, st.st_size - 10, SEEK_SET);
            int c = fgetc(f);
            fseek(f, st.st_size - 10, SEEK_SET);
            fputc(c ^ 0x5a, f);
            fclose(f);
        } else {
            assert_int_equal(truncate(p, 0), 0);
        }
    }
    if (d)
        closedir(d);
}

static void test_cache_write_then_hit(void **state)
{
    fixture *f = *state;
    pfx_runtime *rt = runtime_in(f->dir);
    run_axpby(rt);
    pfx_cache_stats s = stats_of(rt);
    assert_int_equal(s.programs_built, 1);
    assert_int_equal(s.cache_writes, 1);
    assert_int_equal(s.cache_hits, 0);
    assert_int_equal(count_bin_files(f->dir), 1);
    assert_true(s.build_seconds > 0.0); /* the build's time, which the jobs' rates leave out */
    run_axpby(rt);                      /* second use: the runtime's own table, no disk, no time */
    assert_int_equal(stats_of(rt).programs_built, 1);
    assert_true(stats_of(rt).build_seconds == s.build_seconds);
    pfx_runtime_destroy(&rt);

    rt = runtime_in(f->dir);
    run_axpby(rt);
    s = stats_of(rt);
    assert_int_equal(s.programs_built, 0);
    assert_int_equal(s.cache_hits, 1);
    assert_int_equal(s.cache_rejects, 0);
    pfx_runtime_destroy(&rt);
}

static void test_cache_corruption_rebuilds(void **state)
{
    fixture *f = *state;
    for (int how = 0; how < 3; how++) {
        pfx_runtime *rt = runtime_in(f->dir);
        run_axpby(rt); /* makes sure a good file exists */
        pfx_runtime_destroy(&rt);
        damage_cache(f->dir, how);

        rt = runtime_in(f->dir);
        run_axpby(rt);
        pfx_cache_stats s = stats_of(rt);
        assert_int_equal(s.cache_rejects, 1);
        assert_int_equal(s.cache_hits, 0);
        assert_int_equal(s.programs_built, 1);
        assert_int_equal(s.cache_writes, 1); /* the good binary replaces it */
        pfx_runtime_destroy(&rt);

        rt = runtime_in(f->dir);
        run_axpby(rt);
        assert_int_equal(stats_of(rt).cache_hits, 1);
        pfx_runtime_destroy(&rt);
    }
}

static void test_cache_disabled(void **state)
{
    (void)state;
    char dir[] = "/tmp/prefixcl-nocache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    pfx_runtime_params params;
    pfx_runtime_default_params(&params);
    params.cache_dir = dir;
    params.disable_cache = true;
    pfx_runtime *rt = NULL;
    assert_int_equal(pfx_runtime_create(&rt, &params), PFX_SUCCESS);
    assert_string_equal(pfx_runtime_cache_dir(rt), "");
    run_axpby(rt);
    pfx_cache_stats s = stats_of(rt);
    assert_int_equal(s.programs_built, 1);
    assert_int_equal(s.cache_writes, 0);
    assert_int_equal(count_bin_files(dir), 0);
    pfx_runtime_destroy(&rt);
    remove_dir(dir);
}

static void test_cache_dir_resolution(void **state)
{
    (void)state;
    char out[256];
    char *saved = getenv("PREFIXCL_CACHE_DIR") ? strdup(getenv("PREFIXCL_CACHE_DIR")) : NULL;
    setenv("PREFIXCL_CACHE_DIR", "/a/b", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    assert_int_equal(pfx_cache_dir_resolve("/explicit", false, out, sizeof(out)), PFX_SUCCESS);
    assert_string_equal(out, "/explicit");
    assert_int_equal(pfx_cache_dir_resolve(NULL, false, out, sizeof(out)), PFX_SUCCESS);
    assert_string_equal(out, "/a/b");
    unsetenv("PREFIXCL_CACHE_DIR");
    assert_int_equal(pfx_cache_dir_resolve(NULL, false, out, sizeof(out)), PFX_SUCCESS);
    assert_string_equal(out, "/xdg/prefixcl");
    unsetenv("XDG_CACHE_HOME");
    assert_int_equal(pfx_cache_dir_resolve(NULL, false, out, sizeof(out)), PFX_SUCCESS);
    assert_string_equal(out, "/home/u/.cache/prefixcl");
    assert_int_equal(pfx_cache_dir_resolve(NULL, true, out, sizeof(out)), PFX_SUCCESS);
    assert_string_equal(out, "");
    char tiny[4];
    assert_int_equal(pfx_cache_dir_resolve("/too/long", false, tiny, sizeof(tiny)),
                     PFX_ERROR_INVALID_ARGUMENT);
    if (saved) {
        setenv("PREFIXCL_CACHE_DIR", saved, 1);
        free(saved);
    }
}

static void test_syntax_error_gives_log(void **state)
{
    fixture *f = *state;
    pfx_runtime *rt = runtime_in(f->dir);
    cl_program program = NULL;
    const char *broken = "__kernel void broken(__global float *x) { x[0] = undeclared_name; }\n";
    assert_status_names(rt, pfx_program_get_source(rt, "broken", broken, "", &program),
                        PFX_ERROR_BUILD_FAILED, "build log");
    assert_non_null(strstr(pfx_last_error(rt), "undeclared_name"));
    assert_non_null(strstr(pfx_last_error(rt), "'broken'"));
    assert_null(program);
    /* The failure leaves the runtime usable. */
    run_axpby(rt);
    pfx_runtime_destroy(&rt);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void test_kernel_dir_override(void **state)
{
    fixture *f = *state;
    char dir[] = "/tmp/prefixcl-kernels-XXXXXX";
    assert_non_null(mkdtemp(dir));
    write_text(dir, "common.cl", "/* empty */\n");
    write_text(dir, "elementwise.cl", "__kernel void pfx_axpby(syntax error here\n");
    setenv("PREFIXCL_KERNEL_DIR", dir, 1);
    pfx_runtime *rt = runtime_in(f->dir);
    const size_t n = 4;
    pfx_tensor *a = NULL, *b = NULL;
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &a), PFX_SUCCESS);
    assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &n, &b), PFX_SUCCESS);
    assert_status_names(rt, pfx_axpby(a, 1.0f, b, 1.0f), PFX_ERROR_BUILD_FAILED, "build log");
    pfx_tensor_destroy(&a);
    pfx_tensor_destroy(&b);
    pfx_runtime_destroy(&rt);
    unsetenv("PREFIXCL_KERNEL_DIR");
    remove_dir(dir);
}

/* A kernel seen once is found again by its program, options and name alone:
 * later launches never read (or join, or hash) the source again. */
static void test_kernel_table(void **state)
{
    fixture *f = *state;
    pfx_runtime *rt = runtime_in(f->dir);
    cl_kernel first = NULL, again = NULL, other = NULL;
    assert_int_equal(pfx_kernel_get(rt, "elementwise", "", "pfx_axpby", &first), PFX_SUCCESS);
    char dir[] = "/tmp/prefixcl-kernels-XXXXXX";
    assert_non_null(mkdtemp(dir));
    write_text(dir, "common.cl", "/* empty */\n");
    write_text(dir, "elementwise.cl", "__kernel void pfx_axpby(syntax error here\n");
    setenv("PREFIXCL_KERNEL_DIR", dir, 1);
    assert_int_equal(pfx_kernel_get(rt, "elementwise", "", "pfx_axpby", &again), PFX_SUCCESS);
    assert_ptr_equal(first, again);
    /* Other options are another program: that one reads the (broken) source. */
    assert_status_names(rt,
                        pfx_kernel_get(rt, "elementwise", "-DPFX_UNUSED=1", "pfx_axpby", &other),
                        PFX_ERROR_BUILD_FAILED, "build log");
    unsetenv("PREFIXCL_KERNEL_DIR");
    remove_dir(dir);
    pfx_runtime_destroy(&rt);
}

/* Warm-up builds every registered program; it uses the suite's shared cache
 * (PREFIXCL_CACHE_DIR), so the suites after this one find them built. */
static void test_warm_up(void **state)
{
    (void)state;
    pfx_runtime *rt = pfx_test_runtime();
    assert_int_equal(pfx_runtime_warm_up(rt), PFX_SUCCESS);
    pfx_cache_stats s = stats_of(rt);
    assert_true(s.programs_built + s.cache_hits >= 5);
    pfx_runtime_destroy(&rt);

    /* A second runtime finds everything built: no compilation at all. */
    rt = pfx_test_runtime();
    assert_int_equal(pfx_runtime_warm_up(rt), PFX_SUCCESS);
    s = stats_of(rt);
    if (pfx_runtime_cache_dir(rt)[0]) {
        assert_int_equal(s.programs_built, 0);
        assert_true(s.cache_hits >= 5);
    }
    assert_status_names(NULL, pfx_runtime_warm_up(NULL), PFX_ERROR_NULL_ARGUMENT, "rt");
    pfx_runtime_destroy(&rt);
}

static void *thread_body(void *arg)
{
    const char *dir = arg;
    for (int i = 0; i < 3; i++) {
        pfx_runtime *rt = runtime_in(dir);
        run_axpby(rt);
        assert_int_equal(pfx_test_live_bytes(rt), 0);
        pfx_runtime_destroy(&rt);
    }
    return NULL;
}

static void test_two_runtimes_two_threads(void **state)
{
    fixture *f = *state;
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, thread_body, f->dir), 0);
    assert_int_equal(pthread_create(&b, NULL, thread_body, f->dir), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cache_write_then_hit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_corruption_rebuilds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_disabled, setup, teardown),
        cmocka_unit_test(test_cache_dir_resolution),
        cmocka_unit_test_setup_teardown(test_syntax_error_gives_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_dir_override, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_table, setup, teardown),
        cmocka_unit_test(test_warm_up),
        cmocka_unit_test_setup_teardown(test_two_runtimes_two_threads, setup, teardown),
    };
    return cmocka_run_group_tests_name("programs and cache", tests, NULL, NULL);
}
