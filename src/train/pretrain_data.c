/* The full-training job's data: the tokenized corpus packed in blocks, the
 * held-out blocks, the ids checked against the model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gains_file.h"
#include "io_internal.h"
#include "job.h"
#include "pretrain_internal.h"

/* ---- data ---- */

static pfx_status load_blocks(pfx_pretrain_job *j, const char *path, pfx_blocks **out)
{
    pfx_dataset_options o;
    pfx_dataset_default_options(&o);
    o.max_length =
        (size_t)1 << 24; /* documents whole (the largest the data set keeps): the blocks cut them */
    o.append_eos = true;
    o.shuffle = false;
    pfx_dataset *ds = NULL;
    pfx_status st = pfx_dataset_load(path, j->tok, &o, &ds);
    if (st == PFX_SUCCESS)
        st = pfx_blocks_pack(ds, j->cfg->block, out);
    pfx_dataset_free(&ds);
    if (st != PFX_SUCCESS)
        return pfx_error(j->rt, st, "pretrain: %s", pfx_last_error(NULL));
    return PFX_SUCCESS;
}

pfx_status pfx_pretrain_load_data(pfx_pretrain_job *j)
{
    const pfx_pretrain_config *c = j->cfg;
    const char *tok_dir = pfx_pretrain_tokenizer_dir(c);
    pfx_status st = pfx_tokenizer_load(tok_dir, &j->tok);
    if (st != PFX_SUCCESS)
        return pfx_error(j->rt, st, "pretrain: the tokenizer: %s", pfx_last_error(NULL));
    if (pfx_tokenizer_special_id(j->tok, PFX_TOKEN_EOS) < 0)
        return pfx_error(
            j->rt, PFX_ERROR_INVALID_ARGUMENT,
            "pretrain: the tokenizer of %s names no end-of-text token to separate the documents",
            tok_dir);
    if ((st = load_blocks(j, c->data_path, &j->train)))
        return st;
    if (c->eval_path)
        return load_blocks(j, c->eval_path, &j->eval);
    const size_t n = pfx_blocks_count(j->train), held = n / 20 ? n / 20 : 1;
    if (n < 2)
        return pfx_error(
            j->rt, PFX_ERROR_OUT_OF_RANGE,
            "pretrain: %s fills %zu block of %zu tokens; holding one out for evaluation needs two "
            "(give more data, a smaller --block, or --eval FILE)",
            c->data_path, n, c->block);
    st = pfx_blocks_split(j->train, held, &j->eval);
    return st == PFX_SUCCESS ? st : pfx_error(j->rt, st, "pretrain: %s", pfx_last_error(NULL));
}

/* Every id of the blocks within the model's vocabulary. */
pfx_status pfx_pretrain_check_ids(pfx_pretrain_job *j, const pfx_blocks *b, const char *what)
{
    for (size_t i = 0; i < pfx_blocks_count(b); i++) {
        const int32_t *ids;
        pfx_blocks_get(b, i, &ids);
        for (size_t t = 0; t < j->cfg->block; t++)
            if (ids[t] < 0 || (size_t)ids[t] >= j->shape.vocab)
                return pfx_error(
                    j->rt, PFX_ERROR_INVALID_SHAPE,
                    "pretrain: the %s data holds token id %d; the model's vocab_size is %zu (the "
                    "tokenizer does not belong to the model)",
                    what, (int)ids[t], j->shape.vocab);
    }
    return PFX_SUCCESS;
}
