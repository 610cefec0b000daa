/* Replays files (or every file of folders) through a fuzz harness (fuzz.h)
 * without libFuzzer, so each corpus runs in every build, sanitizers included.
 * usage: run_corpus PATH...   Prints how many inputs parsed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "prefixcl/prefixcl.h"

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
    if (pfx_fuzz_accepts(buf, n, path))
        (*ok)++;
    else
        printf("  %s: %s\n", path, pfx_last_error(NULL));
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
