/* The outputs of `prefixcl tune` (tune_out.c), every file replaced
 * atomically: loss.csv and loss.png (pictures only in a build with cairo); the PEFT prefix-tuning adapter
 * (adapter_config.json, adapter_model.safetensors) in the output folder
 * itself, so PeftModel.from_pretrained(base, OUT) loads it; gains.safetensors
 * beside it (prefixcl's own: PEFT has no place for gains); the pictures of
 * tune_plot.h. */
#ifndef PFX_TOOLS_TUNE_OUT_H
#define PFX_TOOLS_TUNE_OUT_H

#include "tune_job.h"

/* The gains' file name inside the output folder. */
#define TUNE_GAINS "gains.safetensors"

/* Before any work: the output folder made (or there already as a folder) and
 * every file the run may write in it writable there, so that a run never
 * trains to fail at its end. 0, or 1 after printing why. */
int tune_out_check(const tune_config *c);

/* loss.csv (step, loss, grad_norm) and loss.png of the steps done; sets
 * r->pictures when the picture was drawn. */
int tune_out_curve(const char *dir, tune_result *r);

/* Everything, from the job's current prefixes (j->pk, j->pv) and gains
 * (j->gains_host, used with ramp); r->pictures as for tune_out_curve. 0, or
 * 1 after printing the error. */
int tune_out_write(tune_job *j, tune_result *r, float ramp);

#endif
