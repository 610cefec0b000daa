/* Stored CLBlast GEMM tunings: rules, file, override (see gemm_tuning.h). */
#include <stdio.h>
#include <string.h>

#include "gemm_tuning.h"

#include <clblast_c.h>

#include "io_internal.h"
#include "gemm.h"
#include "program.h"

#define FORMAT_NAME "prefixcl-gemm-tuning-1"

const char *const pfx_xgemm_names[PFX_XGEMM_PARAMS] = {
    "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
    "NDIMC", "NWG",  "SA",  "SB",  "STRM",  "STRN",  "VWM", "VWN",
};
const char *const pfx_xgemm_direct_names[PFX_XGEMM_DIRECT_PARAMS] = {
    "KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB", "VWMD", "VWND", "WGD",
};

const char *pfx_gemm_param_name(bool direct, size_t index)
{
    if (direct)
        return index < PFX_XGEMM_DIRECT_PARAMS ? pfx_xgemm_direct_names[index] : NULL;
    return index < PFX_XGEMM_PARAMS ? pfx_xgemm_names[index] : NULL;
}

void pfx_gemm_tuning_defaults(pfx_gemm_tuning *t)
{
    static const size_t xgemm[PFX_XGEMM_PARAMS] = { 0,  1,  32, 2, 8, 8, 32, 16,
                                                    16, 32, 1,  1, 0, 0, 4,  2 };
    static const size_t direct[PFX_XGEMM_DIRECT_PARAMS] = { 2, 8, 8, 8, 8, 1, 1, 1, 1, 16 };
    memset(t, 0, sizeof(*t));
    memcpy(t->xgemm, xgemm, sizeof(xgemm));
    memcpy(t->direct, direct, sizeof(direct));
    t->min_indirect = 896;
}

static bool fail(char *why, size_t cap, const char *text)
{
    snprintf(why, cap, "%s", text);
    return false;
}

static bool pow2_upto(size_t v, size_t max)
{
    return v >= 1 && v <= max && (v & (v - 1)) == 0;
}

static bool multiple(size_t x, size_t of)
{
    return of != 0 && x % of == 0;
}

/* The rules of CLBlast's Xgemm tuner (kernel 0), plus the device's limits. */
bool pfx_xgemm_valid(const size_t *v, const pfx_device_info *info, char *why, size_t cap)
{
    if (v[PFX_XG_GEMMK] != 0 || v[PFX_XG_KREG] != 1)
        return fail(why, cap, "Xgemm: only kernel 0 (GEMMK 0, KREG 1) is supported");
    const int sizes[] = { PFX_XG_KWG,   PFX_XG_KWI,   PFX_XG_MDIMA, PFX_XG_MDIMC, PFX_XG_MWG,
                          PFX_XG_NDIMB, PFX_XG_NDIMC, PFX_XG_NWG,   PFX_XG_VWM,   PFX_XG_VWN };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        if (!pow2_upto(v[sizes[i]], 256))
            return fail(why, cap, "Xgemm: a size is not a power of two in 1..256");
    const int flags[] = { PFX_XG_SA, PFX_XG_SB, PFX_XG_STRM, PFX_XG_STRN };
    for (size_t i = 0; i < 4; i++)
        if (v[flags[i]] > 1)
            return fail(why, cap, "Xgemm: SA, SB, STRM, STRN must be 0 or 1");
    size_t mdimc = v[PFX_XG_MDIMC], ndimc = v[PFX_XG_NDIMC];
    if (!multiple(v[PFX_XG_KWG], v[PFX_XG_KWI]) ||
        !multiple(v[PFX_XG_MWG], mdimc * v[PFX_XG_VWM]) ||
        !multiple(v[PFX_XG_NWG], ndimc * v[PFX_XG_VWN]) ||
        !multiple(v[PFX_XG_MWG], v[PFX_XG_MDIMA] * v[PFX_XG_VWM]) ||
        !multiple(v[PFX_XG_NWG], v[PFX_XG_NDIMB] * v[PFX_XG_VWN]) ||
        !multiple(v[PFX_XG_KWG], mdimc * ndimc / v[PFX_XG_MDIMA]) ||
        !multiple(v[PFX_XG_KWG], mdimc * ndimc / v[PFX_XG_NDIMB]))
        return fail(why, cap, "Xgemm: tile sizes break CLBlast's divisibility rules");
    if (mdimc * ndimc > info->max_work_group_size)
        return fail(why, cap, "Xgemm: MDIMC x NDIMC exceeds the device's work-group size");
    size_t local = (v[PFX_XG_SA] * v[PFX_XG_KWG] * v[PFX_XG_MWG] +
                    v[PFX_XG_SB] * v[PFX_XG_KWG] * v[PFX_XG_NWG]) *
                   sizeof(float);
    if (local > info->local_mem_bytes)
        return fail(why, cap, "Xgemm: needs more local memory than the device has");
    return true;
}

/* The rules of CLBlast's XgemmDirect tuner, plus the device's limits. */
bool pfx_xgemm_direct_valid(const size_t *v, const pfx_device_info *info, char *why, size_t cap)
{
    const int sizes[] = { PFX_XD_KWID,   PFX_XD_MDIMAD, PFX_XD_MDIMCD, PFX_XD_NDIMBD,
                          PFX_XD_NDIMCD, PFX_XD_VWMD,   PFX_XD_VWND,   PFX_XD_WGD };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        if (!pow2_upto(v[sizes[i]], 256))
            return fail(why, cap, "XgemmDirect: a size is not a power of two in 1..256");
    if (v[PFX_XD_PADA] > 1 || v[PFX_XD_PADB] > 1)
        return fail(why, cap, "XgemmDirect: PADA, PADB must be 0 or 1");
    size_t wgd = v[PFX_XD_WGD], mc = v[PFX_XD_MDIMCD], nc = v[PFX_XD_NDIMCD];
    if (!multiple(wgd, v[PFX_XD_KWID]) || !multiple(wgd, mc * v[PFX_XD_VWMD]) ||
        !multiple(wgd, nc * v[PFX_XD_VWND]) || !multiple(wgd, v[PFX_XD_MDIMAD] * v[PFX_XD_VWMD]) ||
        !multiple(wgd, v[PFX_XD_NDIMBD] * v[PFX_XD_VWND]) ||
        !multiple(wgd, mc * nc / v[PFX_XD_MDIMAD]) || !multiple(wgd, mc * nc / v[PFX_XD_NDIMBD]))
        return fail(why, cap, "XgemmDirect: tile sizes break CLBlast's divisibility rules");
    if (mc * nc > info->max_work_group_size)
        return fail(why, cap, "XgemmDirect: MDIMCD x NDIMCD exceeds the device's work-group size");
    size_t local = (wgd * (wgd + v[PFX_XD_PADA]) + wgd * (wgd + v[PFX_XD_PADB])) * sizeof(float);
    if (local > info->local_mem_bytes)
        return fail(why, cap, "XgemmDirect: needs more local memory than the device has");
    return true;
}

static uint64_t device_key(const pfx_device_info *info)
{
    const char *fields[] = { info->platform_name, info->device_name, info->driver_version,
                             info->device_version };
    uint64_t h = PFX_FNV_OFFSET;
    for (size_t i = 0; i < 4; i++)
        h = pfx_fnv1a(h, fields[i], strlen(fields[i]) + 1);
    return h;
}

bool pfx_gemm_tuning_path(const pfx_device_info *info, const char *cache_dir, char *out, size_t cap)
{
    if (!cache_dir || !cache_dir[0])
        return false;
    int n = snprintf(out, cap, "%s/gemm-tuning-%016llx-f32.json", cache_dir,
                     (unsigned long long)device_key(info));
    return n > 0 && (size_t)n < cap;
}

/* A non-negative integer member of obj, or false. */
static bool get_size(const cJSON *obj, const char *name, size_t *out)
{
    uint64_t v = 0;
    if (!pfx_json_uint(cJSON_GetObjectItemCaseSensitive(obj, name), &v) || v > (1u << 30))
        return false;
    *out = (size_t)v;
    return true;
}

static bool same_string(const cJSON *root, const char *name, const char *want)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, name);
    return cJSON_IsString(s) && !strcmp(s->valuestring, want);
}

static pfx_status parse(const cJSON *root, const pfx_device_info *info, pfx_gemm_tuning *t,
                        char *why, size_t cap)
{
    if (!cJSON_IsObject(root) || !same_string(root, "format", FORMAT_NAME))
        return fail(why, cap, "not a " FORMAT_NAME " file"), PFX_ERROR_FORMAT;
    if (!same_string(root, "platform", info->platform_name) ||
        !same_string(root, "device", info->device_name) ||
        !same_string(root, "driver", info->driver_version) ||
        !same_string(root, "device_version", info->device_version) ||
        !same_string(root, "precision", "f32"))
        return fail(why, cap, "made for another device, driver or precision"), PFX_ERROR_FORMAT;
    const cJSON *xg = cJSON_GetObjectItemCaseSensitive(root, "Xgemm");
    const cJSON *xd = cJSON_GetObjectItemCaseSensitive(root, "XgemmDirect");
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "GemmRoutine");
    for (int i = 0; i < PFX_XGEMM_PARAMS; i++)
        if (!get_size(xg, pfx_xgemm_names[i], &t->xgemm[i]))
            return snprintf(why, cap, "Xgemm.%s is missing or not an integer", pfx_xgemm_names[i]),
                   PFX_ERROR_FORMAT;
    for (int i = 0; i < PFX_XGEMM_DIRECT_PARAMS; i++)
        if (!get_size(xd, pfx_xgemm_direct_names[i], &t->direct[i]))
            return snprintf(why, cap, "XgemmDirect.%s is missing or not an integer",
                            pfx_xgemm_direct_names[i]),
                   PFX_ERROR_FORMAT;
    if (!get_size(gr, "XGEMM_MIN_INDIRECT_SIZE", &t->min_indirect))
        return fail(why, cap, "GemmRoutine.XGEMM_MIN_INDIRECT_SIZE is missing or not an integer"),
               PFX_ERROR_FORMAT;
    if (!pfx_xgemm_valid(t->xgemm, info, why, cap) ||
        !pfx_xgemm_direct_valid(t->direct, info, why, cap))
        return PFX_ERROR_FORMAT;
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "untuned_gflops");
    t->untuned_gflops = cJSON_IsNumber(g) ? g->valuedouble : 0;
    g = cJSON_GetObjectItemCaseSensitive(root, "tuned_gflops");
    t->tuned_gflops = cJSON_IsNumber(g) ? g->valuedouble : 0;
    return PFX_SUCCESS;
}

pfx_status pfx_gemm_tuning_read(const char *path, const pfx_device_info *info, pfx_gemm_tuning *out,
                                char *why, size_t cap)
{
    unsigned char *buf = NULL;
    size_t size = 0;
    if (pfx_read_file(NULL, path, 1 << 16, &buf, &size) != PFX_SUCCESS) {
        snprintf(why, cap, "%s", pfx_last_error(NULL));
        return PFX_ERROR_IO;
    }
    /* The rule of every JSON reader: no \u0000, no key twice. */
    cJSON *root = NULL;
    pfx_status pst = pfx_json_parse_object(NULL, "the tuning file", buf, size, &root);
    free(buf);
    if (pst != PFX_SUCCESS) {
        snprintf(why, cap, "%s", pfx_last_error(NULL));
        return pst;
    }
    pfx_gemm_tuning t;
    memset(&t, 0, sizeof(t));
    pfx_status st = parse(root, info, &t, why, cap);
    cJSON_Delete(root);
    if (st == PFX_SUCCESS)
        *out = t;
    return st;
}

pfx_status pfx_gemm_tuning_write(pfx_runtime *rt, const char *path, const pfx_gemm_tuning *t)
{
    const pfx_device_info *info = &rt->info;
    cJSON *root = cJSON_CreateObject();
    cJSON *xg = cJSON_CreateObject(), *xd = cJSON_CreateObject(), *gr = cJSON_CreateObject();
    bool ok = root && xg && xd && gr;
    if (ok) {
        cJSON_AddStringToObject(root, "format", FORMAT_NAME);
        cJSON_AddStringToObject(root, "platform", info->platform_name);
        cJSON_AddStringToObject(root, "device", info->device_name);
        cJSON_AddStringToObject(root, "driver", info->driver_version);
        cJSON_AddStringToObject(root, "device_version", info->device_version);
        cJSON_AddStringToObject(root, "precision", "f32");
        for (int i = 0; i < PFX_XGEMM_PARAMS; i++)
            cJSON_AddNumberToObject(xg, pfx_xgemm_names[i], (double)t->xgemm[i]);
        for (int i = 0; i < PFX_XGEMM_DIRECT_PARAMS; i++)
            cJSON_AddNumberToObject(xd, pfx_xgemm_direct_names[i], (double)t->direct[i]);
        cJSON_AddNumberToObject(gr, "XGEMM_MIN_INDIRECT_SIZE", (double)t->min_indirect);
        cJSON_AddItemToObject(root, "Xgemm", xg);
        cJSON_AddItemToObject(root, "XgemmDirect", xd);
        cJSON_AddItemToObject(root, "GemmRoutine", gr);
        xg = xd = gr = NULL;
        cJSON_AddNumberToObject(root, "untuned_gflops", t->untuned_gflops);
        cJSON_AddNumberToObject(root, "tuned_gflops", t->tuned_gflops);
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(xg);
    cJSON_Delete(xd);
    cJSON_Delete(gr);
    if (!text)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "gemm tuning: host allocation failed");
    pfx_atomic_file af;
    pfx_status st = pfx_atomic_begin(rt, path, &af);
    if (st == PFX_SUCCESS)
        st = pfx_atomic_write(rt, &af, text, strlen(text));
    if (st == PFX_SUCCESS)
        st = pfx_atomic_write(rt, &af, "\n", 1);
    if (st == PFX_SUCCESS)
        st = pfx_atomic_commit(rt, &af);
    else
        pfx_atomic_abort(&af);
    free(text);
    return st;
}

static pfx_status override(pfx_runtime *rt, const char *kernel, const char *const *names,
                           const size_t *values, size_t count)
{
    CLBlastStatusCode s = CLBlastOverrideParameters(rt->device, kernel, CLBlastPrecisionSingle,
                                                    count, (const char **)names, values);
    char what[64];
    snprintf(what, sizeof(what), "gemm tuning: overriding %s", kernel);
    return pfx_clblast_error(rt, s, what);
}

pfx_status pfx_gemm_min_indirect_override(pfx_runtime *rt, size_t min_indirect)
{
    static const char *const name[1] = { "XGEMM_MIN_INDIRECT_SIZE" };
    return override(rt, "GemmRoutine", name, &min_indirect, 1);
}

pfx_status pfx_gemm_tuning_override(pfx_runtime *rt, const pfx_gemm_tuning *t)
{
    pfx_status st = override(rt, "Xgemm", pfx_xgemm_names, t->xgemm, PFX_XGEMM_PARAMS);
    if (st == PFX_SUCCESS)
        st =
            override(rt, "XgemmDirect", pfx_xgemm_direct_names, t->direct, PFX_XGEMM_DIRECT_PARAMS);
    if (st == PFX_SUCCESS)
        st = pfx_gemm_min_indirect_override(rt, t->min_indirect);
    return st;
}
