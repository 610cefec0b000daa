/* valid_labels.tsv (labels.h). */
#include "labels.h"

#include <stdlib.h>
#include <string.h>

void labels_free(labelled_docs *d)
{
    for (size_t i = 0; d->ids && i < d->n; i++)
        free(d->ids[i]);
    for (size_t k = 0; d->classes && k < d->class_count; k++)
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

/* Room for one more document in d and names. */
static int grow(labelled_docs *d, char ***names, size_t *room)
{
    if (d->n < *room)
        return 0;
    size_t more = *room ? 2 * *room : 1024;
    int32_t **ids = realloc(d->ids, more * sizeof(*ids));
    if (ids)
        d->ids = ids;
    size_t *len = realloc(d->len, more * sizeof(*len));
    if (len)
        d->len = len;
    char **nm = realloc(*names, more * sizeof(*nm));
    if (nm)
        *names = nm;
    if (!ids || !len || !nm)
        return -1;
    *room = more;
    return 0;
}

/* The classes: the distinct names, sorted; each document's label. */
static int classify(labelled_docs *d, char **names)
{
    char **sorted = malloc(d->n * sizeof(char *));
    d->label = malloc(d->n * sizeof(int32_t));
    d->classes = malloc(d->n * sizeof(char *));
    int rc = sorted && d->label && d->classes ? 0 : -1;
    if (rc == 0) {
        memcpy(sorted, names, d->n * sizeof(char *));
        qsort(sorted, d->n, sizeof(char *), cmp_str);
        for (size_t i = 0; i < d->n && rc == 0; i++)
            if (i == 0 || strcmp(sorted[i], sorted[i - 1]))
                if (!(d->classes[d->class_count++] = strdup(sorted[i]))) {
                    d->class_count--;
                    rc = -1;
                }
        for (size_t i = 0; i < d->n && rc == 0; i++) {
            char **hit = bsearch(&names[i], d->classes, d->class_count, sizeof(char *), cmp_str);
            d->label[i] = (int32_t)(hit - d->classes);
        }
    }
    free(sorted);
    return rc;
}

int labels_read(FILE *f, const char *name, size_t cap, size_t block, int32_t empty_id,
                labels_encode_fn encode, void *user, labelled_docs *d, char *err, size_t err_cap)
{
    memset(d, 0, sizeof(*d));
    snprintf(err, err_cap, "%s: out of memory", name);
    char *line = NULL, **names = NULL;
    size_t lcap = 0, room = 0, lineno = 0, total = 0;
    ssize_t got;
    int rc = 0;
    while (getline(&line, &lcap, f) > 0)
        total++;
    rewind(f);
    if (cap == 0 || cap > total)
        cap = total;
    while (rc == 0 && lineno < total && (got = getline(&line, &lcap, f)) > 0) {
        lineno++;
        /* line j (from 0) is kept when floor(j cap / total) steps up at it */
        if (lineno * cap / total == (lineno - 1) * cap / total)
            continue;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        char *tab = memchr(line, '\t', (size_t)got);
        if (!tab || tab == line || memchr(line, '\0', (size_t)got)) {
            snprintf(err, err_cap,
                     "%s:%zu: not \"lexname<TAB>document\" (a NUL byte or no lexname)", name,
                     lineno);
            rc = -1;
            break;
        }
        *tab = '\0';
        if (grow(d, &names, &room)) {
            rc = -1;
            break;
        }
        size_t count = 0;
        int32_t *ids = NULL;
        char why[512] = "";
        if (encode(user, tab + 1, (size_t)(line + got - (tab + 1)), &ids, &count, why,
                   sizeof(why))) {
            snprintf(err, err_cap, "%s:%zu: %s", name, lineno, why);
            rc = -1;
            break;
        }
        if (count == 0) { /* an empty document: the single token empty_id */
            int32_t *one = realloc(ids, sizeof(int32_t));
            if (!one) {
                free(ids);
                rc = -1;
                break;
            }
            one[0] = empty_id;
            ids = one;
            count = 1;
        }
        if (!(names[d->n] = strdup(line))) {
            free(ids);
            rc = -1;
            break;
        }
        d->ids[d->n] = ids;
        d->len[d->n] = count < block ? count : block;
        d->n++;
    }
    free(line);
    if (rc == 0 && d->n < 2) {
        snprintf(err, err_cap, "%s: fewer than 2 labelled documents", name);
        rc = -1;
    }
    if (rc == 0)
        rc = classify(d, names);
    for (size_t i = 0; names && i < d->n; i++)
        free(names[i]);
    free(names);
    if (rc)
        labels_free(d);
    else
        err[0] = '\0';
    return rc;
}
