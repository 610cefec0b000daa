/* The checkpoint of the full-training job (pretrain_internal.h): one
 * safetensors file, replaced atomically, so an interrupted save leaves the
 * previous one whole.
 *   tensors:  per optimizer tensor NAME (a weight's name, "gains.<l>") its
 *             value NAME and AdamW moments NAME.exp_avg, NAME.exp_avg_sq;
 *             "grad_norms" [steps done]; "gain_trace" [steps done + 1, L * H]
 *             with the gain on
 *   metadata: format, the options, the optimizer's step count, NAME.step,
 *             the data position (epoch, index), the steps done, and the
 *             losses and evaluation losses as C99 hex floats (exact),
 *             "step:value" for the evaluations.
 * Loading reads and checks every field before anything changes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/io_internal.h"
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

pfx_status pfx_pretrain_ckpt_save(pfx_pretrain_job *j, const char *path, const pfx_pretrain_result *r)
{
    pfx_runtime *rt = j->rt;
    const size_t n = j->param_count, done = r->steps_done, LH = j->L * j->H;
    pfx_named_tensor *items = calloc(3 * n + 2, sizeof(*items));
    pfx_st_metadata *meta = calloc(n + 8, sizeof(*meta));
    char(*names)[160] = calloc(4 * n, sizeof(*names));
    char(*steps)[24] = calloc(n, sizeof(*steps));
    float **moments = calloc(2 * n, sizeof(*moments));
    char *losses = NULL, *evals = NULL;
    size_t ll = 0, lc = 0, el = 0, ec = 0;
    char count[24], epoch[24], index[24], done_s[24];
    pfx_status st = items && meta && names && steps && moments ? PFX_SUCCESS : oom(rt);
    size_t k = 0, m = 0;
    for (size_t i = 0; st == PFX_SUCCESS && i < n; i++) {
        pfx_optimizer_param_info info;
        uint64_t step = 0;
        if ((st = pfx_optimizer_get_param(j->opt, i, &info)))
            break;
        moments[2 * i] = malloc(info.numel * sizeof(float));
        moments[2 * i + 1] = malloc(info.numel * sizeof(float));
        if (!moments[2 * i] || !moments[2 * i + 1]) {
            st = oom(rt);
            break;
        }
        if ((st = pfx_optimizer_export_param(j->opt, i, &step, moments[2 * i], moments[2 * i + 1])))
            break;
        const pfx_tensor *p = j->params[i];
        pfx_named_tensor host = { .ndim = pfx_tensor_ndim(p), .dtype = PFX_DTYPE_F32 };
        for (unsigned d = 0; d < host.ndim; d++)
            host.shape[d] = pfx_tensor_dim(p, d);
        snprintf(names[4 * i], sizeof(names[0]), "%s", info.name);
        snprintf(names[4 * i + 1], sizeof(names[0]), "%s.exp_avg", info.name);
        snprintf(names[4 * i + 2], sizeof(names[0]), "%s.exp_avg_sq", info.name);
        snprintf(names[4 * i + 3], sizeof(names[0]), "%s.step", info.name);
        snprintf(steps[i], sizeof(steps[0]), "%llu", (unsigned long long)step);
        items[k++] = (pfx_named_tensor){ .name = names[4 * i], .tensor = p };
        host.name = names[4 * i + 1];
        host.host = moments[2 * i];
        items[k++] = host;
        host.name = names[4 * i + 2];
        host.host = moments[2 * i + 1];
        items[k++] = host;
        meta[m++] = (pfx_st_metadata){ names[4 * i + 3], steps[i] };
    }
    if (st == PFX_SUCCESS && done)
        items[k++] = (pfx_named_tensor){ .name = "grad_norms", .host = r->grad_norms, .ndim = 1,
                                         .shape = { done }, .dtype = PFX_DTYPE_F32 };
    if (st == PFX_SUCCESS && r->gains)
        items[k++] = (pfx_named_tensor){ .name = "gain_trace", .host = r->gains, .ndim = 2,
                                         .shape = { done + 1, LH }, .dtype = PFX_DTYPE_F32 };
    bool ok = true;
    for (size_t s = 0; ok && s < done; s++)
        ok = add_hex(&losses, &ll, &lc, "", r->losses[s]);
    for (size_t s = 0; ok && s <= done; s++)
        if (isfinite(r->eval_losses[s])) {
            char at[32];
            snprintf(at, sizeof(at), "%zu:", s);
            ok = add_hex(&evals, &el, &ec, at, r->eval_losses[s]);
        }
    if (st == PFX_SUCCESS && !ok)
        st = oom(rt);
    if (st == PFX_SUCCESS) {
        snprintf(count, sizeof(count), "%llu", (unsigned long long)pfx_optimizer_step_count(j->opt));
        snprintf(epoch, sizeof(epoch), "%llu", (unsigned long long)j->pos.epoch);
        snprintf(index, sizeof(index), "%llu", (unsigned long long)j->pos.index);
        snprintf(done_s, sizeof(done_s), "%zu", done);
        meta[m++] = (pfx_st_metadata){ "format", FORMAT };
        meta[m++] = (pfx_st_metadata){ "options", j->options };
        meta[m++] = (pfx_st_metadata){ "optimizer_step", count };
        meta[m++] = (pfx_st_metadata){ "data_epoch", epoch };
        meta[m++] = (pfx_st_metadata){ "data_index", index };
        meta[m++] = (pfx_st_metadata){ "steps_done", done_s };
        meta[m++] = (pfx_st_metadata){ "losses", losses ? losses : "" };
        meta[m++] = (pfx_st_metadata){ "eval_losses", evals ? evals : "" };
        st = pfx_safetensors_save(rt, path, items, k, meta, m);
    }
    for (size_t i = 0; moments && i < 2 * n; i++)
        free(moments[i]);
    free(moments);
    free(items);
    free(meta);
    free(names);
    free(steps);
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

static pfx_status meta_count(pfx_runtime *rt, const pfx_safetensors *f, const char *path, const char *key,
                             uint64_t max, uint64_t *out)
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
        if (end == s || errno || *end != ':' || at > done || (!first && at <= last) || *s == '-' || *s == '+')
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

/* The first option line where a and b differ, for the message. */
static void first_difference(const char *a, const char *b, char *out, size_t cap)
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
    snprintf(out, cap, "the option list");
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
    const size_t n = j->param_count, LH = j->L * j->H;
    if (!format || strcmp(format, FORMAT) != 0) {
        st = corrupt(rt, path, "format", "is not " FORMAT);
    } else if (!options) {
        st = corrupt(rt, path, "options", "are missing");
    } else if (strcmp(options, j->options) != 0) {
        char diff[600];
        first_difference(j->options, options, diff, sizeof(diff));
        st = pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                       "pretrain: resume: %s was written with other options: %s; resume with the same ones", path,
                       diff);
    } else if (!(st = meta_count(rt, f, path, "steps_done", r->steps, &done)) &&
               !(st = meta_count(rt, f, path, "optimizer_step", done, &opt_step)) &&
               !(st = meta_count(rt, f, path, "data_epoch", UINT32_MAX, &epoch)) &&
               !(st = meta_count(rt, f, path, "data_index", pfx_blocks_count(j->train), &index))) {
        /* a skipped step advances nothing: the optimizer may be behind */
        if (!parse_losses(pfx_safetensors_metadata_get(f, "losses") ? pfx_safetensors_metadata_get(f, "losses")
                                                                       : "x",
                          (size_t)done, r->losses))
            st = corrupt(rt, path, "losses", "are not steps_done finite numbers");
        else if (!pfx_safetensors_metadata_get(f, "eval_losses") ||
                 !parse_evals(pfx_safetensors_metadata_get(f, "eval_losses"), (size_t)done, r->eval_losses))
            st = corrupt(rt, path, "eval_losses", "are not step:loss entries up to steps_done");
    }
    /* every tensor present and of its shape before any is written */
    for (size_t i = 0; st == PFX_SUCCESS && i < n; i++) {
        pfx_optimizer_param_info info;
        pfx_optimizer_get_param(j->opt, i, &info);
        char name[160], key[170];
        static const char *const tails[3] = { "", ".exp_avg", ".exp_avg_sq" };
        for (int t = 0; st == PFX_SUCCESS && t < 3; t++) {
            snprintf(name, sizeof(name), "%s%s", info.name, tails[t]);
            long k = pfx_safetensors_find(f, name);
            pfx_st_info ti;
            if (k < 0 || pfx_safetensors_info(f, (size_t)k, &ti) != PFX_SUCCESS || ti.numel != info.numel)
                st = corrupt(rt, path, name, "is missing or not of its tensor's size");
        }
        snprintf(key, sizeof(key), "%s.step", info.name);
        uint64_t step = 0;
        if (st == PFX_SUCCESS && (st = meta_count(rt, f, path, key, opt_step, &step)) == PFX_SUCCESS && step != opt_step)
            st = corrupt(rt, path, key, "differs from optimizer_step");
    }
    const char *extra[2] = { done ? "grad_norms" : NULL, r->gains ? "gain_trace" : NULL };
    const size_t extra_n[2] = { (size_t)done, ((size_t)done + 1) * LH };
    for (int e = 0; st == PFX_SUCCESS && e < 2; e++) {
        pfx_st_info ti;
        long k = extra[e] ? pfx_safetensors_find(f, extra[e]) : 0;
        if (extra[e] && (k < 0 || pfx_safetensors_info(f, (size_t)k, &ti) != PFX_SUCCESS || ti.numel != extra_n[e]))
            st = corrupt(rt, path, extra[e], "is missing or of the wrong size");
    }
    /* then the values and moments */
    for (size_t i = 0; st == PFX_SUCCESS && i < n; i++) {
        pfx_optimizer_param_info info;
        pfx_optimizer_get_param(j->opt, i, &info);
        float *v = malloc(info.numel * sizeof(float)), *m = malloc(info.numel * sizeof(float));
        float *s = malloc(info.numel * sizeof(float));
        char name[160];
        st = v && m && s ? PFX_SUCCESS : oom(rt);
        if (st == PFX_SUCCESS)
            st = pfx_safetensors_read_f32(f, info.name, v, info.numel);
        snprintf(name, sizeof(name), "%s.exp_avg", info.name);
        if (st == PFX_SUCCESS)
            st = pfx_safetensors_read_f32(f, name, m, info.numel);
        snprintf(name, sizeof(name), "%s.exp_avg_sq", info.name);
        if (st == PFX_SUCCESS)
            st = pfx_safetensors_read_f32(f, name, s, info.numel);
        if (st == PFX_SUCCESS)
            st = pfx_tensor_write(j->params[i], 0, info.numel, v);
        if (st == PFX_SUCCESS)
            st = pfx_optimizer_import_param(j->opt, i, opt_step, m, s);
        free(v);
        free(m);
        free(s);
    }
    if (st == PFX_SUCCESS && done)
        st = pfx_safetensors_read_f32(f, "grad_norms", r->grad_norms, (size_t)done);
    if (st == PFX_SUCCESS && r->gains)
        st = pfx_safetensors_read_f32(f, "gain_trace", r->gains, ((size_t)done + 1) * LH);
    if (st == PFX_SUCCESS)
        st = pfx_optimizer_set_step_count(j->opt, opt_step);
    if (st == PFX_SUCCESS) {
        j->pos.epoch = epoch;
        j->pos.index = index;
        r->steps_done = (size_t)done;
        r->first_step = (size_t)done;
    }
    pfx_safetensors_close(&f);
    return st;
}
