/* prefixcl check [--device SEL]: every operation on random problems against
 * the double-precision C reference; a table and exit 0 only if all pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "commands.h"
#include "common/cli.h"
#include "common/tool_util.h"

static const cli_doc doc = { "prefixcl check [--device SEL]", NULL, NULL };

int cmd_check(int argc, char **argv)
{
    const char *selector = NULL;
    const cli_option opts[] = {
        { "--device", CLI_TEXT, &selector, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
    };
    const int parsed =
        cli_parse("check", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    pfx_runtime *rt = tool_runtime("check", selector);
    if (!rt)
        return 1;
    const pfx_device_info *info = pfx_runtime_device(rt);
    printf("device: %s / %s (%s)\n\n", info->platform_name, info->device_name,
           info->driver_version);
    printf("%-22s %-56s %12s %12s  %s\n", "operation", "shape", "error", "tolerance", "result");
    check_totals totals = { 0, 0 };
    for (size_t i = 0; i < check_case_count; i++)
        check_cases[i](rt, &totals);
    printf("\n%d of %d checks passed\n", totals.passed, totals.run);
    pfx_runtime_destroy(&rt);
    return totals.passed == totals.run && totals.run > 0 ? 0 : 1;
}
