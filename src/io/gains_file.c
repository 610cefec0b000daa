/* The gains file (prefixcl/io.h, gains_file.h): its writer, and its reader,
 * which reads an outside file, so every field is checked before a value is
 * used. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

static const char *mode_name(pfx_gain_mode mode)
{
    return mode == PFX_GAIN_LINEAR ? "linear" : mode == PFX_GAIN_TANH ? "tanh" : "off";
}

pfx_status pfx_gains_file_write(pfx_runtime *rt, const char *path, size_t L, size_t H, size_t D,
                                const pfx_gains_values *v)
{
    pfx_named_tensor t[2];
    size_t n = 0;
    if (v->gain_mode != PFX_GAIN_OFF)
        t[n++] = (pfx_named_tensor){
            .name = "gains", .host = v->gains, .ndim = 2, .shape = { L, H }, .dtype = PFX_DTYPE_F32
        };
    if (v->structured)
        t[n++] = (pfx_named_tensor){ .name = "dim_gains",
                                     .host = v->dim_gains,
                                     .ndim = 3,
                                     .shape = { L, H, D },
                                     .dtype = PFX_DTYPE_F32 };
    char ramp[32];
    snprintf(ramp, sizeof(ramp), "%.9g", (double)v->gain_ramp);
    const pfx_st_metadata meta[] = {
        { "format", PFX_GAINS_FORMAT },
        { "gain_mode", mode_name(v->gain_mode) },
        { "structured", v->structured ? "true" : "false" },
        { "gain_ramp", ramp },
    };
    return pfx_safetensors_save(rt, path, t, n, meta, sizeof(meta) / sizeof(meta[0]));
}

/* The metadata gain_ramp: a number in [0, 1], 1 when absent. */
static pfx_status read_ramp(const pfx_safetensors *f, const char *label, float *ramp)
{
    const char *r = pfx_safetensors_metadata_get(f, "gain_ramp");
    char *end = NULL;
    const double v = r ? strtod(r, &end) : 1.0;
    if (r && (end == r || *end || strchr(" \t\n\v\f\r", *r) || !(v >= 0.0 && v <= 1.0)))
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: metadata gain_ramp \"%s\" is not a number in [0, 1]", label, r);
    *ramp = (float)v;
    return PFX_SUCCESS;
}

/* The legacy form (io.h): layers.<l>.gain [H] for l < L, nothing else. */
static pfx_status read_per_layer(const pfx_safetensors *f, const char *label, size_t L, size_t H,
                                 pfx_gains_values *out)
{
    if (out->gain_mode == PFX_GAIN_OFF)
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: per-layer gains (layers.L.gain) with gain_mode off", label);
    for (size_t i = 0; i < pfx_safetensors_count(f); i++) {
        pfx_st_info info;
        pfx_status st = pfx_safetensors_info(f, i, &info);
        size_t l = SIZE_MAX;
        int end = 0;
        if (st == PFX_SUCCESS &&
            (sscanf(info.name, "layers.%zu.gain%n", &l, &end) != 1 || info.name[end] || l >= L ||
             info.name[7] == '+' || info.name[7] == '-' || info.name[7] == ' '))
            st =
                pfx_error(NULL, PFX_ERROR_FORMAT,
                          "%s: tensor %s is not one of layers.0.gain .. layers.%zu.gain (per-layer "
                          "gains of a model of %zu layers)",
                          label, info.name, L - 1, L);
        if (st != PFX_SUCCESS)
            return st;
    }
    char name[48], dims[48];
    snprintf(dims, sizeof(dims), "[H=%zu]", H);
    pfx_status st = PFX_SUCCESS;
    for (size_t l = 0; st == PFX_SUCCESS && l < L; l++) {
        snprintf(name, sizeof(name), "layers.%zu.gain", l);
        st = read_tensor(f, label, name, true, "the file holds per-layer gains", 1, &H, dims,
                         out->gains + l * H);
    }
    out->structured = false;
    return st;
}

pfx_status pfx_gains_file_read(const pfx_safetensors *f, const char *label, size_t L, size_t H,
                               size_t D, pfx_gains_values *out)
{
    if (!f || !label || !out || !out->gains || !out->dim_gains)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_gains_file_read: %s is NULL",
                         !f            ? "f"
                         : !label      ? "label"
                         : !out        ? "out"
                         : !out->gains ? "out->gains"
                                       : "out->dim_gains");
    if (!L || !H || !D)
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "pfx_gains_file_read: %s is 0",
                         !L   ? "L"
                         : !H ? "H"
                              : "D");
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
    out->gain_mode = !strcmp(mode, "off")      ? PFX_GAIN_OFF
                     : !strcmp(mode, "linear") ? PFX_GAIN_LINEAR
                                               : PFX_GAIN_TANH;
    pfx_status st = read_ramp(f, label, &out->gain_ramp);
    if (st != PFX_SUCCESS)
        return st;
    if (!structured && pfx_safetensors_find(f, "layers.0.gain") >= 0)
        return read_per_layer(f, label, L, H, out);
    if (!structured || (strcmp(structured, "true") && strcmp(structured, "false")))
        return pfx_error(NULL, PFX_ERROR_FORMAT,
                         "%s: metadata structured %s%s%s is neither true nor false", label,
                         structured ? "\"" : "", structured ? structured : "missing",
                         structured ? "\"" : "");
    out->structured = !strcmp(structured, "true");
    /* nothing beside the two tensors: a file of another kind that borrowed
     * the format would otherwise load as "no gain" */
    for (size_t i = 0; i < pfx_safetensors_count(f); i++) {
        pfx_st_info info;
        st = pfx_safetensors_info(f, i, &info);
        if (st == PFX_SUCCESS && strcmp(info.name, "gains") && strcmp(info.name, "dim_gains"))
            st = pfx_error(NULL, PFX_ERROR_FORMAT, "%s: tensor %s is not one of gains, dim_gains",
                           label, info.name);
        if (st != PFX_SUCCESS)
            return st;
    }
    char dims[96];
    const size_t lh[2] = { L, H }, lhd[3] = { L, H, D };
    snprintf(dims, sizeof(dims), "[L=%zu, H=%zu]", L, H);
    st = read_tensor(f, label, "gains", out->gain_mode != PFX_GAIN_OFF,
                     out->gain_mode != PFX_GAIN_OFF ? "gain_mode is not off" : "gain_mode is off",
                     2, lh, dims, out->gains);
    snprintf(dims, sizeof(dims), "[L=%zu, H=%zu, D=%zu]", L, H, D);
    if (st == PFX_SUCCESS)
        st = read_tensor(f, label, "dim_gains", out->structured,
                         out->structured ? "structured is true" : "structured is false", 3, lhd,
                         dims, out->dim_gains);
    return st;
}
