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
        size_t n = pfx_program_configs(vendor, NULL, pfx_vendor_typical_local_mem(vendor), NULL, 0);
        pfx_program_config *c = malloc((n ? n : 1) * sizeof(*c));
        if (!c)
            return pfx_error(NULL, PFX_ERROR_OUT_OF_MEMORY, "pfx_kernel_configs: out of memory");
        /* the count above cannot drop repeated options (nothing stored to
         * compare with): with room for all, the real count is this one */
        n = pfx_program_configs(vendor, NULL, pfx_vendor_typical_local_mem(vendor), c, n);
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
