/* prefixcl devices [--json]: every device, the default marked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common/cli.h"
#include "common/tool_util.h"
#include "prefixcl/prefixcl.h"

/* The GEMM backend a runtime would pick here and the stored CLBlast tuning. */
static void gemm_status(const pfx_device_info *x, const char **backend, char *tuning, size_t cap)
{
    pfx_gemm_backend b = PFX_GEMM_CLBLAST;
    *backend = pfx_gemm_device_status(x, NULL, &b, tuning, cap) == PFX_SUCCESS
                   ? pfx_gemm_backend_name(b)
                   : "refused (see $PREFIXCL_GEMM)";
}

/* How the project has validated this kind of device (README "Devices"). */
static const char *validation_of(const pfx_device_info *x)
{
    if (strstr(x->platform_name, "Portable Computing Language"))
        return "CI: test suite and check on PoCL (CPU), every tile configuration forced";
    if (strstr(x->platform_name, "rusticl") && strstr(x->device_name, "llvmpipe"))
        return "CI: test suite and check on Mesa rusticl (llvmpipe), every tile configuration "
               "that fits forced";
    if (strstr(x->platform_name, "Oclgrind"))
        return "CI: check, attention and model suites on the Oclgrind simulator, every GPU tile "
               "configuration forced, races and out-of-bounds accesses fail";
    if (x->type == PFX_DEVICE_GPU &&
        (strstr(x->vendor, "NVIDIA") || strstr(x->vendor, "AMD") ||
         strstr(x->vendor, "Advanced Micro Devices") || strstr(x->vendor, "Intel")))
        return "offline compile gate only (tests/kernel_gate.py): not yet run on such a device";
    return "not validated: run `prefixcl check` first";
}

static void print_json(const pfx_device_info *d, size_t n, const pfx_device_info *def)
{
    printf("{\n  \"devices\": [");
    for (size_t i = 0; i < n; i++) {
        const pfx_device_info *x = &d[i];
        bool is_default =
            def && def->platform_index == x->platform_index && def->device_index == x->device_index;
        printf("%s\n    {\"selector\": \"%u:%u\", \"default\": %s, \"platform\": ", i ? "," : "",
               x->platform_index, x->device_index, is_default ? "true" : "false");
        tool_json_string(stdout, x->platform_name);
        printf(", \"name\": ");
        tool_json_string(stdout, x->device_name);
        printf(", \"vendor\": ");
        tool_json_string(stdout, x->vendor);
        printf(", \"driver_version\": ");
        tool_json_string(stdout, x->driver_version);
        printf(", \"device_version\": ");
        tool_json_string(stdout, x->device_version);
        printf(", \"opencl_c_version\": ");
        tool_json_string(stdout, x->opencl_c_version);
        printf(", \"type\": \"%s\", \"unified_memory\": %s, \"compute_units\": %u, "
               "\"clock_mhz\": %u, \"global_mem_bytes\": %llu, \"max_alloc_bytes\": %llu, "
               "\"local_mem_bytes\": %llu, \"max_work_group_size\": %zu, \"fp16\": %s, "
               "\"fp64\": %s, \"subgroups\": %s, \"nv_attributes\": %s, \"amd_attributes\": %s, "
               "\"intel_attributes\": %s",
               tool_device_type(x->type), x->unified_memory ? "true" : "false", x->compute_units,
               x->clock_mhz, (unsigned long long)x->global_mem_bytes,
               (unsigned long long)x->max_alloc_bytes, (unsigned long long)x->local_mem_bytes,
               x->max_work_group_size, x->has_fp16 ? "true" : "false",
               x->has_fp64 ? "true" : "false", x->has_subgroups ? "true" : "false",
               x->has_nv_attributes ? "true" : "false", x->has_amd_attributes ? "true" : "false",
               x->has_intel_attributes ? "true" : "false");
        printf(", \"validated\": ");
        tool_json_string(stdout, validation_of(x));
        const char *backend;
        char tuning[1800];
        gemm_status(x, &backend, tuning, sizeof(tuning));
        printf(", \"gemm_backend\": ");
        tool_json_string(stdout, backend);
        printf(", \"clblast_gemm_tuning\": ");
        tool_json_string(stdout, tuning);
        printf("}");
    }
    printf("\n  ]\n}\n");
}

static const char *yes(bool b)
{
    return b ? "yes" : "no";
}

static void print_text(const pfx_device_info *d, size_t n, const pfx_device_info *def)
{
    for (size_t i = 0; i < n; i++) {
        const pfx_device_info *x = &d[i];
        bool is_default =
            def && def->platform_index == x->platform_index && def->device_index == x->device_index;
        printf("%s %u:%u  %s\n", is_default ? "*" : " ", x->platform_index, x->device_index,
               x->device_name);
        printf("      platform          : %s\n", x->platform_name);
        printf("      vendor            : %s\n", x->vendor);
        printf("      type              : %s%s\n", tool_device_type(x->type),
               x->type == PFX_DEVICE_GPU ? (x->unified_memory ? " (integrated)" : " (discrete)")
                                         : "");
        printf("      driver            : %s\n", x->driver_version);
        printf("      version           : %s / %s\n", x->device_version, x->opencl_c_version);
        printf("      compute units     : %u @ %u MHz\n", x->compute_units, x->clock_mhz);
        printf("      global memory     : %.2f GiB (largest allocation %.2f GiB)\n",
               (double)x->global_mem_bytes / (1 << 30), (double)x->max_alloc_bytes / (1 << 30));
        printf("      local memory      : %.2f KiB\n", (double)x->local_mem_bytes / 1024);
        printf("      max work-group    : %zu\n", x->max_work_group_size);
        printf("      fp16 / fp64       : %s / %s\n", yes(x->has_fp16), yes(x->has_fp64));
        printf("      sub-groups        : %s\n", yes(x->has_subgroups));
        printf("      vendor attributes : nv %s, amd %s, intel %s\n", yes(x->has_nv_attributes),
               yes(x->has_amd_attributes), yes(x->has_intel_attributes));
        printf("      validated         : %s\n", validation_of(x));
        const char *backend;
        char tuning[1800];
        gemm_status(x, &backend, tuning, sizeof(tuning));
        printf("      dense products    : %s\n", backend);
        printf("      CLBlast GEMM      : %s\n", tuning);
    }
    if (def)
        printf("\n* the default device (no selector)\n");
}

static const cli_doc doc = { "prefixcl devices [--json]",
                             "Every OpenCL device, the default marked.\n", NULL };

int cmd_devices(int argc, char **argv)
{
    bool json = false;
    const cli_option opts[] = {
        { "--json", CLI_FLAG, &json, 0, 0, NULL, NULL, NULL, "the devices as JSON", NULL },
    };
    const int parsed =
        cli_parse("devices", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    size_t n = 0;
    if (pfx_device_count(&n) != PFX_SUCCESS)
        return 1;
    pfx_device_info *infos = calloc(n ? n : 1, sizeof(*infos));
    if (!infos || pfx_device_list(infos, n, &n) != PFX_SUCCESS) {
        free(infos);
        return 1;
    }
    pfx_device_info def;
    bool have_default = pfx_device_default(&def) == PFX_SUCCESS;
    if (json)
        print_json(infos, n, have_default ? &def : NULL);
    else if (n == 0)
        printf("no OpenCL device found (install an ICD, e.g. pocl-opencl-icd)\n");
    else
        print_text(infos, n, have_default ? &def : NULL);
    free(infos);
    return n ? 0 : 1;
}
