/* A training job's checkpoint (checkpoint.h): the writer and the strict
 * reader of what a job describes. */
#include "checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "job.h"
#include "text_internal.h"

static size_t rows_of(pfx_ckpt_length length, uint64_t steps)
{
    return length == PFX_CKPT_FIXED   ? 1
           : length == PFX_CKPT_STEPS ? (size_t)steps
                                      : (size_t)steps + 1;
}

static size_t steps_done(const pfx_checkpoint *c)
{
    return (size_t)c->counts[c->steps].value;
}

static pfx_status oom(const pfx_checkpoint *c)
{
    return pfx_error(c->rt, PFX_ERROR_OUT_OF_MEMORY, "%s: host memory for the checkpoint", c->job);
}

/* ---- writing ---- */

static bool add_text(pfx_buf *b, const char *s)
{
    return pfx_buf_add(b, s, strlen(s));
}

/* The curve's text into b, NUL-terminated. */
static bool write_curve(const pfx_ckpt_curve *cv, size_t n, pfx_buf *b)
{
    bool ok = pfx_buf_reserve(b, 1);
    for (size_t i = 0; ok && i < n; i++) {
        char one[64];
        if (cv->form == PFX_CKPT_AT_STEPS) {
            if (!isfinite(cv->values[i]))
                continue;
            snprintf(one, sizeof(one), "%zu:%a,", i, cv->values[i]);
        } else {
            const bool sep = cv->form == PFX_CKPT_LIST && i > 0;
            snprintf(one, sizeof(one), "%s%a%s", sep ? "," : "", cv->values[i],
                     cv->form == PFX_CKPT_LIST_ENDED ? "," : "");
        }
        ok = add_text(b, one);
    }
    return ok && pfx_buf_add(b, "", 1);
}

pfx_status pfx_checkpoint_save(const pfx_checkpoint *c, const char *path)
{
    const size_t done = steps_done(c), nm = 2 + c->count_n + c->curve_n;
    pfx_st_metadata *meta = calloc(nm, sizeof(*meta));
    pfx_named_tensor *items = calloc(c->tensor_n ? c->tensor_n : 1, sizeof(*items));
    char(*counts)[24] = calloc(c->count_n ? c->count_n : 1, sizeof(*counts));
    pfx_buf *texts = calloc(c->curve_n ? c->curve_n : 1, sizeof(*texts));
    pfx_status st = meta && items && counts && texts ? PFX_SUCCESS : oom(c);
    size_t k = 0, q = 0;
    if (st == PFX_SUCCESS) {
        meta[q++] = (pfx_st_metadata){ "format", c->format };
        meta[q++] = (pfx_st_metadata){ c->options_key, c->options };
    }
    for (size_t i = 0; st == PFX_SUCCESS && i < c->count_n; i++) {
        snprintf(counts[i], sizeof(counts[i]), "%llu", (unsigned long long)c->counts[i].value);
        meta[q++] = (pfx_st_metadata){ c->counts[i].key, counts[i] };
    }
    for (size_t i = 0; st == PFX_SUCCESS && i < c->curve_n; i++) {
        const pfx_ckpt_curve *cv = &c->curves[i];
        if (!write_curve(cv, rows_of(cv->length, done), &texts[i]))
            st = oom(c);
        else
            meta[q++] = (pfx_st_metadata){ cv->key, texts[i].data };
    }
    for (size_t i = 0; st == PFX_SUCCESS && i < c->tensor_n; i++) {
        const pfx_ckpt_tensor *t = &c->tensors[i];
        const size_t rows = rows_of(t->length, done);
        if (!t->values || rows * t->width == 0)
            continue;
        const bool flat = t->length == PFX_CKPT_FIXED || t->width == 1;
        items[k++] = (pfx_named_tensor){ .name = t->name,
                                         .host = t->values,
                                         .ndim = flat ? 1 : 2,
                                         .shape = { flat ? rows * t->width : rows, t->width },
                                         .dtype = PFX_DTYPE_F32 };
    }
    if (st == PFX_SUCCESS)
        st = c->opt ? pfx_optimizer_save_checkpoint(c->opt, path, items, k, meta, q)
                    : pfx_safetensors_save(c->rt, path, items, k, meta, q);
    for (size_t i = 0; texts && i < c->curve_n; i++)
        pfx_buf_free(&texts[i]);
    free(texts);
    free(counts);
    free(items);
    free(meta);
    return st;
}

/* ---- reading ---- */

static pfx_status bad_field(const pfx_checkpoint *c, const char *path, const char *key,
                            const char *why)
{
    return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: %s: the metadata '%s' %s", c->job, path, key,
                     why);
}

static pfx_status read_count(const pfx_checkpoint *c, const pfx_safetensors *f, const char *path,
                             pfx_ckpt_count *n)
{
    const char *v = pfx_safetensors_metadata_get(f, n->key);
    if (!v || pfx_parse_uint(v, UINT64_MAX, &n->value) != PFX_SUCCESS)
        return bad_field(c, path, n->key, v ? "is not a whole number" : "is missing");
    if (n->value > n->max)
        return pfx_error(c->rt, PFX_ERROR_FORMAT,
                         "%s: %s: the metadata '%s' (%llu) is more than %s (%llu)", c->job, path,
                         n->key, (unsigned long long)n->value, n->max_name,
                         (unsigned long long)n->max);
    return PFX_SUCCESS;
}

/* One number as "%a" writes it: no leading space, finite when asked. */
static bool parse_number(const char *s, bool finite, double *out, const char **end)
{
    char *e = NULL;
    if (!*s || strchr(" \t\n\v\f\r", *s))
        return false;
    *out = strtod(s, &e);
    *end = e;
    return e != s && (!finite || isfinite(*out));
}

/* Exactly n numbers, separated by commas or each followed by one. */
static bool parse_list(const char *s, size_t n, bool ended, bool finite, double *out)
{
    for (size_t i = 0; i < n; i++) {
        const char *end;
        if (!parse_number(s, finite, &out[i], &end))
            return false;
        if (ended || i + 1 < n) {
            if (*end != ',')
                return false;
            s = end + 1;
        } else {
            s = end;
        }
    }
    return *s == '\0';
}

/* "index:value," entries, indices ascending below n, no sign; the rest NaN. */
static bool parse_at_steps(const char *s, size_t n, bool finite, double *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = NAN;
    for (size_t last = 0, first = 1; *s; first = 0) {
        char *end = NULL;
        if (*s < '0' || *s > '9')
            return false;
        const unsigned long long at = strtoull(s, &end, 10);
        if (*end != ':' || at >= n || (!first && at <= last))
            return false;
        const char *vend;
        if (!parse_number(end + 1, finite, &out[at], &vend) || *vend != ',')
            return false;
        last = (size_t)at;
        s = vend + 1;
    }
    return true;
}

static pfx_status read_curve(const pfx_checkpoint *c, const pfx_safetensors *f, const char *path,
                             const pfx_ckpt_curve *cv)
{
    const size_t n = rows_of(cv->length, steps_done(c));
    const char *s = pfx_safetensors_metadata_get(f, cv->key);
    if (!s)
        return bad_field(c, path, cv->key, "is missing");
    if (cv->form == PFX_CKPT_AT_STEPS) {
        if (parse_at_steps(s, n, cv->finite, cv->values))
            return PFX_SUCCESS;
        return pfx_error(c->rt, PFX_ERROR_FORMAT,
                         "%s: %s: the metadata '%s' does not hold 'index:value,' entries, indices "
                         "ascending up to '%s' (%zu)%s",
                         c->job, path, cv->key, c->counts[c->steps].key, n - 1,
                         cv->finite ? ", values finite" : "");
    }
    if (parse_list(s, n, cv->form == PFX_CKPT_LIST_ENDED, cv->finite, cv->values))
        return PFX_SUCCESS;
    if (n == 0 && cv->length == PFX_CKPT_STEPS)
        return pfx_error(c->rt, PFX_ERROR_FORMAT,
                         "%s: %s: the metadata '%s' holds numbers, but '%s' is 0", c->job, path,
                         cv->key, c->counts[c->steps].key);
    if (n == 1 && cv->length == PFX_CKPT_FIXED && cv->form == PFX_CKPT_LIST)
        return bad_field(c, path, cv->key,
                         cv->finite ? "is not a finite number" : "is not a number");
    return pfx_error(
        c->rt, PFX_ERROR_FORMAT, "%s: %s: the metadata '%s' does not hold %zu%s numbers %s", c->job,
        path, cv->key, n, cv->finite ? " finite" : "",
        cv->form == PFX_CKPT_LIST ? "separated by commas" : "each followed by a comma");
}

static pfx_status read_tensor(const pfx_checkpoint *c, const pfx_safetensors *f, const char *path,
                              const pfx_ckpt_tensor *t)
{
    const size_t n = rows_of(t->length, steps_done(c)) * t->width;
    if (!t->values || n == 0)
        return PFX_SUCCESS;
    pfx_st_info ti;
    const long k = pfx_safetensors_find(f, t->name);
    if (k < 0 && t->optional) {
        for (size_t i = 0; i < n; i++)
            t->values[i] = NAN;
        return PFX_SUCCESS;
    }
    if (k < 0 || pfx_safetensors_info(f, (size_t)k, &ti) != PFX_SUCCESS || ti.numel != n)
        return pfx_error(c->rt, PFX_ERROR_FORMAT,
                         "%s: %s: the tensor '%s' is missing or does not hold %zu values", c->job,
                         path, t->name, n);
    if (pfx_safetensors_read_f32(f, t->name, t->values, n) != PFX_SUCCESS)
        return pfx_error(c->rt, PFX_ERROR_FORMAT, "%s: reading %s: %s", c->job, path,
                         pfx_last_error(NULL));
    return PFX_SUCCESS;
}

pfx_status pfx_checkpoint_read(pfx_checkpoint *c, const pfx_safetensors *f, const char *path)
{
    const char *format = pfx_safetensors_metadata_get(f, "format");
    const char *options = pfx_safetensors_metadata_get(f, c->options_key);
    if (!format || strcmp(format, c->format))
        return pfx_error(c->rt, PFX_ERROR_FORMAT,
                         "%s: %s is not a prefixcl %s checkpoint (the metadata 'format' is not %s)",
                         c->job, path, c->job, c->format);
    if (!options)
        return bad_field(c, path, c->options_key, "is missing");
    if (strcmp(options, c->options)) {
        char diff[1200];
        pfx_job_first_difference(c->options, options, diff, sizeof(diff));
        return pfx_error(
            c->rt, PFX_ERROR_INVALID_ARGUMENT,
            "%s: resume: %s was written with other options: %s; resume with the same ones", c->job,
            path, diff);
    }
    pfx_status st = PFX_SUCCESS;
    for (size_t i = 0; st == PFX_SUCCESS && i < c->count_n; i++)
        st = read_count(c, f, path, &c->counts[i]);
    /* the optimizer's part: its step (at most the steps done: a skipped
     * step does not advance it), every parameter's tensors and steps */
    uint64_t opt_step = 0;
    if (st == PFX_SUCCESS && c->opt)
        st = pfx_optimizer_check_checkpoint(c->opt, f, path, steps_done(c), c->counts[c->steps].key,
                                            &opt_step);
    for (size_t i = 0; st == PFX_SUCCESS && i < c->curve_n; i++)
        st = read_curve(c, f, path, &c->curves[i]);
    for (size_t i = 0; st == PFX_SUCCESS && i < c->tensor_n; i++)
        st = read_tensor(c, f, path, &c->tensors[i]);
    if (st == PFX_SUCCESS && c->check)
        st = c->check(c, path);
    return st;
}

pfx_status pfx_checkpoint_load(pfx_checkpoint *c, const char *path)
{
    pfx_safetensors *f = NULL;
    pfx_status st = pfx_safetensors_open(path, &f);
    if (st != PFX_SUCCESS)
        return pfx_error(c->rt, st, "%s: resume: %s", c->job, pfx_last_error(NULL));
    st = pfx_checkpoint_read(c, f, path);
    /* every field checked: the parameters, their AdamW state and the step count */
    if (st == PFX_SUCCESS && c->opt)
        st = pfx_optimizer_restore_checkpoint(c->opt, f, path);
    pfx_safetensors_close(&f);
    return st;
}
