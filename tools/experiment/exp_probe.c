/* The classification column (exp.h): the lexicographer file (noun.animal,
 * verb.motion, ...) of each validation document, predicted by a linear probe
 * (probe.h) from the frozen final model's features: the mean over the
 * document's positions of the hidden states after the final norm, with the
 * arm's trained gains. Documents at even indices train the probe, odd ones
 * test it (a split that every arm and every run shares). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exp.h"
#include "probe.h"

#define FEATURE_BATCH 16

typedef struct doc_set {
    size_t n;
    int32_t **ids;
    size_t *len;
    int32_t *label;
    char **classes;
    size_t class_count;
} doc_set;

static void docs_free(doc_set *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->ids[i]);
    for (size_t k = 0; k < d->class_count; k++)
        free(d->classes[k]);
    free(d->ids);
    free(d->len);
    free(d->label);
    free(d->classes);
    memset(d, 0, sizeof(*d));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* valid_labels.tsv: "lexname TAB document" a line (tools/corpus/
 * wordnet_corpus.py); at most `cap` documents (0: all), evenly spaced over
 * the file (which lists the nouns, then the verbs, adjectives and adverbs:
 * its first lines would hold a few classes only), each encoded and cut to
 * the block. Classes are the sorted names seen. */
static int docs_read(exp_state *s, size_t cap, doc_set *d)
{
    memset(d, 0, sizeof(*d));
    FILE *f = fopen(s->labels_path, "r");
    if (!f) {
        fprintf(stderr, "prefixcl experiment gain: cannot read %s\n", s->labels_path);
        return -1;
    }
    char *line = NULL, **names = NULL;
    size_t lcap = 0, room = 0, lineno = 0, total = 0;
    ssize_t got;
    int rc = 0;
    while (getline(&line, &lcap, f) > 0)
        total++;
    rewind(f);
    if (cap == 0 || cap > total)
        cap = total;
    while ((got = getline(&line, &lcap, f)) > 0) {
        lineno++;
        /* line j (from 0) is kept when floor(j cap / total) steps up at it */
        if (lineno * cap / total == (lineno - 1) * cap / total)
            continue;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab || tab == line) {
            fprintf(stderr, "prefixcl experiment gain: %s:%zu: not \"lexname<TAB>document\"\n", s->labels_path,
                    lineno);
            rc = -1;
            break;
        }
        *tab = '\0';
        if (d->n == room) {
            room = room ? 2 * room : 1024;
            int32_t **ids = realloc(d->ids, room * sizeof(*ids));
            d->ids = ids ? ids : d->ids;
            size_t *len = realloc(d->len, room * sizeof(*len));
            d->len = len ? len : d->len;
            char **nm = realloc(names, room * sizeof(*nm));
            names = nm ? nm : names;
            if (!ids || !len || !nm) {
                rc = -1;
                break;
            }
        }
        size_t count = 0;
        if (pfx_tokenizer_encode(s->tok, tab + 1, strlen(tab + 1), 0, &d->ids[d->n], &count) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl experiment gain: %s:%zu: %s\n", s->labels_path, lineno, pfx_last_error(NULL));
            rc = -1;
            break;
        }
        if (count == 0) { /* an empty document: the end-of-text token alone */
            int32_t *one = realloc(d->ids[d->n], sizeof(int32_t));
            if (!one) {
                rc = -1;
                break;
            }
            one[0] = pfx_tokenizer_special_id(s->tok, PFX_TOKEN_EOS);
            d->ids[d->n] = one;
            count = 1;
        }
        d->len[d->n] = count < s->o.block ? count : s->o.block;
        if (!(names[d->n] = strdup(line))) {
            free(d->ids[d->n]);
            rc = -1;
            break;
        }
        d->n++;
    }
    free(line);
    fclose(f);
    if (rc == 0 && d->n < 2) {
        fprintf(stderr, "prefixcl experiment gain: %s: fewer than 2 labelled documents\n", s->labels_path);
        rc = -1;
    }
    /* the classes: the distinct names, sorted */
    if (rc == 0) {
        char **sorted = malloc(d->n * sizeof(char *));
        d->label = malloc(d->n * sizeof(int32_t));
        d->classes = malloc(d->n * sizeof(char *));
        if (!sorted || !d->label || !d->classes)
            rc = -1;
        else {
            memcpy(sorted, names, d->n * sizeof(char *));
            qsort(sorted, d->n, sizeof(char *), cmp_str);
            for (size_t i = 0; i < d->n && rc == 0; i++)
                if (i == 0 || strcmp(sorted[i], sorted[i - 1]))
                    if (!(d->classes[d->class_count++] = strdup(sorted[i])))
                        rc = -1;
            for (size_t i = 0; i < d->n && rc == 0; i++) {
                char **hit = bsearch(&names[i], d->classes, d->class_count, sizeof(char *), cmp_str);
                d->label[i] = (int32_t)(hit - d->classes);
            }
        }
        free(sorted);
    }
    for (size_t i = 0; names && i < d->n; i++)
        free(names[i]);
    free(names);
    if (rc)
        docs_free(d);
    return rc;
}

/* Each document's feature row [C]: the mean of its positions' final hidden
 * states. */
static int features(exp_state *s, pfx_model *model, const pfx_model_prefix *prefix, const doc_set *d, float *x)
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
            pfx_model_hidden_states(model, &batch, prefix, t) != PFX_SUCCESS ||
            pfx_tensor_read(t, 0, B * N * C, h) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl experiment gain: the probe's features: %s\n", pfx_last_error(s->rt));
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
    float *xtr = malloc(ntr * C * sizeof(float)), *xte = malloc((nte ? nte : 1) * C * sizeof(float));
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
            exp_gains g;
            pfx_model *model = exp_model_load(s, run, rows);
            if (!model || exp_gains_load(s, run, a, &g)) {
                pfx_model_destroy(&model);
                rc = -1;
                break;
            }
            rc = features(s, model, &g.prefix, &d, x);
            if (rc == 0)
                rc = probe_run(s, &d, x, run);
            /* the same weights with the gains set to 0: what the gains
             * themselves do to each head's entropy */
            if (rc == 0 && a != ARM_BASELINE) {
                const pfx_model_batch b = { .batch = s->probe_rows, .tokens = s->o.block, .ids = s->probe_ids };
                const pfx_model_prefix none = { 0 };
                run->gain_off_entropy = malloc(s->LH * sizeof(float));
                if (!run->gain_off_entropy ||
                    pfx_model_head_stats(model, &b, &none, (uint32_t)s->o.top_k, NULL, run->gain_off_entropy, NULL) !=
                        PFX_SUCCESS) {
                    fprintf(stderr, "prefixcl experiment gain: head statistics: %s\n", pfx_last_error(s->rt));
                    rc = -1;
                }
            }
            if (rc == 0 && !s->o.quiet)
                printf("  probe: %-8s accuracy %.3f (majority class %.3f; %zu train, %zu test documents, %zu "
                       "classes)\n",
                       exp_arm_names[a], run->probe_acc, run->probe_majority, s->probe_train, s->probe_test,
                       s->probe_classes);
            exp_gains_free(&g);
            pfx_model_destroy(&model);
        }
    free(x);
    docs_free(&d);
    return rc;
}
