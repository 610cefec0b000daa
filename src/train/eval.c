/* The evaluation job (prefixcl/eval.h): the options, the model, tokenizer,
 * adapter and data set, and one pass over the data set per prefix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "job.h"
#include "prefixcl/data.h"
#include "prefixcl/eval.h"
#include "prefixcl/generate.h"
#include "prefixcl/tokenizer.h"

void pfx_eval_default_config(pfx_eval_config *c)
{
    if (!c)
        return;
    *c = (pfx_eval_config){ .batch = 4, .max_length = 0, .storage = PFX_DTYPE_F32 };
}

typedef struct eval_job {
    pfx_runtime *rt;
    const pfx_eval_config *cfg;
    pfx_tokenizer *tok;
    pfx_model *model;
    pfx_context *ctx;
    pfx_adapter_bank *bank;
    pfx_dataset *ds;
    int32_t *ids, *labels, *lens, *entry; /* a batch, and the adapter's bank entry per row */
} eval_job;

static void job_free(eval_job *j)
{
    pfx_dataset_free(&j->ds);
    pfx_adapter_bank_destroy(&j->bank);
    pfx_context_destroy(&j->ctx);
    pfx_model_destroy(&j->model);
    pfx_tokenizer_free(&j->tok);
    free(j->ids);
    free(j->labels);
    free(j->lens);
    free(j->entry);
}

static pfx_status bad(pfx_runtime *rt, const char *field, const char *why)
{
    return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT, "eval: config.%s %s", field, why);
}

static pfx_status check_config(pfx_runtime *rt, const pfx_eval_config *c)
{
    if (!c->model_dir || !*c->model_dir)
        return bad(rt, "model_dir", "is NULL or empty: give the model's folder");
    if (!c->data_path || !*c->data_path)
        return bad(rt, "data_path", "is NULL or empty");
    if (c->tokenizer_dir && !*c->tokenizer_dir)
        return bad(rt, "tokenizer_dir", "is empty (NULL: the model's folder)");
    if (c->adapter_path && !*c->adapter_path)
        return bad(rt, "adapter_path", "is empty (NULL: no adapter)");
    if (c->batch == 0)
        return bad(rt, "batch", "must be at least 1");
    if (c->max_length == 1)
        return bad(rt, "max_length", "must be at least 2 tokens (0: the default length)");
    if (c->storage != PFX_DTYPE_F32 && c->storage != PFX_DTYPE_F16 &&
        c->storage != PFX_DTYPE_BF16 && c->storage != PFX_DTYPE_Q8_0)
        return bad(rt, "storage", "is not F32, F16, BF16 or Q8_0");
    return PFX_SUCCESS;
}

/* An error a loader recorded for the thread, on the job's runtime. */
static pfx_status loader_error(pfx_runtime *rt, pfx_status st)
{
    return st == PFX_SUCCESS ? st : pfx_error(rt, st, "eval: %s", pfx_last_error(NULL));
}

/* The model, the adapter in a bank of one (its prefix length), the
 * positions that prefix leaves, the tokenizer, the data set, and a context
 * sized for them (forward only: no activations kept). */
static pfx_status load(eval_job *j, pfx_eval_result *r)
{
    const pfx_eval_config *c = j->cfg;
    pfx_model_shape shape;
    pfx_model_params mp = { .storage = c->storage };
    int32_t entry = -1;
    pfx_status st;
    if ((st = pfx_model_load(j->rt, c->model_dir, &mp, &j->model)) ||
        (st = pfx_model_get_shape(j->model, &shape)))
        return st;
    if (c->adapter_path && ((st = pfx_adapter_bank_create(j->model, 1, &j->bank)) ||
                            (st = pfx_adapter_bank_add(j->bank, c->adapter_path, &entry))))
        return st;
    r->prefix_len = pfx_adapter_bank_prefix_len(j->bank);
    if (r->prefix_len >= shape.max_positions)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_RANGE,
                         "eval: %s: a prefix of %zu leaves none of the model's %zu positions",
                         c->adapter_path, r->prefix_len, shape.max_positions);
    const size_t room = shape.max_positions - r->prefix_len,
                 asked = c->max_length ? c->max_length : PFX_DATA_DEFAULT_MAX_LENGTH;
    r->max_length = asked < room ? asked : room;
    const char *tok_dir = c->tokenizer_dir ? c->tokenizer_dir : c->model_dir;
    if ((st = pfx_tokenizer_load(tok_dir, &j->tok)))
        return pfx_error(j->rt, st, "eval: the tokenizer of %s: %s", tok_dir, pfx_last_error(NULL));
    pfx_dataset_options o;
    if ((st = pfx_job_example_rule(j->rt, "eval", j->tok, r->max_length, c->no_eos, &o, &r->rule)))
        return st;
    if ((st = loader_error(j->rt, pfx_dataset_load(c->data_path, j->tok, &o, &j->ds))))
        return st;
    pfx_dataset_info di;
    pfx_dataset_get_info(j->ds, &di);
    r->examples = di.examples;
    r->batches = pfx_dataset_batches_per_epoch(j->ds, c->batch);
    pfx_context_params cp = { .max_batch = c->batch,
                              .max_tokens = r->max_length,
                              .recompute = true,
                              .max_prefix_len = r->prefix_len };
    if ((st = pfx_context_create(j->model, &cp, &j->ctx)))
        return st;
    j->ids = malloc(c->batch * r->max_length * sizeof(int32_t));
    j->labels = malloc(c->batch * r->max_length * sizeof(int32_t));
    j->lens = malloc(c->batch * sizeof(int32_t));
    j->entry = calloc(c->batch, sizeof(int32_t));
    if (!j->ids || !j->labels || !j->lens || !j->entry)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_MEMORY, "eval: host memory");
    for (size_t b = 0; b < c->batch; b++)
        j->entry[b] = entry;
    return PFX_SUCCESS;
}

/* One pass over the data set (pass 1: the frozen model, 2: with the
 * adapter): the mean loss over every scored token, or a stop. */
static pfx_status pass(eval_job *j, size_t number, pfx_eval_progress_fn on_batch, void *user,
                       pfx_eval_result *r, double *mean)
{
    const pfx_eval_config *c = j->cfg;
    pfx_data_position pos = { 0, 0 };
    double sum = 0.0;
    size_t total = 0;
    pfx_status st;
    r->batches_done = 0;
    for (size_t k = 0; k < r->batches; k++) {
        if (c->stop_flag && *c->stop_flag) {
            r->stopped = true;
            return PFX_SUCCESS;
        }
        size_t rows = 0, width = 0;
        if ((st = loader_error(j->rt, pfx_dataset_next_batch(j->ds, &pos, c->batch, j->ids, j->lens,
                                                             j->labels, &rows, &width))))
            return st;
        size_t count = 0;
        for (size_t b = 0; b < rows; b++)
            for (size_t t = 1; t < width; t++)
                count += j->labels[b * width + t] != PFX_LABEL_IGNORE;
        if (rows && count) {
            pfx_model_batch mb = { rows, width, j->ids, j->lens, j->labels };
            pfx_model_prefix pre;
            memset(&pre, 0, sizeof(pre));
            double loss = 0.0;
            const bool adapter = number == 2;
            if ((adapter && (st = pfx_adapter_bank_prefix(j->bank, j->entry, rows, &pre))) ||
                (st = pfx_model_loss(j->ctx, &mb, adapter ? &pre : NULL, &loss)))
                return st;
            sum += loss * (double)count;
            total += count;
        }
        r->batches_done = k + 1;
        if (on_batch) {
            pfx_eval_progress p = { .pass = number,
                                    .passes = r->passes,
                                    .batch = k + 1,
                                    .batches = r->batches,
                                    .tokens = total,
                                    .loss = total ? sum / (double)total : NAN };
            on_batch(&p, user);
        }
    }
    if (!total)
        return pfx_error(j->rt, PFX_ERROR_OUT_OF_RANGE, "eval: %s scores no token (max_length %zu)",
                         c->data_path, r->max_length);
    r->tokens = total;
    *mean = sum / (double)total;
    r->passes_done = number;
    return PFX_SUCCESS;
}

pfx_status pfx_eval_run(pfx_runtime *rt, const pfx_eval_config *cfg, pfx_eval_progress_fn on_batch,
                        void *user, pfx_eval_result *result)
{
    if (!rt)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "eval: rt is NULL");
    if (!cfg || !result)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "eval: %s is NULL", !cfg ? "cfg" : "result");
    memset(result, 0, sizeof(*result));
    result->loss = result->perplexity = result->adapter_loss = result->adapter_perplexity = NAN;
    pfx_status st = check_config(rt, cfg);
    if (st != PFX_SUCCESS)
        return st;
    result->passes = cfg->adapter_path ? 2 : 1;
    eval_job j = { .rt = rt, .cfg = cfg };
    const double t0 = pfx_host_seconds();
    double mean;
    if ((st = load(&j, result)) || (st = pass(&j, 1, on_batch, user, result, &mean)) ||
        result->stopped)
        goto out;
    result->loss = mean;
    result->perplexity = exp(mean);
    if (result->passes == 2 && !(st = pass(&j, 2, on_batch, user, result, &mean)) &&
        !result->stopped) {
        result->adapter_loss = mean;
        result->adapter_perplexity = exp(mean);
    }
out:
    result->seconds = pfx_host_seconds() - t0;
    job_free(&j);
    return st;
}
