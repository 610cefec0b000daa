/*
 * Programs: built per device from the embedded sources (cl/common.cl first,
 * then cl/<name>.cl) with per-device -D options, kept per runtime, and cached
 * on disk as device binaries.
 *
 * Cache file: "<name>-<key>.bin" where key hashes the device name, platform,
 * driver and device version, the source and the options. Layout: 8-byte magic,
 * key (u64), payload size (u64), payload FNV-1a (u64), payload. A file that is
 * short, has another key or a wrong checksum, or that the driver refuses, is
 * counted as a reject and rebuilt. Writes go to a temporary file that is
 * renamed into place, so readers never see half a file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "program.h"

static const char cache_magic[8] = { 'P', 'F', 'X', 'C', 'L', 'B', 'I', '1' };
enum { CACHE_HEADER = 32 };
#define BUILD_STD "-cl-std=CL1.2"

uint64_t pfx_fnv1a(uint64_t hash, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        hash ^= p[i];
        hash *= 0x100000001b3ull;
    }
    return hash;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    return pfx_fnv1a(h, s, strlen(s) + 1); /* the NUL separates fields */
}

pfx_status pfx_cache_dir_resolve(const char *explicit_dir, bool disabled, char *out, size_t cap)
{
    out[0] = '\0';
    if (disabled)
        return PFX_SUCCESS;
    const char *env;
    int n = 0;
    if (explicit_dir && *explicit_dir)
        n = snprintf(out, cap, "%s", explicit_dir);
    else if ((env = getenv("PREFIXCL_CACHE_DIR")) && *env)
        n = snprintf(out, cap, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && *env)
        n = snprintf(out, cap, "%s/prefixcl", env);
    else if ((env = getenv("HOME")) && *env)
        n = snprintf(out, cap, "%s/.cache/prefixcl", env);
    if (n < 0 || (size_t)n >= cap) {
        out[0] = '\0';
        return PFX_ERROR_INVALID_ARGUMENT;
    }
    return PFX_SUCCESS;
}

/* mkdir -p; failures show up later as a cache that cannot be written. */
static void make_dirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

static void put_u64(unsigned char *dst, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        dst[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *src)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)src[i] << (8 * i);
    return v;
}

/* Reads and checks a cache file; returns the payload or NULL. *present tells
 * whether a file existed at all (absent is a miss, not a reject). */
static unsigned char *cache_read(const char *path, uint64_t key, size_t *size, bool *present)
{
    bool not_regular;
    FILE *f = pfx_fopen_regular(path, &not_regular);
    *present = f || not_regular; /* a FIFO or device there is rejected and replaced */
    if (!f)
        return NULL;
    unsigned char header[CACHE_HEADER];
    unsigned char *payload = NULL;
    if (fread(header, 1, CACHE_HEADER, f) != CACHE_HEADER || memcmp(header, cache_magic, 8) ||
        get_u64(header + 8) != key)
        goto fail;
    uint64_t len = get_u64(header + 16);
    if (len == 0 || len > (uint64_t)1 << 30)
        goto fail;
    payload = malloc((size_t)len);
    if (!payload || fread(payload, 1, (size_t)len, f) != len || fgetc(f) != EOF ||
        pfx_fnv1a(PFX_FNV_OFFSET, payload, (size_t)len) != get_u64(header + 24))
        goto fail;
    fclose(f);
    *size = (size_t)len;
    return payload;
fail:
    free(payload);
    fclose(f);
    return NULL;
}

static bool cache_write(const char *path, uint64_t key, const unsigned char *payload, size_t size)
{
    char tmp[1500];
    /* unique per process and per call, so concurrent writers never share it */
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%p", path, (long)getpid(), (const void *)payload);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return false;
    unsigned char header[CACHE_HEADER];
    memcpy(header, cache_magic, 8);
    put_u64(header + 8, key);
    put_u64(header + 16, size);
    put_u64(header + 24, pfx_fnv1a(PFX_FNV_OFFSET, payload, size));
    bool ok =
        fwrite(header, 1, CACHE_HEADER, f) == CACHE_HEADER && fwrite(payload, 1, size, f) == size;
    ok = (fclose(f) == 0) && ok;
    if (ok)
        ok = rename(tmp, path) == 0;
    if (!ok)
        remove(tmp);
    return ok;
}

static cl_int build(pfx_runtime *rt, cl_program program, const char *options)
{
    size_t len = strlen(BUILD_STD) + strlen(options) + 2;
    char *opts = malloc(len);
    if (!opts)
        return CL_OUT_OF_HOST_MEMORY;
    snprintf(opts, len, "%s %s", BUILD_STD, options);
    cl_int err = clBuildProgram(program, 1, &rt->device, opts, NULL, NULL);
    free(opts);
    return err;
}

/* Records the build failure with the compiler's log. */
static pfx_status build_failed(pfx_runtime *rt, cl_program program, cl_int err, const char *name,
                               const char *options)
{
    pfx_error(rt, PFX_ERROR_BUILD_FAILED, "building kernel program '%s' with options '%s': %s\n",
              name, options, pfx_cl_error_name(err));
    size_t len = 0;
    if (clGetProgramBuildInfo(program, rt->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) ==
            CL_SUCCESS &&
        len > 1) {
        char *log = malloc(len + 1);
        if (log && clGetProgramBuildInfo(program, rt->device, CL_PROGRAM_BUILD_LOG, len, log,
                                         NULL) == CL_SUCCESS) {
            log[len] = '\0';
            pfx_error_append(rt, "build log:\n");
            pfx_error_append(rt, log);
        }
        free(log);
    }
    return PFX_ERROR_BUILD_FAILED;
}

static cl_program load_cached(pfx_runtime *rt, const char *path, uint64_t key, const char *options)
{
    size_t size = 0;
    bool present = false;
    unsigned char *bin = cache_read(path, key, &size, &present);
    if (!bin) {
        if (present)
            rt->cache.cache_rejects++;
        return NULL;
    }
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    const unsigned char *bins[1] = { bin };
    cl_program program =
        clCreateProgramWithBinary(rt->context, 1, &rt->device, &size, bins, &status, &err);
    free(bin);
    if (err == CL_SUCCESS && status == CL_SUCCESS && build(rt, program, options) == CL_SUCCESS) {
        rt->cache.cache_hits++;
        return program;
    }
    if (program)
        clReleaseProgram(program);
    rt->cache.cache_rejects++;
    return NULL;
}

static void store_cached(pfx_runtime *rt, cl_program program, const char *path, uint64_t key)
{
    size_t size = 0;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, NULL) !=
            CL_SUCCESS ||
        size == 0)
        return;
    unsigned char *bin = malloc(size);
    unsigned char *bins[1] = { bin };
    if (bin &&
        clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(bins), bins, NULL) == CL_SUCCESS) {
        make_dirs(rt->cache_dir);
        if (cache_write(path, key, bin, size))
            rt->cache.cache_writes++;
    }
    free(bin);
}

static pfx_status program_get(pfx_runtime *rt, const char *name, const char *source,
                              const char *options, cl_program *out)
{
    uint64_t key = PFX_FNV_OFFSET;
    key = hash_str(key, rt->info.platform_name);
    key = hash_str(key, rt->info.device_name);
    key = hash_str(key, rt->info.driver_version);
    key = hash_str(key, rt->info.device_version);
    key = hash_str(key, BUILD_STD);
    key = hash_str(key, options);
    key = hash_str(key, source);
    char keytext[256];
    snprintf(keytext, sizeof(keytext), "%s-%016llx", name, (unsigned long long)key);

    for (size_t i = 0; i < rt->program_count; i++) {
        if (!strcmp(rt->programs[i].key, keytext)) {
            *out = rt->programs[i].program;
            return PFX_SUCCESS;
        }
    }
    pfx_program_entry *grown = realloc(rt->programs, (rt->program_count + 1) * sizeof(*grown));
    if (!grown)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "program table: host allocation failed");
    rt->programs = grown;
    char *stored_key = strdup(keytext);
    if (!stored_key)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "program table: host allocation failed");

    const double t0 = pfx_host_seconds();
    char path[sizeof(rt->cache_dir) + 320] = "";
    if (rt->cache_dir[0])
        snprintf(path, sizeof(path), "%s/%s.bin", rt->cache_dir, keytext);
    cl_program program = path[0] ? load_cached(rt, path, key, options) : NULL;
    if (!program) {
        cl_int err = CL_SUCCESS;
        program = clCreateProgramWithSource(rt->context, 1, &source, NULL, &err);
        if (err != CL_SUCCESS) {
            free(stored_key);
            return pfx_cl_error(rt, err, "creating a program from source");
        }
        err = build(rt, program, options);
        if (err != CL_SUCCESS) {
            pfx_status st = build_failed(rt, program, err, name, options);
            clReleaseProgram(program);
            free(stored_key);
            return st;
        }
        rt->cache.programs_built++;
        if (path[0])
            store_cached(rt, program, path, key);
    }
    rt->cache.build_seconds += pfx_host_seconds() - t0;
    rt->programs[rt->program_count++] = (pfx_program_entry){ stored_key, program };
    *out = program;
    return PFX_SUCCESS;
}

pfx_status pfx_program_get_source(pfx_runtime *rt, const char *name, const char *source,
                                  const char *options, cl_program *out)
{
    pfx_status st = pfx_rt_enter(rt, name);
    if (st != PFX_SUCCESS)
        return st;
    st = program_get(rt, name, source, options, out);
    pfx_rt_leave(rt);
    return st;
}

static pfx_status kernel_get(pfx_runtime *rt, const char *program_name, const char *options,
                             const char *kernel_name, cl_kernel *out)
{
    for (size_t i = 0; i < rt->kernel_count; i++) {
        const pfx_kernel_entry *e = &rt->kernels[i];
        if (!strcmp(e->name, kernel_name) && !strcmp(e->program_name, program_name) &&
            !strcmp(e->options, options)) {
            *out = e->kernel;
            return PFX_SUCCESS;
        }
    }
    char *source = pfx_kernel_source(program_name);
    if (!source)
        return pfx_error(rt, PFX_ERROR_BUILD_FAILED, "kernel program '%s' not found%s",
                         program_name,
                         getenv("PREFIXCL_KERNEL_DIR") ? " in $PREFIXCL_KERNEL_DIR" : "");
    cl_program program = NULL;
    pfx_status st = program_get(rt, program_name, source, options, &program);
    free(source);
    if (st != PFX_SUCCESS)
        return st;
    pfx_kernel_entry *grown = realloc(rt->kernels, (rt->kernel_count + 1) * sizeof(*grown));
    if (!grown)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "kernel table: host allocation failed");
    rt->kernels = grown;
    cl_int err = CL_SUCCESS;
    cl_kernel kernel = clCreateKernel(program, kernel_name, &err);
    if (err != CL_SUCCESS) {
        char what[256];
        snprintf(what, sizeof(what), "creating kernel '%s' of program '%s'", kernel_name,
                 program_name);
        return pfx_cl_error(rt, err, what);
    }
    pfx_kernel_entry e = { program, strdup(program_name), strdup(options), strdup(kernel_name),
                           kernel };
    if (!e.program_name || !e.options || !e.name) {
        free(e.program_name);
        free(e.options);
        free(e.name);
        clReleaseKernel(kernel);
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "kernel table: host allocation failed");
    }
    rt->kernels[rt->kernel_count++] = e;
    *out = kernel;
    return PFX_SUCCESS;
}

pfx_status pfx_kernel_get(pfx_runtime *rt, const char *program_name, const char *options,
                          const char *kernel_name, cl_kernel *out)
{
    pfx_status st = pfx_rt_enter(rt, kernel_name);
    if (st != PFX_SUCCESS)
        return st;
    st = kernel_get(rt, program_name, options, kernel_name, out);
    pfx_rt_leave(rt);
    return st;
}

void pfx_programs_release(pfx_runtime *rt)
{
    for (size_t i = 0; i < rt->kernel_count; i++) {
        clReleaseKernel(rt->kernels[i].kernel);
        free(rt->kernels[i].program_name);
        free(rt->kernels[i].options);
        free(rt->kernels[i].name);
    }
    for (size_t i = 0; i < rt->program_count; i++) {
        clReleaseProgram(rt->programs[i].program);
        free(rt->programs[i].key);
    }
    free(rt->kernels);
    free(rt->programs);
    rt->kernels = NULL;
    rt->programs = NULL;
    rt->kernel_count = rt->program_count = 0;
}
