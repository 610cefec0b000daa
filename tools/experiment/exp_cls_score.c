/* The classification's held-out scores (exp_classify.h): each label's
 * log-likelihood after a prompt, for every label, without running the
 * prompt once per label.
 *
 * The prompts go through the model once, several at a time, as a serving
 * prefill (pfx_serve_step_run with the tuned prefix): it leaves each
 * prompt's keys and values in a KV cache and gives the next-token
 * distribution after it (the labels' first tokens). Then, per prompt, the
 * tuned prefix and the prompt's cached keys and values together become the
 * prefix of a second call whose rows are the labels' proper prefixes
 * (classify.h): a row's tokens sit where they would after the prompt
 * (position P + prompt + t) and attend to the same keys and values, so they
 * compute what the whole sequence computes, for a few tokens a row. The
 * rows go in two calls, the shorter and the longer ones, each padded to its
 * own longest (the split that pads least). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "exp_classify.h"

#define PREFILL_SLOTS 16 /* prompts a prefill */

typedef struct scorer {
    exp_state *s;
    const cls_data *x;
    size_t L, H, D, P, V, rows;
    size_t *order; /* [rows]: the context of each row, shortest first */
    size_t cut;    /* rows 0 .. cut - 1 in the first call, the others in the second */
    size_t tok[2]; /* each call's tokens a row */
    pfx_model *m;
    pfx_context *fill, *tail; /* the prefills; the label rows */
    pfx_kv_cache *cache;
    pfx_adapter_bank *bank;
    int32_t entry;
    float *pk, *pv;      /* [L][H * P * D]: the tuned prefix */
    float *ck, *cv;      /* [PREFILL_SLOTS * prompt * H * D]: one layer of the cache */
    float *hk, *hv;      /* [L][H * (P + prompt) * D]: one example's whole prefix */
    pfx_tensor *next[2]; /* each call's logits [its rows, V] */
    int32_t *ids, *lens; /* the rows: the first call's [cut * tok[0]], then the second's */
    float *tmp;          /* [rows * V]: the rows' logits in row order */
    float *lp;           /* [count * V]: every context's log-probabilities, one example */
    float *first;        /* [PREFILL_SLOTS * V] */
} scorer;

static void scorer_free(scorer *q)
{
    pfx_tensor_destroy(&q->next[0]);
    pfx_tensor_destroy(&q->next[1]);
    free(q->order);
    free(q->tmp);
    pfx_kv_cache_destroy(&q->cache);
    pfx_adapter_bank_destroy(&q->bank);
    pfx_context_destroy(&q->fill);
    pfx_context_destroy(&q->tail);
    pfx_model_destroy(&q->m);
    free(q->pk);
    free(q->pv);
    free(q->ck);
    free(q->cv);
    free(q->hk);
    free(q->hv);
    free(q->ids);
    free(q->lens);
    free(q->lp);
    free(q->first);
}

/* The rows in order of length and the split of them that pads least. */
static int rows_split(scorer *q)
{
    const classify_contexts *c = &q->x->c;
    if (!(q->order = malloc((q->rows ? q->rows : 1) * sizeof(size_t))))
        return -1;
    for (size_t r = 0; r < q->rows; r++) { /* insertion: a few dozen rows */
        size_t i = r;
        for (; i > 0 && c->ctx_len[q->order[i - 1]] > c->ctx_len[r + 1]; i--)
            q->order[i] = q->order[i - 1];
        q->order[i] = r + 1;
    }
    const size_t longest = q->rows ? c->ctx_len[q->order[q->rows - 1]] : 1;
    size_t best = SIZE_MAX;
    q->cut = q->rows;
    for (size_t k = 1; k <= q->rows; k++) {
        const size_t padded = k * c->ctx_len[q->order[k - 1]] + (q->rows - k) * longest;
        if (padded < best) {
            best = padded;
            q->cut = k;
        }
    }
    q->tok[0] = q->rows ? c->ctx_len[q->order[q->cut - 1]] : 1;
    q->tok[1] = longest;
    return 0;
}

/* The model, its two contexts, the cache, the prefix read back, the rows'
 * ids (the same for every example). */
static int scorer_open(scorer *q, const char *model_dir, const char *adapter_dir)
{
    exp_state *s = q->s;
    const cls_data *x = q->x;
    const classify_contexts *c = &x->c;
    q->L = s->shape.layers;
    q->H = s->shape.kv_heads;
    q->D = s->shape.head_dim;
    q->P = s->o.cls_prefix;
    q->V = s->shape.vocab;
    q->rows = c->count - 1; /* context 0 is the prompt alone: the prefill's */
    if (rows_split(q)) {
        fprintf(stderr, "prefixcl experiment gain: scoring: out of host memory\n");
        return -1;
    }
    const size_t n2 = q->rows - q->cut;
    const size_t np = x->longest_prompt, LHD = q->L * q->H * q->D;
    const pfx_context_params fp = { .max_batch = PREFILL_SLOTS,
                                    .max_tokens = np,
                                    .max_prefix_len = q->P },
                             tp = { .max_batch = q->cut > n2 ? q->cut : n2,
                                    .max_tokens = q->tok[1],
                                    .max_prefix_len = q->P + np };
    const size_t shape0[2] = { q->cut ? q->cut : 1, q->V }, shape1[2] = { n2 ? n2 : 1, q->V };
    q->pk = malloc(LHD * q->P * sizeof(float));
    q->pv = malloc(LHD * q->P * sizeof(float));
    q->ck = malloc(PREFILL_SLOTS * np * q->H * q->D * sizeof(float));
    q->cv = malloc(PREFILL_SLOTS * np * q->H * q->D * sizeof(float));
    q->hk = malloc(LHD * (q->P + np) * sizeof(float));
    q->hv = malloc(LHD * (q->P + np) * sizeof(float));
    q->ids = calloc(q->cut * q->tok[0] + n2 * q->tok[1] + 1, sizeof(int32_t));
    q->lens = calloc(q->rows + 1, sizeof(int32_t));
    q->tmp = malloc((q->rows + 1) * q->V * sizeof(float));
    q->lp = malloc(c->count * q->V * sizeof(float));
    q->first = malloc(PREFILL_SLOTS * q->V * sizeof(float));
    if (!q->pk || !q->pv || !q->ck || !q->cv || !q->hk || !q->hv || !q->ids || !q->lens || !q->lp ||
        !q->first || !q->tmp) {
        fprintf(stderr, "prefixcl experiment gain: scoring: out of host memory\n");
        return -1;
    }
    pfx_model_prefix pre;
    pfx_status st = pfx_model_load(s->rt, model_dir, NULL, &q->m);
    if (st == PFX_SUCCESS)
        st = pfx_context_create(q->m, &fp, &q->fill);
    if (st == PFX_SUCCESS)
        st = pfx_context_create(q->m, &tp, &q->tail);
    if (st == PFX_SUCCESS)
        st = pfx_kv_cache_create(q->m, PREFILL_SLOTS, np, &q->cache);
    if (st == PFX_SUCCESS)
        st = pfx_adapter_bank_create(q->m, 1, &q->bank);
    if (st == PFX_SUCCESS)
        st = pfx_adapter_bank_add(q->bank, adapter_dir, &q->entry);
    if (st == PFX_SUCCESS)
        st = pfx_adapter_bank_prefix(q->bank, &q->entry, 1, &pre);
    for (size_t l = 0; l < q->L && st == PFX_SUCCESS; l++) {
        const size_t n = q->H * q->P * q->D;
        st = pfx_tensor_read(pre.keys[l], 0, n, q->pk + l * n);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_read(pre.values[l], 0, n, q->pv + l * n);
    }
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(s->rt, PFX_DTYPE_F32, 2, shape0, &q->next[0]);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_create(s->rt, PFX_DTYPE_F32, 2, shape1, &q->next[1]);
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: scoring %s: %s\n", adapter_dir,
                pfx_last_error(s->rt));
        return -1;
    }
    for (size_t r = 0; r < q->rows; r++) {
        const size_t k = q->order[r], lab = c->ctx_label[k];
        const size_t at =
            r < q->cut ? r * q->tok[0] : q->cut * q->tok[0] + (r - q->cut) * q->tok[1];
        memcpy(q->ids + at, c->ids + c->at[lab], c->ctx_len[k] * sizeof(int32_t));
        q->lens[r] = (int32_t)c->ctx_len[k];
    }
    return 0;
}

/* Prompts j0 .. j0 + E - 1 into cache slots 0 .. E - 1; their next-token
 * logits into q->first. */
static pfx_status prefill(scorer *q, size_t j0, size_t E, int32_t *ids, int32_t *lens)
{
    const cls_data *x = q->x;
    size_t N = 1;
    for (size_t e = 0; e < E; e++) {
        pfx_kv_cache_reset(q->cache, e);
        N = x->prompt_len[j0 + e] > N ? x->prompt_len[j0 + e] : N;
    }
    int32_t adapter[PREFILL_SLOTS];
    memset(ids, 0, E * N * sizeof(int32_t));
    for (size_t e = 0; e < E; e++) {
        memcpy(ids + e * N, x->prompt[j0 + e], x->prompt_len[j0 + e] * sizeof(int32_t));
        lens[e] = (int32_t)x->prompt_len[j0 + e];
        adapter[e] = q->entry;
    }
    const pfx_serve_step step = {
        .batch = E, .tokens = N, .ids = ids, .lens = lens, .adapter = adapter
    };
    const size_t shape[2] = { E, q->V };
    pfx_tensor *logits = NULL;
    pfx_status st = pfx_tensor_create(q->s->rt, PFX_DTYPE_F32, 2, shape, &logits);
    if (st == PFX_SUCCESS)
        st = pfx_serve_step_run(q->fill, q->cache, q->bank, &step, logits);
    if (st == PFX_SUCCESS)
        st = pfx_tensor_read(logits, 0, E * q->V, q->first);
    pfx_tensor_destroy(&logits);
    return st;
}

/* Example j (cache slot e): the tuned prefix then its prompt's keys and
 * values as one prefix [H, P + n, D] a layer, the label rows after it;
 * every context's log-probabilities into q->lp. */
static pfx_status tail(scorer *q, size_t j, size_t e)
{
    const size_t n = q->x->prompt_len[j], P = q->P, H = q->H, D = q->D, W = P + n,
                 cap = q->x->longest_prompt;
    pfx_status st = PFX_SUCCESS;
    for (size_t l = 0; l < q->L && st == PFX_SUCCESS; l++) {
        const pfx_tensor *kt, *vt;
        st = pfx_kv_cache_layer(q->cache, l, &kt, &vt);
        /* slot e's first n tokens: [n, H, D] at e * cap * H * D */
        if (st == PFX_SUCCESS)
            st = pfx_tensor_read(kt, e * cap * H * D, n * H * D, q->ck);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_read(vt, e * cap * H * D, n * H * D, q->cv);
        float *hk = q->hk + l * H * W * D, *hv = q->hv + l * H * W * D;
        const float *pk = q->pk + l * H * P * D, *pv = q->pv + l * H * P * D;
        for (size_t h = 0; h < H && st == PFX_SUCCESS; h++) {
            memcpy(hk + h * W * D, pk + h * P * D, P * D * sizeof(float));
            memcpy(hv + h * W * D, pv + h * P * D, P * D * sizeof(float));
            for (size_t t = 0; t < n; t++) {
                memcpy(hk + (h * W + P + t) * D, q->ck + (t * H + h) * D, D * sizeof(float));
                memcpy(hv + (h * W + P + t) * D, q->cv + (t * H + h) * D, D * sizeof(float));
            }
        }
    }
    if (st != PFX_SUCCESS || q->rows == 0)
        return st;
    pfx_tensor **keys = calloc(q->L, sizeof(pfx_tensor *)),
               **values = calloc(q->L, sizeof(pfx_tensor *));
    if (!keys || !values)
        st = PFX_ERROR_OUT_OF_MEMORY;
    const size_t shape[3] = { H, W, D };
    for (size_t l = 0; l < q->L && st == PFX_SUCCESS; l++) {
        st = pfx_tensor_create(q->s->rt, PFX_DTYPE_F32, 3, shape, &keys[l]);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_create(q->s->rt, PFX_DTYPE_F32, 3, shape, &values[l]);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_write(keys[l], 0, H * W * D, q->hk + l * H * W * D);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_write(values[l], 0, H * W * D, q->hv + l * H * W * D);
    }
    if (st == PFX_SUCCESS) {
        const pfx_model_prefix pre = { .prefix_len = W,
                                       .keys = (pfx_tensor *const *)keys,
                                       .values = (pfx_tensor *const *)values };
        for (int g = 0; g < 2 && st == PFX_SUCCESS; g++) {
            const size_t r0 = g ? q->cut : 0, B = g ? q->rows - q->cut : q->cut;
            const pfx_model_batch b = { .batch = B,
                                        .tokens = q->tok[g],
                                        .ids = q->ids + (g ? q->cut * q->tok[0] : 0),
                                        .lens = q->lens + r0 };
            if (B)
                st = pfx_model_last_logits(q->tail, &b, &pre, q->next[g]);
            if (B && st == PFX_SUCCESS)
                st = pfx_tensor_read(q->next[g], 0, B * q->V, q->tmp + r0 * q->V);
        }
    }
    for (size_t r = 0; r < q->rows && st == PFX_SUCCESS; r++)
        memcpy(q->lp + q->order[r] * q->V, q->tmp + r * q->V, q->V * sizeof(float));
    for (size_t l = 0; keys && values && l < q->L; l++) {
        pfx_tensor_destroy(&keys[l]);
        pfx_tensor_destroy(&values[l]);
    }
    free(keys);
    free(values);
    return st;
}

long cls_score(exp_state *s, const cls_data *x, const char *model_dir, const char *adapter_dir,
               double *loss)
{
    scorer q = { .s = s, .x = x, .entry = -1 };
    int32_t *ids = malloc(PREFILL_SLOTS * (x->longest_prompt ? x->longest_prompt : 1) *
                          sizeof(int32_t)),
            lens[PREFILL_SLOTS];
    double *scores = malloc(x->c.labels * sizeof(double)), nll = 0.0;
    size_t tokens = 0;
    long right = -1;
    if (!ids || !scores || scorer_open(&q, model_dir, adapter_dir))
        goto out;
    right = 0;
    for (size_t j0 = 0; j0 < x->tests && right >= 0; j0 += PREFILL_SLOTS) {
        const size_t E = x->tests - j0 < PREFILL_SLOTS ? x->tests - j0 : PREFILL_SLOTS;
        pfx_status st = cli_stop ? PFX_SUCCESS : prefill(&q, j0, E, ids, lens);
        for (size_t e = 0; e < E && st == PFX_SUCCESS && !cli_stop; e++) {
            memcpy(q.lp, q.first + e * q.V, q.V * sizeof(float));
            if ((st = tail(&q, j0 + e, e)) != PFX_SUCCESS)
                break;
            classify_log_softmax(q.lp, x->c.count, q.V);
            const int32_t best = classify_best(&x->c, q.lp, q.V, scores);
            if (best < 0) {
                fprintf(stderr, "prefixcl experiment gain: scoring %s: a label's score is NaN\n",
                        adapter_dir);
                right = -1;
                break;
            }
            const size_t k = (size_t)x->test_label[j0 + e];
            right += best == x->test_label[j0 + e];
            nll -= scores[k];
            tokens += x->c.at[k + 1] - x->c.at[k];
        }
        if (st != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl experiment gain: scoring %s: %s\n", adapter_dir,
                    pfx_last_error(s->rt));
            right = -1;
        }
        if (cli_stop)
            right = -1;
    }
    *loss = tokens ? nll / (double)tokens : 0.0;
out:
    scorer_free(&q);
    free(ids);
    free(scores);
    return right;
}
