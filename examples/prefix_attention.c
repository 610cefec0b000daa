/* One prefix-attention call on the caller's own buffers: B=2 items, 4 query
 * heads on 2 key/value heads (GQA), 5 tokens, a prefix of 3 positions
 * shared by the batch, head size 8, causal, a linear gain per head; the
 * output read back.
 */
#include <math.h>
#include <stdio.h>

#include "prefixcl/prefixcl.h"

enum { B = 2, H = 4, HKV = 2, N = 5, P = 3, D = 8 };

int main(void)
{
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, NULL)) {
        fprintf(stderr, "runtime: %s\n", pfx_last_error(NULL));
        return 1;
    }
    /* the caller's data, BHND: Q [B, H, N, D], K and V [B, HKV, N, D], the prefix [HKV, P, D] */
    static float q[B * H * N * D], k[B * HKV * N * D], v[B * HKV * N * D], pk[HKV * P * D], pv[HKV * P * D];
    static float o[B * H * N * D];
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
        q[i] = sinf(0.37f * (float)i);
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        k[i] = cosf(0.21f * (float)i);
        v[i] = sinf(0.11f * (float)i + 1.0f);
    }
    for (size_t i = 0; i < sizeof(pk) / sizeof(pk[0]); i++) {
        pk[i] = cosf(0.5f * (float)i);
        pv[i] = 0.1f * (float)(i % 7);
    }
    const size_t qs[4] = { B, H, N, D }, kvs[4] = { B, HKV, N, D }, ps[3] = { HKV, P, D }, ls[3] = { B, H, N };
    pfx_tensor *tq = NULL, *tk = NULL, *tv = NULL, *tpk = NULL, *tpv = NULL, *to = NULL, *tlse = NULL;
    pfx_status st;
    if ((st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &tq)) || (st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, kvs, &tk)) ||
        (st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, kvs, &tv)) || (st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &tpk)) ||
        (st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ps, &tpv)) || (st = pfx_tensor_create(rt, PFX_DTYPE_F32, 4, qs, &to)) ||
        (st = pfx_tensor_create(rt, PFX_DTYPE_F32, 3, ls, &tlse)) ||
        (st = pfx_tensor_write(tq, 0, sizeof(q) / sizeof(q[0]), q)) ||
        (st = pfx_tensor_write(tk, 0, sizeof(k) / sizeof(k[0]), k)) ||
        (st = pfx_tensor_write(tv, 0, sizeof(v) / sizeof(v[0]), v)) ||
        (st = pfx_tensor_write(tpk, 0, sizeof(pk) / sizeof(pk[0]), pk)) ||
        (st = pfx_tensor_write(tpv, 0, sizeof(pv) / sizeof(pv[0]), pv))) {
        fprintf(stderr, "tensors: %s\n", pfx_last_error(rt));
        return 1;
    }
    const float gain[H] = { 0.5f, -0.25f, 0.0f, 1.0f };
    pfx_attention_desc d;
    pfx_attention_desc_init(&d);
    d.batch = B;
    d.heads = H;
    d.kv_heads = HKV;
    d.queries = d.keys = N;
    d.prefix_len = P;
    d.head_dim = D;
    d.causal = true;
    d.gain_mode = PFX_GAIN_LINEAR;
    d.gain = gain;
    d.gain_ramp = 1.0f;
    pfx_attention_inputs in = { tq, tk, tv, tpk, tpv };
    if ((st = pfx_attention_forward(rt, &d, &in, to, tlse)) || (st = pfx_tensor_read(to, 0, B * H * N * D, o))) {
        fprintf(stderr, "attention: %s (%s)\n", pfx_status_string(st), pfx_last_error(rt));
        return 1;
    }
    printf("O[0, 0, 0, 0..3] = %.6f %.6f %.6f %.6f\n", (double)o[0], (double)o[1], (double)o[2], (double)o[3]);
    pfx_tensor_destroy(&tq);
    pfx_tensor_destroy(&tk);
    pfx_tensor_destroy(&tv);
    pfx_tensor_destroy(&tpk);
    pfx_tensor_destroy(&tpv);
    pfx_tensor_destroy(&to);
    pfx_tensor_destroy(&tlse);
    pfx_runtime_destroy(&rt);
    return 0;
}
