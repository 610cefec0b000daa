/* The checkpoint of the full-training job (pretrain_internal.h): the
 * optimizer's checkpoint (optimizer.h: every trained tensor's value, AdamW
 * moments and step) in one safetensors file replaced atomically, so an
 * interrupted save leaves the previous one whole, with the job's own:
 *   tensors:  "grad_norms" [steps done]; "gain_trace" [steps done + 1, L * H]
 *             with a gain
 *   metadata: format, the options, the data position (epoch, index), the
 *             steps done, and the losses and evaluation losses as C99 hex
 *             floats (exact), "step:value" for the evaluations.
 * Loading reads and checks every field before anything changes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "job.h"
#include "pretrain_internal.h"

#define FORMAT "prefixcl-pretrain-checkpoint-1"

static pfx_status oom(pfx_runtime *rt)
{
    return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pretrain checkpoint: host memory");
}

/* Appends "%a," of v to a growing string. */
static bool add_hex(char **s, size_t *len, size_t *cap, const char *prefix, double v)
{
    char one[64];
    const int n = snprintf(one, sizeof(one), "%s%a,", prefix, v);
    if (*len + (size_t)n + 1 > *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        while (c < *len + (size_t)n + 1)
            c *= 2;
        char *t = realloc(*s, c);
        if (!t)
            return false;
        *s = t;
        *cap = c;
    }
    memcpy(*s + *len, one, (size_t)n + 1);
    *len += (size_t)n;
    return true;
}

pfx_status pfx_pretrain_ckpt_save(pfx_pretrain_job *j, const char *path,
                                  const pfx_pretrain_result *r)
{
    pfx_runtime *rt = j->rt;
    const size_t done = r->steps_done, LH = j->L * j->H;
    char *losses = NULL, *evals = NULL;
    size_t ll = 0, lc = 0, el = 0, ec = 0;
    bool ok = true;
    for (size_t s = 0; ok && s < done; s++)
        ok = add_hex(&losses, &ll, &lc, "", r->losses[s]);
    for (size_t s = 0; ok && s <= done; s++)
        if (isfinite(r->eval_losses[s])) {
            char at[32];
            snprintf(at, sizeof(at), "%zu:", s);
            ok = add_hex(&evals, &el, &ec, at, r->eval_losses[s]);
        }
    pfx_status st = ok ? PFX_SUCCESS : oom(rt);
    pfx_named_tensor extra[2];
    size_t k = 0;
    if (done)
        extra[k++] = (pfx_named_tensor){ .name = "grad_norms",
                                         .host = r->grad_norms,
                                         .ndim = 1,
                                         .shape = { done },
                                         .dtype = PFX_DTYPE_F32 };
    if (r->gains)
        extra[k++] = (pfx_named_tensor){ .name = "gain_trace",
                                         .host = r->gains,
                                         .ndim = 2,
                                         .shape = { done + 1, LH },
                                         .dtype = PFX_DTYPE_F32 };
    char epoch[24], index[24], done_s[24];
    snprintf(epoch, sizeof(epoch), "%llu", (unsigned long long)j->pos.epoch);
    snprintf(index, sizeof(index), "%llu", (unsigned long long)j->pos.index);
    snprintf(done_s, sizeof(done_s), "%zu", done);
    const pfx_st_metadata meta[] = {
        { "format", FORMAT },
        { "options", j->options },
        { "data_epoch", epoch },
        { "data_index", index },
        { "steps_done", done_s },
        { "losses", losses ? losses : "" },
        { "eval_losses", evals ? evals : "" },
    };
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_save_checkpoint(j->opt, path, extra, k, meta,
                                           sizeof(meta) / sizeof(meta[0]));
    free(losses);
    free(evals);
    return st;
}

/* ---- loading ---- */

static pfx_status corrupt(pfx_runtime *rt, const char *path, const char *field, const char *why)
{
    return pfx_error(rt, PFX_ERROR_FORMAT, "%s: the checkpoint's %s %s", path, field, why);
}

/* A decimal count, the whole text, at most max. */
static bool count_of(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return v <= max;
}

static pfx_status meta_count(pfx_runtime *rt, const pfx_safetensors *f, const char *path,
                             const char *key, uint64_t max, uint64_t *out)
{
    if (!count_of(pfx_safetensors_metadata_get(f, key), max, out))
        return corrupt(rt, path, key, "is missing or not a count in range");
    return PFX_SUCCESS;
}

/* Exactly n finite hex floats "a,b,...," (each as written by add_hex). */
static bool parse_losses(const char *s, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++) {
        char *end = NULL;
        errno = 0;
        const double v = strtod(s, &end);
        if (end == s || errno || *end != ',' || !isfinite(v))
            return false;
        out[i] = v;
        s = end + 1;
    }
    return *s == '\0';
}

/* "step:value," entries with steps ascending and at most done. */
static bool parse_evals(const char *s, size_t done, double *out)
{
    for (size_t last = 0, first = 1; *s; first = 0) {
        char *end = NULL;
        errno = 0;
        const unsigned long long at = strtoull(s, &end, 10);
        if (end == s || errno || *end != ':' || at > done || (!first && at <= last) || *s == '-' ||
            *s == '+')
            return false;
        s = end + 1;
        const double v = strtod(s, &end);
        if (end == s || errno || *end != ',' || !isfinite(v))
            return false;
        out[at] = v;
        last = (size_t)at;
        s = end + 1;
    }
    return true;
}

pfx_status pfx_pretrain_ckpt_load(pfx_pretrain_job *j, const char *path, pfx_pretrain_result *r)
{
    pfx_runtime *rt = j->rt;
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_safetensors_open(path, &f);
    if (st != PFX_SUCCESS)
        return pfx_error(rt, st, "pretrain: resume: %s", pfx_last_error(NULL));
    const char *format = pfx_safetensors_metadata_get(f, "format");
    const char *options = pfx_safetensors_metadata_get(f, "options");
    uint64_t opt_step = 0, epoch = 0, index = 0, done = 0;
    const size_t LH = j->L * j->H;
    if (!format || strcmp(format, FORMAT) != 0) {
        st = corrupt(rt, path, "format", "is not " FORMAT);
    } else if (!options) {
        st = corrupt(rt, path, "options", "are missing");
    } else if (strcmp(options, j->options) != 0) {
        char diff[600];
        pfx_job_first_difference(j->options, options, diff, sizeof(diff));
        st = pfx_error(
            rt, PFX_ERROR_INVALID_ARGUMENT,
            "pretrain: resume: %s was written with other options: %s; resume with the same ones",
            path, diff);
    } else if (!(st = meta_count(rt, f, path, "steps_done", r->steps, &done)) &&
               !(st = pfx_optimizer_check_checkpoint(j->opt, f, path, done, "steps_done",
                                                     &opt_step)) &&
               !(st = meta_count(rt, f, path, "data_epoch", UINT32_MAX, &epoch)) &&
               !(st = meta_count(rt, f, path, "data_index", pfx_blocks_count(j->train), &index))) {
        const char *ls = pfx_safetensors_metadata_get(f, "losses"),
                   *es = pfx_safetensors_metadata_get(f, "eval_losses");
        if (!ls || !parse_losses(ls, (size_t)done, r->losses))
            st = corrupt(rt, path, "losses", "are not steps_done finite numbers");
        else if (!es || !parse_evals(es, (size_t)done, r->eval_losses))
            st = corrupt(rt, path, "eval_losses", "are not step:loss entries up to steps_done");
    }
    const char *extra[2] = { done ? "grad_norms" : NULL, r->gains ? "gain_trace" : NULL };
    const size_t extra_n[2] = { (size_t)done, ((size_t)done + 1) * LH };
    for (int e = 0; st == PFX_SUCCESS && e < 2; e++) {
        pfx_st_info ti;
        long k = extra[e] ? pfx_safetensors_find(f, extra[e]) : 0;
        if (extra[e] && (k < 0 || pfx_safetensors_info(f, (size_t)k, &ti) != PFX_SUCCESS ||
                         ti.numel != extra_n[e]))
            st = corrupt(rt, path, extra[e], "is missing or of the wrong size");
    }
    /* every field checked: now the values, moments and steps, then the curves */
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_restore_checkpoint(j->opt, f, path);
    if (st == PFX_SUCCESS && done)
        st = pfx_safetensors_read_f32(f, "grad_norms", r->grad_norms, (size_t)done);
    if (st == PFX_SUCCESS && r->gains)
        st = pfx_safetensors_read_f32(f, "gain_trace", r->gains, ((size_t)done + 1) * LH);
    if (st == PFX_SUCCESS) {
        j->pos.epoch = epoch;
        j->pos.index = index;
        r->steps_done = (size_t)done;
        r->first_step = (size_t)done;
    }
    pfx_safetensors_close(&f);
    return st;
}
