/* The floor a model that learned nothing reaches: each token predicted by
 * its frequency among the training tokens, add-one smoothed over the
 * vocabulary, p(t) = (count(t) + 1) / (total + vocab). The experiment prints
 * its perplexity on the validation tokens beside each arm's. Pure host
 * code: the experiment command and its tests. */
#ifndef PFX_TOOLS_EXPERIMENT_UNIGRAM_H
#define PFX_TOOLS_EXPERIMENT_UNIGRAM_H

#include <stddef.h>
#include <stdint.h>

/* The mean of -log p(ids[i]) over n tokens, with counts [vocab] of total
 * training tokens. NAN for n 0, vocab 0 or an id outside the vocabulary. */
double unigram_loss(const uint64_t *counts, size_t vocab, uint64_t total, const int32_t *ids,
                    size_t n);

#endif
