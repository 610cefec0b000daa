/* The full-training job (prefixcl/pretrain.h) on token shards: the
 * demonstration corpus written as shards trains bit for bit as its text
 * does, a stopped run resumes from its checkpoint bit for bit (and not over
 * a shard set that changed), and a token
 * past the vocabulary is refused naming the shard and the offset.
 *
 * argv[1]: data/demo. */
#include <math.h>
#include <unistd.h>

#include "pfx_test.h"
#include "model_folder.h"

static const char *demo_dir;
static char train_path[1024], eval_path[1024];

static const char tiny_gpt2[] =
    "{\"model_type\": \"gpt2\", \"n_embd\": 24, \"n_layer\": 2, \"n_head\": 2, "
    "\"vocab_size\": 2197, \"n_positions\": 32, \"initializer_range\": 0.05}";

static void base_config(pfx_pretrain_config *c, const char *config_dir, const char *out)
{
    pfx_pretrain_default_config(c);
    c->config_dir = config_dir;
    c->tokenizer_dir = demo_dir;
    c->data_path = train_path;
    c->eval_path = eval_path;
    c->out_dir = out;
    c->block = 16;
    c->batch = 3;
    c->steps = 5;
    c->lr = 3e-3f;
    c->warmup_steps = 1;
    c->eval_blocks = 4;
    c->seed = 7;
}

static void run_ok(pfx_runtime *rt, const pfx_pretrain_config *c, pfx_pretrain_result *r)
{
    if (pfx_pretrain_run(rt, c, NULL, NULL, r) != PFX_SUCCESS)
        fail_msg("pretrain: %s", pfx_last_error(rt));
}

/* The same losses, gradient norms and final evaluation, bit for bit. */
static void assert_same(const pfx_pretrain_result *a, const pfx_pretrain_result *b, size_t steps)
{
    assert_memory_equal(a->losses, b->losses, steps * sizeof(double));
    assert_memory_equal(a->grad_norms, b->grad_norms, steps * sizeof(float));
    assert_memory_equal(&a->eval_losses[steps], &b->eval_losses[steps], sizeof(double));
}

static void test_shards_train_as_text(void **state)
{
    pfx_runtime *rt = *state;
    char *cfg = tf_tempdir("pts-config"), *shards = tf_tempdir("pts-shards"),
         *a = tf_tempdir("pts-text"), *b = tf_tempdir("pts-shards-run"),
         *d = tf_tempdir("pts-resumed");
    assert_int_equal(tf_write_config_text(cfg, tiny_gpt2), 0);
    pfx_tokenizer *tok = NULL;
    assert_int_equal(pfx_tokenizer_load(demo_dir, &tok), PFX_SUCCESS);
    char prefix[2048], eval_prefix[2048], pattern[2048], eval_pattern[2048];
    snprintf(prefix, sizeof(prefix), "%s/train", shards);
    snprintf(eval_prefix, sizeof(eval_prefix), "%s/eval", shards);
    snprintf(pattern, sizeof(pattern), "%s/train_*.bin", shards);
    snprintf(eval_pattern, sizeof(eval_pattern), "%s/eval_000000.bin", shards);
    assert_int_equal(pfx_shards_write(train_path, tok, prefix, 5000, NULL), PFX_SUCCESS);
    assert_int_equal(pfx_shards_write(eval_path, tok, eval_prefix, 0, NULL), PFX_SUCCESS);
    pfx_tokenizer_free(&tok);

    pfx_pretrain_config c;
    base_config(&c, cfg, a);
    pfx_pretrain_result ra, rb, rd;
    run_ok(rt, &c, &ra);
    c.data_path = pattern;
    c.eval_path = eval_pattern;       /* AUTO: the header's magic */
    c.tokenizer_dir = "/nonexistent"; /* shards need no tokenizer */
    c.out_dir = b;
    run_ok(rt, &c, &rb);
    assert_int_equal(rb.train_blocks, ra.train_blocks);
    assert_same(&ra, &rb, 5);

    /* stopped after 2 steps, resumed: the run without a stop */
    c.out_dir = d;
    c.stop_after = 2;
    run_ok(rt, &c, &rd);
    assert_true(rd.stopped);
    pfx_pretrain_result_free(&rd);
    c.stop_after = 0;
    c.resume = true;
    run_ok(rt, &c, &rd);
    assert_int_equal(rd.first_step, 2);
    assert_same(&rb, &rd, 5);
    pfx_pretrain_result_free(&rd);
    /* a shard more under the pattern: the checkpoint is refused, not
     * continued in another order */
    char from[2100], to[2100];
    snprintf(from, sizeof(from), "%s/train_000000.bin", shards);
    snprintf(to, sizeof(to), "%s/train_000099.bin", shards);
    assert_int_equal(link(from, to), 0);
    assert_status_names(rt, pfx_pretrain_run(rt, &c, NULL, NULL, &rd), PFX_ERROR_INVALID_ARGUMENT,
                        "data_blocks");
    assert_int_equal(unlink(to), 0);
    pfx_pretrain_result_free(&ra);
    pfx_pretrain_result_free(&rb);
    pfx_pretrain_result_free(&rd);

    /* nanoGPT's headerless uint16 holding an id past the vocabulary (2197):
     * refused at the step that reads its block, naming the file and offset */
    char raw[2048];
    snprintf(raw, sizeof(raw), "%s/train.bin", shards);
    FILE *fp = fopen(raw, "wb");
    assert_non_null(fp);
    for (uint16_t i = 0; i < 40 * 16; i++) {
        const uint16_t id = i == 40 * 16 - 3 ? 3000 : (uint16_t)(i % 2000);
        fwrite(&id, 2, 1, fp);
    }
    fclose(fp);
    c.data_path = raw;
    c.eval_path = NULL;
    c.data_format = PFX_PRETRAIN_DATA_RAW_U16;
    c.resume = false;
    c.steps = 20;
    c.out_dir = a;
    pfx_pretrain_result rx;
    assert_status_names(rt, pfx_pretrain_run(rt, &c, NULL, NULL, &rx), PFX_ERROR_FORMAT,
                        "token id 3000 at offset 1274");
    assert_non_null(strstr(pfx_last_error(rt), "train.bin"));
    pfx_pretrain_result_free(&rx);
    char *dirs[] = { cfg, shards, a, b, d };
    for (size_t i = 0; i < 5; i++) {
        tf_rmdir(dirs[i]);
        free(dirs[i]);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DEMO_DIR\n", argv[0]);
        return 2;
    }
    demo_dir = argv[1];
    snprintf(train_path, sizeof(train_path), "%s/train.txt", demo_dir);
    snprintf(eval_path, sizeof(eval_path), "%s/eval.txt", demo_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards_train_as_text),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
