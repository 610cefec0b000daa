/*
 * Suite 'train': the prefix-tuning job of `prefixcl train` (tools/train/train_loop.c,
 * tools/commands/cmd_train.c) run in-process. A short library-level run whose loss
 * falls at least tenfold; the command's outputs (CSV rows with held-out losses, the pictures,
 * safetensors with per-layer prefixes and gains, a PEFT folder that
 * pfx_peft_read_* reads back and that matches the safetensors); bad options
 * exit non-zero.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfx_test.h"
#include "commands/commands.h"
#include "train/train_loop.h"

static const char *out_dir;

static int run_cmd(int argc, const char **argv)
{
    return cmd_train(argc, (char **)argv);
}

static void test_loss_falls_tenfold(void **state)
{
    (void)state;
    train_config cfg;
    train_default_config(&cfg);
    cfg.steps = 100;
    cfg.layers = 2;
    train_fit_schedules(&cfg);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/lib-run", out_dir);
    train_result r;
    assert_int_equal(train_run(NULL, &cfg, dir, NULL, NULL, &r), 0);
    assert_int_equal(r.steps_done, 100);
    for (size_t i = 0; i < r.steps_done; i++)
        assert_true(isfinite(r.losses[i]) && r.losses[i] >= 0);
    double ratio = r.final_loss / r.first_loss;
    fprintf(stderr, "loss %.4e -> %.4e (final/first %.4f)\n", r.first_loss, r.final_loss, ratio);
    assert_true(r.first_loss > 0);
    assert_true(ratio <= 0.1);
    /* counts: the encoder MLP is trainable, 2 L Hkv D values per position baked */
    pfx_encoder_params ep = { .layers = 2,
                              .kv_heads = cfg.kv_heads,
                              .head_dim = cfg.head_dim,
                              .prefix_len = cfg.prefix_len,
                              .embed_dim = cfg.embed_dim,
                              .hidden_dim = cfg.hidden_dim };
    pfx_encoder_param_counts c;
    assert_int_equal(pfx_encoder_params_counts(&ep, &c), PFX_SUCCESS);
    assert_int_equal(r.counts.trainable, c.trainable);
    assert_int_equal(r.counts.baked_per_position, 2 * 2 * cfg.kv_heads * cfg.head_dim);
    assert_int_equal(r.gain_params, 2 * cfg.heads);
    for (size_t l = 0; l < 2; l++) {
        assert_true(r.layer_stats[l].prefix_mass > 0 && r.layer_stats[l].prefix_mass < 1);
        assert_true(r.layer_stats[l].entropy > 0);
    }
    train_result_free(&r);
}

static size_t count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

static void test_command_outputs(void **state)
{
    (void)state;
    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s/cmd-run", out_dir);
    const char *argv[] = { "train", "--steps", "12",      "--layers",     "2", "--seed", "5",
                           "--out", dir,       "--quiet", "--eval-every", "4" };
    assert_int_equal(run_cmd(12, argv), 0);

    snprintf(path, sizeof(path), "%s/loss.csv", dir);
    assert_int_equal(count_lines(path), 1 + 12);
    FILE *f = fopen(path, "r");
    char line[256];
    assert_non_null(fgets(line, sizeof(line), f));
    assert_string_equal(line, "step,loss,grad_norm,lr,heldout_loss\n");
    /* held-out losses at steps 4, 8, 12 only, finite and positive */
    for (int step = 1; step <= 12; step++) {
        assert_non_null(fgets(line, sizeof(line), f));
        unsigned got;
        double loss, gn, lr, heldout = -1;
        int fields = sscanf(line, "%u,%lf,%lf,%lf,%lf", &got, &loss, &gn, &lr, &heldout);
        assert_int_equal(got, step);
        assert_true(lr > 0 && lr <= 1e-2 * 1.0001);
        assert_int_equal(fields, step % 4 == 0 ? 5 : 4);
        if (fields == 5)
            assert_true(isfinite(heldout) && heldout > 0);
    }
    fclose(f);
    snprintf(path, sizeof(path), "%s/attention.csv", dir);
    assert_int_equal(count_lines(path), 1 + 2);
    snprintf(path, sizeof(path), "%s/gains.csv", dir);
    train_config defaults;
    train_default_config(&defaults);
    assert_int_equal(count_lines(path), 1 + 2 * defaults.heads);

    /* the pictures (their content: tests/test_chart.c); none without cairo */
    static const char *const pictures[] = { "loss.png", "attention.png", "gains.png" };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, pictures[i]);
        f = fopen(path, "rb");
#if PFX_TEST_CAIRO
        assert_non_null(f);
        unsigned char sig[8];
        assert_int_equal(fread(sig, 1, 8, f), 8);
        fclose(f);
        static const unsigned char png[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n' };
        assert_memory_equal(sig, png, 8);
#else
        assert_null(f);
#endif
    }

    train_config cfg;
    train_default_config(&cfg);
    const size_t Hkv = cfg.kv_heads, P = cfg.prefix_len, D = cfg.head_dim, n = Hkv * P * D;
    snprintf(path, sizeof(path), "%s/prefixes.safetensors", dir);
    pfx_safetensors *st = NULL;
    assert_int_equal(pfx_safetensors_open(path, &st), PFX_SUCCESS);
    assert_int_equal(pfx_safetensors_count(st), 6);
    assert_string_equal(pfx_safetensors_metadata_get(st, "num_layers"), "2");
    float *file_k[2], *gain = malloc(cfg.heads * sizeof(float));
    for (int l = 0; l < 2; l++) {
        char name[64];
        pfx_st_info info;
        snprintf(name, sizeof(name), "layers.%d.prefix_k", l);
        long i = pfx_safetensors_find(st, name);
        assert_true(i >= 0);
        assert_int_equal(pfx_safetensors_info(st, (size_t)i, &info), PFX_SUCCESS);
        assert_int_equal(info.ndim, 3);
        assert_int_equal(info.shape[0], Hkv);
        assert_int_equal(info.shape[1], P);
        assert_int_equal(info.shape[2], D);
        file_k[l] = malloc(n * sizeof(float));
        assert_int_equal(pfx_safetensors_read_f32(st, name, file_k[l], n), PFX_SUCCESS);
        snprintf(name, sizeof(name), "layers.%d.gain", l);
        assert_int_equal(pfx_safetensors_read_f32(st, name, gain, cfg.heads), PFX_SUCCESS);
        for (size_t h = 0; h < cfg.heads; h++)
            assert_true(isfinite(gain[h]));
    }
    pfx_safetensors_close(&st);

    /* the PEFT folder reads back and holds the same prefixes */
    snprintf(path, sizeof(path), "%s/peft", dir);
    pfx_peft_config pc;
    assert_int_equal(pfx_peft_read_config(path, &pc), PFX_SUCCESS);
    assert_int_equal(pc.num_layers, 2);
    assert_int_equal(pc.num_virtual_tokens, P);
    assert_int_equal(pc.token_dim, Hkv * D);
    pfx_runtime *rt = pfx_test_runtime();
    pfx_tensor *keys[2] = { NULL, NULL }, *values[2] = { NULL, NULL };
    pfx_status s = pfx_peft_load_prefixes(rt, path, Hkv, keys, values, 2, NULL);
    if (s != PFX_SUCCESS)
        fail_msg("peft load: %s", pfx_last_error(rt));
    float *k = malloc(n * sizeof(float));
    for (int l = 0; l < 2; l++) {
        assert_int_equal(pfx_tensor_read(keys[l], 0, n, k), PFX_SUCCESS);
        assert_memory_equal(k, file_k[l], n * sizeof(float));
        pfx_tensor_destroy(&keys[l]);
        pfx_tensor_destroy(&values[l]);
        free(file_k[l]);
    }
    free(k);
    free(gain);
    pfx_runtime_destroy(&rt);
}

static void test_bad_options(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/bad", out_dir);
    const char *cases[][4] = {
        { "train", "--bogus", NULL, NULL },  { "train", "--steps", "0", NULL },
        { "train", "--steps", "abc", NULL }, { "train", "--steps", NULL, NULL },
        { "train", "--layers", "65", NULL }, { "train", "--layers", "-1", NULL },
        { "train", "--seed", "1x", NULL },   { "train", "--out", "", NULL },
        { "train", "--device", "", NULL },   { "train", "extra", NULL, NULL },
        { "train", "--steps", " 5", NULL },  { "train", "--steps", "+5", NULL },
        { "train", "--seed", " -5", NULL },  { "train", "--layers", "2 ", NULL },
        { "train", "--steps", "\t5", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int argc = 0;
        while (argc < 4 && cases[i][argc])
            argc++;
        int rc = run_cmd(argc, cases[i]);
        if (rc == 0)
            fail_msg("case %zu (%s %s) exited 0", i, cases[i][1], cases[i][2] ? cases[i][2] : "");
    }
    /* a selector that matches no device: non-zero too */
    const char *argv[] = { "train", "--device", "no-such-device-xyz", "--steps", "1", "--out",
                           dir,     "--quiet" };
    assert_int_not_equal(run_cmd(8, argv), 0);
}

/* Every output goes through the atomic replacement: a FIFO (or device) where
 * loss.csv and loss.png go is refused and left as it is, never opened for
 * writing (which would block) nor truncated; no temporary file remains. */
static void test_outputs_atomic(void **state)
{
    (void)state;
    char dir[4096], csv[4200], png[4200];
    snprintf(dir, sizeof(dir), "%s/fifo-run", out_dir);
    mkdir(dir, 0777);
    snprintf(csv, sizeof(csv), "%s/loss.csv", dir);
    snprintf(png, sizeof(png), "%s/loss.png", dir);
    remove(csv);
    remove(png);
    assert_int_equal(mkfifo(csv, 0600), 0);
    assert_int_equal(mkfifo(png, 0600), 0);
    alarm(100); /* a blocking open fails the test instead of hanging it */
    const char *argv[] = { "train", "--steps", "1", "--layers", "1", "--out", dir, "--quiet" };
    assert_int_not_equal(run_cmd(8, argv), 0);
    alarm(0);
    struct stat sb;
    assert_int_equal(stat(csv, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    assert_int_equal(stat(png, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    char cmd[4400];
    snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -q '\\.tmp-'", dir);
    assert_int_not_equal(system(cmd), 0);
}

/* Every output is checked before the first step: a folder where loss.png
 * goes stops the run before it trains (nothing written), and so does a file
 * named as --out. */
static void test_outputs_checked_first(void **state)
{
    (void)state;
    char dir[4096], png[4200], prefixes[4200];
    snprintf(dir, sizeof(dir), "%s/blocked-run", out_dir);
    mkdir(dir, 0777);
    snprintf(png, sizeof(png), "%s/loss.png", dir);
    snprintf(prefixes, sizeof(prefixes), "%s/prefixes.safetensors", dir);
    remove(prefixes);
    mkdir(png, 0777);
    const char *argv[] = { "train", "--steps", "1", "--layers", "1", "--out", dir, "--quiet" };
    assert_int_equal(run_cmd(8, argv), 1);
    struct stat sb;
    assert_int_not_equal(stat(prefixes, &sb), 0);
    assert_int_equal(stat(png, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));

    snprintf(dir, sizeof(dir), "%s/a-file", out_dir);
    FILE *f = fopen(dir, "w");
    assert_non_null(f);
    fclose(f);
    const char *argv2[] = { "train", "--steps", "1", "--layers", "1", "--out", dir, "--quiet" };
    assert_int_equal(run_cmd(8, argv2), 1);
    assert_int_equal(stat(dir, &sb), 0);
    assert_true(S_ISREG(sb.st_mode) && sb.st_size == 0);
}

int main(int argc, char **argv)
{
    out_dir = argc > 1 ? argv[1] : "train-test-out";
    mkdir(out_dir, 0777);
    pfx_runtime *probe = pfx_test_runtime(); /* exit 77 without a device */
    pfx_runtime_destroy(&probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_options),           cmocka_unit_test(test_outputs_atomic),
        cmocka_unit_test(test_outputs_checked_first), cmocka_unit_test(test_command_outputs),
        cmocka_unit_test(test_loss_falls_tenfold),
    };
    return cmocka_run_group_tests_name("train", tests, NULL, NULL);
}
