/* Helpers of the training jobs (job.h). */
#include "job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

void pfx_job_destroy_tensors(pfx_tensor **t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        pfx_tensor_destroy(&t[i]);
    free(t);
}

pfx_status pfx_job_out_dir(pfx_runtime *rt, const char *job, const char *dir, bool create)
{
    struct stat sb;
    if (create && mkdir(dir, 0755) != 0 && errno != EEXIST)
        return pfx_error(rt, PFX_ERROR_IO, "%s: cannot create the output folder '%s': %s", job, dir,
                         strerror(errno));
    if (stat(dir, &sb) != 0) /* missing is fine when it is made later */
        return !create && errno == ENOENT
                   ? PFX_SUCCESS
                   : pfx_error(rt, PFX_ERROR_IO, "%s: the output folder '%s': %s", job, dir,
                               strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return pfx_error(rt, PFX_ERROR_IO, "%s: the output '%s' exists and is not a folder", job,
                         dir);
    return PFX_SUCCESS;
}

bool pfx_job_any(size_t ranks, bool (*any)(void *user, bool mine), void *user, bool mine)
{
    return ranks > 1 && any ? any(user, mine) : mine;
}

void pfx_job_first_difference(const char *a, const char *b, char *out, size_t cap)
{
    while (*a && *b) {
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        const size_t na = ea ? (size_t)(ea - a) : strlen(a), nb = eb ? (size_t)(eb - b) : strlen(b);
        if (na != nb || memcmp(a, b, na) != 0) {
            snprintf(out, cap, "%.*s (this run: %.*s)", (int)nb, b, (int)na, a);
            return;
        }
        a += na + (ea != NULL);
        b += nb + (eb != NULL);
    }
    /* a line only one of them has (an option written only when set) */
    if (*a || *b) {
        const char *extra = *a ? a : b, *end = strchr(extra, '\n');
        const int n = end ? (int)(end - extra) : (int)strlen(extra);
        if (*b)
            snprintf(out, cap, "%.*s (this run: not set)", n, extra);
        else
            snprintf(out, cap, "no %.*s (this run: %.*s)", (int)strcspn(extra, "="), extra, n,
                     extra);
        return;
    }
    snprintf(out, cap, "the option list");
}

pfx_status pfx_job_check_dist(pfx_runtime *rt, const char *job, const pfx_data_parallel *d)
{
    if (d->ranks > 1 && !d->reduce)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: config.dist.reduce is NULL with ranks > 1", job);
    if (d->ranks > 1 && d->rank >= d->ranks)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "%s: config.dist.rank is not below config.dist.ranks", job);
    return PFX_SUCCESS;
}

double pfx_job_build_seconds(const pfx_runtime *rt)
{
    pfx_cache_stats cs;
    return pfx_runtime_cache_stats(rt, &cs) == PFX_SUCCESS ? cs.build_seconds : 0.0;
}

pfx_status pfx_job_example_rule(pfx_runtime *rt, const char *job, const pfx_tokenizer *tok,
                                size_t max_length, bool no_eos, pfx_dataset_options *o,
                                pfx_example_rule *rule)
{
    int32_t *ids = NULL;
    size_t special = 0;
    /* the special tokens of a text: those the post-processor gives the empty one */
    if (pfx_tokenizer_encode(tok, "", 0, PFX_ENCODE_ADD_SPECIAL, &ids, &special) != PFX_SUCCESS)
        return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the tokenizer's special tokens: %s", job,
                         pfx_last_error(NULL));
    free(ids);
    pfx_dataset_default_options(o);
    o->max_length = max_length;
    o->add_special = true;
    o->append_eos = !no_eos && pfx_tokenizer_special_id(tok, PFX_TOKEN_EOS) >= 0;
    o->shuffle = false;
    *rule =
        (pfx_example_rule){ .max_length = max_length,
                            .special = special,
                            .eos_id =
                                o->append_eos ? pfx_tokenizer_special_id(tok, PFX_TOKEN_EOS) : -1 };
    return PFX_SUCCESS;
}

pfx_model_dropout pfx_job_dropout(const pfx_model *model, float override, uint64_t seed,
                                  uint64_t step, size_t micro, size_t first_item)
{
    pfx_model_shape s;
    pfx_model_dropout d;
    memset(&d, 0, sizeof(d));
    if (pfx_model_get_shape(model, &s) != PFX_SUCCESS)
        return d;
    const bool gpt2 = strcmp(s.model_type, "gpt2") == 0;
    d.embd = override < 0.0f ? s.embd_pdrop : gpt2 ? override : 0.0f;
    d.attn = override < 0.0f ? s.attn_pdrop : override;
    d.resid = override < 0.0f ? s.resid_pdrop : gpt2 ? override : 0.0f;
    d.seed = seed;
    d.step = (uint32_t)step;
    d.micro_batch = (uint32_t)micro;
    d.first_item = (uint32_t)first_item;
    return d;
}

pfx_status pfx_job_check_dropout(pfx_runtime *rt, const char *job, float dropout)
{
    if (dropout == -1.0f || (dropout >= 0.0f && dropout < 1.0f))
        return PFX_SUCCESS;
    return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                     "%s: config.dropout (%g) is not in [0, 1) (or -1: the model's config.json)",
                     job, (double)dropout);
}
