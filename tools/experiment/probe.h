/* A linear probe: multinomial logistic regression with an L2 penalty,
 * fitted by full-batch Adam on standardized features. Plain C loops, no
 * library: the products are small (documents x hidden x classes: a few
 * hundred million multiply-adds a fit), the host BLAS is optional in this
 * build (-Dhost_blas), and a fixed loop order gives the same accuracy on
 * every machine. The usual C library, liblinear, fits several classes
 * one-vs-rest for logistic regression (not the multinomial model) and would
 * be one more dependency for forty lines. */
#ifndef PFX_TOOLS_EXPERIMENT_PROBE_H
#define PFX_TOOLS_EXPERIMENT_PROBE_H

#include <stddef.h>
#include <stdint.h>

typedef struct probe_params {
    double l2;    /* the penalty: l2 / 2 * |W|^2 added to the mean loss (not on the biases) */
    size_t iters; /* full-batch steps */
    double lr;    /* Adam's step */
} probe_params;

/* l2 1e-3, 300 steps, lr 0.05. */
void probe_default_params(probe_params *p);

typedef struct probe_model {
    size_t dim, classes;
    float *mean, *scale; /* [dim]: the standardization of the training features */
    float *w;            /* [classes][dim] */
    float *b;            /* [classes] */
    double train_loss;   /* mean cross-entropy of the last step, penalty excluded */
} probe_model;

/* Fits the probe on x [n][dim] with labels y[i] in [0, classes). 0, or -1
 * (no memory, n == 0, a label out of range: m is then empty). */
int probe_fit(const float *x, const int32_t *y, size_t n, size_t dim, size_t classes,
              const probe_params *p, probe_model *m);

/* The class of the largest score (the lowest index among equal ones); -1
 * without memory. */
int32_t probe_predict(const probe_model *m, const float *x);

/* The fraction of rows of x [n][dim] predicted as y (0 for n == 0). */
double probe_accuracy(const probe_model *m, const float *x, const int32_t *y, size_t n);

/* The accuracy on y_test of always answering the most frequent label of
 * y_train (ties: the lowest): what a probe that ignores its input reaches. */
double probe_majority_accuracy(const int32_t *y_train, size_t n_train, const int32_t *y_test,
                               size_t n_test, size_t classes);

void probe_free(probe_model *m);

#endif
