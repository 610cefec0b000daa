/* The classification's pieces shared by exp_classify.c (the examples and
 * the runs) and exp_cls_score.c (the held-out scores). */
#ifndef PFX_TOOLS_EXPERIMENT_EXP_CLASSIFY_H
#define PFX_TOOLS_EXPERIMENT_EXP_CLASSIFY_H

#include "classify.h"
#include "exp.h"
#include "labels.h"

typedef struct doc_texts {
    const pfx_tokenizer *tok;
    char **text; /* [n] each document as read */
    size_t n, room;
} doc_texts;

typedef struct cls_data {
    labelled_docs d;
    doc_texts t;
    char train_path[4300], test_path[4300];
    size_t max_length;   /* tokens of an example (positions left by the prefix) */
    classify_contexts c; /* the labels' completions and their contexts */
    int32_t *test_label; /* [tests] */
    int32_t **prompt;    /* [tests] each held-out prompt's ids, as tuning builds them */
    size_t *prompt_len;
    size_t tests;
    size_t longest_prompt;
} cls_data;

/* The held-out examples answered right by the model in model_dir with the
 * prefix tuned in adapter_dir, and in *loss the mean loss of the right
 * labels' tokens (what the tune job's evaluation of the same examples
 * gives); -1 on failure or a stop. */
long cls_score(exp_state *s, const cls_data *x, const char *model_dir, const char *adapter_dir,
               double *loss);

#endif
