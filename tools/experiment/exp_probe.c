/* The classification column (exp.h): the lexicographer file (noun.animal,
 * verb.motion, ...) of each validation document, predicted by a linear probe
 * (probe.h) from the frozen final model's features: the mean over the
 * document's positions of the hidden states after the final norm, with the
 * arm's trained gains. Documents at even indices train the probe, odd ones
 * test it (a split that every arm and every run shares). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "exp.h"
#include "labels.h"
#include "probe.h"

#define FEATURE_BATCH 16

typedef labelled_docs doc_set;

static int encode_text(void *user, const char *text, size_t len, int32_t **ids, size_t *count,
                       char *err, size_t err_cap)
{
    if (pfx_tokenizer_encode(user, text, len, 0, ids, count) == PFX_SUCCESS)
        return 0;
    snprintf(err, err_cap, "%s", pfx_last_error(NULL));
    return -1;
}

/* The labelled documents of s->labels_path (labels.h), at most cap. */
static int docs_read(exp_state *s, size_t cap, doc_set *d)
{
    FILE *f;
    if (pfx_input_open(s->labels_path, &f) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: %s\n", pfx_last_error(NULL));
        return -1;
    }
    char err[1024];
    int rc = labels_read(f, s->labels_path, cap, s->o.block,
                         pfx_tokenizer_special_id(s->tok, PFX_TOKEN_EOS), encode_text, s->tok, d,
                         err, sizeof(err));
    fclose(f);
    if (rc)
        fprintf(stderr, "prefixcl experiment gain: %s\n", err);
    return rc;
}

/* Each document's feature row [C]: the mean of its positions' final hidden
 * states. */
static int features(exp_state *s, pfx_context *ctx, const pfx_model_prefix *prefix,
                    const doc_set *d, float *x)
{
    const size_t C = s->shape.hidden, T = s->o.block;
    int32_t *ids = malloc(FEATURE_BATCH * T * sizeof(int32_t)), lens[FEATURE_BATCH];
    float *h = malloc(FEATURE_BATCH * T * C * sizeof(float));
    int rc = ids && h ? 0 : -1;
    for (size_t i0 = 0; i0 < d->n && rc == 0; i0 += FEATURE_BATCH) {
        const size_t B = d->n - i0 < FEATURE_BATCH ? d->n - i0 : FEATURE_BATCH;
        size_t N = 1;
        for (size_t b = 0; b < B; b++)
            N = d->len[i0 + b] > N ? d->len[i0 + b] : N;
        memset(ids, 0, B * N * sizeof(int32_t));
        for (size_t b = 0; b < B; b++) {
            memcpy(ids + b * N, d->ids[i0 + b], d->len[i0 + b] * sizeof(int32_t));
            lens[b] = (int32_t)d->len[i0 + b];
        }
        const pfx_model_batch batch = { .batch = B, .tokens = N, .ids = ids, .lens = lens };
        const size_t shape[3] = { B, N, C };
        pfx_tensor *t = NULL;
        if (pfx_tensor_create(s->rt, PFX_DTYPE_F32, 3, shape, &t) != PFX_SUCCESS ||
            pfx_model_hidden_states(ctx, &batch, prefix, t) != PFX_SUCCESS ||
            pfx_tensor_read(t, 0, B * N * C, h) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl experiment gain: the probe's features: %s\n",
                    pfx_last_error(s->rt));
            rc = -1;
        }
        pfx_tensor_destroy(&t);
        for (size_t b = 0; b < B && rc == 0; b++) {
            float *row = x + (i0 + b) * C;
            for (size_t c = 0; c < C; c++) {
                double sum = 0.0;
                for (size_t t2 = 0; t2 < (size_t)lens[b]; t2++)
                    sum += h[(b * N + t2) * C + c];
                row[c] = (float)(sum / lens[b]);
            }
        }
    }
    free(ids);
    free(h);
    return rc;
}

/* The probe on one run's features: even documents train, odd ones test. */
static int probe_run(exp_state *s, const doc_set *d, const float *x, exp_run *run)
{
    const size_t C = s->shape.hidden, ntr = (d->n + 1) / 2, nte = d->n / 2;
    float *xtr = malloc(ntr * C * sizeof(float)),
          *xte = malloc((nte ? nte : 1) * C * sizeof(float));
    int32_t *ytr = malloc(ntr * sizeof(int32_t)), *yte = malloc((nte ? nte : 1) * sizeof(int32_t));
    int rc = -1;
    if (xtr && xte && ytr && yte) {
        for (size_t i = 0; i < d->n; i++) {
            float *dst = i % 2 ? xte + (i / 2) * C : xtr + (i / 2) * C;
            memcpy(dst, x + i * C, C * sizeof(float));
            (i % 2 ? yte : ytr)[i / 2] = d->label[i];
        }
        probe_params p;
        probe_default_params(&p);
        probe_model m;
        if (probe_fit(xtr, ytr, ntr, C, d->class_count, &p, &m) == 0) {
            run->probe_acc = probe_accuracy(&m, xte, yte, nte);
            run->probe_majority = probe_majority_accuracy(ytr, ntr, yte, nte, d->class_count);
            probe_free(&m);
            rc = 0;
        }
    }
    free(xtr);
    free(xte);
    free(ytr);
    free(yte);
    return rc;
}

int exp_probe_all(exp_state *s)
{
    doc_set d;
    if (!s->o.quiet) {
        printf("probe\n");
        fflush(stdout);
    }
    if (docs_read(s, s->o.probe_docs, &d))
        return -1;
    s->probe_train = (d.n + 1) / 2;
    s->probe_test = d.n / 2;
    s->probe_classes = d.class_count;
    float *x = malloc(d.n * s->shape.hidden * sizeof(float));
    int rc = x ? 0 : -1;
    const size_t rows = s->probe_rows > FEATURE_BATCH ? s->probe_rows : FEATURE_BATCH;
    for (size_t k = 0; k < s->o.seeds && rc == 0; k++)
        for (exp_arm_kind a = 0; a < ARM_COUNT && rc == 0; a++) {
            exp_run *run = exp_run_at(s, k, a);
            if (!run->done)
                continue;
            if (cli_stop) {
                rc = -1;
                break;
            }
            exp_gains g;
            pfx_context *ctx = exp_model_load(s, run, rows);
            if (!ctx || exp_gains_load(s, run, a, &g)) {
                pfx_context_destroy(&ctx);
                rc = -1;
                break;
            }
            rc = features(s, ctx, &g.prefix, &d, x);
            if (rc == 0)
                rc = probe_run(s, &d, x, run);
            /* the same weights with the gains set to 0: what the gains
             * themselves do to each head's entropy */
            if (rc == 0 && a != ARM_BASELINE) {
                const pfx_model_batch b = { .batch = s->probe_rows,
                                            .tokens = s->o.block,
                                            .ids = s->probe_ids };
                const pfx_model_prefix none = { 0 };
                run->gain_off_entropy = malloc(s->LH * sizeof(float));
                if (!run->gain_off_entropy ||
                    pfx_model_head_stats(ctx, &b, &none, (uint32_t)s->o.top_k, NULL,
                                         run->gain_off_entropy, NULL) != PFX_SUCCESS) {
                    fprintf(stderr, "prefixcl experiment gain: head statistics: %s\n",
                            pfx_last_error(s->rt));
                    rc = -1;
                }
            }
            if (rc == 0 && !s->o.quiet)
                printf("  probe: %-8s accuracy %.3f (majority class %.3f; %zu train, %zu test "
                       "documents, %zu "
                       "classes)\n",
                       exp_arm_names[a], run->probe_acc, run->probe_majority, s->probe_train,
                       s->probe_test, s->probe_classes);
            exp_gains_free(&g);
            pfx_context_destroy(&ctx);
        }
    free(x);
    labels_free(&d);
    return rc;
}
