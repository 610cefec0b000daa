/* Grayscale image output for heat maps: binary PGM (P5) and PNG, the latter
 * with a minimal encoder (zlib "stored" deflate blocks, CRC-32, Adler-32), so
 * no image library is needed. Pixels are 8-bit, row-major, top row first. */
#ifndef PFX_TOOLS_IMAGE_H
#define PFX_TOOLS_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* 0 on success, -1 on an I/O error or bad dimensions (detail in
 * pfx_last_error(NULL) for I/O). The file is replaced atomically
 * (pfx_output_open), so an interrupted write leaves the old one whole. */
int image_write_pgm(const char *path, const uint8_t *pixels, size_t width, size_t height);
int image_write_png(const char *path, const uint8_t *pixels, size_t width, size_t height);
/* By extension: ".png" (any case) writes PNG, anything else PGM. */
int image_write(const char *path, const uint8_t *pixels, size_t width, size_t height);

/* The checksums of the PNG encoder (exposed for tests). */
uint32_t image_crc32(uint32_t crc, const uint8_t *data, size_t n); /* start with 0 */
uint32_t image_adler32(uint32_t adler, const uint8_t *data, size_t n); /* start with 1 */

/* Maps values in [0, vmax] to 0..255 with a gamma of 0.5 (sqrt), so that small
 * probabilities stay visible; non-finite or negative values give 0. Each
 * value becomes a scale x scale block (width * scale columns out). */
void image_gray_from_floats(const float *values, size_t width, size_t height, size_t scale,
                            uint8_t *out);

#endif
