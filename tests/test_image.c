/* tools/image.c: PGM and PNG files written to a temporary directory, read
 * back and checked: headers, sizes, PNG signature, IHDR, every chunk's CRC,
 * the zlib stream (stored blocks, Adler-32) and the pixels themselves. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "pfx_test.h"
#include "image.h"

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static char dir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/pfx-image-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/a.pgm", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/a.png", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/big.PNG", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}

static uint8_t *pattern(size_t w, size_t h)
{
    uint8_t *px = malloc(w * h);
    for (size_t i = 0; i < w * h; i++)
        px[i] = (uint8_t)(i * 7 + i / w);
    return px;
}

static void test_checksums(void **state)
{
    (void)state;
    const uint8_t s[] = "123456789";
    assert_int_equal(image_crc32(0, s, 9), 0xCBF43926u);      /* the CRC-32 check value */
    assert_int_equal(image_adler32(1, (const uint8_t *)"Wikipedia", 9), 0x11E60398u);
}

static void test_pgm(void **state)
{
    (void)state;
    size_t w = 13, h = 7, n;
    uint8_t *px = pattern(w, h);
    char path[128];
    snprintf(path, sizeof(path), "%s/a.pgm", dir);
    assert_int_equal(image_write(path, px, w, h), 0);
    uint8_t *f = slurp(path, &n);
    const char *head = "P5\n13 7\n255\n";
    assert_int_equal(n, strlen(head) + w * h);
    assert_memory_equal(f, head, strlen(head));
    assert_memory_equal(f + strlen(head), px, w * h);
    free(f);
    free(px);
}

/* Checks a PNG file and returns its decoded pixels. */
static uint8_t *check_png(const char *path, size_t w, size_t h)
{
    size_t n;
    uint8_t *f = slurp(path, &n);
    static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n' };
    assert_true(n > 8 + 25);
    assert_memory_equal(f, sig, 8);
    /* Chunks: IHDR first, IDAT(s), IEND last; every CRC valid. */
    uint8_t *z = malloc(n);
    size_t zn = 0, pos = 8;
    int chunk = 0;
    bool ended = false;
    while (pos < n) {
        assert_true(pos + 12 <= n);
        uint32_t len = get32(f + pos);
        assert_true(pos + 12 + len <= n);
        const uint8_t *type = f + pos + 4, *data = f + pos + 8;
        assert_int_equal(get32(data + len), image_crc32(0, type, 4 + len));
        if (chunk == 0) {
            assert_memory_equal(type, "IHDR", 4);
            assert_int_equal(len, 13);
            assert_int_equal(get32(data), w);
            assert_int_equal(get32(data + 4), h);
            assert_int_equal(data[8], 8); /* depth */
            assert_int_equal(data[9], 0); /* gray */
        } else if (!memcmp(type, "IDAT", 4)) {
            memcpy(z + zn, data, len);
            zn += len;
        } else {
            assert_memory_equal(type, "IEND", 4);
            assert_int_equal(len, 0);
            ended = true;
        }
        pos += 12 + len;
        chunk++;
    }
    assert_true(ended);
    assert_int_equal(pos, n);
    /* zlib: header, stored blocks, Adler-32. */
    assert_int_equal((z[0] * 256 + z[1]) % 31, 0);
    assert_int_equal(z[0] & 0x0F, 8);
    size_t raw_n = (w + 1) * h, o = 2, r = 0;
    uint8_t *raw = malloc(raw_n);
    for (;;) {
        uint8_t hdr = z[o++];
        assert_int_equal(hdr & 6, 0); /* stored */
        size_t len = z[o] | (size_t)z[o + 1] << 8;
        assert_int_equal(len ^ 0xFFFF, z[o + 2] | (size_t)z[o + 3] << 8);
        o += 4;
        assert_true(r + len <= raw_n);
        memcpy(raw + r, z + o, len);
        r += len;
        o += len;
        if (hdr & 1)
            break;
    }
    assert_int_equal(r, raw_n);
    assert_int_equal(get32(z + o), image_adler32(1, raw, raw_n));
    assert_int_equal(o + 4, zn);
    uint8_t *px = malloc(w * h);
    for (size_t y = 0; y < h; y++) {
        assert_int_equal(raw[y * (w + 1)], 0); /* filter None */
        memcpy(px + y * w, raw + y * (w + 1) + 1, w);
    }
    free(raw);
    free(z);
    free(f);
    return px;
}

static void test_png(void **state)
{
    (void)state;
    const size_t dims[2][2] = { { 13, 7 }, { 400, 300 } }; /* the second: several blocks */
    for (int c = 0; c < 2; c++) {
        size_t w = dims[c][0], h = dims[c][1];
        uint8_t *px = pattern(w, h);
        char path[128];
        snprintf(path, sizeof(path), c ? "%s/big.PNG" : "%s/a.png", dir);
        assert_int_equal(image_write(path, px, w, h), 0);
        uint8_t *back = check_png(path, w, h);
        assert_memory_equal(back, px, w * h);
        free(back);
        free(px);
    }
}

static void test_gray_mapping(void **state)
{
    (void)state;
    const float v[4] = { 0.0f, 0.25f, 1.0f, NAN };
    uint8_t out[16];
    image_gray_from_floats(v, 2, 2, 2, out);
    const uint8_t want[16] = { 0, 0, 128, 128, 0, 0, 128, 128, 255, 255, 0, 0, 255, 255, 0, 0 };
    assert_memory_equal(out, want, 16);
    assert_int_equal(image_write("/nonexistent-dir/x.png", out, 4, 4), -1);
    assert_int_equal(image_write_pgm("/nonexistent-dir/x.pgm", out, 4, 4), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checksums),
        cmocka_unit_test(test_pgm),
        cmocka_unit_test(test_png),
        cmocka_unit_test(test_gray_mapping),
    };
    return cmocka_run_group_tests_name("image", tests, make_dir, remove_dir);
}
