/* The runtime's workspace uploads (src/runtime/workspace.c): an upload of the
 * bytes a slot already holds from the last upload enqueues nothing; anything
 * that may have written the slot since (pfx_workspace_get, a command marked
 * by pfx_workspace_written, a larger slot) makes the next upload write. */
#include "internal.h"
#include "pfx_test.h"
#include "reference/random.h"

enum { COUNT = 37 }; /* floats: not a multiple of anything */

static void read_slot(pfx_runtime *rt, cl_mem mem, float *out, size_t n)
{
    assert_int_equal(
        clEnqueueReadBuffer(rt->queue, mem, CL_TRUE, 0, n * sizeof(float), out, 0, NULL, NULL),
        CL_SUCCESS);
}

/* Writes behind the workspace's back: shows whether an upload wrote. */
static void overwrite(pfx_runtime *rt, cl_mem mem, const float *with, size_t n)
{
    assert_int_equal(
        clEnqueueWriteBuffer(rt->queue, mem, CL_TRUE, 0, n * sizeof(float), with, 0, NULL, NULL),
        CL_SUCCESS);
}

static void upload(pfx_runtime *rt, const float *data, size_t n, cl_mem *mem)
{
    assert_int_equal(pfx_workspace_upload(rt, PFX_WS_TMP4, data, n * sizeof(float), mem),
                     PFX_SUCCESS);
    assert_non_null(*mem);
}

/* Two different random contents of COUNT floats. */
static void random_pair(ref_rng *rng, uint64_t seed, float *a, float *b)
{
    ref_rng_seed(rng, seed);
    ref_rng_fill(rng, a, COUNT, -2.0f, 2.0f);
    ref_rng_fill(rng, b, COUNT, -2.0f, 2.0f);
}

static void test_same_bytes_enqueue_nothing(void **state)
{
    pfx_runtime *rt = *state;
    float a[COUNT], b[COUNT], got[COUNT];
    ref_rng rng;
    random_pair(&rng, 71, a, b);
    cl_mem mem;

    upload(rt, a, COUNT, &mem);
    read_slot(rt, mem, got, COUNT);
    assert_memory_equal(got, a, sizeof(a));

    /* the same bytes again: not written (b stays), the same buffer */
    overwrite(rt, mem, b, COUNT);
    cl_mem again;
    upload(rt, a, COUNT, &again);
    assert_ptr_equal(again, mem);
    read_slot(rt, mem, got, COUNT);
    assert_memory_equal(got, b, sizeof(b));

    /* one float changed: written */
    a[COUNT - 1] += 1.0f;
    upload(rt, a, COUNT, &mem);
    read_slot(rt, mem, got, COUNT);
    assert_memory_equal(got, a, sizeof(a));

    /* fewer bytes than the last upload: written */
    overwrite(rt, mem, b, COUNT);
    upload(rt, a, COUNT - 5, &mem);
    read_slot(rt, mem, got, COUNT);
    assert_memory_equal(got, a, (COUNT - 5) * sizeof(float));
    pfx_runtime_finish(rt);
}

static void test_writers_make_it_write(void **state)
{
    pfx_runtime *rt = *state;
    float a[COUNT], b[COUNT], got[COUNT];
    ref_rng rng;
    random_pair(&rng, 72, a, b);
    cl_mem mem, slot;

    /* a command marked as writing the uploaded buffer */
    upload(rt, a, COUNT, &mem);
    overwrite(rt, mem, b, COUNT);
    pfx_workspace_written(rt, PFX_WS_TMP4);
    upload(rt, a, COUNT, &mem);
    read_slot(rt, mem, got, COUNT);
    assert_memory_equal(got, a, sizeof(a));

    /* the slot handed out for writing */
    assert_int_equal(pfx_workspace_get(rt, PFX_WS_TMP4, COUNT * sizeof(float), &slot), PFX_SUCCESS);
    assert_ptr_equal(slot, mem);
    overwrite(rt, slot, b, COUNT);
    upload(rt, a, COUNT, &mem);
    read_slot(rt, mem, got, COUNT);
    assert_memory_equal(got, a, sizeof(a));

    /* a larger slot: a new buffer, written */
    static float big[4 * COUNT];
    ref_rng_fill(&rng, big, 4 * COUNT, -2.0f, 2.0f);
    upload(rt, big, 4 * COUNT, &mem);
    upload(rt, a, COUNT, &mem); /* into the grown buffer */
    read_slot(rt, mem, got, COUNT);
    assert_memory_equal(got, a, sizeof(a));

    /* released: nothing remembered, nothing left */
    pfx_runtime_finish(rt);
    pfx_workspace_release(rt);
    assert_null(rt->workspace_shadow[PFX_WS_TMP4]);
    upload(rt, a, COUNT, &mem);
    read_slot(rt, mem, got, COUNT);
    assert_memory_equal(got, a, sizeof(a));
    pfx_runtime_finish(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes_enqueue_nothing),
        cmocka_unit_test(test_writers_make_it_write),
    };
    return cmocka_run_group_tests_name("workspace", tests, pfx_test_group_setup,
                                       pfx_test_group_teardown);
}
