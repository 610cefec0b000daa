/* Files under hostile use: FIFOs and device nodes where files are expected,
 * huge and malformed adapter configs, a text file where a safetensors file
 * is expected (named, never quoted), a killed save's temporary file, the
 * umask, aliasing prefixes, and a PEFT writer that writes only what its reader
 * reads. Device nodes are private mknod copies in a temporary folder (the
 * tests skip those checks when mknod is not allowed); an alarm turns a read
 * that blocks into a failure instead of a hang. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/io_internal.h"
#include "pfx_test.h"
#include "prefixcl/io.h"

static char tmp_dir[] = "/tmp/pfx-test-io-hostile-XXXXXX";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static char *make_dir(const char *name)
{
    char *dir = tmp_path(name);
    assert_true(mkdir(dir, 0755) == 0 || errno == EEXIST);
    return dir;
}

#define CONFIG_FIELDS                                                                              \
    "\"peft_type\": \"PREFIX_TUNING\", \"num_virtual_tokens\": 3, \"num_layers\": 2, "             \
    "\"token_dim\": 8, \"num_attention_heads\": 2"

static void write_config(const char *dir, const char *text)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/adapter_config.json", dir);
    write_text(path, text);
}

static bool starts_with_status_name(const char *msg)
{
    return strncmp(msg, "PFX_", 4) == 0;
}

/* ---------------------------------------------------------------- FIFOs */

static void test_fifo_is_not_a_file(void **state)
{
    pfx_runtime *rt = *state;
    alarm(20); /* a blocking open fails the test instead of hanging it */
    const char *fifo = tmp_path("fifo.safetensors");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pfx_safetensors *f = NULL;
    assert_status_names(NULL, pfx_safetensors_open(fifo, &f), PFX_ERROR_IO, "not a regular file");
    assert_null(f);

    /* adapter_config.json a FIFO */
    char *dir = make_dir("fifo-config");
    char path[600];
    snprintf(path, sizeof(path), "%s/adapter_config.json", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    pfx_peft_config cfg;
    assert_status_names(NULL, pfx_peft_read_config(dir, &cfg), PFX_ERROR_IO, "not a regular file");

    /* a good config beside an adapter_model.safetensors that is a FIFO */
    dir = make_dir("fifo-model");
    write_config(dir, "{" CONFIG_FIELDS "}");
    snprintf(path, sizeof(path), "%s/adapter_model.safetensors", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    pfx_tensor *k[2] = { 0 }, *v[2] = { 0 };
    assert_status_names(rt, pfx_peft_load_prefixes(rt, dir, 0, k, v, 2, NULL), PFX_ERROR_IO,
                        "not a regular file");
    assert_null(k[0]);

    /* pfx_input_open, the check the tool's readers share: a FIFO, a device
     * and a folder are refused at once; a regular file opens */
    const char *refused[] = { fifo, "/dev/zero", dir };
    for (size_t i = 0; i < 3; i++) {
        FILE *in = (FILE *)1;
        char needle[700];
        snprintf(needle, sizeof(needle), "not a regular file: %s", refused[i]);
        assert_status_names(NULL, pfx_input_open(refused[i], &in), PFX_ERROR_IO, needle);
        assert_null(in);
    }
    FILE *in = NULL;
    assert_status_names(NULL, pfx_input_open(tmp_path("absent"), &in), PFX_ERROR_IO, "cannot open");
    assert_status_names(NULL, pfx_input_open(NULL, &in), PFX_ERROR_NULL_ARGUMENT, "path");
    assert_status_names(NULL, pfx_input_open("", &in), PFX_ERROR_INVALID_ARGUMENT, "path");
    assert_status_names(NULL, pfx_input_open(fifo, NULL), PFX_ERROR_NULL_ARGUMENT, "out");
    snprintf(path, sizeof(path), "%s/adapter_config.json", dir);
    assert_int_equal(pfx_input_open(path, &in), PFX_SUCCESS);
    assert_int_equal(fgetc(in), '{');
    fclose(in);
    alarm(0);
}

/* ---------------------------------------------------------------- adapter_config.json */

/* The largest accepted config (1 MiB) with ~92,000 keys: the duplicate check
 * compared every pair (16-19 s); it must stay far below a second. */
static void test_config_many_keys(void **state)
{
    (void)state;
    const size_t cap = (size_t)1 << 20;
    char *text = malloc(cap + 1);
    assert_non_null(text);
    size_t n = (size_t)snprintf(text, cap, "{" CONFIG_FIELDS);
    for (unsigned i = 0; n + 16 < cap - 2; i++)
        n += (size_t)snprintf(text + n, cap - n, ",\"k%06x\":%u", i, i % 10);
    text[n++] = '}';
    text[n] = 0;
    pfx_peft_config cfg;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pfx_peft_read_config_memory(text, n, "many-keys", &cfg), PFX_SUCCESS);
    double s = pfx_test_seconds_since(&t0);
    assert_int_equal(cfg.num_layers, 2);
    if (s > 1.0)
        fail_msg("a 1 MiB config with ~92,000 keys took %.2f s", s);
    /* A duplicate among them is still found. */
    memcpy(strrchr(text, 'k'), "k000010", 7); /* the last key repeats an early one */
    assert_status_names(NULL, pfx_peft_read_config_memory(text, n, "dup", &cfg), PFX_ERROR_FORMAT,
                        "'k000010' appears twice");
    free(text);
}

static void test_config_refusals(void **state)
{
    (void)state;
    pfx_peft_config cfg;
    const char *good = "{" CONFIG_FIELDS "}";
    assert_int_equal(pfx_peft_read_config_memory(good, strlen(good), NULL, &cfg), PFX_SUCCESS);
    assert_int_equal(cfg.num_transformer_submodules, 1);

    static const struct {
        const char *text;
        pfx_status status;
        const char *needle;
    } cases[] = {
        { "{" CONFIG_FIELDS "} x", PFX_ERROR_FORMAT, "bytes after the JSON object" },
        { "{" CONFIG_FIELDS "}{}", PFX_ERROR_FORMAT, "bytes after the JSON object" },
        { "{" CONFIG_FIELDS ", \"num_transformer_submodules\": 2}", PFX_ERROR_UNSUPPORTED,
          "num_transformer_submodules is 2" },
        { "{\"peft_type\": \"LORA\", \"r\": 8}", PFX_ERROR_UNSUPPORTED, "only PREFIX_TUNING" },
        { "{" CONFIG_FIELDS ", \"task_type\": \"CAUSAL\\u0000LM\"}", PFX_ERROR_FORMAT, "\\u0000" },
        { "{" CONFIG_FIELDS ", \"x\\u0000y\": 1}", PFX_ERROR_FORMAT, "\\u0000" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pfx_status st =
            pfx_peft_read_config_memory(cases[i].text, strlen(cases[i].text), "case", &cfg);
        if (st != cases[i].status || !strstr(pfx_last_error(NULL), cases[i].needle))
            fail_msg("case %zu: %s, '%s'", i, pfx_status_string(st), pfx_last_error(NULL));
        assert_false(starts_with_status_name(pfx_last_error(NULL)));
    }
    /* An escaped backslash before "u0000" is text, not an escape. */
    const char *text = "{" CONFIG_FIELDS ", \"task_type\": \"a\\\\u0000\"}";
    assert_int_equal(pfx_peft_read_config_memory(text, strlen(text), NULL, &cfg), PFX_SUCCESS);
    assert_string_equal(cfg.task_type, "a\\u0000");

    /* The same through a file, and an empty folder name. */
    char *dir = make_dir("junk");
    write_config(dir, "{" CONFIG_FIELDS "}\n junk");
    assert_status_names(NULL, pfx_peft_read_config(dir, &cfg), PFX_ERROR_FORMAT, "bytes after");
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(make_dir("cwd")), 0);
    write_config(".", "{" CONFIG_FIELDS "}"); /* what "" used to read */
    assert_status_names(NULL, pfx_peft_read_config("", &cfg), PFX_ERROR_INVALID_ARGUMENT,
                        "dir is empty");
    assert_int_equal(chdir(cwd), 0);
}

/* ---------------------------------------------------------------- shard index */

/* 200,000 tensors, each in a shard of its own: the shard lookup compared
 * every entry with every shard seen (about 60 s at this size); sorting keeps
 * it far below the limit. */
static void test_index_many_shards(void **state)
{
    (void)state;
    const size_t n = 200000;
    size_t cap = 64 + n * 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text + len, cap - len, "{\"weight_map\": {");
    for (size_t i = 0; i < n; i++) /* shard names in reverse of the entries */
        len += (size_t)snprintf(text + len, cap - len, "%s\"t%zu\": \"s%07zu.safetensors\"",
                                i ? ", " : "", i, n - 1 - i);
    len += (size_t)snprintf(text + len, cap - len, "}}");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pfx_st_index *x = NULL;
    assert_int_equal(pfx_st_index_parse(NULL, (const unsigned char *)text, len, "many-shards", &x),
                     PFX_SUCCESS);
    double s = pfx_test_seconds_since(&t0);
    assert_int_equal(x->count, n);
    assert_int_equal(x->shard_count, n);
    for (size_t i = 0; i < n; i += 9973) {
        char want[32];
        snprintf(want, sizeof(want), "s%07zu.safetensors", n - 1 - i);
        assert_string_equal(x->shards[x->shard[i]], want);
    }
    pfx_st_index_free(&x);
    /* one shard for every tensor: still one shard */
    len =
        (size_t)snprintf(text, cap, "{\"weight_map\": {\"a\": \"x\", \"b\": \"y\", \"c\": \"x\"}}");
    assert_int_equal(pfx_st_index_parse(NULL, (const unsigned char *)text, len, "three", &x),
                     PFX_SUCCESS);
    assert_int_equal(x->shard_count, 2);
    assert_int_equal(x->shard[0], x->shard[2]);
    assert_string_equal(x->shards[x->shard[1]], "y");
    pfx_st_index_free(&x);
    free(text);
    if (s > 3.0)
        fail_msg("an index of %zu tensors in %zu shards took %.2f s", n, n, s);
}

static void test_nul_escape_in_tensor_name(void **state)
{
    (void)state;
    static const char *headers[] = {
        "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"__metadata__\":{\"k\":\"v\\u0000w\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_"
        "offsets\":[0,4]}}",
    };
    for (size_t i = 0; i < 2; i++) {
        size_t h = strlen(headers[i]);
        unsigned char buf[256] = { 0 };
        buf[0] = (unsigned char)h;
        memcpy(buf + 8, headers[i], h);
        pfx_safetensors *f = NULL;
        assert_status_names(NULL, pfx_safetensors_open_memory(buf, 8 + h + 4, "nul", &f),
                            PFX_ERROR_FORMAT, "\\u0000");
        assert_null(f);
    }
}

/* A file that is no safetensors (a text file given as an adapter): its path
 * named, its first 8 bytes (read as the header length) never quoted. */
static void test_not_safetensors_unquoted(void **state)
{
    (void)state;
    static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n";
    pfx_safetensors *f = NULL;
    assert_status_names(NULL,
                        pfx_safetensors_open_memory(passwd, strlen(passwd), "/etc/passwd", &f),
                        PFX_ERROR_OUT_OF_RANGE, "/etc/passwd: not a safetensors file");
    assert_null(strstr(pfx_last_error(NULL), "3475222254926655346")); /* "root:x:0" */
    /* a header length of 12345, 12 bytes after it */
    static const unsigned char past[20] = { 0x39, 0x30 };
    assert_status_names(NULL, pfx_safetensors_open_memory(past, sizeof(past), "x.bin", &f),
                        PFX_ERROR_FORMAT, "not a safetensors file");
    assert_null(strstr(pfx_last_error(NULL), "12345"));
}

/* ---------------------------------------------------------------- atomic saves */

static pfx_named_tensor one_item(const float *v)
{
    return (pfx_named_tensor){
        .name = "x", .host = v, .ndim = 1, .shape = { 3 }, .dtype = PFX_DTYPE_F32
    };
}

static void test_save_refuses_device_node(void **state)
{
    (void)state;
    const char *node = tmp_path("null-copy");
    if (mknod(node, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        print_message("mknod not allowed (%s): device node case skipped\n", strerror(errno));
    } else {
        float v[3] = { 1, 2, 3 };
        pfx_named_tensor it = one_item(v);
        assert_status_names(NULL, pfx_safetensors_save(NULL, node, &it, 1, NULL, 0), PFX_ERROR_IO,
                            "not a regular file");
        struct stat sb;
        assert_int_equal(stat(node, &sb), 0);
        assert_true(S_ISCHR(sb.st_mode));
        pfx_output_file *out = NULL;
        assert_int_equal(pfx_output_open(node, &out), PFX_ERROR_IO);
        assert_null(out);
        assert_int_equal(stat(node, &sb), 0);
        assert_true(S_ISCHR(sb.st_mode));
    }
    const char *fifo = tmp_path("fifo-dest");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    float v[3] = { 1, 2, 3 };
    pfx_named_tensor it = one_item(v);
    assert_int_equal(pfx_safetensors_save(NULL, fifo, &it, 1, NULL, 0), PFX_ERROR_IO);
    struct stat sb;
    assert_int_equal(stat(fifo, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
}

static size_t count_temps(const char *dir, const char *base)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -c '^%s\\.tmp-' || true", dir, base);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    unsigned long n = 0;
    assert_int_equal(fscanf(p, "%lu", &n), 1);
    pclose(p);
    return n;
}

/* A save killed between writing its temporary file and the rename (Ctrl-C,
 * SIGKILL) leaves the file; the next save to that path removes it. A live
 * process's temporary file is left alone. */
static void test_killed_save_cleaned_at_next_save(void **state)
{
    (void)state;
    char *dir = make_dir("killed");
    char dest[600];
    snprintf(dest, sizeof(dest), "%s/state.safetensors", dir);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pfx_output_file *out = NULL;
        if (pfx_output_open(dest, &out) != PFX_SUCCESS)
            _exit(1);
        fputs("half a file", pfx_output_stream(out));
        fflush(pfx_output_stream(out));
        signal(SIGINT, SIG_DFL); /* a background shell may have ignored it */
        raise(SIGINT);           /* dies here with the temporary file in place */
        _exit(2);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
    assert_int_equal(count_temps(dir, "state.safetensors"), 1);

    /* Our own in-flight file (a live pid) survives someone else's save. */
    pfx_output_file *mine = NULL;
    assert_int_equal(pfx_output_open(dest, &mine), PFX_SUCCESS);
    assert_int_equal(count_temps(dir, "state.safetensors"),
                     1); /* the dead one went, ours is there */
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        float v[3] = { 1, 2, 3 };
        pfx_named_tensor it = one_item(v);
        _exit(pfx_safetensors_save(NULL, dest, &it, 1, NULL, 0) == PFX_SUCCESS ? 0 : 1);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(count_temps(dir, "state.safetensors"), 1);
    pfx_output_discard(&mine);
    assert_int_equal(count_temps(dir, "state.safetensors"), 0);
}

static void test_save_honours_umask(void **state)
{
    (void)state;
    float v[3] = { 1, 2, 3 };
    pfx_named_tensor it = one_item(v);
    static const struct {
        mode_t mask, mode;
    } cases[] = { { 077, 0600 }, { 022, 0644 }, { 002, 0664 } };
    mode_t old = umask(022);
    for (size_t i = 0; i < 3; i++) {
        umask(cases[i].mask);
        char name[32];
        snprintf(name, sizeof(name), "mode-%zu.safetensors", i);
        const char *path = tmp_path(name);
        assert_int_equal(pfx_safetensors_save(NULL, path, &it, 1, NULL, 0), PFX_SUCCESS);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        if ((sb.st_mode & 0777) != cases[i].mode)
            fail_msg("umask %03o: mode %03o, %03o expected", (unsigned)cases[i].mask,
                     (unsigned)(sb.st_mode & 0777), (unsigned)cases[i].mode);
    }
    umask(old);
}

static void test_output_file(void **state)
{
    (void)state;
    const char *path = tmp_path("out.txt");
    write_text(path, "old");
    pfx_output_file *out = NULL;
    assert_int_equal(pfx_output_open(path, &out), PFX_SUCCESS);
    fputs("new content", pfx_output_stream(out));
    pfx_output_discard(&out);
    assert_null(out);
    FILE *f = fopen(path, "rb");
    char buf[32] = { 0 };
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof(buf) - 1, f), 3);
    fclose(f);
    assert_string_equal(buf, "old");
    assert_int_equal(pfx_output_open(path, &out), PFX_SUCCESS);
    fputs("new", pfx_output_stream(out));
    assert_int_equal(pfx_output_commit(&out), PFX_SUCCESS);
    assert_null(out);
    assert_int_equal(pfx_output_open("", &out), PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_output_open(tmp_path("no-such-dir/x"), &out), PFX_ERROR_IO);
    assert_false(starts_with_status_name(pfx_last_error(NULL)));
}

/* ---------------------------------------------------------------- PEFT folders */

enum { L = 2, HKV = 2, P = 3, D = 4, N = HKV * P * D };

static void make_prefixes(pfx_runtime *rt, pfx_tensor **keys, pfx_tensor **values)
{
    const size_t shape[3] = { HKV, P, D };
    float host[N];
    for (size_t l = 0; l < L; l++) {
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &keys[l]), PFX_SUCCESS);
        assert_int_equal(pfx_tensor_create(rt, PFX_DTYPE_F32, 3, shape, &values[l]), PFX_SUCCESS);
        for (size_t i = 0; i < N; i++)
            host[i] = (float)(i * 7 % 13) - 6.5f + (float)l;
        assert_int_equal(pfx_tensor_write(keys[l], 0, N, host), PFX_SUCCESS);
        for (size_t i = 0; i < N; i++)
            host[i] = -host[i] * 0.5f;
        assert_int_equal(pfx_tensor_write(values[l], 0, N, host), PFX_SUCCESS);
    }
}

static void destroy_prefixes(pfx_tensor **keys, pfx_tensor **values)
{
    for (size_t l = 0; l < L; l++) {
        pfx_tensor_destroy(&keys[l]);
        pfx_tensor_destroy(&values[l]);
    }
}

static void test_peft_load_aliasing(void **state)
{
    pfx_runtime *rt = *state;
    pfx_tensor *keys[L], *values[L];
    make_prefixes(rt, keys, values);
    const char *dir = tmp_path("alias-adapter");
    assert_int_equal(pfx_peft_save_prefixes(rt, dir, keys, values, L, NULL), PFX_SUCCESS);

    pfx_tensor *k[L] = { keys[0], keys[1] }, *v[L] = { keys[0], values[1] };
    assert_status_names(rt, pfx_peft_load_prefixes(rt, dir, HKV, k, v, L, NULL), PFX_ERROR_ALIASING,
                        "keys[0] and values[0]");
    pfx_tensor *k2[L] = { keys[0], keys[0] }, *v2[L] = { values[0], values[1] };
    assert_status_names(rt, pfx_peft_load_prefixes(rt, dir, HKV, k2, v2, L, NULL),
                        PFX_ERROR_ALIASING, "the same tensor");
    pfx_tensor *k3[L] = { NULL, keys[1] }, *v3[L] = { values[0], keys[1] };
    assert_int_equal(pfx_peft_load_prefixes(rt, dir, HKV, k3, v3, L, NULL), PFX_ERROR_ALIASING);
    assert_null(k3[0]); /* nothing allocated */
    assert_false(starts_with_status_name(pfx_last_error(rt)));
    /* one array for both: NULL entries would be allocated twice into it,
     * caller tensors written as keys then as values */
    const size_t live = pfx_test_live_bytes(rt);
    pfx_tensor *one[L] = { NULL, NULL };
    assert_status_names(rt, pfx_peft_load_prefixes(rt, dir, HKV, one, one, L, NULL),
                        PFX_ERROR_ALIASING, "the keys and values arrays overlap");
    assert_null(one[0]);
    assert_null(one[1]);
    pfx_tensor *both[L + 1] = { NULL, NULL, NULL };
    assert_status_names(rt, pfx_peft_load_prefixes(rt, dir, HKV, both, both + 1, L, NULL),
                        PFX_ERROR_ALIASING, "overlap");
    pfx_tensor *same[L] = { keys[0], keys[1] };
    assert_int_equal(pfx_peft_load_prefixes(rt, dir, HKV, same, same, L, NULL), PFX_ERROR_ALIASING);
    assert_int_equal(pfx_test_live_bytes(rt), live); /* nothing allocated, nothing leaked */
    /* distinct tensors still load */
    assert_int_equal(pfx_peft_load_prefixes(rt, dir, HKV, keys, values, L, NULL), PFX_SUCCESS);
    assert_status_names(rt, pfx_peft_load_prefixes(rt, "", HKV, keys, values, L, NULL),
                        PFX_ERROR_INVALID_ARGUMENT, "dir is empty");
    assert_status_names(rt, pfx_peft_save_prefixes(rt, "", keys, values, L, NULL),
                        PFX_ERROR_INVALID_ARGUMENT, "dir is empty");
    destroy_prefixes(keys, values);
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

static void test_peft_writer_matches_reader(void **state)
{
    pfx_runtime *rt = *state;
    pfx_tensor *keys[L], *values[L];
    make_prefixes(rt, keys, values);
    char long_task[101], long_base[1000], edge_task[64], edge_base[512];
    memset(long_task, 'T', 100), long_task[100] = 0;
    memset(long_base, 'b', 999), long_base[999] = 0;
    memset(edge_task, 't', 63), edge_task[63] = 0;
    memset(edge_base, 'B', 511), edge_base[511] = 0;
    pfx_peft_save_params pp;
    const char *dir = tmp_path("writer-adapter");

    pfx_peft_default_save_params(&pp);
    pp.task_type = long_task;
    assert_status_names(rt, pfx_peft_save_prefixes(rt, dir, keys, values, L, &pp),
                        PFX_ERROR_INVALID_ARGUMENT, "task_type");
    pfx_peft_default_save_params(&pp);
    pp.base_model_name_or_path = long_base;
    assert_status_names(rt, pfx_peft_save_prefixes(rt, dir, keys, values, L, &pp),
                        PFX_ERROR_INVALID_ARGUMENT, "base_model_name_or_path");
    pfx_peft_default_save_params(&pp);
    pp.base_model_name_or_path = "caf\xe9"; /* Latin-1, not UTF-8 */
    assert_status_names(rt, pfx_peft_save_prefixes(rt, dir, keys, values, L, &pp),
                        PFX_ERROR_INVALID_ARGUMENT, "UTF-8");
    pfx_peft_default_save_params(&pp);
    pp.encoder_hidden_size = ((size_t)1 << 31) + 1;
    assert_status_names(rt, pfx_peft_save_prefixes(rt, dir, keys, values, L, &pp),
                        PFX_ERROR_INVALID_ARGUMENT, "encoder_hidden_size");
    struct stat sb;
    assert_int_not_equal(stat(dir, &sb), 0); /* nothing written */

    /* The longest strings the reader takes round-trip. */
    pfx_peft_default_save_params(&pp);
    pp.task_type = edge_task;
    pp.base_model_name_or_path = edge_base;
    assert_int_equal(pfx_peft_save_prefixes(rt, dir, keys, values, L, &pp), PFX_SUCCESS);
    pfx_peft_config cfg;
    assert_int_equal(pfx_peft_read_config(dir, &cfg), PFX_SUCCESS);
    assert_string_equal(cfg.task_type, edge_task);
    assert_string_equal(cfg.base_model_name_or_path, edge_base);
    destroy_prefixes(keys, values);
    assert_int_equal(pfx_test_live_bytes(rt), 0);
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_config_many_keys),
        cmocka_unit_test(test_config_refusals),
        cmocka_unit_test(test_nul_escape_in_tensor_name),
        cmocka_unit_test(test_not_safetensors_unquoted),
        cmocka_unit_test(test_index_many_shards),
        cmocka_unit_test(test_save_refuses_device_node),
        cmocka_unit_test(test_killed_save_cleaned_at_next_save),
        cmocka_unit_test(test_save_honours_umask),
        cmocka_unit_test(test_output_file),
    };
    const struct CMUnitTest device_tests[] = {
        cmocka_unit_test(test_fifo_is_not_a_file),
        cmocka_unit_test(test_peft_load_aliasing),
        cmocka_unit_test(test_peft_writer_matches_reader),
    };
    int failed = cmocka_run_group_tests_name("io_hostile_host", host_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("io_hostile_device", device_tests, pfx_test_group_setup,
                                          pfx_test_group_teardown);
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed;
}
