/* libFuzzer harness for the files `prefixcl experiment gain` reads: every
 * input is read as each of them.
 * - The labelled documents (tools/experiment/labels.c, valid_labels.tsv),
 *   with an encoder that makes one token of each byte, at most 7 documents
 *   and blocks of 5 tokens: refused cleanly, or documents whose labels
 *   index sorted, distinct classes and whose lengths are 1..5.
 * - experiment.json (tools/experiment/saved.c, what --resume reads):
 *   refused cleanly, or 1..SAVED_ARGS_MAX strings.
 * - A run's measures.json for 3 heads, at most 4 measurements of 9 steps:
 *   refused cleanly, or ascending steps in 1..9.
 * - A run's classify.json: refused cleanly, or 0 <= correct <= examples,
 *   1 <= examples <= 10^9.
 * Also linked into the normal build by run_corpus.c, which replays
 * tests/fuzz/corpus/experiment_files/ (pfx_fuzz_accepts: the labels). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "internal.h"
#include "labels.h"
#include "saved.h"

enum { CAP = 7, BLOCK = 5 };

static int bytes_as_ids(void *user, const char *text, size_t len, int32_t **ids, size_t *count,
                        char *err, size_t err_cap)
{
    (void)user;
    if (len > 4096) { /* as a tokenizer refuses what it cannot encode */
        snprintf(err, err_cap, "a document of %zu bytes", len);
        return -1;
    }
    *ids = malloc((len ? len : 1) * sizeof(int32_t));
    if (!*ids) {
        snprintf(err, err_cap, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        (*ids)[i] = (unsigned char)text[i];
    *count = len;
    return 0;
}

static int read_labels(const uint8_t *data, size_t size, const char *label, labelled_docs *d,
                       char *err, size_t cap)
{
    FILE *f = fmemopen((void *)data, size ? size : 1, "r");
    if (!f) {
        snprintf(err, cap, "fmemopen failed");
        return -1;
    }
    if (!size) /* fmemopen wants a non-empty buffer: read nothing */
        fseek(f, 0, SEEK_END);
    int rc = labels_read(f, label, CAP, BLOCK, 256, bytes_as_ids, NULL, d, err, cap);
    fclose(f);
    return rc;
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    labelled_docs d;
    char err[1024];
    if (read_labels(data, size, label, &d, err, sizeof(err))) {
        pfx_error(NULL, PFX_ERROR_FORMAT, "%s", err);
        return false;
    }
    labels_free(&d);
    return true;
}

/* The JSON files of saved.h. */
static void saved_files(const uint8_t *data, size_t size)
{
    char err[256], **argv = NULL;
    int argc = 0;
    if (!saved_args_read((const char *)data, size, &argc, &argv, err, sizeof(err))) {
        if (argc < 1 || argc > SAVED_ARGS_MAX || argv[argc])
            abort();
        for (int i = 0; i < argc; i++)
            if (!argv[i])
                abort();
        saved_args_free(argc, argv);
    }
    enum { HEADS = 3, MEASURES = 4, STEPS = 9 };
    size_t steps[MEASURES], m = 0;
    float entropy[MEASURES * HEADS], topk[MEASURES * HEADS];
    if (!saved_measures_read((const char *)data, size, HEADS, MEASURES, STEPS, steps, entropy, topk,
                             &m, err, sizeof(err))) {
        if (m > MEASURES)
            abort();
        for (size_t i = 0; i < m; i++)
            if (steps[i] < 1 || steps[i] > STEPS || (i && steps[i] <= steps[i - 1]))
                abort();
    }
    size_t correct = 0, examples = 0;
    if (!saved_classify_read((const char *)data, size, &correct, &examples, err, sizeof(err)) &&
        (examples < 1 || examples > 1000000000 || correct > examples))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    saved_files(data, size);
    labelled_docs d;
    char err[1024];
    if (read_labels(data, size, "fuzz", &d, err, sizeof(err)))
        return 0;
    if (d.n < 2 || d.n > CAP || d.class_count < 1 || d.class_count > d.n)
        abort();
    for (size_t k = 1; k < d.class_count; k++)
        if (strcmp(d.classes[k - 1], d.classes[k]) >= 0)
            abort();
    for (size_t i = 0; i < d.n; i++)
        if (d.label[i] < 0 || (size_t)d.label[i] >= d.class_count || d.len[i] < 1 ||
            d.len[i] > BLOCK)
            abort();
    labels_free(&d);
    return 0;
}
