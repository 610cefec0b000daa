/* The classification by the project's own job (exp.h): each finished run's
 * final model prefix-tuned (pfx_tune_run in its supervised mode: prompt and
 * completion, the loss on the completion only) to answer the WordNet
 * lexicographer file of a gloss, then scored on held-out glosses.
 *
 * The examples come from valid_labels.tsv, the only labelled documents of
 * the corpus (none of them trained the models): prompt "GLOSS\nlexicographer
 * file:" (the gloss cut to CLASSIFY_DOC_TOKENS tokens), completion " LEXNAME".
 * Documents at even indices are the tuning examples (as they train the
 * probe), odd ones the held-out examples (--classify-test of them, evenly
 * spaced), the same files for every arm and seed. A gain arm's model is
 * tuned with its gains folded into its query projections
 * (pfx_model_fold_gains: the gain model's function, with nothing of the
 * tune job's own gain training in the way). Every arm of a seed is tuned
 * with the same prefix length, steps, learning rate and seed.
 *
 * Held-out accuracy: each example's answer is the label whose completion
 * the model with its prefix finds likeliest (the sum of its tokens'
 * log-probabilities after the prompt; classify.h), argmax over every label.
 * Greedy decoding would also count answers that are no label at all as
 * wrong, and mixes the model's knowledge of the label set's spelling into
 * the figure; ranking the labels measures the choice alone, as
 * multiple-choice evaluations do. Each run's result goes to
 * RUN/classify/classify.json and is kept when the experiment resumes; a
 * stopped tuning resumes from its checkpoint. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "common/cli.h"
#include "common/tool_util.h"
#include "exp_classify.h"
#include "probe.h"
#include "saved.h"

/* Tokens of a gloss a prompt keeps: most definitions whole, the longest
 * examples cut (the cost of tuning and scoring grows with the prompt). */
#define CLASSIFY_DOC_TOKENS 48
#define CLASSIFY_ASK        "\nlexicographer file:"
#define CLASSIFY_BATCH      8 /* tuning examples a step (the tune job's default) */

/* labels_read's encoder, keeping each document's text beside its ids. */
static int encode_keep(void *user, const char *text, size_t len, int32_t **ids, size_t *count,
                       char *err, size_t err_cap)
{
    doc_texts *t = user;
    if (t->n == t->room) {
        const size_t more = t->room ? 2 * t->room : 1024;
        char **p = realloc(t->text, more * sizeof(char *));
        if (!p) {
            snprintf(err, err_cap, "out of host memory");
            return -1;
        }
        t->text = p;
        t->room = more;
    }
    if (pfx_tokenizer_encode(t->tok, text, len, 0, ids, count) != PFX_SUCCESS) {
        snprintf(err, err_cap, "%s", pfx_last_error(NULL));
        return -1;
    }
    if (!(t->text[t->n] = strndup(text, len))) {
        free(*ids);
        *ids = NULL;
        snprintf(err, err_cap, "out of host memory");
        return -1;
    }
    t->n++;
    return 0;
}

static void texts_free(doc_texts *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->text[i]);
    free(t->text);
    memset(t, 0, sizeof(*t));
}

/* The length of s[0..n) without an incomplete UTF-8 sequence at its end (a
 * cut between the bytes of one character). */
static size_t utf8_whole(const char *s, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0 || (unsigned char)s[i - 1] < 0x80)
        return n;
    const unsigned char lead = (unsigned char)s[i - 1];
    const size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return back + 1 == want ? n : i - 1;
}

/* The prompt of document i: its text, or the text of its first `keep`
 * tokens when it has more (labels_read keeps every token, and a length of
 * at least `keep` when there are more). malloc'd, or NULL. */
static char *prompt_of(const exp_state *s, const cls_data *x, size_t i, size_t keep)
{
    char *cut = NULL, *p = NULL;
    size_t len = 0;
    const char *text = x->t.text[i];
    if (x->d.len[i] > keep) {
        if (pfx_tokenizer_decode(s->tok, x->d.ids[i], keep, 0, &cut, &len) != PFX_SUCCESS)
            return NULL;
        cut[utf8_whole(cut, len)] = '\0';
        text = cut;
    }
    const size_t n = strlen(text) + sizeof(CLASSIFY_ASK);
    if ((p = malloc(n)))
        snprintf(p, n, "%s%s", text, CLASSIFY_ASK);
    free(cut);
    return p;
}

/* One JSONL line {"prompt": ..., "completion": " LEXNAME"}. */
static bool write_example(FILE *f, const char *prompt, const char *lexname)
{
    char completion[256];
    snprintf(completion, sizeof(completion), " %s", lexname);
    cJSON *o = cJSON_CreateObject();
    char *line = NULL;
    if (o && cJSON_AddStringToObject(o, "prompt", prompt) &&
        cJSON_AddStringToObject(o, "completion", completion))
        line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (line)
        fprintf(f, "%s\n", line);
    free(line);
    return line != NULL;
}

/* The held-out documents: at most cap (0: all) of the odd indices, evenly
 * spaced as labels_read spaces its documents. */
static size_t test_count(size_t n, size_t cap)
{
    const size_t odd = n / 2;
    return cap == 0 || cap > odd ? odd : cap;
}
static size_t test_doc(size_t n, size_t cap, size_t j)
{
    const size_t odd = n / 2, m = test_count(n, cap);
    const size_t q = (j * odd + m - 1) / m; /* ceil(j odd / m): from the first, evenly */
    return 2 * q + 1;
}

static void data_free(cls_data *x)
{
    for (size_t i = 0; x->prompt && i < x->tests; i++)
        free(x->prompt[i]);
    free(x->prompt);
    free(x->prompt_len);
    free(x->test_label);
    classify_contexts_free(&x->c);
    labels_free(&x->d);
    texts_free(&x->t);
}

/* The completions " LEXNAME" of every class, and their contexts. */
static int completions(exp_state *s, cls_data *x, size_t *longest)
{
    const size_t K = x->d.class_count;
    int32_t **ids = calloc(K, sizeof(int32_t *));
    size_t *len = calloc(K, sizeof(size_t));
    int rc = ids && len ? 0 : -1;
    *longest = 0;
    for (size_t k = 0; k < K && rc == 0; k++) {
        char text[256];
        snprintf(text, sizeof(text), " %s", x->d.classes[k]);
        const bool coded =
            pfx_tokenizer_encode(s->tok, text, strlen(text), 0, &ids[k], &len[k]) == PFX_SUCCESS;
        if (!coded || len[k] == 0) {
            fprintf(stderr, "prefixcl experiment gain: the label '%s': %s\n", x->d.classes[k],
                    coded ? "no tokens" : pfx_last_error(NULL));
            rc = -1;
        }
        *longest = len[k] > *longest ? len[k] : *longest;
    }
    if (rc == 0 && classify_contexts_build((const int32_t *const *)ids, len, K, &x->c))
        rc = -1;
    for (size_t k = 0; ids && k < K; k++)
        free(ids[k]);
    free(ids);
    free(len);
    return rc;
}

/* OUT/classify/train.jsonl and test.jsonl. */
static int write_files(exp_state *s, cls_data *x, size_t keep)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/classify", s->o.out);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "prefixcl experiment gain: cannot make %s: %s\n", dir, strerror(errno));
        return -1;
    }
    snprintf(x->train_path, sizeof(x->train_path), "%s/train.jsonl", dir);
    snprintf(x->test_path, sizeof(x->test_path), "%s/test.jsonl", dir);
    const size_t n = x->d.n;
    for (int part = 0; part < 2; part++) {
        const char *path = part ? x->test_path : x->train_path;
        pfx_output_file *f = NULL;
        bool ok = pfx_output_open(path, &f) == PFX_SUCCESS;
        const size_t count = part ? x->tests : (n + 1) / 2;
        for (size_t j = 0; ok && j < count; j++) {
            const size_t i = part ? test_doc(n, s->o.cls_test, j) : 2 * j;
            char *prompt = prompt_of(s, x, i, keep);
            ok = prompt && write_example(pfx_output_stream(f), prompt, x->d.classes[x->d.label[i]]);
            if (part && ok)
                x->test_label[j] = x->d.label[i];
            free(prompt);
        }
        if (!ok || pfx_output_commit(&f) != PFX_SUCCESS) {
            fprintf(stderr, "prefixcl experiment gain: writing %s: %s\n", path,
                    pfx_last_error(NULL));
            pfx_output_discard(&f);
            return -1;
        }
    }
    return 0;
}

/* Each held-out prompt's ids as the tune job builds the example (the
 * dataset of test.jsonl by its rule: no EOS, the post-processor's tokens),
 * its completion checked against its label's. */
static int read_prompts(exp_state *s, cls_data *x)
{
    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.format = PFX_DATA_JSONL;
    o.max_length = x->max_length;
    o.append_eos = false;
    o.shuffle = false;
    pfx_dataset *ds = NULL;
    pfx_dataset_info info;
    if (pfx_dataset_load(x->test_path, s->tok, &o, &ds) != PFX_SUCCESS ||
        pfx_dataset_get_info(ds, &info) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: %s: %s\n", x->test_path, pfx_last_error(NULL));
        pfx_dataset_free(&ds);
        return -1;
    }
    int rc = 0;
    if (info.examples != x->tests || info.truncated) {
        fprintf(stderr,
                "prefixcl experiment gain: %s: %zu of %zu examples kept, %zu cut at %zu tokens\n",
                x->test_path, info.examples, x->tests, info.truncated, x->max_length);
        rc = -1;
    }
    for (size_t j = 0; j < x->tests && rc == 0; j++) {
        const int32_t *ids, *labels;
        size_t len, p = 0;
        pfx_dataset_example(ds, j, &ids, &labels, &len);
        while (p < len && labels[p] == PFX_LABEL_IGNORE)
            p++;
        const size_t k = (size_t)x->test_label[j], a = x->c.at[k], m = x->c.at[k + 1] - a;
        if (len - p != m || memcmp(ids + p, x->c.ids + a, m * sizeof(int32_t))) {
            fprintf(stderr,
                    "prefixcl experiment gain: %s:%zu: the completion's tokens differ from the "
                    "label's alone\n",
                    x->test_path, j + 1);
            rc = -1;
            break;
        }
        if (!(x->prompt[j] = malloc((p ? p : 1) * sizeof(int32_t)))) {
            rc = -1;
            break;
        }
        memcpy(x->prompt[j], ids, p * sizeof(int32_t));
        x->prompt_len[j] = p;
        x->longest_prompt = p > x->longest_prompt ? p : x->longest_prompt;
    }
    pfx_dataset_free(&ds);
    return rc;
}

static int data_make(exp_state *s, cls_data *x)
{
    memset(x, 0, sizeof(*x));
    x->t.tok = s->tok;
    FILE *f;
    if (pfx_input_open(s->labels_path, &f) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl experiment gain: %s\n", pfx_last_error(NULL));
        return -1;
    }
    char err[1024];
    const int rc = labels_read(f, s->labels_path, 0, s->o.block,
                               pfx_tokenizer_special_id(s->tok, PFX_TOKEN_EOS), encode_keep, &x->t,
                               &x->d, err, sizeof(err));
    fclose(f);
    if (rc) {
        fprintf(stderr, "prefixcl experiment gain: %s\n", err);
        return -1;
    }
    size_t longest = 0, ask = 0;
    int32_t *ids = NULL;
    if (completions(s, x, &longest) ||
        pfx_tokenizer_encode(s->tok, CLASSIFY_ASK, strlen(CLASSIFY_ASK), 0, &ids, &ask) !=
            PFX_SUCCESS)
        return -1;
    free(ids);
    x->max_length = s->o.block - s->o.cls_prefix;
    /* two tokens to spare: the gloss's last piece and the question may merge */
    const size_t room = x->max_length > ask + longest + 2 ? x->max_length - ask - longest - 2 : 0;
    if (room < 4) {
        fprintf(stderr,
                "prefixcl experiment gain: --classify-prefix %zu leaves %zu of the %zu positions "
                "(--block) for a gloss; the question and the longest label take %zu\n",
                s->o.cls_prefix, room, s->o.block, ask + longest + 2);
        return -1;
    }
    x->tests = test_count(x->d.n, s->o.cls_test);
    x->test_label = calloc(x->tests ? x->tests : 1, sizeof(int32_t));
    x->prompt = calloc(x->tests ? x->tests : 1, sizeof(int32_t *));
    x->prompt_len = calloc(x->tests ? x->tests : 1, sizeof(size_t));
    if (!x->test_label || !x->prompt || !x->prompt_len) {
        fprintf(stderr, "prefixcl experiment gain: the classification: out of host memory\n");
        return -1;
    }
    const size_t keep = room < CLASSIFY_DOC_TOKENS ? room : CLASSIFY_DOC_TOKENS;
    s->cls_doc_tokens = keep;
    if (write_files(s, x, keep) || read_prompts(s, x))
        return -1;
    /* what answering the tuning examples' most frequent label scores */
    const size_t ntr = (x->d.n + 1) / 2;
    int32_t *ytr = malloc(ntr * sizeof(int32_t));
    if (!ytr)
        return -1;
    for (size_t j = 0; j < ntr; j++)
        ytr[j] = x->d.label[2 * j];
    s->cls_majority = probe_majority_accuracy(ytr, ntr, x->test_label, x->tests, x->d.class_count);
    free(ytr);
    s->cls_train = ntr;
    s->cls_test = x->tests;
    s->cls_classes = x->d.class_count;
    s->cls_contexts = x->c.count;
    return 0;
}

/* The run's model with its gains folded in, saved in dir (a gain arm). */
static int fold_model(exp_state *s, const exp_run *run, exp_arm_kind a, const char *dir)
{
    pfx_model *m = NULL;
    exp_gains g;
    if (exp_gains_load(s, run, a, &g))
        return -1;
    pfx_status st = pfx_model_load(s->rt, run->dir, NULL, &m);
    if (st == PFX_SUCCESS)
        st = pfx_model_fold_gains(m, &g.prefix);
    if (st == PFX_SUCCESS)
        st = pfx_model_save(m, dir, NULL);
    if (st != PFX_SUCCESS)
        fprintf(stderr, "prefixcl experiment gain: the %s arm's model with its gains folded: %s\n",
                exp_arm_names[a], pfx_last_error(s->rt));
    pfx_model_destroy(&m);
    exp_gains_free(&g);
    return st == PFX_SUCCESS ? 0 : -1;
}

/* A finished classification kept in path: 0 with the run's figures, 1 when
 * there is none, -1 when it cannot be read or holds another held-out set. */
static int kept(const cls_data *x, const char *path, exp_run *run)
{
    size_t len = 0, correct, n;
    char *text = saved_read(path, 1 << 16, &len), err[256];
    if (!text)
        return 1;
    int rc = saved_classify_read(text, len, &correct, &n, err, sizeof(err)) ? -1 : 0;
    free(text);
    if (rc == 0 && n != x->tests) {
        snprintf(err, sizeof(err), "%zu held-out examples, not %zu", n, x->tests);
        rc = -1;
    }
    if (rc) {
        fprintf(stderr, "prefixcl experiment gain: %s: %s\n", path, err);
        return -1;
    }
    run->cls_correct = correct;
    run->cls_acc = (double)correct / (double)n;
    /* measured in the earlier sitting */
    run->cls_loss_before = run->cls_loss_after = run->cls_scored_loss = NAN;
    return 0;
}

static int save_result(const char *path, size_t correct, size_t n)
{
    return exp_write_text(path, saved_classify_text(correct, n));
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* One run: tuned (or resumed), scored, its result saved. */
static int classify_run(exp_state *s, const cls_data *x, exp_run *run, exp_arm_kind a)
{
    const exp_options *o = &s->o;
    char dir[4200], model_dir[4300], path[4300];
    snprintf(dir, sizeof(dir), "%s/classify", run->dir);
    snprintf(path, sizeof(path), "%s/classify.json", dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "prefixcl experiment gain: cannot make %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (s->resume) {
        const int k = kept(x, path, run);
        if (k <= 0) {
            if (k == 0 && !o->quiet)
                printf("  classify %-8s seed %llu: accuracy %.3f (kept)\n", exp_arm_names[a],
                       (unsigned long long)run->seed, run->cls_acc);
            return k;
        }
    }
    snprintf(model_dir, sizeof(model_dir), "%s", run->dir);
    if (a != ARM_BASELINE) {
        snprintf(model_dir, sizeof(model_dir), "%s/model", dir);
        if (fold_model(s, run, a, model_dir))
            return -1;
    }
    pfx_tune_config c;
    pfx_tune_default_config(&c);
    c.model_dir = model_dir;
    c.tokenizer_dir = o->tokenizer;
    c.data_path = x->train_path;
    c.eval_path = x->test_path;
    c.out_dir = dir;
    c.prefix_len = o->cls_prefix;
    c.steps = o->cls_steps;
    c.batch = CLASSIFY_BATCH;
    c.max_length = x->max_length;
    c.no_eos = true; /* the completion is the label alone, scored so */
    c.lr = o->cls_lr;
    c.seed = run->seed;
    c.stop_flag = &cli_stop;
    char ckpt[4400];
    snprintf(ckpt, sizeof(ckpt), "%s/" PFX_TUNE_CHECKPOINT, dir);
    c.resume = s->resume && exists(ckpt);
    if (!o->quiet) {
        printf("  classify %-8s seed %llu: tuning %zu steps%s\n", exp_arm_names[a],
               (unsigned long long)run->seed, c.steps, c.resume ? " (resumed)" : "");
        fflush(stdout);
    }
    const double t0 = tool_now_s(), c0 = tool_cpu_s();
    pfx_tune_result r;
    const pfx_status st = pfx_tune_run(s->rt, &c, NULL, NULL, &r);
    const bool stopped = r.stopped;
    run->cls_loss_before = r.eval_before;
    run->cls_loss_after = r.eval_after;
    pfx_tune_result_free(&r);
    if (st != PFX_SUCCESS || stopped) {
        if (st != PFX_SUCCESS)
            fprintf(stderr, "prefixcl experiment gain: tuning %s: %s (%s)\n", dir,
                    pfx_status_string(st), pfx_last_error(s->rt));
        return -1;
    }
    const double t1 = tool_now_s();
    const long right = cls_score(s, x, model_dir, dir, &run->cls_scored_loss);
    if (right < 0)
        return -1;
    run->cls_correct = (size_t)right;
    run->cls_acc = (double)right / (double)x->tests;
    run->cls_seconds = tool_now_s() - t0;
    if (!o->quiet)
        printf("  classify %-8s seed %llu: accuracy %.3f (%ld of %zu held-out; held-out "
               "completion loss %.4f -> %.4f, %.4f by the scores; tuning %.0f s, scoring %.0f "
               "s, %.0f CPU s)\n",
               exp_arm_names[a], (unsigned long long)run->seed, run->cls_acc, right, x->tests,
               run->cls_loss_before, run->cls_loss_after, run->cls_scored_loss, t1 - t0,
               tool_now_s() - t1, tool_cpu_s() - c0);
    return save_result(path, run->cls_correct, x->tests);
}

int exp_classify_all(exp_state *s)
{
    if (s->o.cls_steps == 0)
        return 0;
    if (!s->o.quiet) {
        printf("classification\n");
        fflush(stdout);
    }
    cls_data x;
    int rc = data_make(s, &x);
    if (rc == 0 && !s->o.quiet)
        printf("  %zu tuning and %zu held-out glosses, %zu labels (%zu contexts a held-out "
               "example)\n",
               s->cls_train, s->cls_test, s->cls_classes, s->cls_contexts);
    for (size_t k = 0; k < s->o.seeds && rc == 0; k++)
        for (exp_arm_kind a = 0; a < ARM_COUNT && rc == 0; a++) {
            exp_run *run = exp_run_at(s, k, a);
            if (!run->done)
                continue;
            if (cli_stop) {
                rc = -1;
                break;
            }
            rc = classify_run(s, &x, run, a);
            run->cls_done = rc == 0;
        }
    data_free(&x);
    return rc;
}
