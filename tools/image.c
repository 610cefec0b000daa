/* Grayscale PGM and PNG writers (see image.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "prefixcl/io.h"

uint32_t image_crc32(uint32_t crc, const uint8_t *data, size_t n)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t image_adler32(uint32_t adler, const uint8_t *data, size_t n)
{
    uint32_t a = adler & 0xFFFF, b = adler >> 16;
    while (n) {
        size_t chunk = n < 5552 ? n : 5552; /* no overflow before the modulo */
        n -= chunk;
        while (chunk--) {
            a += *data++;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    return (b << 16) | a;
}

/* Files are replaced atomically (include/prefixcl/io.h, "Output files"): an
 * interrupted run leaves the previous image whole. */
static int finish(pfx_output_file **out, int ok)
{
    if (!ok) {
        pfx_output_discard(out);
        return -1;
    }
    return pfx_output_commit(out) == PFX_SUCCESS ? 0 : -1;
}

int image_write_pgm(const char *path, const uint8_t *pixels, size_t width, size_t height)
{
    if (!width || !height)
        return -1;
    pfx_output_file *out = NULL;
    if (pfx_output_open(path, &out) != PFX_SUCCESS)
        return -1;
    FILE *f = pfx_output_stream(out);
    int ok = fprintf(f, "P5\n%zu %zu\n255\n", width, height) > 0 &&
             fwrite(pixels, 1, width * height, f) == width * height;
    return finish(&out, ok);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Writes one chunk: length, type, data, CRC over type and data. */
static int put_chunk(FILE *f, const char type[4], const uint8_t *data, size_t n)
{
    uint8_t head[8], tail[4];
    put32(head, (uint32_t)n);
    memcpy(head + 4, type, 4);
    uint32_t crc = image_crc32(0, head + 4, 4);
    crc = image_crc32(crc, data, n);
    put32(tail, crc);
    return fwrite(head, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) &&
           fwrite(tail, 1, 4, f) == 4;
}

int image_write_png(const char *path, const uint8_t *pixels, size_t width, size_t height)
{
    if (!width || !height || width > 0x7FFFFFFF || height > 0x7FFFFFFF)
        return -1;
    /* Raw scanlines: filter byte 0 (None) and the row. */
    size_t stride = width + 1, raw_n = stride * height;
    size_t blocks = raw_n / 65535 + 1;
    size_t z_n = 2 + raw_n + 5 * blocks + 4;
    if (z_n > 0x7FFFFFFF)
        return -1;
    uint8_t *raw = malloc(raw_n), *z = malloc(z_n);
    if (!raw || !z) {
        free(raw);
        free(z);
        return -1;
    }
    for (size_t y = 0; y < height; y++) {
        raw[y * stride] = 0;
        memcpy(raw + y * stride + 1, pixels + y * width, width);
    }
    /* zlib stream: CMF/FLG (deflate, 32K window, no dictionary, fastest),
     * stored blocks of at most 65535 bytes, Adler-32 big-endian. */
    size_t o = 0;
    z[o++] = 0x78;
    z[o++] = 0x01; /* (0x78 * 256 + 0x01) % 31 == 0 */
    size_t left = raw_n, pos = 0;
    do {
        size_t len = left < 65535 ? left : 65535;
        left -= len;
        z[o++] = left == 0 ? 1 : 0; /* BFINAL, BTYPE = 00 (stored) */
        z[o++] = (uint8_t)(len & 0xFF);
        z[o++] = (uint8_t)(len >> 8);
        z[o++] = (uint8_t)(~len & 0xFF);
        z[o++] = (uint8_t)((~len >> 8) & 0xFF);
        memcpy(z + o, raw + pos, len);
        o += len;
        pos += len;
    } while (left);
    put32(z + o, image_adler32(1, raw, raw_n));
    o += 4;

    uint8_t ihdr[13];
    put32(ihdr, (uint32_t)width);
    put32(ihdr + 4, (uint32_t)height);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 0;  /* grayscale */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* no interlace */
    static const uint8_t signature[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n' };

    int ok = 0;
    pfx_output_file *out = NULL;
    if (pfx_output_open(path, &out) == PFX_SUCCESS) {
        FILE *f = pfx_output_stream(out);
        ok = fwrite(signature, 1, 8, f) == 8 && put_chunk(f, "IHDR", ihdr, 13) &&
             put_chunk(f, "IDAT", z, o) && put_chunk(f, "IEND", NULL, 0);
        ok = finish(&out, ok) == 0;
    }
    free(raw);
    free(z);
    return ok ? 0 : -1;
}

int image_write(const char *path, const uint8_t *pixels, size_t width, size_t height)
{
    size_t n = strlen(path);
    if (n >= 4 && path[n - 4] == '.' && tolower((unsigned char)path[n - 3]) == 'p' &&
        tolower((unsigned char)path[n - 2]) == 'n' && tolower((unsigned char)path[n - 1]) == 'g')
        return image_write_png(path, pixels, width, height);
    return image_write_pgm(path, pixels, width, height);
}

void image_gray_from_floats(const float *values, size_t width, size_t height, size_t scale,
                            uint8_t *out)
{
    float vmax = 0.0f;
    for (size_t i = 0; i < width * height; i++)
        if (isfinite(values[i]) && values[i] > vmax)
            vmax = values[i];
    size_t out_w = width * scale;
    for (size_t y = 0; y < height; y++)
        for (size_t x = 0; x < width; x++) {
            float v = values[y * width + x];
            double g = (isfinite(v) && v > 0 && vmax > 0) ? sqrt((double)v / vmax) : 0.0;
            uint8_t px = (uint8_t)lrint(g > 1 ? 255.0 : 255.0 * g);
            for (size_t dy = 0; dy < scale; dy++)
                memset(out + (y * scale + dy) * out_w + x * scale, px, scale);
        }
}
