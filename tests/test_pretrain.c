/* The full-training job (prefixcl/pretrain.h) on a tiny GPT-2 from a config
 * and the demonstration's tokenizer and corpus (argv[1]: data/demo): the
 * loss falls, the outputs load back, a stopped and resumed run equals an
 * uninterrupted one bit for bit, gradient accumulation averages, full
 * fine-tuning from the written folder, a checkpoint read as strictly as any
 * input, the inputs it refuses, gains on selected heads only, and a step
 * callback that measures the model without changing the run. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "model_folder.h"
#include "tolerances.h"

static const char *demo_dir;
static char train_path[1024], eval_path[1024];

static const char tiny_gpt2[] =
    "{\"model_type\": \"gpt2\", \"n_embd\": 40, \"n_layer\": 2, \"n_head\": 4, "
    "\"vocab_size\": 2197, \"n_positions\": 48, \"initializer_range\": 0.05}";

static void base_config(pfx_pretrain_config *c, const char *config_dir, const char *out)
{
    pfx_pretrain_default_config(c);
    c->config_dir = config_dir;
    c->tokenizer_dir = demo_dir;
    c->data_path = train_path;
    c->eval_path = eval_path;
    c->out_dir = out;
    c->block = 32;
    c->batch = 4;
    c->steps = 8;
    c->lr = 3e-3f;
    c->gain_lr = 1.5e-3f;
    c->warmup_steps = 2;
    c->eval_blocks = 8;
    c->seed = 5;
}

static void run_ok(pfx_runtime *rt, const pfx_pretrain_config *c, pfx_pretrain_result *r)
{
    if (pfx_pretrain_run(rt, c, NULL, NULL, r) != PFX_SUCCESS)
        fail_msg("pretrain: %s", pfx_last_error(rt));
}

static bool exists(const char *dir, const char *name)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* The bytes of dir/name (malloc'ed), *size set. */
static unsigned char *slurp(const char *dir, const char *name, size_t *size)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*size + 1);
    assert_int_equal(fread(b, 1, *size, f), *size);
    fclose(f);
    return b;
}

static void assert_same_file(const char *a, const char *b, const char *name)
{
    size_t na, nb;
    unsigned char *x = slurp(a, name, &na), *y = slurp(b, name, &nb);
    assert_int_equal(na, nb);
    if (memcmp(x, y, na) != 0)
        fail_msg("%s differs between %s and %s", name, a, b);
    free(x);
    free(y);
}

/* Runs of `steps` steps into folders a and b the same bit for bit: losses,
 * gradient norms, evaluations, weights and gains. Frees both results. */
static void assert_same_run(pfx_pretrain_result *ra, pfx_pretrain_result *rb, const char *a,
                            const char *b, size_t steps)
{
    assert_memory_equal(ra->losses, rb->losses, steps * sizeof(double));
    assert_memory_equal(ra->grad_norms, rb->grad_norms, steps * sizeof(float));
    for (size_t s = 0; s <= steps; s++)
        assert_true(ra->eval_losses[s] == rb->eval_losses[s] ||
                    (isnan(ra->eval_losses[s]) && isnan(rb->eval_losses[s])));
    assert_same_file(a, b, "model.safetensors");
    if (ra->gains)
        assert_same_file(a, b, "gains.safetensors");
    pfx_pretrain_result_free(ra);
    pfx_pretrain_result_free(rb);
}

/* Removes the temporary folders (tf_tempdir's) and frees their names. */
static void drop_dirs(char *a, char *b, char *c)
{
    char *dirs[3] = { a, b, c };
    for (int i = 0; i < 3; i++) {
        tf_rmdir(dirs[i]);
        free(dirs[i]);
    }
}

typedef struct counter {
    size_t calls, last;
} counter;

static void count_steps(const pfx_pretrain_step *s, void *user)
{
    counter *k = user;
    k->calls++;
    k->last = s->step;
}

/* Pre-training with a linear gain: the evaluation loss falls, every output
 * is there, the written folder loads with pfx_model_load and gives the
 * final evaluation loss again (gain off), the gains moved. */
static void test_pretrain_learns(void **state)
{
    pfx_runtime *rt = *state;
    char *cfgdir = tf_tempdir("pt-config"), *out = tf_tempdir("pt-out");
    assert_int_equal(tf_write_config_text(cfgdir, tiny_gpt2), 0);
    pfx_pretrain_config c;
    base_config(&c, cfgdir, out);
    c.steps = 12;
    c.gain_mode = PFX_GAIN_LINEAR;
    c.gain_ramp_steps = 4;
    c.eval_every = 5;
    pfx_pretrain_result r;
    counter k = { 0, 0 };
    if (pfx_pretrain_run(rt, &c, count_steps, &k, &r) != PFX_SUCCESS)
        fail_msg("pretrain: %s", pfx_last_error(rt));
    assert_int_equal(k.calls, 12);
    assert_int_equal(k.last, 12);
    assert_int_equal(r.steps_done, 12);
    assert_false(r.stopped);
    print_message("  eval %.4f -> %.4f (step 5: %.4f), %zu train blocks\n", r.eval_losses[0],
                  r.eval_losses[12], r.eval_losses[5], r.train_blocks);
    assert_true(isfinite(r.eval_losses[0]) && isfinite(r.eval_losses[5]) &&
                isfinite(r.eval_losses[10]));
    assert_true(isnan(r.eval_losses[3]));
    assert_true(r.eval_losses[12] < r.eval_losses[0] - 0.5);
    assert_true(r.losses[11] < r.losses[0]);
    /* the gains left 0 once the ramp let them act */
    const size_t LH = r.shape.layers * r.shape.heads;
    double moved = 0.0;
    for (size_t i = 0; i < LH; i++)
        moved += fabs(r.gains[12 * LH + i]);
    assert_true(moved > 0.0);
    for (size_t i = 0; i < LH; i++)
        assert_true(r.gains[i] == 0.0f);
    const char *files[] = { "config.json", "model.safetensors", "gains.safetensors", "loss.csv",
                            PFX_PRETRAIN_CHECKPOINT };
    for (size_t i = 0; i < 5; i++)
        assert_true(exists(out, files[i]));
    pfx_pretrain_result_free(&r);

    /* without a gain the folder is the whole model: its loss is the job's */
    char *out2 = tf_tempdir("pt-out-plain");
    c.gain_mode = PFX_GAIN_OFF;
    c.out_dir = out2;
    c.eval_every = 0;
    run_ok(rt, &c, &r);
    assert_false(exists(out2, "gains.safetensors"));
    pfx_context_params cp = { .max_batch = 4, .max_tokens = 32 };
    pfx_model *m = NULL;
    pfx_context *ctx = NULL;
    assert_int_equal(pfx_model_load(rt, out2, NULL, &m), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(m, &cp, &ctx), PFX_SUCCESS);
    pfx_tokenizer *tok = NULL;
    assert_int_equal(pfx_tokenizer_load(demo_dir, &tok), PFX_SUCCESS);
    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length = (size_t)1 << 24;
    o.append_eos = true;
    o.shuffle = false;
    pfx_dataset *ds = NULL;
    pfx_blocks *b = NULL;
    assert_int_equal(pfx_dataset_load(eval_path, tok, &o, &ds), PFX_SUCCESS);
    assert_int_equal(pfx_blocks_pack(ds, 32, &b), PFX_SUCCESS);
    double sum = 0.0;
    int32_t ids[4 * 32];
    for (size_t i = 0; i < 8; i += 4) {
        for (size_t row = 0; row < 4; row++) {
            const int32_t *p;
            assert_int_equal(pfx_blocks_get(b, i + row, &p), PFX_SUCCESS);
            memcpy(ids + row * 32, p, sizeof(int32_t) * 32);
        }
        pfx_model_batch batch = { 4, 32, ids, NULL, NULL };
        double l;
        assert_int_equal(pfx_model_loss(ctx, &batch, NULL, &l), PFX_SUCCESS);
        sum += 4 * l;
    }
    assert_true(fabs(sum / 8 - r.eval_losses[12]) <= 1e-6 * r.eval_losses[12]);
    pfx_blocks_free(&b);
    pfx_dataset_free(&ds);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&m);

    /* full fine-tuning of the folder just written */
    char *out3 = tf_tempdir("pt-finetune");
    pfx_pretrain_config f = c;
    f.config_dir = NULL;
    f.model_dir = out2;
    f.out_dir = out3;
    f.steps = 3;
    pfx_pretrain_result rf;
    run_ok(rt, &f, &rf);
    assert_true(fabs(rf.eval_losses[0] - r.eval_losses[12]) <= 1e-6 * r.eval_losses[12]);
    assert_int_equal(rf.trained_values, r.trained_values);
    pfx_pretrain_result_free(&rf);
    pfx_pretrain_result_free(&r);
    pfx_tokenizer_free(&tok);
    tf_rmdir(out3);
    free(out3);
    tf_rmdir(out2);
    free(out2);
    tf_rmdir(out);
    free(out);
    tf_rmdir(cfgdir);
    free(cfgdir);
}

/* Stopped after 3 steps and resumed: the same losses, gradient norms,
 * weights and gains (per head and structured), byte for byte, as 7 steps
 * without a stop. */
static void test_resume(void **state)
{
    pfx_runtime *rt = *state;
    char *cfgdir = tf_tempdir("pt-config"), *a = tf_tempdir("pt-straight"),
         *b = tf_tempdir("pt-resumed");
    assert_int_equal(tf_write_config_text(cfgdir, tiny_gpt2), 0);
    pfx_pretrain_config c;
    base_config(&c, cfgdir, a);
    c.steps = 7;
    c.gain_mode = PFX_GAIN_TANH;
    c.structured_gain = true; /* with the per-head gain */
    c.gain_ramp_steps = 3;
    c.accumulate = 2;
    c.batch = 3;
    pfx_pretrain_result ra, rb;
    run_ok(rt, &c, &ra);
    c.out_dir = b;
    c.stop_after = 3;
    run_ok(rt, &c, &rb);
    assert_true(rb.stopped);
    assert_int_equal(rb.steps_done, 3);
    assert_true(exists(b, PFX_PRETRAIN_CHECKPOINT));
    assert_false(exists(b, "model.safetensors"));
    pfx_pretrain_result_free(&rb);
    c.stop_after = 0;
    c.resume = true;
    run_ok(rt, &c, &rb);
    assert_int_equal(rb.first_step, 3);
    assert_int_equal(rb.steps_done, 7);
    assert_memory_equal(ra.losses, rb.losses, 7 * sizeof(double));
    assert_memory_equal(ra.grad_norms, rb.grad_norms, 7 * sizeof(float));
    assert_memory_equal(&ra.eval_losses[7], &rb.eval_losses[7], sizeof(double));
    assert_same_file(a, b, "model.safetensors");
    assert_same_file(a, b, "gains.safetensors");
    assert_same_file(a, b, "loss.csv");

    /* another option: refused, naming it */
    pfx_pretrain_result rc;
    c.block = 24;
    assert_status_names(rt, pfx_pretrain_run(rt, &c, NULL, NULL, &rc), PFX_ERROR_INVALID_ARGUMENT,
                        "block=32");
    pfx_pretrain_result_free(&rc);
    pfx_pretrain_result_free(&ra);
    pfx_pretrain_result_free(&rb);
    tf_rmdir(a);
    free(a);
    tf_rmdir(b);
    free(b);
    tf_rmdir(cfgdir);
    free(cfgdir);
}

/* dir/checkpoint.safetensors again with metadata key `key` set to `value`
 * (NULL: left out) and tensor `drop` (NULL: none) left out. */
static void rewrite_checkpoint(const char *dir, const char *key, const char *value,
                               const char *drop)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, PFX_PRETRAIN_CHECKPOINT);
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    const size_t n = pfx_safetensors_count(f), m = pfx_safetensors_metadata_count(f);
    pfx_named_tensor *items = calloc(n, sizeof(*items));
    float **data = calloc(n, sizeof(*data));
    pfx_st_metadata *meta = calloc(m + 1, sizeof(*meta));
    char **names = calloc(n, sizeof(*names));
    size_t k = 0, q = 0;
    for (size_t i = 0; i < n; i++) {
        pfx_st_info info;
        assert_int_equal(pfx_safetensors_info(f, i, &info), PFX_SUCCESS);
        if (drop && !strcmp(info.name, drop))
            continue;
        names[k] = strdup(info.name);
        data[k] = malloc((info.numel ? info.numel : 1) * sizeof(float));
        assert_int_equal(pfx_safetensors_read_f32(f, info.name, data[k], info.numel), PFX_SUCCESS);
        items[k] = (pfx_named_tensor){
            .name = names[k], .host = data[k], .ndim = info.ndim, .dtype = PFX_DTYPE_F32
        };
        for (unsigned d = 0; d < info.ndim; d++)
            items[k].shape[d] = info.shape[d];
        k++;
    }
    bool set = false;
    for (size_t i = 0; i < m; i++) {
        const char *mk, *mv;
        assert_int_equal(pfx_safetensors_metadata(f, i, &mk, &mv), PFX_SUCCESS);
        if (!strcmp(mk, key)) {
            set = true;
            if (!value)
                continue;
            mv = value;
        }
        meta[q++] = (pfx_st_metadata){ mk, mv };
    }
    if (!set && value)
        meta[q++] = (pfx_st_metadata){ key, value };
    assert_int_equal(pfx_safetensors_save(NULL, path, items, k, meta, q), PFX_SUCCESS);
    pfx_safetensors_close(&f);
    for (size_t i = 0; i < k; i++) {
        free(names[i]);
        free(data[i]);
    }
    free(names);
    free(data);
    free(items);
    free(meta);
}

/* A checkpoint is read as strictly as any input: each bad field refused
 * with a message naming it, the checkpoint's weights never half loaded. */
static void test_checkpoint_checked(void **state)
{
    pfx_runtime *rt = *state;
    char *cfgdir = tf_tempdir("pt-config"), *out = tf_tempdir("pt-ckpt");
    assert_int_equal(tf_write_config_text(cfgdir, tiny_gpt2), 0);
    pfx_pretrain_config c;
    base_config(&c, cfgdir, out);
    c.steps = 6;
    c.stop_after = 2;
    c.gain_mode = PFX_GAIN_LINEAR;
    pfx_pretrain_result r;
    run_ok(rt, &c, &r);
    pfx_pretrain_result_free(&r);
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", out, PFX_PRETRAIN_CHECKPOINT);
    size_t size;
    unsigned char *good = slurp(out, PFX_PRETRAIN_CHECKPOINT, &size);
    c.stop_after = 0;
    c.resume = true;
    static const struct {
        const char *key, *value, *drop, *needle;
    } cases[] = {
        { "losses", "junk", NULL, "losses" },
        { "losses", "0x1p+1,0x1p+1,0x1p+1,", NULL, "losses" },
        { "steps_done", "7", NULL, "steps_done" },
        { "steps_done", "2x", NULL, "steps_done" },
        { "optimizer_step", "3", NULL, "optimizer_step" },
        { "data_index", "99999999", NULL, "data_index" },
        { "eval_losses", "5:0x1p+1,", NULL, "eval_losses" },
        { "eval_losses", "0:nan,", NULL, "eval_losses" },
        { "format", "something-else", NULL, "format" },
        { "format", NULL, NULL, "format" },
        { "transformer.h.0.ln_1.weight.step", "1", NULL, "transformer.h.0.ln_1.weight.step" },
        { "steps_done", "2", "transformer.wte.weight.exp_avg", "transformer.wte.weight.exp_avg" },
        { "steps_done", "2", "grad_norms", "grad_norms" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        FILE *f = fopen(path, "wb");
        assert_int_equal(fwrite(good, 1, size, f), size);
        fclose(f);
        rewrite_checkpoint(out, cases[i].key, cases[i].value, cases[i].drop);
        const pfx_status st = pfx_pretrain_run(rt, &c, NULL, NULL, &r);
        pfx_pretrain_result_free(&r);
        if (st == PFX_SUCCESS || !strstr(pfx_last_error(rt), cases[i].needle))
            fail_msg("case %zu (%s = %s): %s (%s)", i, cases[i].key,
                     cases[i].value ? cases[i].value : "(none)", pfx_status_string(st),
                     pfx_last_error(rt));
    }
    /* the good one still resumes */
    FILE *f = fopen(path, "wb");
    assert_int_equal(fwrite(good, 1, size, f), size);
    fclose(f);
    run_ok(rt, &c, &r);
    assert_int_equal(r.first_step, 2);
    assert_int_equal(r.steps_done, 6);
    pfx_pretrain_result_free(&r);
    free(good);
    tf_rmdir(out);
    free(out);
    tf_rmdir(cfgdir);
    free(cfgdir);
}

/* Two micro-batches of 2 blocks average to one batch of the same 4 blocks. */
static void test_accumulate(void **state)
{
    pfx_runtime *rt = *state;
    char *cfgdir = tf_tempdir("pt-config"), *a = tf_tempdir("pt-acc1"), *b = tf_tempdir("pt-acc2");
    assert_int_equal(tf_write_config_text(cfgdir, tiny_gpt2), 0);
    pfx_pretrain_config c;
    base_config(&c, cfgdir, a);
    c.steps = 2;
    pfx_pretrain_result ra, rb;
    run_ok(rt, &c, &ra);
    c.out_dir = b;
    c.batch = 2;
    c.accumulate = 2;
    run_ok(rt, &c, &rb);
    for (size_t s = 0; s < 2; s++) {
        print_message("  step %zu: loss %.7f / %.7f, norm %.6f / %.6f\n", s + 1, ra.losses[s],
                      rb.losses[s], (double)ra.grad_norms[s], (double)rb.grad_norms[s]);
        assert_true(fabs(ra.losses[s] - rb.losses[s]) <= 1e-6 * ra.losses[s]);
        assert_true(fabsf(ra.grad_norms[s] - rb.grad_norms[s]) <= 1e-4f * ra.grad_norms[s]);
    }
    pfx_pretrain_result_free(&ra);
    pfx_pretrain_result_free(&rb);
    tf_rmdir(a);
    free(a);
    tf_rmdir(b);
    free(b);
    tf_rmdir(cfgdir);
    free(cfgdir);
}

/* The structured gain of dir/gains.safetensors ([L, H, D] into out). */
static void read_dim_gains(const char *dir, float *out, size_t n)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/gains.safetensors", dir);
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_read_f32(f, "dim_gains", out, n), PFX_SUCCESS);
    pfx_safetensors_close(&f);
}

/* Gains on some heads only (config.gain_heads): the others stay exactly 0,
 * per head and structured, at every step while the selected ones move; the
 * same run stopped and resumed with the same heads equals it bit for bit,
 * and with other heads (or none given) is refused naming gain_heads. Every
 * head selected is the run without a selection, bit for bit. */
static void test_gain_heads(void **state)
{
    pfx_runtime *rt = *state;
    char *cfgdir = tf_tempdir("pt-config"), *a = tf_tempdir("pt-heads"),
         *b = tf_tempdir("pt-heads-resumed");
    assert_int_equal(tf_write_config_text(cfgdir, tiny_gpt2), 0);
    enum { L = 2, H = 4, D = 10, LH = L * H };
    uint8_t mask[LH] = { 0 }, other[LH] = { 0 }, all[LH];
    mask[0 * H + 1] = mask[1 * H + 2] = mask[1 * H + 3] = 1;
    other[0 * H + 1] = other[1 * H + 2] = 1;
    memset(all, 1, sizeof(all));
    /* the job's lists of the masks: (layer, head) pairs */
    const pfx_layer_head sel[] = { { 0, 1 }, { 1, 2 }, { 1, 3 } }, oth[] = { { 0, 1 }, { 1, 2 } };
    pfx_layer_head every[LH];
    for (size_t i = 0; i < LH; i++)
        every[i] = (pfx_layer_head){ (LH - 1 - i) / H, (LH - 1 - i) % H };
    pfx_pretrain_config c;
    base_config(&c, cfgdir, a);
    c.steps = 6;
    c.gain_mode = PFX_GAIN_LINEAR;
    c.structured_gain = true;
    c.gain_ramp_steps = 2;
    c.gain_heads = sel;
    c.gain_head_count = 3;
    pfx_pretrain_result ra, rb;
    run_ok(rt, &c, &ra);
    for (size_t s = 0; s <= 6; s++)
        for (size_t i = 0; i < LH; i++)
            if (!mask[i] && ra.gains[s * LH + i] != 0.0f)
                fail_msg("masked head %zu.%zu has gain %g after step %zu", i / H, i % H,
                         (double)ra.gains[s * LH + i], s);
    for (size_t i = 0; i < LH; i++)
        if (mask[i])
            assert_true(ra.gains[6 * LH + i] != 0.0f);
    float dim[LH * D];
    read_dim_gains(a, dim, LH * D);
    for (size_t i = 0; i < LH; i++) {
        double moved = 0.0;
        for (size_t d = 0; d < D; d++)
            moved += fabs(dim[i * D + d]);
        if (mask[i] ? moved == 0.0 : moved != 0.0)
            fail_msg("head %zu.%zu: structured gain moved %g (selected %d)", i / H, i % H, moved,
                     mask[i]);
    }

    /* stopped and resumed with the same heads: the same run; other heads refused */
    c.out_dir = b;
    c.stop_after = 3;
    run_ok(rt, &c, &rb);
    pfx_pretrain_result_free(&rb);
    c.stop_after = 0;
    c.resume = true;
    c.gain_heads = oth;
    c.gain_head_count = 2;
    assert_status_names(rt, pfx_pretrain_run(rt, &c, NULL, NULL, &rb), PFX_ERROR_INVALID_ARGUMENT,
                        "gain_heads");
    pfx_pretrain_result_free(&rb);
    c.gain_heads = NULL;
    assert_status_names(rt, pfx_pretrain_run(rt, &c, NULL, NULL, &rb), PFX_ERROR_INVALID_ARGUMENT,
                        "gain_heads");
    pfx_pretrain_result_free(&rb);
    c.gain_heads = sel;
    c.gain_head_count = 3;
    run_ok(rt, &c, &rb);
    assert_memory_equal(ra.gains, rb.gains, 7 * LH * sizeof(float));
    assert_same_run(&ra, &rb, a, b, 6);

    /* every head selected: the run without a selection */
    c.resume = false;
    c.structured_gain = false;
    c.steps = 3;
    c.out_dir = a;
    c.gain_heads = every; /* in another order than the heads' */
    c.gain_head_count = LH;
    run_ok(rt, &c, &ra);
    c.out_dir = b;
    c.gain_heads = NULL;
    run_ok(rt, &c, &rb);
    assert_same_run(&ra, &rb, a, b, 3);
    drop_dirs(a, b, cfgdir);
}

/* config.gain_init: the trained heads start uniform in [-A, A] from the
 * seed (the same twice, another with another seed), the others at 0; a
 * checkpoint keeps it. config.gain_decay_fraction: the gains' late updates
 * shrink with their faster decay. */
static void test_gain_init_and_decay(void **state)
{
    pfx_runtime *rt = *state;
    char *cfgdir = tf_tempdir("pt-config"), *a = tf_tempdir("pt-init"),
         *b = tf_tempdir("pt-init-again");
    assert_int_equal(tf_write_config_text(cfgdir, tiny_gpt2), 0);
    enum { LH = 8 };
    const pfx_layer_head sel[] = { { 0, 1 }, { 1, 2 }, { 1, 3 } };
    pfx_pretrain_config c;
    base_config(&c, cfgdir, a);
    c.steps = 2;
    c.gain_mode = PFX_GAIN_LINEAR;
    c.gain_init = 0.3f;
    c.gain_heads = sel;
    c.gain_head_count = 3;
    pfx_pretrain_result ra, rb;
    run_ok(rt, &c, &ra);
    for (size_t i = 0; i < LH; i++) {
        const bool trained = i == 1 || i == 6 || i == 7;
        const float g = ra.gains[i];
        assert_true(trained ? g != 0.0f && fabsf(g) <= 0.3f : g == 0.0f);
    }
    assert_true(ra.gains[1] != ra.gains[6] && ra.gains[6] != ra.gains[7]);
    c.out_dir = b;
    run_ok(rt, &c, &rb);
    assert_memory_equal(ra.gains, rb.gains, 3 * LH * sizeof(float));
    pfx_pretrain_result_free(&rb);
    c.seed = 6;
    run_ok(rt, &c, &rb);
    assert_true(rb.gains[1] != ra.gains[1]);
    pfx_pretrain_result_free(&rb);
    /* resumed with another start: refused by name */
    c.seed = 5;
    c.stop_after = 1;
    run_ok(rt, &c, &rb);
    pfx_pretrain_result_free(&rb);
    c.stop_after = 0;
    c.resume = true;
    c.gain_init = 0.2f;
    assert_status_names(rt, pfx_pretrain_run(rt, &c, NULL, NULL, &rb), PFX_ERROR_INVALID_ARGUMENT,
                        "gain_init");
    pfx_pretrain_result_free(&rb);
    pfx_pretrain_result_free(&ra);

    /* the gains' cosine over a quarter of the steps: at its floor (0.1) from
     * the first step while the weights' goes 0.85, 0.55, 0.25 */
    c.resume = false;
    c.gain_init = 0.0f;
    c.gain_heads = NULL;
    c.gain_head_count = 0;
    c.steps = 4;
    c.warmup_steps = 0;
    c.gain_ramp_steps = 0;
    c.out_dir = a;
    run_ok(rt, &c, &ra);
    c.out_dir = b;
    c.gain_decay_fraction = 0.25f;
    run_ok(rt, &c, &rb);
    double moved_a = 0.0, moved_b = 0.0;
    for (size_t i = 0; i < LH; i++) {
        moved_a += fabs(ra.gains[3 * LH + i] - ra.gains[2 * LH + i]);
        moved_b += fabs(rb.gains[3 * LH + i] - rb.gains[2 * LH + i]);
    }
    print_message("  gains moved in step 3: %.3g with the weights' schedule, %.3g decayed "
                  "four times as fast\n",
                  moved_a, moved_b);
    assert_true(moved_b < 0.5 * moved_a);
    pfx_pretrain_result_free(&ra);
    pfx_pretrain_result_free(&rb);
    drop_dirs(a, b, cfgdir);
}

/* What a measuring callback does after each step: head statistics, a loss
 * and the hidden states on the job's whole batch and on a smaller one. */
typedef struct measure {
    pfx_runtime *rt;
    size_t calls;
    int32_t ids[4 * 32];
    float gain_seen[2 * 4]; /* the prefix's gains at the last call */
    bool bad;
} measure;

static void measure_step(const pfx_pretrain_step *s, void *user)
{
    measure *m = user;
    m->calls++;
    float mass[8], ent[8], top[8];
    double loss = NAN;
    const size_t C = 40;
    pfx_model_batch full = { 4, 32, m->ids, NULL, NULL }, small = { 1, 9, m->ids, NULL, NULL };
    size_t shape[3] = { 4, 32, C };
    pfx_tensor *hidden = NULL;
    if (pfx_model_head_stats(s->ctx, &full, s->prefix, 3, mass, ent, top) != PFX_SUCCESS ||
        pfx_model_head_stats(s->ctx, &small, s->prefix, 1, NULL, ent, NULL) != PFX_SUCCESS ||
        pfx_model_loss(s->ctx, &small, s->prefix, &loss) != PFX_SUCCESS || !isfinite(loss) ||
        pfx_tensor_create(m->rt, PFX_DTYPE_F32, 3, shape, &hidden) != PFX_SUCCESS ||
        pfx_model_hidden_states(s->ctx, &full, s->prefix, hidden) != PFX_SUCCESS)
        m->bad = true;
    pfx_tensor_destroy(&hidden);
    for (size_t i = 0; i < 8; i++)
        m->gain_seen[i] = s->prefix->gains ? s->prefix->gains[i] : NAN;
}

/* A callback measuring the model after every step leaves the training as
 * one that does nothing: the same losses, norms, evaluations, weights and
 * gains, bit for bit. The prefix it is handed holds the step's gains. */
static void test_callback_measures(void **state)
{
    pfx_runtime *rt = *state;
    char *cfgdir = tf_tempdir("pt-config"), *a = tf_tempdir("pt-measured"),
         *b = tf_tempdir("pt-plain");
    assert_int_equal(tf_write_config_text(cfgdir, tiny_gpt2), 0);
    pfx_pretrain_config c;
    base_config(&c, cfgdir, a);
    c.steps = 5;
    c.gain_mode = PFX_GAIN_TANH;
    c.gain_ramp_steps = 2;
    c.eval_every = 2;
    measure m = { .rt = rt };
    for (size_t i = 0; i < 4 * 32; i++)
        m.ids[i] = (int32_t)((i * 7919u) % 2197u);
    pfx_pretrain_result ra, rb;
    if (pfx_pretrain_run(rt, &c, measure_step, &m, &ra) != PFX_SUCCESS)
        fail_msg("pretrain: %s", pfx_last_error(rt));
    assert_int_equal(m.calls, 5);
    assert_false(m.bad);
    assert_memory_equal(m.gain_seen, ra.gains + 5 * 8, 8 * sizeof(float));
    c.out_dir = b;
    counter k = { 0, 0 };
    if (pfx_pretrain_run(rt, &c, count_steps, &k, &rb) != PFX_SUCCESS)
        fail_msg("pretrain: %s", pfx_last_error(rt));
    assert_same_run(&ra, &rb, a, b, 5);
    drop_dirs(a, b, cfgdir);
}

/* Each refusal before the first step: its status, a message naming the
 * cause, nothing written. */
static void test_bad_inputs(void **state)
{
    pfx_runtime *rt = *state;
    char *cfgdir = tf_tempdir("pt-config"), *out = tf_tempdir("pt-bad");
    assert_int_equal(tf_write_config_text(cfgdir, tiny_gpt2), 0);
    pfx_pretrain_config c;
    pfx_pretrain_result r;
    const size_t live = pfx_test_live_bytes(rt);
#define REFUSED(status, needle)                                                                    \
    do {                                                                                           \
        assert_status_names(rt, pfx_pretrain_run(rt, &c, NULL, NULL, &r), status, needle);         \
        pfx_pretrain_result_free(&r);                                                              \
        assert_false(exists(out, "loss.csv"));                                                     \
        assert_false(exists(out, PFX_PRETRAIN_CHECKPOINT));                                        \
        assert_int_equal(pfx_test_live_bytes(rt), live);                                           \
        base_config(&c, cfgdir, out);                                                              \
    } while (0)
    base_config(&c, cfgdir, out);
    c.model_dir = cfgdir;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "config_dir");
    c.config_dir = NULL;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "model_dir");
    c.block = 1;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "config.block");
    c.lr = NAN;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "config.lr");
    c.min_lr_ratio = 2.0f;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "min_lr_ratio");
    c.gain_mode = (pfx_gain_mode)7;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "gain_mode");
    c.block = 40;
    c.eval_path = NULL;
    c.data_path = eval_path; /* 8.6 KB: fills blocks of 40, but not of 4000 */
    c.block = 4000;
    REFUSED(PFX_ERROR_OUT_OF_RANGE, "block");
    c.freeze = "h.,wte,wpe,ln_f";
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "freeze");
    /* a part in no weight's name (a typo) is refused, not ignored */
    c.freeze = "wte,,h.0.atn";
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "config.freeze: 'h.0.atn' is in no weight's name");
    c.freeze = "h.0.atn";
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "weights are named as transformer.wte.weight, ");
    /* gain heads: without a gain or none, then against the model's 2 layers of
     * 4 heads once it is loaded */
    const pfx_layer_head one[] = { { 0, 2 } }, beyond_layer[] = { { 0, 2 }, { 2, 0 } },
                         beyond_head[] = { { 1, 4 } }, twice[] = { { 1, 3 }, { 0, 0 }, { 1, 3 } };
    c.gain_heads = one; /* without a gain */
    c.gain_head_count = 1;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "gain_heads");
    c.gain_heads = one;
    c.gain_head_count = 0;
    c.gain_mode = PFX_GAIN_LINEAR;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "gain_heads");
    c.gain_heads = one;
    c.gain_head_count = 0;
    c.structured_gain = true;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "gain_heads");
    c.gain_heads = beyond_layer;
    c.gain_head_count = 2;
    c.gain_mode = PFX_GAIN_TANH;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT,
            "config.gain_heads[1] (layer 2, head 0): the layer is not below the model's 2 layers");
    c.gain_heads = beyond_head;
    c.gain_head_count = 1;
    c.structured_gain = true;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT,
            "config.gain_heads[0] (layer 1, head 4): the head is not below the model's 4 heads");
    c.gain_heads = twice;
    c.gain_head_count = 3;
    c.gain_mode = PFX_GAIN_LINEAR;
    REFUSED(PFX_ERROR_INVALID_ARGUMENT, "config.gain_heads[2] (layer 1, head 3) is given twice");
    c.data_path = "/nonexistent/data.txt";
    REFUSED(PFX_ERROR_IO, "/nonexistent/data.txt");
    c.resume = true;
    REFUSED(PFX_ERROR_IO, PFX_PRETRAIN_CHECKPOINT);
    /* a vocabulary smaller than the tokenizer's ids */
    char *small = tf_tempdir("pt-small");
    assert_int_equal(
        tf_write_config_text(small, "{\"model_type\": \"gpt2\", \"n_embd\": 16, \"n_layer\": 1, "
                                    "\"n_head\": 2, \"vocab_size\": 100, \"n_positions\": 48}"),
        0);
    c.config_dir = small;
    REFUSED(PFX_ERROR_INVALID_SHAPE, "vocab_size is 100");
    /* a block past the positions */
    c.block = 64;
    REFUSED(PFX_ERROR_OUT_OF_RANGE, "n_positions");
    /* the output is a file */
    char file[2048];
    snprintf(file, sizeof(file), "%s/config.json", cfgdir);
    c.out_dir = file;
    assert_status_names(rt, pfx_pretrain_run(rt, &c, NULL, NULL, &r), PFX_ERROR_IO, "not a folder");
    pfx_pretrain_result_free(&r);
    assert_int_equal(pfx_pretrain_run(NULL, &c, NULL, NULL, &r), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_pretrain_run(rt, NULL, NULL, NULL, &r), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_pretrain_run(rt, &c, NULL, NULL, NULL), PFX_ERROR_NULL_ARGUMENT);
#undef REFUSED
    tf_rmdir(small);
    free(small);
    tf_rmdir(out);
    free(out);
    tf_rmdir(cfgdir);
    free(cfgdir);
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
        cmocka_unit_test(test_pretrain_learns),   cmocka_unit_test(test_resume),
        cmocka_unit_test(test_accumulate),        cmocka_unit_test(test_checkpoint_checked),
        cmocka_unit_test(test_bad_inputs),        cmocka_unit_test(test_gain_heads),
        cmocka_unit_test(test_callback_measures), cmocka_unit_test(test_gain_init_and_decay),
    };
    return cmocka_run_group_tests(tests, pfx_test_group_setup, pfx_test_group_teardown);
}
