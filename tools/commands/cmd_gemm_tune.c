/* prefixcl gemm-tune [--device SEL] [--time-limit S] [--seed N] [--quiet]:
 * tunes CLBlast's GEMM kernels for one device (prefixcl/gemm_tune.h) and
 * stores the winner in the kernel cache folder, where every later runtime on
 * that device and driver applies it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "commands.h"
#include "prefixcl/prefixcl.h"

static const cli_doc doc = {
    "prefixcl gemm-tune [--device SEL] [--time-limit S] [--seed N] [--quiet]", NULL, NULL
};

typedef struct progress {
    bool tty, quiet;
    double last_line;
} progress;

static void on_progress(void *user, double fraction, const char *phase, unsigned tried,
                        double best_gflops)
{
    progress *p = user;
    if (p->quiet)
        return;
    if (p->tty) {
        char bar[CLI_BAR_MAX + 1];
        cli_bar(bar, fraction, 30);
        fprintf(stderr, "\r[%s] %-11s %4u tried  best %7.2f GFLOP/s", bar, phase, tried,
                best_gflops);
        fflush(stderr);
    } else if (fraction - p->last_line >= 0.1 || !strcmp(phase, "tuned") ||
               !strcmp(phase, "untuned")) {
        p->last_line = fraction;
        fprintf(stderr, "gemm-tune: %3.0f%% %s, %u tried, best %.2f GFLOP/s\n", fraction * 100,
                phase, tried, best_gflops);
    }
}

int cmd_gemm_tune(int argc, char **argv)
{
    const char *device = NULL;
    uint64_t limit = 300, seed = 1;
    bool quiet = false;
    const cli_option opts[] = {
        { "--device", CLI_TEXT, &device, 0, 0, NULL, NULL, "SEL",
          "P:D, gpu, cpu or a name substring", "$PREFIXCL_DEVICE, then the default device" },
        { "--time-limit", CLI_U64, &limit, 1, 86400, NULL, NULL, "S",
          "seconds of search, 1..86400; at least one candidate per kernel is timed whatever the "
          "limit",
          "300" },
        { "--seed", CLI_U64, &seed, 0, 1.9e19, NULL, NULL, "N", "order of the sampled candidates",
          "1" },
        { "--quiet", CLI_FLAG, &quiet, 0, 0, NULL, NULL, NULL, "only the result", NULL },
    };
    const int parsed =
        cli_parse("gemm-tune", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, &doc);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    pfx_runtime_params rp;
    pfx_runtime_default_params(&rp);
    rp.device = device;
    rp.gemm = PFX_GEMM_CLBLAST;
    rp.gemm_untuned = true; /* the baseline is CLBlast's own choice */
    pfx_runtime *rt = NULL;
    if (pfx_runtime_create(&rt, &rp) != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl gemm-tune: %s\n", pfx_last_error(NULL));
        return 1;
    }
    const pfx_device_info *info = pfx_runtime_device(rt);
    if (!quiet)
        fprintf(stderr, "gemm-tune: %s (%s, driver %s), up to %llu s\n", info->device_name,
                info->platform_name, info->driver_version, (unsigned long long)limit);
    progress prog = { .tty = isatty(STDERR_FILENO) != 0, .quiet = quiet, .last_line = -1 };
    pfx_gemm_tune_params params = {
        .time_limit_s = (double)limit, .seed = seed, .progress = on_progress, .user = &prog
    };
    pfx_gemm_tune_report rep;
    pfx_status st = pfx_gemm_tune(rt, &params, &rep);
    if (prog.tty && !quiet)
        fputc('\n', stderr);
    if (st != PFX_SUCCESS) {
        fprintf(stderr, "prefixcl gemm-tune: %s\n", pfx_last_error(rt));
        pfx_runtime_destroy(&rt);
        return 1;
    }
    const pfx_gemm_tuning *t = &rep.tuning;
    printf("device   : %s\n", info->device_name);
    printf("tried    : %u candidates (%u rejected)\n", rep.tried, rep.rejected);
    printf("untuned  : %.2f GFLOP/s over the library's GEMM shapes\n", rep.untuned_gflops);
    printf("tuned    : %.2f GFLOP/s (%.2fx)\n", rep.tuned_gflops,
           rep.untuned_gflops > 0 ? rep.tuned_gflops / rep.untuned_gflops : 0.0);
    printf("Xgemm    :");
    for (int i = 0; i < PFX_XGEMM_PARAMS; i++)
        printf(" %s=%zu", pfx_gemm_param_name(false, (size_t)i), t->xgemm[i]);
    printf("\nDirect   :");
    for (int i = 0; i < PFX_XGEMM_DIRECT_PARAMS; i++)
        printf(" %s=%zu", pfx_gemm_param_name(true, (size_t)i), t->direct[i]);
    printf("\nthreshold: XGEMM_MIN_INDIRECT_SIZE=%zu\n", t->min_indirect);
    printf("stored   : %s\n", rep.path);
    pfx_runtime_destroy(&rt);
    return 0;
}
