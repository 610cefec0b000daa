/* dist.h in one process (no mpirun; the default build or the MPI one): rank 0
 * of 1, shards whole, the hooks leave gradients, count and loss as they are,
 * and every argument error is refused with a message naming the argument. */
#include "pfx_test.h"
#include "prefixcl/dist.h"
#include "reference/random.h"

static void test_one_process(void **state)
{
    (void)state;
    int argc = 1;
    char *args[] = { "test_dist_api", NULL }, **argv = args;
    assert_int_equal(pfx_dist_init(&argc, &argv), PFX_SUCCESS);
    assert_int_equal(pfx_dist_init(NULL, NULL), PFX_SUCCESS);
    assert_int_equal(pfx_dist_rank(), 0);
    assert_int_equal(pfx_dist_size(), 1);
    assert_int_equal(pfx_dist_local_rank(), 0);
    assert_int_equal(pfx_dist_finish(0), 0);
    assert_int_equal(pfx_dist_finish(3), 3); /* one process: returned, not aborted */
    assert_false(pfx_dist_any(false));
    assert_true(pfx_dist_any(true));
    assert_int_equal(pfx_dist_agree("options", "a|b"), PFX_SUCCESS);
    for (size_t total = 0; total < 9; total++) {
        size_t begin = 7, count = 7;
        assert_int_equal(pfx_dist_shard(total, &begin, &count), PFX_SUCCESS);
        assert_int_equal(begin, 0);
        assert_int_equal(count, total);
    }
    size_t begin, count;
    assert_int_equal(pfx_dist_shard(SIZE_MAX, &begin, &count), PFX_SUCCESS);
    assert_int_equal(count, SIZE_MAX);
    /* one rank uses the selector as given */
    char buf[32];
    const char *dev = "unset";
    assert_int_equal(pfx_dist_device("cpu", buf, sizeof(buf), &dev), PFX_SUCCESS);
    assert_string_equal(dev, "cpu");
    assert_int_equal(pfx_dist_device(NULL, buf, sizeof(buf), &dev), PFX_SUCCESS);
    assert_null(dev);
    double n = 17, mean = 2.5;
    assert_int_equal(pfx_dist_mean(&n, &mean), PFX_SUCCESS);
    assert_true(n == 17 && mean == 2.5);
}

static void test_argument_errors(void **state)
{
    (void)state;
    int argc = 1;
    char **argv = NULL;
    size_t b, c;
    char buf[32];
    const char *dev;
    double n = 1, mean = 0;
    pfx_data_parallel d;
    assert_status_names(NULL, pfx_dist_init(&argc, NULL), PFX_ERROR_NULL_ARGUMENT, "argv");
    assert_status_names(NULL, pfx_dist_init(NULL, &argv), PFX_ERROR_NULL_ARGUMENT, "argc");
    assert_status_names(NULL, pfx_dist_shard(3, NULL, &c), PFX_ERROR_NULL_ARGUMENT, "begin");
    assert_status_names(NULL, pfx_dist_shard(3, &b, NULL), PFX_ERROR_NULL_ARGUMENT, "count");
    assert_status_names(NULL, pfx_dist_device("cpu", NULL, 32, &dev), PFX_ERROR_NULL_ARGUMENT,
                        "buf");
    assert_status_names(NULL, pfx_dist_device("cpu", buf, sizeof(buf), NULL),
                        PFX_ERROR_NULL_ARGUMENT, "out");
    assert_status_names(NULL, pfx_dist_device("cpu", buf, 4, &dev), PFX_ERROR_INVALID_ARGUMENT,
                        "cap");
    assert_null(dev);
    assert_status_names(NULL, pfx_dist_device("0:", buf, sizeof(buf), &dev),
                        PFX_ERROR_INVALID_ARGUMENT, "selector");
    assert_null(dev);
    assert_status_names(NULL, pfx_dist_agree(NULL, "x"), PFX_ERROR_NULL_ARGUMENT, "what");
    assert_status_names(NULL, pfx_dist_agree("options", NULL), PFX_ERROR_NULL_ARGUMENT, "text");
    assert_status_names(NULL, pfx_dist_mean(NULL, &mean), PFX_ERROR_NULL_ARGUMENT, "count");
    assert_status_names(NULL, pfx_dist_mean(&n, NULL), PFX_ERROR_NULL_ARGUMENT, "mean");
    n = -1;
    assert_status_names(NULL, pfx_dist_mean(&n, &mean), PFX_ERROR_INVALID_ARGUMENT, "count");
    n = NAN;
    assert_status_names(NULL, pfx_dist_mean(&n, &mean), PFX_ERROR_INVALID_ARGUMENT, "count");
    assert_status_names(NULL, pfx_dist_reduce_grads(NULL, &n, &mean), PFX_ERROR_NULL_ARGUMENT,
                        "opt");
    assert_status_names(NULL, pfx_dist_check_params(NULL, 1), PFX_ERROR_NULL_ARGUMENT, "opt");
    assert_status_names(NULL, pfx_dist_shard_optimizer(NULL), PFX_ERROR_NULL_ARGUMENT, "opt");
    assert_status_names(NULL, pfx_dist_hooks(NULL), PFX_ERROR_NULL_ARGUMENT, "out");
    memset(&d, 0, sizeof(d));
    assert_int_equal(pfx_dist_hooks(&d), PFX_SUCCESS);
}

/* The jobs' hooks over a real optimizer: one process changes nothing. */
static void test_hooks_identity(void **state)
{
    pfx_runtime *rt = *state;
    pfx_optimizer *opt = NULL;
    assert_int_equal(pfx_optimizer_create(rt, NULL, &opt), PFX_SUCCESS);
    pfx_optimizer_group_params gp = PFX_OPTIMIZER_GROUP_DEFAULTS;
    unsigned group;
    assert_int_equal(pfx_optimizer_add_group(opt, &gp, &group), PFX_SUCCESS);
    const size_t shapes[2][2] = { { 7, 13 }, { 1, 5 } }; /* awkward sizes */
    pfx_tensor *p[2] = { NULL, NULL }, *g[2] = { NULL, NULL };
    float *host[2];
    ref_rng rng;
    ref_rng_seed(&rng, 11);
    for (int i = 0; i < 2; i++) {
        const size_t k = shapes[i][0] * shapes[i][1];
        host[i] = malloc(k * sizeof(float));
        assert_non_null(host[i]);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shapes[i], &p[i]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 2, shapes[i], &g[i]), PFX_SUCCESS);
        ref_rng_fill(&rng, host[i], k, -1.0f, 1.0f);
        assert_int_equal(pfx_tensor_write(p[i], 0, k, host[i]), PFX_SUCCESS);
        ref_rng_fill(&rng, host[i], k, -3.0f, 3.0f);
        assert_int_equal(pfx_tensor_write(g[i], 0, k, host[i]), PFX_SUCCESS);
        assert_int_equal(pfx_optimizer_add_param(opt, group, p[i], g[i], i ? "b" : "a"),
                         PFX_SUCCESS);
    }
    pfx_data_parallel d;
    assert_int_equal(pfx_dist_hooks(&d), PFX_SUCCESS);
    assert_int_equal(d.rank, 0);
    assert_int_equal(d.ranks, 1);
    assert_non_null(d.reduce);
    assert_non_null(d.any);
    assert_non_null(d.check);
    assert_non_null(d.shard);
    /* one process: the state stays whole (every moment exported) */
    assert_int_equal(d.shard(d.user, opt), PFX_SUCCESS);
    size_t floats = 0;
    assert_int_equal(pfx_optimizer_state_size(opt, &floats), PFX_SUCCESS);
    assert_int_equal(floats, 2 * (7 * 13 + 5));
    float m[7 * 13], v[7 * 13];
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(pfx_optimizer_export_param(opt, i, NULL, m, v), PFX_SUCCESS);
    double count = 91, loss = 0.75;
    assert_int_equal(d.reduce(d.user, opt, &count, &loss), PFX_SUCCESS);
    assert_true(count == 91 && loss == 0.75);
    assert_int_equal(d.check(d.user, opt, 1), PFX_SUCCESS);
    assert_true(d.any(d.user, true));
    assert_false(d.any(d.user, false));
    count = -2;
    assert_status_names(NULL, d.reduce(d.user, opt, &count, &loss), PFX_ERROR_INVALID_ARGUMENT,
                        "count");
    for (int i = 0; i < 2; i++) {
        const size_t k = shapes[i][0] * shapes[i][1];
        float *back = malloc(k * sizeof(float));
        assert_non_null(back);
        assert_int_equal(pfx_tensor_read(g[i], 0, k, back), PFX_SUCCESS);
        assert_memory_equal(back, host[i], k * sizeof(float));
        free(back);
        free(host[i]);
        pfx_tensor_destroy(&p[i]);
        pfx_tensor_destroy(&g[i]);
    }
    pfx_optimizer_destroy(&opt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_process),
        cmocka_unit_test(test_argument_errors),
        cmocka_unit_test(test_hooks_identity),
    };
    return cmocka_run_group_tests_name("dist_api", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
