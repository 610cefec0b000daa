/* prefixcl kernel-configs [--build]: the kernel programs and options the
 * runtime may build, per vendor family, as TSV (program, vendor, options).
 * --build compiles every configuration on the selected device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "tool_util.h"
#include "prefixcl/prefixcl.h"

/* Every configuration (malloc'ed), or NULL with a message. */
static pfx_kernel_config *list(size_t *count)
{
    size_t n = 0;
    pfx_kernel_config *c = NULL;
    pfx_status st = pfx_kernel_configs(NULL, 0, &n);
    if (st == PFX_SUCCESS && !(c = calloc(n ? n : 1, sizeof(*c))))
        st = PFX_ERROR_OUT_OF_MEMORY;
    if (st == PFX_SUCCESS)
        st = pfx_kernel_configs(c, n, count);
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl kernel-configs: %s\n", pfx_last_error(NULL));
        free(c);
        return NULL;
    }
    return c;
}

static int build_all(void)
{
    size_t n;
    pfx_kernel_config *configs = list(&n);
    if (!configs)
        return 1;
    pfx_runtime *rt = tool_runtime("kernel-configs", NULL);
    if (!rt) {
        free(configs);
        return 1;
    }
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        pfx_status st = pfx_kernel_config_build(rt, &configs[i]);
        printf("%s\t%s\t%s\t%s\n", configs[i].program, configs[i].vendor, configs[i].options,
               st == PFX_SUCCESS ? "ok" : "FAILED");
        if (st != PFX_SUCCESS) {
            fprintf(stderr, "%s\n", pfx_last_error(rt));
            failures++;
        }
    }
    pfx_runtime_destroy(&rt);
    free(configs);
    return failures ? 1 : 0;
}

int cmd_kernel_configs(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--build"))
        return build_all();
    if (argc != 1) {
        fprintf(stderr, "usage: prefixcl kernel-configs [--build]\n");
        return 2;
    }
    size_t n;
    pfx_kernel_config *configs = list(&n);
    if (!configs)
        return 1;
    for (size_t i = 0; i < n; i++)
        printf("%s\t%s\t%s\n", configs[i].program, configs[i].vendor, configs[i].options);
    free(configs);
    return 0;
}
