/* prefixcl experiment gain: the attention-gain experiment as one command
 * (docs/design.md, "Full training" and "Analysis"). The same model trained
 * in several arms (no gain, linear, tanh, structured, linear on selected
 * heads) from the same seed, on the same data order, for the same steps,
 * each a pfx_pretrain_run; then per arm the validation perplexity (beside
 * the validation set's unigram perplexity), generation speed, the heads
 * whose gains settled, a linear probe of the final hidden states and a
 * classification by prefix tuning of the final model; a report in the
 * shape of the claims it checks.
 *
 * One purpose a file: exp_cmd.c (options, the order of the work),
 * exp_arms.c (the runs and the per-step measurements), settled.c (the
 * settled measure), probe.c (the probe) and exp_probe.c (its features),
 * exp_classify.c (the classification by prefix tuning) and classify.c (its
 * label scores), exp_unigram.c and unigram.c (the unigram perplexity),
 * exp_speed.c (tokens/s), exp_plot.c (pictures), exp_report.c (report.md,
 * results.json). */
#ifndef PFX_TOOLS_EXPERIMENT_EXP_H
#define PFX_TOOLS_EXPERIMENT_EXP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "prefixcl/prefixcl.h"
#include "verdict.h"

typedef enum exp_arm_kind {
    ARM_BASELINE = 0, /* gain off */
    ARM_LINEAR,       /* 1 + g on every head: the recipe of pfx_pretrain_default_config */
    ARM_TANH,         /* 1 + tanh g */
    ARM_DIM,          /* the structured gain, q * (1 + G) per head and dimension */
    ARM_SELECTED,     /* 1 + g on the heads the linear arm moved most early */
    ARM_UNIFORM,      /* 1 + g, the gains starting uniform in [-A, A] (--uniform-init) */
    ARM_DECAY,        /* 1 + g, the gains' learning rate decaying faster (--gain-lr-decay) */
    ARM_COUNT
} exp_arm_kind;

extern const char *const exp_arm_names[ARM_COUNT];

/* The settled measure's thresholds; the report's table uses EXP_THR_MAIN. */
#define EXP_THRESHOLDS 3
extern const float exp_thresholds[EXP_THRESHOLDS];
#define EXP_THR_MAIN 1

typedef struct exp_options {
    const char *corpus, *tokenizer, *out, *device;
    size_t layers, hidden, heads, block, batch, steps;
    size_t seeds; /* repeats with seeds seed .. seed + seeds - 1 */
    uint64_t seed;
    float lr;            /* the weights'; the gains' is half of it */
    float uniform_init;  /* the uniform arm's A */
    float gain_lr_decay; /* the decay arm's fraction of the decay steps */
    size_t warmup;       /* learning-rate warm-up and gain ramp, steps */
    size_t top_k;
    size_t measure_every; /* per-head measures every K steps */
    size_t eval_every, eval_blocks;
    size_t probe_docs; /* validation documents the probe reads (0: all) */
    size_t gen_tokens, gen_reps;
    size_t cls_steps;  /* the classification's tuning steps (0: no classification) */
    size_t cls_prefix; /* its prefix length */
    float cls_lr;      /* its learning rate */
    size_t cls_test;   /* its held-out examples (0: every one) */
    bool arm[ARM_COUNT];
    bool quiet;
    char *command_line; /* as typed, for the report */
} exp_options;

/* Generation speed of an arm against the baseline, by one clock. */
typedef struct exp_speed_figs {
    double tok_s, base_tok_s; /* medians: this arm's model, and the baseline's paired with it */
    double ratio_lo, ratio_med,
        ratio_hi; /* paired ratios tok_s / base_tok_s over the repetitions */
} exp_speed_figs;

/* The clocks of the speed figures: wall time (what a user waits), and the
 * process's CPU time (PoCL's worker threads included), which on a CPU
 * device shared with other jobs counts the work without the contention. */
enum { EXP_WALL = 0, EXP_CPU = 1, EXP_CLOCKS = 2 };

/* One arm of one seed. */
typedef struct exp_run {
    bool done;
    char dir[4096]; /* out/ARM or out/ARM/seed-S */
    uint64_t seed;
    pfx_pretrain_result r; /* curves; r.gains [steps + 1][L * H] (NULL for the baseline) */
    /* per-head measures on the fixed validation batch after each measured step */
    size_t m;
    size_t *steps; /* [m] */
    float *gain;   /* [m][LH]: g (the structured gain: the mean of G over the head's dims) */
    float *entropy, *topk;       /* [m][LH] */
    uint8_t *heads;              /* the selected arm's trained heads [LH] (else NULL) */
    int settled[EXP_THRESHOLDS]; /* -1: the window is too short to tell */
    int8_t *sign;                /* [LH] at EXP_THR_MAIN */
    double ppl;                  /* exp(final evaluation loss) */
    exp_speed_figs speed[EXP_CLOCKS];
    exp_speed_figs folded[EXP_CLOCKS]; /* the model with its gains folded into its queries */
    double probe_acc, probe_majority;
    bool cls_done;                          /* classified (exp_classify.c) */
    size_t cls_correct;                     /* held-out examples answered right */
    double cls_acc;                         /* their share */
    double cls_loss_before, cls_loss_after; /* held-out completion loss around the tuning (NAN
                                             * when kept from an earlier sitting) */
    double cls_scored_loss;  /* the same after it, from the scores (exp_cls_score.c) */
    double cls_seconds;      /* tuning and scoring */
    float *gain_off_entropy; /* [LH]: the final model with its gains set to 0 (NULL: baseline) */
    double seconds;          /* training */
} exp_run;

typedef struct exp_state {
    exp_options o;
    bool resume; /* --resume: each run from its checkpoint and measures.json */
    pfx_runtime *rt;
    pfx_tokenizer *tok;
    pfx_model_shape shape;
    size_t LH;
    char config_dir[4096]; /* out/model: config.json */
    char train_path[4096], valid_path[4096], labels_path[4096];
    int32_t *probe_ids; /* [batch * block]: the fixed validation batch of the measures */
    size_t probe_rows;
    int32_t *sentence; /* a real validation sentence for the heat maps */
    size_t sentence_len;
    exp_run *runs;      /* [seeds][ARM_COUNT] */
    uint8_t *selected;  /* [LH] per seed... of seed 0 (the report's); every seed selects its own */
    size_t selected_at; /* the linear arm's step the selection reads */
    size_t probe_train, probe_test, probe_classes;
    size_t cls_train, cls_test, cls_classes, cls_contexts; /* the classification's examples */
    size_t cls_doc_tokens;                                 /* of a gloss its prompt keeps */
    double cls_majority; /* answering the tuning examples' most frequent label */
    double unigram_ppl;  /* the validation tokens' unigram perplexity (unigram.h) */
    size_t unigram_tokens;
    char date[64];
    double seconds_total, seconds_speed, seconds_probe,
        seconds_classify; /* wall time: all, generation, probe, classification */
    char heat_note[512];  /* which heads the heat maps show */
} exp_state;

static inline exp_run *exp_run_at(exp_state *s, size_t seed, exp_arm_kind a)
{
    return &s->runs[seed * ARM_COUNT + a];
}

/* exp_arms.c: the model's config.json in s->config_dir; the fixed batch and
 * sentence. 0 or -1 after saying why on stderr. */
int exp_prepare(exp_state *s);
/* Trains arm a of seed index k into its folder and measures it on the way. */
int exp_run_arm(exp_state *s, size_t k, exp_arm_kind a);
/* The gains of a finished arm (its gains.safetensors) as a model prefix;
 * storage owned by *g. */
typedef struct exp_gains {
    pfx_model_prefix prefix;
    float *gains, *dim_gains;
} exp_gains;
int exp_gains_load(const exp_state *s, const exp_run *run, exp_arm_kind a, exp_gains *g);
void exp_gains_free(exp_gains *g);
/* A finished arm's model in a context for forward passes of up to `batch` rows
 * (the context keeps the model: pfx_context_destroy releases both). */
pfx_context *exp_model_load(exp_state *s, const exp_run *run, size_t batch);
/* text (malloc'd, freed here; NULL: out of memory) and a newline replacing
 * path; 0, or -1 after saying why. */
int exp_write_text(const char *path, char *text);

/* settled measure over a run's gain history, every threshold */
void exp_settle(exp_state *s, exp_run *run);

/* exp_speed.c: generation tokens/s of every seed's arms against that seed's
 * baseline model, repetitions interleaved. */
int exp_speed(exp_state *s);
/* The new tokens a generation asks for: --gen-tokens, within the positions
 * the prompt leaves. */
size_t exp_gen_tokens(const exp_state *s);

/* exp_probe.c: the probe of every finished run (final model, its gains). */
int exp_probe_all(exp_state *s);

/* exp_classify.c: every finished run's final model prefix-tuned on the
 * lexicographer-file classification and scored on held-out glosses
 * (nothing when --classify-steps is 0). */
int exp_classify_all(exp_state *s);

/* exp_unigram.c: s->unigram_ppl. */
int exp_unigram(exp_state *s);

/* exp_plot.c: the pictures in s->o.out; the number written, or -1. */
int exp_plot_all(exp_state *s, char *note, size_t cap);

/* exp_report.c */
int exp_report_write(exp_state *s);

/* exp_claims.c: the claims section of report.md, each with its verdict
 * (verdict.h); the heads of a run with a trained gain; the clock the speed
 * claims are judged by; the perplexity verdict of "arm a below arm b" with
 * the means over the paired seeds. */
void exp_claims_write(exp_state *s, FILE *f);
size_t exp_trained_heads(const exp_state *s, const exp_run *run);
int exp_judge_clock(const exp_state *s);
verdict exp_ppl_verdict(exp_state *s, exp_arm_kind a, exp_arm_kind b, double *mean_a,
                        double *mean_b);
/* The classification accuracy verdict of "arm a above arm b", likewise. */
verdict exp_cls_verdict(exp_state *s, exp_arm_kind a, exp_arm_kind b, double *mean_a,
                        double *mean_b);

#endif
