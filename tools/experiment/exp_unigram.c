/* The validation set's unigram perplexity (exp.h, unigram.h): the token
 * counts of the training blocks as every arm's job packs train.txt
 * (documents joined with EOS, blocks of --block), over the tokens its
 * evaluation scores: every position but the first of valid.txt's first
 * --eval-blocks blocks (the loss at position t predicts token t + 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "exp.h"
#include "unigram.h"

/* path tokenized and packed as pretraining packs text. */
static int blocks_of(exp_state *s, const char *path, pfx_blocks **out)
{
    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length = (size_t)1 << 24;
    o.append_eos = true;
    o.shuffle = false;
    pfx_dataset *ds = NULL;
    const pfx_status st = pfx_dataset_load(path, s->tok, &o, &ds) == PFX_SUCCESS
                              ? pfx_blocks_pack(ds, s->o.block, out)
                              : PFX_ERROR_IO;
    pfx_dataset_free(&ds);
    if (st != PFX_SUCCESS)
        fprintf(stderr, "prefixcl experiment gain: %s: %s\n", path, pfx_last_error(NULL));
    return st == PFX_SUCCESS ? 0 : -1;
}

int exp_unigram(exp_state *s)
{
    const size_t V = pfx_tokenizer_vocab_size(s->tok), T = s->o.block;
    pfx_blocks *train = NULL, *valid = NULL;
    uint64_t *counts = calloc(V ? V : 1, sizeof(uint64_t)), total = 0;
    int32_t *scored = NULL;
    int rc = -1;
    if (blocks_of(s, s->train_path, &train) || blocks_of(s, s->valid_path, &valid))
        goto out;
    if (!counts)
        goto oom;
    for (size_t i = 0; i < pfx_blocks_count(train); i++) {
        const int32_t *ids;
        if (pfx_blocks_get(train, i, &ids) != PFX_SUCCESS)
            goto fail;
        for (size_t t = 0; t < T; t++)
            if (ids[t] >= 0 && (size_t)ids[t] < V) {
                counts[ids[t]]++;
                total++;
            }
    }
    size_t n = pfx_blocks_count(valid);
    n = s->o.eval_blocks < n ? s->o.eval_blocks : n;
    if (!(scored = malloc((n ? n : 1) * (T - 1) * sizeof(int32_t))))
        goto oom;
    for (size_t i = 0; i < n; i++) {
        const int32_t *ids;
        if (pfx_blocks_get(valid, i, &ids) != PFX_SUCCESS)
            goto fail;
        for (size_t t = 1; t < T; t++)
            scored[i * (T - 1) + t - 1] = ids[t];
    }
    s->unigram_tokens = n * (T - 1);
    s->unigram_ppl = exp(unigram_loss(counts, V, total, scored, s->unigram_tokens));
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "prefixcl experiment gain: the unigram perplexity: out of host memory\n");
    goto out;
fail:
    fprintf(stderr, "prefixcl experiment gain: the unigram perplexity: %s\n", pfx_last_error(NULL));
out:
    free(counts);
    free(scored);
    pfx_blocks_free(&train);
    pfx_blocks_free(&valid);
    return rc;
}
