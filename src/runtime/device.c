/* Device discovery over every platform, and selection by selector string. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

/* Copies a string property, truncated to fit (drivers refuse short buffers). */
static void info_string(cl_device_id dev, cl_device_info what, char *dst, size_t cap)
{
    dst[0] = '\0';
    size_t len = 0;
    if (clGetDeviceInfo(dev, what, 0, NULL, &len) != CL_SUCCESS || len == 0)
        return;
    char *full = calloc(len + 1, 1);
    if (full && clGetDeviceInfo(dev, what, len, full, NULL) == CL_SUCCESS)
        snprintf(dst, cap, "%s", full);
    free(full);
}

static bool has_extension(const char *extensions, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = strstr(extensions, name); p; p = strstr(p + 1, name)) {
        bool starts = p == extensions || p[-1] == ' ';
        bool ends = p[len] == '\0' || p[len] == ' ';
        if (starts && ends)
            return true;
    }
    return false;
}

static void describe(cl_platform_id plat, cl_device_id dev, unsigned pi, unsigned di,
                     pfx_device_info *info)
{
    memset(info, 0, sizeof(*info));
    info->platform_index = pi;
    info->device_index = di;
    if (clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof(info->platform_name), info->platform_name,
                          NULL) != CL_SUCCESS)
        info->platform_name[0] = '\0';
    info->platform_name[sizeof(info->platform_name) - 1] = '\0';
    info_string(dev, CL_DEVICE_NAME, info->device_name, sizeof(info->device_name));
    info_string(dev, CL_DEVICE_VENDOR, info->vendor, sizeof(info->vendor));
    info_string(dev, CL_DRIVER_VERSION, info->driver_version, sizeof(info->driver_version));
    info_string(dev, CL_DEVICE_VERSION, info->device_version, sizeof(info->device_version));
    info_string(dev, CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version,
                sizeof(info->opencl_c_version));

    cl_device_type type = 0;
    clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
    info->type = (type & CL_DEVICE_TYPE_GPU)           ? PFX_DEVICE_GPU
                 : (type & CL_DEVICE_TYPE_CPU)         ? PFX_DEVICE_CPU
                 : (type & CL_DEVICE_TYPE_ACCELERATOR) ? PFX_DEVICE_ACCELERATOR
                                                       : PFX_DEVICE_OTHER;
    cl_bool unified = CL_FALSE;
    clGetDeviceInfo(dev, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified), &unified, NULL);
    info->unified_memory = unified == CL_TRUE;

    cl_uint u = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(u), &u, NULL);
    info->compute_units = u;
    u = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof(u), &u, NULL);
    info->clock_mhz = u;
    cl_ulong ul = 0;
    clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(ul), &ul, NULL);
    info->global_mem_bytes = ul;
    ul = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(ul), &ul, NULL);
    info->max_alloc_bytes = ul;
    ul = 0;
    clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(ul), &ul, NULL);
    info->local_mem_bytes = ul;
    size_t wg = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL);
    info->max_work_group_size = wg;
    u = 0;
    clGetDeviceInfo(dev, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof(u), &u, NULL);
    info->native_float_width = u;

    size_t ext_len = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_len) == CL_SUCCESS && ext_len) {
        char *ext = calloc(ext_len + 1, 1);
        if (ext && clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, ext_len, ext, NULL) == CL_SUCCESS) {
            info->has_fp16 = has_extension(ext, "cl_khr_fp16");
            info->has_fp64 = has_extension(ext, "cl_khr_fp64");
            info->has_subgroups =
                has_extension(ext, "cl_khr_subgroups") || has_extension(ext, "cl_intel_subgroups");
            info->has_nv_attributes = has_extension(ext, "cl_nv_device_attribute_query");
            info->has_amd_attributes = has_extension(ext, "cl_amd_device_attribute_query");
            info->has_intel_attributes = has_extension(ext, "cl_intel_device_attribute_query");
        }
        free(ext);
    }
}

/* Calls visit(platform, device, info, ctx) for every device; stops when it
 * returns true. Returns the number of devices seen. */
typedef bool (*device_visitor)(cl_platform_id, cl_device_id, const pfx_device_info *, void *);

static size_t for_each_device(device_visitor visit, void *ctx)
{
    cl_uint nplat = 0;
    if (clGetPlatformIDs(0, NULL, &nplat) != CL_SUCCESS || nplat == 0)
        return 0;
    cl_platform_id *plats = calloc(nplat, sizeof(*plats));
    if (!plats || clGetPlatformIDs(nplat, plats, NULL) != CL_SUCCESS) {
        free(plats);
        return 0;
    }
    size_t seen = 0;
    bool stop = false;
    for (cl_uint p = 0; p < nplat && !stop; p++) {
        cl_uint ndev = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &ndev) != CL_SUCCESS || !ndev)
            continue;
        cl_device_id *devs = calloc(ndev, sizeof(*devs));
        if (!devs || clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, ndev, devs, NULL) != CL_SUCCESS) {
            free(devs);
            continue;
        }
        for (cl_uint d = 0; d < ndev && !stop; d++) {
            pfx_device_info info;
            describe(plats[p], devs[d], p, d, &info);
            seen++;
            stop = visit && visit(plats[p], devs[d], &info, ctx);
        }
        free(devs);
    }
    free(plats);
    return seen;
}

typedef struct list_ctx {
    pfx_device_info *infos;
    size_t capacity, filled;
} list_ctx;

static bool list_visit(cl_platform_id p, cl_device_id d, const pfx_device_info *info, void *ctx)
{
    (void)p;
    (void)d;
    list_ctx *l = ctx;
    if (l->filled < l->capacity)
        l->infos[l->filled++] = *info;
    return false;
}

pfx_status pfx_device_count(size_t *count)
{
    if (!count)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "count is NULL");
    *count = for_each_device(NULL, NULL);
    return PFX_SUCCESS;
}

pfx_status pfx_device_list(pfx_device_info *infos, size_t capacity, size_t *count)
{
    if (!count)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "count is NULL");
    if (!infos && capacity)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "infos is NULL with capacity %zu",
                         capacity);
    list_ctx l = { infos, capacity, 0 };
    *count = for_each_device(list_visit, &l);
    return PFX_SUCCESS;
}

/* Higher is stronger: discrete GPU, integrated GPU, accelerator, CPU, other;
 * then compute units x clock. */
static double device_strength(const pfx_device_info *info)
{
    double tier = 0;
    switch (info->type) {
    case PFX_DEVICE_GPU: tier = info->unified_memory ? 3 : 4; break;
    case PFX_DEVICE_ACCELERATOR: tier = 2; break;
    case PFX_DEVICE_CPU: tier = 1; break;
    default: tier = 0; break;
    }
    return tier * 1e12 + (double)info->compute_units * (double)info->clock_mhz;
}

bool pfx_contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

bool pfx_selector_parse(const char *selector, pfx_selector *out)
{
    memset(out, 0, sizeof(*out));
    while (selector && isspace((unsigned char)*selector))
        selector++;
    size_t len = selector ? strlen(selector) : 0;
    while (len && isspace((unsigned char)selector[len - 1]))
        len--;
    if (len == 0) {
        out->kind = PFX_SELECT_DEFAULT;
        return true;
    }
    if (len >= sizeof(out->text))
        return false;
    memcpy(out->text, selector, len);
    out->text[len] = '\0';

    if (isdigit((unsigned char)out->text[0])) {
        /* "1", "1:", "1:x", "4294967296:0" are malformed index pairs */
        char *colon = strchr(out->text, ':');
        uint64_t p, d;
        if (!colon)
            return false;
        *colon = '\0';
        bool ok = pfx_parse_uint(out->text, UINT_MAX, &p) == PFX_SUCCESS &&
                  pfx_parse_uint(colon + 1, UINT_MAX, &d) == PFX_SUCCESS;
        *colon = ':';
        if (!ok)
            return false;
        out->kind = PFX_SELECT_INDEX;
        out->platform = (unsigned)p;
        out->device = (unsigned)d;
        return true;
    }
    static const struct {
        const char *name;
        pfx_device_type type;
    } types[] = {
        { "gpu", PFX_DEVICE_GPU },
        { "cpu", PFX_DEVICE_CPU },
        { "accelerator", PFX_DEVICE_ACCELERATOR },
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (strlen(types[i].name) == len && pfx_contains_nocase(out->text, types[i].name)) {
            out->kind = PFX_SELECT_TYPE;
            out->type = types[i].type;
            return true;
        }
    }
    out->kind = PFX_SELECT_NAME;
    return true;
}

bool pfx_selector_matches(const pfx_selector *sel, const pfx_device_info *info)
{
    switch (sel->kind) {
    case PFX_SELECT_DEFAULT: return true;
    case PFX_SELECT_INDEX:
        return info->platform_index == sel->platform && info->device_index == sel->device;
    case PFX_SELECT_TYPE: return info->type == sel->type;
    case PFX_SELECT_NAME:
        return pfx_contains_nocase(info->platform_name, sel->text) ||
               pfx_contains_nocase(info->vendor, sel->text) ||
               pfx_contains_nocase(info->device_name, sel->text);
    }
    return false;
}

typedef struct select_ctx {
    const pfx_selector *sel;
    bool found;
    double best;
    pfx_device_info info;
    cl_platform_id platform;
    cl_device_id device;
} select_ctx;

static bool select_visit(cl_platform_id p, cl_device_id d, const pfx_device_info *info, void *ctx)
{
    select_ctx *s = ctx;
    if (!pfx_selector_matches(s->sel, info))
        return false;
    double strength = device_strength(info);
    if (!s->found || strength > s->best) {
        s->found = true;
        s->best = strength;
        s->info = *info;
        s->platform = p;
        s->device = d;
    }
    return false;
}

const char *pfx_device_type_name(pfx_device_type type)
{
    switch (type) {
    case PFX_DEVICE_CPU: return "cpu";
    case PFX_DEVICE_GPU: return "gpu";
    case PFX_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

/* "selector 'x' matches no device; devices: 0:0 platform / device (type), ..." */
static pfx_status not_found(const char *selector, size_t ndev)
{
    pfx_error(NULL, PFX_ERROR_DEVICE_NOT_FOUND,
              "device selector '%s' matches no device; %zu device%s:", selector, ndev,
              ndev == 1 ? "" : "s");
    pfx_device_info infos[64];
    size_t count = 0;
    pfx_device_list(infos, 64, &count);
    for (size_t i = 0; i < count && i < 64; i++) {
        char line[512];
        snprintf(line, sizeof(line), "\n  %u:%u  %s / %s (%s, %s)", infos[i].platform_index,
                 infos[i].device_index, infos[i].platform_name, infos[i].device_name,
                 infos[i].vendor, pfx_device_type_name(infos[i].type));
        pfx_error_append(NULL, line);
    }
    pfx_error_append(NULL, "\n  selectors: P:D, gpu, cpu, accelerator, or a name substring");
    return PFX_ERROR_DEVICE_NOT_FOUND;
}

pfx_status pfx_device_resolve(const char *selector, bool use_env, pfx_device_info *info,
                              cl_platform_id *platform, cl_device_id *device)
{
    const char *from = "device selector";
    if ((!selector || !*selector) && use_env) {
        const char *env = getenv("PREFIXCL_DEVICE");
        if (env && *env) {
            selector = env;
            from = "PREFIXCL_DEVICE";
        }
    }
    pfx_selector sel;
    if (!pfx_selector_parse(selector, &sel))
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT,
                         "%s '%s' is malformed (expected P:D, gpu, cpu, accelerator or a name)",
                         from, selector);
    select_ctx s = { .sel = &sel };
    size_t ndev = for_each_device(select_visit, &s);
    if (ndev == 0)
        return pfx_error(NULL, PFX_ERROR_NO_DEVICE,
                         "no OpenCL device found (is an ICD installed? e.g. pocl-opencl-icd)");
    if (!s.found)
        return not_found(selector, ndev);
    if (info)
        *info = s.info;
    if (platform)
        *platform = s.platform;
    if (device)
        *device = s.device;
    return PFX_SUCCESS;
}

pfx_status pfx_device_select(const char *selector, pfx_device_info *info)
{
    if (!info)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "info is NULL");
    return pfx_device_resolve(selector, true, info, NULL, NULL);
}

pfx_status pfx_device_default(pfx_device_info *info)
{
    if (!info)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "info is NULL");
    return pfx_device_resolve(NULL, false, info, NULL, NULL);
}

pfx_status pfx_device_matches(const char *selector, const pfx_device_info *info, bool *match)
{
    if (!info || !match)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "%s is NULL", !info ? "info" : "match");
    pfx_selector sel;
    if (!pfx_selector_parse(selector, &sel))
        return pfx_error(NULL, PFX_ERROR_INVALID_ARGUMENT, "device selector '%s' cannot be parsed",
                         selector);
    if (sel.kind != PFX_SELECT_DEFAULT) {
        *match = pfx_selector_matches(&sel, info);
        return PFX_SUCCESS;
    }
    pfx_device_info def;
    pfx_status st = pfx_device_default(&def);
    if (st != PFX_SUCCESS)
        return st;
    *match = info->type == def.type;
    return PFX_SUCCESS;
}
