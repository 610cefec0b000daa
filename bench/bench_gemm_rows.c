/*
 * Few-row products against the host BLAS on a decode step's weights: GPT-2
 * small's 48 block weights ([in, out], 12 layers of 768x2304, 768x768,
 * 768x3072, 3072x768) and its head ([50257, 768], used transposed), each
 * distinct so that every product reads its weight from memory. For m rows
 * (--rows 1,2,4,8): the host BLAS (sgemv for one row, sgemm otherwise), the
 * few-row path on float32, half, bfloat16 and Q8_0 weights (Q8_0 held [n, k],
 * as the model holds it; float32 rows, and rows quantized to int8 with
 * integer dots as the decode step takes them). First the floor of a step: the weights' bytes over
 * the machine's read bandwidth (read_bw.h). Prints each shape's
 * median and best ms and GB/s of weights read (the ways alternate
 * within each repetition), and the step's sums.
 *
 * usage: bench_gemm_rows [--rows 1,2,4,8] [--reps N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "gemm_rows.h"
#include "half.h"
#include "q8_0.h"
#include "read_bw.h"
#include "tool_util.h"

#define LAYERS   12
#define SHAPES   5
#define MAX_REPS 64

static const struct shape {
    const char *name;
    size_t k, n;
    bool trans;
    int count; /* distinct weights of this shape */
} shapes[SHAPES] = {
    { "c_attn 768x2304", 768, 2304, false, LAYERS },
    { "attn.c_proj 768x768", 768, 768, false, LAYERS },
    { "c_fc 768x3072", 768, 3072, false, LAYERS },
    { "mlp.c_proj 3072x768", 3072, 768, false, LAYERS },
    { "head [50257,768]^T", 768, 50257, true, 1 },
};

enum { WAY_BLAS, WAY_ROWS_F32, WAY_ROWS_F16, WAY_ROWS_BF16, WAY_ROWS_Q8_0, WAY_ROWS_Q8A, WAYS };
static const char *const way_names[WAYS] = { "host BLAS", "rows f32",  "rows f16",
                                             "rows bf16", "rows q8_0", "q8_0 int8 A" };
/* bytes a weight of each way (Q8_0: 34 a block of 32) */
static const double way_bytes[WAYS] = { 4.0, 4.0, 2.0, 2.0, 34.0 / 32.0, 34.0 / 32.0 };

/* One product of m rows against weight w32 (w16, w16b, wq: as half, bfloat16, Q8_0) of shape
 * sh, the way w. */
static void product(const struct shape *sh, int w, size_t m, const float *w32, const uint16_t *w16,
                    const uint16_t *w16b, const pfx_q8_0_block *wq, const float *a, float *c,
                    int threads)
{
    const int k = (int)sh->k, n = (int)sh->n, ldb = sh->trans ? k : n;
    if (w == WAY_BLAS && m == 1)
        cblas_sgemv(CblasRowMajor, sh->trans ? CblasNoTrans : CblasTrans, sh->trans ? n : k,
                    sh->trans ? k : n, 1.0f, w32, ldb, a, 1, 0.0f, c, 1);
    else if (w == WAY_BLAS)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, sh->trans ? CblasTrans : CblasNoTrans, (int)m, n,
                    k, 1.0f, a, k, w32, ldb, 0.0f, c, n);
    else
        pfx_gemm_rows(&(pfx_gemm_rows_args){ .trans_b = sh->trans || w >= WAY_ROWS_Q8_0,
                                             .b_type = w == WAY_ROWS_F16    ? PFX_ROWS_F16
                                                       : w == WAY_ROWS_BF16 ? PFX_ROWS_BF16
                                                       : w >= WAY_ROWS_Q8_0 ? PFX_ROWS_Q8_0
                                                                            : PFX_ROWS_F32,
                                             .m = m,
                                             .n = sh->n,
                                             .k = sh->k,
                                             .alpha = 1.0f,
                                             .a = a,
                                             .lda = sh->k,
                                             .b = w == WAY_ROWS_F32    ? (const void *)w32
                                                  : w == WAY_ROWS_F16  ? (const void *)w16
                                                  : w == WAY_ROWS_BF16 ? (const void *)w16b
                                                                       : (const void *)wq,
                                             .ldb = w >= WAY_ROWS_Q8_0 ? sh->k : (size_t)ldb,
                                             .c = c,
                                             .ldc = sh->n,
                                             .a_q8 = w == WAY_ROWS_Q8A },
                      threads);
}

int main(int argc, char **argv)
{
    tool_openblas_settings(argv);
    size_t rows[8] = { 1, 2, 4, 8 }, nrows = 4;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
            nrows = 0;
            for (char *t = strtok(argv[++i], ","); t && nrows < 8; t = strtok(NULL, ","))
                rows[nrows++] = strtoul(t, NULL, 10);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--rows 1,2,4,8] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS)
        reps = 7;
    const int threads = openblas_get_num_threads();
    printf("few-row path: %s, int8 activations: %s, %d threads (OpenBLAS %s, %d threads)\n",
           pfx_gemm_rows_isa(), pfx_gemm_rows_q8a_isa(), threads, openblas_get_corename(), threads);
    float *w32[SHAPES][LAYERS];
    uint16_t *w16[SHAPES][LAYERS], *w16b[SHAPES][LAYERS];
    pfx_q8_0_block *wq[SHAPES][LAYERS];
    uint64_t seed = 7;
    for (int s = 0; s < SHAPES; s++)
        for (int l = 0; l < shapes[s].count; l++) {
            const size_t e = shapes[s].k * shapes[s].n;
            w32[s][l] = malloc(e * sizeof(float));
            w16[s][l] = malloc(e * sizeof(uint16_t));
            w16b[s][l] = malloc(e * sizeof(uint16_t));
            wq[s][l] = malloc(e / PFX_Q8_0_BLOCK * sizeof(pfx_q8_0_block));
            if (!w32[s][l] || !w16[s][l] || !w16b[s][l] || !wq[s][l])
                return 1;
            for (size_t i = 0; i < e; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                w32[s][l][i] = (float)((double)(seed >> 40) / (double)(1u << 24) - 0.5) * 0.1f;
                w16[s][l][i] = pfx_float_to_half(w32[s][l][i]);
                w16b[s][l][i] = pfx_float_to_bf16(w32[s][l][i]);
            }
            /* Q8_0 as the model holds it: [n, k], blocks along the reduction
             * (GPT-2's [k, n] Conv1D weights transposed at load) */
            float *t = malloc(e * sizeof(float));
            if (!t)
                return 1;
            const size_t rows = shapes[s].trans ? shapes[s].n : shapes[s].k, cols = e / rows;
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++)
                    t[shapes[s].trans ? r * cols + c : c * rows + r] = w32[s][l][r * cols + c];
            for (size_t b = 0; b < e / PFX_Q8_0_BLOCK; b++) /* every shape's rows: whole blocks */
                if (!pfx_q8_0_quantize(t + b * PFX_Q8_0_BLOCK, &wq[s][l][b]))
                    return 1;
            free(t);
        }
    double bytes = 0;
    for (int s = 0; s < SHAPES; s++)
        bytes += (double)shapes[s].k * (double)shapes[s].n * shapes[s].count * sizeof(float);
    read_bw bw;
    if (!read_bw_measure(0, 0, reps, &bw))
        return 1;
    const double floor_ms = bytes / bw.gbs / 1e6;
    printf("read bandwidth %.1f GB/s (read_bw.h: the best of %d passes over %.0f MB on %d "
           "threads); the %.1f MB of float32 weights read once at it: %.3f ms, the floor of a "
           "step (half, bfloat16: %.3f ms; Q8_0, 34 bytes a block of 32: %.3f ms)\n",
           bw.gbs, bw.passes, (double)bw.bytes / 1e6, bw.threads, bytes / 1e6, floor_ms,
           floor_ms / 2, floor_ms * 34.0 / 128.0);
    float *a = malloc(8 * 3072 * sizeof(float)), *c = malloc(8 * 50257 * sizeof(float));
    for (size_t i = 0; i < 8 * 3072; i++)
        a[i] = (float)(i % 17) * 0.01f;
    for (size_t r = 0; r < nrows; r++) {
        const size_t m = rows[r];
        if (m < 1 || m > PFX_GEMM_ROWS_MAX)
            continue;
        double step[WAYS] = { 0 }, step_best[WAYS] = { 0 };
        printf("\nm = %zu\n%-22s", m, "shape");
        for (int w = 0; w < WAYS; w++)
            printf(" | %-8s median GB/s     best GB/s", way_names[w]);
        printf("\n");
        for (int s = 0; s < SHAPES; s++) {
            const struct shape *sh = &shapes[s];
            double t[WAYS][MAX_REPS];
            /* the ways alternate within each repetition: the same load on each */
            for (int rep = 0; rep <= reps; rep++) /* rep 0 warms up */
                for (int w = 0; w < WAYS; w++) {
                    const double t0 = tool_now_s() * 1e3;
                    for (int l = 0; l < sh->count; l++)
                        product(sh, w, m, w32[s][l], w16[s][l], w16b[s][l], wq[s][l], a, c,
                                threads);
                    if (rep)
                        t[w][rep - 1] = tool_now_s() * 1e3 - t0;
                }
            printf("%-22s", sh->name);
            for (int w = 0; w < WAYS; w++) {
                const double bytes = (double)sh->k * (double)sh->n * sh->count * way_bytes[w];
                double best = t[w][0];
                for (int rep = 1; rep < reps; rep++)
                    best = t[w][rep] < best ? t[w][rep] : best;
                const double ms = tool_median(t[w], (size_t)reps);
                step[w] += ms;
                step_best[w] += best;
                printf(" | %8.3f %5.1f %8.3f %5.1f", ms, bytes / ms / 1e6, best,
                       bytes / best / 1e6);
            }
            printf("\n");
        }
        printf("%-22s", "step (sum)");
        for (int w = 0; w < WAYS; w++)
            printf(" | %8.3f %5s %8.3f %5s", step[w], "", step_best[w], "");
        printf("\n");
    }
    return 0;
}
