/*
 * Suite 'gemm_tune': the CLBlast GEMM tuner on a tiny time budget writes a
 * tuning file, a new runtime applies it and its products stay correct
 * against a double-precision reference; corrupt, foreign or impossible
 * files are rejected and ignored with a message; bad arguments are refused.
 */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "gemm.h"
#include "gemm_tuning.h"
#include "reference/random.h"
#include "tolerances.h"

static char cache_dir[] = "/tmp/prefixcl-gemm-tune-XXXXXX";

static pfx_runtime *clblast_runtime(bool untuned)
{
    pfx_runtime_params p;
    pfx_runtime_default_params(&p);
    p.cache_dir = cache_dir;
    p.gemm = PFX_GEMM_CLBLAST;
    p.gemm_untuned = untuned;
    pfx_runtime *rt = NULL;
    pfx_status st = pfx_runtime_create(&rt, &p);
    if (st == PFX_ERROR_NO_DEVICE)
        exit(PFX_TEST_SKIP);
    if (st != PFX_SUCCESS)
        fail_msg("runtime: %s", pfx_last_error(NULL));
    return rt;
}

/* C = 0.5 op(A) op(B) - C on random data against the double reference. */
static void check_gemm(pfx_runtime *rt, size_t m, size_t n, size_t k, bool ta, bool tb,
                       uint64_t seed)
{
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    size_t lda = ta ? m : k, ldb = tb ? k : n, na = m * k, nb = k * n, nc = m * n;
    float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *got = malloc(nc * 4);
    assert_true(a && b && c && got);
    ref_rng_fill(&rng, a, na, -1.0f, 1.0f);
    ref_rng_fill(&rng, b, nb, -1.0f, 1.0f);
    ref_rng_fill(&rng, c, nc, -1.0f, 1.0f);
    pfx_tensor *t[3] = { NULL, NULL, NULL };
    const size_t sizes[3] = { na, nb, nc };
    const float *host[3] = { a, b, c };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 1, &sizes[i], &t[i]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_write(t[i], 0, sizes[i], host[i]), PFX_SUCCESS);
    }
    pfx_status st = pfx_gemm(rt, "tuned", ta, tb, m, n, k, 0.5f, PFX_GEMM_OP(t[0]->mem, 0, lda),
                             PFX_GEMM_OP(t[1]->mem, 0, ldb), -1.0f, PFX_GEMM_OP(t[2]->mem, 0, n));
    if (st != PFX_SUCCESS)
        fail_msg("gemm: %s", pfx_last_error(rt));
    assert_int_equal(pfx_tensor_read(t[2], 0, nc, got), PFX_SUCCESS);
    double num = 0, den = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t p = 0; p < k; p++)
                s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                     (tb ? b[j * ldb + p] : b[p * ldb + j]);
            double ref = 0.5 * s - c[i * n + j];
            num += (got[i * n + j] - ref) * (got[i * n + j] - ref);
            den += ref * ref;
        }
    if (!(sqrt(num / den) <= TOL_ENC_F32))
        fail_msg("tuned gemm %zux%zux%zu: relative L2 error %.3g", m, n, k, sqrt(num / den));
    for (int i = 0; i < 3; i++)
        pfx_tensor_destroy(&t[i]);
    free(a);
    free(b);
    free(c);
    free(got);
}

static void check_all(pfx_runtime *rt)
{
    check_gemm(rt, 33, 45, 67, false, true, 1);
    check_gemm(rt, 7, 5, 13, true, false, 2);
    check_gemm(rt, 130, 150, 140, false, false, 3); /* past a small threshold */
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The file with the first `from` replaced by `to`. */
static void write_edited(const char *path, const char *orig, const char *from, const char *to)
{
    static char out[1 << 16];
    const char *at = strstr(orig, from);
    assert_non_null(at);
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - orig), orig, to, at + strlen(from));
    write_text(path, out);
}

static void expect_ignored(const char *needle)
{
    pfx_runtime *rt = clblast_runtime(false);
    const char *what = pfx_runtime_gemm_tuning(rt);
    if (strncmp(what, "ignored ", 8) || !strstr(what, needle))
        fail_msg("tuning '%s' is not ignored for '%s'", what, needle);
    check_all(rt); /* CLBlast keeps a working choice */
    pfx_runtime_destroy(&rt);
}

/* pfx_gemm_device_status's line on the tuning in cache_dir. */
static void expect_status(const pfx_device_info *dev, const char *start)
{
    char line[1800];
    pfx_gemm_backend b = PFX_GEMM_AUTO;
    assert_int_equal(pfx_gemm_device_status(dev, cache_dir, &b, line, sizeof(line)), PFX_SUCCESS);
    if (strncmp(line, start, strlen(start)))
        fail_msg("device status '%s' does not start with '%s'", line, start);
    assert_true(b == PFX_GEMM_CLBLAST || b == PFX_GEMM_HOST);
}

/* The public face beside the tuner: parameter names and the status's arguments. */
static void test_names_and_status_args(void **state)
{
    (void)state;
    assert_string_equal(pfx_gemm_param_name(false, 0), "GEMMK");
    assert_string_equal(pfx_gemm_param_name(false, PFX_XGEMM_PARAMS - 1), "VWN");
    assert_string_equal(pfx_gemm_param_name(true, 0), "KWID");
    assert_string_equal(pfx_gemm_param_name(true, PFX_XGEMM_DIRECT_PARAMS - 1), "WGD");
    assert_null(pfx_gemm_param_name(false, PFX_XGEMM_PARAMS));
    assert_null(pfx_gemm_param_name(true, PFX_XGEMM_DIRECT_PARAMS));
    pfx_device_info info;
    assert_int_equal(pfx_device_default(&info), PFX_SUCCESS);
    const pfx_device_info *dev = &info;
    char line[64];
    pfx_gemm_backend b;
    assert_int_equal(pfx_gemm_device_status(NULL, NULL, &b, line, sizeof(line)),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_non_null(strstr(pfx_last_error(NULL), "info"));
    assert_int_equal(pfx_gemm_device_status(dev, NULL, NULL, line, sizeof(line)),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_non_null(strstr(pfx_last_error(NULL), "backend"));
    assert_int_equal(pfx_gemm_device_status(dev, NULL, &b, NULL, sizeof(line)),
                     PFX_ERROR_NULL_ARGUMENT);
    assert_non_null(strstr(pfx_last_error(NULL), "tuning"));
    assert_int_equal(pfx_gemm_device_status(dev, NULL, &b, line, 0), PFX_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(pfx_last_error(NULL), "cap"));
    /* "" is no cache folder */
    assert_int_equal(pfx_gemm_device_status(dev, "", &b, line, sizeof(line)), PFX_SUCCESS);
    assert_string_equal(line, "no cache folder");
}

static void never_called(void *user, double fraction, const char *phase, unsigned tried,
                         double best_gflops)
{
    (void)user;
    (void)tried;
    (void)best_gflops;
    fail_msg("gemm_tune ran (%s, %.2f) before checking where its result goes", phase, fraction);
}

static void test_tune_apply_reject(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(cache_dir));
    pfx_runtime *rt = clblast_runtime(true);
    assert_string_equal(pfx_runtime_gemm_tuning(rt), "off");

    /* Bad arguments first: nothing runs. */
    pfx_gemm_tune_report rep;
    pfx_gemm_tune_params bad = { .time_limit_s = 0 };
    assert_status_names(rt, pfx_gemm_tune(rt, &bad, &rep), PFX_ERROR_INVALID_ARGUMENT,
                        "time limit");
    assert_status_names(rt, pfx_gemm_tune(rt, NULL, &rep), PFX_ERROR_NULL_ARGUMENT, "params");
    /* A destination it cannot write: refused before the first candidate. */
    char dest[1200];
    assert_true(pfx_gemm_tuning_path(pfx_runtime_device(rt), cache_dir, dest, sizeof(dest)));
    assert_int_equal(mkdir(dest, 0700), 0);
    pfx_gemm_tune_params quick = { .time_limit_s = 60, .progress = never_called };
    assert_status_names(rt, pfx_gemm_tune(rt, &quick, &rep), PFX_ERROR_IO,
                        "cannot store the result");
    assert_int_equal(rmdir(dest), 0);

    /* A tiny budget on tiny shapes: still one candidate per kernel, and a file. */
    const pfx_gemm_tune_shape shapes[] = { { 72, 48, 40, false, true },
                                           { 9, 16, 24, false, false },
                                           { 160, 136, 144, true, false } };
    pfx_gemm_tune_params p = { .time_limit_s = 1, .shapes = shapes, .shape_count = 3, .seed = 5 };
    pfx_status st = pfx_gemm_tune(rt, &p, &rep);
    if (st != PFX_SUCCESS)
        fail_msg("gemm_tune: %s", pfx_last_error(rt));
    assert_true(rep.tried >= 2);
    assert_true(rep.untuned_gflops > 0 && rep.tuned_gflops > 0);
    struct stat sb;
    assert_int_equal(stat(rep.path, &sb), 0);
    const pfx_device_info dev = *pfx_runtime_device(rt);
    pfx_runtime_destroy(&rt);
    expect_status(&dev, "tuned (");
    char path[1200];
    snprintf(path, sizeof(path), "%s", rep.path);

    /* A new runtime applies it; products stay right on both sides of the threshold. */
    rt = clblast_runtime(false);
    if (strncmp(pfx_runtime_gemm_tuning(rt), "applied ", 8))
        fail_msg("tuning: '%s'", pfx_runtime_gemm_tuning(rt));
    assert_non_null(strstr(pfx_runtime_gemm_tuning(rt), path));
    check_all(rt);
    pfx_runtime_destroy(&rt);

    /* Rejected and ignored, each with its reason. */
    char *orig = strdup(read_text(path));
    assert_non_null(orig);
    write_text(path, "{\"format\": \"prefixcl-gemm-tuning-1\", \"Xgemm\": {");
    expect_ignored("not valid JSON");
    write_edited(path, orig, "\"MWG\":", "\"MWG\": 24, \"unused\":");
    expect_ignored("Xgemm");
    write_edited(path, orig,
                 "\"MWG\":", "\"MWG\": 24, \"MWG\":"); /* the rule of every JSON reader */
    expect_ignored("'MWG' appears twice");
    write_edited(path, orig, "\"WGD\":", "\"WGDX\":");
    expect_ignored("XgemmDirect.WGD");
    write_edited(path, orig, "\"device\":", "\"device\": \"another\", \"was\":");
    expect_ignored("another device");
    write_text(path, "");
    expect_ignored("not valid JSON");
    expect_status(&dev, "rejected file ");
    free(orig);

    remove(path);
    expect_status(&dev, "not tuned");
    rt = clblast_runtime(false);
    assert_int_equal(strncmp(pfx_runtime_gemm_tuning(rt), "none", 4), 0);
    pfx_runtime_destroy(&rt);
    rmdir(cache_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_status_args),
        cmocka_unit_test(test_tune_apply_reject),
    };
    return cmocka_run_group_tests_name("gemm_tune", tests, NULL, NULL);
}
