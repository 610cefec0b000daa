/* prefixcl kernel-configs [--build]: the kernel programs and options the
 * runtime may build, per vendor family, as TSV (program, vendor, options),
 * after '#' lines naming the kernel tuning override in effect, if any.
 * --build compiles every configuration on the selected device, and what the
 * runtime there would build (its database entry and the override; vendor
 * column "device"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common/cli.h"
#include "prefixcl/prefixcl.h"

/* Every configuration of the families (rt NULL) or of rt's device; NULL
 * with the library's message printed on failure. */
static pfx_kernel_config *list_configs(pfx_runtime *rt, size_t *count)
{
    size_t n = 0;
    pfx_status st =
        rt ? pfx_runtime_kernel_configs(rt, NULL, 0, &n) : pfx_kernel_configs(NULL, 0, &n);
    pfx_kernel_config *c = st == PFX_SUCCESS ? calloc(n ? n : 1, sizeof(*c)) : NULL;
    if (c && (rt ? pfx_runtime_kernel_configs(rt, c, n, &n) : pfx_kernel_configs(c, n, &n)) ==
                 PFX_SUCCESS) {
        *count = n;
        return c;
    }
    fprintf(stderr, "prefixcl: %s\n",
            c || st != PFX_SUCCESS ? pfx_last_error(rt) : "out of memory");
    free(c);
    return NULL;
}

static int build_list(pfx_runtime *rt, const pfx_kernel_config *c, size_t n)
{
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        pfx_status st = pfx_kernel_config_build(rt, &c[i]);
        printf("%s\t%s\t%s\t%s\n", c[i].program, c[i].vendor, c[i].options,
               st == PFX_SUCCESS ? "ok" : "FAILED");
        if (st != PFX_SUCCESS) {
            fprintf(stderr, "%s\n", pfx_last_error(rt));
            failures++;
        }
    }
    return failures;
}

static int build_all(void)
{
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, NULL) != PFX_SUCCESS) {
        fprintf(stderr, "%s\n", pfx_last_error(NULL));
        return 1;
    }
    int failures = 0;
    size_t n;
    pfx_kernel_config *c = list_configs(NULL, &n);
    failures += c ? build_list(rt, c, n) : 1;
    free(c);
    c = list_configs(rt, &n);
    failures += c ? build_list(rt, c, n) : 1;
    free(c);
    pfx_runtime_destroy(&rt);
    return failures ? 1 : 0;
}

/* The override a runtime created now would use ('#' lines). */
static int print_override(void)
{
    pfx_kernel_tuning_override o;
    if (pfx_kernel_tuning_override_get(&o) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl: %s\n", pfx_last_error(NULL));
        return 1;
    }
    if (!o.present) {
        printf("# kernel tuning override: none ($PREFIXCL_TUNING unset, no %s/tuning.txt)\n",
               o.cache_dir[0] ? o.cache_dir : "<cache>");
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

static const cli_doc doc = {
    "prefixcl kernel-configs [--build]",
    "The kernel programs and options the runtime may build, per vendor family, as\n"
    "TSV (program, vendor, options).\n",
    NULL
};

int cmd_kernel_configs(int argc, char **argv)
{
    bool build = false;
    const cli_option opts[] = {
        { "--build", CLI_FLAG, &build, 0, 0, NULL, NULL, NULL,
          "compile every configuration on the selected device, and what the runtime there would "
          "build",
          NULL },
    };
    const int parsed =
        cli_parse("kernel-configs", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    if (build)
        return build_all();
    if (print_override())
        return 1;
    size_t n;
    pfx_kernel_config *c = list_configs(NULL, &n);
    if (!c)
        return 1;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(c[i].vendor, c[i - 1].vendor))
            printf("# %s: tuning database entry %s, %llu bytes of local memory assumed\n",
                   c[i].vendor, c[i].tuning_entry, (unsigned long long)c[i].local_mem_bytes);
        printf("%s\t%s\t%s\n", c[i].program, c[i].vendor, c[i].options);
    }
    free(c);
    return 0;
}
