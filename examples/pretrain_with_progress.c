/* Pre-train a small GPT-2 from a config.json alone, with a learnable gain
 * per head, from C: the library's full-training job with a progress
 * callback (the job writes a Hugging Face folder, the gains, the loss curve
 * and a checkpoint into OUT_DIR). Then the prefix-tuning job on the model it
 * wrote, frozen: a PEFT adapter in OUT_DIR/prefix.
 *
 *   pretrain_with_progress CONFIG_DIR TOKENIZER_DIR DATA_FILE OUT_DIR
 */
#include <math.h>
#include <stdio.h>

#include "prefixcl/prefixcl.h"

static void on_step(const pfx_pretrain_step *s, void *user)
{
    (void)user;
    printf("step %zu/%zu  loss %.4f  |g| %.3f  r %.2f%s\n", s->step, s->steps, s->loss,
           (double)s->grad_norm, (double)s->gain_ramp, s->skipped ? "  (skipped)" : "");
}

static void on_tune_step(const pfx_tune_step *s, void *user)
{
    (void)user;
    printf("tune step %zu/%zu  loss %.4f\n", s->step, s->steps, s->loss);
}

/* Prefix tuning of the pre-trained model (its weights stay as they are). */
static pfx_status tune(pfx_runtime *rt, const char *model_dir, const char *tokenizer_dir,
                       const char *data)
{
    char out[4096];
    snprintf(out, sizeof(out), "%s/prefix", model_dir);
    pfx_tune_config c;
    pfx_tune_default_config(&c);
    c.model_dir = model_dir;
    c.tokenizer_dir = tokenizer_dir;
    c.data_path = data;
    c.out_dir = out;
    c.prefix_len = 4;
    c.hidden = 16;
    c.batch = 4;
    c.max_length = 32;
    c.steps = 8;
    pfx_tune_result r;
    pfx_status st = pfx_tune_run(rt, &c, on_tune_step, NULL, &r);
    if (st == PFX_SUCCESS)
        printf("prefix tuning: evaluation loss %.4f -> %.4f, adapter in %s\n", r.eval_before,
               r.eval_after, out);
    pfx_tune_result_free(&r);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s CONFIG_DIR TOKENIZER_DIR DATA_FILE OUT_DIR\n", argv[0]);
        return 2;
    }
    pfx_runtime *rt = NULL;
    pfx_status st = pfx_runtime_create(&rt, NULL);
    if (st) {
        fprintf(stderr, "runtime: %s\n", pfx_last_error(NULL));
        return 1;
    }
    pfx_pretrain_config c;
    pfx_pretrain_default_config(&c); /* the recipe of gain pre-training */
    c.config_dir = argv[1];
    c.tokenizer_dir = argv[2];
    c.data_path = argv[3];
    c.out_dir = argv[4];
    c.block = 32;
    c.batch = 4;
    c.steps = 12;
    c.lr = 3e-3f;
    c.gain_lr = 1.5e-3f;
    c.warmup_steps = 2;
    c.gain_mode = PFX_GAIN_LINEAR;
    c.gain_ramp_steps = 4;
    pfx_pretrain_result r;
    st = pfx_pretrain_run(rt, &c, on_step, NULL, &r);
    if (st == PFX_SUCCESS)
        printf("evaluation loss %.4f -> %.4f (perplexity %.1f), %zu values trained\n",
               r.eval_losses[0], r.eval_losses[r.steps], exp(r.eval_losses[r.steps]),
               r.trained_values);
    if (st == PFX_SUCCESS)
        st = tune(rt, c.out_dir, c.tokenizer_dir, c.data_path);
    if (st != PFX_SUCCESS)
        fprintf(stderr, "%s (%s)\n", pfx_status_string(st), pfx_last_error(rt));
    pfx_pretrain_result_free(&r);
    pfx_runtime_destroy(&rt);
    return st == PFX_SUCCESS ? 0 : 1;
}
