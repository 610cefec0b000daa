/* The experiment's labelled validation documents (valid_labels.tsv,
 * tools/corpus/wordnet_corpus.py): "lexname TAB document" a line. Reading
 * is apart from encoding (a callback) so that the reader alone is fuzzed
 * (tests/fuzz/fuzz_experiment_files.c). */
#ifndef PFX_EXP_LABELS_H
#define PFX_EXP_LABELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct labelled_docs {
    size_t n;
    int32_t **ids;  /* [n] token ids of each document (malloc'd) */
    size_t *len;    /* [n] tokens kept (at most the block) */
    int32_t *label; /* [n] index into classes */
    char **classes; /* the distinct lexnames, sorted */
    size_t class_count;
} labelled_docs;

/* Encodes text[0..len) into *ids (malloc'd) and *count; nonzero on failure
 * with a message in err. */
typedef int (*labels_encode_fn)(void *user, const char *text, size_t len, int32_t **ids,
                                size_t *count, char *err, size_t err_cap);

/* Reads at most `cap` documents (0: all) of f, evenly spaced over its lines
 * (the file lists the nouns, then the verbs, adjectives and adverbs: its
 * first lines hold a few classes only), each encoded and cut to `block`
 * tokens (an empty one becomes the single token empty_id). Fewer than two
 * documents is an error. Returns 0, or -1 with a message naming name:line
 * in err and nothing left allocated. */
int labels_read(FILE *f, const char *name, size_t cap, size_t block, int32_t empty_id,
                labels_encode_fn encode, void *user, labelled_docs *d, char *err, size_t err_cap);
void labels_free(labelled_docs *d);

#endif
