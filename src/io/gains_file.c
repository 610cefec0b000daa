/* The reader of pretraining's gains file (gains_file.h): an outside file,
 * so every field is checked before a value is used. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gains_file.h"
#include "internal.h"

bool pfx_gains_file_is(const pfx_safetensors *f)
{
    const char *format = pfx_safetensors_metadata_get(f, "format");
    return format && !strcmp(format, PFX_GAINS_FORMAT);
}

/* "[2, 3, 4]" into buf. */
static const char *shape_text(const pfx_st_info *info, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (unsigned i = 0; i < info->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %zu" : "%zu", info->shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

/* Tensor `name`, shaped as `want` (ndim entries, named by `dims`), into dst:
 * present exactly when `expected`. */
static pfx_status read_tensor(const pfx_safetensors *f, const char *label, const char *name,
                              bool expected, const char *why, unsigned ndim, const size_t *want,
                              const char *dims, float *dst)
{
    const long i = pfx_safetensors_find(f, name);
    if (i < 0 && !expected)
        return PFX_SUCCESS;
    if (i < 0 || !expected)
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: tensor %s is %s, yet %s", label, name,
                         i < 0 ? "missing" : "present", why);
    pfx_st_info info;
    pfx_status st = pfx_safetensors_info(f, (size_t)i, &info);
    if (st != PFX_SUCCESS)
        return st;
    bool fits = info.ndim == ndim;
    size_t n = 1;
    for (unsigned d = 0; fits && d < ndim; d++) {
        fits = info.shape[d] == want[d];
        n *= want[d];
    }
    char got[96];
    if (!fits)
        return pfx_error(NULL, PFX_ERROR_INVALID_SHAPE, "%s: tensor %s is %s, the model needs %s",
                         label, name, shape_text(&info, got, sizeof(got)), dims);
    if ((st = pfx_safetensors_read_f32(f, name, dst, n))) {
        char why[512]; /* the message is rewritten in the buffer it is read from */
        snprintf(why, sizeof(why), "%s", pfx_last_error(NULL));
        return pfx_error(NULL, st, "%s: tensor %s: %s", label, name, why);
    }
    for (size_t k = 0; k < n; k++)
        if (!isfinite(dst[k]))
            return pfx_error(NULL, PFX_ERROR_NOT_FINITE, "%s: tensor %s[%zu] is %g", label, name, k,
                             (double)dst[k]);
    return PFX_SUCCESS;
}

pfx_status pfx_gains_file_read(const pfx_safetensors *f, const char *label, size_t L, size_t H,
                               size_t D, pfx_gains_values *out)
{
    const char *format = pfx_safetensors_metadata_get(f, "format");
    const char *mode = pfx_safetensors_metadata_get(f, "gain_mode");
    const char *structured = pfx_safetensors_metadata_get(f, "structured");
    if (!pfx_gains_file_is(f))
        return pfx_error(NULL, PFX_ERROR_FORMAT, "%s: metadata format is %s, not " PFX_GAINS_FORMAT,
                         label, format ? format : "missing");
    if (!mode || (strcmp(mode, "off") && strcmp(mode, "linear") && strcmp(mode, "tanh")))
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: metadata gain_mode %s%s%s is none of off, linear, tanh", label,
                         mode ? "\"" : "", mode ? mode : "missing", mode ? "\"" : "");
    if (!structured || (strcmp(structured, "true") && strcmp(structured, "false")))
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: metadata structured %s%s%s is neither true nor false", label,
                         structured ? "\"" : "", structured ? structured : "missing",
                         structured ? "\"" : "");
    out->gain_mode = !strcmp(mode, "off")      ? PFX_GAIN_OFF
                     : !strcmp(mode, "linear") ? PFX_GAIN_LINEAR
                                               : PFX_GAIN_TANH;
    out->structured = !strcmp(structured, "true");
    /* nothing beside the two tensors: a file of another kind that borrowed
     * the format would otherwise load as "no gain" */
    for (size_t i = 0; i < pfx_safetensors_count(f); i++) {
        pfx_st_info info;
        pfx_status st = pfx_safetensors_info(f, i, &info);
        if (st == PFX_SUCCESS && strcmp(info.name, "gains") && strcmp(info.name, "dim_gains"))
            st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: tensor %s is not one of gains, dim_gains",
                           label, info.name);
        if (st != PFX_SUCCESS)
            return st;
    }
    char dims[96];
    const size_t lh[2] = { L, H }, lhd[3] = { L, H, D };
    snprintf(dims, sizeof(dims), "[L=%zu, H=%zu]", L, H);
    pfx_status st =
        read_tensor(f, label, "gains", out->gain_mode != PFX_GAIN_OFF,
                    out->gain_mode != PFX_GAIN_OFF ? "gain_mode is not off" : "gain_mode is off", 2,
                    lh, dims, out->gains);
    snprintf(dims, sizeof(dims), "[L=%zu, H=%zu, D=%zu]", L, H, D);
    if (st == PFX_SUCCESS)
        st = read_tensor(f, label, "dim_gains", out->structured,
                         out->structured ? "structured is true" : "structured is false", 3, lhd,
                         dims, out->dim_gains);
    return st;
}
