/* prefixcl kernel-configs [--build]: the kernel programs and options the
 * runtime may build, per vendor family, as TSV (program, vendor, options),
 * after '#' lines naming the kernel tuning override in effect, if any.
 * --build compiles every configuration on the selected device, and what the
 * runtime there would build (its database entry and the override; vendor
 * column "device"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_tuning.h"
#include "commands.h"
#include "program.h"
#include "registry.h"

#define MAX_CONFIGS 256

static int build_one(pfx_runtime *rt, const pfx_program_config *c, const char *vendor)
{
    char *source = pfx_kernel_source(c->program);
    cl_program program;
    pfx_status st = source ? pfx_program_get_source(rt, c->program, source, c->options, &program)
                           : PFX_ERROR_BUILD_FAILED;
    free(source);
    printf("%s\t%s\t%s\t%s\n", c->program, vendor, c->options, st == PFX_SUCCESS ? "ok" : "FAILED");
    if (st != PFX_SUCCESS)
        fprintf(stderr, "%s\n", pfx_last_error(rt));
    return st != PFX_SUCCESS;
}

static int build_all(void)
{
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, NULL) != PFX_SUCCESS) {
        fprintf(stderr, "%s\n", pfx_last_error(NULL));
        return 1;
    }
    int failures = 0;
    pfx_program_config configs[MAX_CONFIGS];
    for (size_t v = 0; v < PFX_VENDOR_FAMILIES; v++) {
        pfx_vendor vendor = pfx_vendor_families[v];
        size_t n = pfx_program_configs(vendor, NULL, pfx_vendor_typical_local_mem(vendor), configs,
                                       MAX_CONFIGS);
        for (size_t i = 0; i < n && i < MAX_CONFIGS; i++)
            failures += build_one(rt, &configs[i], pfx_vendor_name(vendor));
    }
    size_t n = pfx_runtime_configs(rt, configs, MAX_CONFIGS);
    for (size_t i = 0; i < n && i < MAX_CONFIGS; i++)
        failures += build_one(rt, &configs[i], "device");
    pfx_runtime_destroy(&rt);
    return failures ? 1 : 0;
}

/* The override a runtime created now would use ('#' lines). */
static int print_override(void)
{
    char cache_dir[1024];
    pfx_attn_override o;
    if (pfx_cache_dir_resolve(NULL, false, cache_dir, sizeof(cache_dir)) != PFX_SUCCESS)
        cache_dir[0] = '\0';
    if (pfx_attn_override_load(NULL, NULL, cache_dir, &o) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl: %s\n", pfx_last_error(NULL));
        return 1;
    }
    if (!o.count) {
        printf("# kernel tuning override: none ($PREFIXCL_TUNING unset, no %s/tuning.txt)\n",
               cache_dir[0] ? cache_dir : "<cache>");
        return 0;
    }
    printf("# kernel tuning override (%s), applied on top of the entries below:\n", o.source);
    for (const char *line = o.text; *line;) {
        size_t len = strcspn(line, "\n");
        printf("#   %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    return 0;
}

int cmd_kernel_configs(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--build"))
        return build_all();
    if (argc != 1) {
        fprintf(stderr, "usage: prefixcl kernel-configs [--build]\n");
        return 2;
    }
    if (print_override())
        return 1;
    pfx_program_config configs[MAX_CONFIGS];
    for (size_t v = 0; v < PFX_VENDOR_FAMILIES; v++) {
        pfx_vendor vendor = pfx_vendor_families[v];
        const char *entry;
        pfx_attn_tuning_lookup(vendor, NULL, &entry);
        printf("# %s: tuning database entry %s, %llu bytes of local memory assumed\n",
               pfx_vendor_name(vendor), entry,
               (unsigned long long)pfx_vendor_typical_local_mem(vendor));
        size_t n = pfx_program_configs(vendor, NULL, pfx_vendor_typical_local_mem(vendor), configs,
                                       MAX_CONFIGS);
        for (size_t i = 0; i < n && i < MAX_CONFIGS; i++)
            printf("%s\t%s\t%s\n", configs[i].program, pfx_vendor_name(vendor),
                   configs[i].options);
    }
    return 0;
}
