/* Replays files (or every file of folders) through the fuzz harness without
 * libFuzzer, so the corpus runs in every build, sanitizers included.
 * usage: run_corpus PATH...   Prints how many inputs parsed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "prefixcl/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Built with -DPFX_FUZZ_ACCEPTS=fn, the harness's fn(data, size) says
 * whether an input parses (its error in pfx_last_error(NULL)); without it
 * the inputs are safetensors files. */
#ifdef PFX_FUZZ_ACCEPTS
bool PFX_FUZZ_ACCEPTS(const uint8_t *data, size_t size);
#endif

static int run_file(const char *path, size_t *ok)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *bigger = realloc(buf, cap * 2);
            if (!bigger)
                free(buf);
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(fp);
    if (!buf)
        return 1;
    LLVMFuzzerTestOneInput(buf, n);
#ifdef PFX_FUZZ_ACCEPTS
    if (PFX_FUZZ_ACCEPTS(buf, n))
        (*ok)++;
    else
        printf("  %s: %s\n", path, pfx_last_error(NULL));
#else
    pfx_safetensors *f = NULL;
    if (pfx_safetensors_open_memory(buf, n, path, &f) == PFX_SUCCESS)
        (*ok)++;
    else
        printf("  %s: %s\n", path, pfx_last_error(NULL));
    pfx_safetensors_close(&f);
#endif
    /* Every prefix of a small file too: truncations must be rejected cleanly. */
    if (n <= 4096)
        for (size_t k = 0; k < n; k++)
            LLVMFuzzerTestOneInput(buf, k);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    size_t files = 0, ok = 0;
    int failed = 0;
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            perror(argv[a]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= run_file(argv[a], &ok);
            files++;
            continue;
        }
        DIR *d = opendir(argv[a]);
        if (!d) {
            perror(argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[a], e->d_name);
            failed |= run_file(path, &ok);
            files++;
        }
        closedir(d);
    }
    printf("%zu inputs, %zu valid, the rest rejected cleanly\n", files, ok);
    return failed || files == 0;
}
