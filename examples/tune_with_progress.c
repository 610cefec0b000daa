/* Prefix-tune a frozen Hugging Face model folder from C: the library's
 * tuning job with a progress callback writes a PEFT adapter into OUT_DIR
 * (with loss.csv and a checkpoint); then the evaluation job scores a held-out
 * file without and with it.
 *
 *   tune_with_progress MODEL_DIR DATA_FILE EVAL_FILE OUT_DIR
 */
#include <stdio.h>

#include "prefixcl/prefixcl.h"

/* Called after every step; the job itself prints nothing. */
static void on_step(const pfx_tune_step *s, void *user)
{
    (void)user;
    printf("step %zu/%zu  loss %.4f  |g| %.3f  %.0f tokens/s\n", s->step, s->steps, s->loss,
           (double)s->grad_norm, s->tokens_per_s);
}

static int fail(pfx_runtime *rt, const char *what, pfx_status st)
{
    fprintf(stderr, "%s: %s (%s)\n", what, pfx_status_string(st), pfx_last_error(rt));
    pfx_runtime_destroy(&rt);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODEL_DIR DATA_FILE EVAL_FILE OUT_DIR\n", argv[0]);
        return 2;
    }
    pfx_runtime *rt = NULL;
    pfx_status st = pfx_runtime_create(&rt, NULL); /* the default device ($PREFIXCL_DEVICE first) */
    if (st)
        return fail(NULL, "runtime", st);

    pfx_tune_config c;
    pfx_tune_default_config(&c); /* then only what this small model needs */
    c.model_dir = argv[1];       /* its tokenizer.json too */
    c.data_path = argv[2];
    c.eval_path = argv[3];
    c.out_dir = argv[4];
    c.prefix_len = 4;
    c.hidden = 16; /* the prefix encoder's MLP; 0: train the prefixes directly */
    c.batch = 4;
    c.max_length = 32; /* with the prefix, within the model's 64 positions */
    c.steps = 6;
    c.warmup_steps = 1;
    pfx_tune_result r;
    if ((st = pfx_tune_run(rt, &c, on_step, NULL, &r)))
        return fail(rt, "tune", st);
    printf("evaluation loss %.4f -> %.4f; adapter in %s\n", r.eval_before, r.eval_after, c.out_dir);
    pfx_tune_result_free(&r);

    pfx_eval_config e; /* the adapter on the held-out file, as `prefixcl eval` does */
    pfx_eval_default_config(&e);
    e.model_dir = argv[1];
    e.adapter_path = argv[4];
    e.data_path = argv[3];
    e.max_length = c.max_length;
    pfx_eval_result er;
    if ((st = pfx_eval_run(rt, &e, NULL, NULL, &er)))
        return fail(rt, "eval", st);
    printf("perplexity %.2f frozen, %.2f with the adapter (%zu tokens)\n", er.perplexity,
           er.adapter_perplexity, er.tokens);
    pfx_runtime_destroy(&rt);
    return 0;
}
