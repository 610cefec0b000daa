/* STREAM-style read bandwidth (read_bw.h). */
#include "read_bw.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define CHUNK       256 /* floats a loop iteration reads: 16 lines */

typedef float v16 __attribute__((vector_size(64), aligned(64)));

#pragma GCC diagnostic ignored "-Wpsabi"
/* Sum of w[0, e) (e a multiple of CHUNK), 16 independent vectors: nothing
 * but the loads and their adds, which retire far faster than memory serves. */
#define SUM_BODY                                                                                   \
    v16 acc[16] = { { 0 } };                                                                       \
    for (size_t i = 0; i < e; i += CHUNK)                                                          \
        for (int j = 0; j < 16; j++)                                                               \
            acc[j] += *(const v16 *)(w + i + 16 * (size_t)j);                                      \
    for (int j = 1; j < 16; j++)                                                                   \
        acc[0] += acc[j];                                                                          \
    return acc[0][0] + acc[0][15];
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static float sum_avx512(const float *w, size_t e)
{
    SUM_BODY
}
__attribute__((target("avx2"))) static float sum_avx2(const float *w, size_t e)
{
    SUM_BODY
}
#endif
static float sum_plain(const float *w, size_t e)
{
    SUM_BODY
}

static float (*pick_sum(void))(const float *, size_t)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return sum_avx512;
    if (__builtin_cpu_supports("avx2"))
        return sum_avx2;
#endif
    return sum_plain;
}

typedef struct team {
    float *buf;
    size_t floats;
    int threads, passes;
    float (*sum)(const float *, size_t);
    pthread_mutex_t gate; /* held until every member exists */
    pthread_barrier_t start, end;
    volatile float sink[MAX_THREADS];
} team;

typedef struct member {
    team *t;
    int id;
} member;

static void slice(const team *t, int id, size_t *e0, size_t *e1)
{
    const size_t chunks = t->floats / CHUNK;
    *e0 = chunks * (size_t)id / (size_t)t->threads * CHUNK;
    *e1 = chunks * (size_t)(id + 1) / (size_t)t->threads * CHUNK;
}

/* Each member writes its own slice first (its pages then sit where it runs),
 * then reads it once a pass between two barriers. */
static void *member_run(void *arg)
{
    const member *me = arg;
    team *t = me->t;
    pthread_mutex_lock(&t->gate);
    pthread_mutex_unlock(&t->gate);
    size_t e0, e1;
    slice(t, me->id, &e0, &e1);
    for (size_t i = e0; i < e1; i++)
        t->buf[i] = (float)(i & 1023) * 1e-3f;
    for (int p = 0; p <= t->passes; p++) {
        pthread_barrier_wait(&t->start);
        t->sink[me->id] += t->sum(t->buf + e0, e1 - e0);
        pthread_barrier_wait(&t->end);
    }
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int read_bw_measure(size_t bytes, int threads, int passes, read_bw *out)
{
    memset(out, 0, sizeof(*out));
    if (!bytes)
        bytes = (size_t)1 << 30;
    if (threads <= 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    threads = threads > MAX_THREADS ? MAX_THREADS : threads;
    passes = passes < 1 ? 1 : passes;
    team *t = calloc(1, sizeof(*t));
    member *ms = calloc((size_t)threads, sizeof(*ms));
    pthread_t *ids = calloc((size_t)threads, sizeof(*ids));
    void *buf = NULL;
    if (!t || !ms || !ids || posix_memalign(&buf, 4096, bytes)) {
        free(t);
        free(ms);
        free(ids);
        return 0;
    }
    *t = (team){ .buf = buf,
                 .floats = bytes / sizeof(float),
                 .threads = threads,
                 .passes = passes,
                 .sum = pick_sum() };
    pthread_mutex_init(&t->gate, NULL);
    pthread_mutex_lock(&t->gate);
    int started = 0;
    for (; started < threads; started++) {
        ms[started] = (member){ t, started };
        if (pthread_create(&ids[started], NULL, member_run, &ms[started]))
            break;
    }
    /* the members that exist share the buffer */
    t->threads = threads = started;
    pthread_barrier_init(&t->start, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&t->end, NULL, (unsigned)threads + 1);
    pthread_mutex_unlock(&t->gate);
    double best = 0.0;
    for (int p = 0; p <= passes; p++) { /* pass 0: untimed (pages, clocks) */
        pthread_barrier_wait(&t->start);
        const double t0 = now_ms();
        pthread_barrier_wait(&t->end);
        const double ms_pass = now_ms() - t0;
        if (p && (best == 0.0 || ms_pass < best))
            best = ms_pass;
    }
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    size_t read = 0;
    for (int i = 0; i < threads; i++) {
        size_t e0, e1;
        slice(t, i, &e0, &e1);
        read += (e1 - e0) * sizeof(float);
    }
    if (threads > 0)
        *out = (read_bw){ .gbs = (double)read / best / 1e6,
                          .best_ms = best,
                          .bytes = read,
                          .threads = threads,
                          .passes = passes };
    pthread_barrier_destroy(&t->start);
    pthread_barrier_destroy(&t->end);
    pthread_mutex_destroy(&t->gate);
    free(buf);
    free(t);
    free(ms);
    free(ids);
    return threads > 0;
}
