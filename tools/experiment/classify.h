/* The classification by prefix tuning (exp_classify.c) scores every label
 * by the log-likelihood of its completion's tokens after the prompt and
 * answers the best. A label of m tokens needs the next-token distributions
 * after the prompt and after each of its first m - 1 tokens; labels that
 * begin alike ("noun.animal", "noun.act") share those contexts, so the
 * distinct proper prefixes of the completions are computed once an example
 * (a row of one batch each) instead of one row per label. Pure host code:
 * the experiment command and its tests. */
#ifndef PFX_TOOLS_EXPERIMENT_CLASSIFY_H
#define PFX_TOOLS_EXPERIMENT_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

typedef struct classify_contexts {
    size_t labels;
    size_t count;      /* distinct contexts: proper prefixes of the completions */
    size_t *ctx_label; /* [count]: a label whose completion starts with context c */
    size_t *ctx_len;   /* [count]: its tokens (0: the prompt alone) */
    size_t *at;        /* [labels + 1]: label k's tokens are positions at[k] .. at[k+1] */
    size_t *ctx_of;    /* [at[labels]]: the context whose next token position j predicts */
    int32_t *ids;      /* [at[labels]]: the completions' tokens, concatenated */
} classify_contexts;

/* The contexts of `labels` completions (ids[k], len[k] >= 1 tokens each), in
 * the order first needed (label 0's, then the new ones of label 1, ...).
 * 0, or -1 (no memory, a label without tokens: c is then empty). */
int classify_contexts_build(const int32_t *const *ids, const size_t *len, size_t labels,
                            classify_contexts *c);
void classify_contexts_free(classify_contexts *c);

/* The label of the largest score (the lowest index among equal ones), from
 * logp [count][vocab], each context's next-token log-probabilities: score
 * k = the sum over label k's tokens of logp at their contexts. scores
 * [labels] (NULL: not kept). -1 when a token is outside the vocabulary or a
 * score is NaN. */
int32_t classify_best(const classify_contexts *c, const float *logp, size_t vocab, double *scores);

/* Each row of x [rows][n] replaced by its log-softmax (in double, stored as
 * float). */
void classify_log_softmax(float *x, size_t rows, size_t n);

#endif
