/* The kernel configurations and the kernel tuning override as public data
 * (prefixcl/profile.h), from the registry's table and the tuning database. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_tuning.h"
#include "program.h"
#include "registry.h"

_Static_assert(PFX_OPTIONS_MAX <= PFX_KERNEL_OPTIONS_MAX,
               "a registry configuration's options fit pfx_kernel_config.options");

static void fill(pfx_kernel_config *k, const pfx_program_config *c, const char *vendor,
                 const char *entry, uint64_t local_mem)
{
    memset(k, 0, sizeof(*k));
    snprintf(k->program, sizeof(k->program), "%s", c->program);
    snprintf(k->vendor, sizeof(k->vendor), "%s", vendor);
    snprintf(k->options, sizeof(k->options), "%s", c->options);
    snprintf(k->tuning_entry, sizeof(k->tuning_entry), "%s", entry);
    k->local_mem_bytes = local_mem;
}

/* The configurations of a family (rt NULL) or of rt, in a buffer of the
 * caller's to free; NULL when out of memory. A count taken without room
 * cannot drop repeated attention tiles, so it may be too high: grow until
 * the filled list fits. */
static pfx_program_config *collect(pfx_vendor vendor, pfx_runtime *rt, size_t *count)
{
    size_t cap = 64, n;
    for (;;) {
        pfx_program_config *c = malloc(cap * sizeof(*c));
        if (!c)
            return NULL;
        n = rt ? pfx_runtime_configs(rt, c, cap)
               : pfx_program_configs(vendor, NULL, pfx_vendor_typical_local_mem(vendor), c, cap);
        if (n <= cap) {
            *count = n;
            return c;
        }
        free(c);
        cap = n;
    }
}

pfx_status pfx_kernel_configs(pfx_kernel_config *out, size_t capacity, size_t *count)
{
    if (!count || (!out && capacity))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_kernel_configs: %s is NULL",
                         !count ? "count" : "out");
    size_t total = 0;
    for (size_t v = 0; v < PFX_VENDOR_FAMILIES; v++) {
        const pfx_vendor vendor = pfx_vendor_families[v];
        size_t n;
        pfx_program_config *c = collect(vendor, NULL, &n);
        if (!c)
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_kernel_configs: out of memory");
        const char *entry;
        pfx_attn_tuning_lookup(vendor, NULL, &entry);
        for (size_t i = 0; i < n; i++, total++)
            if (total < capacity)
                fill(&out[total], &c[i], pfx_vendor_name(vendor), entry,
                     pfx_vendor_typical_local_mem(vendor));
        free(c);
    }
    *count = total;
    return PFX_SUCCESS;
}

pfx_status pfx_kernel_config_build(pfx_runtime *rt, const pfx_kernel_config *config)
{
    if (!rt || !config)
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_kernel_config_build: %s is NULL",
                         !rt ? "rt" : "config");
    if (!memchr(config->program, 0, sizeof(config->program)) ||
        !memchr(config->options, 0, sizeof(config->options)))
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_kernel_config_build: config.program or config.options is not "
                         "NUL-terminated");
    char *source = config->program[0] ? pfx_kernel_source(config->program) : NULL;
    if (!source)
        return pfx_error(rt, PFX_ERROR_INVALID_ARGUMENT,
                         "pfx_kernel_config_build: no kernel program '%s'", config->program);
    cl_program program;
    pfx_status st = pfx_program_get_source(rt, config->program, source, config->options, &program);
    free(source);
    return st;
}

pfx_status pfx_runtime_kernel_configs(pfx_runtime *rt, pfx_kernel_config *out, size_t capacity,
                                      size_t *count)
{
    if (!rt || !count || (!out && capacity))
        return pfx_error(rt, PFX_ERROR_NULL_ARGUMENT, "pfx_runtime_kernel_configs: %s is NULL",
                         !rt      ? "rt"
                         : !count ? "count"
                                  : "out");
    size_t n;
    pfx_program_config *c = collect(rt->vendor, rt, &n);
    if (!c)
        return pfx_error(rt, PFX_ERROR_OUT_OF_MEMORY, "pfx_runtime_kernel_configs: out of memory");
    const char *entry;
    pfx_attn_tuning_lookup(rt->vendor, &rt->info, &entry);
    for (size_t i = 0; i < n && i < capacity; i++)
        fill(&out[i], &c[i], "device", entry, rt->info.local_mem_bytes);
    free(c);
    *count = n;
    return PFX_SUCCESS;
}

pfx_status pfx_kernel_tuning_override_get(pfx_kernel_tuning_override *out)
{
    if (!out)
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT,
                         "pfx_kernel_tuning_override_get: out is NULL");
    memset(out, 0, sizeof(*out));
    if (pfx_cache_dir_resolve(NULL, false, out->cache_dir, sizeof(out->cache_dir)) != PFX_SUCCESS)
        out->cache_dir[0] = '\0';
    pfx_attn_override *o = malloc(sizeof(*o));
    if (!o)
        return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY,
                         "pfx_kernel_tuning_override_get: out of memory");
    pfx_status st = pfx_attn_override_load(NULL, NULL, out->cache_dir, o);
    if (st == PFX_SUCCESS && o->count) {
        out->present = true;
        snprintf(out->source, sizeof(out->source), "%s", o->source);
        snprintf(out->text, sizeof(out->text), "%s", o->text);
    }
    free(o);
    return st;
}
