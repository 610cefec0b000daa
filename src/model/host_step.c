/* The decode step on the host (serve_internal.h pfx_host_step_run): on a CPU
 * device whose buffers are host memory, a decode step's 100 small kernels
 * and 49 products on the queue cost a round trip between the queue's
 * threads and the host around each product (11-13 ms of a 28-32 ms GPT-2
 * small step on 2 cores). Here the step waits once for the queue and runs
 * on the host, through each buffer's own storage: its address is found by
 * one map of every buffer the first time (kept in the tensor; such a
 * device's map returns that same address each time and shows the device's
 * writes, tests/test_encoder.c), since mapping and unmapping the 173
 * buffers of GPT-2 small every step cost the queue's threads 346 commands
 * a step. The math is the queue path's: the few-row kernels for the
 * products (gemm_rows.h), float32 elsewhere, sums of norms in double. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "gemm.h"
#include "gemm_rows.h"
#include "half.h"
#include "q8_0.h"
#include "serve_internal.h"

#define FN "serve_step (host)"

/* ---- the buffers of a step: their host addresses ---- */

typedef struct hbuf {
    cl_mem mem;
    size_t bytes;
    char *ptr;
} hbuf;

/* The tensors whose address is not known yet, and their distinct buffers. */
typedef struct hmaps {
    hbuf *b;
    size_t n, cap;
    const pfx_tensor **t;
    size_t nt, tcap;
} hmaps;

static bool grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    const size_t c = *cap ? 2 * *cap : 256;
    void *q = realloc(*p, c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* t joins the tensors to map unless its address is known. */
static bool add(hmaps *h, const pfx_tensor *t)
{
    if (!t || t->host)
        return true;
    if (!grow((void **)&h->t, &h->tcap, h->nt, sizeof(*h->t)))
        return false;
    h->t[h->nt++] = t;
    for (size_t i = 0; i < h->n; i++)
        if (h->b[i].mem == t->mem)
            return true;
    if (!grow((void **)&h->b, &h->cap, h->n, sizeof(*h->b)))
        return false;
    h->b[h->n++] = (hbuf){ t->mem, t->bytes, NULL };
    return true;
}

static void hmaps_free(hmaps *h)
{
    free(h->b);
    free(h->t);
}

static int by_mem(const void *a, const void *b)
{
    const uintptr_t x = (uintptr_t)((const hbuf *)a)->mem, y = (uintptr_t)((const hbuf *)b)->mem;
    return x < y ? -1 : x > y;
}

/* The host address of tensor t's element 0 (found by find_addresses). */
static void *at(const pfx_tensor *t)
{
    return t->host;
}

static float *atf(const pfx_tensor *t)
{
    return t->host;
}

static cl_int unmap_all(pfx_runtime *rt, hmaps *h)
{
    cl_int first = CL_SUCCESS;
    for (size_t i = 0; i < h->n; i++) {
        if (!h->b[i].ptr)
            continue;
        cl_int err = clEnqueueUnmapMemObject(rt->queue, h->b[i].mem, h->b[i].ptr, 0, NULL, NULL);
        h->b[i].ptr = NULL;
        if (first == CL_SUCCESS)
            first = err;
    }
    return first;
}

/* Maps the buffers of the tensors in h without blocking, waits once for the
 * last map, keeps each tensor's address (the field is a cache: the tensor is
 * otherwise untouched) and unmaps them. */
static pfx_status find_addresses(pfx_runtime *rt, hmaps *h)
{
    if (!h->n)
        return PFX_SUCCESS;
    qsort(h->b, h->n, sizeof(hbuf), by_mem);
    cl_event last = NULL;
    cl_int err = CL_SUCCESS;
    for (size_t i = 0; i < h->n && err == CL_SUCCESS; i++) {
        cl_event ev = NULL;
        h->b[i].ptr = clEnqueueMapBuffer(rt->queue, h->b[i].mem, CL_FALSE, CL_MAP_READ, 0,
                                         h->b[i].bytes, 0, NULL, &ev, &err);
        if (err != CL_SUCCESS) {
            h->b[i].ptr = NULL;
            break;
        }
        if (last)
            clReleaseEvent(last);
        last = ev;
    }
    cl_int werr = last ? clWaitForEvents(1, &last) : CL_SUCCESS;
    if (last)
        clReleaseEvent(last);
    if (err == CL_SUCCESS)
        err = werr;
    for (size_t i = 0; err == CL_SUCCESS && i < h->nt; i++) {
        const hbuf key = { .mem = h->t[i]->mem };
        const hbuf *f = bsearch(&key, h->b, h->n, sizeof(hbuf), by_mem);
        ((pfx_tensor *)h->t[i])->host = f->ptr;
    }
    const cl_int uerr = unmap_all(rt, h);
    if (err == CL_SUCCESS)
        err = uerr;
    return err == CL_SUCCESS ? PFX_SUCCESS
                             : pfx_cl_error(rt, err, FN ": finding the step's buffers");
}

/* ---- the pieces of the step ---- */

/* n elements of a weight from element e0 as float32 into dst. */
static void widen(const void *src, pfx_dtype dt, size_t e0, size_t n, float *dst)
{
    if (dt == PFX_DTYPE_F32) {
        memcpy(dst, (const float *)src + e0, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = dt == PFX_DTYPE_Q8_0
                     ? pfx_q8_0_at(src, e0 + i)
                     : pfx_16bit_to_float(((const uint16_t *)src)[e0 + i], dt == PFX_DTYPE_BF16);
}

/* A vector view (bias, norm weight: n x 1, contiguous) as float32 in dst. */
static void vec_of(const pfx_mat *v, float *dst)
{
    widen(at(v->t), v->t->dtype, v->offset, v->rows * v->cols, dst);
}

static pfx_gemm_rows_type rows_type(pfx_dtype dt)
{
    return dt == PFX_DTYPE_F16    ? PFX_ROWS_F16
           : dt == PFX_DTYPE_BF16 ? PFX_ROWS_BF16
           : dt == PFX_DTYPE_Q8_0 ? PFX_ROWS_Q8_0
                                  : PFX_ROWS_F32;
}

typedef struct hstep {
    pfx_runtime *rt;
    const pfx_model *m;
    const pfx_serve_plan *p;
    hmaps maps;
    size_t B, C, I, H, Hkv, D, QD, KVD;
    float *x, *ln, *qkv, *o, *a, *m0, *m1, *vec, *vec2, *z;
} hstep;

/* y[B, f->out] = x[B, f->in] op(W) (+ b) (+ y where beta is 1). */
static void product(hstep *s, const pfx_model_lin *f, const float *x, float *y, float beta)
{
    const uint64_t t0 = pfx_host_ns();
    const pfx_mat *w = &f->w;
    const pfx_dtype dt = w->t->dtype;
    const size_t ldw = w->rows > 1 ? w->ld : w->cols;
    const char *base = at(w->t);
    const size_t byte = dt == PFX_DTYPE_Q8_0  ? w->offset / PFX_Q8_0_BLOCK * PFX_Q8_0_BYTES
                        : dt == PFX_DTYPE_F32 ? w->offset * sizeof(float)
                                              : w->offset * sizeof(uint16_t);
    pfx_gemm_host_rows(&(pfx_gemm_rows_args){ .trans_b = f->trans,
                                              .b_type = rows_type(dt),
                                              .m = s->B,
                                              .n = f->out,
                                              .k = f->in,
                                              .alpha = 1.0f,
                                              .beta = beta,
                                              .a = x,
                                              .lda = f->in,
                                              .b = base + byte,
                                              .ldb = ldw,
                                              .c = y,
                                              .ldc = f->out,
                                              .a_q8 = dt == PFX_DTYPE_Q8_0 });
    pfx_launch_log_host_gemm(s->rt, pfx_host_ns() - t0);
    if (!f->has_b)
        return;
    vec_of(&f->b, s->vec);
    for (size_t r = 0; r < s->B; r++)
        for (size_t j = 0; j < f->out; j++)
            y[r * f->out + j] += s->vec[j];
}

/* ln = norm(x) with weight w (and bias b: LayerNorm; none: RMSNorm). */
static void norm(hstep *s, const pfx_tensor *w, const pfx_tensor *b, const float *x, float *y)
{
    const size_t C = s->C;
    const float eps = (float)s->m->cfg.norm_eps;
    const pfx_mat wv = PFX_VEC(w, 0, C);
    vec_of(&wv, s->vec);
    if (b) {
        const pfx_mat bv = PFX_VEC(b, 0, C);
        vec_of(&bv, s->vec2);
    }
    for (size_t r = 0; r < s->B; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        double mean = 0.0, sq = 0.0;
        if (b) {
            for (size_t i = 0; i < C; i++)
                mean += xr[i];
            mean /= (double)C;
        }
        for (size_t i = 0; i < C; i++)
            sq += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        const float mu = (float)mean, rstd = (float)(1.0 / sqrt(sq / (double)C + eps));
        for (size_t i = 0; i < C; i++)
            yr[i] = (xr[i] - mu) * rstd * s->vec[i] + (b ? s->vec2[i] : 0.0f);
    }
}

static float act(pfx_activation a, float u)
{
    switch (a) {
    case PFX_ACT_GELU_TANH:
        return 0.5f * u * (1.0f + tanhf(0.7978845608028654f * (u + 0.044715f * u * u * u)));
    case PFX_ACT_GELU: return 0.5f * u * (1.0f + erff(u * 0.7071067811865476f));
    case PFX_ACT_RELU: return u > 0.0f ? u : 0.0f;
    default: return u / (1.0f + expf(-u));
    }
}

/* RoPE (HF's rotate-half) of n heads of row x at position pos, the angle a
 * float32 product as the kernel forms it. */
static void rope_row(hstep *s, float *x, size_t heads, size_t pos)
{
    const size_t half = s->D / 2;
    const float *freq = atf(s->m->inv_freq);
    for (size_t d = 0; d < half; d++) {
        const float a = (float)pos * freq[d], c = cosf(a), sn = sinf(a);
        for (size_t h = 0; h < heads; h++) {
            float *q = x + h * s->D + d;
            const float x1 = q[0], x2 = q[half];
            q[0] = x1 * c - x2 * sn;
            q[half] = x2 * c + x1 * sn;
        }
    }
}

/* gamma of the gain modes (attention_problem.c's). */
static double gamma_of(pfx_gain_mode mode, double x)
{
    return mode == PFX_GAIN_LINEAR ? 1 + x : mode == PFX_GAIN_TANH ? 1 + tanh(x) : 1;
}

/* a . b over n floats in 8 independent sums, which the compiler keeps in
 * vector registers (one running sum serializes every add: a batch-8 GPT-2
 * small step's attention is some 22 M multiply-adds). */
static float dot(const float *a, const float *b, size_t n)
{
    float acc[8] = { 0 };
    size_t d = 0;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += a[d + (size_t)l] * b[d + (size_t)l];
    float s = 0.0f;
    for (; d < n; d++)
        s += a[d] * b[d];
    for (int l = 0; l < 8; l++)
        s += acc[l];
    return s;
}

/* Rows a half or bfloat16 cache widens at a time, and their floats at most
 * (on the stack): 64 rows of a head of 64 or less, 16 of the largest (512). */
#define CACHE_CHUNK_ROWS   64
#define CACHE_CHUNK_FLOATS 8192

/* Rows [j, j + n) (n D <= CACHE_CHUNK_FLOATS) of kv head hk of slot b in a cache
 * tensor t as float32 rows, *ld apart: read in place from a float32 cache,
 * widened into buf [n, D] from half or bfloat16. */
static const float *cache_rows(const hstep *s, const pfx_kv_cache *c, const pfx_tensor *t, size_t b,
                               size_t hk, size_t j, size_t n, float *buf, size_t *ld)
{
    const size_t e0 = (b * c->max_len + j) * s->KVD + hk * s->D;
    if (c->dtype == PFX_DTYPE_F32) {
        *ld = s->KVD;
        return atf(t) + e0;
    }
    /* one thread: this runs on a thread of the products' team already */
    pfx_gemm_rows_widen(&(pfx_gemm_rows_widen_args){ .type = rows_type(c->dtype),
                                                     .rows = n,
                                                     .cols = s->D,
                                                     .src = at(t),
                                                     .src_offset = e0,
                                                     .ld_src = s->KVD,
                                                     .dst = buf,
                                                     .ld_dst = s->D },
                        1);
    *ld = s->D;
    return buf;
}

/* One query row of slot b, head h, against the slot's prefix (bank entry)
 * and its kv_len cached rows of layer l: o = softmax(c q'.k) v. */
static void attend_head(const hstep *s, const pfx_kv_cache *c, const pfx_adapter_bank *bank,
                        size_t l, size_t b, size_t h, const float *q, float *o, float *z)
{
    const pfx_serve_plan *p = s->p;
    const size_t D = s->D, hk = h / (s->H / s->Hkv);
    const int32_t e = p->entry[b];
    const size_t P = p->any_prefix && e >= 0 ? bank->P : 0, n = (size_t)p->kv_lens[b];
    /* the logit factor and the structured gain of this item's head */
    pfx_gain_mode mode = p->item_mode ? p->item_mode[b] : p->gain_mode;
    const float *g =
        p->item_mode
            ? (e >= 0 ? bank->gains + ((size_t)e * s->m->cfg.shape.layers + l) * s->H : NULL)
            : (p->gains ? p->gains + l * s->H : NULL);
    const float *G = p->item_mode ? pfx_bank_dim_gains(bank, e) : p->dim_gains;
    const float scale =
        s->m->cfg.attn_scale > 0 ? s->m->cfg.attn_scale : (float)(1.0 / sqrt((double)D));
    const float ch = (float)(scale * gamma_of(g ? mode : PFX_GAIN_OFF, g ? (double)g[h] : 0.0));
    float qs[512];
    for (size_t d = 0; d < D; d++)
        qs[d] = ch * q[d] * (G ? 1.0f + G[(l * s->H + h) * D + d] : 1.0f);
    const float *pk = P ? atf(bank->keys[l]) + (((size_t)e * s->Hkv + hk) * P) * D : NULL;
    const float *pv = P ? atf(bank->values[l]) + (((size_t)e * s->Hkv + hk) * P) * D : NULL;
    float buf[CACHE_CHUNK_FLOATS];
    const size_t chunk =
        CACHE_CHUNK_FLOATS / D < CACHE_CHUNK_ROWS ? CACHE_CHUNK_FLOATS / D : CACHE_CHUNK_ROWS;
    size_t ld;
    float mx = -INFINITY;
    for (size_t j = 0; j < P; j++) {
        z[j] = dot(qs, pk + j * D, D);
        mx = z[j] > mx ? z[j] : mx;
    }
    for (size_t j0 = 0; j0 < n; j0 += chunk) {
        const size_t m = n - j0 < chunk ? n - j0 : chunk;
        const float *k = cache_rows(s, c, c->keys[l], b, hk, j0, m, buf, &ld);
        for (size_t j = 0; j < m; j++) {
            float *zj = z + P + j0 + j;
            *zj = dot(qs, k + j * ld, D);
            mx = *zj > mx ? *zj : mx;
        }
    }
    float sum = 0.0f;
    for (size_t j = 0; j < P + n; j++) {
        z[j] = expf(z[j] - mx);
        sum += z[j];
    }
    for (size_t d = 0; d < D; d++)
        o[d] = 0.0f;
    for (size_t j = 0; j < P; j++) {
        const float w = z[j] / sum;
        for (size_t d = 0; d < D; d++)
            o[d] += w * pv[j * D + d];
    }
    for (size_t j0 = 0; j0 < n; j0 += chunk) {
        const size_t m = n - j0 < chunk ? n - j0 : chunk;
        const float *v = cache_rows(s, c, c->values[l], b, hk, j0, m, buf, &ld);
        for (size_t j = 0; j < m; j++) {
            const float w = z[P + j0 + j] / sum;
            for (size_t d = 0; d < D; d++)
                o[d] += w * v[j * ld + d];
        }
    }
}

/* A new row of n floats into a cache tensor at element e0: copied, or
 * rounded to nearest even into half or bfloat16. */
static void cache_put(const pfx_kv_cache *c, const pfx_tensor *t, size_t e0, const float *x,
                      size_t n)
{
    if (c->dtype == PFX_DTYPE_F32) {
        memcpy(atf(t) + e0, x, n * sizeof(float));
        return;
    }
    uint16_t *dst = (uint16_t *)at(t) + e0;
    for (size_t i = 0; i < n; i++)
        dst[i] = pfx_float_to_16bit(x[i], c->dtype == PFX_DTYPE_BF16);
}

typedef struct attend_ctx {
    const hstep *s;
    const pfx_kv_cache *c;
    const pfx_adapter_bank *bank;
    size_t l;
} attend_ctx;

/* Heads [i0, i1) of the step (slot i / H, head i % H), each with its own
 * row of logits in s->z. */
static void attend_range(void *ctx, size_t i0, size_t i1)
{
    const attend_ctx *a = ctx;
    const hstep *s = a->s;
    const size_t W = s->QD + 2 * s->KVD;
    const size_t keys = (s->p->any_prefix ? a->bank->P : 0) + a->c->max_len;
    for (size_t i = i0; i < i1; i++) {
        const size_t b = i / s->H, h = i % s->H;
        if (s->p->lens[b]) /* an idle slot's output is zeros (layer) */
            attend_head(s, a->c, a->bank, a->l, b, h, s->qkv + b * W + h * s->D,
                        s->o + b * s->QD + h * s->D, s->z + i * keys);
    }
}

/* Layer l: h = h + attention(norm1(h)); h = h + mlp(norm2(h)). */
static void layer(hstep *s, pfx_kv_cache *c, const pfx_adapter_bank *bank, size_t l)
{
    const pfx_model *m = s->m;
    const pfx_serve_plan *p = s->p;
    const bool llama = m->cfg.family == PFX_FAMILY_LLAMA;
    const size_t B = s->B, C = s->C, W = s->QD + 2 * s->KVD;
    const pfx_model_lin qkv = pfx_model_get_lin(m, l, L_QKV);
    norm(s, pfx_model_w(m, l, PFX_W_NORM1), llama ? NULL : pfx_model_w(m, l, PFX_W_NORM1_B), s->x,
         s->ln);
    product(s, &qkv, s->ln, s->qkv, 0.0f);
    for (size_t b = 0; b < B; b++) {
        float *q = s->qkv + b * W, *k = q + s->QD, *v = k + s->KVD, *o = s->o + b * s->QD;
        if (!p->lens[b]) { /* an idle slot: no query (the queue path's q_lens 0) */
            memset(o, 0, s->QD * sizeof(float));
            continue;
        }
        if (llama) {
            rope_row(s, q, s->H, (size_t)p->pos0[b]);
            rope_row(s, k, s->Hkv, (size_t)p->pos0[b]);
        }
        /* the new row goes in first: the query attends to it too */
        const size_t row = (b * c->max_len + c->len[b]) * s->KVD;
        cache_put(c, c->keys[l], row, k, s->KVD);
        cache_put(c, c->values[l], row, v, s->KVD);
        c->rows_written++;
    }
    /* the heads of every slot, on the products' threads */
    attend_ctx ac = { s, c, bank, l };
    pfx_gemm_rows_parallel(B * s->H, pfx_gemm_host_threads(), attend_range, &ac);
    memcpy(s->a, s->x, B * C * sizeof(float));
    const pfx_model_lin o = pfx_model_get_lin(m, l, L_O), up = pfx_model_get_lin(m, l, L_UP),
                        down = pfx_model_get_lin(m, l, L_DOWN);
    product(s, &o, s->o, s->a, 1.0f);
    norm(s, pfx_model_w(m, l, PFX_W_NORM2), llama ? NULL : pfx_model_w(m, l, PFX_W_NORM2_B), s->a,
         s->ln);
    const size_t BI = B * s->I;
    if (llama) {
        const pfx_model_lin gate = pfx_model_get_lin(m, l, L_GATE);
        product(s, &gate, s->ln, s->m0, 0.0f);
        product(s, &up, s->ln, s->m1, 0.0f);
        for (size_t i = 0; i < BI; i++)
            s->m1[i] *= act(PFX_ACT_SILU, s->m0[i]);
    } else {
        product(s, &up, s->ln, s->m0, 0.0f);
        for (size_t i = 0; i < BI; i++)
            s->m1[i] = act(m->cfg.act, s->m0[i]);
    }
    memcpy(s->x, s->a, B * C * sizeof(float));
    product(s, &down, s->m1, s->x, 1.0f);
}

/* x = wte[ids] (+ wpe[pos0]). */
static void embed(hstep *s, const pfx_serve_step *st)
{
    const pfx_model *m = s->m;
    const pfx_tensor *wte = m->global[PFX_W_EMBED], *wpe = m->global[PFX_W_POS];
    for (size_t b = 0; b < s->B; b++) {
        float *x = s->x + b * s->C;
        widen(at(wte), wte->dtype, (size_t)st->ids[b] * s->C, s->C, x);
        if (!wpe)
            continue;
        widen(at(wpe), wpe->dtype, (size_t)s->p->pos0[b] * s->C, s->C, s->vec);
        for (size_t i = 0; i < s->C; i++)
            x[i] += s->vec[i];
    }
}

bool pfx_host_step_applies(const pfx_context *cx, const pfx_adapter_bank *bank,
                           const pfx_serve_plan *p)
{
    const pfx_model *m = cx->model;
    if (m->rt->gemm != PFX_GEMM_HOST || p->prefill || p->extend || p->N != 1 ||
        p->B > PFX_GEMM_ROWS_MAX || m->cfg.shape.head_dim > 512 || m->cfg.shape.vocab > INT_MAX ||
        m->cfg.shape.intermediate > INT_MAX || !pfx_gemm_rows_enabled())
        return false;
    if (p->any_prefix && bank->keys[0]->dtype != PFX_DTYPE_F32)
        return false;
    const char *v = getenv("PREFIXCL_HOST_STEP");
    return !v || strcmp(v, "off") != 0;
}

static bool add_model(hmaps *h, const pfx_model *m)
{
    bool ok = true;
    for (size_t i = 0; i < PFX_W_FIRST_LAYER_ROLE; i++)
        ok = ok && add(h, m->global[i]);
    const size_t per = PFX_W_ROLE_COUNT - PFX_W_FIRST_LAYER_ROLE;
    for (size_t i = 0; i < m->cfg.shape.layers * per; i++)
        ok = ok && add(h, m->layer_w[i]);
    return ok && add(h, m->inv_freq);
}

pfx_status pfx_host_step_run(pfx_context *cx, pfx_kv_cache *c, const pfx_adapter_bank *bank,
                             const pfx_serve_step *st, const pfx_serve_plan *p,
                             const pfx_tensor *logits)
{
    const pfx_model *m = cx->model;
    const pfx_model_shape *sh = &m->cfg.shape;
    hstep s = { .rt = m->rt,
                .m = m,
                .p = p,
                .B = p->B,
                .C = sh->hidden,
                .I = sh->intermediate,
                .H = sh->heads,
                .Hkv = sh->kv_heads,
                .D = sh->head_dim,
                .QD = sh->heads * sh->head_dim,
                .KVD = sh->kv_heads * sh->head_dim };
    const size_t B = s.B, W = s.QD + 2 * s.KVD, wide = s.I > s.C ? s.I : s.C;
    const size_t P = p->any_prefix ? bank->P : 0;
    float *buf = malloc((B * (3 * s.C + W + s.QD + 2 * s.I + s.H * (P + c->max_len)) + 2 * wide) *
                        sizeof(float));
    bool ok = buf && add_model(&s.maps, m) && add(&s.maps, logits);
    for (size_t l = 0; ok && l < sh->layers; l++)
        ok = add(&s.maps, c->keys[l]) && add(&s.maps, c->values[l]) &&
             (!P || (add(&s.maps, bank->keys[l]) && add(&s.maps, bank->values[l])));
    if (!ok) {
        free(buf);
        hmaps_free(&s.maps);
        return pfx_error(m->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory", FN);
    }
    s.x = buf;
    s.ln = s.x + B * s.C;
    s.a = s.ln + B * s.C;
    s.qkv = s.a + B * s.C;
    s.o = s.qkv + B * W;
    s.m0 = s.o + B * s.QD;
    s.m1 = s.m0 + B * s.I;
    s.vec = s.m1 + B * s.I;
    s.vec2 = s.vec + wide;
    s.z = s.vec2 + wide;
    /* one thread at a time on the runtime, as every op (guard.c) */
    pfx_status e = pfx_rt_enter(m->rt, FN);
    if (e != PFX_SUCCESS) {
        free(buf);
        hmaps_free(&s.maps);
        return e;
    }
    /* the addresses of buffers new to the host step, then one wait: the
     * in-order queue has finished everything before the step */
    e = find_addresses(m->rt, &s.maps);
    if (e == PFX_SUCCESS) {
        const cl_int err = clFinish(m->rt->queue);
        if (err != CL_SUCCESS)
            e = pfx_cl_error(m->rt, err, FN ": waiting for the queue");
    }
    if (e == PFX_SUCCESS) {
        embed(&s, st);
        for (size_t l = 0; l < sh->layers; l++)
            layer(&s, c, bank, l);
        const bool llama = m->cfg.family == PFX_FAMILY_LLAMA;
        norm(&s, m->global[PFX_W_NORM_F], llama ? NULL : m->global[PFX_W_NORM_F_B], s.x, s.ln);
        const pfx_model_lin head = pfx_model_head_lin(m);
        product(&s, &head, s.ln, atf(logits), 0.0f);
    }
    pfx_rt_leave(m->rt);
    free(buf);
    hmaps_free(&s.maps);
    return e;
}
