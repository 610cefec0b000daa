/* The experiment's own files, read back when it resumes: OUT/experiment.json
 * (the options as typed, which --resume reuses) and each run's
 * measures.json (the per-head measures taken during training, which its
 * checkpoint does not hold), and each run's classify.json (its finished
 * classification, kept when the experiment resumes). Pure host code over cJSON: the command, its
 * tests and a fuzz harness. */
#ifndef PFX_TOOLS_EXPERIMENT_SAVED_H
#define PFX_TOOLS_EXPERIMENT_SAVED_H

#include <stddef.h>

#define SAVED_ARGS_FORMAT     "prefixcl-experiment-1"
#define SAVED_MEASURES_FORMAT "prefixcl-experiment-measures-1"
#define SAVED_CLASSIFY_FORMAT "prefixcl-experiment-classify-1"
#define SAVED_ARGS_MAX        256 /* arguments experiment.json may hold */

/* {"format": SAVED_ARGS_FORMAT, "argv": [strings]}: a malloc'd text, or
 * NULL (out of memory). */
char *saved_args_text(int argc, char *const *argv);
/* Reads that text: 1 .. SAVED_ARGS_MAX strings, none holding a NUL, into
 * *argv (a malloc'd array of malloc'd strings, NULL-terminated; free with
 * saved_args_free). 0, or -1 with the reason in err. */
int saved_args_read(const char *text, size_t len, int *argc, char ***argv, char *err, size_t cap);
void saved_args_free(int argc, char **argv);

/* {"format": SAVED_MEASURES_FORMAT, "heads": LH, "steps": [m], "entropy":
 * [m][LH], "top_k_mass": [m][LH]} (NaN as null). */
char *saved_measures_text(const size_t *steps, const float *entropy, const float *topk, size_t m,
                          size_t heads);
/* Reads that text for `heads` heads, at most cap measurements, into the
 * caller's steps [cap], entropy and topk [cap * heads]: steps ascending,
 * 1 .. max_step, values numbers or null (NaN). 0 with *m set, or -1 with
 * the reason in err. */
int saved_measures_read(const char *text, size_t len, size_t heads, size_t cap, size_t max_step,
                        size_t *steps, float *entropy, float *topk, size_t *m, char *err,
                        size_t errcap);

/* {"format": SAVED_CLASSIFY_FORMAT, "correct": C, "examples": N}: a run's
 * finished classification (C of the N held-out examples answered right). */
char *saved_classify_text(size_t correct, size_t examples);
/* Reads that text: whole numbers with 0 <= C <= N and 1 <= N <= 10^9. 0,
 * or -1 with the reason in err. */
int saved_classify_read(const char *text, size_t len, size_t *correct, size_t *examples, char *err,
                        size_t errcap);

/* A whole file of at most max_bytes, NUL-terminated, malloc'd; NULL when it
 * cannot be read or is larger. */
char *saved_read(const char *path, size_t max_bytes, size_t *len);

#endif
