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

static int usage(FILE *out)
{
    fprintf(out,
            "usage: prefixcl gemm-tune [--device SEL] [--time-limit S] [--seed N] [--quiet]\n"
            "  --device SEL      P:D, gpu, cpu or a name substring (default: $PREFIXCL_DEVICE,\n"
            "                    then the default device)\n"
            "  --time-limit S    seconds of search, 1..86400 (default 300); at least one\n"
            "                    candidate per kernel is timed whatever the limit\n"
            "  --seed N          order of the sampled candidates (default 1)\n"
            "  --quiet           only the result\n");
    return 2;
}

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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = true;
            continue;
        } else if (strcmp(a, "--device") && strcmp(a, "--time-limit") && strcmp(a, "--seed")) {
            fprintf(stderr, "prefixcl gemm-tune: unknown option '%s'\n\n", a);
            return usage(stderr);
        } else if (!v || !*v) {
            fprintf(stderr, "prefixcl gemm-tune: %s needs a value\n\n", a);
            return usage(stderr);
        } else if (!strcmp(a, "--device")) {
            device = v;
        } else if (!strcmp(a, "--time-limit") ? !cli_uint(v, 1, 86400, &limit)
                                              : !cli_uint(v, 0, UINT64_MAX, &seed)) {
            fprintf(stderr, "prefixcl gemm-tune: %s %s: not an integer in range\n\n", a, v);
            return usage(stderr);
        }
        i++;
    }
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
