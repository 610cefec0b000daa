/* prefixcl kernel-configs [--build]: the kernel programs and options the
 * runtime may build, per vendor family, as TSV (program, vendor, options).
 * --build compiles every configuration on the selected device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "registry.h"

static const pfx_vendor vendors[] = { PFX_VENDOR_NVIDIA, PFX_VENDOR_AMD, PFX_VENDOR_INTEL_GPU,
                                      PFX_VENDOR_CPU, PFX_VENDOR_OTHER };

/* Local memory the tile tables assume per family (NVIDIA 48 KiB, AMD 64 KiB,
 * Intel 64 KiB, PoCL CPU 1 MiB... the runtime passes the real figure). */
static uint64_t typical_local_mem(pfx_vendor v)
{
    switch (v) {
    case PFX_VENDOR_NVIDIA: return 48 * 1024;
    case PFX_VENDOR_CPU: return 1024 * 1024;
    default: return 64 * 1024;
    }
}

static int build_all(void)
{
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, NULL) != PFX_SUCCESS) {
        fprintf(stderr, "%s\n", pfx_last_error(NULL));
        return 1;
    }
    int failures = 0;
    pfx_program_config configs[256];
    for (size_t v = 0; v < sizeof(vendors) / sizeof(vendors[0]); v++) {
        size_t n = pfx_program_configs(vendors[v], typical_local_mem(vendors[v]), configs, 256);
        for (size_t i = 0; i < n && i < 256; i++) {
            char *source = pfx_kernel_source(configs[i].program);
            cl_program program;
            pfx_status st = source ? pfx_program_get_source(rt, configs[i].program, source,
                                                            configs[i].options, &program)
                                   : PFX_ERROR_BUILD_FAILED;
            free(source);
            printf("%s\t%s\t%s\t%s\n", configs[i].program, pfx_vendor_name(vendors[v]),
                   configs[i].options, st == PFX_SUCCESS ? "ok" : "FAILED");
            if (st != PFX_SUCCESS) {
                fprintf(stderr, "%s\n", pfx_last_error(rt));
                failures++;
            }
        }
    }
    pfx_runtime_destroy(&rt);
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
    pfx_program_config configs[256];
    for (size_t v = 0; v < sizeof(vendors) / sizeof(vendors[0]); v++) {
        size_t n = pfx_program_configs(vendors[v], typical_local_mem(vendors[v]), configs, 256);
        for (size_t i = 0; i < n && i < 256; i++)
            printf("%s\t%s\t%s\n", configs[i].program, pfx_vendor_name(vendors[v]),
                   configs[i].options);
    }
    return 0;
}
