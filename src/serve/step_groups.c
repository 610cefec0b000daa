/* The step of several gains as one step per adapter entry (step_groups.h). */
#include <stdbool.h>
#include <stdlib.h>

#include "serve_internal.h"
#include "step_groups.h"

pfx_status pfx_step_run_grouped(pfx_model *model, pfx_kv_cache *cache, const pfx_adapter_bank *bank,
                                const pfx_serve_step *step, pfx_tensor *logits, float *host,
                                size_t vocab)
{
    const size_t B = step->batch;
    pfx_status st = pfx_serve_step_run(model, cache, bank, step, logits);
    if (st == PFX_SUCCESS)
        return pfx_tensor_read(logits, 0, B * vocab, host);
    if (st != PFX_ERROR_UNSUPPORTED || !step->adapter)
        return st;
    int32_t *lens = malloc(B * sizeof(int32_t));
    bool *done = calloc(B, sizeof(bool));
    st = lens && done ? PFX_SUCCESS
                      : pfx_error(model->rt, PFX_ERROR_OUT_OF_MEMORY, "serve step: host memory");
    for (size_t first = 0; st == PFX_SUCCESS && first < B; first++) {
        if (done[first] || !step->lens[first])
            continue;
        const int32_t entry = step->adapter[first];
        for (size_t b = 0; b < B; b++) {
            const bool mine = step->lens[b] && step->adapter[b] == entry;
            lens[b] = mine ? step->lens[b] : 0;
            done[b] |= mine;
        }
        pfx_serve_step one = *step;
        one.lens = lens;
        st = pfx_serve_step_run(model, cache, bank, &one, logits);
        for (size_t b = 0; st == PFX_SUCCESS && b < B; b++)
            if (lens[b])
                st = pfx_tensor_read(logits, b * vocab, vocab, host + b * vocab);
    }
    free(lens);
    free(done);
    return st;
}
