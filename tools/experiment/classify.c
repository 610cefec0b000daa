/* Label contexts and scores (classify.h). */
#include "classify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void classify_contexts_free(classify_contexts *c)
{
    free(c->ctx_label);
    free(c->ctx_len);
    free(c->at);
    free(c->ctx_of);
    free(c->ids);
    memset(c, 0, sizeof(*c));
}

int classify_contexts_build(const int32_t *const *ids, const size_t *len, size_t labels,
                            classify_contexts *c)
{
    memset(c, 0, sizeof(*c));
    size_t total = 0;
    for (size_t k = 0; k < labels; k++) {
        if (len[k] == 0)
            return -1;
        total += len[k];
    }
    c->labels = labels;
    c->at = malloc((labels + 1) * sizeof(size_t));
    c->ctx_of = malloc((total ? total : 1) * sizeof(size_t));
    c->ids = malloc((total ? total : 1) * sizeof(int32_t));
    /* at most one context a token */
    c->ctx_label = malloc((total ? total : 1) * sizeof(size_t));
    c->ctx_len = malloc((total ? total : 1) * sizeof(size_t));
    if (!c->at || !c->ctx_of || !c->ids || !c->ctx_label || !c->ctx_len) {
        classify_contexts_free(c);
        return -1;
    }
    size_t p = 0;
    for (size_t k = 0; k < labels; k++) {
        c->at[k] = p;
        for (size_t j = 0; j < len[k]; j++, p++) {
            c->ids[p] = ids[k][j];
            /* the context of position j: label k's first j tokens */
            size_t found = c->count;
            for (size_t q = 0; q < c->count && found == c->count; q++)
                if (c->ctx_len[q] == j &&
                    !memcmp(ids[c->ctx_label[q]], ids[k], j * sizeof(int32_t)))
                    found = q;
            if (found == c->count) {
                c->ctx_label[c->count] = k;
                c->ctx_len[c->count++] = j;
            }
            c->ctx_of[p] = found;
        }
    }
    c->at[labels] = p;
    return 0;
}

int32_t classify_best(const classify_contexts *c, const float *logp, size_t vocab, double *scores)
{
    int32_t best = -1;
    double top = -INFINITY;
    for (size_t k = 0; k < c->labels; k++) {
        double s = 0.0;
        for (size_t p = c->at[k]; p < c->at[k + 1]; p++) {
            if (c->ids[p] < 0 || (size_t)c->ids[p] >= vocab)
                return -1;
            s += logp[c->ctx_of[p] * vocab + (size_t)c->ids[p]];
        }
        if (isnan(s))
            return -1;
        if (scores)
            scores[k] = s;
        if (best < 0 || s > top) {
            best = (int32_t)k;
            top = s;
        }
    }
    return best;
}

void classify_log_softmax(float *x, size_t rows, size_t n)
{
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        double m = -INFINITY, sum = 0.0;
        for (size_t i = 0; i < n; i++)
            m = row[i] > m ? row[i] : m;
        for (size_t i = 0; i < n; i++)
            sum += exp((double)row[i] - m);
        const double lse = m + log(sum);
        for (size_t i = 0; i < n; i++)
            row[i] = (float)((double)row[i] - lse);
    }
}
