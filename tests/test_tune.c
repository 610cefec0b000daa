/*
 * Suite 'tune': the prefix-tuning job (prefixcl/tune.h, pfx_tune_run) and
 * the `prefixcl tune` command over it (tools/commands/cmd_tune.c), run in-process on
 * tiny model folders written here (model_folder.c, the demonstration's
 * tokenizer.json copied in) and a small text file written here: the loss
 * falls and the pictures are drawn from the result; a run stopped after step
 * k and resumed gives the uninterrupted run's loss curve and adapter bit for
 * bit; the adapter read back by pfx_peft_load_prefixes holds the prefixes of
 * the checkpoint's encoder, and an adapter bank serves it; a GQA
 * Llama-family model's adapter has PEFT's token_dim (kv heads x head size);
 * bad options are refused by the job naming the field, before anything is
 * written, and by the command with a message.
 * usage: test_tune OUT_DIR DEMO_DIR
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "commands/commands.h"
#include "model_folder.h"
#include "plot/tune_plot.h"

static const char *out_dir, *demo_dir;
static pfx_runtime *rt; /* every job's */
static char gpt2_dir[4096], llama_dir[4096], data_path[4200];

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[len] = 0;
    *n = (size_t)len;
    return buf;
}

static void copy_tokenizer(const char *dir)
{
    char src[4200], dst[4200];
    snprintf(src, sizeof(src), "%s/tokenizer.json", demo_dir);
    snprintf(dst, sizeof(dst), "%s/tokenizer.json", dir);
    size_t n;
    char *buf = slurp(src, &n);
    assert_non_null(buf);
    FILE *f = fopen(dst, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
}

static int write_folders(void **state)
{
    (void)state;
    /* vocabulary: the demonstration tokenizer's 2,197 ids fit */
    ref_model_config g = { .family = REF_MODEL_GPT2,
                           .layers = 2,
                           .hidden = 24,
                           .heads = 3,
                           .kv_heads = 3,
                           .head_dim = 8,
                           .inner = 40,
                           .vocab = 2200,
                           .max_positions = 64,
                           .eps = 1e-5,
                           .act = REF_ACT_GELU_TANH };
    ref_model_config l = { .family = REF_MODEL_LLAMA,
                           .layers = 2,
                           .hidden = 24,
                           .heads = 4,
                           .kv_heads = 2,
                           .head_dim = 6,
                           .inner = 34,
                           .vocab = 2200,
                           .max_positions = 64,
                           .eps = 1e-6,
                           .act = REF_ACT_SILU };
    l.rope.theta = 10000.0;
    snprintf(gpt2_dir, sizeof(gpt2_dir), "%s/gpt2-tiny", out_dir);
    snprintf(llama_dir, sizeof(llama_dir), "%s/llama-gqa-tiny", out_dir);
    mkdir(gpt2_dir, 0777);
    mkdir(llama_dir, 0777);
    tf_model m;
    tf_model_init(&m, &g, true, "gpt2", 5);
    if (tf_write(&m, gpt2_dir, 1))
        return -1;
    tf_model_free(&m);
    tf_model_init(&m, &l, false, "llama", 6);
    if (tf_write(&m, llama_dir, 1))
        return -1;
    tf_model_free(&m);
    copy_tokenizer(gpt2_dir);
    copy_tokenizer(llama_dir);
    /* the training text: a few patterns a prefix can learn to expect */
    snprintf(data_path, sizeof(data_path), "%s/train.txt", out_dir);
    FILE *f = fopen(data_path, "w");
    if (!f)
        return -1;
    static const char *const who[] = { "The sailor", "A clever goat", "Karin", "The teacher",
                                       "An old swan" };
    static const char *const what[] = { "measured the small clock", "sold a dark brooch",
                                        "cleaned the notebook", "carried a black anvil" };
    for (int i = 0; i < 48; i++)
        fprintf(f, "%s %s near the mill.\n", who[i % 5], what[(i / 5) % 4]);
    fclose(f);
    return 0;
}

static void base_config(pfx_tune_config *c, const char *model, const char *out)
{
    pfx_tune_default_config(c);
    c->model_dir = model;
    c->data_path = data_path;
    c->out_dir = out;
    c->prefix_len = 5;
    c->hidden = 16;
    c->batch = 4;
    c->max_length = 20;
    c->steps = 12;
    c->lr = 2e-2f;
    c->warmup_steps = 2;
    c->seed = 11;
}

static void out_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", out_dir, name);
}

static void test_loss_falls(void **state)
{
    (void)state;
    char dir[4200];
    out_path(dir, sizeof(dir), "falls");
    pfx_tune_config c;
    base_config(&c, gpt2_dir, dir);
    c.steps = 40;
    c.gain_mode = PFX_GAIN_TANH;
    c.gain_ramp_steps = 5;
    pfx_tune_result r;
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    assert_int_equal(r.steps_done, 40);
    assert_false(r.stopped);
    double first = 0, last = 0;
    for (size_t i = 0; i < 5; i++) {
        first += r.losses[i] / 5;
        last += r.losses[35 + i] / 5;
    }
    fprintf(stderr, "loss %.4f -> %.4f, eval %.4f -> %.4f\n", first, last, r.eval_before,
            r.eval_after);
    assert_true(isfinite(first) && isfinite(last));
    assert_true(last < 0.8 * first);
    assert_true(r.eval_after < r.eval_before);
    /* the attention statistics and the gains come back */
    for (size_t i = 0; i < r.shape.layers * r.shape.heads; i++) {
        assert_true(r.mass_before[i] > 0 && r.mass_before[i] < 1);
        assert_true(r.mass_after[i] > 0 && r.mass_after[i] < 1);
        assert_true(isfinite(r.gains[i]));
    }
    /* gains.safetensors: the gains file of io.h (as pretraining writes it),
     * equal to the run's, with the last ramp */
    char path[4300];
    snprintf(path, sizeof(path), "%s/%s", dir, PFX_TUNE_GAINS);
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    const size_t LH = r.shape.layers * r.shape.heads;
    float *g = malloc(LH * sizeof(float)), *dg = malloc(LH * r.shape.head_dim * sizeof(float));
    pfx_gains_values v = { .gains = g, .dim_gains = dg };
    assert_int_equal(
        pfx_gains_file_read(f, path, r.shape.layers, r.shape.heads, r.shape.head_dim, &v),
        PFX_SUCCESS);
    assert_int_equal(v.gain_mode, PFX_GAIN_TANH);
    assert_false(v.structured);
    assert_true(v.gain_ramp > 0.0f && v.gain_ramp <= 1.0f);
    assert_memory_equal(g, r.gains, LH * sizeof(float));
    assert_int_equal(pfx_safetensors_find(f, "layers.0.gain"), -1);
    pfx_safetensors_close(&f);
    free(g);
    free(dg);
    static const char *const files[] = { "loss.csv", "adapter_config.json",
                                         "adapter_model.safetensors", PFX_TUNE_CHECKPOINT };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        struct stat sb;
        if (stat(path, &sb) != 0 || sb.st_size == 0)
            fail_msg("%s missing or empty", path);
    }
    /* the pictures: PNGs with cairo (their drawing: tests/test_chart.c), none without */
    static const char *const pictures[] = { "loss.png", "attention.png", "gains.png" };
    bool drawn = !PFX_TEST_CAIRO;
    assert_int_equal(tune_plot_all(dir, &r, &drawn), 0);
    assert_int_equal(drawn, PFX_TEST_CAIRO);
    for (size_t i = 0; i < sizeof(pictures) / sizeof(pictures[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, pictures[i]);
        FILE *png = fopen(path, "rb");
#if PFX_TEST_CAIRO
        if (!png)
            fail_msg("%s missing", path);
        unsigned char sig[8] = { 0 };
        size_t got = fread(sig, 1, sizeof(sig), png);
        fclose(png);
        static const unsigned char magic[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n' };
        assert_int_equal(got, sizeof(sig));
        assert_memory_equal(sig, magic, sizeof(sig));
#else
        if (png) {
            fclose(png);
            fail_msg("%s drawn in a build without cairo", path);
        }
#endif
    }
    pfx_tune_result_free(&r);
}

static void assert_files_equal(const char *a, const char *b)
{
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    if (na != nb || memcmp(x, y, na))
        fail_msg("%s and %s differ", a, b);
    free(x);
    free(y);
}

/* Raises the stop flag during step 5, as cmd_tune's SIGINT handler does;
 * the callback sees the model and the prefix the next step attends with. */
static volatile sig_atomic_t stop_now;

static void stop_at_5(const pfx_tune_step *s, void *user)
{
    (void)user;
    assert_non_null(s->ctx);
    assert_non_null(pfx_context_model(s->ctx));
    assert_non_null(s->prefix);
    assert_int_equal(s->prefix->prefix_len, 5);
    assert_true(s->prefix->gains != NULL && s->prefix->gain_ramp == s->gain_ramp);
    if (s->step == 5)
        stop_now = 1;
}

/* Stopped by the flag after step 5 (Ctrl-C), then resumed: the same curve
 * and the same adapter bit for bit, gains, a held-back slice, two batches a
 * step (accumulate) and the evaluations every 3 steps (eval_every, with the
 * learning rates: the curves of loss.csv) included;
 * no temporary file is left. Then stop_after (step 7 of a run resumed at 5). */
static void test_resume_bit_for_bit(void **state)
{
    (void)state;
    char whole[4200], parts[4200];
    out_path(whole, sizeof(whole), "resume-whole");
    out_path(parts, sizeof(parts), "resume-parts");
    pfx_tune_config c;
    base_config(&c, gpt2_dir, whole);
    c.gain_mode = PFX_GAIN_LINEAR;
    c.gain_ramp_steps = 4;
    c.accumulate = 2; /* two batches a step: the data position of a resume */
    c.eval_every = 3; /* the evaluations between, kept by the checkpoint */
    pfx_tune_result a, b, d;
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &a), PFX_SUCCESS);
    for (size_t s = 0; s <= 12; s++)
        assert_true(isfinite(a.eval_losses[s]) == (s % 3 == 0));
    c.out_dir = parts;
    c.stop_flag = &stop_now;
    stop_now = 0;
    assert_int_equal(pfx_tune_run(rt, &c, stop_at_5, NULL, &b), PFX_SUCCESS);
    assert_true(b.stopped);
    assert_int_equal(b.steps_done, 5);
    char cmd[4400];
    snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -q '\\.tmp-'", parts);
    assert_int_not_equal(system(cmd), 0);
    stop_now = 0;
    c.stop_flag = NULL;
    pfx_tune_result_free(&b);
    c.resume = true;
    c.stop_after = 7;
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &b), PFX_SUCCESS);
    assert_true(b.stopped);
    assert_int_equal(b.first_step, 5);
    assert_int_equal(b.steps_done, 7);
    c.stop_after = 0;
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &d), PFX_SUCCESS);
    assert_false(d.stopped);
    assert_int_equal(d.first_step, 7);
    assert_int_equal(d.steps_done, 12);
    assert_memory_equal(a.losses, d.losses, 12 * sizeof(double));
    assert_memory_equal(a.grad_norms, d.grad_norms, 12 * sizeof(float));
    assert_memory_equal(a.lrs, d.lrs, 12 * sizeof(float));
    assert_memory_equal(a.eval_losses, d.eval_losses, 13 * sizeof(double));
    assert_memory_equal(a.gains, d.gains, a.shape.layers * a.shape.heads * sizeof(float));
    assert_true(a.eval_before == d.eval_before && a.eval_after == d.eval_after);
    static const char *const same[] = { "loss.csv", "adapter_model.safetensors", PFX_TUNE_GAINS };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        char x[4300], y[4300];
        snprintf(x, sizeof(x), "%s/%s", whole, same[i]);
        snprintf(y, sizeof(y), "%s/%s", parts, same[i]);
        assert_files_equal(x, y);
    }
    /* other options: refused, naming the option */
    pfx_tune_result e;
    c.lr = 3e-2f;
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &e), PFX_ERROR_INVALID_ARGUMENT);
    if (!strstr(pfx_last_error(rt), "lr=") || !strstr(pfx_last_error(rt), PFX_TUNE_CHECKPOINT))
        fail_msg("other options: '%s'", pfx_last_error(rt));
    pfx_tune_result_free(&e);
    pfx_tune_result_free(&a);
    pfx_tune_result_free(&b);
    pfx_tune_result_free(&d);
}

/* The adapter's prompt_embeddings, read by the library's PEFT reader, are
 * the prefixes of the checkpoint's encoder MLP, exactly; an adapter bank of
 * the base model serves the folder. */
static void test_adapter_reads_back(void **state)
{
    (void)state;
    char dir[4200], path[4300];
    out_path(dir, sizeof(dir), "adapter");
    pfx_tune_config c;
    base_config(&c, gpt2_dir, dir);
    c.steps = 4;
    pfx_tune_result r;
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    const size_t L = r.shape.layers, Hkv = r.shape.kv_heads, D = r.shape.head_dim, P = c.prefix_len;
    pfx_model *model = NULL;
    pfx_adapter_bank *bank = NULL;
    int32_t entry = -1;
    assert_int_equal(pfx_model_load(rt, gpt2_dir, NULL, &model), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_create(model, 2, &bank), PFX_SUCCESS);
    assert_int_equal(pfx_adapter_bank_add(bank, dir, &entry), PFX_SUCCESS);
    assert_int_equal(entry, 0);
    assert_int_equal(pfx_adapter_bank_count(bank), 1);
    pfx_adapter_bank_destroy(&bank);
    pfx_model_destroy(&model);
    pfx_tensor *k[2] = { NULL, NULL }, *v[2] = { NULL, NULL };
    pfx_peft_config pc;
    assert_int_equal(pfx_peft_load_prefixes(rt, dir, 0, k, v, L, &pc), PFX_SUCCESS);
    assert_int_equal(pc.num_virtual_tokens, P);
    assert_string_equal(pc.task_type, "CAUSAL_LM");
    char *abs = realpath(gpt2_dir, NULL);
    assert_string_equal(pc.base_model_name_or_path, abs);
    free(abs);
    /* the same encoder from the checkpoint */
    pfx_encoder_params ep = { .layers = L,
                              .kv_heads = Hkv,
                              .head_dim = D,
                              .prefix_len = P,
                              .embed_dim = c.hidden,
                              .hidden_dim = c.hidden };
    pfx_encoder *enc = NULL;
    assert_int_equal(pfx_encoder_create(rt, &ep, &enc), PFX_SUCCESS);
    snprintf(path, sizeof(path), "%s/%s", dir, PFX_TUNE_CHECKPOINT);
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    for (int i = 0; i < PFX_ENCODER_PARAM_COUNT; i++)
        assert_int_equal(pfx_safetensors_load_tensor(rt, f,
                                                     pfx_encoder_param_name((pfx_encoder_param)i),
                                                     pfx_encoder_tensor(enc, (pfx_encoder_param)i)),
                         PFX_SUCCESS);
    pfx_safetensors_close(&f);
    pfx_tensor *ek[2], *ev[2];
    const size_t shape[3] = { Hkv, P, D };
    for (size_t l = 0; l < L; l++) {
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &ek[l]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &ev[l]), PFX_SUCCESS);
    }
    assert_int_equal(pfx_encoder_forward(enc, ek, ev), PFX_SUCCESS);
    const size_t n = Hkv * P * D;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    size_t nonzero = 0;
    for (size_t l = 0; l < L; l++) {
        pfx_tensor *pairs[2][2] = { { k[l], ek[l] }, { v[l], ev[l] } };
        for (int p = 0; p < 2; p++) {
            assert_int_equal(pfx_tensor_read(pairs[p][0], 0, n, x), PFX_SUCCESS);
            assert_int_equal(pfx_tensor_read(pairs[p][1], 0, n, y), PFX_SUCCESS);
            assert_memory_equal(x, y, n * sizeof(float));
            for (size_t i = 0; i < n; i++)
                nonzero += x[i] != 0.0f;
        }
        pfx_tensor_destroy(&k[l]);
        pfx_tensor_destroy(&v[l]);
        pfx_tensor_destroy(&ek[l]);
        pfx_tensor_destroy(&ev[l]);
    }
    assert_true(nonzero > n);
    free(x);
    free(y);
    pfx_encoder_destroy(&enc);
    pfx_tune_result_free(&r);
}

/* A GQA Llama-family model (4 heads on 2 kv heads of 6): PEFT's token_dim is
 * kv heads x head size, num_attention_heads the kv heads; direct prefixes. */
static void test_gqa_token_dim(void **state)
{
    (void)state;
    char dir[4200];
    out_path(dir, sizeof(dir), "gqa");
    pfx_tune_config c;
    base_config(&c, llama_dir, dir);
    c.steps = 3;
    c.hidden = 0;
    pfx_tune_result r;
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    assert_int_equal(r.counts.trainable, 2 * 2 * 2 * 5 * 6);
    pfx_peft_config pc;
    assert_int_equal(pfx_peft_read_config(dir, &pc), PFX_SUCCESS);
    assert_int_equal(pc.token_dim, 2 * 6);
    assert_int_equal(pc.num_attention_heads, 2);
    assert_int_equal(pc.num_layers, 2);
    assert_int_equal(pc.num_virtual_tokens, 5);
    assert_false(pc.prefix_projection);
    char path[4300];
    snprintf(path, sizeof(path), "%s/adapter_model.safetensors", dir);
    pfx_safetensors *f = NULL;
    assert_int_equal(pfx_safetensors_open(path, &f), PFX_SUCCESS);
    pfx_st_info info;
    assert_int_equal(
        pfx_safetensors_info(f, (size_t)pfx_safetensors_find(f, "prompt_embeddings"), &info),
        PFX_SUCCESS);
    assert_int_equal(info.ndim, 2);
    assert_int_equal(info.shape[0], 5);
    assert_int_equal(info.shape[1], 2 * 2 * 2 * 6);
    pfx_safetensors_close(&f);
    pfx_tune_result_free(&r);
}

static pfx_status no_reduce(void *user, pfx_optimizer *opt, double *count, double *mean_loss)
{
    (void)user, (void)opt, (void)count, (void)mean_loss;
    return PFX_ERROR_INVALID_ARGUMENT; /* never called: the rank is refused first */
}

/* config.max_length 0 fits the model: the default length, or the positions
 * the prefix leaves when fewer (the fixture's 64 less the prefix), as the
 * steps and the result see it. A length given that does not fit is refused
 * naming the longest that does. */
static size_t seen_length;

static void note_length(const pfx_tune_step *s, void *user)
{
    (void)user;
    seen_length = s->max_length;
}

static void test_fit_length(void **state)
{
    (void)state;
    char dir[4200];
    out_path(dir, sizeof(dir), "fit");
    pfx_tune_config c;
    base_config(&c, gpt2_dir, dir);
    c.max_length = 0;
    c.prefix_len = 7;
    c.steps = 1;
    pfx_tune_result r;
    assert_int_equal(pfx_tune_run(rt, &c, note_length, NULL, &r), PFX_SUCCESS);
    assert_int_equal(r.max_length, 64 - 7);
    assert_int_equal(seen_length, 64 - 7);
    pfx_tune_result_free(&r);
    c.max_length = 58;
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &r), PFX_ERROR_INVALID_ARGUMENT);
    if (!strstr(pfx_last_error(rt), "lower config.max_length to 57 or less, or config.prefix_len"))
        fail_msg("max_length 58 + prefix_len 7: %s", pfx_last_error(rt));
    c.max_length = 57; /* the longest that fits is taken as given */
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    assert_int_equal(r.max_length, 57);
    pfx_tune_result_free(&r);
}

/* The job checks every option before the first step: each bad one refused
 * with its status and a message naming the field, and nothing written (the
 * output folder not even made). */
static void test_job_bad_options(void **state)
{
    (void)state;
    char dir[4200], file[4200], missing[4300];
    out_path(dir, sizeof(dir), "job-bad");
    out_path(file, sizeof(file), "job-bad-file");
    snprintf(missing, sizeof(missing), "%s/no-such.txt", out_dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    enum {
        MODEL,
        DATA,
        OUT,
        PREFIX,
        BATCH,
        LENGTH,
        STEPS,
        LR,
        DECAY,
        CLIP,
        GAIN_LR,
        GAIN,
        STORAGE,
        REDUCE,
        RANK,
        FIT,
        ROOM,
        MISSING,
        OUT_FILE,
        CASES
    };
    static const struct {
        pfx_status st;
        const char *message;
    } want[CASES] = {
        [MODEL] = { PFX_ERROR_INVALID_ARGUMENT, "config.model_dir" },
        [DATA] = { PFX_ERROR_INVALID_ARGUMENT, "config.data_path" },
        [OUT] = { PFX_ERROR_INVALID_ARGUMENT, "config.out_dir" },
        [PREFIX] = { PFX_ERROR_INVALID_ARGUMENT, "config.prefix_len" },
        [BATCH] = { PFX_ERROR_INVALID_ARGUMENT, "config.batch" },
        [LENGTH] = { PFX_ERROR_INVALID_ARGUMENT, "config.max_length" },
        [STEPS] = { PFX_ERROR_INVALID_ARGUMENT, "config.steps and config.epochs" },
        [LR] = { PFX_ERROR_INVALID_ARGUMENT, "config.lr" },
        [DECAY] = { PFX_ERROR_INVALID_ARGUMENT, "config.weight_decay" },
        [CLIP] = { PFX_ERROR_INVALID_ARGUMENT, "config.max_grad_norm" },
        [GAIN_LR] = { PFX_ERROR_INVALID_ARGUMENT, "config.gain_lr" },
        [GAIN] = { PFX_ERROR_INVALID_ARGUMENT, "config.gain_mode" },
        [STORAGE] = { PFX_ERROR_INVALID_ARGUMENT, "config.storage" },
        [REDUCE] = { PFX_ERROR_INVALID_ARGUMENT, "config.dist.reduce" },
        [RANK] = { PFX_ERROR_INVALID_ARGUMENT, "config.dist.rank" },
        [FIT] = { PFX_ERROR_INVALID_ARGUMENT,
                  "config.max_length 60 + config.prefix_len 5 exceed the model's 64 positions "
                  "(" },
        [ROOM] = { PFX_ERROR_INVALID_ARGUMENT,
                   "config.prefix_len 63 leaves fewer than 2 of the model's 64 positions" },
        [MISSING] = { PFX_ERROR_IO, "no-such.txt" },
        [OUT_FILE] = { PFX_ERROR_IO, "exists and is not a folder" },
    };
    for (int i = 0; i < CASES; i++) {
        pfx_tune_config c;
        base_config(&c, gpt2_dir, dir);
        switch (i) {
        case MODEL: c.model_dir = NULL; break;
        case DATA: c.data_path = NULL; break;
        case OUT: c.out_dir = ""; break;
        case PREFIX: c.prefix_len = 0; break;
        case BATCH: c.batch = 0; break;
        case LENGTH: c.max_length = 1; break;
        case STEPS: c.steps = 0, c.epochs = 0; break;
        case LR: c.lr = NAN; break;
        case DECAY: c.weight_decay = -1.0f; break;
        case CLIP: c.max_grad_norm = INFINITY; break;
        case GAIN_LR: c.gain_lr = NAN; break;
        case GAIN: c.gain_mode = (pfx_gain_mode)7; break;
        case STORAGE: c.storage = (pfx_dtype)7; break;
        case REDUCE: c.dist.ranks = 2; break;
        case RANK: c.dist.ranks = 2, c.dist.rank = 2, c.dist.reduce = no_reduce; break;
        case FIT: c.max_length = 60; break;
        case ROOM: c.prefix_len = 63, c.max_length = 0; break;
        case MISSING: c.data_path = missing; break;
        case OUT_FILE: c.out_dir = file; break;
        }
        pfx_tune_result r;
        const pfx_status st = pfx_tune_run(rt, &c, NULL, NULL, &r);
        if (st != want[i].st || !strstr(pfx_last_error(rt), want[i].message))
            fail_msg("case %d: %s (%s), expected %s naming '%s'", i, pfx_status_string(st),
                     pfx_last_error(rt), pfx_status_string(want[i].st), want[i].message);
        assert_null(r.losses);
        struct stat sb;
        if (stat(dir, &sb) == 0)
            fail_msg("case %d: %s made before the first step", i, dir);
    }
    pfx_tune_config c;
    base_config(&c, gpt2_dir, dir);
    pfx_tune_result r;
    assert_int_equal(pfx_tune_run(NULL, &c, NULL, NULL, &r), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_tune_run(rt, NULL, NULL, NULL, &r), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_tune_run(rt, &c, NULL, NULL, NULL), PFX_ERROR_NULL_ARGUMENT);
}

/* Runs cmd_tune with stderr into a file; returns the exit status and the
 * message in msg. */
static int run_captured(int argc, const char **argv, char *msg, size_t cap)
{
    char path[4200];
    out_path(path, sizeof(path), "stderr.txt");
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    dup2(fileno(f), 2);
    int rc = cmd_tune(argc, (char **)argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    size_t n;
    char *text = slurp(path, &n);
    snprintf(msg, cap, "%s", text ? text : "");
    free(text);
    return rc;
}

static void test_bad_options(void **state)
{
    (void)state;
    char dir[4200];
    out_path(dir, sizeof(dir), "bad");
    static const struct {
        const char *args[4];
        const char *message;
    } cases[] = {
        { { "--bogus" }, "unknown option '--bogus'" },
        { { "--steps", "0" }, "bad --steps '0'" },
        { { "--steps", "5x" }, "bad --steps '5x'" },
        { { "--steps", " 5" }, "bad --steps ' 5'" },
        { { "--batch", "-1" }, "bad --batch '-1'" },
        { { "--max-length", "1" }, "bad --max-length '1'" },
        { { "--prefix-len", "0" }, "bad --prefix-len '0'" },
        { { "--hidden", "x" }, "bad --hidden 'x'" },
        { { "--lr", "nan" }, "bad --lr 'nan'" },
        { { "--lr", "-1" }, "bad --lr '-1'" },
        { { "--lr", "1e-3x" }, "bad --lr '1e-3x'" },
        { { "--lr", "" }, "bad --lr ''" },
        { { "--gain-lr", " 1e-3" }, "bad --gain-lr ' 1e-3'" },
        { { "--gain", "sigmoid" }, "bad --gain 'sigmoid' (off, linear or tanh)" },
        { { "--storage", "q4" }, "bad --storage 'q4' (f32, f16, bf16 or q8_0)" },
        { { "--clip", "inf" }, "bad --clip 'inf'" },
        { { "--seed", "-5" }, "bad --seed '-5'" },
        { { "--steps" }, "--steps needs a value" },
        { { "--out", "" }, "--out is empty" },
        { { "stray" }, "unexpected argument 'stray'" },
        { { "--model", "x" }, "--model needs --data" },
    };
    char msg[4096];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *argv[6] = { "tune" };
        int argc = 1;
        while (argc < 5 && cases[i].args[argc - 1])
            argv[argc] = cases[i].args[argc - 1], argc++;
        int rc = run_captured(argc, argv, msg, sizeof(msg));
        if (rc != 2 || !strstr(msg, cases[i].message))
            fail_msg("case %zu: exit %d, message '%s' (expected '%s')", i, rc, msg,
                     cases[i].message);
    }
    /* errors found later exit 1 and name the problem */
    char missing[4300];
    snprintf(missing, sizeof(missing), "%s/no-such.txt", out_dir);
    const char *a1[] = { "tune",  "--model", gpt2_dir,  "--data",       missing,
                         "--out", dir,       "--quiet", "--max-length", "20" };
    assert_int_equal(run_captured(10, a1, msg, sizeof(msg)), 1);
    assert_non_null(strstr(msg, "no-such.txt"));
    const char *a2[] = { "tune", "--model", gpt2_dir,       "--data", data_path,      "--out",
                         dir,    "--quiet", "--prefix-len", "50",     "--max-length", "20" };
    assert_int_equal(run_captured(12, a2, msg, sizeof(msg)), 2);
    /* a length that does not fit the model: the job's message in the options' names, exit 2 */
    assert_non_null(
        strstr(msg, "--max-length 20 + --prefix-len 50 exceed the model's 64 positions"));
    assert_non_null(strstr(msg, "lower --max-length to 14 or less, or --prefix-len"));
    const char *a3[] = { "tune", "--model", gpt2_dir,   "--data",       data_path, "--out",
                         dir,    "--quiet", "--resume", "--max-length", "20" };
    assert_int_equal(run_captured(11, a3, msg, sizeof(msg)), 1);
    assert_non_null(strstr(msg, PFX_TUNE_CHECKPOINT));

    /* every output checked before the first step: a file named as --out, a
     * folder where loss.csv goes (no step runs: no checkpoint appears) */
    char file[4300], ckpt[4400], csv[4400];
    out_path(file, sizeof(file), "a-file");
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    const char *a4[] = { "tune", "--model", gpt2_dir,       "--data", data_path, "--out",
                         file,   "--quiet", "--max-length", "20",     "--steps", "2" };
    assert_int_equal(run_captured(12, a4, msg, sizeof(msg)), 1);
    if (!strstr(msg, "--out") || !strstr(msg, "a-file: exists and is not a folder"))
        fail_msg("--out FILE: '%s'", msg);
    out_path(dir, sizeof(dir), "blocked");
    mkdir(dir, 0777);
    snprintf(csv, sizeof(csv), "%s/loss.csv", dir);
    snprintf(ckpt, sizeof(ckpt), "%s/%s", dir, PFX_TUNE_CHECKPOINT);
    mkdir(csv, 0777);
    remove(ckpt);
    const char *a5[] = { "tune", "--model", gpt2_dir,       "--data", data_path, "--out",
                         dir,    "--quiet", "--max-length", "20",     "--steps", "2" };
    assert_int_equal(run_captured(12, a5, msg, sizeof(msg)), 1);
    if (!strstr(msg, "loss.csv is a folder"))
        fail_msg("loss.csv a folder: '%s'", msg);
    assert_int_not_equal(access(ckpt, F_OK), 0);
}

/* `src` (a safetensors file) written to `dst` with the value of the metadata
 * `key` (its first "key":"value") replaced by `value`, or with `value`
 * appended to it when `append`; the header padded to 8 bytes again. */
static void edit_checkpoint(const char *src, const char *dst, const char *key, const char *value,
                            bool append)
{
    size_t n;
    unsigned char *b = (unsigned char *)slurp(src, &n);
    assert_non_null(b);
    assert_true(n >= 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | b[i];
    assert_true(hl <= n - 8);
    char *hdr = strndup((const char *)b + 8, (size_t)hl), pat[200];
    assert_non_null(hdr);
    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    char *at = strstr(hdr, pat);
    if (!at)
        fail_msg("%s: no metadata %s", src, key);
    char *v = at + strlen(pat), *q = strchr(v, '"');
    assert_non_null(q);
    size_t cap = hl + strlen(value) + 16;
    char *out = calloc(1, cap);
    assert_non_null(out);
    int len = snprintf(out, cap, "%.*s%s%s", (int)((append ? q : v) - hdr), hdr, value, q);
    while (len % 8)
        out[len++] = ' ';
    FILE *f = fopen(dst, "wb");
    assert_non_null(f);
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)len >> (8 * i));
    assert_int_equal(fwrite(le, 1, 8, f), 8);
    assert_int_equal(fwrite(out, 1, (size_t)len, f), (size_t)len);
    assert_int_equal(fwrite(b + 8 + hl, 1, n - 8 - hl, f), n - 8 - hl);
    fclose(f);
    free(out);
    free(hdr);
    free(b);
}

/* --resume reads its checkpoint as strictly as any input file: each bad
 * field is refused with a message naming it, before any step. */
static void test_resume_checkpoint_checked(void **state)
{
    (void)state;
    char dir[4200], ckpt[4400], good[4400], msg[4096];
    out_path(dir, sizeof(dir), "resume-checked");
    snprintf(ckpt, sizeof(ckpt), "%s/%s", dir, PFX_TUNE_CHECKPOINT);
    snprintf(good, sizeof(good), "%s/good.safetensors", dir);
    const char *argv[] = { "tune",    "--model", gpt2_dir,  "--data",       data_path,
                           "--out",   dir,       "--quiet", "--max-length", "20",
                           "--steps", "5",       "--resume" };
    assert_int_equal(run_captured(12, argv, msg, sizeof(msg)), 0); /* without --resume */
    assert_int_equal(rename(ckpt, good), 0);
    static const struct {
        const char *key, *value;
        bool append;
        const char *message;
    } cases[] = {
        { "eval_before", "junk", false, "the metadata 'eval_before' is not a number" },
        { "eval_before", " 1", false, "the metadata 'eval_before' is not a number" },
        { "steps_done", "0", false,
          "the metadata 'optimizer_step' (5) is more than 'steps_done' (0)" },
        { "optimizer_step", "", false, "the metadata 'optimizer_step' is not a whole number" },
        { "optimizer_step", "4", false, ".step' (5) differs from 'optimizer_step' (4)" },
        { "data_index", "99999", false, "the metadata 'data_index' (99999) is past the" },
        { "data_epoch", "7", false, "the metadata 'data_epoch' (7) and 'data_index'" },
        { "losses", ",1.5", true, "the metadata 'losses' does not hold 5 numbers" },
        { "losses", "x", true, "the metadata 'losses' does not hold 5 numbers" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        edit_checkpoint(good, ckpt, cases[i].key, cases[i].value, cases[i].append);
        int rc = run_captured(13, argv, msg, sizeof(msg));
        if (rc != 1 || !strstr(msg, cases[i].message) || !strstr(msg, PFX_TUNE_CHECKPOINT))
            fail_msg("%s = '%s': exit %d, message '%s' (expected '%s')", cases[i].key,
                     cases[i].value, rc, msg, cases[i].message);
    }
    /* the checkpoint as written resumes */
    edit_checkpoint(good, ckpt, "format", "prefixcl-tune-checkpoint-1", false);
    assert_int_equal(run_captured(13, argv, msg, sizeof(msg)), 0);
}

int main(int argc, char **argv)
{
    out_dir = argc > 1 ? argv[1] : "tune-test-out";
    demo_dir = argc > 2 ? argv[2] : "data/demo";
    mkdir(out_dir, 0777);
    rt = pfx_test_runtime(); /* exit 77 without a device */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_bad_options),
        cmocka_unit_test(test_fit_length),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_gqa_token_dim),
        cmocka_unit_test(test_adapter_reads_back),
        cmocka_unit_test(test_resume_bit_for_bit),
        cmocka_unit_test(test_resume_checkpoint_checked),
        cmocka_unit_test(test_loss_falls),
    };
    const int failed = cmocka_run_group_tests_name("tune", tests, write_folders, NULL);
    pfx_runtime_destroy(&rt);
    return failed;
}
