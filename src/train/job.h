/* What the training jobs (pretrain.c, tune.c) and their checkpoints share:
 * releasing tensor arrays, the output folder, the data-parallel settings'
 * check, the stop agreed over processes, the message naming the option a
 * checkpoint differs in. (The clock: pfx_host_seconds, internal.h.)
 * Not installed. */
#ifndef PFX_TRAIN_JOB_H
#define PFX_TRAIN_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "prefixcl/data.h"
#include "prefixcl/model.h"
#include "prefixcl/optimizer.h"
#include "prefixcl/tensor.h"

/* The dropout of one training micro-batch (model.h): the model's config.json
 * probabilities, or `override` (>= 0) on every site the family has
 * (GPT-2: embeddings, attention, residual; the Llama family: attention),
 * keyed by the run's seed, the optimizer step, the micro-batch and the
 * process's first item of it, so a resumed or data-parallel run draws the
 * same masks (pretrain numbers the items across the step's micro-batches,
 * micro 0: accumulation draws the masks of the one large batch). */
pfx_model_dropout pfx_job_dropout(const pfx_model *model, float override, uint64_t seed,
                                  uint64_t step, size_t micro, size_t first_item);
/* config.dropout checked: -1 (the config's) or in [0, 1). */
pfx_status pfx_job_check_dropout(pfx_runtime *rt, const char *job, float dropout);

/* Destroys t[0 .. n) and frees t; NULL-safe. */
void pfx_job_destroy_tensors(pfx_tensor **t, size_t n);

/* The output folder `dir` of job `job` (named in messages): PFX_ERROR_IO
 * when it exists and is not a folder; created when missing if `create`. */
pfx_status pfx_job_out_dir(pfx_runtime *rt, const char *job, const char *dir, bool create);

/* The data-parallel settings checked: PFX_ERROR_INVALID_ARGUMENT naming
 * config.dist.rank or config.dist.reduce ("JOB: config.dist...."). */
pfx_status pfx_job_check_dist(pfx_runtime *rt, const char *job, const pfx_data_parallel *d);

/* Whether any process asks for a stop: any(user, mine) with several
 * processes and the hook, else mine. */
bool pfx_job_any(size_t ranks, bool (*any)(void *user, bool mine), void *user, bool mine);

/* The first "key=value" line where option lists a (this run's) and b (a
 * checkpoint's) differ, for the message: "b's line (this run: a's line)". */
void pfx_job_first_difference(const char *a, const char *b, char *out, size_t cap);

/* Seconds rt has spent building (or loading) kernel programs so far
 * (pfx_cache_stats.build_seconds): what the jobs keep out of their rates
 * and time estimates, which count steady-state work only. */
double pfx_job_build_seconds(const pfx_runtime *rt);

/* The dataset options of the one rule by which tune and eval build their
 * examples (data.h, pfx_example_rule), and the rule as used: the
 * post-processor's special tokens, EOS unless no_eos (or the tokenizer has
 * none), cut at max_length; in file order, unshuffled (set shuffle and seed
 * after). */
pfx_status pfx_job_example_rule(pfx_runtime *rt, const char *job, const pfx_tokenizer *tok,
                                size_t max_length, bool no_eos, pfx_dataset_options *o,
                                pfx_example_rule *rule);

#endif
