/* Token shards (data.h): the demonstration corpus written as llm.c shards
 * reads back as the same blocks in the same order as the text packed in
 * memory; uint32 and headerless uint16 files; the order a permutation per
 * epoch; each rank reads only its rows; every bad header field and token
 * refused naming the shard and the offset; a corpus of gigabytes read with
 * flat resident memory; a file written a piece of lines at a time the same
 * as whole. No OpenCL.
 *
 * argv[1]: data/demo. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "pfx_test.h"
#include "prefixcl/data.h"
#include "text/text_internal.h"

static const char *demo_dir;
static char tmp_dir[] = "/tmp/pfx-test-shards-XXXXXX";
static pfx_tokenizer *tok;

/* tmp_dir/name (one of four rotating buffers). */
static const char *tmp_path(const char *name)
{
    static char path[4][512];
    static int slot;
    char *p = path[slot++ % 4];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    return p;
}

static void put32(uint8_t *p, int32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)((uint32_t)v >> (8 * i));
}

/* A file of llm.c's layout: header (magic, version, count) then `n` tokens
 * of `width` bytes; the header's count may lie. */
static const char *write_shard(const char *name, int32_t magic, int32_t version, int32_t count,
                               const uint32_t *ids, size_t n, unsigned width)
{
    const char *path = tmp_path(name);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    uint8_t head[PFX_SHARD_HEADER_BYTES] = { 0 };
    put32(head, magic);
    put32(head + 4, version);
    put32(head + 8, count);
    if (magic)
        assert_int_equal(fwrite(head, 1, sizeof(head), fp), sizeof(head));
    for (size_t i = 0; i < n; i++)
        for (unsigned k = 0; k < width; k++)
            fputc((int)(ids[i] >> (8 * k)) & 0xff, fp);
    fclose(fp);
    return path;
}

/* Whether two files hold the same bytes. */
static bool same_bytes(const char *a, const char *b)
{
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    assert_true(x && y);
    int c, d;
    do {
        c = fgetc(x);
        d = fgetc(y);
    } while (c == d && c != EOF);
    fclose(x);
    fclose(y);
    return c == d;
}

static pfx_blocks *open_ok(const char *pattern, pfx_shard_format f, size_t block)
{
    pfx_blocks *b = NULL;
    if (pfx_blocks_open_shards(pattern, f, block, &b) != PFX_SUCCESS)
        fail_msg("%s: %s", pattern, pfx_last_error(NULL));
    return b;
}

/* The demonstration corpus as shards of 1000 tokens (blocks cross them):
 * the header llm.c writes, and batch after batch over three epochs the
 * blocks of the text packed in memory. */
static void test_written_equals_text(void **state)
{
    (void)state;
    char train[512];
    snprintf(train, sizeof(train), "%s/train.txt", demo_dir);
    pfx_shard_write_info info;
    assert_int_equal(pfx_shards_write(train, tok, tmp_path("demo"), 1000, &info), PFX_SUCCESS);
    assert_int_equal(info.token_bytes, 2);
    assert_int_equal(info.shards, (info.tokens + 999) / 1000);
    assert_true(info.shards > 3 && info.stale == 0);
    FILE *fp = fopen(tmp_path("demo_000001.bin"), "rb");
    assert_non_null(fp);
    int32_t head[3];
    assert_int_equal(fread(head, 4, 3, fp), 3);
    fclose(fp);
    assert_int_equal(head[0], 20240520);
    assert_int_equal(head[1], 1);
    assert_int_equal(head[2], 1000);
    /* read a kilobyte of lines at a time: the same shards, byte for byte */
    pfx_shard_write_info pieces;
    assert_int_equal(pfx_shards_write_chunked(train, tok, tmp_path("piece"), 1000, 1024, &pieces),
                     PFX_SUCCESS);
    assert_memory_equal(&pieces, &info, sizeof(info));
    for (size_t i = 0; i < info.shards; i++) {
        char a[64], b[64];
        snprintf(a, sizeof(a), "demo_%06zu.bin", i);
        snprintf(b, sizeof(b), "piece_%06zu.bin", i);
        assert_true(same_bytes(tmp_path(a), tmp_path(b)));
    }

    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length = (size_t)1 << 24;
    o.append_eos = true;
    o.shuffle = false;
    pfx_dataset *ds = NULL;
    assert_int_equal(pfx_dataset_load(train, tok, &o, &ds), PFX_SUCCESS);
    pfx_blocks *mem = NULL, *map = open_ok(tmp_path("demo_*.bin"), PFX_SHARD_LLMC, 37);
    assert_int_equal(pfx_blocks_pack(ds, 37, &mem), PFX_SUCCESS);
    assert_int_equal(pfx_blocks_count(map), pfx_blocks_count(mem));
    int32_t a[5 * 37], b[5 * 37];
    pfx_data_position pa = { 0, 0 }, pb = { 0, 0 };
    const size_t batches = 3 * ((pfx_blocks_count(mem) + 4) / 5); /* three epochs */
    for (size_t i = 0; i < batches; i++) {
        size_t ra, rb;
        assert_int_equal(pfx_blocks_next_batch(mem, &pa, 5, 9, a, &ra), PFX_SUCCESS);
        assert_int_equal(pfx_blocks_next_batch(map, &pb, 5, 9, b, &rb), PFX_SUCCESS);
        assert_int_equal(ra, rb);
        assert_memory_equal(a, b, ra * 37 * sizeof(int32_t));
    }
    assert_int_equal(pa.epoch, 2);
    /* the held-out slice is the same too */
    pfx_blocks *ea = NULL, *eb = NULL;
    assert_int_equal(pfx_blocks_split(mem, 3, &ea), PFX_SUCCESS);
    assert_int_equal(pfx_blocks_split(map, 3, &eb), PFX_SUCCESS);
    for (size_t i = 0; i < 3; i++) {
        const int32_t *p;
        assert_int_equal(pfx_blocks_get(ea, i, &p), PFX_SUCCESS);
        assert_int_equal(pfx_blocks_read(eb, i, b), PFX_SUCCESS);
        assert_memory_equal(p, b, 37 * sizeof(int32_t));
    }
    assert_int_equal(pfx_blocks_get(eb, 0, &(const int32_t *){ NULL }), PFX_ERROR_UNSUPPORTED);
    pfx_blocks_free(&ea);
    pfx_blocks_free(&eb);
    pfx_blocks_free(&mem);
    pfx_blocks_free(&map);
    pfx_dataset_free(&ds);

    /* fewer shards than before: the ones left over are reported */
    assert_int_equal(pfx_shards_write(train, tok, tmp_path("demo"), 4000, &info), PFX_SUCCESS);
    assert_true(info.stale > 0);
}

/* Each block once per epoch, a new order each epoch and seed, for awkward
 * counts; the rows of a rank, and only those, read. */
static void test_order_and_ranks(void **state)
{
    (void)state;
    static const size_t counts[] = { 1, 2, 3, 5, 37, 1000 };
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        const size_t n = counts[c];
        uint32_t *ids = malloc(2 * n * sizeof(uint32_t)); /* block k: k, k */
        for (size_t k = 0; k < 2 * n; k++)
            ids[k] = (uint32_t)(k / 2);
        pfx_blocks *b =
            open_ok(write_shard("order.bin", 0, 0, 0, ids, 2 * n, 2), PFX_SHARD_RAW_U16, 2);
        assert_int_equal(pfx_blocks_count(b), n);
        int32_t *out = malloc(2 * 7 * sizeof(int32_t));
        size_t *first = calloc(n, sizeof(size_t));
        bool moved = false;
        for (uint64_t epoch = 0; epoch < 3; epoch++) {
            uint8_t *seen = calloc(n, 1);
            pfx_data_position p = { epoch, 0 };
            for (size_t got = 0; got < n;) {
                size_t rows;
                assert_int_equal(pfx_blocks_next_batch(b, &p, 7, 3, out, &rows), PFX_SUCCESS);
                for (size_t r = 0; r < rows; r++) {
                    assert_int_equal(out[2 * r], out[2 * r + 1]);
                    assert_false(seen[out[2 * r]]);
                    seen[out[2 * r]] = 1;
                    if (epoch == 0)
                        first[got + r] = (size_t)out[2 * r];
                    else if (first[got + r] != (size_t)out[2 * r])
                        moved = true;
                }
                got += rows;
            }
            free(seen);
        }
        assert_true(moved || n <= 2);
        /* ranks: 3 processes read the rows of a batch of 7 between them */
        int32_t full[2 * 7], part[2 * 7];
        pfx_data_position p0 = { 0, 0 };
        size_t rows;
        assert_int_equal(pfx_blocks_next_batch(b, &p0, 7, 3, full, &rows), PFX_SUCCESS);
        for (size_t rank = 0; rank < 3; rank++) {
            pfx_data_position p = { 0, 0 };
            size_t r;
            for (size_t i = 0; i < 2 * 7; i++)
                part[i] = -7;
            assert_int_equal(pfx_blocks_next_rows(b, &p, 7, 3, rank, 3, part, &r), PFX_SUCCESS);
            assert_int_equal(r, rows);
            assert_memory_equal(&p, &p0, sizeof(p));
            const size_t r0 = rows * rank / 3, r1 = rows * (rank + 1) / 3;
            for (size_t i = 0; i < 2 * rows; i++)
                assert_int_equal(part[i], i / 2 >= r0 && i / 2 < r1 ? full[i] : -7);
        }
        assert_int_equal(pfx_blocks_next_rows(b, &p0, 7, 3, 3, 3, part, &rows),
                         PFX_ERROR_INVALID_ARGUMENT);
        free(first);
        free(out);
        free(ids);
        pfx_blocks_free(&b);
    }
}

/* llm.c's uint32 layout (Llama 3 vocabularies), and the vocabulary check. */
static void test_u32_and_vocab(void **state)
{
    (void)state;
    const uint32_t ids[6] = { 128000, 70000, 5, 128255, 9, 1 };
    pfx_blocks *b =
        open_ok(write_shard("u32_000000.bin", 20240801, 7, 6, ids, 6, 4), PFX_SHARD_LLMC, 3);
    int32_t out[3];
    assert_int_equal(pfx_blocks_read(b, 1, out), PFX_SUCCESS);
    assert_int_equal(out[0], 128255);
    assert_int_equal(pfx_blocks_set_vocab(b, 128256), PFX_SUCCESS);
    assert_int_equal(pfx_blocks_read(b, 1, out), PFX_SUCCESS);
    assert_int_equal(pfx_blocks_set_vocab(b, 100000), PFX_SUCCESS); /* not read yet */
    /* block 1's 128255 is token 3: byte 1024 + 3 * 4 */
    assert_status_names(NULL, pfx_blocks_read(b, 1, out), PFX_ERROR_FORMAT, "offset 1036");
    assert_non_null(strstr(pfx_last_error(NULL), "u32_000000.bin"));
    pfx_data_position p = { 0, 0 };
    size_t rows;
    assert_int_equal(pfx_blocks_next_batch(b, &p, 2, 1, out, &rows), PFX_ERROR_FORMAT);
    assert_int_equal(p.index, 0); /* a failed read leaves the position */
    pfx_blocks_free(&b);
}

/* A vocabulary past 65,536 ids (a byte-level BPE whose merges and
 * end-of-text token sit at 70,000 and on): written as llm.c's uint32
 * shards, read back id for id. */
static void test_written_u32(void **state)
{
    (void)state;
    static const char vocab[] = "{\"a\": 0, \"b\": 1, \"\\u0120\": 2, \"ab\": 70000, "
                                "\"<|endoftext|>\": 70001, \"\\u0120ab\": 70002}";
    static const char merges[] = "a b\n\u0120 ab\n";
    pfx_tokenizer *big = NULL;
    assert_int_equal(pfx_tokenizer_load_vocab_merges_memory(vocab, strlen(vocab), merges,
                                                            strlen(merges), "big", &big),
                     PFX_SUCCESS);
    const char *path = tmp_path("big.txt");
    FILE *fp = fopen(path, "wb");
    fputs("ab ab\nba\n", fp);
    fclose(fp);
    pfx_shard_write_info info;
    assert_int_equal(pfx_shards_write(path, big, tmp_path("wide"), 0, &info), PFX_SUCCESS);
    assert_int_equal(info.token_bytes, 4);
    assert_int_equal(info.tokens, 6);
    pfx_blocks *b = open_ok(tmp_path("wide_000000.bin"), PFX_SHARD_LLMC, 6);
    int32_t got[6];
    const int32_t want[6] = { 70000, 70002, 70001, 1, 0, 70001 };
    assert_int_equal(pfx_blocks_read(b, 0, got), PFX_SUCCESS);
    assert_memory_equal(got, want, sizeof(want));
    pfx_blocks_free(&b);
    pfx_tokenizer_free(&big);
}

/* Every header field, the file's kind and size, refused by name. */
static void test_hostile(void **state)
{
    (void)state;
    const uint32_t ids[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    const struct {
        const char *name;
        int32_t magic, version, count;
        size_t n;
        unsigned width;
        const char *needle;
    } bad[] = {
        { "magic.bin", 20240521, 1, 8, 8, 2, "magic 20240521 at offset 0" },
        { "version.bin", 20240520, 2, 8, 8, 2, "version 2 at offset 4" },
        { "version32.bin", 20240801, 1, 8, 8, 4, "version 1 at offset 4" },
        { "negative.bin", 20240520, 1, -1, 8, 2, "count -1 at offset 8 is negative" },
        { "truncated.bin", 20240520, 1, 9, 8, 2, "truncated at offset 1040" },
        { "trailing.bin", 20240520, 1, 7, 8, 2, "trailing bytes at offset 1038" },
        { "width.bin", 20240801, 7, 8, 8, 2, "truncated at offset 1040" },
    };
    pfx_blocks *b = NULL;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *path = write_shard(bad[i].name, bad[i].magic, bad[i].version, bad[i].count, ids,
                                       bad[i].n, bad[i].width);
        assert_status_names(NULL, pfx_blocks_open_shards(path, PFX_SHARD_LLMC, 2, &b),
                            PFX_ERROR_FORMAT, bad[i].needle);
        assert_non_null(strstr(pfx_last_error(NULL), bad[i].name));
        assert_null(b);
    }
    /* a header cut short; raw-u16 of an odd size */
    FILE *fp = fopen(tmp_path("short.bin"), "wb");
    fwrite("\x58\xe3\x34\x01\x01\0\0\0", 1, 8, fp);
    fclose(fp);
    assert_status_names(NULL, pfx_blocks_open_shards(tmp_path("short.bin"), PFX_SHARD_LLMC, 2, &b),
                        PFX_ERROR_FORMAT, "shorter than llm.c's 1024-byte header");
    fp = fopen(tmp_path("odd.bin"), "wb");
    fwrite("\1\0\2\0\3", 1, 5, fp);
    fclose(fp);
    assert_status_names(NULL, pfx_blocks_open_shards(tmp_path("odd.bin"), PFX_SHARD_RAW_U16, 2, &b),
                        PFX_ERROR_FORMAT, "odd size");
    /* one bad shard among good ones */
    write_shard("set_000000.bin", 20240520, 1, 8, ids, 8, 2);
    write_shard("set_000001.bin", 20240520, 1, 9, ids, 8, 2);
    assert_status_names(NULL, pfx_blocks_open_shards(tmp_path("set_*.bin"), PFX_SHARD_LLMC, 2, &b),
                        PFX_ERROR_FORMAT, "set_000001.bin");
    /* no match, a folder, a FIFO; too few tokens; bad arguments */
    assert_status_names(NULL, pfx_blocks_open_shards(tmp_path("none_*.bin"), PFX_SHARD_LLMC, 2, &b),
                        PFX_ERROR_IO, "no file matches");
    assert_int_equal(mkdir(tmp_path("dir_0.bin"), 0700), 0);
    assert_status_names(NULL, pfx_blocks_open_shards(tmp_path("dir_*.bin"), PFX_SHARD_LLMC, 2, &b),
                        PFX_ERROR_IO, "not a regular file");
    assert_int_equal(mkfifo(tmp_path("fifo_0.bin"), 0600), 0);
    assert_status_names(NULL, pfx_blocks_open_shards(tmp_path("fifo_*.bin"), PFX_SHARD_LLMC, 2, &b),
                        PFX_ERROR_IO, "not a regular file");
    assert_status_names(NULL,
                        pfx_blocks_open_shards(tmp_path("set_000000.bin"), PFX_SHARD_LLMC, 9, &b),
                        PFX_ERROR_OUT_OF_RANGE, "8 tokens do not fill one block of 9");
    assert_int_equal(pfx_blocks_open_shards(NULL, PFX_SHARD_LLMC, 2, &b), PFX_ERROR_NULL_ARGUMENT);
    assert_int_equal(pfx_blocks_open_shards(tmp_path("set_000000.bin"), (pfx_shard_format)7, 2, &b),
                     PFX_ERROR_INVALID_ARGUMENT);
    assert_int_equal(pfx_blocks_open_shards(tmp_path("set_000000.bin"), PFX_SHARD_LLMC, 1, &b),
                     PFX_ERROR_INVALID_ARGUMENT);
    assert_null(b);
    assert_int_equal(pfx_shards_write(tmp_path("none.txt"), tok, tmp_path("x"), 0, NULL),
                     PFX_ERROR_IO);
    assert_int_equal(pfx_shards_write(tmp_path("none.txt"), tok, tmp_path("x"),
                                      (size_t)PFX_SHARD_MAX_TOKENS + 1, NULL),
                     PFX_ERROR_INVALID_ARGUMENT);
}

/* VmRSS of this process in bytes (/proc/self/status). */
static size_t rss_bytes(void)
{
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (fp && fgets(line, sizeof(line), fp))
        if (sscanf(line, "VmRSS: %zu kB", &kb) == 1)
            break;
    if (fp)
        fclose(fp);
    return kb * 1024;
}

/* Two shards of 1 GiB each (written, not sparse) read a block at a time
 * in shuffled order across both: the resident memory stays within 32 MiB
 * of where it started, where the pages around the blocks read would
 * otherwise stay mapped (1.8 GiB after these 128 MiB on Linux 6.18, whose
 * faults map large folios of the page cache). */
static void test_flat_memory(void **state)
{
    (void)state;
    const size_t shard_tokens = (size_t)1 << 29, chunk = (size_t)1 << 20; /* 1 GiB of uint16 */
    struct statvfs fs;
    if (statvfs(tmp_dir, &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < 6.0 * (1 << 30)) {
        print_message("skipped: %s has less than 6 GiB free for the 2 GiB of shards\n", tmp_dir);
        skip();
    }
    uint16_t *buf = malloc(chunk * 2);
    for (size_t i = 0; i < chunk; i++)
        buf[i] = (uint16_t)(i * 7919 % 50257);
    for (int s = 0; s < 2; s++) {
        char name[32];
        snprintf(name, sizeof(name), "big_%06d.bin", s);
        const int fd = open(tmp_path(name), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        uint8_t head[PFX_SHARD_HEADER_BYTES] = { 0 };
        put32(head, PFX_SHARD_MAGIC);
        put32(head + 4, 1);
        put32(head + 8, (int32_t)shard_tokens);
        assert_int_equal(write(fd, head, sizeof(head)), (ssize_t)sizeof(head));
        for (size_t t = 0; t < shard_tokens; t += chunk)
            assert_int_equal(write(fd, buf, chunk * 2), (ssize_t)(chunk * 2));
        close(fd);
    }
    free(buf);
    const size_t block = 4096, batch = 64;
    int32_t *ids = malloc(batch * block * sizeof(int32_t));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const size_t base = rss_bytes();
    pfx_blocks *b = open_ok(tmp_path("big_*.bin"), PFX_SHARD_LLMC, block);
    const double open_s = pfx_test_seconds_since(&t0);
    assert_int_equal(pfx_blocks_count(b), 2 * shard_tokens / block);
    assert_int_equal(pfx_blocks_set_vocab(b, 50257), PFX_SUCCESS);
    pfx_data_position p = { 0, 0 };
    size_t peak = 0, read = 0;
    while (read < 16384) { /* 128 MiB in blocks spread over both shards */
        size_t rows;
        assert_int_equal(pfx_blocks_next_batch(b, &p, batch, 1, ids, &rows), PFX_SUCCESS);
        read += rows;
        const size_t now = rss_bytes();
        peak = now > peak ? now : peak;
    }
    print_message("opened 2 GiB of shards in %.4f s, read %zu MiB at %.1f s, resident memory "
                  "grew by %zu KiB at most\n",
                  open_s, read * block * 2 >> 20, pfx_test_seconds_since(&t0),
                  (peak > base ? peak - base : 0) >> 10);
    assert_true(open_s < 0.5);
    assert_true(peak < base + ((size_t)32 << 20));
    pfx_blocks_free(&b);
    free(ids);
    unlink(tmp_path("big_000000.bin"));
    unlink(tmp_path("big_000001.bin"));
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmp_dir))
        return -1;
    return pfx_tokenizer_load(demo_dir, &tok) == PFX_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    pfx_tokenizer_free(&tok);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DEMO_DIR\n", argv[0]);
        return 2;
    }
    demo_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_written_equals_text),
        cmocka_unit_test(test_order_and_ranks),
        cmocka_unit_test(test_u32_and_vocab),
        cmocka_unit_test(test_written_u32),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_flat_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
