/* libFuzzer harness for the reader of the training jobs' checkpoints
 * (src/train/checkpoint.c, what --resume reads): every input is parsed as
 * safetensors and, when it parses, read as the job its format names
 * describes it (tune: options "config", losses "a,b,c" and eval_before,
 * eval_losses "step:value," when the options evaluate between,
 * report.grad_norms, report.mass_before, report.lrs (optional); pretrain:
 * options "options", losses "a,b,c," finite, eval_losses "step:value,",
 * grad_norms, gain_trace, lrs (optional)) for a model of 2 layers and 3 heads and at most 16 steps,
 * with the options the file holds and no optimizer (its part is the
 * optimizer's own reader). It must be refused cleanly or give counts within
 * their bounds and every value a finite curve promises. Also linked into
 * the normal build by run_corpus.c, which replays
 * tests/fuzz/corpus/checkpoint/. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "fuzz.h"

enum { LH = 2 * 3, STEPS = 16, EPOCH = 0, INDEX = 1, DONE = 2 };

/* What the reader fills. */
typedef struct values {
    double losses[STEPS], evals[STEPS + 1], eval_before;
    float grad_norms[STEPS], lrs[STEPS], table[(STEPS + 1) * LH];
} values;

static pfx_status read_checkpoint(const uint8_t *data, size_t size, const char *label,
                                  pfx_checkpoint *c, values *v)
{
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_safetensors_open_memory(data, size, label, &f);
    if (st != PFX_SUCCESS)
        return st;
    const char *format = pfx_safetensors_metadata_get(f, "format");
    const bool tune = format && !strcmp(format, "prefixcl-tune-checkpoint-1");
    const char *options = pfx_safetensors_metadata_get(f, tune ? "config" : "options");
    *c = (pfx_checkpoint){
        .job = tune ? "tune" : "pretrain",
        .format = tune ? "prefixcl-tune-checkpoint-1" : "prefixcl-pretrain-checkpoint-1",
        .options_key = tune ? "config" : "options",
        .options = options ? options : "",
        .counts = { [EPOCH] = { "data_epoch", 0, UINT32_MAX, "2^32 - 1" },
                    [INDEX] = { "data_index", 0, 1000, "the training blocks" },
                    [DONE] = { "steps_done", 0, STEPS, "the steps planned" } },
        .count_n = 3,
        .steps = DONE,
        .curve_n = 2,
        .tensor_n = 2,
    };
    if (tune) {
        c->curves[0] = (pfx_ckpt_curve){ "eval_before", &v->eval_before, PFX_CKPT_FIXED,
                                         PFX_CKPT_LIST, false };
        c->curves[1] =
            (pfx_ckpt_curve){ "losses", v->losses, PFX_CKPT_STEPS, PFX_CKPT_LIST, false };
        c->tensors[0] =
            (pfx_ckpt_tensor){ "report.grad_norms", v->grad_norms, PFX_CKPT_STEPS, 1, false };
        c->tensors[1] =
            (pfx_ckpt_tensor){ "report.mass_before", v->table, PFX_CKPT_FIXED, LH, false };
        /* a run that evaluates between keeps its evaluations (options line eval_every=) */
        if (strstr(c->options, "eval_every="))
            c->curves[c->curve_n++] =
                (pfx_ckpt_curve){ "eval_losses", v->evals, PFX_CKPT_START_AND_STEPS,
                                  PFX_CKPT_AT_STEPS, true };
    } else {
        c->curves[0] =
            (pfx_ckpt_curve){ "losses", v->losses, PFX_CKPT_STEPS, PFX_CKPT_LIST_ENDED, true };
        c->curves[1] = (pfx_ckpt_curve){ "eval_losses", v->evals, PFX_CKPT_START_AND_STEPS,
                                         PFX_CKPT_AT_STEPS, true };
        c->tensors[0] = (pfx_ckpt_tensor){ "grad_norms", v->grad_norms, PFX_CKPT_STEPS, 1, false };
        /* the gain trace of a run with a gain */
        if (pfx_safetensors_find(f, "gain_trace") >= 0)
            c->tensors[1] =
                (pfx_ckpt_tensor){ "gain_trace", v->table, PFX_CKPT_START_AND_STEPS, LH, false };
        else
            c->tensor_n = 1;
    }
    /* both jobs: the learning rates, absent from older files */
    c->tensors[c->tensor_n++] = (pfx_ckpt_tensor){ "lrs", v->lrs, PFX_CKPT_STEPS, 1, true };
    if (tune)
        c->tensors[c->tensor_n - 1].name = "report.lrs";
    st = pfx_checkpoint_read(c, f, label);
    pfx_safetensors_close(&f);
    return st;
}

bool pfx_fuzz_accepts(const uint8_t *data, size_t size, const char *label)
{
    pfx_checkpoint c;
    values v;
    return read_checkpoint(data, size, label, &c, &v) == PFX_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfx_checkpoint c;
    values v;
    if (read_checkpoint(data, size, "fuzz", &c, &v) != PFX_SUCCESS)
        return 0;
    for (size_t i = 0; i < c.count_n; i++)
        if (c.counts[i].value > c.counts[i].max)
            abort();
    const size_t done = (size_t)c.counts[DONE].value;
    for (size_t k = 0; k < c.curve_n; k++) {
        const pfx_ckpt_curve *cv = &c.curves[k];
        const size_t n = cv->length == PFX_CKPT_FIXED   ? 1
                         : cv->length == PFX_CKPT_STEPS ? done
                                                        : done + 1;
        for (size_t i = 0; cv->finite && cv->form != PFX_CKPT_AT_STEPS && i < n; i++)
            if (!isfinite(cv->values[i]))
                abort();
        for (size_t i = 0; cv->form == PFX_CKPT_AT_STEPS && i < n; i++)
            if (isinf(cv->values[i]))
                abort();
    }
    return 0;
}
