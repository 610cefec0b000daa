/* The linear probe (probe.h). */
#include "probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void probe_default_params(probe_params *p)
{
    p->l2 = 1e-3;
    p->iters = 300;
    p->lr = 0.05;
}

void probe_free(probe_model *m)
{
    free(m->mean);
    free(m->scale);
    free(m->w);
    free(m->b);
    memset(m, 0, sizeof(*m));
}

/* Scores of one standardized row into z[classes]. */
static void scores(const probe_model *m, const float *xs, double *z)
{
    for (size_t k = 0; k < m->classes; k++) {
        const float *w = m->w + k * m->dim;
        double s = m->b[k];
        for (size_t d = 0; d < m->dim; d++)
            s += (double)w[d] * xs[d];
        z[k] = s;
    }
}

static void standardize(const probe_model *m, const float *x, float *xs)
{
    for (size_t d = 0; d < m->dim; d++)
        xs[d] = (x[d] - m->mean[d]) * m->scale[d];
}

int probe_fit(const float *x, const int32_t *y, size_t n, size_t dim, size_t classes,
              const probe_params *p, probe_model *m)
{
    memset(m, 0, sizeof(*m));
    if (n == 0 || dim == 0 || classes == 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (y[i] < 0 || (size_t)y[i] >= classes)
            return -1;
    const size_t np = classes * dim + classes; /* W then b */
    m->dim = dim;
    m->classes = classes;
    m->mean = calloc(dim, sizeof(float));
    m->scale = calloc(dim, sizeof(float));
    m->w = calloc(classes * dim, sizeof(float));
    m->b = calloc(classes, sizeof(float));
    float *xs = malloc(n * dim * sizeof(float));
    double *grad = malloc(np * sizeof(double)), *m1 = calloc(np, sizeof(double)),
           *m2 = calloc(np, sizeof(double));
    double *z = malloc(classes * sizeof(double));
    int rc = -1;
    if (!m->mean || !m->scale || !m->w || !m->b || !xs || !grad || !m1 || !m2 || !z)
        goto out;
    /* standardization: each feature to mean 0 and deviation 1 over the
     * training rows (a constant feature keeps scale 1), so one step size
     * suits every model's hidden states */
    for (size_t d = 0; d < dim; d++) {
        double s = 0.0, q = 0.0;
        for (size_t i = 0; i < n; i++)
            s += x[i * dim + d];
        const double mu = s / (double)n;
        for (size_t i = 0; i < n; i++) {
            const double c = x[i * dim + d] - mu;
            q += c * c;
        }
        const double sd = sqrt(q / (double)n);
        m->mean[d] = (float)mu;
        m->scale[d] = sd > 1e-12 ? (float)(1.0 / sd) : 1.0f;
    }
    for (size_t i = 0; i < n; i++)
        standardize(m, x + i * dim, xs + i * dim);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (size_t it = 0; it < p->iters; it++) {
        memset(grad, 0, np * sizeof(double));
        double loss = 0.0;
        for (size_t i = 0; i < n; i++) {
            const float *xi = xs + i * dim;
            scores(m, xi, z);
            double mx = z[0];
            for (size_t k = 1; k < classes; k++)
                mx = z[k] > mx ? z[k] : mx;
            double sum = 0.0;
            for (size_t k = 0; k < classes; k++)
                sum += exp(z[k] - mx);
            loss += log(sum) + mx - z[y[i]];
            for (size_t k = 0; k < classes; k++) {
                const double dz =
                    (exp(z[k] - mx) / sum - (k == (size_t)y[i] ? 1.0 : 0.0)) / (double)n;
                double *gw = grad + k * dim;
                for (size_t d = 0; d < dim; d++)
                    gw[d] += dz * xi[d];
                grad[classes * dim + k] += dz;
            }
        }
        m->train_loss = loss / (double)n;
        for (size_t j = 0; j < classes * dim; j++)
            grad[j] += p->l2 * m->w[j];
        /* Adam, bias-corrected */
        const double c1 = 1.0 - pow(b1, (double)(it + 1)), c2 = 1.0 - pow(b2, (double)(it + 1));
        for (size_t j = 0; j < np; j++) {
            m1[j] = b1 * m1[j] + (1.0 - b1) * grad[j];
            m2[j] = b2 * m2[j] + (1.0 - b2) * grad[j] * grad[j];
            const double step = p->lr * (m1[j] / c1) / (sqrt(m2[j] / c2) + eps);
            float *v = j < classes * dim ? &m->w[j] : &m->b[j - classes * dim];
            *v = (float)(*v - step);
        }
    }
    rc = 0;
out:
    free(xs);
    free(grad);
    free(m1);
    free(m2);
    free(z);
    if (rc)
        probe_free(m);
    return rc;
}

int32_t probe_predict(const probe_model *m, const float *x)
{
    float *xs = malloc(m->dim * sizeof(float));
    double *z = malloc(m->classes * sizeof(double));
    int32_t best = -1;
    if (xs && z) {
        standardize(m, x, xs);
        scores(m, xs, z);
        best = 0;
        for (size_t k = 1; k < m->classes; k++)
            if (z[k] > z[best])
                best = (int32_t)k;
    }
    free(xs);
    free(z);
    return best;
}

double probe_accuracy(const probe_model *m, const float *x, const int32_t *y, size_t n)
{
    size_t right = 0;
    for (size_t i = 0; i < n; i++)
        right += probe_predict(m, x + i * m->dim) == y[i];
    return n ? (double)right / (double)n : 0.0;
}

double probe_majority_accuracy(const int32_t *y_train, size_t n_train, const int32_t *y_test,
                               size_t n_test, size_t classes)
{
    size_t *count = calloc(classes ? classes : 1, sizeof(size_t));
    if (!count || n_test == 0)
        return (free(count), 0.0);
    for (size_t i = 0; i < n_train; i++)
        if (y_train[i] >= 0 && (size_t)y_train[i] < classes)
            count[y_train[i]]++;
    size_t top = 0;
    for (size_t k = 1; k < classes; k++)
        if (count[k] > count[top])
            top = k;
    size_t right = 0;
    for (size_t i = 0; i < n_test; i++)
        right += (size_t)y_test[i] == top;
    free(count);
    return (double)right / (double)n_test;
}
