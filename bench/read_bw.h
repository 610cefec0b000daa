/* The machine's read bandwidth, STREAM-style: every online core reads its
 * slice of one buffer far larger than the last-level cache, vector loads
 * summed into several accumulators, the best of several passes. It is the
 * floor a decode step that streams its weights cannot beat: weight bytes /
 * this bandwidth. */
#ifndef PFX_BENCH_READ_BW_H
#define PFX_BENCH_READ_BW_H

#include <stddef.h>

typedef struct read_bw {
    double gbs;     /* the best pass: bytes / time, 1e9 bytes a second */
    double best_ms; /* that pass's time */
    size_t bytes;   /* the buffer */
    int threads, passes;
} read_bw;

/* Reads `bytes` (0: 1 GiB, four times this machine's 260 MiB L3 and more)
 * on `threads` threads (0: every online core) `passes` times after one
 * untimed pass. False where the buffer or a thread could not be had. */
int read_bw_measure(size_t bytes, int threads, int passes, read_bw *out);

#endif
