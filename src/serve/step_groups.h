/* One serving step whose slots may carry adapters of different gains. */
#ifndef PFX_SERVE_STEP_GROUPS_H
#define PFX_SERVE_STEP_GROUPS_H

#include "prefixcl/generate.h"

/* pfx_serve_step_run (step->lens set), then the next-token logits of every
 * active slot into host [batch, vocab] through the device tensor logits
 * [>= batch, vocab]. Slots whose adapters carry different gains cannot share
 * a step in the library (PFX_ERROR_UNSUPPORTED): the step then runs once per
 * adapter entry among the active slots, the others idle (lens 0). */
pfx_status pfx_step_run_grouped(pfx_model *model, pfx_kv_cache *cache, const pfx_adapter_bank *bank,
                                const pfx_serve_step *step, pfx_tensor *logits, float *host,
                                size_t vocab);

#endif
