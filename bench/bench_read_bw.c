/*
 * The machine's read bandwidth (read_bw.h): every online core reads its slice
 * of a buffer far larger than the last-level cache, the best of several
 * passes. bench/peer_llama.py divides a decode step's weight bytes by it:
 * the streaming floor that no product kernel can beat.
 *
 * usage: bench_read_bw [--mib N] [--threads T] [--passes P]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read_bw.h"

int main(int argc, char **argv)
{
    size_t mib = 1024;
    int threads = 0, passes = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc)
            passes = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--mib N] [--threads T] [--passes P]\n", argv[0]);
            return 2;
        }
    }
    if (mib < 1 || threads < 0 || passes < 1) {
        fprintf(stderr, "bad sizes: --mib >= 1, --threads >= 0 (0: every core), --passes >= 1\n");
        return 2;
    }
    read_bw bw;
    if (!read_bw_measure(mib << 20, threads, passes, &bw)) {
        fprintf(stderr, "bench_read_bw: no buffer of %zu MiB or no thread\n", mib);
        return 1;
    }
    printf("read bandwidth: %.1f GB/s (%.1f MB in %.3f ms, the best of %d passes on %d threads)\n",
           bw.gbs, (double)bw.bytes / 1e6, bw.best_ms, bw.passes, bw.threads);
    return 0;
}
