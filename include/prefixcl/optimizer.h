/*
 * prefixcl: AdamW on the device, with parameter groups, global gradient-norm
 * clipping, a NaN/Inf guard that skips the whole step, learning-rate and
 * gain-ramp schedules, and host export/import of the optimizer state.
 *
 * Usage:
 *
 *     pfx_optimizer *opt = NULL;
 *     pfx_optimizer_params params = { .max_grad_norm = 1.0f, .warmup_steps = 100 };
 *     pfx_optimizer_create(rt, &params, &opt);
 *     pfx_optimizer_group_params prefix = PFX_OPTIMIZER_GROUP_DEFAULTS;
 *     prefix.lr = 1e-2f;
 *     pfx_optimizer_group_params gains = prefix;
 *     gains.lr = prefix.lr / 2; gains.weight_decay = 0.0f;
 *     unsigned g_prefix, g_gain;
 *     pfx_optimizer_add_group(opt, &prefix, &g_prefix);
 *     pfx_optimizer_add_group(opt, &gains, &g_gain);
 *     pfx_optimizer_add_param(opt, g_prefix, E, dE, "encoder.E");
 *     pfx_optimizer_add_param(opt, g_gain, gain, dgain, "layer0.gain");
 *     for (...) {
 *         float r = pfx_optimizer_gain_ramp(opt);  // pass to the attention desc
 *         ... forward, backward into dE, dgain ...
 *         pfx_optimizer_report rep;
 *         pfx_optimizer_step(opt, &rep);
 *     }
 *     pfx_optimizer_destroy(&opt);
 *
 * Frozen weights are simply not registered. The optimizer keeps pointers to
 * the registered tensors: they must outlive it. It never writes gradients
 * (clipping scales them inside the update kernel) and never zeroes them.
 *
 * The update, per element, for a parameter updated for the t-th time (t >= 1),
 * with the group's lr, beta1, beta2, eps, weight decay wd, the schedule factor
 * f of this step (see below) and the clipping scale c, is exactly
 * torch.optim.AdamW (amsgrad=False, maximize=False):
 *
 *     lr_t = lr * f
 *     g    = c * grad
 *     m    = beta1 * m + (1 - beta1) * g
 *     v    = beta2 * v + (1 - beta2) * g^2
 *     p    = p * (1 - lr_t * wd)                    (decoupled weight decay, first)
 *     p    = p - lr_t * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 *
 * m and v start at zero. float32 storage and arithmetic on the device; the
 * bias corrections are computed in double on the host.
 *
 * Clipping (torch.nn.utils.clip_grad_norm_): norm = sqrt(sum over every
 * registered gradient of g^2), c = min(1, max_grad_norm / (norm + 1e-6)), or
 * c = 1 when max_grad_norm is 0. The norm is a deterministic fixed-order
 * reduction on the device (per-tensor work-group partial sums, then one final
 * sum in registration order; no atomics): the same inputs on the same device
 * give bitwise the same results.
 *
 * Non-finite guard: when the norm is NaN or Inf (a NaN or Inf in any gradient,
 * or a sum of squares beyond float range), the step changes nothing: no
 * parameter, moment or step count; report.skipped is true and report.grad_norm
 * is NaN or Inf. The decision is made on the device, in the same reduction.
 *
 * Host synchronization: pfx_optimizer_step enqueues everything, then does one
 * small blocking read (the norm, the scale and the skip flag, 12 bytes) so
 * that it can keep the step count and fill the report. Nothing else blocks.
 *
 * Schedules, as functions of the step count s (successful updates so far; a
 * skipped step does not advance them):
 *   learning rate of the next update (t = s + 1):
 *     f = pfx_schedule_linear_warmup(t, warmup_steps)       = min(1, t / warmup_steps)
 *     PFX_LR_CONSTANT: f stays 1 after warm-up.
 *     PFX_LR_COSINE:   for t > warmup_steps,
 *       f = min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + cos(pi * min(1, (t - warmup_steps) / decay_steps)))
 *       (reaches the floor min_lr_ratio at t = warmup_steps + decay_steps and stays there).
 *   gain ramp for the forward pass before the next update:
 *     r = pfx_schedule_linear_warmup(s, gain_ramp_steps)    = min(1, s / gain_ramp_steps)
 *     so the first forward runs with r = 0 (gains off) and r = 1 from step
 *     gain_ramp_steps on; gain_ramp_steps = 0 gives r = 1 throughout.
 *
 * Errors name the offending argument in pfx_last_error(rt) (pfx_last_error(NULL)
 * when no runtime is known, e.g. a NULL optimizer).
 */
#ifndef PREFIXCL_OPTIMIZER_H
#define PREFIXCL_OPTIMIZER_H

#include "prefixcl/io.h"
#include "prefixcl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfx_optimizer pfx_optimizer;

/* Data parallelism for the training jobs (pfx_pretrain_config.dist,
 * pfx_tune_config.dist): a launcher (MPI, say) runs the job in `ranks`
 * processes with the same options; each takes its share of every batch's
 * rows (rows * rank / ranks ..., shares differing by at most one); `reduce`
 * replaces its gradients by the global ones (each process's weighted by
 * `count`, the labels it scored) and its loss by the global mean; `any` makes
 * every process stop at the same step; `check`, when given, is called on
 * every rank after each optimizer step (step 1-based) to compare the
 * processes' parameters, an error from it ending the run. Only rank 0 writes
 * the outputs and the checkpoint; every rank reads a checkpoint to resume.
 * ranks 0 or 1: one process, no hook called. */
typedef struct pfx_data_parallel {
    size_t rank, ranks;
    pfx_status (*reduce)(void *user, pfx_optimizer *opt, double *count, double *mean_loss);
    bool (*any)(void *user, bool mine);
    pfx_status (*check)(void *user, pfx_optimizer *opt, uint64_t step);
    /* when given (ranks > 1, jobs that support it: pretrain), called once
     * every parameter is registered, before a checkpoint is restored: the
     * process keeps the AdamW state of its share of the parameters only
     * (dist.h, pfx_dist_shard_optimizer), and every process writes its part
     * of the checkpoint */
    pfx_status (*shard)(void *user, pfx_optimizer *opt);
    void *user;
} pfx_data_parallel;

typedef enum pfx_lr_decay {
    PFX_LR_CONSTANT = 0, /* constant after warm-up */
    PFX_LR_COSINE = 1,   /* cosine decay to min_lr_ratio over decay_steps after warm-up */
} pfx_lr_decay;

/* Optimizer-wide settings. Designated initializers; omitted fields are 0:
 * no clipping, no warm-up, constant learning rate, no gain ramp. */
typedef struct pfx_optimizer_params {
    float max_grad_norm;      /* global L2 clipping threshold; 0 = off; finite, >= 0 */
    uint32_t warmup_steps;    /* linear learning-rate warm-up; 0 = none */
    pfx_lr_decay decay;       /* after warm-up */
    uint32_t decay_steps;     /* PFX_LR_COSINE: length of the decay (>= 1) */
    float min_lr_ratio;       /* PFX_LR_COSINE: floor, a fraction of each group's lr, in [0, 1] */
    uint32_t gain_ramp_steps; /* linear gain ramp r; 0 = r is 1 from the start */
} pfx_optimizer_params;

/* One parameter group. Every field is taken literally (beta1 = 0 is legal),
 * so start from PFX_OPTIMIZER_GROUP_DEFAULTS (torch.optim.AdamW's defaults). */
typedef struct pfx_optimizer_group_params {
    float lr;             /* finite, >= 0 */
    float beta1;          /* in [0, 1) */
    float beta2;          /* in [0, 1) */
    float eps;            /* finite, > 0 */
    float weight_decay;   /* decoupled; finite, >= 0 */
    float decay_fraction; /* PFX_LR_COSINE: this group's cosine reaches the floor after this
                           * fraction of decay_steps (at least one step) and stays there: a
                           * faster decay of its learning rate; 0 or 1: the optimizer's
                           * schedule; in [0, 1] */
} pfx_optimizer_group_params;

#define PFX_OPTIMIZER_GROUP_DEFAULTS                                                               \
    ((pfx_optimizer_group_params){                                                                 \
        .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 1e-2f })

typedef struct pfx_optimizer_report {
    float grad_norm;  /* global L2 norm of the gradients before clipping; NaN/Inf when skipped */
    float clip_scale; /* c applied to the gradients (1 without clipping, 0 when skipped) */
    float lr_factor;  /* schedule factor f of this step (each group used lr * f) */
    bool skipped;     /* a non-finite norm: nothing was changed */
    uint64_t step;    /* step count after this call */
} pfx_optimizer_report;

typedef struct pfx_optimizer_param_info {
    const char *name; /* owned by the optimizer */
    unsigned group;
    size_t numel;
    uint64_t step; /* updates this parameter has had (its bias-correction t) */
} pfx_optimizer_param_info;

/* Creates an optimizer on rt. params may be NULL (all zero). Errors: NULL
 * rt/out, max_grad_norm or min_lr_ratio not finite or out of range, an
 * unknown decay, PFX_LR_COSINE with decay_steps = 0. */
PFX_API pfx_status pfx_optimizer_create(pfx_runtime *rt, const pfx_optimizer_params *params,
                                        pfx_optimizer **out);

/* Releases the moments and workspaces (device memory accounting returns to
 * where it was) and sets *opt to NULL; NULL-safe. Registered tensors are not
 * touched. */
PFX_API void pfx_optimizer_destroy(pfx_optimizer **opt);

/* Adds a parameter group; *group_id receives its id (0, 1, ... in order).
 * Errors: NULL arguments, lr/eps/weight_decay not finite (PFX_ERROR_NOT_FINITE),
 * lr < 0, beta outside [0, 1), eps <= 0, weight_decay < 0 (INVALID_ARGUMENT). */
PFX_API pfx_status pfx_optimizer_add_group(pfx_optimizer *opt,
                                           const pfx_optimizer_group_params *params,
                                           unsigned *group_id);

/* Registers a float32 parameter and its gradient (same shape, same runtime as
 * the optimizer) in a group, under a unique non-empty name (< 128 bytes; used
 * by the state export). Allocates m and v (2 x the parameter's bytes,
 * accounted) set to zero. May be called after steps have been taken: the new
 * parameter starts at its own t = 0. Errors: NULL arguments, an unknown group
 * (INVALID_ARGUMENT), a non-f32 tensor (DTYPE_MISMATCH), shapes that differ
 * (INVALID_SHAPE), a tensor of another runtime (RUNTIME_MISMATCH), param ==
 * grad or a tensor already registered as any parameter or gradient
 * (ALIASING), a duplicate, empty, too long or non-UTF-8 name (INVALID_ARGUMENT). */
PFX_API pfx_status pfx_optimizer_add_param(pfx_optimizer *opt, unsigned group_id, pfx_tensor *param,
                                           pfx_tensor *grad, const char *name);

/* One step over every registered parameter (see the top of this file).
 * report may be NULL. A skipped step returns PFX_SUCCESS with
 * report->skipped = true. Errors: NULL opt, no parameter registered, OpenCL
 * failures. */
PFX_API pfx_status pfx_optimizer_step(pfx_optimizer *opt, pfx_optimizer_report *report);

/* Successful steps so far (0 for NULL). */
PFX_API uint64_t pfx_optimizer_step_count(const pfx_optimizer *opt);
/* Schedule factor f the next step will use, and the gain ramp r for the
 * forward before it (see the top of this file); 0 for NULL. */
PFX_API float pfx_optimizer_lr_factor(const pfx_optimizer *opt);
PFX_API float pfx_optimizer_gain_ramp(const pfx_optimizer *opt);

/* min(1, x / n) for n > 0; 1 for n = 0. */
PFX_API float pfx_schedule_linear_warmup(uint64_t x, uint64_t n);
/* floor + (1 - floor) * 0.5 * (1 + cos(pi * min(1, x / n))); floor for n = 0. */
PFX_API float pfx_schedule_cosine(uint64_t x, uint64_t n, float floor);

/* ---- state: export to host arrays and import ----
 * The state is the step count plus, per parameter, its own step and its
 * moments m and v (numel floats each). A round trip (export, then import into
 * an optimizer with the same groups and parameters, names and sizes, whose
 * parameters hold the same values) continues bitwise like an uninterrupted run. */

PFX_API size_t pfx_optimizer_param_count(const pfx_optimizer *opt);
PFX_API pfx_status pfx_optimizer_get_param(const pfx_optimizer *opt, size_t index,
                                           pfx_optimizer_param_info *info);
/* The tensors registered as parameter index (either out pointer may be NULL):
 * for work done on the gradients between the backward and the step, such as
 * summing them across processes (dist.h). Errors: NULL opt, an index
 * beyond the count (OUT_OF_RANGE). */
PFX_API pfx_status pfx_optimizer_param_tensors(pfx_optimizer *opt, size_t index, pfx_tensor **param,
                                               pfx_tensor **grad);
/* Index of the parameter called name; PFX_ERROR_INVALID_ARGUMENT when none. */
PFX_API pfx_status pfx_optimizer_find_param(const pfx_optimizer *opt, const char *name,
                                            size_t *index);
/* Floats of all moments together: 2 x the sum of the parameters' numel
 * (the state sharded over processes, dist.h: of this process's parameters). */
PFX_API pfx_status pfx_optimizer_state_size(const pfx_optimizer *opt, size_t *floats);

/* Largest step count accepted (import, set_step_count, a state file): a count
 * that cannot advance would divide by a zero bias correction. Larger counts are
 * PFX_ERROR_INVALID_ARGUMENT (PFX_ERROR_FORMAT in a file). */
#define PFX_OPTIMIZER_MAX_STEP (UINT64_MAX - 1)

/* Reads parameter index's step, m and v (numel floats each; any of the three
 * may be NULL to skip it); blocks. The state sharded over processes
 * (dist.h), m and v of another process's parameter are
 * PFX_ERROR_INVALID_ARGUMENT, as is importing them; a state file
 * (pfx_optimizer_save, _load) is refused, a checkpoint holds this process's
 * part. */
PFX_API pfx_status pfx_optimizer_export_param(pfx_optimizer *opt, size_t index, uint64_t *step,
                                              float *m, float *v);
/* Writes them back; blocks. m and v must be finite and v >= 0
 * (PFX_ERROR_NOT_FINITE / INVALID_ARGUMENT), step at most PFX_OPTIMIZER_MAX_STEP. */
PFX_API pfx_status pfx_optimizer_import_param(pfx_optimizer *opt, size_t index, uint64_t step,
                                              const float *m, const float *v);
/* Sets the optimizer's step count (the position of the schedules). */
PFX_API pfx_status pfx_optimizer_set_step_count(pfx_optimizer *opt, uint64_t step);

/* The whole state as a safetensors file (include/prefixcl/io.h), written
 * atomically: per parameter the F32 tensors "<name>.exp_avg" (m) and
 * "<name>.exp_avg_sq" (v) in its shape (torch's state names), and
 * __metadata__ {"format": "prefixcl-adamw-1", "step": "<count>",
 * "<name>.step": "<its t>"}. Parameter values are not in it (save them with
 * the prefixes). */
PFX_API pfx_status pfx_optimizer_save(pfx_optimizer *opt, const char *path);
/* Loads such a file into an optimizer with the same parameter names and
 * shapes (any float dtype in the file is converted). Everything is read and
 * checked before anything changes: a missing or extra tensor, a wrong shape,
 * missing or bad metadata (PFX_ERROR_FORMAT / INVALID_SHAPE; counts are
 * decimal digits only, at most PFX_OPTIMIZER_MAX_STEP) or a non-finite
 * moment (PFX_ERROR_NOT_FINITE) leaves the optimizer as it was. */
PFX_API pfx_status pfx_optimizer_load(pfx_optimizer *opt, const char *path);

/* ---- a training checkpoint: the state with the parameters' values ----
 * One safetensors file written atomically (io.h): per parameter NAME its
 * value NAME and its moments NAME.exp_avg and NAME.exp_avg_sq (F32, its
 * shape) and the metadata NAME.step; the metadata "optimizer_step"; and the
 * job's own tensors and metadata beside them (names that differ from
 * those). prefixcl's training jobs (tune, pretrain) keep theirs so; resuming
 * from one continues bit for bit. */
PFX_API pfx_status pfx_optimizer_save_checkpoint(pfx_optimizer *opt, const char *path,
                                                 const pfx_named_tensor *extra, size_t extra_count,
                                                 const pfx_st_metadata *meta, size_t meta_count);

/* Checks the optimizer's part of an open checkpoint f (label names it in
 * messages) against opt, changing nothing: "optimizer_step" a whole number
 * no larger than max_step (a skipped step does not advance it; max_name
 * names max_step in the message), every parameter's value and moments
 * present with its number of values, every NAME.step equal to
 * optimizer_step. *step receives optimizer_step. PFX_ERROR_FORMAT naming the
 * field. A job checks its own fields next, then restores. */
PFX_API pfx_status pfx_optimizer_check_checkpoint(const pfx_optimizer *opt,
                                                  const pfx_safetensors *f, const char *label,
                                                  uint64_t max_step, const char *max_name,
                                                  uint64_t *step);

/* Every parameter's value, moments and step, and the step count, from f
 * (checked as above, and every moment finite with exp_avg_sq >= 0, before
 * the first write); blocks. */
PFX_API pfx_status pfx_optimizer_restore_checkpoint(pfx_optimizer *opt, const pfx_safetensors *f,
                                                    const char *label);

#ifdef __cplusplus
}
#endif

#endif
