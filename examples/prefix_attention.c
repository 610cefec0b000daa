/* One prefix-attention call on the caller's own buffers: B=2 items, 4 query
 * heads on 2 key/value heads (GQA), 5 tokens, a prefix of 3 positions shared
 * by the batch, head size 8, causal, a linear gain per head. The output is
 * read back and checked against attention.h's formula written out in double.
 *
 * usage: prefix_attention [MAX_ERROR]   prints the relative error; exits 1
 * when it exceeds MAX_ERROR (the test suite gives the tests' bound for a
 * float32 attention forward, TOL_FWD_F32 of tests/tolerances.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "prefixcl/prefixcl.h"

enum { B = 2, H = 4, HKV = 2, N = 5, P = 3, D = 8 };
/* the caller's data: Q, K, V in the BHND layout, the prefix [HKV, P, D], the output */
static struct {
    float q[B][H][N][D], k[B][HKV][N][D], v[B][HKV][N][D], pk[HKV][P][D], pv[HKV][P][D];
} x;
static float o[B][H][N][D];
static const float gain[H] = { 0.5f, -0.25f, 0.0f, 1.0f };

/* ||O - ref|| / ||ref||: ref_i = sum_j softmax_j(c_h q_i . k~_j) v~_j over the
 * prefix and the tokens t <= i, c_h = (1 + g_h) / sqrt(D). */
static double relative_error(void)
{
    double err = 0.0, norm = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < N; i++) {
                const int g = h / (H / HKV), n = P + i + 1; /* its key/value head, visible keys */
                double w[P + N], m = -INFINITY, sum = 0.0, dot;
                for (int j = 0; j < n; j++) {
                    const float *key = j < P ? x.pk[g][j] : x.k[b][g][j - P];
                    dot = 0.0;
                    for (int d = 0; d < D; d++)
                        dot += (double)x.q[b][h][i][d] * key[d];
                    m = fmax(m, w[j] = (1.0 + gain[h]) / sqrt(D) * dot);
                }
                for (int j = 0; j < n; j++)
                    sum += (w[j] = exp(w[j] - m));
                for (int d = 0; d < D; d++) {
                    double ref = 0.0;
                    for (int j = 0; j < n; j++)
                        ref += w[j] / sum * (j < P ? x.pv[g][j][d] : x.v[b][g][j - P][d]);
                    err += (ref - o[b][h][i][d]) * (ref - o[b][h][i][d]);
                    norm += ref * ref;
                }
            }
    return sqrt(err / norm);
}

int main(int argc, char **argv)
{
    const double max_error = argc > 1 ? strtod(argv[1], NULL) : INFINITY;
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, NULL)) { /* the default device ($PREFIXCL_DEVICE first) */
        fprintf(stderr, "runtime: %s\n", pfx_last_error(NULL));
        return 1;
    }
    float *all = &x.q[0][0][0][0]; /* any values but zeros */
    for (size_t i = 0; i < sizeof(x) / sizeof(float); i++)
        all[i] = sinf(0.37f * (float)i + 0.5f);
    /* device tensors: Q, K, V, prefix K, prefix V, then O and LSE [B, H, N] */
    const size_t shape[7][4] = { { B, H, N, D }, { B, HKV, N, D }, { B, HKV, N, D }, { HKV, P, D },
                                 { HKV, P, D },  { B, H, N, D },   { B, H, N } };
    const void *data[5] = { x.q, x.k, x.v, x.pk, x.pv };
    pfx_tensor *t[7] = { NULL };
    pfx_status st = PFX_SUCCESS;
    for (int i = 0; i < 7 && !st; i++) {
        const size_t ndim = shape[i][3] ? 4 : 3; /* a fourth size of 0: three dimensions */
        st = pfx_tensor_create(rt, PFX_DTYPE_F32, ndim, shape[i], &t[i]);
        if (!st && i < 5)
            st = pfx_tensor_write(t[i], 0, pfx_tensor_numel(t[i]), data[i]);
    }
    pfx_attention_desc d; /* what the call computes: shapes, mask, gain */
    pfx_attention_desc_init(&d);
    d.batch = B, d.heads = H, d.kv_heads = HKV, d.queries = d.keys = N, d.prefix_len = P;
    d.head_dim = D, d.causal = true, d.gain_mode = PFX_GAIN_LINEAR, d.gain = gain;
    pfx_attention_inputs in = { t[0], t[1], t[2], t[3], t[4] };
    if (!st && !(st = pfx_attention_forward(rt, &d, &in, t[5], t[6])))
        st = pfx_tensor_read(t[5], 0, B * H * N * D, &o[0][0][0][0]);
    const double err = st ? NAN : relative_error();
    if (st)
        fprintf(stderr, "attention: %s (%s)\n", pfx_status_string(st), pfx_last_error(rt));
    else
        printf("relative error of O against double: %.2e\n", err);
    for (int i = 0; i < 7; i++)
        pfx_tensor_destroy(&t[i]);
    pfx_runtime_destroy(&rt);
    return !st && err <= max_error ? 0 : 1;
}
