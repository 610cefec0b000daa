/*
 * Suite 'generate': the evaluation job (prefixcl/eval.h, pfx_eval_run) on the
 * tiny GPT-2 fixture with its tokenizer and a text file written here. Its
 * losses, frozen and with an adapter, equal the mean over the scored tokens
 * of the model's loss on each example alone (the batches weighted by their
 * tokens), for any batch size, the examples built by the rule tune builds
 * them by (EOS appended; none with no_eos); the progress callback sees every batch; a
 * stop before a pass ends gives that pass no loss; max_length is capped at
 * the positions the adapter's prefix leaves; bad options and inputs are
 * refused naming the field or the file.
 * usage: test_eval FIXTURE_DIR (tests/fixtures/generate) OUT_DIR
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pfx_test.h"
#include "tolerances.h"

static const char *fixture_dir, *out_dir;
static char model_dir[4200], adapter_dir[4200], llama_dir[4200], llama_adapter[4200],
    data_path[4200], empty_path[4200];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    snprintf(model_dir, sizeof(model_dir), "%s/gpt2", fixture_dir);
    snprintf(adapter_dir, sizeof(adapter_dir), "%s/gpt2/adapter0", fixture_dir);
    snprintf(llama_dir, sizeof(llama_dir), "%s/llama", fixture_dir);
    snprintf(llama_adapter, sizeof(llama_adapter), "%s/llama/adapter0", fixture_dir);
    mkdir(out_dir, 0777);
    /* 7 examples of uneven lengths: batches of 3 end short */
    snprintf(data_path, sizeof(data_path), "%s/eval.txt", out_dir);
    write_file(data_path,
               "the quick brown fox jumps over the lazy dog\nHello, world\nsketched harbour\n"
               "a duck, a student and a horse\nthe dog\nworld harbour fox fox duck\nstudent\n");
    snprintf(empty_path, sizeof(empty_path), "%s/empty.txt", out_dir);
    write_file(empty_path, "\n");
    return pfx_test_group_setup(state);
}

/* The reference: the model's loss on each example alone (batch 1), with the
 * adapter's prefix or none, weighted by the example's scored tokens. */
static double loss_one_by_one(pfx_runtime *rt, size_t max_length, const char *adapter, bool eos,
                              size_t *tokens)
{
    pfx_tokenizer *tok = NULL;
    pfx_dataset *ds = NULL;
    pfx_model *model = NULL;
    pfx_adapter_bank *bank = NULL;
    size_t P = 0;
    if (adapter)
        assert_int_equal(pfx_adapter_prefix_len(adapter, &P), PFX_SUCCESS);
    assert_int_equal(pfx_tokenizer_load(model_dir, &tok), PFX_SUCCESS);
    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length = max_length;
    o.shuffle = false;
    o.append_eos = eos;
    assert_int_equal(pfx_dataset_load(data_path, tok, &o, &ds), PFX_SUCCESS);
    pfx_context_params cp = { .max_batch = 1, .max_tokens = max_length, .max_prefix_len = P };
    pfx_context *ctx = NULL;
    assert_int_equal(pfx_model_load(rt, model_dir, NULL, &model), PFX_SUCCESS);
    assert_int_equal(pfx_context_create(model, &cp, &ctx), PFX_SUCCESS);
    int32_t entry = 0;
    if (adapter) {
        assert_int_equal(pfx_adapter_bank_create(model, 1, &bank), PFX_SUCCESS);
        assert_int_equal(pfx_adapter_bank_add(bank, adapter, &entry), PFX_SUCCESS);
    }
    int32_t *ids = malloc(max_length * sizeof(int32_t)),
            *labels = malloc(max_length * sizeof(int32_t)), len;
    assert_non_null(ids);
    assert_non_null(labels);
    pfx_data_position pos = { 0, 0 };
    double sum = 0.0;
    *tokens = 0;
    for (size_t k = 0; k < pfx_dataset_batches_per_epoch(ds, 1); k++) {
        size_t rows, width, count = 0;
        assert_int_equal(pfx_dataset_next_batch(ds, &pos, 1, ids, &len, labels, &rows, &width),
                         PFX_SUCCESS);
        for (size_t t = 1; t < width; t++)
            count += labels[t] != PFX_LABEL_IGNORE;
        if (!count)
            continue;
        pfx_model_batch mb = { 1, width, ids, &len, labels };
        pfx_model_prefix pre;
        memset(&pre, 0, sizeof(pre));
        if (adapter)
            assert_int_equal(pfx_adapter_bank_prefix(bank, &entry, 1, &pre), PFX_SUCCESS);
        double loss;
        assert_int_equal(pfx_model_loss(ctx, &mb, adapter ? &pre : NULL, &loss), PFX_SUCCESS);
        sum += loss * (double)count;
        *tokens += count;
    }
    free(ids);
    free(labels);
    pfx_adapter_bank_destroy(&bank);
    pfx_context_destroy(&ctx);
    pfx_model_destroy(&model);
    pfx_dataset_free(&ds);
    pfx_tokenizer_free(&tok);
    assert_true(*tokens > 0);
    return sum / (double)*tokens;
}

/* What the callback saw; it sets `stop` once stop_at batches of pass
 * stop_pass are done. */
typedef struct seen {
    size_t calls, pass, batch, tokens;
    double loss;
    size_t stop_pass, stop_at;
    volatile sig_atomic_t stop;
} seen;

static void on_batch(const pfx_eval_progress *p, void *user)
{
    seen *s = user;
    assert_true(p->pass >= s->pass);
    assert_true(p->pass > s->pass || p->batch == s->batch + 1);
    assert_true(p->batch <= p->batches);
    s->calls++;
    s->pass = p->pass;
    s->batch = p->batch;
    s->tokens = p->tokens;
    s->loss = p->loss;
    if (p->pass == s->stop_pass && p->batch == s->stop_at)
        s->stop = 1;
}

static void check_close(double got, double want)
{
    if (!(fabs(got - want) <= TOL_MODEL_FWD * fabs(want)))
        fail_msg("loss %.9f, one by one %.9f", got, want);
}

/* Frozen and with the adapter, batches of 1, 3 and 8, against the examples one by one. */
static void test_eval_losses(void **state)
{
    pfx_runtime *rt = *state;
    size_t tokens = 0, adapted_tokens = 0;
    const double frozen = loss_one_by_one(rt, 61, NULL, true, &tokens);
    const double adapted = loss_one_by_one(rt, 61, adapter_dir, true, &adapted_tokens);
    assert_int_equal(tokens, adapted_tokens);
    assert_true(fabs(frozen - adapted) > 1e-3); /* the adapter's prefix matters */
    const size_t batches[] = { 1, 3, 8 };
    for (size_t i = 0; i < sizeof(batches) / sizeof(batches[0]); i++) {
        pfx_eval_config c;
        pfx_eval_default_config(&c);
        c.model_dir = model_dir;
        c.data_path = data_path;
        c.adapter_path = adapter_dir;
        c.batch = batches[i];
        seen s = { 0 };
        pfx_eval_result r;
        assert_int_equal(pfx_eval_run(rt, &c, on_batch, &s, &r), PFX_SUCCESS);
        assert_false(r.stopped);
        assert_int_equal(r.passes, 2);
        assert_int_equal(r.passes_done, 2);
        assert_int_equal(r.examples, 7);
        assert_int_equal(r.batches, (7 + batches[i] - 1) / batches[i]);
        assert_int_equal(r.batches_done, r.batches);
        assert_int_equal(r.prefix_len, 3);
        assert_int_equal(r.max_length, 61); /* 128 by default; 64 positions less the prefix */
        assert_int_equal(r.rule.max_length, 61);
        assert_int_equal(r.rule.special, 0); /* GPT-2's post-processor adds none */
        assert_true(r.rule.eos_id >= 0);
        assert_int_equal(r.tokens, tokens);
        check_close(r.loss, frozen);
        check_close(r.adapter_loss, adapted);
        assert_true(fabs(r.perplexity - exp(r.loss)) <= 1e-12 * r.perplexity);
        assert_true(fabs(r.adapter_perplexity - exp(r.adapter_loss)) <=
                    1e-12 * r.adapter_perplexity);
        /* the callback: every batch of both passes, the last one's sums the result's */
        assert_int_equal(s.calls, 2 * r.batches);
        assert_int_equal(s.pass, 2);
        assert_int_equal(s.tokens, r.tokens);
        assert_true(s.loss == r.adapter_loss);
    }
    /* without an adapter: one pass, the whole length of the positions */
    pfx_eval_config c;
    pfx_eval_default_config(&c);
    c.model_dir = model_dir;
    c.data_path = data_path;
    pfx_eval_result r;
    assert_int_equal(pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    assert_int_equal(r.passes_done, 1);
    assert_int_equal(r.max_length, 64);
    assert_int_equal(r.prefix_len, 0);
    assert_true(isnan(r.adapter_loss));
    check_close(r.loss, frozen); /* no example reaches 61 tokens */
    /* no_eos: the text alone, as model(**tokenizer(text), labels=...) scores it */
    size_t plain_tokens = 0;
    const double plain = loss_one_by_one(rt, 64, NULL, false, &plain_tokens);
    c.no_eos = true;
    assert_int_equal(pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    assert_int_equal(r.rule.eos_id, -1);
    assert_int_equal(r.tokens, plain_tokens);
    assert_int_equal(plain_tokens + 7, tokens); /* one EOS scored per example */
    check_close(r.loss, plain);
}

/* A stop during a pass: that pass gives no loss, the ones done keep theirs. */
static void test_eval_stop(void **state)
{
    pfx_runtime *rt = *state;
    for (size_t stop_pass = 1; stop_pass <= 2; stop_pass++) {
        pfx_eval_config c;
        pfx_eval_default_config(&c);
        c.model_dir = model_dir;
        c.data_path = data_path;
        c.adapter_path = adapter_dir;
        c.batch = 2;
        seen s = { .stop_pass = stop_pass, .stop_at = 2 };
        c.stop_flag = &s.stop;
        pfx_eval_result r;
        assert_int_equal(pfx_eval_run(rt, &c, on_batch, &s, &r), PFX_SUCCESS);
        assert_true(r.stopped);
        assert_int_equal(r.batches, 4);
        assert_int_equal(r.batches_done, 2);
        assert_int_equal(r.passes_done, stop_pass - 1);
        assert_int_equal(s.calls, (stop_pass - 1) * 4 + 2);
        assert_true(isnan(r.adapter_loss));
        assert_true(stop_pass == 1 ? isnan(r.loss) : isfinite(r.loss));
    }
}

/* Every bad option names its field; bad inputs name the file. */
static void test_eval_refusals(void **state)
{
    pfx_runtime *rt = *state;
    pfx_eval_config good, c;
    pfx_eval_default_config(&good);
    good.model_dir = model_dir;
    good.data_path = data_path;
    pfx_eval_result r;
    assert_int_equal(pfx_eval_run(NULL, &good, NULL, NULL, &r), PFX_ERROR_NULL_ARGUMENT);
    assert_status_names(rt, pfx_eval_run(rt, NULL, NULL, NULL, &r), PFX_ERROR_NULL_ARGUMENT, "cfg");
    assert_status_names(rt, pfx_eval_run(rt, &good, NULL, NULL, NULL), PFX_ERROR_NULL_ARGUMENT,
                        "result");
    c = good, c.model_dir = NULL;
    assert_status_names(rt, pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_ERROR_INVALID_ARGUMENT,
                        "config.model_dir");
    c = good, c.data_path = "";
    assert_status_names(rt, pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_ERROR_INVALID_ARGUMENT,
                        "config.data_path");
    c = good, c.tokenizer_dir = "";
    assert_status_names(rt, pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_ERROR_INVALID_ARGUMENT,
                        "config.tokenizer_dir");
    c = good, c.adapter_path = "";
    assert_status_names(rt, pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_ERROR_INVALID_ARGUMENT,
                        "config.adapter_path");
    c = good, c.batch = 0;
    assert_status_names(rt, pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_ERROR_INVALID_ARGUMENT,
                        "config.batch");
    c = good, c.max_length = 1;
    assert_status_names(rt, pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_ERROR_INVALID_ARGUMENT,
                        "config.max_length");
    c = good, c.storage = (pfx_dtype)77;
    assert_status_names(rt, pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_ERROR_INVALID_ARGUMENT,
                        "config.storage");
    /* inputs: a folder without a tokenizer, an adapter of another model, no data */
    c = good, c.model_dir = llama_dir;
    assert_int_not_equal(pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    assert_non_null(strstr(pfx_last_error(rt), "tokenizer"));
    c = good, c.adapter_path = llama_adapter;
    assert_int_not_equal(pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    assert_non_null(strstr(pfx_last_error(rt), "token_dim"));
    c = good, c.data_path = empty_path;
    assert_int_not_equal(pfx_eval_run(rt, &c, NULL, NULL, &r), PFX_SUCCESS);
    assert_non_null(strstr(pfx_last_error(rt), empty_path));
    assert_true(isnan(r.loss));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_eval FIXTURE_DIR OUT_DIR\n");
        return 2;
    }
    fixture_dir = argv[1];
    out_dir = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_losses),
        cmocka_unit_test(test_eval_stop),
        cmocka_unit_test(test_eval_refusals),
    };
    return cmocka_run_group_tests(tests, setup, pfx_test_group_teardown);
}
