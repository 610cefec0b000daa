/* The kernel configurations as public data (prefixcl/profile.h), from the
 * registry's table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

pfx_status pfx_kernel_configs(pfx_kernel_config *out, size_t capacity, size_t *count)
{
    if (!count || (!out && capacity))
        return pfx_error(NULL, PFX_ERROR_NULL_ARGUMENT, "pfx_kernel_configs: %s is NULL",
                         !count ? "count" : "out");
    size_t total = 0;
    for (size_t v = 0; v < PFX_VENDOR_FAMILIES; v++) {
        const pfx_vendor vendor = pfx_vendor_families[v];
        /* The registry drops repeated configurations only among those it has
         * stored, so a count taken without room overstates: fill until the
         * table holds them all. */
        const uint64_t local_mem = pfx_vendor_typical_local_mem(vendor);
        size_t cap = 128, n;
        pfx_program_config *c = NULL;
        for (;;) {
            pfx_program_config *grown = realloc(c, cap * sizeof(*c));
            if (!grown) {
                free(c);
                return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_kernel_configs: out of memory");
            }
            c = grown;
            n = pfx_program_configs(vendor, NULL, local_mem, c, cap);
            if (n <= cap)
                break;
            cap = n;
        }
        for (size_t i = 0; i < n; i++, total++) {
            if (total >= capacity)
                continue;
            pfx_kernel_config *k = &out[total];
            memset(k, 0, sizeof(*k));
            snprintf(k->program, sizeof(k->program), "%s", c[i].program);
            snprintf(k->vendor, sizeof(k->vendor), "%s", pfx_vendor_name(vendor));
            snprintf(k->options, sizeof(k->options), "%s", c[i].options);
        }
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
